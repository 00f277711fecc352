"""Kill-and-resume campaign: `kill -9` a real training process at fixed points of a save, of the pruning and of
the export, and at random moments; resume with `--resume_from_checkpoint latest` until the run completes; compare
with a run that was never interrupted.

After every kill: `latest` names a complete checkpoint (once one was written) and a previous export is still whole.
At the end: the training losses and the exported weights equal the uninterrupted run's, bit for bit.

    python tests/kill_campaign.py --random 20        # every fixed point plus 20 random kills (a few minutes)

It is run by hand (minutes); `tests/test_training_faults.py` checks every crash point of a save and of the export
in-process as part of the suite.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: the repository's `training` package
    sys.path.insert(0, str(REPO))
MODEL = {
    "hidden_size": 32,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "hidden_dropout_prob": 0.1,
    "max_position_embeddings": 64,
}
TRAIN_ARGS = [
    "--objective",
    "causal_lm",
    "--max_topics",
    "40",
    "--block_size",
    "32",
    "--vocab_size",
    "350",
    "--max_train_samples",
    "128",
    "--max_eval_samples",
    "16",
    "--max_test_samples",
    "16",
    "--per_device_train_batch_size",
    "8",
    "--learning_rate",
    "3e-3",
    "--warmup_steps",
    "2",
    "--max_steps",
    "12",
    "--logging_steps",
    "1",
    "--eval_steps",
    "5",
    "--save_steps",
    "2",
    "--save_total_limit",
    "2",
    "--report_to",
    "none",
    "--disable_tqdm",
    "true",
    "--model_config",
    json.dumps(MODEL),
]

# Where a fixed-point kill strikes, on the `nth` occurrence: (what is intercepted, which call of it).
FIXED_POINTS = {
    "save: writing the optimizer state": "optimizer",  # the temporary folder holds the model only
    "save: before the folder is renamed": "promote",  # the temporary folder is complete
    "save: before latest is replaced": "latest",  # the new folder exists, latest names the old one
    "save: before pruning": "prune",  # latest names the new folder
    "pruning: right after a deletion": "prune_delete",
    "export: while writing": "export_write",
    "export: between the two renames": "export_swap",
    "resume: while rewriting metrics.jsonl": "resume_metrics",  # a resumed run drops the records after its step
}
# Points reached by a run resumed from an earlier checkpoint of a finished run (the folder already holds an export).
RESUMED_POINTS = ("export_write", "export_swap", "resume_metrics")


# --------------------------------------------------------------------------------------------- the child


def _die():
    os.kill(os.getpid(), signal.SIGKILL)


def install_kill_point(point: str, nth: int) -> None:
    """Patch the training modules so that the `nth` time `point` is reached, the process kills itself."""
    import accelerate.checkpointing as acc_checkpointing

    from training.finish import export
    from training.run import checkpoint

    seen = {"n": 0}

    def strike() -> None:
        seen["n"] += 1
        if seen["n"] == nth:
            _die()

    real_replace, real_rmtree = os.replace, shutil.rmtree
    if point == "optimizer":
        real_save = acc_checkpointing.save

        def save(obj, path, *args, **kwargs):
            if str(path).endswith("optimizer.bin"):
                strike()
            return real_save(obj, path, *args, **kwargs)

        acc_checkpointing.save = save
    elif point in ("promote", "latest"):

        def replace(source, target, *args, **kwargs):
            name = Path(target).name
            if (point == "promote" and name.startswith("step_")) or (point == "latest" and name == "latest"):
                strike()
            return real_replace(source, target, *args, **kwargs)

        os.replace = replace
    elif point == "prune":
        real_prune = checkpoint._prune

        def prune(*args, **kwargs):
            strike()
            return real_prune(*args, **kwargs)

        checkpoint._prune = prune
    elif point == "prune_delete":

        def rmtree(path, *args, **kwargs):
            real_rmtree(path, *args, **kwargs)
            if Path(path).name.startswith("step_"):
                strike()  # one old checkpoint gone, the next not yet

        shutil.rmtree = rmtree
    elif point == "export_write":
        real_write = export._write_export

        def write(model, tokenizer, directory, **kwargs):
            directory.mkdir(parents=True, exist_ok=True)
            model.save_pretrained(directory)  # half an export: weights, no tokenizer or card
            strike()
            return real_write(model, tokenizer, directory, **kwargs)

        export._write_export = write
    elif point == "resume_metrics":

        def replace(source, target, *args, **kwargs):
            if Path(target).name == "metrics.jsonl":
                strike()  # the rewritten file is complete but not yet in place
            return real_replace(source, target, *args, **kwargs)

        os.replace = replace
    elif point == "export_swap":
        from hf_attention.commands import destinations

        real_rename, real_exchange = os.rename, destinations._exchange

        def exchange(first, second):
            done = real_exchange(first, second)
            if done and Path(second).name == "final":
                strike()  # the new export in place, the old one under the hidden name, not yet removed
            return done

        def rename(source, target, *args, **kwargs):
            result = real_rename(source, target, *args, **kwargs)
            if Path(target).name.startswith(".final.") and Path(target).name.endswith(".previous"):
                strike()  # (no exchange on this system) the old export moved aside, the new one not yet in place
            return result

        destinations._exchange, os.rename = exchange, rename
    else:
        raise ValueError(f"unknown kill point {point!r}")


def child(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--point")
    parser.add_argument("--nth", type=int, default=1)
    known, train_argv = parser.parse_known_args(argv)
    if known.point:
        install_kill_point(known.point, known.nth)
    from training.train import main

    return main(train_argv)


# -------------------------------------------------------------------------------------------- the driver


def _train(
    output_dir: Path,
    *extra: str,
    point: str | None = None,
    nth: int = 1,
    kill_after: float | None = None,
    timeout: float = 600,
) -> int:
    """Run the training job in a fresh process; returns its exit code (-9 when killed)."""
    command = [sys.executable, str(Path(__file__).resolve()), "child"]
    if point:
        command += ["--point", point, "--nth", str(nth)]
    command += [*TRAIN_ARGS, "--output_dir", str(output_dir), *extra]
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "PYTHONWARNINGS": "ignore",
    }
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    if kill_after is not None:
        try:
            process.wait(timeout=kill_after)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
    _, stderr = process.communicate(timeout=timeout)
    if process.returncode not in (0, -signal.SIGKILL):
        raise RuntimeError(f"training failed (exit {process.returncode}):\n{stderr[-3000:]}")
    return process.returncode


def check_invariants(output_dir: Path, *, had_checkpoint: bool, had_export: bool) -> None:
    """What must hold after any kill: a usable `latest` and a whole export (if there was one before)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    import hf_attention  # noqa: F401

    logging.disable_progress_bar()
    from training.run.checkpoint import LATEST, checkpoint_root, is_checkpoint, resolve_checkpoint

    if had_checkpoint or (checkpoint_root(output_dir) / LATEST).exists():
        path = resolve_checkpoint(LATEST, output_dir)
        assert is_checkpoint(path), f"latest names an incomplete checkpoint: {path}"
    if had_export:
        exports = [output_dir / "final"] if (output_dir / "final").is_dir() else []
        exports += sorted(output_dir.glob(".final.*.previous"))  # (between the two renames of a swap, then put back)
        assert exports, "the previous export is gone"
        AutoModelForCausalLM.from_pretrained(exports[0])
        AutoTokenizer.from_pretrained(exports[0])


def _losses(output_dir: Path) -> tuple[list, list]:
    """Training losses per step, and the distinct (step, validation loss) points (a run killed while exporting has
    logged its final evaluation once before the kill and once after the resume)."""
    from training.run.metrics_log import read_metrics

    records = read_metrics(output_dir / "metrics.jsonl")
    return (
        [(m["step"], m["train/loss"]) for m in records if "train/loss" in m],
        sorted({(m["step"], m["eval/loss"]) for m in records if "eval/loss" in m}),
    )


def _weights(output_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(output_dir / "final" / "model.safetensors")


def _difference(output_dir: Path, reference: Path) -> str | None:
    """None when the run equals the reference; else what differs first (a step's loss, an eval point, tensors)."""
    import torch

    (train, evals), (train_ref, evals_ref) = _losses(output_dir), _losses(reference)
    problems = []
    if train != train_ref:
        first = next((a, b) for a, b in itertools.zip_longest(train, train_ref) if a != b)
        problems.append(f"train loss {first[0]} vs reference {first[1]}")
    if evals != evals_ref:
        problems.append(f"eval points {sorted(set(evals) ^ set(evals_ref))}")
    ours, theirs = _weights(output_dir), _weights(reference)
    different = sorted(k for k in ours.keys() & theirs.keys() if not torch.equal(ours[k], theirs[k]))
    if ours.keys() != theirs.keys() or different:
        problems.append(f"{len(different)} of {len(theirs)} tensors differ")
    return "; ".join(problems) or None


def _outcome(output_dir: Path, reference: Path) -> str:
    problem = _difference(output_dir, reference)
    return "identical" if problem is None else f"DIFFERENT ({problem})"


def _resume_until_done(
    output_dir: Path, *, kill_after: float | None = None, rng: random.Random | None = None, max_kills: int = 0
) -> int:
    """Resume until a run exits 0; with `kill_after`, kill resumed runs too (up to `max_kills`). Returns kills."""
    from training.run.checkpoint import LATEST, checkpoint_root

    kills = 0
    while True:
        has_latest = (checkpoint_root(output_dir) / LATEST).exists()
        extra = ("--resume_from_checkpoint", "latest") if has_latest else ("--overwrite_output_dir", "true")
        delay = rng.uniform(0.5, kill_after) if (kill_after and rng and kills < max_kills) else None
        code = _train(output_dir, *extra, kill_after=delay)
        if code == 0:
            return kills
        kills += 1
        check_invariants(output_dir, had_checkpoint=has_latest, had_export=False)


def fixed_point_kill(workdir: Path, reference: Path, label: str, point: str, nth: int) -> str:
    """Kill at `point`; for export points, in a folder that already holds a complete export (it must survive)."""
    output_dir = workdir / point
    shutil.rmtree(output_dir, ignore_errors=True)
    had_export = point in RESUMED_POINTS
    if had_export:  # a finished run, then a resume from an earlier checkpoint that dies on the way
        shutil.copytree(reference, output_dir)
        earlier = output_dir / "checkpoints" / "step_00010"
        code = _train(output_dir, "--resume_from_checkpoint", str(earlier), point=point, nth=nth)
    else:
        code = _train(output_dir, point=point, nth=nth)
    assert code == -signal.SIGKILL, f"{label}: the kill point was never reached (exit {code})"
    check_invariants(output_dir, had_checkpoint=nth > 1 or had_export, had_export=had_export)
    _resume_until_done(output_dir)
    check_invariants(output_dir, had_checkpoint=True, had_export=True)
    return _outcome(output_dir, reference)


def random_kills(workdir: Path, reference: Path, count: int, seed: int, run_seconds: float) -> list[str]:
    rng, outcomes = random.Random(seed), []
    for index in range(count):
        output_dir = workdir / f"random_{index}"
        shutil.rmtree(output_dir, ignore_errors=True)
        delay = rng.uniform(0.5, run_seconds)
        code = _train(output_dir, kill_after=delay)
        kills = int(code != 0)
        if code != 0:
            check_invariants(output_dir, had_checkpoint=False, had_export=False)
        kills += _resume_until_done(output_dir, kill_after=run_seconds, rng=rng, max_kills=1)
        outcomes.append(f"kill at {delay:.1f}s, {kills} kill(s): {_outcome(output_dir, reference)}")
    return outcomes


def campaign(workdir: Path, *, random_count: int, seed: int = 0, points: dict | None = None) -> dict:
    """Run the reference, every fixed point and `random_count` random kills; {case: outcome}."""
    reference = workdir / "reference"
    shutil.rmtree(reference, ignore_errors=True)
    started = time.time()
    assert _train(reference) == 0
    run_seconds = time.time() - started
    results = {}
    for label, point in (points or FIXED_POINTS).items():
        nth = 1 if point in RESUMED_POINTS else 3  # the third save: earlier checkpoints exist, pruning deletes
        results[label] = fixed_point_kill(workdir, reference, label, point, nth)
    for index, outcome in enumerate(random_kills(workdir, reference, random_count, seed, run_seconds)):
        results[f"random #{index + 1}"] = outcome
    return results


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["child"]:
        return child(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--random", type=int, default=10, help="random kills (each resumed until done)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="kill_campaign_"))
    results = campaign(workdir, random_count=args.random, seed=args.seed)
    for case, outcome in results.items():
        print(f"{case:45s} {outcome}")
    bad = [case for case, outcome in results.items() if "DIFFERENT" in outcome]
    print(f"{len(results) - len(bad)} passed, {len(bad)} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
