"""docs/architecture.md and README.md's code map say what the code is.

(a) Every module or folder the two maps name exists. A bare name (`stack.py`, `objectives/`) is looked up in the
    package its part of the page maps (`ARCHITECTURE_SECTIONS`; in README.md's code map, the top-level folder line
    above it), a path (`tests/toy_objective.py`, `objectives/__init__.py`) there or from the repository root. A
    template such as `training/objectives/<name>.py` names no file.
(b) docs/architecture.md names every module of hf_attention/ and training/, except
    - `__init__.py` files: a package's re-exports or registry, described with the package;
    - private helpers, whose file name starts with an underscore;
    - the modules of a subpackage (training/objectives/causal_lm.py): the subpackage's folder (`objectives/`) must
      be named, and the map describes its modules as a whole.
    (That README.md's code map names every module is tests/test_docs_links.py's check.)
(c) What the two pages say about imports holds. `CLAIMS` quotes each such sentence (whitespace and the box-drawing
    characters of the diagrams aside), so that a reworded page fails here until its claim is updated with it, and
    says which facts of the import graph (module_graph.py: every import, at any level, read from the syntax trees)
    prove it. A sentence about intent or data flow that no graph can prove is not a claim here.

"Reads" is stricter than "imports": a module reads another when it uses a name it imports from it (a name imported
only to be re-exported does not count). A module "reads the config" when its code reads an attribute of `config`
or of an object's `.config` (`config.hidden_size`, `self.config.vocab_size`, `getattr(config, ...)`). The
remote-code closure is what a checkpoint's code is read as (hf_attention/modeling/closure.py): its entry files and
every module of hf_attention/ they import, directly or not; it must be exactly the folder hf_attention/modeling/.
"""

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from module_graph import (
    PACKAGES,
    REPO,
    external_imports,
    import_graph,
    is_standard_library,
    modules,
    reachable,
    syntax_tree,
    used_imports,
)

ARCHITECTURE = REPO / "docs" / "architecture.md"
README = REPO / "README.md"
# The folders of hf_attention/ (each a package of its own) where bare module names are looked up.
HF_FOLDERS = tuple(
    str(path.relative_to(REPO))
    for path in sorted((REPO / "hf_attention").iterdir())
    if (path / "__init__.py").is_file()
)
TRAINING_FOLDERS = tuple(
    str(path.relative_to(REPO)) for path in sorted((REPO / "training").iterdir()) if (path / "__init__.py").is_file()
)
# architecture.md's headings (their first words) → the folders its bare module names live in ("" is the root).
ARCHITECTURE_SECTIONS = {
    "How the code is laid out": ("",),
    "The models": ("hf_attention", *HF_FOLDERS),
    "Training": ("training", *TRAINING_FOLDERS),
    "Which files a change touches": ("hf_attention", *HF_FOLDERS, "training", *TRAINING_FOLDERS),
}
# A module file or a folder, with any folders before it: `stack.py`, `objectives/__init__.py`, `explorer_page/`.
# Never part of a longer word, a dotted name or a template (`<name>.py`).
NAME = re.compile(r"(?<![\w/<>.-])((?:\w+/)*(?:\w+\.py|\w+/))(?![\w<>-])")
HEADING = re.compile(r"^#+ (.+)$", re.MULTILINE)
BOX_DRAWING = re.compile(r"[│├└─▼]")
# What remote code may import besides the standard library and its own siblings.
CLOSURE_IMPORTS = {"torch", "transformers"}


# ---------------------------------------------------------------------------------------------------------------------
# The pages


def normalized(text: str) -> str:
    """`text` without the diagrams' box-drawing characters and with each run of whitespace one space."""
    return " ".join(BOX_DRAWING.sub(" ", text).split())


def architecture_sections() -> list[tuple[str, str]]:
    """(heading, text) of each part of architecture.md; the part before the first "##" is under the title."""
    text = ARCHITECTURE.read_text()
    headings = list(HEADING.finditer(text))
    return [
        (match.group(1), text[match.end() : headings[i + 1].start() if i + 1 < len(headings) else len(text)])
        for i, match in enumerate(headings)
    ]


def section_folders(heading: str) -> tuple[str, ...]:
    folders = next((value for start, value in ARCHITECTURE_SECTIONS.items() if heading.startswith(start)), None)
    assert folders is not None, f"architecture.md: add the heading {heading!r} to ARCHITECTURE_SECTIONS"
    return folders


def readme_code_map() -> str:
    """README.md's "## Code map" section, up to the next heading."""
    return README.read_text().split("## Code map", 1)[1].split("\n## ", 1)[0]


def architecture_names() -> list[tuple[str, tuple[str, ...]]]:
    """(a name architecture.md gives a module or folder, the folders it is looked up in)."""
    return [
        (name, section_folders(heading)) for heading, text in architecture_sections() for name in NAME.findall(text)
    ]


def readme_names() -> list[tuple[str, tuple[str, ...]]]:
    """(a name README.md's code map gives a module or folder, the folders it is looked up in).

    The diagram is a tree by indentation: a line at the margin names folders of the root; a line indented by two
    spaces per level starts with the names of things in the folder above it (`a.py, b.py`), then says what they are;
    a line indented further goes on saying it. Names in what a line says about a folder (`inspection/ ...
    heatmaps.py`) are inside that folder; names in what it says about a file are beside it. The text after the
    diagram is about hf_attention/."""
    diagram, after = readme_code_map().split("```", 2)[1:]
    found, parents, about = [], [], ""
    for line in diagram.splitlines()[1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        entry, _, words = line.strip().partition("  ")
        if indent % 2 == 0 and indent // 2 <= len(parents) and (indent == 0 or NAME.match(entry)):
            parents = parents[: indent // 2]
            folder = "/".join(parents)
            names = NAME.findall(entry) if indent else entry.split()
            found += [(name, (folder,)) for name in names]
            about = f"{folder}/{names[-1]}".strip("/") if names[-1].endswith("/") else folder
            if names[-1].endswith("/"):
                parents.append(names[-1].rstrip("/"))
                about = "/".join(parents)
        else:
            words = line
        found += [(name, (about,)) for name in NAME.findall(words)]
    return found + [(name, ("hf_attention",)) for name in NAME.findall(after)]


def resolve(name: str, folders: tuple[str, ...]) -> Path | None:
    """The file or folder `name` stands for, looked up in `folders` (and the root, for a path), or None."""
    bases = (*folders, "") if "/" in name.rstrip("/") else folders
    return next((REPO / base / name for base in bases if (REPO / base / name).exists()), None)


def architecture_text_between(start: str, end: str | None = None) -> str:
    """architecture.md's normalized text from `start` up to `end` (or the end of `start`'s section)."""
    for _, text in architecture_sections():
        text = normalized(text)
        if start in text:
            after = text[text.index(start) :]
            return after[: after.index(end)] if end else after
    raise AssertionError(f"architecture.md no longer says {start!r}")


def dotted(file_name: str, package: str = "hf_attention") -> str:
    """The dotted name of the one module of `package` (at any depth) whose file is `file_name` (`stack.py`)."""
    found = [name for name, path in modules().items() if name.startswith(f"{package}.") and path.name == file_name]
    assert len(found) == 1, f"{file_name} names {len(found)} modules of {package}: {found}"
    return found[0]


def module_names_in(text: str, package: str = "hf_attention") -> set[str]:
    """The dotted names of the modules of `package` that `text` names by file name."""
    return {dotted(name, package) for name in NAME.findall(text) if name.endswith(".py") and "/" not in name}


# ---------------------------------------------------------------------------------------------------------------------
# Facts about the code


def closure() -> set[str]:
    """The remote-code closure: the entry files closure.py names and every module of hf_attention/ they import."""
    entry_files = next(
        ast.literal_eval(node.value)
        for node in syntax_tree(modules()["hf_attention.modeling.closure"]).body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "ENTRY_FILES" for t in node.targets)
    )
    package = {name: targets for name, targets in import_graph().items() if name.startswith("hf_attention.")}
    return reachable(package, [f"hf_attention.modeling.{file[:-3]}" for file in entry_files])


def reads_config(module: str) -> bool:
    """Whether `module` reads an attribute of `config` or of an object's `.config` (see the docstring)."""

    def is_config(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "config") or (
            isinstance(node, ast.Attribute) and node.attr == "config"
        )

    for node in ast.walk(syntax_tree(modules()[module])):
        if isinstance(node, ast.Attribute) and is_config(node.value):
            return True
        if (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", None) == "getattr"
            and node.args
            and is_config(node.args[0])
        ):
            return True
    return False


def readers(module: str) -> set[str]:
    """The modules that read `module` (use a name they import from it)."""
    return {name for name in modules() if module in used_imports(name)}


# ---------------------------------------------------------------------------------------------------------------------
# The checks of CLAIMS: each returns what contradicts its claim (nothing when it holds)


def config_never_read_by(*names: str) -> list[str]:
    return [f"{name} reads the config" for name in hf(*names) if reads_config(name)]


def closure_is(named: set[str]) -> list[str]:
    found = closure()
    return [f"named but not in the closure: {name}" for name in sorted(named - found)] + [
        f"in the closure but not named: {name}" for name in sorted(found - named)
    ]


def imports_only(modules_: set[str], allowed: set[str], *, siblings: bool) -> list[str]:
    """What each of `modules_` imports beyond the standard library, `allowed` and (when `siblings`) hf_attention."""
    graph = import_graph()
    problems = []
    for module in sorted(modules_):
        outside = {name for name in external_imports(module) if not is_standard_library(name)} - allowed
        problems += [f"{module} imports {name}" for name in sorted(outside)]
        if not siblings:
            problems += [f"{module} imports {target}" for target in sorted(graph[module])]
    return problems


def closure_imports_only_torch_and_transformers() -> list[str]:
    return imports_only(closure(), CLOSURE_IMPORTS, siblings=True)


def outside_the_closure(named: set[str]) -> list[str]:
    return [f"{name} is in the remote-code closure" for name in sorted(named & closure())]


def read_by_each(module: str, *names: str) -> list[str]:
    return [f"{name} does not read {module}" for name in names if module not in used_imports(name)]


def reads_all(reader: str, *names: str) -> list[str]:
    return [f"{reader} does not read {name}" for name in names if name not in used_imports(reader)]


def only_imported_by(module: str, *names: str) -> list[str]:
    package = module.split(".")[0]
    importers = {name for name, targets in import_graph().items() if module in targets and name.startswith(package)}
    return [f"{name} imports {module}" for name in sorted(importers - set(names))]


def defines_no_class(module: str) -> list[str]:
    tree = syntax_tree(modules()[module])
    return [f"{module} defines {node.name}" for node in tree.body if isinstance(node, ast.ClassDef)]


def read_exactly_by(tables: tuple[str, ...], names: set[str]) -> list[str]:
    problems = []
    for table in tables:
        found = readers(table)
        problems += [f"{name} does not read {table}" for name in sorted(names - found)]
        problems += [f"{name} reads {table} but is not named" for name in sorted(found - names)]
    return problems


def shipped_with(entry: str, *names: str) -> list[str]:
    shipped = reachable(import_graph(), [entry])
    return [f"{name} is not among the modules {entry} imports" for name in names if name not in shipped]


def folder_modules(folder: str) -> set[str]:
    """The modules of a package folder (`hf_attention/modeling`), its `__init__` aside."""
    return {name for name, path in modules().items() if path.parent == REPO / folder and path.name != "__init__.py"}


# ---------------------------------------------------------------------------------------------------------------------
# The claims


@dataclass(frozen=True)
class Claim:
    page: Path
    words: str  # as the page says it, whitespace and box-drawing characters aside
    problems: Callable[[], list[str]]  # what contradicts it; empty when it holds

    def __str__(self) -> str:
        return f"{self.page.name}: {self.words[:60]}"


# The modules of the architectures and the conversion machinery ("converters" in the maps).
CONVERTERS = {
    name for name in modules() if name.startswith(("hf_attention.architectures.", "hf_attention.conversion."))
}


def hf(*names: str) -> tuple[str, ...]:
    """The dotted names of hf_attention's modules `names` (`"stack"`, `"architectures.base"`), wherever they live."""
    return tuple(dotted(f"{name}.py") if "." not in name else f"hf_attention.{name}" for name in names)


CLAIMS = [
    Claim(
        ARCHITECTURE,
        "configuration_hf_attention.py the configs (encoder, decoder, encoder-decoder) on one base, built from "
        "knobs.py, the one table of every knob",
        lambda: (
            reads_all("hf_attention.modeling.configuration_hf_attention", *hf("knobs"))
            + reads_all("hf_attention.modeling.knobs", *hf("scores", "positional", "norms", "activations"))
        ),
    ),
    Claim(
        ARCHITECTURE,
        "leaves (layers.py, masks.py, scores.py, norms.py …) take keyword arguments",
        lambda: config_never_read_by("layers", "masks", "scores", "norms"),
    ),
    Claim(
        ARCHITECTURE,
        "the config read by what builds or runs a whole model, while the leaves (layers, masks, scores, norms) take "
        "keyword arguments",
        lambda: config_never_read_by("layers", "masks", "scores", "norms"),
    ),
    Claim(
        ARCHITECTURE,
        "Everything above, with `pipelines.py` (the seq2seq pipeline), `placeholders.py` (placeholder protection, "
        "which imports only the standard library) and `placeholder_constraint.py` (the constrained decoding that "
        "places each source's sentinels), is the shipped code of `modeling/`",
        lambda: closure_is(
            module_names_in(architecture_text_between("configuration_hf_attention.py", "Everything"))
            | set(hf("pipelines", "placeholders", "placeholder_constraint"))
        ),
    ),
    Claim(
        ARCHITECTURE,
        "those files import only the standard library, torch, transformers and each other",
        closure_imports_only_torch_and_transformers,
    ),
    Claim(
        ARCHITECTURE,
        "Outside the shipped code, free to import anything",
        lambda: outside_the_closure(module_names_in(architecture_text_between("Outside the shipped code"))),
    ),
    Claim(
        ARCHITECTURE,
        "`placeholders.py` (placeholder protection, which imports only the standard library)",
        lambda: imports_only(set(hf("placeholders")), set(), siblings=False),
    ),
    Claim(
        ARCHITECTURE,
        "shared by `heatmaps.py` and `explorer.py`",
        lambda: read_by_each("hf_attention.inspection.attention_maps", *hf("heatmaps", "explorer")),
    ),
    Claim(
        ARCHITECTURE,
        "the module that owns an elementwise region (RMSNorm in `norms.py`, the gated product in `layers.py`, the "
        "rotary rotation in `attention.py`) keeps its plain function and its region, which speed_paths.py asks",
        lambda: read_by_each(
            "hf_attention.modeling.compiled_regions", *hf("norms", "layers", "attention", "speed_paths")
        ),
    ),
    Claim(
        ARCHITECTURE,
        "decoding.py DecodingState: what a module keeps while generate() runs; the speed-ups are states of the "
        "modules they change",
        lambda: only_imported_by("hf_attention.modeling.decoding", *hf("attention", "pretrained")),
    ),
    Claim(
        ARCHITECTURE,
        "modeling_hf_attention.py every public class in one place (each defined in its family's module)",
        lambda: defines_no_class("hf_attention.modeling.modeling_hf_attention"),
    ),
    Claim(
        ARCHITECTURE,
        "finetune.py training.finetune: the same splits / models / objective steps",
        lambda: reads_all("training.finetune", "training.data.splits", "training.run.models", "training.objectives"),
    ),
    Claim(
        README,
        "norms.py the norms (NORMS: read by the knobs, the config, builders.py, pretrained.py, gated_deltanet.py, "
        "latent_attention.py, query_key_tuning.py)",
        lambda: read_exactly_by(
            hf("norms"),
            set(
                hf(
                    "knobs",
                    "configuration_hf_attention",
                    "builders",
                    "pretrained",
                    "gated_deltanet",
                    "latent_attention",
                    "query_key_tuning",
                )
            ),
        ),
    ),
    Claim(
        README,
        "activations.py feed-forward activations and xIELU, the learned one (read by the knobs, the config, "
        "layers.py, layer_plan.py, mixture_of_experts.py, pretrained.py, converters)",
        lambda: (
            read_exactly_by(
                hf("activations"),
                set(
                    hf(
                        "knobs",
                        "configuration_hf_attention",
                        "layers",
                        "layer_plan",
                        "mixture_of_experts",
                        "pretrained",
                    )
                )
                | (readers(hf("activations")[0]) & CONVERTERS),
            )
            + ([] if readers(hf("activations")[0]) & CONVERTERS else ["no converter reads activations.py"])
        ),
    ),
    Claim(
        README,
        "modeling_hf_attention.py every public model class in one place",
        lambda: defines_no_class("hf_attention.modeling.modeling_hf_attention"),
    ),
    Claim(
        README,
        "The files of `modeling/` are the shipped code",
        lambda: closure_is(folder_modules("hf_attention/modeling")),
    ),
    Claim(
        README,
        "they import only the standard library, `torch`, `transformers` and each other",
        closure_imports_only_torch_and_transformers,
    ),
    Claim(
        README,
        "Nothing else of the package is shipped",
        lambda: outside_the_closure(set(modules()) - folder_modules("hf_attention/modeling")),
    ),
    Claim(
        README,
        "placeholders.py placeholders as indexed sentinels and back, problems reported (standard library only)",
        lambda: imports_only(set(hf("placeholders")), set(), siblings=False),
    ),
    Claim(
        README,
        "placeholder_constraint.py constrained decoding: each output writes its source's sentinels",
        lambda: shipped_with("hf_attention.modeling.pipelines", *hf("placeholder_constraint")),
    ),
]


# ---------------------------------------------------------------------------------------------------------------------
# The tests


def test_the_name_pattern_finds_modules_and_folders_only():
    text = "`stack.py`, objectives/__init__.py, `explorer_page/`, training/objectives/<name>.py, q/k/v, a.b.py"
    assert NAME.findall(text) == ["stack.py", "objectives/__init__.py", "explorer_page/"]


@pytest.mark.parametrize(("page", "names"), [(ARCHITECTURE, architecture_names), (README, readme_names)])
def test_every_module_a_map_names_exists(page, names):
    missing = [
        f"{name} (looked up in {', '.join(f or '.' for f in folders)})"
        for name, folders in names()
        if resolve(name, folders) is None
    ]
    assert not missing, f"{page.name} names modules that do not exist: {missing}"


def test_the_readme_code_map_names_every_module():
    """Every module of hf_attention/ (at any depth) and training/ (and each folder of them) is in README.md's code
    map, so a reader draws the house from it; the package `__init__.py` files of the folders aside, and the modules of
    the architectures, which the line of architectures/ covers (the registry lists them, and the docs' tables are
    made from it)."""
    named = {resolve(name, folders) for name, folders in readme_names()}
    unnamed = []
    for package in PACKAGES:
        folder = REPO / package
        # (training/objectives/: one module per objective, which its line covers)
        paths = [path for path in sorted(folder.rglob("*.py")) if path.parent.name != "objectives"]
        for path in paths:
            if path.name == "__init__.py" and path.parent != REPO / "hf_attention":
                continue
            if path.parent == REPO / "hf_attention" / "architectures" and "\nARCHITECTURE = " in path.read_text():
                continue
            if path not in named:
                unnamed.append(str(path.relative_to(REPO)))
        for subpackage in sorted(p for p in folder.iterdir() if (p / "__init__.py").is_file()):
            if subpackage not in named:
                unnamed.append(f"{subpackage.relative_to(REPO)}/")
    assert not unnamed, f"README.md's code map does not name {unnamed}"


@pytest.mark.parametrize("claim", CLAIMS, ids=str)
def test_claim_holds(claim):
    assert normalized(claim.words) in normalized(claim.page.read_text()), (
        f"{claim.page.name} no longer says {claim.words!r}: update its entry in CLAIMS"
    )
    problems = claim.problems()
    assert not problems, f"{claim.page.name} says {claim.words!r}, but:\n" + "\n".join(problems)
