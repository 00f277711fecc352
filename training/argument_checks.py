"""The checks of single arguments, shared by training.train's arguments (training/args.py) and training.finetune's.

Each refuses a value before any work, with an error that names the flag, the value and what is allowed, so that a
typo fails at once instead of as an OverflowError, a Hub lookup or a silently ignored option later in the run:

- `check_fields` with the rules `at_least`, `between` and `finite`: the numbers (sizes, steps, rates);
- `check_checkpoint_folder`: a model to start from;
- `check_objective_options` and `check_corpus_options`: the arguments of `OBJECTIVE_OPTIONS` that the chosen
  objective does not read, and those that choose its built-in corpus beside the user's --dataset.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, fields
from pathlib import Path

from training.objective import Objective
from training.objectives import OBJECTIVES

# The arguments that only some objectives read: the corpus of one kind (pydoc topics, gettext catalogs, a text or a
# pair column), how its texts become rows, and what a translation objective generates and scores. Each objective
# names those it reads (`Objective.options`); `check_objective_options` refuses the others.
OBJECTIVE_OPTIONS = (
    "text_column",
    "max_topics",
    "block_size",
    "causal_lm_layout",
    "max_length",
    "mlm_probability",
    "source_column",
    "target_column",
    "target_lang",
    "max_chars",
    "max_catalogs",
    "system_catalogs",
    "catalog_packages",
    "heldout_catalog_packages",
    "max_ood_samples",
    "markup_augmentation",
    "protect_placeholders",
    "max_source_length",
    "max_target_length",
    "languages",
    "max_per_language",
    "generation_num_beams",
    "generation_length_penalty",
    "generation_max_new_tokens",
    "bleu_samples",
    "eval_bleu_during_training",
)


# The largest number a counting argument (steps, sizes, lengths, the seed, threads) may take: a 32-bit integer, what
# every consumer of these numbers takes (torch.set_num_threads a C int, NumPy's seed less than 2**32). A larger one
# would pass the checks here and fail later with an OverflowError that names nothing.
LARGEST = 2**31 - 1


def _is_number(value) -> bool:
    """A finite int or float (not a bool, not NaN or infinity)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def at_least(minimum: float, *, optional: bool = False):
    """A rule for `check_fields`: a finite number (an int where the field is an int) from `minimum` to LARGEST."""

    def rule(value) -> bool:
        return (optional and value is None) or (_is_number(value) and minimum <= value <= LARGEST)

    rule.allowed = f"at least {minimum} and at most {LARGEST}" + (" (or None)" if optional else "")
    return rule


def between(low: float, high: float, *, low_open: bool = False, high_open: bool = False):
    """A rule for `check_fields`: a finite number from `low` to `high`, either end open or closed."""

    def rule(value) -> bool:
        if not _is_number(value):
            return False
        return (value > low if low_open else value >= low) and (value < high if high_open else value <= high)

    rule.allowed = f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    return rule


def finite(value) -> bool:
    """A rule for `check_fields`: any finite number."""
    return _is_number(value)


finite.allowed = "a finite number"


def check_fields(arguments, rules: dict) -> None:
    """Raise a ValueError naming the first field of `arguments` that breaks its rule, its value and what is allowed."""
    for name, rule in rules.items():
        value = getattr(arguments, name)
        if not rule(value):
            raise ValueError(f"--{name}={value!r} is not allowed: {name} must be {rule.allowed}.")


def check_checkpoint_folder(name: str, flag: str) -> None:
    """A model to start from: an existing folder with a config.json, or a Hub id ("name" or "owner/name").

    Anything that looks like a local path (starts with '.', '/' or '~', or has more than one '/') must exist, so a
    mistyped path fails at once with its name, instead of as a Hub lookup with network retries.
    """
    path = Path(name).expanduser()
    if path.exists():
        if not path.is_dir() or not (path / "config.json").is_file():
            raise ValueError(
                f"{flag}={name!r} is not a model folder: it has no config.json (expected a folder "
                "written by save_pretrained, such as a training run's final/)."
            )
        return
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or "\\" in name or not name.strip():
        raise ValueError(
            f"{flag}={name!r}: no such folder. Give a folder written by save_pretrained (such as a "
            "training run's final/) or a Hub model id (owner/name)."
        )


def check_objective_options(objective: Objective, *arguments) -> None:
    """Refuse an argument of OBJECTIVE_OPTIONS that `objective` does not read, set away from its default: the run
    would accept it and do nothing with it. The error names the argument, the objective and those that read it."""
    for group in arguments:
        for argument in fields(group):
            if argument.name not in OBJECTIVE_OPTIONS or argument.name in objective.options:
                continue
            value, default = getattr(group, argument.name), default_of(argument)
            if value != default:
                readers = [name for name, other in OBJECTIVES.items() if argument.name in other.options]
                raise ValueError(
                    f"--{argument.name}={value!r} does not act in objective {objective.name!r}: it applies to "
                    f"{', '.join(map(repr, readers))}. Remove it (its default is {default!r})."
                )
    check_corpus_options(objective, *arguments)


def check_corpus_options(objective: Objective, *arguments) -> None:
    """Refuse an option that chooses the objective's own corpus (`Objective.corpus_options`) beside the user's
    --dataset, which replaces that corpus: the run would record the option and read none of it."""
    dataset = next((group.dataset for group in arguments if hasattr(group, "dataset")), None)
    if dataset is None:
        return
    for group in arguments:
        for argument in fields(group):
            if argument.name not in objective.corpus_options:
                continue
            value, default = getattr(group, argument.name), default_of(argument)
            if value != default:
                raise ValueError(
                    f"--{argument.name}={value!r} does not act with --dataset={dataset!r}: it chooses the built-in "
                    f"corpus of objective {objective.name!r}, which your dataset replaces. Remove it (its default is "
                    f"{default!r})."
                )


def default_of(argument):
    """The default of the dataclass field `argument` (a fresh one where it has a default_factory)."""
    return argument.default if argument.default_factory is MISSING else argument.default_factory()
