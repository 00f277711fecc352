"""The model code a checkpoint carries, and `hf-attention refresh-code`, which replaces it with the installed one.

`save_pretrained` copies this package's remote-code closure (closure.py: the configuration and modeling files and
every sibling they import) beside the weights, so that `trust_remote_code=True` loads the folder where hf_attention
is not installed. That copy is frozen at save time: when transformers changes its contract with models (5.24
renamed the cache argument from `past_key_values` to `cache`), a checkpoint saved earlier still runs its old code
there, while loading it with hf_attention installed uses the installed classes. `refresh_shipped_code` writes the
installed closure (and the translation pipeline, when the checkpoint ships one) into the folder and updates
`auto_map`; the weights, tokenizer and every other file stay as they are.

This module is outside the remote-code closure.
"""

import json
import os
import tempfile
from pathlib import Path

from .closure import PACKAGE, closure_files
from .modeling_hf_attention import AUTO_CLASSES, auto_map_of

PIPELINE_FILE = "pipelines.py"


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


def _write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same folder: a reader sees the old or the new file."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def refresh_shipped_code(folder: str | os.PathLike) -> list[str]:
    """Write the installed hf-attention model code into checkpoint `folder`; returns the files written.

    The folder must hold an hf-attention config.json (checked before anything is written). The closure files and,
    if the config names it in `custom_pipelines`, the translation pipeline are replaced; `auto_map` in config.json
    is set to what `save_pretrained` writes today. Weights and every other file are left untouched.
    """
    folder = Path(folder)
    config = _model_config(folder)
    names = closure_files()
    pipelines = config.get("custom_pipelines") or {}
    if any(str(task.get("impl", "")).startswith(f"{Path(PIPELINE_FILE).stem}.") for task in pipelines.values()):
        names.append(PIPELINE_FILE)
    sources = {name: (PACKAGE / name).read_bytes() for name in names}  # read all before writing any
    config["auto_map"] = {**(config.get("auto_map") or {}), **auto_map_of(config["model_type"])}
    for name, data in sources.items():
        _write_atomically(folder / name, data)
    _write_atomically(folder / "config.json", (json.dumps(config, indent=2, sort_keys=True) + "\n").encode())
    return [*names, "config.json"]


def add_refresh_code_command(subparsers) -> None:
    """`hf-attention refresh-code CHECKPOINT`."""
    command = subparsers.add_parser(
        "refresh-code",
        help="replace the model code shipped in a checkpoint folder with the installed hf-attention's",
        description=(
            "Write the installed hf-attention model code (what trust_remote_code=True runs where hf-attention is "
            "not installed) into CHECKPOINT, and update auto_map in its config.json. Weights, tokenizer and other "
            "files are not touched. Use it after upgrading hf-attention, e.g. for the transformers 5.24 cache "
            "rename, before sharing or uploading a checkpoint saved by an older version."
        ),
    )
    command.add_argument("checkpoint", help="an hf-attention checkpoint folder (config.json + weights)")
    command.set_defaults(run=_run)


def _run(args) -> int:
    written = refresh_shipped_code(args.checkpoint)
    print(f"{args.checkpoint}: wrote {', '.join(written)}")
    return 0
