"""What every tutorial shares: its command-line flags, where figures go, and the numbers it reports.

Not part of the library and holds none of its maths: the tutorials import that from `hf_attention`.

    python docs/tutorials/03_nadaraya_watson.py                 # full run, figures to docs/figures/
    python docs/tutorials/03_nadaraya_watson.py --quick         # smaller sizes, figures to outputs/tutorial_figures/
    python docs/tutorials/03_nadaraya_watson.py --quick --figures /tmp/figs --results /tmp/numbers.json

Every figure is written as NAME.png together with NAME.npz, the arrays it draws: the tests regenerate a figure and
compare those arrays (not pixels) with the committed ones. `--results` writes the numbers a tutorial reasons about
to a JSON file, which is what the tests assert.
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
    parser.add_argument("--results", type=Path, default=None, help="write the reported numbers to this JSON file")
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
    """The numbers a tutorial reports: printed as they come, written as JSON at the end (`--results`)."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.values: dict = {"quick": bool(args.quick)}

    def __setitem__(self, key: str, value) -> None:
        self.values[key] = _plain(value)

    def __getitem__(self, key: str):
        return self.values[key]

    def save(self) -> None:
        if self.args.results is not None:
            self.args.results.parent.mkdir(parents=True, exist_ok=True)
            self.args.results.write_text(json.dumps(self.values, indent=2, ensure_ascii=False))
            print(f"numbers written to {self.args.results}")


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
# The English → German model of tutorials 06 and 09

MAIN_JOB_CONFIG = ROOT / "training" / "configs" / "translation_en_de.yaml"
# The tutorials' own short run trains the main job's recipe with sinusoidal positions: BART's learned table, which the
# main job trains, wrote empty outputs after the 150 quick steps of a tiny model, where fixed sinusoids already work.
TUTORIAL_RUN_CONFIG = ROOT / "training" / "configs" / "translation_en_de_sinusoidal.yaml"
MAIN_JOB_EXPORT = ROOT / "outputs" / "translation_en_de" / "final"  # what the main job leaves behind


TUTORIAL_RUN = ROOT / "outputs" / "tutorial_en_de"  # where the tutorials train their own short run
# The tutorials' own run: the main job's data (English → German UI strings of the machine's gettext catalogs) and
# recipe, with a smaller model, vocabulary and budget so that it trains in about a minute on 2 idle CPU cores. It
# reaches a test BLEU of about 10 on short strings: a weak translator, but its attention is already structured.
# The tutorials look at attention on plain strings, so the main job's markup augmentation (training pairs added again
# wrapped in tags) is off: in the quick run below it kept the cross-attention from sharpening within its 150 steps
# (mean entropy 0.96 of uniform with it, 0.80 without). Placeholder protection is off too: plain strings have no
# placeholder to protect, and the run stays the one these figures were measured on.
PLAIN_STRINGS = ["--markup_augmentation", "0", "--protect_placeholders", "false"]
TUTORIAL_TRAINING = [
    *PLAIN_STRINGS,
    "--max_steps",
    "400",
    "--warmup_steps",
    "50",
    "--learning_rate",
    "2e-3",
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
        help="an English→German hf-attention checkpoint (default: the main job's export if it exists, "
        "else a short training run of the tutorial's own)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help=f"where the tutorial's own run is trained or reused (default: {TUTORIAL_RUN}, with "
        "--quick: that name + '_quick')",
    )


def translation_checkpoint(args: argparse.Namespace) -> tuple[Path, str]:
    """The en→de checkpoint folder to use and a sentence saying where it comes from; trains one when needed."""
    import os
    import subprocess
    import time

    if args.model is not None:
        return args.model, f"the checkpoint given with --model ({args.model})"
    if not args.quick and (MAIN_JOB_EXPORT / "config.json").is_file():
        return MAIN_JOB_EXPORT, f"the main job's export ({MAIN_JOB_EXPORT.relative_to(ROOT)})"
    run = args.work_dir or (TUTORIAL_RUN.with_name(TUTORIAL_RUN.name + "_quick") if args.quick else TUTORIAL_RUN)
    final = run / "final"
    flags = QUICK_TRAINING if args.quick else TUTORIAL_TRAINING
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
        *flags,
    ]
    if (final / "config.json").is_file():
        return final, f"a short run this tutorial trained earlier ({final}); delete that folder to train again"
    print(
        "The main job's model (outputs/translation_en_de/final) is not here, so this tutorial trains a short run "
        "of its own first:\n  "
        + " ".join(command if "--model_config" not in command else command[:-1] + [repr(command[-1])]),
        flush=True,
    )
    started = time.time()
    subprocess.run(command, cwd=ROOT, check=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    return final, f"a short run trained just now by this tutorial in {time.time() - started:.0f} s ({final})"


def load_translation_model(args: argparse.Namespace):
    """(model, tokenizer, where it comes from) of `translation_checkpoint`, the model in eval mode."""
    from hf_attention.visualize import load_model_and_tokenizer

    folder, origin = translation_checkpoint(args)
    model, tokenizer = load_model_and_tokenizer(folder)
    print(f"Model: {origin}")
    return model.eval(), tokenizer, origin
