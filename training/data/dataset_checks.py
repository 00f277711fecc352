"""The two errors every data step raises the same way: a missing column, and a dataset its filters left empty.

Both name what the user can act on (the columns that exist; the filters and the counts before them), so a corpus
loader, a user file and a featurizer fail with the same kind of message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from datasets import Dataset


def check_columns(dataset: Dataset, columns: Iterable[str]) -> None:
    """Raise a ValueError naming the first missing column and the columns that exist."""
    for column in columns:
        if column not in dataset.column_names:
            raise ValueError(f"Column {column!r} not found; the dataset has columns {dataset.column_names}.")


def raise_if_empty(n_rows: int, what: str, counts: Mapping[str, int], filters: str) -> None:
    """Raise a ValueError naming the filters and their counts when a corpus came out empty."""
    if n_rows == 0:
        detail = ", ".join(f"{name}={count}" for name, count in counts.items())
        raise ValueError(f"The {what} is empty after filtering ({filters}); counts: {detail or 'nothing read'}.")
