"""Our code at another git revision against our code now, in one process: did a change make training or decoding
slower?

    python -m benchmarks.before_after REV [--preset full|quick|tiny] [--rounds N] [--sections train,generate]
        [--families gpt2,llama,...] [--out FILE.json]    (also writes FILE.md, the table printed at the end)

    python -m benchmarks.before_after --render FILE.json    (the table again, without measuring)

The package as it was at REV (`git archive`) is imported under another name (its modules import each other
relatively, so the copy runs as it was), both versions are converted from the same Hugging Face reference model
(`from_hf`, same weights), and each row times the two side by side with `harness.interleave` (A B, B A, …): the
machine's load is shared by both sides of a round, so the per-round ratio before_time / now_time is what to read
(> 1: faster now), with the bootstrap 95% interval of its median. Outputs are compared before timing: a training
row's logits and a generation row's tokens must be identical, or the row is refused. `run.py`'s sections compare
us with Hugging Face's models; this compares us with ourselves, for refactors that must change nothing.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

import torch

from .generate import MODES, generate_call
from .harness import interleave, paired_ratio_spread
from .machine import machine_info
from .models import FAMILY_KIND, prompt_inputs, reference_model, training_batch
from .plan import PRESETS, Plan
from .train import TrainStep

ROOT = Path(__file__).resolve().parents[1]
TIMED_MODES = ("greedy", "beam4")


def package_at(revision: str, folder: Path):
    """hf_attention as it was at `revision`, imported as `hf_attention_at_<commit>` from a copy in `folder`."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", revision], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if commit.returncode:
        raise SystemExit(f"before_after: {revision!r} is not a revision of {ROOT}: {commit.stderr.strip()}")
    archive = subprocess.run(["git", "archive", revision, "hf_attention"], cwd=ROOT, capture_output=True, check=True)
    name = f"hf_attention_at_{commit.stdout.strip()}"
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    (folder / "hf_attention").rename(folder / name)
    # Its __init__ would register the old classes with transformers' Auto classes and pipelines, in place of ours,
    # for the rest of the process; the modules compared here need none of it.
    (folder / name / "__init__.py").write_text(
        '"""hf_attention at an earlier revision, without its registrations."""\n'
    )
    sys.path.insert(0, str(folder))
    return importlib.import_module(name)


def versions(old_package, family: str, plan: Plan):
    """(before, now): the same randomly initialised reference model converted by each version, in eval mode."""
    from hf_attention import from_hf

    try:  # the layout with a folder per role, then the flat one of earlier revisions
        old_from_hf = importlib.import_module(f"{old_package.__name__}.conversion.from_hf").from_hf
    except ModuleNotFoundError:
        old_from_hf = importlib.import_module(f"{old_package.__name__}.convert").from_hf
    torch.manual_seed(0)
    reference = reference_model(family, plan).eval()
    pair = old_from_hf(reference).eval(), from_hf(reference).eval()
    for model in pair if FAMILY_KIND[family] != "encoder" else ():
        config = model.generation_config
        config.forced_bos_token_id = config.forced_eos_token_id = None
        config.no_repeat_ngram_size = 0
    return pair


def ratio_row(times: dict, **labels) -> dict:
    spread = paired_ratio_spread(times["before"], times["now"])
    return {
        **labels,
        "before_over_now": round(spread["median"], 3),
        "ci95": [round(spread["ci95_low"], 3), round(spread["ci95_high"], 3)],
        "now_median_s": round(statistics.median(times["now"]), 4),
        "rounds": spread["rounds"],
    }


def train_rows(old_package, plan: Plan, families, rounds: int) -> list[dict]:
    """One fp32 optimiser step (forward, backward, fused AdamW) of each version, per family."""
    rows = []
    for family in families:
        before, now = versions(old_package, family, plan)
        batch = training_batch(family, plan, plan.batch, plan.seq, "cpu")
        with torch.no_grad():
            if not torch.equal(before(**batch).logits, now(**batch).logits):
                raise AssertionError(f"{family}: the two versions' logits differ; not timing them")
        steps = {
            name: TrainStep(model.train(), batch, "fp32", "cpu") for name, model in (("before", before), ("now", now))
        }
        times = interleave(steps, rounds=rounds, warmup=plan.warmup, device="cpu")
        rows.append(ratio_row(times, section="train", family=family))
        print(json.dumps(rows[-1]), flush=True)
    return rows


def generate_rows(old_package, plan: Plan, families, rounds: int) -> list[dict]:
    """generate() of `gen_new` tokens with a dynamic cache, greedy and 4 beams, per family and batch size."""
    rows = []
    for family in families:
        before, now = versions(old_package, family, plan)
        pair = (("before", before), ("now", now))
        for batch in plan.gen_batches:
            inputs = prompt_inputs(plan, batch, "cpu")
            for mode in TIMED_MODES:
                options = {"max_new_tokens": plan.gen_new, "min_new_tokens": plan.gen_new, **MODES[mode]}
                with torch.no_grad():
                    if not torch.equal(before.generate(**inputs, **options), now.generate(**inputs, **options)):
                        raise AssertionError(f"{family} batch {batch} {mode}: the versions generate other tokens")
                    calls = {name: generate_call(model.generate, inputs, options) for name, model in pair}
                    times = interleave(calls, rounds=rounds, warmup=plan.warmup, device="cpu")
                rows.append(ratio_row(times, section="generate", family=family, batch=batch, mode=mode))
                print(json.dumps(rows[-1]), flush=True)
    return rows


def markdown(rows: list[dict]) -> str:
    """The rows as a Markdown table: before time / time now per round, median and 95% interval."""
    lines = [
        "| section | family | batch | mode | before / now | 95% interval | now, median s |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        low, high = row["ci95"]
        lines.append(
            f"| {row['section']} | {row['family']} | {row.get('batch', '')} | {row.get('mode', '')} | "
            f"{row['before_over_now']:.3f} | {low:.3f}–{high:.3f} | {row['now_median_s']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revision", nargs="?", help="The git revision to compare with (a commit, tag or branch).")
    parser.add_argument("--render", default=None, help="Print the table of a results file written by --out.")
    parser.add_argument(
        "--preset",
        choices=[name for name in sorted(PRESETS) if not name.startswith("gpu")],
        default="full",
        help="Model dimensions (run.py's CPU presets: this tool times on the CPU).",
    )
    parser.add_argument("--rounds", type=int, default=24, help="Timed rounds per row (default 24).")
    parser.add_argument("--sections", default="train,generate", help="train, generate or both (default).")
    parser.add_argument("--families", default="gpt2,llama,bert,bart,t5", help="bert has no generate rows.")
    parser.add_argument("--out", default=None, help="Also write the rows and the machine to this JSON file.")
    options = parser.parse_args(argv)
    if options.render:
        print(markdown(json.loads(Path(options.render).read_text())["rows"]), end="")
        return 0
    if not options.revision:
        parser.error("give the revision to compare with (or --render FILE.json)")
    sections = options.sections.split(",")
    families = options.families.split(",")
    unknown = sorted(set(sections) - {"train", "generate"}) + sorted(
        set(families) - set(PRESETS["full"].train_families)
    )
    if unknown:
        parser.error(
            f"unknown section or family: {', '.join(unknown)} (sections: train, generate; families: "
            f"{', '.join(PRESETS['full'].train_families)})"
        )
    if options.rounds < 2:
        parser.error(f"--rounds {options.rounds}: at least 2 rounds (A B, B A) are needed for a paired ratio")
    if options.out:  # before minutes of measuring, not after
        try:
            Path(options.out).parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            parser.error(f"--out {options.out}: its folder cannot be created ({error})")
    plan = PRESETS[options.preset]
    with tempfile.TemporaryDirectory(prefix="before_after_") as folder:
        old_package = package_at(options.revision, Path(folder))
        rows = []
        if "train" in sections:
            rows += train_rows(old_package, plan, families, options.rounds)
        if "generate" in sections:
            rows += generate_rows(old_package, plan, [f for f in families if f != "bert"], options.rounds)
    if options.out:
        report = {"revision": options.revision, "preset": plan.name, "machine": machine_info("cpu"), "rows": rows}
        Path(options.out).write_text(json.dumps(report, indent=1) + "\n")
        Path(options.out).with_suffix(".md").write_text(markdown(rows))
    print(markdown(rows), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
