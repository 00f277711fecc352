"""The modules of hf_attention/ and training/ and what each imports, read from their syntax trees (nothing is run).

Shared by tests/test_import_graph.py (no cycle) and tests/test_code_map.py (what the code maps say about imports).

Every import counts: top-level ones, those under `if TYPE_CHECKING:` and those inside functions, relative and
absolute. An edge goes to the module named: `from a.b import c` is an edge to `a.b.c` when that is a module, else to
`a.b`; parent packages run implicitly are not edges (a package's `__init__` importing its own submodules, as
training/objectives/ does, is not a cycle).
"""

import ast
import functools
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("hf_attention", "training")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@functools.cache
def modules() -> dict[str, Path]:
    """Dotted name → file, for every module of PACKAGES (subpackages included)."""
    return {module_name(path): path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))}


@functools.cache
def syntax_tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


@functools.cache
def import_graph() -> dict[str, set[str]]:
    """Module → the modules of PACKAGES it imports (computed once: read it, do not change it)."""
    known = modules()
    names = set(known)
    graph = {}
    for name, path in known.items():
        targets = set()
        for node in ast.walk(syntax_tree(path)):
            targets |= _targets(node, name, path, names)
        graph[name] = targets - {name}
    return graph


def _targets(node: ast.AST, name: str, path: Path, names: set[str]) -> set[str]:
    """The intra-package modules one import statement names."""
    return {target for _, target in _bindings(node, name, path, names)}


def _bindings(node: ast.AST, name: str, path: Path, names: set[str]) -> list[tuple[str, str]]:
    """(the local name an import statement binds, the intra-package module it comes from) for each of its names."""
    if isinstance(node, ast.Import):
        return [(alias.asname or alias.name.split(".")[0], alias.name) for alias in node.names if alias.name in names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:  # relative: from .x import y, from . import z
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        parts = package.split(".")
        base = parts[: len(parts) - (node.level - 1)]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    bindings = []
    for alias in node.names:
        submodule = f"{source}.{alias.name}"
        target = submodule if submodule in names else source if source in names else None
        if target is not None:
            bindings.append((alias.asname or alias.name, target))
    return bindings


@functools.cache
def used_imports(name: str) -> frozenset[str]:
    """The modules of PACKAGES whose imported names module `name` uses: a name it imports from one is read somewhere
    in its code. A name imported only to be re-exported (listed in `__all__`, a string) does not count."""
    names = set(modules())
    path = modules()[name]
    tree = syntax_tree(path)
    bound: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        for local, target in _bindings(node, name, path, names):
            bound.setdefault(local, set()).add(target)
    loaded = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return frozenset(target for local, targets in bound.items() if local in loaded for target in targets) - {name}


def external_imports(name: str) -> set[str]:
    """The top-level names of what module `name` imports from outside PACKAGES (`torch`, `os`, `transformers`)."""
    found = set()
    for node in ast.walk(syntax_tree(modules()[name])):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found - set(PACKAGES)


def is_standard_library(top_level_name: str) -> bool:
    return top_level_name in sys.stdlib_module_names


def reachable(graph: dict[str, set[str]], starts: list[str]) -> set[str]:
    """`starts` and every module they import, directly or not."""
    seen, todo = set(), list(starts)
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph.get(module, ())
    return seen
