"""The end of a run: loss curves, the exported model folder, its model card, and the upload to the Hub.

`export_model` writes `output_dir/final/`: weights (safetensors), config (with `auto_map` and our model code for
the hf-attention families), tokenizer, generation config, for translation the pipeline that
`pipeline("translation", model=folder, trust_remote_code=True)` loads, the model card `README.md` (filled from
`model_cards/TEMPLATE.md`), the loss plot, and for translation a cross-attention heatmap and the attention explorer
page (every layer and head of one test translation, one self-contained HTML file).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from string import Template

import matplotlib

matplotlib.use("Agg")  # files only; never a display
import matplotlib.pyplot as plt  # noqa: E402
import yaml  # noqa: E402
from huggingface_hub import HfApi  # noqa: E402

from hf_attention.commands.checkpoint_files import not_only_a_checkpoint  # noqa: E402
from hf_attention.commands.destinations import Output, check_destination  # noqa: E402
from hf_attention.conversion.to_hf import exportable_as  # noqa: E402
from hf_attention.inspection.heatmaps import attention_kinds  # noqa: E402
from hf_attention.modeling.pipelines import save_translation_pipeline  # noqa: E402
from hf_attention.modeling.placeholders import PROBLEM_KINDS, SYNTAXES, protect, tokenizer_protects  # noqa: E402
from training.objective import Objective  # noqa: E402

TEMPLATE = Path(__file__).resolve().parents[2] / "model_cards" / "TEMPLATE.md"
LOSS_PLOT = "loss_curve.png"
HEATMAP = "cross_attention.png"
EXPLORER = "attention.html"
# What the export folder holds, for the rule of the writing commands (hf_attention/commands/destinations.py): the run
# replaces a folder that holds an export and nothing else; a file of the user's there is refused, named.
TRAINING_EXPORT = Output(
    "a training run's export",
    f"a model checkpoint, its model card and the figures of the run ({LOSS_PLOT}, {HEATMAP}, {EXPLORER})",
    lambda folder: not_only_a_checkpoint(folder, also=(LOSS_PLOT, HEATMAP, EXPLORER)),
)
# How the refusals name what allows the run to replace an export.
REPLACED_BY = "A training run (resumed, or with --overwrite_output_dir)"


# ---------------------------------------------------------------------------------------------------- plots


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


@dataclass(frozen=True)
class ExportFigures:
    """What the export shows beside the model: the loss plot, and a text whose attention it draws."""

    loss_plot: str | Path | None = None
    heatmap_text: str | None = None  # the source of a test translation: cross-attention heatmap and explorer


def export_model(
    model, tokenizer, directory: str | Path, *, objective: Objective, card: dict, figures: ExportFigures | None = None
) -> Path:
    """Save the trained model as a self-contained Hugging Face folder with its model card (main process only).

    It follows the rule of the writing commands (hf_attention/commands/destinations.py): the folder is written beside
    `directory` (hidden) and swapped in only when complete, so a crash at any moment leaves the previous export in
    place; it replaces a folder that holds an export and nothing else, and refuses one holding a file of the user's
    (ValueError naming it; `check_export_folder` makes the same check before training).
    """
    destination = export_destination(directory)
    figures = figures or ExportFigures()
    destination.write(
        lambda folder: _write_export(model, tokenizer, folder, objective=objective, card=card, figures=figures)
    )
    return Path(directory)


def export_destination(directory: str | Path, output: Output = TRAINING_EXPORT):
    """`directory` checked as the destination of an export of the run (`output`: what is written there)."""
    return check_destination(directory, argument="export folder", output=output, overwrite=True, flag=REPLACED_BY)


def _write_export(
    model, tokenizer, directory: Path, *, objective: Objective, card: dict, figures: ExportFigures
) -> None:
    if objective.card.custom_pipeline:
        save_translation_pipeline(model, tokenizer, directory)
    else:
        model.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
    if figures.loss_plot is not None and Path(figures.loss_plot).is_file():
        shutil.copyfile(figures.loss_plot, directory / LOSS_PLOT)
    attention_figures = ""
    # cross-attention, which only encoder-decoders have, drawn by our visualisations of our models
    if objective.model.encoder_decoder and figures.heatmap_text and _is_ours(model):
        if "cross" in attention_kinds(model.config):
            attention_figures = _draw_attention(
                model, tokenizer, directory, figures.heatmap_text, title=card.get("model_name") or type(model).__name__
            )
        else:
            attention_figures = (
                "No attention heatmap: this model's decoder does not attend over the source; it reads one fixed "
                "vector, the encoder's final states.\n"
            )
    (directory / "README.md").write_text(render_card({**card, "extra_figures": attention_figures}))


def _is_ours(model) -> bool:
    return hasattr(model.config, "model_type") and model.config.model_type.startswith("hf_attention")


def _draw_attention(model, tokenizer, directory: Path, text: str, *, title: str) -> str:
    """The cross-attention heatmap and the attention explorer page of `text`; returns the card's lines for them."""
    from hf_attention.inspection.explorer import explore
    from hf_attention.inspection.heatmaps import plot_attention

    if tokenizer_protects(tokenizer):  # what the model reads: the source with its placeholders as sentinels
        text = protect(text)[0]
    plot_attention(
        model, tokenizer, text, kind="cross", head="mean", path=directory / HEATMAP, truncate=True
    )  # a long sample: its first tokens, not a refusal
    plt.close("all")
    # Every layer and head of the same sample in one page: one greedy translation and one forward pass.
    explore(model, tokenizer, text, path=directory / EXPLORER, truncate=True, title=title)
    return (
        f"![cross-attention, last layer, mean over heads]({HEATMAP})\n\n"
        f"Every layer and head of this example: [attention explorer]({EXPLORER}) (open the file in a "
        "browser; it needs no network).\n"
    )


# ------------------------------------------------------------------------------------------------ the card


@dataclass(frozen=True)
class RunReport:
    """What a run tells its model card."""

    model_name: str
    data_description: str
    datasets: list[str]
    language: list[str]
    license: str
    hyperparameters: dict
    results: dict  # metric name → value (validation_* and test_* losses, BLEU / chrF)
    samples: list[tuple[str, str, str]]  # (source, reference, model output) of test translations
    timing: str


def card_metadata(objective: Objective, report: RunReport) -> dict:
    """The YAML front matter of the card (Hub model-card metadata, with a model-index of the results)."""
    datasets = report.datasets
    # The model's own figures per split (the copy-the-source baselines and absent values are not the model's).
    metrics = {k: v for k, v in _scalars(report.results).items() if v is not None and "copy_" not in k}
    prefixes = {"validation": "validation_", "out-of-domain": "ood_"}
    splits = {
        "test": {k.removeprefix("test_"): v for k, v in metrics.items() if not k.startswith(tuple(prefixes.values()))},
        **{
            split: {k.removeprefix(p): v for k, v in metrics.items() if k.startswith(p)}
            for split, p in prefixes.items()
        },
    }
    return {
        "language": report.language,
        "license": report.license,
        "library_name": "transformers",
        "pipeline_tag": objective.card.pipeline_task,
        "tags": ["hf-attention", objective.name.replace("_", "-"), "from-scratch"],
        "datasets": datasets,
        "metrics": sorted(name for name in splits["test"] if name in ("bleu", "chrf", "perplexity")),
        "model-index": [
            {
                "name": report.model_name,
                "results": [
                    {
                        "task": {"type": objective.card.pipeline_task, "name": objective.card.task_name},
                        "dataset": {"type": datasets[0], "name": datasets[0], "split": split},
                        "metrics": [
                            {"type": name, "value": float(value), "name": f"{split} {name}"}
                            for name, value in sorted(values.items())
                        ],
                    }
                    for split, values in splits.items()
                    if values
                ],
            }
        ],
    }


def render_card(fields: dict) -> str:
    """Fill model_cards/TEMPLATE.md; `fields["metadata"]` (a dict) becomes the YAML front matter."""
    values = dict(fields)
    values["metadata"] = yaml.safe_dump(values["metadata"], sort_keys=False, allow_unicode=True).strip()
    return Template(TEMPLATE.read_text()).substitute(values)


def card_fields(objective: Objective, model, report: RunReport) -> dict:
    """Everything the template needs, from what the run knows."""
    config, ours = model.config, _is_ours(model)
    n_params = sum(p.numel() for p in model.parameters())
    limitations = (
        "Trained for minutes on a CPU from a small corpus: it knows the vocabulary and style of its "
        "training data only, makes frequent errors on anything else, and was not checked for bias or "
        "harmful output. Do not use it for decisions about people or in production."
    )
    return {
        "metadata": card_metadata(objective, report),
        "model_name": report.model_name,
        "summary": f"A {objective.name.replace('_', ' ')} model trained from scratch.",
        "architecture": f"{type(model).__name__} (`model_type: {config.model_type}`)",
        "num_parameters": f"{n_params:,}",
        "remote_code_note": ", and the model code for `trust_remote_code=True`" if ours else "",
        "export_note": export_note(model) if ours else "",
        "intended_use": objective.card.intended_use,
        "usage": _usage(objective, report.model_name, ours=ours),
        "training_data": report.data_description,
        "training_procedure": f"AdamW with linear warmup and cosine decay, token-normalised cross-entropy, "
        f"Accelerate. {report.timing}",
        "hyperparameters": "\n".join(f"| {k} | {_cell(v)} |" for k, v in report.hyperparameters.items()),
        "evaluation": _evaluation(report.results, report.samples),
        "placeholder_table": placeholder_table(report.results),
        "limitations": " ".join(filter(None, (limitations, objective.card.limitations))),
    }


def export_note(model) -> str:
    """The card's paragraph on the standard architecture this model is, or why it is none."""
    try:
        architecture = exportable_as(model)
    except ValueError as error:
        reason = str(error).removeprefix("to_hf: ").removesuffix(" Nothing was written.")
        return (
            "\nIts configuration has no standard equivalent, so loading it needs hf-attention (or "
            f"`trust_remote_code=True`): {reason}\n"
        )
    return (
        f"\nIt is also a standard `{architecture}` model: `hf-attention export --to {architecture} FOLDER NEW_FOLDER` "
        f"(or `--export_to {architecture}` when training) writes it as a {architecture} checkpoint that loads with "
        "transformers alone, without hf-attention or `trust_remote_code`.\n"
    )


def _usage(objective: Objective, model_name: str, *, ours: bool) -> str:
    """The card's code snippet: the model in its pipeline."""
    trust = ", trust_remote_code=True" if ours and objective.card.custom_pipeline else ""
    return "\n".join(
        [
            "from transformers import pipeline",
            *(["import hf_attention  # or trust_remote_code=True without the package"] if ours else []),
            "",
            f'pipe = pipeline("{objective.card.pipeline_task}", model="{model_name}"{trust})',
            f'print(pipe("{objective.card.example}"))',
        ]
    )


def _evaluation(results: dict, samples: list[tuple[str, str, str]]) -> str:
    """The card's evaluation section: the metrics table, and the sample translations if there are any."""
    lines = [
        "Measured at the end of training on the validation split (used only to watch the run) and on the "
        "held-out test split (never seen in training or model selection)"
        + (
            "; `ood_*` on an out-of-domain split: the catalogs of another source, none of whose strings is in the "
            "training data. `placeholders`: the percentage of the sources' format placeholders, tags and entities "
            "found in the output; `repeats`: the percentage of outputs that repeat a word or a pair of words right "
            "after itself; `copy_*`: what copying the English source unchanged scores."
            if "placeholders" in results
            else "."
        ),
        "",
        "| metric | value |",
        "|---|---|",
        *(f"| {k} | {'–' if v is None else format(v, '.4g')} |" for k, v in _scalars(results).items()),
    ]
    if samples:
        lines += [
            "",
            "Sample translations (test split, generated by this model):",
            "",
            "| source | reference | model |",
            "|---|---|---|",
        ]
        lines += [f"| {_cell(s)} | {_cell(r)} | {_cell(h)} |" for s, r, h in samples]
    return "\n".join(lines)


def _scalars(results: dict) -> dict:
    """The results that are one number (or None) each: not the counts per placeholder syntax."""
    return {k: v for k, v in results.items() if not isinstance(v, dict)}


# The results that count placeholders per syntax, and the column each is shown in.
_BY_SYNTAX = {"placeholders_by_syntax": "test", "ood_placeholders_by_syntax": "out of domain"}


def placeholder_table(results: dict) -> str:
    """The card's table of the placeholders kept per syntax (kept / total in the sources), in domain (test) and out
    of domain, with the translations whose sentinels went wrong when placeholders were protected; "" when the
    results count none (not a translation run)."""
    columns = {title: results[key] for key, title in _BY_SYNTAX.items() if isinstance(results.get(key), dict)}
    columns = {title: counts for title, counts in columns.items() if counts}  # a split whose sources hold some
    if not columns:
        return ""
    syntaxes = [name for name in SYNTAXES if any(name in counts for counts in columns.values())]
    lines = [
        "",
        "Placeholders kept, by syntax (found in the output as often as in the source / in the sources; printf "
        "`%s`, printf-named `%(name)s`, qt `%1`, format `{0}`, tag `<b>`, entity `&amp;`):",
        "",
        f"| syntax | {' | '.join(columns)} |",
        f"|---|{'---|' * len(columns)}",
    ]
    for name in syntaxes:
        cells = [f"{c[name]['kept']}/{c[name]['total']}" if name in c else "–" for c in columns.values()]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    if "sentinels_lost" in results:
        lines += [
            "",
            "The placeholders were protected: the model saw each as an indexed sentinel, and its output was restored "
            "from the source. Translations whose sentinels were lost / invented / duplicated: "
            + ", ".join(
                f"{title} {' / '.join(str(results.get(f'{prefix}sentinels_{kind}', '–')) for kind in PROBLEM_KINDS)}"
                for prefix, title in (("", "test"), ("ood_", "out of domain"))
                if f"{prefix}sentinels_lost" in results
            )
            + ".",
        ]
    return "\n".join(lines) + "\n"  # the template puts a blank line before and after


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


# ---------------------------------------------------------------------------------------------------- upload


def push_to_hub(directory: str | Path, repo_id: str, *, private: bool = False, api: HfApi | None = None) -> str:
    """Upload the export folder to the Hub model repo `repo_id` (created if missing); returns the repo id."""
    api = api or HfApi()
    repo = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
    repo_id = getattr(repo, "repo_id", repo_id)
    api.upload_folder(
        repo_id=repo_id,
        folder_path=str(directory),
        repo_type="model",
        commit_message="Upload model trained with hf-attention training.train",
    )
    return repo_id
