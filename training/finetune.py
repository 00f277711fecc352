"""Fine-tuning through 🤗 `Trainer` / `Seq2SeqTrainer`: language identification (default) and translation.

    python -m training.finetune --config training/configs/finetune_language_id.yaml
    python -m training.finetune --config training/configs/finetune_language_id.yaml \\
        --model_name_or_path runs/mlm/final --lora r=8,alpha=16 --output_dir runs/lid_lora
    python -m training.finetune --task translation --model_name_or_path outputs/translation_en_de/final \\
        --output_dir runs/ft_en_de --max_steps 500 --predict_with_generate true

Tasks:

Tasks are the objectives whose `entry_points` include training.finetune (training/objectives/): their modules say
what data, model, collator and metrics each uses, for this entry point and for training.train alike, and the small
model this entry point builds from scratch (`ModelSpec.finetune_config`).

- `language_id` (training/objectives/language_id.py): which language a UI string from the gettext catalogs of
  pinned PyPI wheels is in, with `AutoModelForSequenceClassification`; test accuracy and macro-F1.
- `translation` (training/objectives/translation.py): English → `target_lang` UI strings with
  `AutoModelForSeq2SeqLM` and `Seq2SeqTrainer`; test BLEU / chrF on generated translations.

What this entry point adds to the objective: its arguments (`FinetuneArguments` mapped onto the shared
`DataArguments`), a salted hash split capped after a shuffle, LoRA, and 🤗 Trainer as the loop.

The model starts from a pretrained hf_attention checkpoint folder (`--model_name_or_path DIR`, e.g. the masked-LM
or translation export of `training.train`; its tokenizer is reused when the folder has one) or from scratch (a small
config: `model_config` in the YAML file, or `--model_config '{"hidden_size": 256}'`).
`--lora r=8,alpha=16,dropout=0.05` wraps the model with PEFT LoRA on q_proj/k_proj/v_proj/o_proj (plus
`modules_to_save=["classifier"]` for classification); the adapter is saved to `output_dir/adapter` and the merged
model to `output_dir`.

Arguments are `FinetuneArguments` plus 🤗 `TrainingArguments` (`Seq2SeqTrainingArguments` for translation), read by
`HfArgumentParser` from an optional YAML file (`--config`) whose values the command-line flags override. On a
machine without a GPU `use_cpu=True` is set automatically (so `torchrun` / `accelerate launch --multi_gpu` on CPU
trains with DDP over gloo instead of running independent copies).
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from datasets import DatasetDict
from transformers import (
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    Trainer,
    TrainingArguments,
    set_seed,
)

import hf_attention  # noqa: F401  (registers the hf_attention model types with the Auto classes)
from hf_attention.modeling.placeholders import protect, tokenizer_protects
from training.args import DataArguments
from training.argument_checks import at_least, check_checkpoint_folder, check_fields
from training.config_file import parse_into, read_config, with_model_config_flag
from training.data.corpora import DEFAULT_LANGUAGES
from training.data.splits import corpus_checksum, split_corpus
from training.data.tokenizer import make_tokenizer, saved_tokenizer
from training.objective import FINETUNE, Objective
from training.objectives import DEFAULTS, OBJECTIVES, names, objective_for
from training.run.models import build_model, pretrained_model

logger = logging.getLogger("training.finetune")

TASKS = tuple(names(FINETUNE))
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass
class FinetuneArguments:
    """The task, the starting model, the data and LoRA; everything else is a 🤗 (Seq2Seq)TrainingArguments field."""

    task: str = field(default=DEFAULTS[FINETUNE], metadata={"help": f"One of {', '.join(TASKS)}."})
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "An hf_attention checkpoint folder to start from; None: a new small model."}
    )
    model_config: str | None = field(
        default=None,
        metadata={
            "help": "JSON object of model-config fields for a new model (over the YAML "
            "model_config mapping and the built-in small defaults)."
        },
    )
    vocab_size: int = field(default=4000, metadata={"help": "BPE vocabulary when a tokenizer is trained here."})
    languages: str = field(
        default=",".join(DEFAULT_LANGUAGES),
        metadata={"help": "language_id: comma-separated gettext language codes (label order)."},
    )
    max_per_language: int | None = field(default=3000, metadata={"help": "language_id: strings per language."})
    min_chars: int = field(default=10, metadata={"help": "language_id: shortest string kept."})
    max_chars: int = field(default=200, metadata={"help": "Longest string (or source/target) kept, in characters."})
    max_catalogs: int | None = field(
        default=None,
        metadata={
            "help": "Read only this many catalogs (language_id: of the pinned packages; translation: per language)."
        },
    )
    system_catalogs: bool = field(
        default=False,
        metadata={"help": "translation: read this machine's gettext catalogs (they differ between machines)."},
    )
    catalog_packages: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Pinned PyPI wheels (name==version) whose gettext catalogs are read: translation's pairs, or "
            "language_id's strings (default: the wheels training/objectives/language_id.py pins)."
        },
    )
    max_length: int = field(default=64, metadata={"help": "language_id: longest input in tokens."})
    target_lang: str = field(default="de", metadata={"help": "translation: target language (English source)."})
    max_source_length: int = field(default=32, metadata={"help": "translation: longest source in tokens."})
    max_target_length: int = field(default=40, metadata={"help": "translation: longest target in tokens."})
    split_salt: str = field(
        default="finetune",
        metadata={
            "help": "Salt of the hash split. Not empty: language_id_corpus samples max_per_language strings by "
            "the unsalted hash, so an unsalted split would put every sampled string in train."
        },
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep the first N training rows."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep the first N validation rows."})
    max_test_samples: int | None = field(default=None, metadata={"help": "Keep the first N test rows."})
    lora: str | None = field(
        default=None, metadata={"help": "PEFT LoRA, e.g. 'r=8,alpha=16,dropout=0.05' (targets q/k/v/o_proj)."}
    )
    num_threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads (None: torch default)."})

    def data_arguments(self) -> DataArguments:
        """The shared data arguments that the objective's functions read."""
        return DataArguments(
            languages=self.languages,
            max_per_language=self.max_per_language,
            min_chars=self.min_chars,
            max_chars=self.max_chars,
            max_catalogs=self.max_catalogs,
            system_catalogs=self.system_catalogs,
            catalog_packages=list(self.catalog_packages),
            max_length=self.max_length,
            target_lang=self.target_lang,
            max_source_length=self.max_source_length,
            max_target_length=self.max_target_length,
            max_train_samples=self.max_train_samples,
            max_eval_samples=self.max_eval_samples,
            max_test_samples=self.max_test_samples,
        )

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task={self.task!r} is not supported; allowed values are {', '.join(map(repr, TASKS))}.")
        if self.lora:
            parse_lora(self.lora)
        if self.model_name_or_path:
            check_checkpoint_folder(self.model_name_or_path, "--model_name_or_path")
        check_fields(
            self,
            {
                "vocab_size": at_least(1),
                "max_per_language": at_least(1, optional=True),
                "min_chars": at_least(0),
                "max_chars": at_least(1),
                "max_catalogs": at_least(1, optional=True),
                "max_length": at_least(3),
                "max_source_length": at_least(1),
                "max_target_length": at_least(2),
                "max_train_samples": at_least(1, optional=True),
                "max_eval_samples": at_least(1, optional=True),
                "max_test_samples": at_least(1, optional=True),
                "num_threads": at_least(1, optional=True),
            },
        )
        check_arguments = objective_for(self.task, FINETUNE).data.check_arguments
        if check_arguments is not None:  # what the objective cannot train with (one language to identify)
            check_arguments(self.data_arguments())


# ------------------------------------------------------------------------------------------------ arguments


def parse_args(argv: list[str] | None = None):
    """`--config file.yaml` (optional) + command-line overrides → (FinetuneArguments, (Seq2Seq)TrainingArguments,
    model_config dict).

    The YAML file holds fields of both dataclasses at its top level, plus an optional `model_config:` mapping.
    `use_cpu` defaults to True when CUDA is not available. `output_dir` defaults to runs/finetune_<task>.
    """
    config = read_config(argv)
    task = config.values.get("task", DEFAULTS[FINETUNE])
    if "--task" in config.argv and config.argv.index("--task") + 1 < len(config.argv):
        task = config.argv[config.argv.index("--task") + 1]
    seq2seq = task in OBJECTIVES and OBJECTIVES[task].model.encoder_decoder
    args_class = Seq2SeqTrainingArguments if seq2seq else TrainingArguments
    defaults = {
        "output_dir": f"runs/finetune_{task}",
        "use_cpu": not torch.cuda.is_available(),
        "report_to": "none",
        "save_strategy": "no",
    }
    ft_args, training_args = parse_into((FinetuneArguments, args_class), config, defaults=defaults)
    return ft_args, training_args, with_model_config_flag(config.model_config, ft_args.model_config)


def parse_lora(spec: str) -> dict:
    """'r=8,alpha=16,dropout=0.05,targets=q_proj+v_proj' → LoraConfig keyword arguments."""
    names = {
        "r": ("r", int),
        "alpha": ("lora_alpha", float),
        "lora_alpha": ("lora_alpha", float),
        "dropout": ("lora_dropout", float),
        "lora_dropout": ("lora_dropout", float),
        "targets": ("target_modules", lambda v: v.split("+")),
        "target_modules": ("target_modules", lambda v: v.split("+")),
    }
    kwargs = {"r": 8, "lora_alpha": 16.0, "lora_dropout": 0.05, "target_modules": list(LORA_TARGETS)}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        key, _, value = item.partition("=")
        if key not in names or not value:
            raise ValueError(f"Bad --lora item {item!r}; use key=value with keys {sorted(names)}.")
        name, convert = names[key]
        try:
            kwargs[name] = convert(value)
        except ValueError as error:
            raise ValueError(f"Bad --lora item {item!r}: {key} must be {_LORA_ALLOWED[name]}.") from error
    checks = {
        "r": kwargs["r"] >= 1,
        "lora_alpha": kwargs["lora_alpha"] > 0,
        "lora_dropout": 0 <= kwargs["lora_dropout"] < 1,
        "target_modules": all(kwargs["target_modules"]),
    }
    for name, ok in checks.items():
        if not ok:
            raise ValueError(f"Bad --lora value {name}={kwargs[name]!r}: it must be {_LORA_ALLOWED[name]}.")
    return kwargs


_LORA_ALLOWED = {
    "r": "a whole number >= 1",
    "lora_alpha": "a number > 0",
    "lora_dropout": "a number in [0, 1)",
    "target_modules": "module names joined by '+', e.g. q_proj+v_proj",
}


def apply_lora(model, spec: str, *, task: str):
    """Wrap `model` with a PEFT LoRA adapter described by `spec` (see `parse_lora`), of the objective's task type."""
    from peft import LoraConfig, TaskType, get_peft_model

    spec_of_model = objective_for(task, FINETUNE).model
    config = LoraConfig(
        task_type=TaskType[spec_of_model.peft_task_type],
        modules_to_save=list(spec_of_model.modules_to_save) or None,
        **parse_lora(spec),
    )
    return get_peft_model(model, config)


# --------------------------------------------------------------------------------------------------- the run


def finetune(ft_args: FinetuneArguments, training_args, model_config: dict) -> dict:
    """Fine-tune (or train) the model of objective `ft_args.task` with 🤗 Trainer; returns the test metrics."""
    objective = objective_for(ft_args.task, FINETUNE)
    data_args = ft_args.data_arguments()
    corpus = objective.data.load_corpus(data_args)
    splits = split_corpus(
        objective, corpus, data_args, salt=ft_args.split_salt, shuffle_before_cap=True, require_every_split=False
    )
    tokenizer = saved_tokenizer(ft_args.model_name_or_path)
    if tokenizer is None:
        tokenizer = make_tokenizer(objective, splits["train"], data_args, vocab_size=ft_args.vocab_size)
    data_fields = objective.model.config_from_data(splits) if objective.model.config_from_data else {}
    model = _model(objective, ft_args, model_config, tokenizer, data_fields)
    features = DatasetDict(
        {name: objective.data.featurize(split, tokenizer, data_args) for name, split in splits.items()}
    )
    if isinstance(training_args, Seq2SeqTrainingArguments) and training_args.generation_max_length is None:
        training_args.generation_max_length = ft_args.max_target_length + 1
    generates = not objective.model.encoder_decoder or training_args.predict_with_generate
    results_fields = objective.evaluation.results_fields
    described = results_fields(data_args, data_fields) if results_fields is not None else {}
    return _train(
        objective,
        model,
        tokenizer,
        features,
        ft_args=ft_args,
        training_args=training_args,
        collator=objective.data.make_collator(tokenizer, model, data_args),
        compute_metrics=trainer_metrics(objective, tokenizer, splits, features, training_args) if generates else None,
        extra={
            **described,
            "rows": {name: len(split) for name, split in splits.items()},
            # The machine's catalogs differ between machines: the checksum says whether two runs read the same rows.
            "corpus_sha256": corpus_checksum(splits, objective.data.text_columns),
        },
    )


def trainer_metrics(objective: Objective, tokenizer, splits, features: DatasetDict, training_args):
    """The objective's compute_metrics for Trainer (None if it has none). A translation model with placeholder
    protection writes sentinel text: its BLEU / chrF are scored on the translations restored from their sources,
    which the metrics find from the evaluation's input ids (so `training_args` gets include_for_metrics=["inputs"])."""
    metrics = objective.evaluation.trainer_metrics
    if metrics is None:
        return None
    if not (objective.evaluation.scores_translations and tokenizer_protects(tokenizer)):
        return metrics(tokenizer)
    if "inputs" not in training_args.include_for_metrics:
        training_args.include_for_metrics = [*training_args.include_for_metrics, "inputs"]
    evaluated = {name: split for name, split in splits.items() if name != "train"}
    return metrics(tokenizer, originals_of=SplitOriginals(evaluated, features, tokenizer.pad_token_id))


class SplitOriginals:
    """The placeholders of each source of the evaluation splits, found again from the input ids of an evaluation.

    Trainer hands compute_metrics the predictions, the labels and (with include_for_metrics=["inputs"]) the input
    ids, in the order of the split it evaluated, but not the split's name: the split is the one whose protected
    sources, as tokenised features, are exactly these inputs (padding aside), row by row."""

    def __init__(self, splits: dict, features: DatasetDict, pad_token_id: int):
        self.pad_token_id = pad_token_id
        self.by_inputs = {
            tuple(map(tuple, features[name]["input_ids"])): [protect(source)[1] for source in split["source"]]
            for name, split in splits.items()
        }

    def __call__(self, inputs) -> list[list[str]]:
        if inputs is None:
            raise ValueError(
                "compute_metrics got no input ids: a model with placeholder protection needs "
                "include_for_metrics=['inputs'] to restore its translations before scoring them."
            )
        rows = tuple(tuple(int(t) for t in row if t >= 0 and t != self.pad_token_id) for row in np.asarray(inputs))
        found = self.by_inputs.get(rows)
        if found is None:
            raise ValueError(
                f"The {len(rows)} evaluated sources are not one of the splits this run evaluates "
                f"({', '.join(str(len(key)) + ' rows' for key in self.by_inputs)}): their placeholders cannot be "
                "restored before scoring."
            )
        return found


def _model(objective: Objective, ft_args: FinetuneArguments, model_config: dict, tokenizer, data_fields: dict):
    """The checkpoint folder's model, or a new small one of our family (the objective's `finetune_config` under
    `model_config`)."""
    if ft_args.model_name_or_path:
        model = pretrained_model(objective, ft_args.model_name_or_path, tokenizer, data_fields)
    else:
        fields = {**objective.model.finetune_config(ft_args.data_arguments()), **model_config}
        model = build_model(objective, objective.model.our_model_type, fields, tokenizer, data_fields)
    if objective.model.encoder_decoder:
        model.generation_config.max_length = ft_args.max_target_length + 1
    return model


def _train(
    objective: Objective,
    model,
    tokenizer,
    features: DatasetDict,
    *,
    ft_args,
    training_args,
    collator,
    compute_metrics,
    extra: dict,
) -> dict:
    """Train, evaluate on the test split, save model + tokenizer (+ adapter) and results.json."""
    if ft_args.lora:
        model = apply_lora(model, ft_args.lora, task=ft_args.task)
        model.print_trainable_parameters()
    validation = features.get("validation")
    trainer_class = Seq2SeqTrainer if objective.model.encoder_decoder else Trainer
    trainer = trainer_class(
        model=model,
        args=training_args,
        data_collator=collator,
        train_dataset=features["train"],
        eval_dataset=validation if validation is not None and len(validation) else None,
        processing_class=tokenizer,
        compute_metrics=compute_metrics,
    )
    start = time.perf_counter()
    train_result = trainer.train()
    train_seconds = time.perf_counter() - start
    test_metrics = trainer.evaluate(features["test"], metric_key_prefix="test")
    results = {
        "task": ft_args.task,
        "train_seconds": round(train_seconds, 1),
        "train_loss": train_result.training_loss,
        "global_step": train_result.global_step,
        **test_metrics,
        **extra,
        "loss_history": [row["loss"] for row in trainer.state.log_history if "loss" in row],
    }
    if trainer.is_world_process_zero():
        save_model(trainer.model, tokenizer, training_args.output_dir, lora=bool(ft_args.lora))
        (Path(training_args.output_dir) / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


def save_model(model, tokenizer, output_dir: str, *, lora: bool) -> None:
    """Save model + tokenizer to `output_dir`; a LoRA model saves its adapter to output_dir/adapter and the merged
    model (our own class, loadable by the Auto classes and pipelines) to output_dir."""
    output = Path(output_dir)
    if lora:
        model.save_pretrained(output / "adapter")
        tokenizer.save_pretrained(output / "adapter")
        model = model.merge_and_unload()
    model.save_pretrained(output)
    tokenizer.save_pretrained(output)


def main(argv: list[str] | None = None) -> dict:
    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    ft_args, training_args, model_config = parse_args(argv)
    if ft_args.num_threads:
        torch.set_num_threads(ft_args.num_threads)
    set_seed(training_args.seed)
    results = finetune(ft_args, training_args, model_config)
    shown = {k: (round(v, 4) if isinstance(v, float) and math.isfinite(v) else v) for k, v in results.items()}
    logger.info("results: %s", json.dumps(shown))
    return results


if __name__ == "__main__":
    main()
