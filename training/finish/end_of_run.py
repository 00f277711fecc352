"""The end of a run: the final validation and test evaluation on every process, then on the main process the loss
plot, the generation defaults, the model card, the export (training/finish/export.py) and the optional upload."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

from hf_attention.conversion.to_hf import export_checkpoint, exportable_as
from training.data.catalogs import package_catalogs, parse_pin
from training.data.splits import corpus_checksum
from training.data.tokenizer import uses_sentinels
from training.finish.evaluate import GenerationSettings, evaluate_loss
from training.finish.export import (
    LOSS_PLOT,
    ExportFigures,
    RunReport,
    card_fields,
    export_model,
    plot_losses,
    push_to_hub,
)
from training.run.metrics_log import METRICS_FILE, read_metrics
from training.run.models import acting_model_config
from training.run.run_state import TrainingRun
from training.run.sharding import plain_copy


class Durations(NamedTuple):
    train: float  # seconds of the training loop
    total: float  # seconds of the whole run: data, tokenizer, training, evaluation


def finish(run: TrainingRun, *, train_seconds: float) -> dict:
    """Evaluate, export and report; returns the results (also printed and written to the model card)."""
    # Evaluation, generation and the export use the gathered weights of a sharded model.
    model = plain_copy(run.model, run.model_class) if run.sharded else run.model
    if run.average is not None:  # checkpoint averaging: evaluate and export the mean of the last steps' weights
        run.average.copy_into(run.accelerator.unwrap_model(model))
        run.accelerator.print(f"Evaluating and exporting the mean of the last {run.average.steps} steps' weights.")
    results, samples = _final_evaluation(run, model)
    durations = Durations(train=train_seconds, total=time.time() - run.started)
    if run.accelerator.is_main_process:
        final = _export(run, model, results, samples, durations)
        _print_results(run, results, samples, final, durations)
    run.accelerator.wait_for_everyone()
    return {
        **results,
        "steps": run.progress.step,
        "seconds": round(durations.total, 1),
        "train_seconds": round(durations.train, 1),
    }


def _final_evaluation(run: TrainingRun, model) -> tuple[dict, list[tuple[str, str, str]]]:
    """Validation and test loss on the whole splits, BLEU / chrF of test translations; the results and up to five
    (source, reference, translation) samples."""
    accelerator, seed, step = run.accelerator, run.args.train.seed, run.progress.step
    validation = evaluate_loss(accelerator, model, run.loaders.eval, run.objective, seed=seed)
    run.logger.log(step, {f"eval/{k}": v for k, v in validation.items()})
    test = evaluate_loss(accelerator, model, run.loaders.test, run.objective, seed=seed)
    results = {
        "validation_loss": round(validation["loss"], 4),
        "validation_perplexity": round(validation["perplexity"], 2),
        "test_loss": round(test["loss"], 4),
        "test_perplexity": round(test["perplexity"], 2),
    }
    samples = []
    if run.objective.evaluation.scores_translations:
        score_outputs = run.objective.evaluation.score_outputs
        settings = GenerationSettings.from_args(run.args.data, run.args.train)
        limit = run.args.train.bleu_samples
        scores, triples = score_outputs(accelerator, model, run.tokenizer, run.splits["test"], settings, limit=limit)
        results.update(scores)
        samples = triples[:5]
        if "ood" in run.splits:  # catalogs of another source, never trained on
            scores, _ = score_outputs(accelerator, model, run.tokenizer, run.splits["ood"], settings)
            results.update({f"ood_{name}": value for name, value in scores.items()})
    run.logger.log(
        step, {f"test/{k.removeprefix('test_')}": v for k, v in results.items() if not k.startswith("validation_")}
    )
    return results, samples


def _export(run: TrainingRun, model, results: dict, samples: list[tuple[str, str, str]], durations: Durations) -> Path:
    """The loss plot, then the model folder with its card (and the upload); returns the folder."""
    output_dir, train_args = run.output_dir, run.args.train
    plot = plot_losses(read_metrics(output_dir / METRICS_FILE), output_dir / LOSS_PLOT)
    unwrapped = run.accelerator.unwrap_model(model, keep_torch_compile=False)
    _set_generation_defaults(run, unwrapped)
    report = RunReport(
        model_name=train_args.hub_model_id or output_dir.name,
        data_description=_describe_data(run),
        datasets=[run.args.data.dataset or run.objective.card.default_dataset],
        language=run.objective.languages(run.args.data),
        license=train_args.license,
        hyperparameters=_hyperparameters(run),
        results=results,
        samples=samples,
        timing=_timing(run, durations),
    )
    final = export_model(
        unwrapped,
        run.tokenizer,
        output_dir / "final",
        objective=run.objective,
        card=card_fields(run.objective, unwrapped, report),
        figures=ExportFigures(loss_plot=plot, heatmap_text=samples[0][0] if samples else None),
    )
    if train_args.export_to:
        architecture = train_args.export_to
        if architecture == "auto":
            architecture = exportable_as(unwrapped)
        standard = output_dir / f"final-{architecture}"
        export_checkpoint(str(final), standard, to=architecture, overwrite=True)
        run.accelerator.print(f"Wrote the standard {architecture} checkpoint {standard}")
    if train_args.push_to_hub:
        push_to_hub(final, train_args.hub_model_id, private=train_args.hub_private)
        run.accelerator.print(f"Uploaded {final} to https://huggingface.co/{train_args.hub_model_id}")
    return final


def _set_generation_defaults(run: TrainingRun, model) -> None:
    """What `generate()` and pipelines use by default when they load the export."""
    config = getattr(model, "generation_config", None)
    if config is None:  # encoders do not generate
        return
    config.pad_token_id, config.eos_token_id = run.tokenizer.pad_token_id, run.tokenizer.eos_token_id
    if run.objective.evaluation.set_generation_defaults is not None:
        run.objective.evaluation.set_generation_defaults(
            config, model, run.tokenizer, GenerationSettings.from_args(run.args.data, run.args.train)
        )


def _describe_data(run: TrainingRun) -> str:
    data_args = run.args.data
    sizes = ", ".join(f"{name} {len(split)}" for name, split in run.splits.items())
    if data_args.dataset:
        source = f"`{data_args.dataset}`"
    else:
        source = run.objective.card.default_corpus_description.format(**asdict(data_args))
    packages = data_args.catalog_packages if not data_args.dataset else []
    if packages:
        source += f", read from the `{data_args.target_lang}` catalogs inside these pinned PyPI wheels: "
        source += _packages(run, packages)
    if data_args.system_catalogs and not data_args.dataset:
        source += (
            f"; {'and ' if packages else ''}from the catalogs installed on the training machine "
            "(`/usr/share/locale`), which differ from machine to machine"
        )
    checksum = corpus_checksum(run.splits, run.objective.data.text_columns)
    text = (
        f"{source}. Split by a stable hash of the (source) text, so no string is in two splits: rows {sizes}; "
        f"SHA-256 of the rows of every split: `{checksum}` (a run on another machine read the same data exactly "
        "when it prints the same)."
    )
    if data_args.markup_augmentation and run.objective.data.augment_train is not None:
        text += (
            f" The training rows include {data_args.markup_augmentation:g} × the training pairs again with the same "
            "HTML tags or format placeholders put into both sides (markup augmentation; none of them has a source of "
            "another split)."
        )
    text += " A byte-level BPE tokenizer was trained on the training split."
    if uses_sentinels(run.objective, data_args):
        text += (
            " Placeholders were protected: in every pair, each format placeholder, tag and entity was replaced by an "
            "indexed sentinel (the target's by that of the same source occurrence), which the tokenizer holds as a "
            "token of its own; translations are restored from their source before they are scored."
        )
    if "ood" in run.splits:
        text += (
            f" The out-of-domain split (`ood`) is the catalogs of "
            f"{_packages(run, data_args.heldout_catalog_packages)}, never trained on; of their pairs, those whose "
            "source is not in the corpus above."
        )
    return text


def _packages(run: TrainingRun, requirements: list[str]) -> str:
    """Each pinned package as "name version (licence; N entries)", the licence as its wheel's metadata states it."""
    described = []
    for requirement in requirements:
        found = package_catalogs(requirement, run.args.data.target_lang)
        name, version = parse_pin(requirement)
        described.append(f"{name} {version} ({found.licence}; {len(found.pairs)} entries)")
    return ", ".join(described)


def _hyperparameters(run: TrainingRun) -> dict:
    train_args = run.args.train
    return {
        "objective": run.objective.name,
        "steps": run.progress.step,
        "processes": run.accelerator.num_processes,
        "per-device batch": (
            f"≤{train_args.max_tokens_per_batch} tokens"
            if train_args.max_tokens_per_batch
            else train_args.per_device_train_batch_size
        ),
        "gradient accumulation": train_args.gradient_accumulation_steps,
        "learning rate": train_args.learning_rate,
        "warmup steps": train_args.warmup_steps,
        "schedule": "linear warmup, cosine decay",
        "weight decay": train_args.weight_decay,
        "AdamW betas": (train_args.adam_beta1, train_args.adam_beta2),
        "max grad norm": train_args.max_grad_norm,
        "weights": (
            f"mean of the last {run.average.steps} steps' (checkpoint averaging)" if run.average else "the last step's"
        ),
        **_generation(run),
        "mixed precision": train_args.mixed_precision,
        "vocabulary": len(run.tokenizer),
        "seed": train_args.seed,
        "model config": json.dumps(acting_model_config(run.objective, run.args.model_config), sort_keys=True),
    }


def _generation(run: TrainingRun) -> dict:
    """How the export generates by default; nothing for a model that does not generate (a masked LM)."""
    if not run.objective.writes_left_to_right:
        return {}
    beams, penalty = run.args.train.generation_num_beams, run.args.train.generation_length_penalty
    return {"generation": f"{beams} beams, length penalty {penalty}, early stopping" if beams > 1 else "greedy"}


def _timing(run: TrainingRun, durations: Durations) -> str:
    return (
        f"{run.progress.step} steps on {run.accelerator.num_processes} process(es) "
        f"({run.accelerator.device.type}); training took {durations.train / 60:.1f} min, the whole run "
        f"(data, tokenizer, training, evaluation) {durations.total / 60:.1f} min."
    )


def _print_results(
    run: TrainingRun, results: dict, samples: list[tuple[str, str, str]], final: Path, durations: Durations
) -> None:
    report = ", ".join(f"{k} {v}" for k, v in results.items())
    print(
        f"Finished {run.progress.step} steps in {durations.total / 60:.1f} min (training {durations.train:.0f}s). "
        f"Results: {report}. Exported to {final}."
    )
    for source, reference, hypothesis in samples:
        print(f"  EN:  {source}\n  REF: {reference}\n  OUT: {hypothesis}\n")
