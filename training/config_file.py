"""The YAML config file of a run: reading it, and which of its values a run takes beside the command line.

    python -m training.train --config training/configs/translation_en_de.yaml --max_steps 50

`read_config` takes `--config PATH` out of the command line and reads the file; `parse_into` fills the argument
dataclasses from the command line over the file's values, so flags win. The file's `model_config:` mapping is kept
apart and updated by the `--model_config` JSON flag (`with_model_config_flag`). Two of the file's choices give way to
the command line, with a warning: its `model_config` when the command line builds another model type
(`config_model_config`), and its built-in corpus options beside --dataset (`leave_out_file_corpus_options`).
training.train (training/args.py) and training.finetune read their files through this module.
"""

from __future__ import annotations

import json
import sys
import warnings
from dataclasses import dataclass, fields
from pathlib import Path

import yaml
from transformers import HfArgumentParser

from training.argument_checks import default_of
from training.objective import TRAIN
from training.objectives import DEFAULTS, OBJECTIVES


@dataclass(frozen=True)
class ConfigFile:
    """A command line with its `--config file.yaml` read: the other flags, and the file's values."""

    argv: list[str]  # the command line without `--config PATH`
    path: str | None
    values: dict  # argument name → value
    model_config: dict  # the file's `model_config:` mapping


def read_config(argv: list[str] | None = None) -> ConfigFile:
    """Take `--config PATH` out of `argv` (default: `sys.argv[1:]`) and read that YAML file, if there is one."""
    argv = list(sys.argv[1:] if argv is None else argv)
    path = None
    if "--config" in argv:
        index = argv.index("--config")
        if index + 1 >= len(argv):
            raise ValueError("--config needs a path to a YAML file.")
        path = argv[index + 1]
        del argv[index : index + 2]
    values = load_yaml(path) if path else {}
    model_config = dict(values.pop("model_config", None) or {})
    return ConfigFile(argv=argv, path=path, values=values, model_config=model_config)


def parse_into(classes: tuple[type, ...], config: ConfigFile, *, defaults: dict | None = None) -> tuple:
    """Instances of the dataclasses `classes` from the command line, over the config file's values, over `defaults`.

    Raises:
        ValueError: If the config file has keys that no class knows.
    """
    known = {f.name for cls in classes for f in fields(cls)}
    unknown = sorted(set(config.values) - known)
    if unknown:
        raise ValueError(f"Unknown keys in {config.path}: {unknown}. Model-config fields go under 'model_config:'.")
    parser = HfArgumentParser(classes)
    # The file's values become the defaults, so flags given on the command line win.
    parser.set_defaults(**{**(defaults or {}), **config.values})
    return tuple(parser.parse_args_into_dataclasses(args=config.argv))


def with_model_config_flag(model_config: dict, flag: str | None) -> dict:
    """The config file's `model_config` mapping updated with the `--model_config` JSON flag, if given."""
    return {**model_config, **parse_model_config(flag)} if flag else model_config


def parse_model_config(text: str) -> dict:
    """The `--model_config` flag: a JSON object of model-config fields, or a ValueError that shows the form."""
    try:
        overrides = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"--model_config must be a JSON object such as '{{\"hidden_size\": 128}}'; {text!r} is not JSON ({error})."
        ) from error
    if not isinstance(overrides, dict):
        raise ValueError(f"--model_config must be a JSON object such as '{{\"hidden_size\": 128}}', got {text!r}.")
    return overrides


def load_yaml(path: str | Path) -> dict:
    """Read a YAML config into a dict, with a clear error for a missing file or a non-mapping document."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"Config file not found: {path}")
    values = yaml.safe_load(path.read_text()) or {}
    if not isinstance(values, dict):
        raise ValueError(f"Config {path} must be a YAML mapping of argument names to values.")
    return values


def config_model_config(config: ConfigFile, objective: str, model_type: str | None) -> dict:
    """The config file's `model_config`, or nothing when the command line switched to another model type.

    The file's fields are written for its own model type (BART's `d_model` is no field of GPT-2's config): when
    --model_type or --objective on the command line builds another type, merging them would fail on keys the user
    never typed. The new type starts from its own defaults and --model_config (a warning says so).
    """
    file_type = model_type_of(config.values.get("objective", DEFAULTS[TRAIN]), config.values.get("model_type"))
    run_type = model_type_of(objective, model_type)
    if not config.model_config or file_type == run_type:
        return config.model_config
    warnings.warn(
        f"The model_config of {config.path} is written for model type {file_type!r}; the command line trains "
        f"{run_type!r}, so it is not used: {run_type!r} starts from its defaults (give its fields with "
        "--model_config).",
        stacklevel=3,
    )
    return {}


def model_type_of(objective: str, model_type: str | None) -> str | None:
    """The model type a run builds: `model_type`, or by default our family for the objective."""
    if model_type is not None:
        return model_type
    known = OBJECTIVES.get(objective)
    return known.model.our_model_type if known is not None else None


def leave_out_file_corpus_options(config: ConfigFile, objective_name: str, *groups) -> None:
    """With --dataset, the config file's options that choose the built-in corpus go back to their defaults.

    `objective_name` is the run's objective, `groups` the argument dataclasses that hold its options (and --dataset).

    A recipe file (training/configs/translation_en_de.yaml) names its corpus beside its recipe; a user who runs it
    with their own data means the recipe, not the corpus, and a warning says what is left out. The same options typed
    on the command line are refused (`check_corpus_options`): the user asked for them and would not get them.
    """
    objective = OBJECTIVES.get(objective_name)
    dataset = next((group.dataset for group in groups if hasattr(group, "dataset")), None)
    if objective is None or dataset is None:
        return
    typed = {flag.split("=")[0][2:].replace("-", "_") for flag in config.argv if flag.startswith("--")}
    left_out = []
    for group in groups:
        for argument in fields(group):
            name = argument.name
            if name in objective.corpus_options and name in config.values and name not in typed:
                setattr(group, name, default_of(argument))
                left_out.append(name)
    if left_out:
        warnings.warn(
            f"--dataset={dataset!r} replaces the built-in corpus, so {config.path}'s {', '.join(left_out)} (which "
            "choose that corpus) are not used.",
            stacklevel=3,
        )
