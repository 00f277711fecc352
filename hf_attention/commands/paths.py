"""Checks of checkpoint paths and texts given on the command line (or to the loading helpers), done before any
loading.

A name is either a local folder or a Hub id ("name" or "owner/name"). transformers tries a missing folder as a Hub id,
which gives a confusing repo-id error, or network retries for a relative path such as `runs/x/final`. A name that
looks like a path is therefore checked here first: no such folder, a file instead of a folder, or a folder that is
not a checkpoint each get a clear error that names the argument.

This module is not shipped with checkpoints.
"""

import os
import re
from pathlib import Path

# Files of which at least one is in every saved tokenizer (fast or slow, BPE, WordPiece or SentencePiece).
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "vocab.txt",
    "tokenizer.model",
    "spiece.model",
    "source.spm",
    "sentencepiece.bpe.model",
)

# One part of a Hub id: letters, digits, "-", "_" and ".", not starting or ending with "-" or ".".
_HUB_ID_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?")


def looks_like_local_path(name: str) -> bool:
    """Whether `name` can only mean a local path, not a Hub id.

    True when it exists; starts with ".", "/" or "~"; holds a backslash, a ":" or more than one "/"; is not a valid
    "name" / "owner/name" Hub id; or its first part exists locally (`runs/final` when a `runs` folder is here).
    """
    if os.path.lexists(name) or name.startswith((".", "/", "~")) or "\\" in name or ":" in name:
        return True
    if os.altsep and os.altsep in name:
        return True
    parts = name.split("/")
    if len(parts) > 2 or not all(_HUB_ID_PART.fullmatch(part) and ".." not in part for part in parts):
        return True
    return len(parts) == 2 and os.path.lexists(parts[0])


def check_checkpoint(name: str | os.PathLike, *, argument: str, tokenizer: bool = False) -> str:
    """Return the checkpoint `name` to load (with "~" expanded), or raise a ValueError that names `argument`.

    A Hub id is returned unchanged (it cannot be checked without a network). A local path must be a folder holding a
    config.json and, when `tokenizer` is true, a saved tokenizer.
    """
    name = os.fspath(name)
    if not name.strip():
        raise ValueError(f"{argument} is empty: pass a checkpoint folder or a Hub id (owner/name).")
    if not looks_like_local_path(name):
        return name
    path = Path(name).expanduser()
    if not path.exists():
        missing = next((str(p) for p in reversed([path, *path.parents]) if not p.exists()), name)
        detail = "" if missing == str(path) else f" ({missing} does not exist)"
        raise ValueError(f"{argument}: no such folder: {name}{detail}")
    if not path.is_dir():
        raise ValueError(
            f"{argument}: {name} is a file, not a checkpoint folder; pass the folder that holds config.json."
        )
    if not (path / "config.json").is_file():
        raise ValueError(
            f"{argument}: {name} has no config.json, so it is not a checkpoint folder (save one with "
            "model.save_pretrained)."
        )
    if tokenizer and not any((path / file).is_file() for file in TOKENIZER_FILES):
        raise ValueError(
            f"{argument}: {name} holds no tokenizer (none of {', '.join(TOKENIZER_FILES)}); save it "
            "there with tokenizer.save_pretrained."
        )
    return str(path)


def output_file(path: str | os.PathLike, *, default_name: str, suffixes: tuple[str, ...], what: str) -> Path:
    """The file to write for an output argument `path`, or a ValueError naming what is wrong.

    An existing folder, or a name ending with a path separator, gets `default_name` inside it; a name without a
    suffix gets `suffixes[0]`; another suffix than `suffixes` is refused; a parent that is a file is refused.

    Args:
        path: What the user gave.
        default_name: The file written inside a folder.
        suffixes: Allowed suffixes, lower case with the dot, the default first.
        what: What is written, for the messages (e.g. "an HTML page").
    """
    name = os.fspath(path)
    if not name.strip():
        raise ValueError(f"The output path is empty: pass a {suffixes[0]} file name.")
    file = Path(name).expanduser()
    if file.is_dir() or name.endswith(("/", os.sep)) or (os.altsep and name.endswith(os.altsep)):
        file = file / default_name
    elif not file.suffix:
        file = file.with_name(file.name + suffixes[0])
    if file.suffix.lower() not in suffixes:
        raise ValueError(
            f"Cannot write {name}: {file.suffix!r} is not a file type for {what}; use a name ending "
            f"in {', '.join(suffixes)}."
        )
    existing = next(parent for parent in file.parents if parent.exists())  # "." at worst
    if not existing.is_dir():
        raise ValueError(f"Cannot write {name}: {existing} is a file, not a folder.")
    return file


def check_text_argument(argument: str, value: str | None, *, what: str = "text") -> None:
    """Raise ValueError when a text given on the command line is not valid UTF-8 (Python keeps such bytes as lone
    surrogates in sys.argv, which tokenizers then reject with a traceback, and which no model card or JSON file can
    hold). `what` says what the value is ("text", "folder name"), for the message."""
    if value is None:
        return
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raw = value.encode("utf-8", "surrogateescape")
        position = len(value[: error.start].encode("utf-8", "surrogateescape"))
        shown = raw.decode("utf-8", "backslashreplace")
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise ValueError(
            f"{argument} is not valid UTF-8 ({shown}: byte 0x{raw[position]:02x} at byte {position}); pass the {what} "
            "in UTF-8."
        ) from None
