"""Every code cell of every tutorial can be run again right after itself, as a reader of the notebook does.

A cell that reads a module-level name defined by an earlier cell and then rebinds it (`x = f(x)`, `x += 1`,
`for x in x`, `del x` after using it) reads, when it is run a second time, its own result instead of the earlier
cell's: the rerun raises or gives other numbers. This is a static check (ast, nothing is executed): the cells are the
jupytext percent cells (`# %%` lines; markdown cells skipped), and a cell fails when the first thing it does with
such a name, in the order Python evaluates the cell, is to read it, and the cell also binds it somewhere.

Names read inside function and lambda bodies do not count: they are read when the function is called, not when the
cell runs. (A function that rebinds a module name through `global` is not seen; no tutorial does that.)
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
SCRIPTS = sorted(p.name for p in TUTORIALS.glob("[0-9][0-9]_*.py"))


class Cell(NamedTuple):
    line: int  # the line of its "# %%" marker, counting from 1
    source: str


class Problem(NamedTuple):
    cell_line: int
    name: str
    read_line: int  # where the cell first reads the name
    bind_line: int  # where the cell rebinds it

    def __str__(self) -> str:
        return (
            f"the cell at line {self.cell_line} reads {self.name!r} (line {self.read_line}), which an earlier cell "
            f"defines, and rebinds it (line {self.bind_line}): run again, it reads its own value instead"
        )


def code_cells(text: str) -> list[Cell]:
    """The code cells of a percent script: what follows each `# %%` line up to the next, markdown cells left out."""
    cells, start = [], None
    lines = text.splitlines()
    for number, line in enumerate([*lines, "# %% [end]"], start=1):
        if line.startswith("# %%"):
            if start is not None and "[markdown]" not in lines[start - 1]:
                cells.append(Cell(start, "\n".join(lines[start : number - 1])))
            start = number
    return cells


class Events(ast.NodeVisitor):
    """The module-level names a cell reads and binds, in the order Python evaluates them: (kind, name, line) with
    kind "read" or "bind". Function and lambda bodies are skipped; a comprehension's own variables are not module
    names."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, int]] = []
        self.local: list[set[str]] = []  # the variables of the comprehensions being visited

    def note(self, kind: str, name: str, line: int) -> None:
        if not any(name in scope for scope in self.local):
            self.events.append((kind, name, line))

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.note("read", node.id, node.lineno)
        elif isinstance(node.ctx, ast.Store):
            self.note("bind", node.id, node.lineno)
        else:  # del x: needs x (a rerun raises NameError) and unbinds it
            self.note("read", node.id, node.lineno)
            self.note("bind", node.id, node.lineno)

    # Statements whose parts Python evaluates in another order than ast lists them.
    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):  # x += 1 reads x, then rebinds it
            self.note("read", node.target.id, node.lineno)
            self.visit(node.value)
            self.note("bind", node.target.id, node.lineno)
        else:  # x[i] += 1 reads x and changes the object, not the name
            self.visit(node.target)
            self.visit(node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self.visit(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        for statement in node.body + node.orelse:
            self.visit(statement)

    visit_AsyncFor = visit_For

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.note("bind", alias.asname or alias.name.split(".")[0], node.lineno)

    visit_ImportFrom = visit_Import

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        # Run now: decorators, default values, annotations of the signature. The body runs at call time.
        for expression in [*node.decorator_list, *node.args.defaults, *node.args.kw_defaults]:
            if expression is not None:
                self.visit(expression)
        self.note("bind", node.name, node.lineno)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expression in [*node.args.defaults, *node.args.kw_defaults]:
            if expression is not None:
                self.visit(expression)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expression in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expression)
        # The class body runs now, but its names are the class's: only its reads of module names count.
        body = Events()
        body.local = self.local
        for statement in node.body:
            body.visit(statement)
        self.events += [event for event in body.events if event[0] == "read"]
        self.note("bind", node.name, node.lineno)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.note("bind", node.name, node.lineno)
        for statement in node.body:
            self.visit(statement)

    def comprehension(self, node, results: list[ast.expr]) -> None:
        """[elt for target in iter if cond ...]: the first iter is read in the cell's scope, the rest in the
        comprehension's own, where its targets are local."""
        generators = node.generators
        self.visit(generators[0].iter)
        self.local.append(set())
        for k, generator in enumerate(generators):
            if k:
                self.visit(generator.iter)
            self.local[-1] |= {n.id for n in ast.walk(generator.target) if isinstance(n, ast.Name)}
            for condition in generator.ifs:
                self.visit(condition)
        for result in results:
            self.visit(result)
        self.local.pop()

    def visit_ListComp(self, node) -> None:
        self.comprehension(node, [node.elt])

    visit_SetComp = visit_GeneratorExp = visit_ListComp

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self.comprehension(node, [node.key, node.value])


def events(source: str, first_line: int) -> list[tuple[str, str, int]]:
    """The read and bind events of a cell's source, with the line numbers of the file (the cell starts after its
    marker at `first_line`)."""
    visitor = Events()
    visitor.visit(ast.parse(source))
    return [(kind, name, line + first_line) for kind, name, line in visitor.events]


def rerun_problems(text: str) -> list[Problem]:
    """For each code cell, the names defined by earlier cells that it reads first and rebinds later."""
    problems, defined = [], set()
    for cell in code_cells(text):
        cell_events = events(cell.source, cell.line)
        first: dict[str, tuple[str, int]] = {}
        for kind, name, line in cell_events:
            first.setdefault(name, (kind, line))
        for name, (kind, line) in first.items():
            binds = [b for k, n, b in cell_events if k == "bind" and n == name]
            if kind == "read" and binds and name in defined:
                problems.append(Problem(cell.line, name, line, binds[0]))
        defined |= {name for kind, name, _ in cell_events if kind == "bind"}
    return problems


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_cell_can_run_again(name):
    problems = rerun_problems((TUTORIALS / name).read_text())
    assert not problems, f"{name}:\n" + "\n".join(f"  {p}" for p in problems)


def test_the_check_finds_a_cell_that_rebinds_what_it_read():
    """Each way of reading a name and then rebinding it is caught, at the right lines; rebinding first, reading only
    inside a function, or changing an object without rebinding its name, is not."""
    text = "\n".join(
        [
            "# %%",  # 1
            "x = 1",
            "items = [1, 2]",
            "total = 0",
            "# %% [markdown]",  # 5
            "# x = x + 1 in prose is not code",
            "# %%",  # 7
            "x = x + 1",
            "# %%",  # 9
            "total += 1",
            "# %%",  # 11
            "for items in items:",
            "    pass",
            "# %%",  # 14
            "print(x)",
            "del x",
            "# %%",  # 17: all of these can run again
            "total = 0",
            "total += 1",
            "def f():",
            "    return items",
            "items = f()",
            "items.append(3)",
            "squares = [items for items in range(3)]",
        ]
    )
    assert rerun_problems(text) == [
        Problem(7, "x", 8, 8),
        Problem(9, "total", 10, 10),
        Problem(11, "items", 12, 12),
        Problem(14, "x", 15, 16),
    ]
    assert [cell.line for cell in code_cells(text)] == [1, 7, 9, 11, 14, 17]


def test_the_check_reads_in_evaluation_order():
    """A comprehension's first iterable, a default value and a class body run when the cell runs: they count."""
    text = "# %%\nn = 3\nk = 2\nc = 0\n# %%\nrows = [i for i in range(n)]\nn = len(rows)\n"
    text += "def g(a=k):\n    return a\nk = g()\nclass C:\n    size = c\nc = C.size"
    assert [(p.name, p.read_line, p.bind_line) for p in rerun_problems(text)] == [
        ("n", 6, 7),
        ("k", 8, 10),
        ("c", 12, 13),
    ]
