"""The user's dataset: local text / json / csv / parquet files, or a Hub dataset, restricted to the columns a run
reads and filtered by length.

`load_user_dataset` reads the data (only a Hub dataset uses the network); `load_user_corpus` reads the one that the
run's `--dataset` names. `select_columns` keeps and renames columns, `filter_texts` drops rows by length. Every
failure names what the user can fix: the file and its line (not UTF-8, not JSON, a number where text belongs), the
missing column and those that exist, a file that is blank or not the format its name says; all before any training.
"""

from __future__ import annotations

import csv
import itertools
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pyarrow
import pyarrow.parquet
from datasets import Dataset, Value, load_dataset
from datasets.exceptions import DatasetGenerationError

from training.data.dataset_checks import check_columns, raise_if_empty

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
PARQUET_MAGIC = b"PAR1"  # the first and last four bytes of every Parquet file


def load_user_corpus(data_args, text_columns: Sequence[str] = ()) -> Dataset:
    """The dataset `--dataset` names (comma-separated local files, or one file or Hub id), all its columns; those of
    `text_columns` that it has must hold strings (see `load_user_dataset`)."""
    source = data_args.dataset.split(",") if "," in data_args.dataset else data_args.dataset
    return load_user_dataset(
        source, data_format=data_args.data_format, name=data_args.dataset_config_name, text_columns=text_columns
    )


def load_user_dataset(
    source: str | Sequence[str],
    *,
    columns: Sequence[str] | Mapping[str, str] | None = None,
    data_format: str | None = None,
    split: str = "train",
    name: str | None = None,
    text_columns: Sequence[str] = (),
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
        text_columns: Columns (before renaming) the caller reads as text: where the dataset has one, each value must
            be a string or null. A missing one is left to `columns` (or the caller) to name.

    Returns:
        The `Dataset`, restricted to (and renamed as) `columns`.

    Raises:
        ValueError: If a file or the Hub dataset does not exist, the format is unknown, a file cannot be read (naming
            it and the line), a text column holds values other than strings, the split or a column is missing.
    """
    paths = [source] if isinstance(source, str) else list(source)
    if data_format is not None or all(_looks_local(p) for p in paths):
        paths = [os.path.expanduser(p) for p in paths]
        data_format = data_format or _file_format(paths)
        dataset = _load_local(paths, data_format, split)
        where = _file_rows(paths, data_format)
    else:
        dataset = _load_hub(source, name, split)
        where = _hub_rows(source, split)
    check_text_columns(dataset, text_columns, where)
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


def _load_local(paths: Sequence[str], data_format: str, split: str) -> Dataset:
    """Read local files with the 🤗 packaged builder for their format; a file it cannot read is named, with the line
    where it can tell (pyarrow's own errors name neither)."""
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        raise ValueError(f"Data file not found: {missing[0]}")
    for path in paths:
        _check_readable(path, data_format)
    # .tsv goes through the csv builder, which needs to be told the delimiter.
    options = {"delimiter": "\t"} if _is_tsv(paths[0], data_format) else {}
    try:
        return load_dataset(data_format, data_files={split: paths}, split=split, **options)
    except (DatasetGenerationError, pyarrow.ArrowException, ValueError) as error:
        for path in paths if data_format == "json" else ():
            _raise_for_bad_json_lines(path, error)
        reason = error.__cause__ or error
        raise ValueError(f"Cannot read the data file(s) {list(paths)} as {data_format}: {reason}") from error


def _is_tsv(path: str, data_format: str) -> bool:
    return data_format == "csv" and path.lower().endswith(".tsv")


def _check_readable(path: str, data_format: str) -> None:
    """Refuse an empty file, a Parquet file that is none, or a text-based one that is not UTF-8 or holds only blank
    lines, naming the file (🤗 datasets would report an error that names neither, or "corresponds to no data")."""
    if os.path.getsize(path) == 0:
        raise ValueError(f"Data file {path} is empty.")
    if data_format == "parquet":
        _check_parquet_marker(path)
        return
    blank = True
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"Data file {path}, line {number}, is not UTF-8 text ({error.reason} at byte "
                    f"{error.start}): convert it to UTF-8 (e.g. iconv -t UTF-8)."
                ) from error
            blank = blank and not text.strip()
    if blank:
        raise ValueError(f"Data file {path} holds only blank lines ({number} of them): it has no row to read.")


def _check_parquet_marker(path: str) -> None:
    """A Parquet file begins and ends with PAR1; anything else is another format under a .parquet name."""
    with open(path, "rb") as f:
        head = f.read(len(PARQUET_MAGIC))
        f.seek(max(0, os.path.getsize(path) - len(PARQUET_MAGIC)))
        tail = f.read()
    if head != PARQUET_MAGIC or tail != PARQUET_MAGIC:
        raise ValueError(
            f"Data file {path} is not a Parquet file: it does not begin and end with the Parquet marker "
            f"{PARQUET_MAGIC!r} (it begins with {head!r}). Write it with pandas' to_parquet or pyarrow, or give its "
            "real format with --data_format (text, json, csv)."
        )


def _raise_for_bad_json_lines(path: str, error: Exception) -> None:
    """Name the first line of the JSON Lines file `path` that is not a JSON object, or whose value in a column is of
    another type than the column's first (pyarrow builds one type per column), if there is one.

    Only called when the json builder failed: a file that is one JSON document (an array of rows) is left alone."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        json.loads(text)
        return
    except json.JSONDecodeError:
        pass
    first_of: dict[str, tuple[int, object]] = {}  # column → (line, value) of its first value that is not null
    for number, line in enumerate(text.split("\n"), 1):  # not splitlines: a JSON string may hold U+2028
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as bad:
            raise ValueError(
                f"Data file {path}, line {number}, is not valid JSON ({bad.msg} at column {bad.colno}): each line "
                'of a JSON Lines file must be one JSON object such as {"text": "..."}.'
            ) from error
        if not isinstance(row, dict):
            raise ValueError(
                f"Data file {path}, line {number}, is {_described(row)}, not a JSON object: each line of a JSON "
                'Lines file must be one object such as {"text": "..."}.'
            ) from error
        _check_same_types(path, number, row, first_of, error)


def _check_same_types(path: str, number: int, row: dict, first_of: dict, error: Exception) -> None:
    """Raise for a value of `row` (line `number`) whose JSON type differs from its column's first value."""
    for column, value in row.items():
        if value is None:
            continue
        first_line, first = first_of.setdefault(column, (number, value))
        if _json_kind(value) != _json_kind(first):
            raise ValueError(
                f"Data file {path}, line {number}, column {column!r}: {_described(value)}, where line {first_line} "
                f"has {_described(first)}; every value of a column must be of one type (text columns: strings)."
            ) from error


def _json_kind(value) -> str:
    """The JSON type of a parsed value, ints and floats both "number" (pyarrow widens one to the other)."""
    if isinstance(value, bool):
        return "boolean"
    return "number" if isinstance(value, (int, float)) else type(value).__name__


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


# ------------------------------------------------------------------------------------------ text columns


def check_text_columns(dataset: Dataset, columns: Sequence[str], where: Callable[[int], str]) -> None:
    """Raise a ValueError for the first value of `columns` (those the dataset has) that is neither a string nor null,
    naming where it is (`where(row)`: the file and line), the column, the value and its type."""
    for column in columns:
        if column not in dataset.column_names or _holds_strings(dataset.features[column]):
            continue
        for row, value in enumerate(dataset[column]):
            if value is not None and not isinstance(value, str):
                raise ValueError(
                    f"{where(row)}, column {column!r}: {_described(value)}, where text is read; the values of a text "
                    "column must be strings (or null, which is skipped). Quote it or convert the column to strings."
                )


def _holds_strings(feature) -> bool:
    return isinstance(feature, Value) and feature.dtype in ("string", "large_string")


def _described(value) -> str:
    """A value as an error shows it: its (shortened) repr and its Python type."""
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    kind = type(value).__name__
    return f"{shown} ({'an' if kind[0] in 'aeiou' else 'a'} {kind})"


def _hub_rows(dataset_id: str, split: str) -> Callable[[int], str]:
    return lambda row: f"Hub dataset {dataset_id!r} (split {split!r}), row {row + 1}"


def _file_rows(paths: Sequence[str], data_format: str) -> Callable[[int], str]:
    """`where(row)`: the file and line (or row, in a binary file or a JSON document) of a row of the dataset read from
    `paths`, which the builders read in order. Only called on an error: it reads the files again."""

    def where(row: int) -> str:
        places = itertools.chain.from_iterable(_row_places(path, data_format) for path in paths)
        place = next(itertools.islice(places, row, None), None)
        return f"Data file {paths[0]}, row {row + 1}" if place is None else place

    return where


def _row_places(path: str, data_format: str) -> Iterator[str]:
    """Where each row the builder reads from `path` is ("Data file PATH, line N"), in order."""
    if data_format == "parquet":
        rows = pyarrow.parquet.ParquetFile(path).metadata.num_rows
        yield from (f"Data file {path}, row {row}" for row in range(1, rows + 1))
    elif data_format == "csv":
        yield from (f"Data file {path}, line {number}" for number in _csv_record_lines(path))
    elif data_format == "json" and not _is_json_lines(path):  # one JSON document: an array of rows
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
        yield from (f"Data file {path}, row {row}" for row in range(1, len(rows) + 1))
    else:  # text: every line is a row; JSON Lines: every line that is not blank
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if data_format == "text" or line.strip():
                    yield f"Data file {path}, line {number}"


def _csv_record_lines(path: str) -> Iterator[int]:
    """The line each data record of a CSV / TSV file starts on (after the header; blank lines are no record)."""
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.reader(f, delimiter="\t" if _is_tsv(path, "csv") else ",")
        next(reader, None)
        start = reader.line_num + 1
        for record in reader:
            if record:
                yield start
            start = reader.line_num + 1


def _is_json_lines(path: str) -> bool:
    """Whether `path` holds one JSON object per line (its first line that is not blank is a whole object)."""
    with open(path, encoding="utf-8") as f:
        first = next((line for line in f if line.strip()), "")
    try:
        return isinstance(json.loads(first), dict)
    except json.JSONDecodeError:
        return False
