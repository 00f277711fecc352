"""Fine-tuning through 🤗 `Trainer` / `Seq2SeqTrainer`: language identification (default) and translation.

    python -m training.finetune --config training/configs/finetune_language_id.yaml
    python -m training.finetune --config training/configs/finetune_language_id.yaml \\
        --model_name_or_path runs/mlm/final --lora r=8,alpha=16 --output_dir runs/lid_lora
    python -m training.finetune --task translation --model_name_or_path outputs/translation_en_de/final \\
        --output_dir runs/ft_en_de --max_steps 500 --predict_with_generate true

Tasks:

- `language_id`: which language a UI string from the machine's gettext catalogs is in
  (`training.data.language_id_corpus`, hash splits), with `AutoModelForSequenceClassification` (our
  `HFAttentionForSequenceClassification`). The saved folder loads with `pipeline("text-classification", model=DIR)`
  and answers with language codes (id2label / label2id come from the `ClassLabel` names).
- `translation`: English → `target_lang` UI strings (`training.data.translation_corpus`) with
  `AutoModelForSeq2SeqLM` and `Seq2SeqTrainer`; test BLEU / chrF with sacrebleu on generated translations.

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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    DataCollatorWithPadding,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    Trainer,
    TrainingArguments,
    set_seed,
)

import hf_attention  # noqa: F401  (registers the hf_attention model types with the Auto classes)
from hf_attention import HFAttentionEncoderConfig, HFAttentionSeq2SeqConfig
from training.args import (
    at_least,
    check_checkpoint_folder,
    check_fields,
    parse_into,
    read_config,
    with_model_config_flag,
)
from training.data import (
    DEFAULT_LANGUAGES,
    language_id_corpus,
    split_dataset,
    translation_corpus,
    translation_features,
)
from training.tokenizer import train_tokenizer

if TYPE_CHECKING:
    from datasets import DatasetDict
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger("training.finetune")

TASKS = ("language_id", "translation")
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")

# Small from-scratch models: what `model_config` entries override.
DEFAULT_MODEL_CONFIGS = {
    "language_id": {
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 256,
        "norm_position": "pre",
        "hidden_dropout_prob": 0.1,
        "classifier_pooling": "mean",
    },
    "translation": {
        "hidden_size": 128,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 512,
        "hidden_dropout_prob": 0.1,
    },
}


@dataclass
class FinetuneArguments:
    """The task, the starting model, the data and LoRA; everything else is a 🤗 (Seq2Seq)TrainingArguments field."""

    task: str = field(default="language_id", metadata={"help": f"One of {', '.join(TASKS)}."})
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
    max_catalogs: int | None = field(default=None, metadata={"help": "Read only this many catalogs per language."})
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

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task={self.task!r} is not supported; allowed values are {', '.join(map(repr, TASKS))}.")
        codes = {lang.strip() for lang in self.languages.split(",") if lang.strip()}
        if self.task == "language_id" and len(codes) < 2:
            raise ValueError(
                f"--languages={self.languages!r}: language identification needs at least two language "
                "codes (a one-class classifier is always right), e.g. 'de,fr,es'."
            )
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


# ------------------------------------------------------------------------------------------------ arguments


def parse_args(argv: list[str] | None = None):
    """`--config file.yaml` (optional) + command-line overrides → (FinetuneArguments, (Seq2Seq)TrainingArguments,
    model_config dict).

    The YAML file holds fields of both dataclasses at its top level, plus an optional `model_config:` mapping.
    `use_cpu` defaults to True when CUDA is not available. `output_dir` defaults to runs/finetune_<task>.
    """
    config = read_config(argv)
    task = config.values.get("task", "language_id")
    if "--task" in config.argv and config.argv.index("--task") + 1 < len(config.argv):
        task = config.argv[config.argv.index("--task") + 1]
    args_class = Seq2SeqTrainingArguments if task == "translation" else TrainingArguments
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
    """Wrap `model` with a PEFT LoRA adapter described by `spec` (see `parse_lora`)."""
    from peft import LoraConfig, TaskType, get_peft_model

    kwargs = parse_lora(spec)
    if task == "language_id":
        config = LoraConfig(task_type=TaskType.SEQ_CLS, modules_to_save=["classifier"], **kwargs)
    else:
        config = LoraConfig(task_type=TaskType.SEQ_2_SEQ_LM, **kwargs)
    return get_peft_model(model, config)


# ---------------------------------------------------------------------------------------------- components


def load_or_train_tokenizer(model_name_or_path: str | None, texts, *, vocab_size: int, kind: str, max_length: int):
    """The tokenizer saved in the checkpoint folder, or a byte-level BPE trained on `texts`."""
    if model_name_or_path and any(
        (Path(model_name_or_path) / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")
    ):
        return AutoTokenizer.from_pretrained(model_name_or_path)
    return train_tokenizer(texts, vocab_size, kind=kind, model_max_length=max_length)


def language_id_data(ft_args: FinetuneArguments):
    """The language-identification splits (train / validation / test) and the label names."""
    corpus = language_id_corpus(
        [lang.strip() for lang in ft_args.languages.split(",") if lang.strip()],
        min_chars=ft_args.min_chars,
        max_chars=ft_args.max_chars,
        max_per_language=ft_args.max_per_language,
        max_catalogs=ft_args.max_catalogs,
    )
    splits = _cap(split_dataset(corpus, key="text", salt=ft_args.split_salt), ft_args)
    return splits, corpus.features["label"].names


def _cap(splits, ft_args: FinetuneArguments):
    caps = {
        "train": ft_args.max_train_samples,
        "validation": ft_args.max_eval_samples,
        "test": ft_args.max_test_samples,
    }
    for name, cap in caps.items():
        if name in splits and cap is not None:
            # Shuffle before capping: language_id rows are grouped by label.
            splits[name] = splits[name].shuffle(seed=0).select(range(min(cap, len(splits[name]))))
    return splits


def build_classifier(ft_args: FinetuneArguments, model_config: dict, tokenizer, labels: list[str]):
    """AutoModelForSequenceClassification from the checkpoint folder, or a new small encoder."""
    label_kwargs = {
        "num_labels": len(labels),
        "id2label": dict(enumerate(labels)),
        "label2id": {name: i for i, name in enumerate(labels)},
    }
    if ft_args.model_name_or_path:
        model = AutoModelForSequenceClassification.from_pretrained(ft_args.model_name_or_path, **label_kwargs)
    else:
        fields_ = {
            **DEFAULT_MODEL_CONFIGS["language_id"],
            "max_position_embeddings": ft_args.max_length,
            **model_config,
        }
        config = HFAttentionEncoderConfig(
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            **fields_,
            **label_kwargs,
        )
        model = AutoModelForSequenceClassification.from_config(config)
    _fit_vocabulary(model, tokenizer)
    return model


def build_seq2seq(ft_args: FinetuneArguments, model_config: dict, tokenizer):
    """AutoModelForSeq2SeqLM from the checkpoint folder, or a new small encoder-decoder."""
    if ft_args.model_name_or_path:
        model = AutoModelForSeq2SeqLM.from_pretrained(ft_args.model_name_or_path)
    else:
        longest = max(ft_args.max_source_length, ft_args.max_target_length)
        fields_ = {
            **DEFAULT_MODEL_CONFIGS["translation"],
            "max_position_embeddings": max(64, 2 * longest),
            **model_config,
        }
        config = HFAttentionSeq2SeqConfig(
            vocab_size=len(tokenizer),
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            decoder_start_token_id=tokenizer.bos_token_id,
            **fields_,
        )
        model = AutoModelForSeq2SeqLM.from_config(config)
    _fit_vocabulary(model, tokenizer)
    model.generation_config.max_length = ft_args.max_target_length + 1
    return model


def _fit_vocabulary(model, tokenizer) -> None:
    """Resize the embeddings when a tokenizer trained here is larger than the checkpoint's vocabulary."""
    if len(tokenizer) > model.get_input_embeddings().num_embeddings:
        logger.warning(
            "Tokenizer has %d tokens, the model %d embeddings: resizing.",
            len(tokenizer),
            model.get_input_embeddings().num_embeddings,
        )
        model.resize_token_embeddings(len(tokenizer))


def classification_metrics(eval_pred) -> dict:
    """Accuracy and macro-F1 from (logits, labels)."""
    logits, labels = eval_pred
    logits = logits[0] if isinstance(logits, tuple) else logits
    predictions = np.asarray(logits).argmax(-1)
    labels = np.asarray(labels)
    f1s = []
    for c in np.unique(labels):
        tp = np.sum((predictions == c) & (labels == c))
        precision = tp / max(np.sum(predictions == c), 1)
        recall = tp / max(np.sum(labels == c), 1)
        f1s.append(0.0 if tp == 0 else 2 * precision * recall / (precision + recall))
    return {"accuracy": float(np.mean(predictions == labels)), "macro_f1": float(np.mean(f1s))}


def translation_metrics(tokenizer):
    """compute_metrics for Seq2SeqTrainer(predict_with_generate=True): corpus BLEU and chrF (sacrebleu)."""
    import sacrebleu

    def compute(eval_pred) -> dict:
        predictions, labels = eval_pred
        predictions = predictions[0] if isinstance(predictions, tuple) else predictions
        predictions = np.where(np.asarray(predictions) < 0, tokenizer.pad_token_id, predictions)
        labels = np.where(np.asarray(labels) < 0, tokenizer.pad_token_id, labels)
        hypotheses = [t.strip() for t in tokenizer.batch_decode(predictions, skip_special_tokens=True)]
        references = [t.strip() for t in tokenizer.batch_decode(labels, skip_special_tokens=True)]
        return {
            "bleu": sacrebleu.corpus_bleu(hypotheses, [references]).score,
            "chrf": sacrebleu.corpus_chrf(hypotheses, [references]).score,
        }

    return compute


# --------------------------------------------------------------------------------------------------- tasks


def finetune_language_id(ft_args, training_args, model_config: dict) -> dict:
    """Fine-tune a language-identification classifier; returns the test metrics (and timings)."""
    splits, labels = language_id_data(ft_args)
    tokenizer = load_or_train_tokenizer(
        ft_args.model_name_or_path,
        splits["train"]["text"],
        vocab_size=ft_args.vocab_size,
        kind="masked",
        max_length=ft_args.max_length,
    )
    model = build_classifier(ft_args, model_config, tokenizer, labels)
    features = splits.map(
        lambda batch: tokenizer(batch["text"], truncation=True, max_length=ft_args.max_length),
        batched=True,
        remove_columns=["text"],
    )
    job = FinetuneJob(
        trainer_class=Trainer,
        model=model,
        tokenizer=tokenizer,
        features=features,
        collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=classification_metrics,
        extra={"labels": labels, "rows": {name: len(split) for name, split in splits.items()}},
    )
    return _run(job, ft_args, training_args)


def finetune_translation(ft_args, training_args, model_config: dict) -> dict:
    """Fine-tune (or train) an English → target_lang translation model with Seq2SeqTrainer; returns test metrics."""
    corpus = translation_corpus(ft_args.target_lang, max_chars=ft_args.max_chars, max_catalogs=ft_args.max_catalogs)
    splits = _cap(split_dataset(corpus, key="source", salt=ft_args.split_salt), ft_args)
    texts = list(splits["train"]["source"]) + list(splits["train"]["target"])
    tokenizer = load_or_train_tokenizer(
        ft_args.model_name_or_path,
        texts,
        vocab_size=ft_args.vocab_size,
        kind="seq2seq",
        max_length=max(ft_args.max_source_length, ft_args.max_target_length),
    )
    model = build_seq2seq(ft_args, model_config, tokenizer)
    features = type(splits)(
        {
            name: translation_features(
                split,
                tokenizer,
                max_source_length=ft_args.max_source_length,
                max_target_length=ft_args.max_target_length,
            )
            for name, split in splits.items()
        }
    )
    if training_args.generation_max_length is None:
        training_args.generation_max_length = ft_args.max_target_length + 1
    collator = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)
    metrics = translation_metrics(tokenizer) if training_args.predict_with_generate else None
    job = FinetuneJob(
        trainer_class=Seq2SeqTrainer,
        model=model,
        tokenizer=tokenizer,
        features=features,
        collator=collator,
        compute_metrics=metrics,
        extra={"target_lang": ft_args.target_lang, "rows": {name: len(split) for name, split in splits.items()}},
    )
    return _run(job, ft_args, training_args)


@dataclass(frozen=True)
class FinetuneJob:
    """What a task hands to its Trainer: the model, the tokenizer, the features, how batches are made and scored."""

    trainer_class: type  # Trainer or Seq2SeqTrainer
    model: torch.nn.Module
    tokenizer: PreTrainedTokenizerBase
    features: DatasetDict  # train / validation / test
    collator: Callable
    compute_metrics: Callable | None
    extra: dict  # written into the results as they are


def _run(job: FinetuneJob, ft_args, training_args) -> dict:
    """Train, evaluate on the test split, save model + tokenizer (+ adapter) and results.json."""
    model, tokenizer, features = job.model, job.tokenizer, job.features
    if ft_args.lora:
        model = apply_lora(model, ft_args.lora, task=ft_args.task)
        model.print_trainable_parameters()
    validation = features.get("validation")
    trainer = job.trainer_class(
        model=model,
        args=training_args,
        data_collator=job.collator,
        train_dataset=features["train"],
        eval_dataset=validation if validation is not None and len(validation) else None,
        processing_class=tokenizer,
        compute_metrics=job.compute_metrics,
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
        **job.extra,
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
    run = finetune_language_id if ft_args.task == "language_id" else finetune_translation
    results = run(ft_args, training_args, model_config)
    shown = {k: (round(v, 4) if isinstance(v, float) and math.isfinite(v) else v) for k, v in results.items()}
    logger.info("results: %s", json.dumps(shown))
    return results


if __name__ == "__main__":
    main()
