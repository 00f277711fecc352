"""Checkpoints that survive a crash mid-save, and exact resume.

Layout under `output_dir/checkpoints/`:

    step_00050/           accelerator.save_state: model, optimizer, scheduler (register_for_checkpointing), RNG of
                          every process, plus progress.json (step, epoch, batches consumed in the epoch)
    step_00100/
    latest                a text file naming the newest complete checkpoint ("step_00100")

A checkpoint is written to `.tmp_step_XXXXX`, renamed to `step_XXXXX` when complete (an atomic rename on one file
system), and only then is `latest` replaced (written to a temporary file and `os.replace`d). A crash at any moment
leaves `latest` naming a complete checkpoint; a stray `.tmp_*` folder is ignored and removed by the next save.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

PROGRESS_FILE = "progress.json"
LATEST = "latest"


@dataclass
class Progress:
    """Where the run is: optimizer steps done, the epoch, and micro-batches of that epoch consumed per process."""

    step: int = 0
    epoch: int = 0
    batches_in_epoch: int = 0


def checkpoint_root(output_dir: str | Path) -> Path:
    return Path(output_dir) / "checkpoints"


def save_checkpoint(accelerator, output_dir: str | Path, progress: Progress, *, keep: int | None = None) -> Path:
    """Save the full training state atomically and point `latest` at it. Called on every process."""
    root = checkpoint_root(output_dir)
    name = f"step_{progress.step:05d}"
    final, temporary = root / name, root / f".tmp_{name}"
    if accelerator.is_main_process:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(temporary, ignore_errors=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(temporary))  # each process writes its RNG state; the main one the rest
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (temporary / PROGRESS_FILE).write_text(json.dumps(asdict(progress)))
        shutil.rmtree(final, ignore_errors=True)  # an older save of the same step (a run resumed before it)
        os.replace(temporary, final)
        _write_atomically(root / LATEST, name)
        _prune(root, keep)
    accelerator.wait_for_everyone()
    return final


def _write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".tmp")
    with open(partial, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)


def _prune(root: Path, keep: int | None) -> None:
    """Delete stray temporary folders and all but the newest `keep` checkpoints (never the one `latest` names)."""
    for stray in root.glob(".tmp_step_*"):
        shutil.rmtree(stray, ignore_errors=True)
    if not keep:
        return
    latest = (root / LATEST).read_text().strip()
    checkpoints = sorted(p for p in root.glob("step_*") if p.is_dir())
    for old in checkpoints[:-keep]:
        if old.name != latest:
            shutil.rmtree(old, ignore_errors=True)


def resolve_checkpoint(resume_from: str, output_dir: str | Path) -> Path:
    """The checkpoint folder for `--resume_from_checkpoint` ("latest" or a path), or a ValueError.

    Checked before any training starts: the folder must hold our progress file and a saved model.
    """
    if resume_from == LATEST:
        pointer = checkpoint_root(output_dir) / LATEST
        if not pointer.is_file():
            raise ValueError(f"--resume_from_checkpoint latest: no checkpoint in {checkpoint_root(output_dir)} "
                             f"(no '{LATEST}' file). Start without --resume_from_checkpoint.")
        path = checkpoint_root(output_dir) / pointer.read_text().strip()
    else:
        path = Path(resume_from)
    if not is_checkpoint(path):
        raise ValueError(f"{path} is not a training checkpoint: expected a folder with {PROGRESS_FILE} and the "
                         "model/optimizer state written by accelerator.save_state.")
    return path


def is_checkpoint(path: Path) -> bool:
    path = Path(path)
    has_model = any(path.glob("model*.safetensors")) or any(path.glob("pytorch_model*.bin"))
    return path.is_dir() and (path / PROGRESS_FILE).is_file() and has_model and (path / "optimizer.bin").is_file()


def load_checkpoint(accelerator, path: Path) -> Progress:
    """Restore model, optimizer, scheduler and RNG from `path`; return where the run was."""
    accelerator.load_state(str(path))
    return Progress(**json.loads((Path(path) / PROGRESS_FILE).read_text()))
