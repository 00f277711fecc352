"""Deterministic train / validation / test splits by a stable hash of each row's key, and the checksum of their rows.

`split_dataset` splits by a stable hash of a key column (the source text), so a string never lands in two splits
and the split does not change between runs, machines or Python versions. `split_corpus` is a run's split of its
objective's corpus: the hash split, the size caps, the objective's extra test splits and its augmented training
rows. `corpus_checksum` is the SHA-256 of the rows read, which the model card and results.json record.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from datasets import Dataset, DatasetDict

from training.data.dataset_checks import check_columns
from training.objective import Objective

SPLITS = ("train", "validation", "test")
DEFAULT_FRACTIONS = (0.9, 0.05, 0.05)


def stable_hash(text: str, salt: str = "") -> int:
    """A 64-bit hash of `text` that is the same in every process (unlike `hash`, which is salted per run)."""
    return int.from_bytes(hashlib.blake2b((salt + text).encode("utf-8"), digest_size=8).digest(), "big")


def split_of(key: str, fractions: Sequence[float] = DEFAULT_FRACTIONS, *, salt: str = "") -> int:
    """The index of the split `key` belongs to: its stable hash mapped to [0, 1) against cumulative fractions."""
    position = stable_hash(key, salt) / 2**64
    total = 0.0
    for index, fraction in enumerate(fractions):
        total += fraction
        if position < total:
            return index
    return len(fractions) - 1  # rounding: the fractions may sum to 0.9999999


def _check_fractions(fractions: Sequence[float]) -> None:
    """Raise a ValueError unless `fractions` are three non-negative numbers summing to 1."""
    if len(fractions) != len(SPLITS) or any(f < 0 for f in fractions) or abs(sum(fractions) - 1) > 1e-6:
        raise ValueError(
            f"fractions must be {len(SPLITS)} non-negative numbers for {SPLITS} that sum to 1, got {tuple(fractions)}."
        )


def split_dataset(
    dataset: Dataset, *, key: str = "text", fractions: Sequence[float] = DEFAULT_FRACTIONS, salt: str = ""
) -> DatasetDict:
    """Split `dataset` into train / validation / test by a stable hash of the `key` column.

    Rows with the same key always land in the same split, whatever the row order or the other rows, so no source
    string is in two splits and adding data never moves a row already there to another split.

    Args:
        dataset: Any dataset with a string column `key`.
        key: The column to hash, e.g. "text", or "source" for pairs.
        fractions: Expected fractions of (train, validation, test); a zero fraction leaves that split out.
        salt: Prepended to every key, to draw a different (still deterministic) split.

    Returns:
        A `DatasetDict` with the splits whose fraction is positive, rows in their original order.

    Raises:
        ValueError: If `key` is not a column, or the fractions are invalid.
    """
    _check_fractions(fractions)
    check_columns(dataset, [key])
    indices: list[list[int]] = [[] for _ in SPLITS]
    for row, value in enumerate(dataset[key]):
        indices[split_of(value, fractions, salt=salt)].append(row)
    parts = zip(SPLITS, indices, fractions, strict=True)
    return DatasetDict({name: dataset.select(rows) for name, rows, fraction in parts if fraction > 0})


def corpus_checksum(splits: Mapping[str, Dataset], columns: Sequence[str]) -> str:
    """The SHA-256 of every split's `columns`, row by row in split order: two runs read the same data exactly when
    their checksums are equal (the model card records it, so a result can be checked on another machine)."""
    digest = hashlib.sha256()
    for name, split in splits.items():
        digest.update(f"[{name}]\n".encode())
        for column in columns:
            for text in split[column]:
                digest.update(str(text).encode("utf-8") + b"\0")
    return digest.hexdigest()


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
    salts the hash (`split_salt`), shuffles before capping (rows grouped by label would otherwise be capped to the
    first labels) and lets an empty validation split skip evaluation. The two must stay as they are: they decide
    which rows a run sees. Then the objective's extra test splits (`DataSpec.extra_splits`) are added, and last its
    augmented rows (`DataSpec.augment_train`) go into the training split only, none with a source of another split.
    """
    key = objective.data.text_columns[0]
    splits = split_dataset(corpus, key=key, salt=salt)
    caps = {
        "train": data_args.max_train_samples,
        "validation": data_args.max_eval_samples,
        "test": data_args.max_test_samples,
    }
    for name, cap in caps.items():
        if require_every_split and (name not in splits or len(splits[name]) == 0):
            raise ValueError(empty_split_message(name, corpus, key))
        if name in splits and cap is not None:
            if shuffle_before_cap:
                splits[name] = splits[name].shuffle(seed=0)
            splits[name] = splits[name].select(range(min(cap, len(splits[name]))))
    if objective.data.extra_splits is not None:
        splits.update(objective.data.extra_splits(corpus, data_args))
    if objective.data.augment_train is not None:
        held_out = {text for name, split in splits.items() if name != "train" for text in split[key]}
        splits["train"] = objective.data.augment_train(splits["train"], held_out, data_args)
    return splits


def empty_split_message(name: str, corpus: Dataset, key: str) -> str:
    """Why split `name` came out empty. Rows with the same `key` always land in the same split, so a corpus of
    copies is split as its few distinct rows: say so, rather than ask for more of the same rows."""
    distinct = len(set(corpus[key]))
    if distinct < len(corpus):
        return (
            f"The {name} split is empty: the corpus has {len(corpus)} rows but only {distinct} distinct {key!r} "
            f"value(s) ({len(corpus) - distinct} duplicates), and rows with the same {key!r} always land in the same "
            "split; use more distinct data."
        )
    return f"The {name} split is empty ({len(corpus)} rows in the corpus); use more data."
