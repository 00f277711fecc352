"""The shipped code: the files of this folder, which a checkpoint carries so that `trust_remote_code=True` loads it
where hf_attention is not installed.

The folder holds exactly that code and nothing else, flat (transformers copies a checkpoint's code flat and follows
only `from .module import Name`): the configurations, the model families, the translation pipeline and every sibling
they import, each importing only the standard library, torch, transformers and its siblings. `save_pretrained`
(pretrained.py) copies every file of it beside the weights, whichever family is saved, and `hf-attention
refresh-code` replaces a checkpoint's copy with the installed one. A checkpoint's own copy is read by following its
imports from the entry files (`import_closure`), so that one saved by an older release is read as that release wrote
it.

This file is part of the shipped code: it imports only the standard library.
"""

import ast
import os
import shutil
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# The configurations, the module that imports every family and the translation pipeline: with their imports, every
# class an auto_map or custom_pipelines entry names, and so every file of this folder.
ENTRY_FILES = ("configuration_hf_attention.py", "modeling_hf_attention.py", "pipelines.py")


def closure_files(package: Path = PACKAGE) -> list[str]:
    """The shipped files of `package` (default: this folder), sorted by name: every module but the package's own
    `__init__.py`, which only makes the folder importable as `hf_attention.modeling`."""
    return sorted(path.name for path in package.glob("*.py") if path.name != "__init__.py")


def import_closure(folder: Path, entries) -> set[str]:
    """The files among `entries` that exist in `folder`, and every sibling they import (`from .x import y`), found by
    following the imports of each file reached (a checkpoint's shipped code is found the same way)."""
    found, todo = set(), list(entries)
    while todo:
        name = todo.pop()
        if name in found or name != Path(name).name or not (folder / name).is_file():  # (a name, never a path)
            continue
        found.add(name)
        todo += _relative_imports(folder / name)
    return found


def _relative_imports(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError, OSError):
        return []  # code that does not parse names no sibling we could follow (the file itself is still shipped code)
    return [
        f"{node.module.split('.')[0]}.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
    ]


def copy_closure(folder: str | os.PathLike) -> list[str]:
    """Copy the closure into `folder` (an existing checkpoint folder); returns the names of the files copied."""
    names = closure_files()
    for name in names:
        shutil.copyfile(PACKAGE / name, Path(folder) / name)
    return names
