"""Checkpoints that survive a crash mid-save, exact resume, and nothing executed on load.

Layout under `output_dir/checkpoints/`:

    step_00050/           accelerator.save_state: model (safetensors), optimizer, RNG of every process; plus
                          scheduler.json (the learning-rate schedule's state) and progress.json (step, epoch,
                          batches consumed in the epoch)
    step_00100/
    latest                a text file naming the newest complete checkpoint ("step_00100")

A checkpoint is written to `.tmp_step_XXXXX`, renamed to `step_XXXXX` when complete (an atomic rename on one file
system), and only then is `latest` replaced (written to a temporary file and `os.replace`d). A crash at any moment
leaves `latest` naming a complete checkpoint; a stray `.tmp_*` folder is ignored and removed by the next save.

One case needs more care: a run resumed from an older checkpoint reaches a step whose folder an abandoned run left
behind, and `latest` may name that folder. The new checkpoint is then promoted in three moves, each leaving `latest`
on a complete folder: `latest` names the complete temporary folder, the old folder is removed, the temporary one is
renamed (a reader finding `latest` on a temporary name that has just been renamed takes the promoted name), and
`latest` names the promoted folder.

Nothing here is unpickled without restriction. Accelerate loads the optimizer and RNG files with
`torch.load(weights_only=True)`; the scheduler, which Accelerate would pickle and load with `weights_only=False`,
is saved as JSON instead, and a checkpoint holding such a pickle is refused.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from training.run.sharding import load_sharded_state, save_sharded_state

PROGRESS_FILE = "progress.json"
SCHEDULER_FILE = "scheduler.json"
LATEST = "latest"
TEMPORARY_PREFIX = ".tmp_"


@dataclass
class Progress:
    """Where the run is: optimizer steps done, the epoch, and micro-batches of that epoch consumed per process."""

    step: int = 0
    epoch: int = 0
    batches_in_epoch: int = 0


def checkpoint_root(output_dir: str | Path) -> Path:
    return Path(output_dir) / "checkpoints"


def save_checkpoint(
    accelerator,
    output_dir: str | Path,
    progress: Progress,
    *,
    scheduler=None,
    keep: int | None = None,
    sharded: tuple | None = None,
    average=None,
) -> Path:
    """Save the full training state atomically and point `latest` at it. Called on every process.

    `sharded=(model, optimizer)` for a model sharded by `training.run.sharding` (Accelerate does not hold it);
    `average`, a `training.run.averaging.WeightAverage`, adds the mean of the weights so far."""
    root = checkpoint_root(output_dir)
    name = f"step_{progress.step:05d}"
    final, temporary = root / name, root / f"{TEMPORARY_PREFIX}{name}"
    if accelerator.is_main_process:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(temporary, ignore_errors=True)
    accelerator.wait_for_everyone()
    if sharded is None:
        accelerator.save_state(str(temporary))  # each process writes its RNG state; the main one the rest
    else:
        save_sharded_state(
            temporary, *sharded, is_main_process=accelerator.is_main_process, rank=accelerator.process_index
        )
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        if scheduler is not None:
            write_atomically(temporary / SCHEDULER_FILE, json.dumps(scheduler.state_dict()))
        write_atomically(temporary / PROGRESS_FILE, json.dumps(asdict(progress)))
        if average is not None:
            average.save(temporary)
        if final.exists():  # an abandoned run's save of the same step: promote without leaving `latest` dangling
            write_atomically(root / LATEST, temporary.name)
            shutil.rmtree(final)
        os.replace(temporary, final)
        write_atomically(root / LATEST, name)
        _prune(root, keep)
    accelerator.wait_for_everyone()
    return final


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".tmp")
    with open(partial, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)


def _latest_name(root: Path) -> str | None:
    pointer = root / LATEST
    return pointer.read_text().strip() if pointer.is_file() else None


def _prune(root: Path, keep: int | None) -> None:
    """Delete stray temporary folders and all but the newest `keep` checkpoints (never the one `latest` names)."""
    latest = _latest_name(root)
    for stray in root.glob(f"{TEMPORARY_PREFIX}step_*"):
        if stray.name != latest:
            shutil.rmtree(stray, ignore_errors=True)
    if not keep:
        return
    checkpoints = sorted(p for p in root.glob("step_*") if p.is_dir())
    for old in checkpoints[:-keep]:
        if old.name != latest:
            shutil.rmtree(old, ignore_errors=True)


def resolve_checkpoint(resume_from: str, output_dir: str | Path) -> Path:
    """The checkpoint folder for `--resume_from_checkpoint` ("latest" or a path), or a ValueError.

    Checked before any training starts: the folder must hold our progress file, the scheduler state and a saved
    model and optimizer, no pickle that would be loaded without restriction, and a readable progress file.
    """
    if resume_from == LATEST:
        root = checkpoint_root(output_dir)
        name = _latest_name(root)
        if name is None:
            raise ValueError(
                f"--resume_from_checkpoint latest: no checkpoint in {root} (no '{LATEST}' file). "
                "Start without --resume_from_checkpoint."
            )
        if not name or "/" in name or os.sep in name or name in (".", ".."):
            raise ValueError(
                f"{root / LATEST} should name a checkpoint folder in {root}, but holds {name!r}. "
                "Pass a checkpoint folder to --resume_from_checkpoint instead."
            )
        path = root / name
        if name.startswith(TEMPORARY_PREFIX) and not path.exists():  # a save was promoting it: see the module doc
            path = root / name.removeprefix(TEMPORARY_PREFIX)
    else:
        path = Path(resume_from)
    if not is_checkpoint(path):
        raise ValueError(
            f"{path} is not a training checkpoint: expected a folder with {PROGRESS_FILE}, "
            f"{SCHEDULER_FILE} and the model/optimizer state written by accelerator.save_state."
        )
    _refuse_unrestricted_pickles(path)
    read_progress(path)
    return path


def is_checkpoint(path: Path) -> bool:
    path = Path(path)
    has_model = any(path.glob("model*.safetensors")) or any(path.glob("pytorch_model*.bin"))
    return (
        path.is_dir()
        and (path / PROGRESS_FILE).is_file()
        and (path / SCHEDULER_FILE).is_file()
        and has_model
        and (path / "optimizer.bin").is_file()
    )


def read_progress(path: Path) -> Progress:
    """The progress file of checkpoint `path`, or a ValueError naming the file and what it should hold."""
    file = Path(path) / PROGRESS_FILE
    expected = ", ".join(f'"{f.name}": <integer >= 0>' for f in fields(Progress))
    try:
        values = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{file} is not readable JSON ({error}); it should hold {{{expected}}}. The checkpoint is "
            "damaged: resume from another one."
        ) from error
    names = {f.name for f in fields(Progress)}
    if (
        not isinstance(values, dict)
        or set(values) != names
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values.values())
    ):
        raise ValueError(
            f"{file} holds {values!r}; it should hold {{{expected}}}. The checkpoint is damaged: "
            "resume from another one."
        )
    return Progress(**values)


def load_checkpoint(accelerator, path: Path, *, scheduler=None, sharded: tuple | None = None) -> Progress:
    """Restore model, optimizer, scheduler and RNG from `path`; return where the run was."""
    _refuse_unrestricted_pickles(Path(path))
    progress = read_progress(path)
    if sharded is None:
        accelerator.load_state(str(path))
    else:
        load_sharded_state(path, *sharded, is_main_process=accelerator.is_main_process, rank=accelerator.process_index)
    if scheduler is not None:
        scheduler.load_state_dict(_read_scheduler_state(Path(path)))
    return progress


def _read_scheduler_state(path: Path) -> dict:
    try:
        return json.loads((path / SCHEDULER_FILE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(
            f"{path / SCHEDULER_FILE} is not readable JSON ({error}): the checkpoint is damaged; "
            "resume from another one."
        ) from error


def _refuse_unrestricted_pickles(path: Path) -> None:
    """Accelerate unpickles `custom_checkpoint_*.pkl` without restriction (code in it would run): this script
    never writes one, so a checkpoint holding one is refused before anything is loaded."""
    pickles = sorted(p.name for p in path.glob("custom_checkpoint_*.pkl"))
    if pickles:
        raise ValueError(
            f"{path} holds {', '.join(pickles)}, a pickle that Accelerate would load without "
            "restriction (code in it would run). This script keeps the scheduler in scheduler.json and "
            "writes no such file: the checkpoint comes from elsewhere (or an older version). Resume from "
            "a checkpoint written by this version, or start a new run."
        )
