"""The embedded corpora that several objectives share, read at run time (never copied into the repository).

- The Python documentation: English prose (column `text`) from CPython's `pydoc_data.topics`, the default corpus of
  the causal and masked LM objectives (`text_corpus` reads it, or the user's text column instead).
- The machine's gettext catalogs (`/usr/share/locale/<lang>/LC_MESSAGES/*.mo`): raw (msgid, msgstr) pairs per
  language, which the translation and language-identification objectives read; they differ between machines. The
  pinned PyPI wheels' catalogs, the same on every machine, are training/data/catalogs.py's.
- The filters that clean UI strings of both kinds of catalogs (`clean_pair`, `filter_pairs`, `is_format_only`).

Each objective's own corpus (its columns, its labels) is built from these in its module under training/objectives/.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable
from itertools import chain
from pathlib import Path

from datasets import Dataset

from training.data.catalogs import parse_catalog
from training.data.dataset_checks import raise_if_empty
from training.data.user_data import filter_texts, load_user_corpus, select_columns

LOCALE_DIR = Path("/usr/share/locale")
# Eight widely translated languages, with many catalogs each; pt/pt_BR are left out because they confuse each other.
DEFAULT_LANGUAGES = ("de", "fr", "es", "it", "nl", "sv", "pl", "ru")

# The embedded corpus of both language-model objectives, as the model card names and describes it.
PYTHON_DOCS = "python-docs"
PYTHON_DOCS_DESCRIPTION = "Paragraphs of the Python documentation topics shipped with CPython (`pydoc_data.topics`)"

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
    raise_if_empty(
        len(texts),
        "Python documentation corpus",
        {"topics": len(names)},
        f"min_chars={min_chars}, keep_code={keep_code}",
    )
    return Dataset.from_dict({"text": texts})


def text_corpus(data_args) -> Dataset:
    """One `text` column: the Python documentation, or the user's dataset."""
    if data_args.dataset is None:
        return python_docs_corpus(max_topics=data_args.max_topics)
    dataset = select_columns(load_user_corpus(data_args, [data_args.text_column]), {data_args.text_column: "text"})
    return filter_texts(dataset, column="text", min_chars=data_args.min_chars)


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
