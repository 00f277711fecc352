"""Language identification: which language a UI string of gettext catalogs is in, learnt by an encoder with a
classification head (`AutoModelForSequenceClassification`, our `HFAttentionForSequenceClassification`). The saved
folder loads with `pipeline("text-classification", model=DIR)` and answers with language codes (id2label / label2id
come from the corpus's `ClassLabel` names).

The catalogs are those inside pinned PyPI wheels (training/data/catalogs.py: fetched once into a cache, then read
offline), as the translation corpus's are, so the corpus is the same on every machine; the machine's own catalogs,
which differ between machines, are never read. Fine-tuned with 🤗 Trainer (training.finetune, the default task);
scored by accuracy and macro-F1.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import chain

from datasets import ClassLabel, Dataset, Features, Value
from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding

from training.data.catalogs import package_catalogs, parse_pin
from training.data.corpora import DEFAULT_LANGUAGES, filter_pairs
from training.data.dataset_checks import raise_if_empty
from training.data.splits import stable_hash
from training.finish.metrics import classification_metrics
from training.objective import FINETUNE, CardSpec, DataSpec, EvaluationSpec, ModelSpec, Objective

# The pinned wheels read when `catalog_packages` names none: each ships catalogs for every one of DEFAULT_LANGUAGES
# (gramps alone about 5,700 strings of 10 characters or more per language).
PACKAGES = (
    "gramps==6.0.8",
    "deluge==2.2.0",
    "gourmand==1.2.0",
    "solaar==1.1.20",
    "safeeyes==3.5.1",
    "sphinx==9.0.4",
)


def language_id_corpus(
    languages: Sequence[str] = DEFAULT_LANGUAGES,
    *,
    min_chars: int = 10,
    max_chars: int = 200,
    max_per_language: int | None = None,
    max_catalogs: int | None = None,
    packages: Sequence[str] = PACKAGES,
) -> Dataset:
    """Language identification of UI strings: the translations in each language's catalogs, labelled by language.

    Untranslated strings (identical to the English msgid) are dropped, so English never leaks into a label.
    Strings found in more than one language ("OK", "Status") are dropped too, because their label is ambiguous.

    Args:
        languages: Language codes; their order defines the label ids.
        min_chars: Drop shorter strings: a word or two rarely identifies a language.
        max_chars: Drop longer strings.
        max_per_language: Keep at most this many strings per language (those with the smallest stable hash, an
            unbiased and deterministic sample), which also balances the classes.
        max_catalogs: Read only the first `max_catalogs` of `packages` (for quick tests).
        packages: Pinned PyPI packages ("name==version") whose wheels' catalogs are read, in this order; a package
            without a catalog for a language adds nothing to it.

    Returns:
        A `Dataset` with columns `text` (string) and `label` (`ClassLabel(names=languages)`), grouped by label.

    Raises:
        ValueError: If a package is not pinned, a language is in none of the packages' catalogs, or no string
            survives the filters.
    """
    packages = list(packages)[:max_catalogs]
    for requirement in packages:
        parse_pin(requirement)  # a ValueError for an unpinned one, before any wheel is fetched
    by_language = {}
    for lang in languages:
        pairs, _ = filter_pairs(_package_pairs(packages, lang), max_chars=max_chars)
        by_language[lang] = {target for _, target in pairs if len(target) >= min_chars}
    seen_in = Counter(chain.from_iterable(by_language.values()))
    texts, labels = [], []
    for label, lang in enumerate(languages):
        # A salt of its own: sampling by the split's hash would put every sampled string into the training split.
        sample_order = lambda text: stable_hash(text, salt="language-id-sample")  # noqa: E731
        unique = sorted((t for t in by_language[lang] if seen_in[t] == 1), key=sample_order)[:max_per_language]
        texts += unique
        labels += [label] * len(unique)
    counts = {lang: len(by_language[lang]) for lang in languages}
    raise_if_empty(
        len(texts),
        "language identification corpus",
        counts,
        f"translated, {min_chars}-{max_chars} chars, in one language only",
    )
    features = Features({"text": Value("string"), "label": ClassLabel(names=list(languages))})
    return Dataset.from_dict({"text": texts, "label": labels}, features=features)


def _package_pairs(packages: Sequence[str], lang: str) -> list[tuple[str, str]]:
    """The raw (msgid, msgstr) pairs of `lang` in the wheels of `packages` (pinned already) that have catalogs for it.

    Raises:
        ValueError: If none of them has, naming the language and the packages.
    """
    pairs, found = [], False
    for requirement in packages:
        try:
            pairs += package_catalogs(requirement, lang).pairs
            found = True
        except ValueError:  # this wheel has no `lang` catalog (the pin was checked): the others may
            continue
    if not found:
        raise ValueError(
            f"No gettext catalog for language {lang!r} in the pinned packages {list(packages)}: remove {lang!r} from "
            "--languages, or name packages whose wheels ship it with --catalog_packages."
        )
    return pairs


def _codes(data_args) -> list[str]:
    return [lang.strip() for lang in data_args.languages.split(",") if lang.strip()]


def load_corpus(data_args):
    """A `text` column and its `label` (a ClassLabel of the language codes, in the order of `languages`)."""
    return language_id_corpus(
        _codes(data_args),
        min_chars=data_args.min_chars,
        max_chars=data_args.max_chars,
        max_per_language=data_args.max_per_language,
        max_catalogs=data_args.max_catalogs,
        packages=data_args.catalog_packages or PACKAGES,
    )


def check_arguments(data_args) -> None:
    """At least two distinct languages: a one-class classifier is always right."""
    if len(set(_codes(data_args))) < 2:
        raise ValueError(
            f"--languages={data_args.languages!r}: language identification needs at least two language "
            "codes (a one-class classifier is always right), e.g. 'de,fr,es'."
        )


def featurize(split, tokenizer, data_args):
    return split.map(
        lambda batch: tokenizer(batch["text"], truncation=True, max_length=data_args.max_length),
        batched=True,
        remove_columns=["text"],
    )


def make_collator(tokenizer, model, data_args):
    return DataCollatorWithPadding(tokenizer)


def label_fields(splits) -> dict:
    """The classifier's labels, named by their language codes."""
    labels = splits["train"].features["label"].names
    return {
        "num_labels": len(labels),
        "id2label": dict(enumerate(labels)),
        "label2id": {name: i for i, name in enumerate(labels)},
    }


def finetune_model_config(data_args) -> dict:
    """The small encoder training.finetune builds from scratch, positions for the longest input."""
    return {
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 256,
        "norm_position": "pre",
        "hidden_dropout_prob": 0.1,
        "classifier_pooling": "mean",
        "max_position_embeddings": data_args.max_length,
    }


OBJECTIVE = Objective(
    name="language_id",
    entry_points=(FINETUNE,),
    model=ModelSpec(
        our_model_type="hf_attention_encoder",
        auto_class=AutoModelForSequenceClassification,
        architecture="an encoder",
        example_model_types=("bert", "roberta"),
        encoder_decoder=False,
        config_from_data=label_fields,
        peft_task_type="SEQ_CLS",
        modules_to_save=("classifier",),  # the new head learns in full beside the adapter
        finetune_config=finetune_model_config,
    ),
    data=DataSpec(
        load_corpus=load_corpus,
        text_columns=("text",),
        tokenizer_kind="masked",
        tokenizer_max_length=lambda data_args: data_args.max_length,
        featurize=featurize,
        make_collator=make_collator,
        check_arguments=check_arguments,
    ),
    evaluation=EvaluationSpec(
        predicts_next_token=False,
        scores_translations=False,
        trainer_metrics=lambda tokenizer: classification_metrics,
        results_fields=lambda data_args, data_fields: {"labels": list(data_fields["id2label"].values())},
    ),
    card=CardSpec(
        default_dataset="gettext-catalogs",
        default_corpus_description="UI strings in the languages {languages} from the gettext catalogs inside pinned "
        "PyPI wheels (the same on every machine), labelled by language",
        pipeline_task="text-classification",
        task_name="Text classification",
        custom_pipeline=False,
        example="Datei konnte nicht geöffnet werden",
        intended_use="Telling which language a short user-interface string is in; research / teaching.",
    ),
    options=("languages", "max_per_language", "max_catalogs", "catalog_packages", "max_chars", "max_length"),
)
