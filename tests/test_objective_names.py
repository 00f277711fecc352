"""Nothing in training/ outside training/objectives/ names an objective, as training/objectives/__init__.py promises:
the shared code reads the `Objective` records (what an objective declares) and never branches on which one it is.

An objective is named in code by a string literal equal to its name ("translation" as a dict key, a default, a
comparison), an attribute of that name (`objectives.translation`, `args.language_id`) or an import of its module. A
local variable that happens to be the word (`for translation in translations`) is not, nor is prose in docstrings
and help texts ("Translation: …"), which may describe them.
"""

import ast
from pathlib import Path

import pytest

from training.objective import FINETUNE, TRAIN
from training.objectives import BUILT_IN, DEFAULTS, OBJECTIVES

TRAINING = Path(__file__).resolve().parents[1] / "training"
NAMES = frozenset(module.OBJECTIVE.name for module in BUILT_IN) | {
    module.__name__.rpartition(".")[2] for module in BUILT_IN
}


def named_objectives(source: str, names=NAMES) -> list[tuple[int, str]]:
    """(line, what) for every place the code in `source` names one of `names`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            found.append((node.lineno, f"the string {node.value!r}"))
        elif isinstance(node, ast.Attribute) and node.attr in names:
            found.append((node.lineno, f"the attribute .{node.attr}"))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] + [alias.asname or "" for alias in node.names]
            modules += [getattr(node, "module", None) or ""]
            for module in modules:
                if names & set(module.split(".")):
                    found.append((node.lineno, f"an import of {module}"))
    return found


def test_the_detector_finds_every_way_of_naming_one():
    source = (
        'CONFIGS = {"translation": 1}\n'
        'if task == "language_id":\n'
        "    pass\n"
        "objectives.causal_lm.OBJECTIVE\n"
        "from training.objectives import masked_lm\n"
        "from training.objectives.translation import featurize\n"
        "for translation in translations:  # a word, not the objective\n"
        "    pass\n"
        '"""Translation: prose about translation is not code."""\n'
        'layout = "causal_lm_layout"\n'
    )
    assert sorted(line for line, _ in named_objectives(source)) == [1, 2, 4, 5, 6]


@pytest.mark.parametrize(
    "path",
    [path for path in sorted(TRAINING.rglob("*.py")) if "objectives" not in path.relative_to(TRAINING).parts],
    ids=lambda path: str(path.relative_to(TRAINING)),
)
def test_no_module_outside_objectives_names_an_objective(path):
    found = named_objectives(path.read_text())
    assert not found, f"training/{path.relative_to(TRAINING)} names an objective: " + ", ".join(
        f"line {line}: {what}" for line, what in found
    )


def test_each_entry_point_defaults_to_an_objective_it_trains():
    assert TRAIN in OBJECTIVES[DEFAULTS[TRAIN]].entry_points
    assert FINETUNE in OBJECTIVES[DEFAULTS[FINETUNE]].entry_points


def test_every_objective_training_finetune_trains_declares_its_small_model():
    for objective in OBJECTIVES.values():
        if FINETUNE in objective.entry_points:
            assert objective.model.finetune_config is not None, objective.name
