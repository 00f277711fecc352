"""The user's dataset: local text / json / csv / parquet files, or a Hub dataset, restricted to the columns a run
reads and filtered by length.

`load_user_dataset` reads the data (only a Hub dataset uses the network); `load_user_corpus` reads the one that the
run's `--dataset` names. `select_columns` keeps and renames columns, `filter_texts` drops rows by length. Every
failure names what the user can fix: the file, the line that is not UTF-8, the missing column and those that exist.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from datasets import Dataset, load_dataset

from training.dataset_checks import check_columns, raise_if_empty

# Extensions `load_user_dataset` understands, mapped to the 🤗 packaged builder that reads them.
FILE_FORMATS = {
    ".txt": "text",
    ".text": "text",
    ".json": "json",
    ".jsonl": "json",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
}


def load_user_corpus(data_args) -> Dataset:
    """The dataset `--dataset` names (comma-separated local files, or one file or Hub id), all its columns."""
    source = data_args.dataset.split(",") if "," in data_args.dataset else data_args.dataset
    return load_user_dataset(source, data_format=data_args.data_format, name=data_args.dataset_config_name)


def load_user_dataset(
    source: str | Sequence[str],
    *,
    columns: Sequence[str] | Mapping[str, str] | None = None,
    data_format: str | None = None,
    split: str = "train",
    name: str | None = None,
) -> Dataset:
    """Load a user's dataset: local text/json/csv/parquet files, or a Hub dataset (only then is the network used).

    Args:
        source: A local file, a list of local files, or a Hub dataset id such as "wmt/wmt14".
        columns: Columns to keep, or a mapping {existing column: new name} to keep and rename (e.g.
            {"en": "source", "de": "target"}). None keeps all columns. Text files have one column, "text".
        data_format: The 🤗 builder for local files ("text", "json", "csv", "parquet"); by default from the
            extension (.txt .json .jsonl .csv .tsv .parquet).
        split: Which split to return.
        name: The configuration of a Hub dataset (e.g. "de-en").

    Returns:
        The `Dataset`, restricted to (and renamed as) `columns`.

    Raises:
        ValueError: If a file or the Hub dataset does not exist, the format is unknown, the split or a column is
            missing.
    """
    paths = [source] if isinstance(source, str) else list(source)
    if data_format is not None or all(_looks_local(p) for p in paths):
        dataset = _load_local(paths, data_format, split)
    else:
        dataset = _load_hub(source, name, split)
    return select_columns(dataset, columns)


def _file_format(paths: Sequence[str]) -> str:
    """The 🤗 builder name for local `paths`, from their (common) extension."""
    formats = {FILE_FORMATS.get(Path(p).suffix.lower()) for p in paths}
    if None in formats or len(formats) != 1:
        raise ValueError(
            f"Cannot tell the format of {list(paths)}: use one of the extensions {sorted(FILE_FORMATS)} "
            f"for all files, or pass data_format= ('text', 'json', 'csv' or 'parquet')."
        )
    return formats.pop()


def _looks_local(name: str) -> bool:
    """Whether `name` is meant as a local path rather than a Hub dataset id ("owner/name" or "name")."""
    return Path(name).suffix.lower() in FILE_FORMATS or name.startswith((".", "/", "~")) or os.path.exists(name)


def _load_local(paths: Sequence[str], data_format: str | None, split: str) -> Dataset:
    """Read local files with the 🤗 packaged builder for their format."""
    paths = [os.path.expanduser(p) for p in paths]
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise ValueError(f"Data file not found: {missing[0]}")
    data_format = data_format or _file_format(paths)
    for path in paths:
        _check_readable(path, data_format)
    # .tsv goes through the csv builder, which needs to be told the delimiter.
    options = {"delimiter": "\t"} if data_format == "csv" and paths[0].lower().endswith(".tsv") else {}
    return load_dataset(data_format, data_files={split: paths}, split=split, **options)


def _check_readable(path: str, data_format: str) -> None:
    """Refuse an empty file, or a text-based one that is not UTF-8, naming the file (🤗 datasets would report a
    DatasetGenerationError that names neither)."""
    if os.path.getsize(path) == 0:
        raise ValueError(f"Data file {path} is empty.")
    if data_format == "parquet":
        return
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"Data file {path}, line {number}, is not UTF-8 text ({error.reason} at byte "
                    f"{error.start}): convert it to UTF-8 (e.g. iconv -t UTF-8)."
                ) from error


def _load_hub(dataset_id: str, name: str | None, split: str) -> Dataset:
    """Load `split` of a Hub dataset, turning "not found" and connection failures into a ValueError."""
    try:
        return load_dataset(dataset_id, name, split=split)
    except (FileNotFoundError, ConnectionError, OSError) as error:  # DatasetNotFoundError is a FileNotFoundError
        raise ValueError(f"Cannot load the dataset {dataset_id!r} (split {split!r}) from the Hub: {error}") from error
    except ValueError as error:  # e.g. an unknown split; re-raise with the dataset named
        raise ValueError(f"Cannot load the dataset {dataset_id!r} (split {split!r}): {error}") from error


def select_columns(dataset: Dataset, columns: Sequence[str] | Mapping[str, str] | None) -> Dataset:
    """Keep only `columns` (a list, or a mapping {existing: new name} that also renames); None keeps all.

    Raises:
        ValueError: If a column is missing, naming it and the columns that exist.
    """
    if columns is None:
        return dataset
    check_columns(dataset, columns)
    dataset = dataset.select_columns(list(columns))
    if isinstance(columns, Mapping):
        dataset = dataset.rename_columns({old: new for old, new in columns.items() if old != new})
    return dataset


def filter_texts(
    dataset: Dataset, *, column: str = "text", min_chars: int = 1, max_chars: int | None = None
) -> Dataset:
    """Drop rows whose stripped `column` is shorter than `min_chars` or longer than `max_chars` characters.

    Raises:
        ValueError: If `column` is missing, or nothing is left (naming the filters and the counts).
    """
    check_columns(dataset, [column])
    limit = max_chars if max_chars is not None else float("inf")
    kept = dataset.filter(
        lambda batch: [min_chars <= len((t or "").strip()) <= limit for t in batch[column]], batched=True
    )
    raise_if_empty(
        len(kept),
        f"dataset column {column!r}",
        {"read": len(dataset), "kept": 0},
        f"min_chars={min_chars}, max_chars={max_chars}",
    )
    return kept
