"""The end of a run: loss curves, the exported model folder, its model card, and the upload to the Hub.

`export_model` writes `output_dir/final/`: weights (safetensors), config (with `auto_map` and our model code for
the hf-attention families), tokenizer, generation config, for translation the pipeline that
`pipeline("translation", model=folder, trust_remote_code=True)` loads, the model card `README.md` (filled from
`model_cards/TEMPLATE.md`), the loss plot, and for translation a cross-attention heatmap and the attention explorer
page (every layer and head of one test translation, one self-contained HTML file).
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from string import Template

import matplotlib

matplotlib.use("Agg")  # files only; never a display
import matplotlib.pyplot as plt  # noqa: E402
import yaml  # noqa: E402
from huggingface_hub import HfApi  # noqa: E402

from hf_attention.pipelines import save_translation_pipeline  # noqa: E402
from training.objectives import PIPELINE_TASK  # noqa: E402

TEMPLATE = Path(__file__).resolve().parents[1] / "model_cards" / "TEMPLATE.md"
LOSS_PLOT = "loss_curve.png"
HEATMAP = "cross_attention.png"
EXPLORER = "attention.html"


# ---------------------------------------------------------------------------------------------------- plots

def read_metrics(path: str | Path) -> list[dict]:
    """The records of a `metrics.jsonl` file ([] if there is none).

    A crash while a record was being appended leaves a torn last line: it is dropped with a warning. Anything else
    that is not a JSON object with an integer "step" is damage, reported with the file and line number.
    """
    path = Path(path)
    if not path.is_file():
        return []
    lines = [(number, line) for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             if line.strip()]
    records = []
    for index, (number, line) in enumerate(lines):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            if index == len(lines) - 1:
                warnings.warn(f"{path}, line {number}: dropped a record torn by an interrupted write.", stacklevel=2)
                break
            raise ValueError(f"{path}, line {number}: not a JSON record ({error}). Remove or repair that line.") \
                from error
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise ValueError(f"{path}, line {number}: expected a JSON object with an integer \"step\", got "
                             f"{line[:80]!r}. Remove or repair that line.")
        records.append(record)
    return records


def plot_losses(metrics: list[dict], path: str | Path) -> Path:
    """Train loss (every logging step) and validation loss (every evaluation) against the optimizer step."""
    train = [(m["step"], m["train/loss"]) for m in metrics if "train/loss" in m]
    evals = [(m["step"], m["eval/loss"]) for m in metrics if "eval/loss" in m]
    figure, axis = plt.subplots(figsize=(6, 4))
    for points, label, style in ((train, "train", "-"), (evals, "validation", "o-")):
        if points:
            axis.plot(*zip(*points, strict=True), style, label=label)
    axis.set_xlabel("optimizer step")
    axis.set_ylabel("cross-entropy per token")
    axis.set_title("Loss")
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


# ----------------------------------------------------------------------------------------------- the export

def export_model(model, tokenizer, directory: str | Path, *, objective: str, card: dict,
                 loss_plot: str | Path | None = None, heatmap_text: str | None = None) -> Path:
    """Save the trained model as a self-contained Hugging Face folder with its model card (main process only).

    The folder is written beside `directory` (`<name>.partial`) and swapped in only when complete, so a crash at
    any moment leaves the previous export in place (as `directory`, or as `<name>.previous` for the instant
    between the two renames, which the next export puts back).
    """
    final = Path(directory)
    partial, previous = _export_siblings(final)
    if previous.exists() and not final.exists():  # a crash between the two renames of the swap below
        os.replace(previous, final)
    shutil.rmtree(partial, ignore_errors=True)
    _write_export(model, tokenizer, partial, objective=objective, card=card, loss_plot=loss_plot,
                  heatmap_text=heatmap_text)
    shutil.rmtree(previous, ignore_errors=True)
    if final.exists():
        os.replace(final, previous)
    os.replace(partial, final)
    shutil.rmtree(previous, ignore_errors=True)
    return final


def _export_siblings(final: Path) -> tuple[Path, Path]:
    """Where an export is written before it is complete, and where the export it replaces waits during the swap."""
    return final.with_name(final.name + ".partial"), final.with_name(final.name + ".previous")


def _write_export(model, tokenizer, directory: Path, *, objective: str, card: dict, loss_plot, heatmap_text) -> None:
    if objective == "translation":
        save_translation_pipeline(model, tokenizer, directory)
    else:
        model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
    if loss_plot is not None and Path(loss_plot).is_file():
        shutil.copyfile(loss_plot, directory / LOSS_PLOT)
    figures = []
    if objective == "translation" and heatmap_text and hasattr(model.config, "model_type") \
            and model.config.model_type.startswith("hf_attention"):
        from hf_attention.explorer import explore
        from hf_attention.visualize import plot_attention

        plot_attention(model, tokenizer, heatmap_text, kind="cross", head="mean", path=directory / HEATMAP,
                       truncate=True)  # a long sample: its first tokens, not a refusal
        plt.close("all")
        # Every layer and head of the same sample in one page: one greedy translation and one forward pass.
        explore(model, tokenizer, heatmap_text, path=directory / EXPLORER, truncate=True,
                title=card.get("model_name") or type(model).__name__)
        figures.append(f"![cross-attention, last layer, mean over heads]({HEATMAP})\n\n"
                       f"Every layer and head of this example: [attention explorer]({EXPLORER}) (open the file in a "
                       "browser; it needs no network).\n")
    (directory / "README.md").write_text(render_card({**card, "extra_figures": "".join(figures)}))


def card_metadata(*, objective: str, language: list[str], license: str, datasets: list[str],
                  metrics: dict, model_name: str, tags: list[str]) -> dict:
    """The YAML front matter of the card (Hub model-card metadata, with a model-index of the results)."""
    task = {"causal_lm": ("text-generation", "Text generation"), "masked_lm": ("fill-mask", "Fill mask"),
            "translation": ("translation", "Translation")}[objective]
    splits = {"test": {k.removeprefix("test_"): v for k, v in metrics.items() if not k.startswith("validation_")},
              "validation": {k.removeprefix("validation_"): v for k, v in metrics.items()
                             if k.startswith("validation_")}}
    return {
        "language": language,
        "license": license,
        "library_name": "transformers",
        "pipeline_tag": task[0],
        "tags": tags,
        "datasets": datasets,
        "metrics": sorted(name for name in splits["test"] if name in ("bleu", "chrf", "perplexity")),
        "model-index": [{
            "name": model_name,
            "results": [{
                "task": {"type": task[0], "name": task[1]},
                "dataset": {"type": datasets[0], "name": datasets[0], "split": split},
                "metrics": [{"type": name, "value": float(value), "name": f"{split} {name}"}
                            for name, value in sorted(values.items())],
            } for split, values in splits.items() if values],
        }],
    }


def render_card(fields: dict) -> str:
    """Fill model_cards/TEMPLATE.md; `fields["metadata"]` (a dict) becomes the YAML front matter."""
    values = dict(fields)
    values["metadata"] = yaml.safe_dump(values["metadata"], sort_keys=False, allow_unicode=True).strip()
    return Template(TEMPLATE.read_text()).substitute(values)


def card_fields(*, objective: str, model, model_name: str, data_description: str, datasets: list[str],
                language: list[str], license: str, hyperparameters: dict, results: dict, samples: list[tuple],
                timing: str) -> dict:
    """Everything the template needs, from what the run knows."""
    config = model.config
    ours = config.model_type.startswith("hf_attention")
    n_params = sum(p.numel() for p in model.parameters())
    architecture = f"{type(model).__name__} (`model_type: {config.model_type}`)"
    task = PIPELINE_TASK[objective]
    example = {"translation": "Open the file", "causal_lm": "The with statement",
               "masked_lm": "The <mask> statement is used to wrap a block."}[objective]
    trust = ", trust_remote_code=True" if ours else ""
    usage = "\n".join([
        "from transformers import pipeline",
        *(["import hf_attention  # or trust_remote_code=True without the package"] if ours else []),
        f'pipe = pipeline("{task}", model="{model_name}"{trust if objective == "translation" else ""})',
        f'print(pipe("{example}"))',
    ])
    intended = {
        "translation": "Translating short English user-interface strings (menu items, buttons, messages) into the "
                       "target language; a small research / teaching model for comparing attention designs.",
        "causal_lm": "Continuing English technical prose in the style of the Python documentation; a small research "
                     "/ teaching model, not a general-purpose assistant.",
        "masked_lm": "Filling masked words in English technical prose and as a small encoder to fine-tune (e.g. "
                     "with `AutoModelForSequenceClassification`); research / teaching.",
    }[objective]
    evaluation = [f"| {k} | {v:.4g} |" for k, v in results.items()]
    lines = ["Measured at the end of training on the validation split (used only to watch the run) and on the "
             "held-out test split (never seen in training or model selection).", "",
             "| metric | value |", "|---|---|", *evaluation]
    if samples:
        lines += ["", "Sample translations (test split, generated by this model):", "",
                  "| source | reference | model |", "|---|---|---|"]
        lines += [f"| {_cell(s)} | {_cell(r)} | {_cell(h)} |" for s, r, h in samples]
    limitations = ("Trained for minutes on a CPU from a small corpus: it knows the vocabulary and style of its "
                   "training data only, makes frequent errors on anything else, and was not checked for bias or "
                   "harmful output. Do not use it for decisions about people or in production.")
    if objective == "translation":
        limitations += (" UI strings are short and often lack context, so ambiguous words (\"Open\", \"Close\") "
                        "are translated by frequency; long sentences are outside the training distribution.")
    return {
        "metadata": card_metadata(objective=objective, language=language, license=license, datasets=datasets,
                                  metrics=results, model_name=model_name,
                                  tags=["hf-attention", objective.replace("_", "-"), "from-scratch"]),
        "model_name": model_name,
        "summary": f"A {objective.replace('_', ' ')} model trained from scratch.",
        "architecture": architecture,
        "num_parameters": f"{n_params:,}",
        "remote_code_note": ", and the model code for `trust_remote_code=True`" if ours else "",
        "intended_use": intended,
        "usage": usage,
        "training_data": data_description,
        "training_procedure": f"AdamW with linear warmup and cosine decay, token-normalised cross-entropy, "
                              f"Accelerate. {timing}",
        "hyperparameters": "\n".join(f"| {k} | {_cell(v)} |" for k, v in hyperparameters.items()),
        "evaluation": "\n".join(lines),
        "limitations": limitations,
    }


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


# ---------------------------------------------------------------------------------------------------- upload

def push_to_hub(directory: str | Path, repo_id: str, *, private: bool = False, api: HfApi | None = None) -> str:
    """Upload the export folder to the Hub model repo `repo_id` (created if missing); returns the repo id."""
    api = api or HfApi()
    repo = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    repo_id = getattr(repo, "repo_id", repo_id)
    api.upload_folder(repo_id=repo_id, folder_path=str(directory), repo_type="model",
                      commit_message="Upload model trained with hf-attention training.train")
    return repo_id
