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
    found, todo = [], list(ENTRY_FILES)
    while todo:
        name = todo.pop()
        if name in found or not (package / name).is_file():
            continue
        found.append(name)
        tree = ast.parse((package / name).read_text(encoding="utf-8"))
        todo += [
            f"{node.module}.py"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        ]
    return sorted(found)


def copy_closure(folder: str | os.PathLike) -> list[str]:
    """Copy the closure into `folder` (an existing checkpoint folder); returns the names of the files copied."""
    names = closure_files()
    for name in names:
        shutil.copyfile(PACKAGE / name, Path(folder) / name)
    return names
