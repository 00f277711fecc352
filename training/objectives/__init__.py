"""The registry of objectives: one module per objective in this folder, each defining `OBJECTIVE`.

| objective   | data (default)             | tokenizer | model (default family) | trained by                   |
|-------------|----------------------------|-----------|------------------------|------------------------------|
| causal_lm   | Python docs, blocks        | causal    | hf_attention_decoder   | training.train               |
| masked_lm   | Python docs, truncated     | masked    | hf_attention_encoder   | training.train               |
| language_id | gettext strings, by lang.  | masked    | ..._encoder + head     | training.finetune (Trainer)  |
| translation | gettext en→lang pairs      | seq2seq   | hf_attention_seq2seq   | both                         |

A new objective is one module here plus its line in `BUILT_IN`; code outside the package (tests/toy_objective.py)
calls `register` instead. Nothing else in training/ names an objective: the rest reads the `Objective` records, and
the objective an entry point trains when none is asked for is `DEFAULTS`' (tests/test_objective_names.py checks it).
"""

from __future__ import annotations

from training.objective import FINETUNE, TRAIN, Objective
from training.objectives import causal_lm, language_id, masked_lm, translation

# Listed, not discovered: the order is that of the --objective / --task help and error messages.
BUILT_IN = (causal_lm, masked_lm, language_id, translation)

# The objective each entry point trains by default (--objective of training.train, --task of training.finetune).
DEFAULTS = {TRAIN: translation.OBJECTIVE.name, FINETUNE: language_id.OBJECTIVE.name}

OBJECTIVES: dict[str, Objective] = {}


def register(objective: Objective) -> Objective:
    """Make `objective` known by its name to training.train (and training.finetune, per its `entry_points`)."""
    if objective.name in OBJECTIVES and OBJECTIVES[objective.name] is not objective:
        raise ValueError(f"An objective named {objective.name!r} is already registered.")
    OBJECTIVES[objective.name] = objective
    return objective


for _module in BUILT_IN:
    register(_module.OBJECTIVE)


def names(entry_point: str) -> list[str]:
    """The objectives that `entry_point` (objective.TRAIN or FINETUNE) trains, in registry order."""
    return [name for name, objective in OBJECTIVES.items() if entry_point in objective.entry_points]


def objective_for(name: str, entry_point: str = TRAIN) -> Objective:
    """The objective `name` trained by `entry_point`, or a ValueError naming the allowed values."""
    allowed = names(entry_point)
    if name not in allowed:
        raise ValueError(f"objective={name!r} is not supported; allowed values are {', '.join(map(repr, allowed))}.")
    return OBJECTIVES[name]
