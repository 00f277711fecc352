"""From the run's data arguments to an objective's corpus, its train / validation / test splits and its tokenizer.

The corpora (training/data.py reads them) are shared by the objectives: the Python documentation (causal and masked
LM), the gettext catalogs of pinned PyPI wheels as English → target pairs (translation), or the user's dataset with
the same columns.
"""

from __future__ import annotations

from itertools import chain
from pathlib import Path

from datasets import Dataset, DatasetDict
from transformers import AutoTokenizer

from training import data as data_lib
from training.objective import Objective
from training.tokenizer import train_tokenizer

# The embedded corpus of both language-model objectives, as the model card names and describes it.
PYTHON_DOCS = "python-docs"
PYTHON_DOCS_DESCRIPTION = "Paragraphs of the Python documentation topics shipped with CPython (`pydoc_data.topics`)"


def text_corpus(data_args) -> Dataset:
    """One `text` column: the Python documentation, or the user's dataset."""
    if data_args.dataset is None:
        return data_lib.python_docs_corpus(max_topics=data_args.max_topics)
    dataset = data_lib.select_columns(_load_user(data_args), {data_args.text_column: "text"})
    return data_lib.filter_texts(dataset, column="text", min_chars=data_args.min_chars)


def parallel_corpus(data_args) -> Dataset:
    """`source` / `target` pairs: the gettext catalogs (of the pinned wheels, and the machine's when asked), or the
    user's dataset (flat columns or a nested `translation` column)."""
    if data_args.dataset is None:
        return data_lib.translation_corpus(
            data_args.target_lang,
            max_chars=data_args.max_chars,
            max_catalogs=data_args.max_catalogs,
            packages=data_args.catalog_packages,
            machine=data_args.system_catalogs,
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


def _load_user(data_args) -> Dataset:
    source = data_args.dataset.split(",") if "," in data_args.dataset else data_args.dataset
    return data_lib.load_user_dataset(source, data_format=data_args.data_format, name=data_args.dataset_config_name)


def split_corpus(
    objective: Objective,
    corpus: Dataset,
    data_args,
    *,
    salt: str = "",
    shuffle_before_cap: bool = False,
    require_every_split: bool = True,
) -> DatasetDict:
    """Deterministic train / validation / test split by a hash of the (source) text, then the size caps.

    training.train splits unsalted, caps by taking the first rows and refuses an empty split; training.finetune
    salts the hash (`split_salt`), shuffles before capping (language-id rows are grouped by label) and lets an
    empty validation split skip evaluation. Both are kept as they were: they decide which rows a run sees.
    Last, an objective with `augment_train` adds its augmented rows to the training split only (translation: markup
    augmentation), none with a source of another split.
    """
    key = objective.data.text_columns[0]
    splits = data_lib.split_dataset(corpus, key=key, salt=salt)
    caps = {
        "train": data_args.max_train_samples,
        "validation": data_args.max_eval_samples,
        "test": data_args.max_test_samples,
    }
    for name, cap in caps.items():
        if require_every_split and (name not in splits or len(splits[name]) == 0):
            raise ValueError(f"The {name} split is empty ({len(corpus)} rows in the corpus); use more data.")
        if name in splits and cap is not None:
            if shuffle_before_cap:
                splits[name] = splits[name].shuffle(seed=0)
            splits[name] = splits[name].select(range(min(cap, len(splits[name]))))
    if objective.evaluation.scores_translations and data_args.heldout_catalog_packages:
        # The out-of-domain test: a source of catalogs never trained on, none of its strings in the corpus.
        splits["ood"] = data_lib.held_out_translation_set(
            data_args.target_lang,
            data_args.heldout_catalog_packages,
            seen=corpus["source"],
            max_chars=data_args.max_chars,
            max_rows=data_args.max_ood_samples,
        )
    if objective.data.augment_train is not None:
        held_out = {text for name, split in splits.items() if name != "train" for text in split[key]}
        splits["train"] = objective.data.augment_train(splits["train"], held_out, data_args)
    return splits


def make_tokenizer(
    objective: Objective,
    train_split: Dataset,
    data_args,
    *,
    vocab_size: int,
    min_frequency: int = 2,
    keep_placeholders: bool = True,
):
    """A tokenizer trained on every text column of the training split (one shared vocabulary for translation), or on
    the texts the objective makes of it (translation with placeholder protection: the protected pairs, and the
    sentinels as tokens)."""
    if objective.data.tokenizer_texts is not None:
        texts = list(objective.data.tokenizer_texts(train_split, data_args))
    else:
        texts = list(chain.from_iterable(train_split[column] for column in objective.data.text_columns))
    return train_tokenizer(
        texts,
        vocab_size,
        kind=objective.data.tokenizer_kind,
        min_frequency=min_frequency,
        keep_placeholders=keep_placeholders,
        placeholder_sentinels=uses_sentinels(objective, data_args),
        model_max_length=objective.data.tokenizer_max_length(data_args),
    )


def uses_sentinels(objective: Objective, data_args) -> bool:
    """Whether the run's tokenizer holds the placeholder sentinels (hf_attention/placeholders.py)."""
    return objective.data.placeholder_sentinels is not None and objective.data.placeholder_sentinels(data_args)


def saved_tokenizer(model_name_or_path: str | None):
    """The tokenizer saved in a checkpoint folder, or None when there is no folder or it holds no tokenizer."""
    if model_name_or_path and any(
        (Path(model_name_or_path) / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")
    ):
        return AutoTokenizer.from_pretrained(model_name_or_path)
    return None
