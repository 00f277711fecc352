"""What differs between the three objectives, one `Objective` record each, looked up once by name (`objective_for`).

| objective   | data (default)             | tokenizer | model (default family) | collator                          |
|-------------|----------------------------|-----------|------------------------|-----------------------------------|
| causal_lm   | Python docs, packed blocks | causal    | hf_attention_decoder   | default (labels = inputs)         |
| masked_lm   | Python docs, truncated     | masked    | hf_attention_encoder   | DataCollatorForLanguageModeling   |
| translation | gettext en→lang pairs      | seq2seq   | hf_attention_seq2seq   | DataCollatorForSeq2Seq(model=...) |

The rest of training/ is written once for all objectives and reads from the record what it needs: the functions
below (model checks and construction, corpus, tokenizer), the loss (training/losses.py), the loop, evaluation and
the export.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING

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

from training import data as data_lib
from training.tokenizer import train_tokenizer

if TYPE_CHECKING:  # annotations only: args.py and evaluate.py import this module
    from transformers import GenerationConfig, PreTrainedTokenizerBase

    from training.args import DataArguments, ModelArguments
    from training.evaluate import GenerationSettings


@dataclass(frozen=True)
class ModelCardText:
    """The parts of the model card's prose that depend on the objective."""

    example: str  # the input of the usage snippet
    intended_use: str
    limitations: str = ""  # added after the limitations every card states


@dataclass(frozen=True)
class Objective:
    """Everything that differs between training objectives; the code that reads it is the same for all."""

    name: str
    # The model: our family by default, or any Hugging Face type its Auto class can build.
    our_model_type: str
    auto_class: type
    architecture: str  # "a decoder-only", ...: what error messages ask for
    example_model_types: tuple[str, ...]  # Hugging Face types that work, named by error messages
    encoder_decoder: bool | None  # whether the architecture must (not) be an encoder-decoder; None: either
    # The data: the corpus, its tokenizer, and how texts become batches.
    default_dataset: str  # the embedded corpus, as the model card names it
    default_corpus_description: str  # how the card describes it (formatted with the DataArguments fields)
    load_corpus: Callable[[DataArguments], Dataset]  # the embedded corpus or the user's, with `text_columns`
    text_columns: tuple[str, ...]  # source first: the split hashes it, the tokenizer learns from all
    tokenizer_kind: str  # training/tokenizer.py
    tokenizer_max_length: Callable[[DataArguments], int]  # where the tokenizer truncates
    featurize: Callable[[Dataset, PreTrainedTokenizerBase, DataArguments], Dataset]  # texts → token ids
    make_collator: Callable[[PreTrainedTokenizerBase, nn.Module, DataArguments], Callable]  # pads (and masks)
    predicts_next_token: bool  # position t is scored against token t + 1 (the labels are not shifted yet)
    # Evaluation and export.
    scores_translations: bool  # BLEU / chrF of generated translations, at evaluations and on the test split
    pipeline_task: str
    task_name: str  # the Hub's name of `pipeline_task`
    # Our own pipeline class (transformers 5 has no translation pipeline): the export carries its code, and the
    # card's usage snippet loads it with trust_remote_code=True.
    custom_pipeline: bool
    set_generation_defaults: (
        Callable[[GenerationConfig, nn.Module, PreTrainedTokenizerBase, GenerationSettings], None] | None
    )
    card: ModelCardText

    def languages(self, data_args: DataArguments) -> list[str]:
        """The languages of the text columns (model card): the source language, and the target language of pairs."""
        return [data_args.source_lang, data_args.target_lang][: len(self.text_columns)]


# ---------------------------------------------------------------------------------------------- the corpora


def _text_corpus(data_args: DataArguments) -> Dataset:
    """One `text` column: the Python documentation, or the user's dataset."""
    if data_args.dataset is None:
        return data_lib.python_docs_corpus(max_topics=data_args.max_topics)
    dataset = data_lib.select_columns(_load_user(data_args), {data_args.text_column: "text"})
    return data_lib.filter_texts(dataset, column="text", min_chars=data_args.min_chars)


def _parallel_corpus(data_args: DataArguments) -> Dataset:
    """`source` / `target` pairs: the gettext catalogs, or the user's dataset (flat columns or a nested
    `translation` column)."""
    if data_args.dataset is None:
        return data_lib.translation_corpus(
            data_args.target_lang,
            max_chars=data_args.max_chars,
            max_catalogs=data_args.max_catalogs,
            packages=data_args.catalog_packages,
        )
    columns = {data_args.source_column: "source", data_args.target_column: "target"}
    dataset = _load_user(data_args)
    if "translation" in dataset.column_names and data_args.source_column not in dataset.column_names:
        dataset = data_lib.flatten_translation(dataset, data_args.source_lang, data_args.target_lang)
        columns = {"source": "source", "target": "target"}
    dataset = data_lib.select_columns(dataset, columns)
    for column in ("source", "target"):
        dataset = data_lib.filter_texts(
            dataset, column=column, min_chars=data_args.min_chars, max_chars=data_args.max_chars
        )
    return dataset


def _load_user(data_args: DataArguments) -> Dataset:
    source = data_args.dataset.split(",") if "," in data_args.dataset else data_args.dataset
    return data_lib.load_user_dataset(source, data_format=data_args.data_format, name=data_args.dataset_config_name)


# ------------------------------------------------------------------------------------ features and batches


def _causal_lm_features(split: Dataset, tokenizer, data_args: DataArguments) -> Dataset:
    if data_args.causal_lm_layout == "blocks":
        return data_lib.causal_lm_features(split, tokenizer, block_size=data_args.block_size)
    return data_lib.causal_lm_document_features(
        split, tokenizer, block_size=data_args.block_size, packed=data_args.causal_lm_layout == "packed"
    )


def _masked_lm_features(split: Dataset, tokenizer, data_args: DataArguments) -> Dataset:
    return data_lib.masked_lm_features(split, tokenizer, max_length=data_args.max_length)


def _translation_features(split: Dataset, tokenizer, data_args: DataArguments) -> Dataset:
    return data_lib.translation_features(
        split, tokenizer, max_source_length=data_args.max_source_length, max_target_length=data_args.max_target_length
    )


def _causal_lm_collator(tokenizer, model, data_args: DataArguments):
    if data_args.causal_lm_layout == "padded":
        return DataCollatorForSeq2Seq(tokenizer, label_pad_token_id=-100, padding=True)
    return default_data_collator  # blocks and packed rows: every row has block_size tokens


def _masked_lm_collator(tokenizer, model, data_args: DataArguments):
    return DataCollatorForLanguageModeling(tokenizer, mlm=True, mlm_probability=data_args.mlm_probability)


def _translation_collator(tokenizer, model, data_args: DataArguments):
    # with the model: decoder_input_ids are the labels shifted right
    return DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100, padding=True)


# --------------------------------------------------------------------------------------- generation defaults


def _causal_lm_generation(config, model, tokenizer, generation: GenerationSettings) -> None:
    config.bos_token_id = tokenizer.bos_token_id
    config.max_new_tokens = 50


def _translation_generation(config, model, tokenizer, generation: GenerationSettings) -> None:
    config.decoder_start_token_id = model.config.decoder_start_token_id
    config.num_beams = generation.num_beams
    if generation.num_beams > 1:  # a beam-search setting (a greedy config that holds one fails validation)
        config.length_penalty = generation.length_penalty
    config.max_new_tokens = generation.max_new_tokens
    config.max_length = None


# ------------------------------------------------------------------------------------------- the objectives

# The corpus of both language-model objectives.
_PYTHON_DOCS = {
    "default_dataset": "python-docs",
    "load_corpus": _text_corpus,
    "text_columns": ("text",),
    "default_corpus_description": "Paragraphs of the Python documentation topics shipped with CPython "
    "(`pydoc_data.topics`)",
}

OBJECTIVES = {
    objective.name: objective
    for objective in (
        Objective(
            name="causal_lm",
            our_model_type="hf_attention_decoder",
            auto_class=AutoModelForCausalLM,
            architecture="a decoder-only",
            example_model_types=("gpt2", "llama"),
            encoder_decoder=False,
            **_PYTHON_DOCS,
            tokenizer_kind="causal",
            tokenizer_max_length=lambda data_args: data_args.block_size,
            featurize=_causal_lm_features,
            make_collator=_causal_lm_collator,
            predicts_next_token=True,
            scores_translations=False,
            pipeline_task="text-generation",
            task_name="Text generation",
            custom_pipeline=False,
            set_generation_defaults=_causal_lm_generation,
            card=ModelCardText(
                example="The with statement",
                intended_use="Continuing English technical prose in the style of the Python documentation; a small "
                "research / teaching model, not a general-purpose assistant.",
            ),
        ),
        Objective(
            name="masked_lm",
            our_model_type="hf_attention_encoder",
            auto_class=AutoModelForMaskedLM,
            architecture="an encoder",
            example_model_types=("bert", "roberta"),
            encoder_decoder=None,
            **_PYTHON_DOCS,
            tokenizer_kind="masked",
            tokenizer_max_length=lambda data_args: data_args.max_length,
            featurize=_masked_lm_features,
            make_collator=_masked_lm_collator,
            predicts_next_token=False,
            scores_translations=False,
            pipeline_task="fill-mask",
            task_name="Fill mask",
            custom_pipeline=False,
            set_generation_defaults=None,  # encoders do not generate
            card=ModelCardText(
                example="The <mask> statement is used to wrap a block.",
                intended_use="Filling masked words in English technical prose and as a small encoder to fine-tune "
                "(e.g. with `AutoModelForSequenceClassification`); research / teaching.",
            ),
        ),
        Objective(
            name="translation",
            our_model_type="hf_attention_seq2seq",
            auto_class=AutoModelForSeq2SeqLM,
            architecture="an encoder-decoder",
            example_model_types=("bart", "marian"),
            encoder_decoder=True,
            default_dataset="gettext-catalogs",
            default_corpus_description=(
                "English → `{target_lang}` user-interface strings from the gettext catalogs installed on the training "
                "machine (`/usr/share/locale/<lang>/LC_MESSAGES/*.mo`, the kind of data in the OPUS GNOME/KDE/Ubuntu "
                "corpora): single-line, not format-only, translated, de-duplicated pairs of at most {max_chars} "
                "characters"
            ),
            load_corpus=_parallel_corpus,
            text_columns=("source", "target"),
            tokenizer_kind="seq2seq",
            tokenizer_max_length=lambda data_args: max(data_args.max_source_length, data_args.max_target_length),
            featurize=_translation_features,
            make_collator=_translation_collator,
            predicts_next_token=False,
            scores_translations=True,
            pipeline_task="translation",
            task_name="Translation",
            custom_pipeline=True,
            set_generation_defaults=_translation_generation,
            card=ModelCardText(
                example="Open the file",
                intended_use="Translating short English user-interface strings (menu items, buttons, messages) into "
                "the target language; a small research / teaching model for comparing attention designs.",
                limitations='UI strings are short and often lack context, so ambiguous words ("Open", "Close") '
                "are translated by frequency; long sentences are outside the training distribution.",
            ),
        ),
    )
}


def objective_for(name: str) -> Objective:
    """The record of objective `name`, or a ValueError naming the allowed values."""
    if name not in OBJECTIVES:
        raise ValueError(
            f"objective={name!r} is not supported; allowed values are {', '.join(map(repr, OBJECTIVES))}."
        )
    return OBJECTIVES[name]


# --------------------------------------------------------------------------------------------------- model


def check_model_type(objective: Objective, model_type: str | None) -> str:
    """The model type to build for `objective`, or a ValueError if that architecture cannot train it.

    Checked before any data is read, from the config class alone.
    """
    model_type = model_type or objective.our_model_type
    try:
        config_class = type(AutoConfig.for_model(model_type))
    except ValueError as error:
        raise ValueError(f"Unknown model_type={model_type!r}: {error}") from error
    auto = objective.auto_class
    if config_class not in auto._model_mapping:
        usable = "/".join(sorted({objective.our_model_type, *objective.example_model_types}))
        raise ValueError(
            f"model_type={model_type!r} cannot be trained for objective {objective.name!r}: {auto.__name__} has no "
            f"class for {config_class.__name__}. Use {objective.architecture} config (e.g. model_type {usable})."
        )
    is_encoder_decoder = bool(getattr(config_class(), "is_encoder_decoder", False))
    if objective.encoder_decoder is not None and is_encoder_decoder != objective.encoder_decoder:
        what = "is an encoder-decoder" if is_encoder_decoder else "is not"
        raise ValueError(
            f"objective {objective.name!r} needs {objective.architecture} config; model_type={model_type!r} {what}."
        )
    return model_type


def check_model_config(model_type: str, model_config: dict) -> None:
    """Refuse `model_config` keys that the config class of `model_type` does not know (a typo would otherwise be
    stored on the config and ignored, as `PretrainedConfig` keeps unknown keys) and values its checks refuse, before
    any data is read."""
    config_class = type(AutoConfig.for_model(model_type))
    known = set(vars(config_class())) | set(inspect.signature(config_class.__init__).parameters)
    known |= set(getattr(config_class, "attribute_map", {}))
    known |= {f.name for f in dataclasses.fields(config_class)} if dataclasses.is_dataclass(config_class) else set()
    # Our configs declare `label_smoothing`; on a Hugging Face config it is kept as an extra field, and the training
    # loss (training/losses.py) honours it for every model, so the same recipe applies to BART.
    known.add("label_smoothing")
    smoothing = model_config.get("label_smoothing", 0.0)
    if isinstance(smoothing, bool) or not isinstance(smoothing, (int, float)) or not 0.0 <= smoothing < 1.0:
        raise ValueError(f"model_config label_smoothing={smoothing!r} must be a number in [0, 1).")
    unknown = sorted(set(model_config) - known)
    if unknown:
        hints = [
            f"{key!r} (did you mean {', '.join(map(repr, close))}?)"
            if (close := difflib.get_close_matches(key, sorted(known), n=2))
            else repr(key)
            for key in unknown
        ]
        raise ValueError(
            f"model_config has keys that {config_class.__name__} does not know: {', '.join(hints)}. "
            f"Model-config fields are the arguments of {config_class.__name__}."
        )
    try:  # the config's own checks (types, ranges, combinations), before the data and tokenizer are made
        AutoConfig.for_model(model_type, **model_config)
    except (TypeError, ValueError) as error:
        raise ValueError(f"Invalid model_config for model_type={model_type!r}: {error}") from error


def check_export_target(objective: Objective, model_type: str, model_config: dict, export_to: str | None) -> None:
    """Raise the ValueError of `hf-attention export` now, before data is read, when `--export_to` cannot be done
    for this model (a reference architecture already is standard; a configuration may have no standard equivalent)."""
    if export_to is None:
        return
    if model_type != objective.our_model_type:
        raise ValueError(
            f"--export_to writes an hf-attention model as a standard one; model_type={model_type!r} already is one "
            "(its final folder loads without hf-attention)."
        )
    from hf_attention.to_hf import exportable_as

    model = objective.auto_class.from_config(AutoConfig.for_model(model_type, **model_config))
    exportable_as(model, export_to)


def build_model(objective: Objective, model_type: str, model_config: dict, tokenizer):
    """A freshly initialised model of `model_type` for `objective`, sized to the tokenizer.

    The special-token ids come from the tokenizer (<pad>=0, <s>=1, </s>=2), so BART, GPT-2, BERT and ours agree.
    """
    fields = dict(model_config)
    fields.update(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    if objective.encoder_decoder:  # the decoder starts from <s>
        fields.setdefault("decoder_start_token_id", tokenizer.bos_token_id)
        if model_type != objective.our_model_type:
            fields.setdefault("forced_eos_token_id", tokenizer.eos_token_id)
    try:
        config = AutoConfig.for_model(model_type, **fields)
    except (TypeError, ValueError) as error:
        raise ValueError(f"Invalid model_config for model_type={model_type!r}: {error}") from error
    return objective.auto_class.from_config(config)


# ---------------------------------------------------------------------------------------------------- data


def split_corpus(objective: Objective, corpus: Dataset, data_args: DataArguments) -> DatasetDict:
    """Deterministic train / validation / test split by a hash of the (source) text, then the size caps."""
    splits = data_lib.split_dataset(corpus, key=objective.text_columns[0])
    caps = {
        "train": data_args.max_train_samples,
        "validation": data_args.max_eval_samples,
        "test": data_args.max_test_samples,
    }
    for name, cap in caps.items():
        if name not in splits or len(splits[name]) == 0:
            raise ValueError(f"The {name} split is empty ({len(corpus)} rows in the corpus); use more data.")
        if cap is not None:
            splits[name] = splits[name].select(range(min(cap, len(splits[name]))))
    if objective.scores_translations and data_args.heldout_catalog_packages:
        # The out-of-domain test: a source of catalogs never trained on, none of its strings in the corpus.
        splits["ood"] = data_lib.held_out_translation_set(
            data_args.target_lang,
            data_args.heldout_catalog_packages,
            seen=corpus["source"],
            max_chars=data_args.max_chars,
            max_rows=data_args.max_ood_samples,
        )
    return splits


def make_tokenizer(objective: Objective, train_split: Dataset, model_args: ModelArguments, data_args: DataArguments):
    """A tokenizer trained on every text column of the training split (one shared vocabulary for translation)."""
    texts = list(chain.from_iterable(train_split[column] for column in objective.text_columns))
    return train_tokenizer(
        texts,
        model_args.vocab_size,
        kind=objective.tokenizer_kind,
        min_frequency=model_args.tokenizer_min_frequency,
        keep_placeholders=model_args.tokenizer_keep_placeholders,
        model_max_length=objective.tokenizer_max_length(data_args),
    )
