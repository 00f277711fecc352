"""The remote-code closure: the files of this package that a checkpoint carries, so that `trust_remote_code=True`
loads it where hf_attention is not installed.

The closure is the entry files (the configurations, and the module that imports every model family) and every
sibling they import (`from .x import y`), found by reading their syntax trees. `save_pretrained` (pretrained.py)
copies it beside the weights and `hf-attention refresh-code` (shipped_code.py) replaces a checkpoint's copy with the
installed one: both write these files, whichever family is saved.

This file is part of the closure: it imports only the standard library.
"""

import ast
import os
import shutil
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
# The configurations and the module that imports every family: with their imports, every class any auto_map names.
ENTRY_FILES = ("configuration_hf_attention.py", "modeling_hf_attention.py")


def closure_files(package: Path = PACKAGE) -> list[str]:
    """The entry files of `package` and every sibling they import, sorted by name.

    A file missing from `package` is left out with what only it imports: a model loaded as remote code runs from the
    files transformers copied for the one auto_map entry it loaded (that family's module and its imports), so saving
    it again ships those, which hold every class of its family.
    """
    return sorted(import_closure(package, ENTRY_FILES))


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
