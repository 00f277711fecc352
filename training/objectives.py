"""What differs between the three objectives: data, tokenizer kind, model, collator, and how tokens are counted.

| objective   | data (default)             | tokenizer | model (default family) | collator                          |
|-------------|----------------------------|-----------|------------------------|-----------------------------------|
| causal_lm   | Python docs, packed blocks | causal    | hf_attention_decoder   | default (labels = inputs)         |
| masked_lm   | Python docs, truncated     | masked    | hf_attention_encoder   | DataCollatorForLanguageModeling   |
| translation | gettext en→lang pairs      | seq2seq   | hf_attention_seq2seq   | DataCollatorForSeq2Seq(model=...) |

The loss is a sum over target tokens divided by `num_items_in_batch`, the count of target tokens in the whole
accumulation window on every process. Our models take that count (`num_items_in_batch`); Hugging Face models that
only return a mean loss (BART, BERT) get the same token-normalised loss from their logits here.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect

import torch
from datasets import Dataset, DatasetDict
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM,
    DataCollatorForLanguageModeling,
    DataCollatorForSeq2Seq,
    default_data_collator,
)

import hf_attention
from training import data as data_lib
from training.args import DataArguments, ModelArguments
from training.tokenizer import train_tokenizer

OUR_MODEL_TYPE = {"causal_lm": "hf_attention_decoder", "masked_lm": "hf_attention_encoder",
                  "translation": "hf_attention_seq2seq"}
AUTO_CLASS = {"causal_lm": AutoModelForCausalLM, "masked_lm": AutoModelForMaskedLM,
              "translation": AutoModelForSeq2SeqLM}
TOKENIZER_KIND = {"causal_lm": "causal", "masked_lm": "masked", "translation": "seq2seq"}
PIPELINE_TASK = {"causal_lm": "text-generation", "masked_lm": "fill-mask", "translation": "translation"}


# --------------------------------------------------------------------------------------------------- model

def check_model_type(objective: str, model_type: str | None) -> str:
    """The model type to build for `objective`, or a ValueError if that architecture cannot train it.

    Checked before any data is read, from the config class alone.
    """
    model_type = model_type or OUR_MODEL_TYPE[objective]
    try:
        config_class = type(AutoConfig.for_model(model_type))
    except ValueError as error:
        raise ValueError(f"Unknown model_type={model_type!r}: {error}") from error
    auto = AUTO_CLASS[objective]
    if config_class not in auto._model_mapping:
        usable = "/".join(sorted({OUR_MODEL_TYPE[objective], *_EXAMPLES[objective]}))
        raise ValueError(
            f"model_type={model_type!r} cannot be trained for objective {objective!r}: {auto.__name__} has no "
            f"class for {config_class.__name__}. Use a {_FAMILY[objective]} config (e.g. model_type {usable})."
        )
    if objective == "translation" and not getattr(config_class(), "is_encoder_decoder", False):
        raise ValueError(f"objective 'translation' needs an encoder-decoder config; model_type={model_type!r} is not.")
    if objective == "causal_lm" and getattr(config_class(), "is_encoder_decoder", False):
        raise ValueError(f"objective 'causal_lm' needs a decoder-only config; model_type={model_type!r} is an "
                         "encoder-decoder.")
    return model_type


def check_model_config(model_type: str, model_config: dict) -> None:
    """Refuse `model_config` keys that the config class of `model_type` does not know (a typo would otherwise be
    stored on the config and ignored, as `PretrainedConfig` keeps unknown keys) and values its checks refuse, before
    any data is read."""
    config_class = type(AutoConfig.for_model(model_type))
    known = set(vars(config_class())) | set(inspect.signature(config_class.__init__).parameters)
    known |= set(getattr(config_class, "attribute_map", {}))
    known |= {f.name for f in dataclasses.fields(config_class)} if dataclasses.is_dataclass(config_class) else set()
    unknown = sorted(set(model_config) - known)
    if unknown:
        hints = [f"{key!r} (did you mean {', '.join(map(repr, close))}?)" if (close := difflib.get_close_matches(
            key, sorted(known), n=2)) else repr(key) for key in unknown]
        raise ValueError(f"model_config has keys that {config_class.__name__} does not know: {', '.join(hints)}. "
                         f"Model-config fields are the arguments of {config_class.__name__}.")
    try:  # the config's own checks (types, ranges, combinations), before the data and tokenizer are made
        AutoConfig.for_model(model_type, **model_config)
    except (TypeError, ValueError) as error:
        raise ValueError(f"Invalid model_config for model_type={model_type!r}: {error}") from error


_FAMILY = {"causal_lm": "decoder-only", "masked_lm": "encoder", "translation": "encoder-decoder"}
_EXAMPLES = {"causal_lm": ("gpt2", "llama"), "masked_lm": ("bert", "roberta"), "translation": ("bart", "marian")}


def build_model(objective: str, model_type: str, model_config: dict, tokenizer):
    """A freshly initialised model of `model_type` for `objective`, sized to the tokenizer.

    The special-token ids come from the tokenizer (<pad>=0, <s>=1, </s>=2), so BART, GPT-2, BERT and ours agree.
    """
    fields = dict(model_config)
    fields.update(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    if objective == "translation":
        fields.setdefault("decoder_start_token_id", tokenizer.bos_token_id)
        if model_type != OUR_MODEL_TYPE[objective]:
            fields.setdefault("forced_eos_token_id", tokenizer.eos_token_id)
    try:
        config = AutoConfig.for_model(model_type, **fields)
    except (TypeError, ValueError) as error:
        raise ValueError(f"Invalid model_config for model_type={model_type!r}: {error}") from error
    return AUTO_CLASS[objective].from_config(config)


def takes_num_items(model) -> bool:
    """Whether the model's own loss divides by `num_items_in_batch` (ours; HF models built on `loss_function`)."""
    return isinstance(model, hf_attention.HFAttentionPreTrainedModel) or type(model).__name__.startswith(
        ("GPT2", "Llama", "Qwen", "Mistral"))


# ---------------------------------------------------------------------------------------------------- data

def load_corpus(objective: str, data_args: DataArguments) -> Dataset:
    """The raw text: the embedded default corpus or the user's dataset, with the columns the objective needs."""
    if objective == "translation":
        columns = {data_args.source_column: "source", data_args.target_column: "target"}
        if data_args.dataset is None:
            return data_lib.translation_corpus(data_args.target_lang, max_chars=data_args.max_chars,
                                               max_catalogs=data_args.max_catalogs)
        dataset = _load_user(data_args)
        if "translation" in dataset.column_names and data_args.source_column not in dataset.column_names:
            dataset = data_lib.flatten_translation(dataset, data_args.source_lang, data_args.target_lang)
            columns = {"source": "source", "target": "target"}
        dataset = data_lib.select_columns(dataset, columns)
        for column in ("source", "target"):
            dataset = data_lib.filter_texts(dataset, column=column, min_chars=data_args.min_chars,
                                            max_chars=data_args.max_chars)
        return dataset
    if data_args.dataset is None:
        return data_lib.python_docs_corpus(max_topics=data_args.max_topics)
    dataset = data_lib.select_columns(_load_user(data_args), {data_args.text_column: "text"})
    return data_lib.filter_texts(dataset, column="text", min_chars=data_args.min_chars)


def _load_user(data_args: DataArguments) -> Dataset:
    source = data_args.dataset.split(",") if "," in data_args.dataset else data_args.dataset
    return data_lib.load_user_dataset(source, data_format=data_args.data_format, name=data_args.dataset_config_name)


def split_corpus(objective: str, corpus: Dataset, data_args: DataArguments) -> DatasetDict:
    """Deterministic train / validation / test split by a hash of the (source) text, then the size caps."""
    splits = data_lib.split_dataset(corpus, key="source" if objective == "translation" else "text")
    caps = {"train": data_args.max_train_samples, "validation": data_args.max_eval_samples,
            "test": data_args.max_test_samples}
    for name, cap in caps.items():
        if name not in splits or len(splits[name]) == 0:
            raise ValueError(f"The {name} split is empty ({len(corpus)} rows in the corpus); use more data.")
        if cap is not None:
            splits[name] = splits[name].select(range(min(cap, len(splits[name]))))
    return splits


def training_texts(objective: str, train_split: Dataset):
    """The texts the tokenizer learns from: both sides of the pairs for translation (one shared vocabulary)."""
    if objective == "translation":
        return list(train_split["source"]) + list(train_split["target"])
    return list(train_split["text"])


def make_tokenizer(objective: str, train_split: Dataset, model_args: ModelArguments, max_length: int):
    return train_tokenizer(training_texts(objective, train_split), model_args.vocab_size,
                           kind=TOKENIZER_KIND[objective], min_frequency=model_args.tokenizer_min_frequency,
                           model_max_length=max_length)


def featurize(objective: str, split: Dataset, tokenizer, data_args: DataArguments) -> Dataset:
    """Token ids for one split (see training/data.py for each objective's layout)."""
    if objective == "causal_lm":
        if data_args.causal_lm_layout == "blocks":
            return data_lib.causal_lm_features(split, tokenizer, block_size=data_args.block_size)
        return data_lib.causal_lm_document_features(split, tokenizer, block_size=data_args.block_size,
                                                    packed=data_args.causal_lm_layout == "packed")
    if objective == "masked_lm":
        return data_lib.masked_lm_features(split, tokenizer, max_length=data_args.max_length)
    return data_lib.translation_features(split, tokenizer, max_source_length=data_args.max_source_length,
                                         max_target_length=data_args.max_target_length)


def make_collator(objective: str, tokenizer, model, data_args: DataArguments, *, seed: int | None = None):
    """The batch collator: pads, masks (MLM) and builds decoder inputs shifted right (translation)."""
    if objective == "causal_lm":
        if data_args.causal_lm_layout == "padded":
            return DataCollatorForSeq2Seq(tokenizer, label_pad_token_id=-100, padding=True)
        return default_data_collator  # blocks and packed rows: every row has block_size tokens
    if objective == "masked_lm":
        return DataCollatorForLanguageModeling(tokenizer, mlm=True, mlm_probability=data_args.mlm_probability,
                                               seed=seed)
    return DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100, padding=True)


def length_of(objective: str, features: Dataset) -> list[int]:
    """The padded-size driver of each row, for batching by tokens."""
    if objective == "translation":
        return [max(a, b) for a, b in zip(map(len, features["input_ids"]), map(len, features["labels"]),
                                           strict=True)]
    return [len(ids) for ids in features["input_ids"]]


# ---------------------------------------------------------------------------------------------------- loss

def target_labels(objective: str, labels: torch.Tensor) -> torch.Tensor:
    """The labels the loss is taken against: for a causal LM, position t predicts token t+1."""
    if objective == "causal_lm":
        return nn.functional.pad(labels, (0, 1), value=-100)[:, 1:]
    return labels


def count_targets(objective: str, batch: dict) -> int:
    """Number of tokens that enter the loss in `batch`."""
    return int((target_labels(objective, batch["labels"]) != -100).sum())


def token_loss(objective: str, model, batch: dict, num_items_in_batch: torch.Tensor) -> torch.Tensor:
    """Summed cross-entropy of `batch` divided by `num_items_in_batch` (the count over the accumulation window and
    all processes), from the model's own loss when it takes the count, else from its logits."""
    if takes_num_items(_unwrap(model)):
        return model(**batch, num_items_in_batch=num_items_in_batch).loss
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    logits = model(**inputs).logits
    return per_token_sum(objective, logits, batch["labels"]).sum() / num_items_in_batch


def per_token_sum(objective: str, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Summed cross-entropy per row (B,), over the tokens whose target is not -100."""
    targets = target_labels(objective, labels).to(logits.device)
    losses = nn.functional.cross_entropy(logits.float().transpose(1, 2), targets, ignore_index=-100,
                                         reduction="none")  # (B, T)
    return losses.sum(dim=1)


def _unwrap(model):
    return getattr(model, "module", model)
