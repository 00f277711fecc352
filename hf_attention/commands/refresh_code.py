"""The model code a checkpoint carries, and `hf-attention refresh-code`, which replaces it with the installed one.

`save_pretrained` copies the shipped model code (the files of hf_attention/modeling/, listed by closure.py) beside the
weights, so that `trust_remote_code=True` loads the folder where hf_attention is not installed. That copy is frozen at
save time: when transformers changes its contract with models (5.24 renamed the cache argument from `past_key_values`
to `cache`), a checkpoint saved earlier still runs its old code there, while loading it with hf_attention installed
uses the installed classes. `refresh_shipped_code` writes the installed shipped code into the folder and updates
`auto_map`; the weights, tokenizer and every other file stay as they are. A folder that is not a saved hf-attention
model (no weights, a config.json that is not one) is refused before anything is written, and so is a file the installed
code would replace that the checkpoint does not ship as code (a user's file whose name the package has since given a
module). The folder is updated the way destinations.py replaces files: a copy beside it (hard links to its files)
receives the new ones and is swapped in at once, each replaced file keeping its permissions.

What the updated folder no longer holds: the modules the checkpoint shipped that the installed code does not have
(an earlier release's `signatures.py`, whose function moved into `pretrained.py`), and the half-written files an
earlier release's refresh-code left (`.NAME.<8 hex>.partial`, see checkpoint_files.py). A module is removed only when
both say it is ours: the checkpoint's own code imports it (it is part of the code the checkpoint ships, see
`checkpoint_files.code_files`) and its name is one hf-attention shipped (`checkpoint_files.EARLIER_SHIPPED_MODULES`);
and never while config.json's auto_map or custom_pipelines still names it. Any other file stays.

This module is not shipped with checkpoints.
"""

import json
import os
from pathlib import Path

from ..modeling.closure import PACKAGE, closure_files
from ..modeling.modeling_hf_attention import AUTO_CLASSES, auto_map_of
from .checkpoint_files import (
    WEIGHTS_DESCRIPTION,
    code_files,
    earlier_partial_files,
    remote_code_fields,
    shipped_module_names,
    weight_files,
)
from .destinations import replace_files
from .paths import check_text_argument


def _model_config(folder: Path) -> dict:
    """config.json of an hf-attention checkpoint; ValueError naming what was found otherwise."""
    path = folder / "config.json"
    if not folder.is_dir():
        raise ValueError(f"checkpoint {str(folder)!r} is not a folder.")
    if not path.is_file():
        raise ValueError(f"checkpoint {str(folder)!r} has no config.json: not a saved model folder.")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON ({error}).") from error
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if model_type not in AUTO_CLASSES:
        raise ValueError(
            f"{path} has model_type={model_type!r}; refresh-code updates hf-attention checkpoints only "
            f"(model_type one of {sorted(AUTO_CLASSES)})."
        )
    return config


def _check_weights(folder: Path) -> None:
    """A config.json beside files of one's own (notes named layers.py, say) is not a checkpoint: its files are not
    ours to replace."""
    if not weight_files(folder):
        raise ValueError(
            f"checkpoint {str(folder)!r} has no model weights ({WEIGHTS_DESCRIPTION}): it is not a saved model "
            "(config.json + weights), so its files are not replaced. Nothing was written."
        )


def refresh_shipped_code(folder: str | os.PathLike) -> list[str]:
    """Write the installed hf-attention model code into checkpoint `folder`; returns the files written.

    The folder must hold an hf-attention config.json, with an `auto_map` and `custom_pipelines` of the form
    transformers reads, and model weights (all checked before anything is written). The shipped files are written
    (the files of hf_attention/modeling/, the translation pipeline among them); `auto_map` in config.json is set to
    what `save_pretrained` writes today. Each replaced file keeps its permissions. The modules the checkpoint shipped
    that the installed code no longer has, and the half-written files of an earlier release's refresh-code, are left
    out of the updated folder (`stale_files`). Weights and every other file are left untouched (the folder is swapped
    for an updated copy that holds hard links to them).

    Raises:
        ValueError: Before anything is written, for a folder that is not an hf-attention checkpoint, a malformed
            config field, a file the installed code would replace that the checkpoint does not ship as code (naming
            it), and the checks of `destinations.replace_files` (the current folder; a folder, or the one holding
            it, that is not writable).
    """
    return _refresh(folder)[0]


def _refresh(folder: str | os.PathLike) -> tuple[list[str], list[str]]:
    """`refresh_shipped_code`: (the files written, the files left out of the updated folder)."""
    check_text_argument("checkpoint", os.fspath(folder), what="folder name")
    folder = Path(folder)
    config = _model_config(folder)
    auto_map, _ = remote_code_fields(config, str(folder / "config.json"))
    _check_weights(folder)
    names = closure_files()
    shipped = code_files(folder, config, str(folder / "config.json"))
    _check_only_ours_replaced(folder, names, shipped)
    contents = {name: (PACKAGE / name).read_bytes() for name in names}
    config["auto_map"] = {**auto_map, **auto_map_of(config["model_type"])}
    contents["config.json"] = (json.dumps(config, indent=2, sort_keys=True) + "\n").encode()
    stale = stale_files(folder, config, shipped, names)
    replace_files(folder, contents, argument="checkpoint", name=os.fspath(folder), remove=stale)
    return list(contents), stale


def stale_files(folder: Path, config: dict, shipped: set[str], installed: list[str]) -> list[str]:
    """The files of checkpoint `folder` that refresh-code leaves out of the updated folder, sorted: the modules the
    checkpoint ships as code (`shipped`, found through its own imports) whose name hf-attention shipped but the
    `installed` code no longer has, unless the updated `config` still names them; and the half-written files an
    earlier release's refresh-code left there."""
    auto_map, pipelines = remote_code_fields(config, str(folder / "config.json"))
    entries = [name for entry in auto_map.values() for name in (entry if isinstance(entry, list) else [entry]) if name]
    entries += [pipeline["impl"] for pipeline in pipelines.values() if pipeline.get("impl")]
    named = {f"{entry.split('--')[-1].split('.')[0]}.py" for entry in entries}  # as code_files reads them
    ours = shipped_module_names() - set(installed) - named
    modules = [
        name for name in shipped if name in ours and (folder / name).is_file() and not (folder / name).is_symlink()
    ]
    return sorted({*modules, *earlier_partial_files(folder)})


def _check_only_ours_replaced(folder: Path, names: list[str], shipped: set[str]) -> None:
    """Refuse a file that the installed code would replace but the checkpoint does not ship as code: a user's own
    closure.py beside a checkpoint saved before the package had a module of that name is the user's, not ours."""
    theirs = [name for name in names if (folder / name).is_file() and name not in shipped]
    if theirs:
        one = len(theirs) == 1
        raise ValueError(
            f"checkpoint {str(folder)!r} holds {', '.join(theirs)}, which the model code it ships does not include "
            "(the modules its config.json's auto_map and custom_pipelines name, and the files they import): "
            f"{'it is not' if one else 'they are not'} hf-attention's to replace, but the installed code has a module "
            f"of {'that name' if one else 'each of those names'}. Move or rename {'it' if one else 'them'}, then run "
            "refresh-code again. Nothing was written."
        )


def add_refresh_code_command(subparsers) -> None:
    """`hf-attention refresh-code CHECKPOINT`."""
    command = subparsers.add_parser(
        "refresh-code",
        help="replace the model code shipped in a checkpoint folder with the installed hf-attention's",
        description=(
            "Write the installed hf-attention model code (what trust_remote_code=True runs where hf-attention is "
            "not installed) into CHECKPOINT, and update auto_map in its config.json, in one swap of the folder; each "
            "replaced file keeps its permissions. Only the code the checkpoint ships is replaced: a file of yours "
            "named as an installed module is refused. Weights, tokenizer and other files are not touched. Run it "
            "from outside CHECKPOINT. Use it after upgrading hf-attention, "
            "e.g. for the transformers 5.24 cache rename, before sharing or uploading a checkpoint saved by an older "
            "version."
        ),
    )
    command.add_argument(
        "checkpoint",
        help="an hf-attention checkpoint folder (config.json + weights); a folder without weights is refused before "
        "anything is written",
    )
    command.set_defaults(run=_run)


def _run(args) -> int:
    written, removed = _refresh(args.checkpoint)
    print(f"{args.checkpoint}: wrote {', '.join(written)}" + (f"; removed {', '.join(removed)}" if removed else ""))
    return 0
