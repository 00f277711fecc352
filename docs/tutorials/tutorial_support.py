"""What every tutorial shares: its command-line flags, where figures go, and the numbers it reports.

Not part of the library and holds none of its maths: the tutorials import that from `hf_attention`.

    python docs/tutorials/03_nadaraya_watson.py                 # full run, figures to docs/figures/
    python docs/tutorials/03_nadaraya_watson.py --quick         # smaller sizes, figures to outputs/tutorial_figures/
    python docs/tutorials/03_nadaraya_watson.py --quick --figures /tmp/figs --results /tmp/numbers.json

Every figure is written as NAME.png together with NAME.npz, the arrays it draws: the tests regenerate a figure and
compare those arrays (not pixels) with the committed ones. The numbers a tutorial reasons about are written beside its
figures as NN_results.json (or to the file `--results` names): a full run's are committed in docs/figures, and a test
checks every number the tutorial's text states against them and the figure data.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; in Jupyter the inline backend still shows figures returned by a cell
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIGURES = ROOT / "docs" / "figures"  # the committed figures: what a full run draws
QUICK_FIGURES = ROOT / "outputs" / "tutorial_figures"  # a quick run's (git-ignored): never the committed ones
if str(ROOT) not in sys.path:  # `training/` and a checkout's `hf_attention/` when run as a plain script
    sys.path.insert(0, str(ROOT))


def parse_args(description: str, extra=None) -> argparse.Namespace:
    """The flags every tutorial takes (`extra(parser)` adds its own). Unknown arguments are ignored, so the same
    code runs as a script and inside a Jupyter kernel (which passes its own `-f kernel.json`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="small sizes: seconds instead of minutes (tests)")
    parser.add_argument(
        "--figures",
        type=Path,
        default=None,
        help="folder for the PNG figures and their data (default: docs/figures for a full run, which rewrites the "
        "committed figures; outputs/tutorial_figures, which git ignores, with --quick)",
    )
    parser.add_argument(
        "--results",
        type=Path,
        default=None,
        help="write the reported numbers to this JSON file (default: NN_results.json in the figures folder)",
    )
    if extra is not None:
        extra(parser)
    args, _ = parser.parse_known_args()
    if args.figures is None:
        args.figures = QUICK_FIGURES if args.quick else FIGURES
        where = args.figures.relative_to(ROOT)
        if args.quick:
            print(f"quick run: figures go to {where}/ (ignored by git); the committed ones in docs/figures stay")
        else:
            print(f"full run: the figures in {where}/ are rewritten (each is named below)")
    args.figures.mkdir(parents=True, exist_ok=True)
    return args


class Report:
    """The numbers tutorial NAME ("07") reports: printed as they come, written as JSON at the end, to `--results` or
    to NAME_results.json beside the figures."""

    def __init__(self, args: argparse.Namespace, name: str):
        self.args = args
        self.path = args.results if args.results is not None else Path(args.figures) / f"{name}_results.json"
        self.values: dict = {"quick": bool(args.quick)}

    def __setitem__(self, key: str, value) -> None:
        self.values[key] = _plain(value)

    def __getitem__(self, key: str):
        return self.values[key]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.values, indent=2, ensure_ascii=False) + "\n")
        print(f"numbers written to {self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}")


def _plain(value):
    """JSON-ready: numpy and torch scalars and arrays become Python numbers and lists."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def save_figure(figure, folder: Path, name: str, **arrays) -> Path:
    """Write `figure` to folder/NAME.png and the arrays it draws to folder/NAME.npz; close it; return the PNG path."""
    path = Path(folder) / f"{name}.png"
    figure.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(figure)
    data = {key: np.asarray(_plain(value)) for key, value in arrays.items()}
    np.savez_compressed(path.with_suffix(".npz"), **data)
    print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return path


def table(rows: list[tuple], header: tuple) -> str:
    """A plain-text table for printing."""
    cells = [tuple(str(c) for c in header)] + [tuple(str(c) for c in row) for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------------
# The English → German model of tutorials 02, 06 and 09

# The tutorials train their own model, never read the main job's (whatever that run left behind on this machine):
# the main job's data and recipe, with sinusoidal positions (BART's learned table, which the main job trains, wrote
# empty outputs after the 150 quick steps of a tiny model, where fixed sinusoids already work). The corpus is the
# gettext catalogs of the pinned PyPI wheels that config names, the same on every machine (no machine catalogs).
TUTORIAL_RUN_CONFIG = ROOT / "training" / "configs" / "translation_en_de_sinusoidal.yaml"
MAIN_JOB_CONFIG = ROOT / "training" / "configs" / "translation_en_de.yaml"  # the main job's recipe (tutorial 02)
TUTORIAL_RUN = ROOT / "outputs" / "tutorial_en_de"  # trained by the first full run, reused by every later one
QUICK_RUN = ROOT / "outputs" / "tutorial_en_de_quick"  # the same for --quick
# The full run: a smaller model, vocabulary and budget than the main job's, so that it trains in about two minutes on
# a CPU: 2,000 steps at the main job's learning rate reach a test BLEU of about 44 on strings of up to 40 characters.
# (At twice that rate, 400 steps left the encoder giving one vector at every position: the same output for every
# source, BLEU 0.)
# The tutorials look at attention on plain strings, so the main job's markup augmentation (training pairs added again
# wrapped in tags) is off: in the quick run it kept the cross-attention from sharpening within its 150 steps. So is
# placeholder protection: plain strings have no placeholder to protect.
PLAIN_STRINGS = ["--markup_augmentation", "0", "--protect_placeholders", "false"]
TUTORIAL_TRAINING = [
    *PLAIN_STRINGS,
    "--max_steps",
    "2000",
    "--warmup_steps",
    "150",
    "--learning_rate",
    "1e-3",
    "--vocab_size",
    "2000",
    "--max_chars",
    "40",
    "--max_source_length",
    "16",
    "--max_target_length",
    "20",
    "--eval_steps",
    "0",
    "--save_steps",
    "0",
    "--bleu_samples",
    "100",
    "--model_config",
    '{"hidden_size": 128, "intermediate_size": 512, "encoder_layers": 2, "decoder_layers": 2}',
]
# --quick: seconds, for the tests: a tiny model on a slice of the data; its output is not meant to be good.
QUICK_TRAINING = [
    *PLAIN_STRINGS,
    "--max_steps",
    "150",
    "--warmup_steps",
    "20",
    "--learning_rate",
    "3e-3",
    "--vocab_size",
    "600",
    "--max_chars",
    "30",
    "--max_source_length",
    "12",
    "--max_target_length",
    "16",
    "--max_train_samples",
    "4000",
    "--max_eval_samples",
    "200",
    "--max_test_samples",
    "200",
    "--eval_steps",
    "0",
    "--save_steps",
    "0",
    "--bleu_samples",
    "20",
    "--model_config",
    '{"hidden_size": 64, "intermediate_size": 128, "encoder_layers": 2, '
    '"decoder_layers": 2, "num_attention_heads": 4}',
]


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        type=Path,
        default=None,
        help="your own English→German hf-attention checkpoint (default: the tutorials' own run, trained on first use)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help=f"where the tutorials' own run is trained or reused (default: {TUTORIAL_RUN.relative_to(ROOT)}, with "
        f"--quick: {QUICK_RUN.relative_to(ROOT)})",
    )


def translation_checkpoint(args: argparse.Namespace) -> tuple[Path, str]:
    """The en→de checkpoint folder to use and a sentence saying where it comes from; trains the tutorials' own run
    the first time (a folder that already holds final/config.json is reused: delete it to train again)."""
    import os
    import subprocess
    import time

    if args.model is not None:
        return args.model, f"the checkpoint given with --model ({args.model})"
    run = args.work_dir or (QUICK_RUN if args.quick else TUTORIAL_RUN)
    final = run / "final"
    where = final.relative_to(ROOT) if final.is_relative_to(ROOT) else final
    origin = f"the tutorials' own {'quick ' if args.quick else ''}run ({where}; delete that folder to train again)"
    if (final / "config.json").is_file():
        return final, origin
    command = [
        sys.executable,
        "-m",
        "training.train",
        "--config",
        str(TUTORIAL_RUN_CONFIG),
        "--output_dir",
        str(run),
        "--overwrite_output_dir",
        "true",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        *(QUICK_TRAINING if args.quick else TUTORIAL_TRAINING),
    ]
    print(
        "Training the tutorials' own model first (once; later runs reuse it):\n  "
        + " ".join(command[:-1] + [repr(command[-1])]),
        flush=True,
    )
    started = time.time()
    subprocess.run(command, cwd=ROOT, check=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    print(f"trained in {time.time() - started:.0f} s")
    return final, origin


def load_translation_model(args: argparse.Namespace):
    """(model, tokenizer, where it comes from) of `translation_checkpoint`, the model in eval mode."""
    from hf_attention.inspection.heatmaps import load_model_and_tokenizer

    folder, origin = translation_checkpoint(args)
    model, tokenizer = load_model_and_tokenizer(folder)
    print(f"Model: {origin}")
    return model.eval(), tokenizer, origin


def translation_test_strings(args: argparse.Namespace) -> list[str]:
    """The English sources of the test split of the tutorials' own run (the quick run's with --quick): strings of the
    pinned corpus that run never trained on, split and capped exactly as `training.train` does."""
    from training.args import parse_args as training_args
    from training.data.splits import split_corpus
    from training.objectives import objective_for

    flags = QUICK_TRAINING if args.quick else TUTORIAL_TRAINING
    model_args, data_args, _, _ = training_args(["--config", str(TUTORIAL_RUN_CONFIG), *flags])
    objective = objective_for(model_args.objective)
    splits = split_corpus(objective, objective.data.load_corpus(data_args), data_args)
    return list(splits["test"][objective.data.text_columns[0]])
