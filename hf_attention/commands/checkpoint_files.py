"""What a saved model folder holds: a config, weights, the files saved beside them and the code it ships.

`save_pretrained` writes config.json, the weights (one file, or shards and their index), a generation config, the
tokenizer's files and, for a remote-code model, the Python files its `auto_map` names with every sibling they import
(`from .x import y`). The writing commands read this to tell a folder that is only a checkpoint (which `--overwrite`
may replace) from one that also holds someone's files; `refresh-code`, to refuse a folder without weights and to
check the fields of config.json it updates.

The code files are found by following the folder's own imports, not the installed package's: a checkpoint saved by an
older release ships the files that release imported. A file an earlier release's refresh-code left half written (it
wrote each file beside its destination, `.NAME.<8 hex>.partial`, then renamed it over; a run killed between the two
left it) is ours too, when NAME is config.json or a module hf-attention ships or shipped: `--overwrite` replaces a
folder holding one, and refresh-code leaves it out of the updated folder.

This module is not shipped with checkpoints; of the package it imports only closure.py (standard library only).
"""

import json
import re
from pathlib import Path

from ..modeling.closure import ENTRY_FILES, closure_files, import_closure

# The files a saved model folder holds besides its weights and code (transformers' config, generation config, tokenizer
# files, a model card).
CHECKPOINT_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "tokenizer.model",
    "spiece.model",
    "source.spm",
    "target.spm",
    "sentencepiece.bpe.model",
    "chat_template.jinja",
    "README.md",
)
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
SHARDED_WEIGHTS = re.compile(r"(model|pytorch_model)-\d+-of-\d+\.(safetensors|bin)")
WEIGHTS_DESCRIPTION = "model.safetensors, pytorch_model.bin, their shards or a shard index"
# Modules that the shipped code of an earlier release had and the installed one no longer has (their code moved into
# other modules). With the installed shipped files, they are every name hf-attention has shipped as code. A module
# removed from hf_attention/modeling/ is added here, so that refresh-code removes it from the checkpoints it updates.
EARLIER_SHIPPED_MODULES = ("heads.py", "projection_speedups.py", "signatures.py")
# What an earlier release's refresh-code named a file while writing it (`destinations._beside` of those releases).
_EARLIER_PARTIAL = re.compile(r"\.(?P<name>.+)\.[0-9a-f]{8}\.partial")


def weight_files(folder: Path) -> list[str]:
    """The names of the weight files in `folder` (a single file, shards or a shard index), sorted."""
    names = (p.name for p in folder.iterdir() if p.is_file())
    return sorted(name for name in names if name in WEIGHT_FILES or SHARDED_WEIGHTS.fullmatch(name))


def shipped_module_names() -> set[str]:
    """Every file name hf-attention ships, or shipped, as a checkpoint's code."""
    return {*closure_files(), *EARLIER_SHIPPED_MODULES}


def earlier_partial_files(folder: Path) -> list[str]:
    """The files in `folder` that an earlier release's refresh-code left half written, sorted: regular files (not
    links) named `.NAME.<8 hex>.partial`, NAME being config.json or a module hf-attention ships or shipped, the only
    files it wrote there. Anything else of that form is someone else's."""
    ours = {"config.json", *shipped_module_names()}
    found = []
    for path in folder.iterdir():
        match = _EARLIER_PARTIAL.fullmatch(path.name)
        if match and match["name"] in ours and path.is_file() and not path.is_symlink():
            found.append(path.name)
    return sorted(found)


def remote_code_fields(config: dict, where: str) -> tuple[dict, dict]:
    """(auto_map, custom_pipelines) of a loaded config.json, each {} when absent; a ValueError naming the field and
    what was found when one is not what transformers reads (`where` names the file in the message)."""
    auto_map = config.get("auto_map") or {}
    _check_mapping(auto_map, f"{where}: auto_map", 'of Auto class names to "module.Class" (or a list of such names)')
    for auto_class, entry in auto_map.items():
        names = entry if isinstance(entry, list) else [entry]
        if not all(name is None or isinstance(name, str) for name in names):
            raise ValueError(
                f'{where}: auto_map[{auto_class!r}] must be a "module.Class" name or a list of them; found '
                f"{_found(entry)}."
            )
    pipelines = config.get("custom_pipelines") or {}
    _check_mapping(pipelines, f"{where}: custom_pipelines", 'of task names to {"impl": "module.Class", ...}')
    for task, pipeline in pipelines.items():
        if not isinstance(pipeline, dict):
            raise ValueError(
                f'{where}: custom_pipelines[{task!r}] must be a mapping such as {{"impl": "module.Class", ...}}; '
                f"found {_found(pipeline)}."
            )
        if not isinstance(pipeline.get("impl", ""), str):
            raise ValueError(
                f"{where}: custom_pipelines[{task!r}]['impl'] must be a \"module.Class\" name; found "
                f"{_found(pipeline['impl'])}."
            )
    return auto_map, pipelines


def _check_mapping(value, field: str, of_what: str) -> None:
    if not isinstance(value, dict):
        raise ValueError(f"{field} must be a mapping {of_what}; found {_found(value)}.")


def _found(value) -> str:
    """`value` in a few words for a message: its kind, then (shortened) what it is."""
    text = repr(value)
    article = "an" if type(value).__name__[0] in "aeiou" else "a"
    return f"{article} {type(value).__name__} ({text if len(text) <= 60 else text[:57] + '...'})"


def code_files(folder: Path, config: dict, where: str) -> set[str]:
    """The Python files of `folder` that its config ships as code: those `auto_map` and `custom_pipelines` name, and
    every sibling they import, followed through the files themselves."""
    auto_map, pipelines = remote_code_fields(config, where)
    names = [name for entry in auto_map.values() for name in (entry if isinstance(entry, list) else [entry]) if name]
    names += [pipeline["impl"] for pipeline in pipelines.values() if pipeline.get("impl")]
    # "module.Class", or "owner/repo--module.Class" for code that lives in another Hub repository
    entries = {f"{name.split('--')[-1].split('.')[0]}.py" for name in names}
    if str(config.get("model_type", "")).startswith("hf_attention"):
        # auto_map names each class's own module, but an hf-attention checkpoint ships the whole closure: the entry
        # files (modeling_hf_attention.py imports every family) and what they import.
        entries |= set(ENTRY_FILES)
    return import_closure(folder, entries)


def not_only_a_checkpoint(folder: Path, also: tuple[str, ...] = ()) -> str | None:
    """What in `folder` shows it is not (only) a saved model, in a few words; None when it is one. `also`: the names
    of other files the writer puts beside the model (a training run's figures)."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "it has no config.json"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return "its config.json is not a model config (not JSON)"
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        return "its config.json has no model_type, so it is not a model config"
    try:
        code = code_files(folder, config, "its config.json")
    except ValueError as error:
        return str(error).rstrip(".")
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    weights = weight_files(folder)
    known = {*CHECKPOINT_FILES, *also, *code, *weights, *earlier_partial_files(folder)}
    others = [name for name in names if name not in known]
    if others:
        return f"it also holds {listing(others)}"
    if not weights:
        return f"it has no model weights ({WEIGHTS_DESCRIPTION})"
    return None


def listing(names: list[str], shown: int = 5) -> str:
    """The first `shown` of `names`, and how many more there are."""
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more
