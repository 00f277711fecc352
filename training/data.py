"""The data layer of the training pipeline: corpora, deterministic splits, user data and tokenisation.

Everything is a 🤗 `datasets.Dataset` / `DatasetDict`. The embedded default corpora are read at run time (never
copied into the repository):

- `python_docs_corpus()`: English prose (column `text`) from CPython's `pydoc_data.topics`, for causal / masked LM.
- `translation_corpus(lang, packages=…)`: English → `lang` pairs (columns `source`, `target`) from the gettext
  catalogs inside pinned PyPI wheels (`training.catalogs`; fetched once, then read offline): the same kind of data as
  the OPUS GNOME/KDE/Ubuntu corpora, and the same on every machine. With `machine=True`, also the machine's own
  catalogs in `/usr/share/locale/<lang>/LC_MESSAGES/*.mo`, which differ between machines.
- `corpus_checksum(splits, columns)`: the SHA-256 of the rows read, which the model card records.
- `held_out_translation_set(lang, packages, seen=…)`: an out-of-domain test set from catalogs never trained on.
- `language_id_corpus(languages)`: which language a UI string is in (columns `text`, `label` with a `ClassLabel`).

`split_dataset` splits by a stable hash of a key column (the source text), so a string never lands in two splits
and the split does not change between runs, machines or Python versions. `load_user_dataset` reads a Hub dataset or
local text/json/csv/parquet files. `causal_lm_features`, `masked_lm_features` and `translation_features` turn texts
into model inputs for the three objectives with any Hugging Face tokenizer.

Translation columns are flat `source` / `target` strings rather than HF's nested `translation` dict, because the
corpora here are always English → one language; `flatten_translation` converts a nested Hub dataset into this form.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate, chain
from pathlib import Path

from datasets import ClassLabel, Dataset, DatasetDict, Features, Value, load_dataset

from hf_attention.placeholders import protect_pair
from training.catalogs import package_catalogs, parse_catalog

LOCALE_DIR = Path("/usr/share/locale")
SPLITS = ("train", "validation", "test")
DEFAULT_FRACTIONS = (0.9, 0.05, 0.05)
# Eight languages with 57-87 catalogs each on our machines; pt/pt_BR are left out because they confuse each other.
DEFAULT_LANGUAGES = ("de", "fr", "es", "it", "nl", "sv", "pl", "ru")

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

# printf and strftime (%s, %1$d, %-10.3lf, %H, %%), brace ({0}, {name}), shell (${var}, $1) and Qt (%1)
# placeholders, and markup tags.
_PLACEHOLDER = re.compile(
    r"%(?:\d+\$)?[-+ #0'_^]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t|I64|E|O)?[A-Za-z%]"
    r"|%\d+|\{[^{}]*\}|\$\{[^}]*\}|\$\w+|<[^<>]*>"
)


# --------------------------------------------------------------------------------------------------- filters


def is_format_only(text: str) -> bool:
    """Whether `text` has no words once placeholders, markup, digits and punctuation are removed.

    Strings like "%s", "%d: %s", "{0} / {1}" or "<b>%s</b>" teach a model nothing about language, and their
    "translations" are copies, so they are dropped from the parallel and classification corpora.

    Args:
        text: A UI string.

    Returns:
        True if no alphabetic character is left after stripping placeholders and markup.
    """
    return not any(ch.isalpha() for ch in _PLACEHOLDER.sub("", text))


def clean_pair(source: str, target: str, *, max_chars: int = 200) -> tuple[str, str] | str:
    """Normalise one catalog entry, or say which filter drops it.

    Args:
        source: The English msgid (a msgctxt prefix "context\\x04" is stripped here).
        target: The translated msgstr.
        max_chars: Longest source or target kept, in characters.

    Returns:
        The stripped `(source, target)` pair, or the name of the filter that rejects it: "empty", "multi_line",
        "format_only", "untranslated" (target identical to source) or "too_long".
    """
    source = source.split("\x04", 1)[-1].strip()
    target = target.strip()
    if not source or not target:
        return "empty"
    if "\n" in source or "\n" in target:
        return "multi_line"
    if is_format_only(source) or is_format_only(target):
        return "format_only"
    if source == target:
        return "untranslated"
    if len(source) > max_chars or len(target) > max_chars:
        return "too_long"
    return source, target


def filter_pairs(pairs: Iterable[tuple[str, str]], *, max_chars: int = 200) -> tuple[list[tuple[str, str]], Counter]:
    """Clean `pairs` and keep the first translation of every source string.

    Args:
        pairs: (English source, translation) pairs in a deterministic order.
        max_chars: Longest source or target kept, in characters.

    Returns:
        The kept pairs and a `Counter` with the number read ("read"), kept ("kept") and dropped by each filter
        (the names `clean_pair` returns, plus "duplicate").
    """
    kept: dict[str, str] = {}
    counts: Counter = Counter()
    for source, target in pairs:
        counts["read"] += 1
        result = clean_pair(source, target, max_chars=max_chars)
        if isinstance(result, str):
            counts[result] += 1
        elif result[0] in kept:
            counts["duplicate"] += 1
        else:
            kept[result[0]] = result[1]
    counts["kept"] = len(kept)
    return list(kept.items()), counts


def _raise_if_empty(n_rows: int, what: str, counts: Mapping[str, int], filters: str) -> None:
    """Raise a ValueError naming the filters and their counts when a corpus came out empty."""
    if n_rows == 0:
        detail = ", ".join(f"{name}={count}" for name, count in counts.items())
        raise ValueError(f"The {what} is empty after filtering ({filters}); counts: {detail or 'nothing read'}.")


# ------------------------------------------------------------------------------------- English prose (pydoc)


def split_paragraphs(text: str, *, min_chars: int = 80, keep_code: bool = False) -> list[str]:
    """Split documentation text into paragraph-sized chunks.

    Args:
        text: Plain text with paragraphs separated by blank lines (the pydoc topics format).
        min_chars: Shorter chunks are dropped: headings, "*****" underlines and one-line fragments.
        keep_code: Keep chunks whose lines are all indented (code examples, grammar productions).

    Returns:
        The chunks. Prose is unwrapped to one line, because its line breaks are only the 70-column formatting;
        code keeps its lines.
    """
    chunks = []
    for block in re.split(r"\n[ \t]*\n", text):
        lines = [line for line in block.split("\n") if line.strip()]
        if not lines:
            continue
        is_code = all(line[:1].isspace() for line in lines)
        if is_code and not keep_code:
            continue
        chunk = "\n".join(lines).strip() if is_code else " ".join(line.strip() for line in lines)
        if len(chunk) >= min_chars and not is_format_only(chunk):
            chunks.append(chunk)
    return chunks


def python_docs_corpus(*, min_chars: int = 80, keep_code: bool = False, max_topics: int | None = None) -> Dataset:
    """English prose from the Python documentation topics that ship with CPython (`pydoc_data.topics`).

    Args:
        min_chars: Drop chunks shorter than this.
        keep_code: Keep indented code and grammar blocks too.
        max_topics: Read only the first `max_topics` topics in sorted order (for quick tests).

    Returns:
        A `Dataset` with one column `text`, one paragraph per row, in topic order.

    Raises:
        ValueError: If no chunk survives the filters.
    """
    from pydoc_data.topics import topics  # imported here: the module holds ~0.5 MB of text

    names = sorted(topics)[:max_topics]
    texts = list(
        chain.from_iterable(split_paragraphs(topics[n], min_chars=min_chars, keep_code=keep_code) for n in names)
    )
    _raise_if_empty(
        len(texts),
        "Python documentation corpus",
        {"topics": len(names)},
        f"min_chars={min_chars}, keep_code={keep_code}",
    )
    return Dataset.from_dict({"text": texts})


# ------------------------------------------------------------------------------------ gettext catalogs


def available_languages(locale_dir: str | os.PathLike = LOCALE_DIR) -> list[str]:
    """Language codes with at least one compiled gettext catalog under `locale_dir`, sorted."""
    root = Path(locale_dir)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if any((p / "LC_MESSAGES").glob("*.mo")))


def catalog_paths(
    lang: str, *, locale_dir: str | os.PathLike = LOCALE_DIR, max_catalogs: int | None = None
) -> list[Path]:
    """The `.mo` files of `lang`, sorted by name so every run reads them in the same order.

    Args:
        lang: A locale directory name such as "de" or "pt_BR".
        locale_dir: The locale root (default /usr/share/locale).
        max_catalogs: Return only the first `max_catalogs` files (for quick tests).

    Raises:
        ValueError: If there is no catalog for `lang`, naming the directory searched and the languages found.
    """
    paths = sorted((Path(locale_dir) / lang / "LC_MESSAGES").glob("*.mo"))[:max_catalogs]
    if not paths:
        found = available_languages(locale_dir)
        raise ValueError(
            f"No gettext catalogs (*.mo) for language {lang!r} in {Path(locale_dir) / lang / 'LC_MESSAGES'}; "
            f"languages with catalogs: {', '.join(found) or 'none'}."
        )
    return paths


def read_catalog(path: str | os.PathLike) -> list[tuple[str, str]]:
    """The (msgid, msgstr) pairs of one compiled gettext catalog file (see `parse_catalog`); an empty list if the file
    cannot be read."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return []
    return parse_catalog(data)


def read_pairs(
    lang: str, *, locale_dir: str | os.PathLike = LOCALE_DIR, max_catalogs: int | None = None
) -> list[tuple[str, str]]:
    """All raw (msgid, msgstr) pairs of `lang`, catalogs in sorted order (see `catalog_paths`, `read_catalog`)."""
    paths = catalog_paths(lang, locale_dir=locale_dir, max_catalogs=max_catalogs)
    return list(chain.from_iterable(read_catalog(p) for p in paths))


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
            machine's (`training.catalogs`); where a source string is in both, the machine's translation is kept.
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
    _raise_if_empty(
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
        rows = sorted(sorted(rows, key=lambda i: _stable_hash(sources[i], "ood"))[:max_rows])
    if not rows:
        raise ValueError(
            f"The held-out catalogs {list(packages)} have no pair whose source is not in the training data."
        )
    return corpus.select(rows)


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


def _stable_hash(text: str, salt: str = "") -> int:
    """A 64-bit hash of `text` that is the same in every process (unlike `hash`, which is salted per run)."""
    return int.from_bytes(hashlib.blake2b((salt + text).encode("utf-8"), digest_size=8).digest(), "big")


def language_id_corpus(
    languages: Sequence[str] = DEFAULT_LANGUAGES,
    *,
    min_chars: int = 10,
    max_chars: int = 200,
    max_per_language: int | None = None,
    max_catalogs: int | None = None,
    locale_dir: str | os.PathLike = LOCALE_DIR,
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
        max_catalogs: Read only the first `max_catalogs` catalogs of each language (for quick tests).
        locale_dir: The locale root (default /usr/share/locale).

    Returns:
        A `Dataset` with columns `text` (string) and `label` (`ClassLabel(names=languages)`), grouped by label.

    Raises:
        ValueError: If a language has no catalogs, or no string survives the filters.
    """
    by_language = {}
    for lang in languages:
        pairs, _ = filter_pairs(
            read_pairs(lang, locale_dir=locale_dir, max_catalogs=max_catalogs), max_chars=max_chars
        )
        by_language[lang] = {target for _, target in pairs if len(target) >= min_chars}
    seen_in = Counter(chain.from_iterable(by_language.values()))
    texts, labels = [], []
    for label, lang in enumerate(languages):
        # A salt of its own: sampling by the split's hash would put every sampled string into the training split.
        sample_order = lambda text: _stable_hash(text, salt="language-id-sample")  # noqa: E731
        unique = sorted((t for t in by_language[lang] if seen_in[t] == 1), key=sample_order)[:max_per_language]
        texts += unique
        labels += [label] * len(unique)
    counts = {lang: len(by_language[lang]) for lang in languages}
    _raise_if_empty(
        len(texts),
        "language identification corpus",
        counts,
        f"translated, {min_chars}-{max_chars} chars, in one language only",
    )
    features = Features({"text": Value("string"), "label": ClassLabel(names=list(languages))})
    return Dataset.from_dict({"text": texts, "label": labels}, features=features)


# ------------------------------------------------------------------------------------------------ splits


def split_of(key: str, fractions: Sequence[float] = DEFAULT_FRACTIONS, *, salt: str = "") -> int:
    """The index of the split `key` belongs to: its stable hash mapped to [0, 1) against cumulative fractions."""
    position = _stable_hash(key, salt) / 2**64
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
    string is in two splits and adding data never moves an old row to another split.

    Args:
        dataset: Any dataset with a string column `key`.
        key: The column to hash, e.g. "text" or "source" (for translation).
        fractions: Expected fractions of (train, validation, test); a zero fraction leaves that split out.
        salt: Prepended to every key, to draw a different (still deterministic) split.

    Returns:
        A `DatasetDict` with the splits whose fraction is positive, rows in their original order.

    Raises:
        ValueError: If `key` is not a column, or the fractions are invalid.
    """
    _check_fractions(fractions)
    _check_columns(dataset, [key])
    indices: list[list[int]] = [[] for _ in SPLITS]
    for row, value in enumerate(dataset[key]):
        indices[split_of(value, fractions, salt=salt)].append(row)
    parts = zip(SPLITS, indices, fractions, strict=True)
    return DatasetDict({name: dataset.select(rows) for name, rows, fraction in parts if fraction > 0})


# -------------------------------------------------------------------------------------------- user data


def _check_columns(dataset: Dataset, columns: Iterable[str]) -> None:
    """Raise a ValueError naming the first missing column and the columns that exist."""
    for column in columns:
        if column not in dataset.column_names:
            raise ValueError(f"Column {column!r} not found; the dataset has columns {dataset.column_names}.")


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
    _check_columns(dataset, columns)
    dataset = dataset.select_columns(list(columns))
    if isinstance(columns, Mapping):
        dataset = dataset.rename_columns({old: new for old, new in columns.items() if old != new})
    return dataset


def flatten_translation(
    dataset: Dataset, source_lang: str, target_lang: str, *, column: str = "translation"
) -> Dataset:
    """Turn a HF-style nested `translation` column ({"en": ..., "de": ...}) into flat `source` / `target` columns.

    Raises:
        ValueError: If the column or one of the languages is missing.
    """
    _check_columns(dataset, [column])
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


def filter_texts(
    dataset: Dataset, *, column: str = "text", min_chars: int = 1, max_chars: int | None = None
) -> Dataset:
    """Drop rows whose stripped `column` is shorter than `min_chars` or longer than `max_chars` characters.

    Raises:
        ValueError: If `column` is missing, or nothing is left (naming the filters and the counts).
    """
    _check_columns(dataset, [column])
    limit = max_chars if max_chars is not None else float("inf")
    kept = dataset.filter(
        lambda batch: [min_chars <= len((t or "").strip()) <= limit for t in batch[column]], batched=True
    )
    _raise_if_empty(
        len(kept),
        f"dataset column {column!r}",
        {"read": len(dataset), "kept": 0},
        f"min_chars={min_chars}, max_chars={max_chars}",
    )
    return kept


# ------------------------------------------------------------------------------------------- tokenisation


def causal_lm_features(dataset: Dataset, tokenizer, *, block_size: int, text_column: str = "text") -> Dataset:
    """Tokenise texts and pack them into blocks of exactly `block_size` tokens for causal LM training.

    Each text ends with the tokenizer's eos token (when it has one), so the model learns where a document stops;
    texts are then concatenated and cut into blocks, and the tail of each `map` batch that does not fill a block
    is dropped (at most `block_size - 1` tokens per 1000 texts). `labels` equal `input_ids`: the model shifts them.

    Args:
        dataset: A dataset with a string column `text_column`.
        tokenizer: Any Hugging Face tokenizer.
        block_size: Tokens per training example.
        text_column: The column holding the text.

    Returns:
        A `Dataset` with columns `input_ids`, `attention_mask` and `labels`, every row `block_size` long.

    Raises:
        ValueError: If the column is missing or the texts are too short to fill one block.
    """
    _check_columns(dataset, [text_column])
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []

    def pack(batch):
        ids = tokenizer(batch[text_column], add_special_tokens=True)["input_ids"]
        stream = list(chain.from_iterable(row + eos if row[-1:] != eos else row for row in ids))
        blocks = [stream[i : i + block_size] for i in range(0, len(stream) - block_size + 1, block_size)]
        return {
            "input_ids": blocks,
            "attention_mask": [[1] * block_size for _ in blocks],
            "labels": [list(block) for block in blocks],
        }

    packed = dataset.map(pack, batched=True, remove_columns=dataset.column_names)
    _raise_if_empty(
        len(packed),
        f"causal LM dataset (block_size={block_size})",
        {"texts": len(dataset)},
        "texts packed into full blocks",
    )
    return packed


def causal_lm_document_features(
    dataset: Dataset, tokenizer, *, block_size: int, packed: bool, text_column: str = "text"
) -> Dataset:
    """Causal LM rows that keep documents apart: one text per row (`packed=False`, padded per batch), or texts laid
    end to end in rows of exactly `block_size` tokens with positions restarting at each (`packed=True`).

    A document never sees another: its first token is not predicted from what precedes it (label -100) and it
    attends only to itself. Unpadded, each text (+ eos) is cut into pieces of at most `block_size` tokens, a row
    each. Packed, texts (+ eos) are concatenated and cut into full rows, as in the `blocks` layout, but
    `position_ids` restart at 0 at every text start and every row start, which is how the models (and
    transformers' own) tell packed documents apart: no padding token, no attention mask, no attention across texts.
    The tail of each `map` batch that does not fill a row is dropped.

    Returns:
        A `Dataset` with `input_ids` and `labels` (and `position_ids` when packed).
    """
    _check_columns(dataset, [text_column])
    eos = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []

    def texts_of(batch) -> list[list[int]]:
        ids = tokenizer(batch[text_column], add_special_tokens=True)["input_ids"]
        return [row + eos if row[-1:] != eos else row for row in ids if row]

    def padded_rows(batch):
        pieces = [text[i : i + block_size] for text in texts_of(batch) for i in range(0, len(text), block_size)]
        pieces = [piece for piece in pieces if len(piece) > 1]  # a one-token piece has nothing to predict
        return {"input_ids": pieces, "labels": [[-100, *piece[1:]] for piece in pieces]}

    def packed_rows(batch):
        texts = texts_of(batch)
        stream = list(chain.from_iterable(texts))
        text_starts = set(accumulate((len(text) for text in texts[:-1]), initial=0))
        out = {"input_ids": [], "labels": [], "position_ids": []}
        for row_start in range(0, len(stream) - block_size + 1, block_size):
            positions, labels, position = [], [], 0
            for i in range(row_start, row_start + block_size):
                if i == row_start or i in text_starts:  # a document starts: positions restart, no target
                    position = 0
                positions.append(position)
                labels.append(stream[i] if position else -100)
                position += 1
            out["input_ids"].append(stream[row_start : row_start + block_size])
            out["position_ids"].append(positions)
            out["labels"].append(labels)
        return out

    features = dataset.map(packed_rows if packed else padded_rows, batched=True, remove_columns=dataset.column_names)
    _raise_if_empty(
        len(features),
        f"causal LM dataset (block_size={block_size})",
        {"texts": len(dataset)},
        "texts of at least two tokens" if not packed else "texts packed into full rows",
    )
    return features


def masked_lm_features(dataset: Dataset, tokenizer, *, max_length: int, text_column: str = "text") -> Dataset:
    """Tokenise and truncate texts for masked LM; `DataCollatorForLanguageModeling` pads and masks per batch.

    Masking at batch time (not here) draws new masks every epoch. `special_tokens_mask` lets the collator avoid
    masking <s>, </s> and padding.

    Args:
        dataset: A dataset with a string column `text_column`.
        tokenizer: Any Hugging Face tokenizer.
        max_length: Longest sequence, special tokens included.
        text_column: The column holding the text.

    Returns:
        A `Dataset` with `input_ids`, `attention_mask` and `special_tokens_mask` (variable length).
    """
    _check_columns(dataset, [text_column])
    return dataset.map(
        lambda batch: tokenizer(
            batch[text_column], truncation=True, max_length=max_length, return_special_tokens_mask=True
        ),
        batched=True,
        remove_columns=dataset.column_names,
    )


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
        protect_placeholders: Tokenise each pair protected (`hf_attention.placeholders.protect_pair`): placeholders
            become sentinels, the same one on both sides; the tokenizer must hold the sentinels.

    Returns:
        A `Dataset` with `input_ids`, `attention_mask` and `labels` (variable length).
    """
    _check_columns(dataset, [source_column, target_column])

    def encode(batch):
        sources, targets = batch[source_column], batch[target_column]
        if protect_placeholders:
            pairs = [protect_pair(source, target) for source, target in zip(sources, targets, strict=True)]
            sources, targets = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
        features = tokenizer(sources, truncation=True, max_length=max_source_length)
        labels = tokenizer(text_target=targets, truncation=True, max_length=max_target_length)
        return {**features, "labels": labels["input_ids"]}

    return dataset.map(encode, batched=True, remove_columns=dataset.column_names)
