"""Where the writing commands (`convert`, `export`, `demo`, `refresh-code`) put what they write, and what they may
replace there.

The rule: write beside, swap in when complete, never replace what we did not write.

- Write beside: the output is written into a fresh folder (or file) next to its destination, so that a failure or an
  interrupted run leaves the destination as it was and no reader ever sees half of it.
- Swap in when complete: one rename puts it in place. What it replaces keeps its permissions (the folder's and each
  file's that is written again), and what is new gets those of a plain mkdir() or open() under the umask, so that a
  checkpoint shared with a group stays readable by the group.
- Never replace what we did not write: a destination is checked before any work, and again just before the swap
  (a conversion takes minutes, and someone may save a file there meanwhile). It is a new or empty folder, or, with
  `--overwrite`, one that holds only what the command writes (a model checkpoint; an earlier demo's checkpoints);
  anything else is refused, naming it. It is never the source, inside it or holding it, never the current folder or
  one holding it (the swap would leave the shell in a deleted folder), and its name is UTF-8.

This module is outside the remote-code closure.
"""

import os
import shutil
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .checkpoint_files import not_only_a_checkpoint
from .paths import check_text_argument

# How the messages name the flag and its keyword in the Python functions.
_OVERWRITE = "--overwrite (overwrite=True)"


@dataclass(frozen=True)
class Output:
    """What a command writes at its destination, as the checks and their messages need it."""

    name: str  # e.g. "a model checkpoint"
    holds: str  # what a folder of such an output holds, said when --overwrite is refused
    foreign: Callable[[Path], str | None]  # what in a folder is not part of such an output, in words; None if nothing


CHECKPOINT = Output(
    "a model checkpoint",
    "a model config (config.json with model_type), its weights and the files saved with them",
    not_only_a_checkpoint,
)


@dataclass(frozen=True)
class Destination:
    """A destination folder that passed `check_destination`: `path` is where it resolves, `write` fills it."""

    path: Path
    name: str  # as given, for the messages
    argument: str
    output: Output
    overwrite: bool

    def write(self, fill: Callable[[Path], None]) -> None:
        """Run `fill` on a fresh folder beside `path`, then swap that folder in, replacing what the checks allow.

        On any failure the new folder, and the parent folders created for it, are removed: the disk is as it was.
        """
        created = _make_parents(self.path.parent)
        partial = _beside(self.path)
        try:
            partial.mkdir()  # (mkdir, unlike mkdtemp, gives the folder the user's usual permissions)
            fill(partial)
            give_usual_permissions(partial)
            self._swap_in(partial)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            _remove_if_empty(created)
            raise

    def check_contents(self) -> None:
        """Refuse a file, a non-empty folder without --overwrite, and a folder that holds more than the output."""
        if self.path.exists() and not self.path.is_dir():
            raise ValueError(f"{self.argument} {self.name} is a file, not a folder; pass a new or empty folder.")
        if not self.path.is_dir() or not any(self.path.iterdir()):
            return
        if not self.overwrite:
            raise ValueError(
                f"{self.argument} {self.name} is a non-empty folder; pass a new or empty folder, or {_OVERWRITE} to "
                f"replace {self.output.name} there."
            )
        foreign = self.output.foreign(self.path)
        if foreign:
            raise ValueError(
                f"{self.argument} {self.name} is not only {self.output.name}: {foreign}. {_OVERWRITE} replaces a "
                f"folder that holds {self.output.holds}, and nothing else. Pass another folder."
            )

    def _swap_in(self, partial: Path) -> None:
        if not self.path.exists():
            partial.rename(self.path)
            return
        self.check_contents()  # again: the folder may have been filled while the output was written
        _keep_permissions(self.path, partial)
        previous = _beside(self.path, "previous")
        self.path.rename(previous)
        try:
            partial.rename(self.path)
        except OSError:
            previous.rename(self.path)
            raise
        shutil.rmtree(previous, ignore_errors=True)


def check_destination(
    destination: str | os.PathLike,
    *,
    argument: str = "destination",
    output: Output = CHECKPOINT,
    overwrite: bool = False,
    source: str | None = None,
) -> Destination:
    """The destination folder `destination` (what the user gave as `argument`), checked before any work.

    Raises:
        ValueError: Naming `argument` and the value, when the name is empty or not UTF-8; when the folder is the
            local folder `source`, inside it or holds it; when it is the current folder or holds it; when it is a
            file, or a parent of it is; when it is a non-empty folder and `overwrite` is false, or holds anything
            that `output.foreign` does not accept; when the folder it would be created in is not writable.
    """
    name = os.fspath(destination)
    check_text_argument(argument, name, what="folder name")
    if not name.strip():
        raise ValueError(f"{argument} is empty: pass the folder to write {output.name} to.")
    try:
        target = Path(name).expanduser().resolve()
    except (OSError, RuntimeError) as error:  # e.g. a loop of symbolic links
        raise ValueError(f"{argument} {name} cannot be resolved ({error}); pass another folder.") from None
    if source is not None and os.path.isdir(source):
        _check_apart_from_source(target, name, argument, source)
    _check_not_the_current_folder(target, name, argument)
    checked = Destination(target, name, argument, output, overwrite)
    checked.check_contents()
    existing = next(parent for parent in (target, *target.parents) if parent.exists())
    if not existing.is_dir():
        raise ValueError(f"{argument} {name}: {existing} is a file, not a folder, so no folder can be created there.")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{argument} {name}: {existing} is not writable.")
    return checked


def _check_apart_from_source(target: Path, name: str, argument: str, source: str) -> None:
    origin = Path(source).resolve()
    if target == origin or (target.exists() and os.path.samefile(target, origin)):
        raise ValueError(
            f"{argument} {name} is the source checkpoint; writing there would overwrite it. Pass another folder."
        )
    if target.is_relative_to(origin):
        raise ValueError(f"{argument} {name} is inside the source checkpoint {source}; pass a folder outside it.")
    if origin.is_relative_to(target):
        raise ValueError(
            f"{argument} {name} holds the source checkpoint {source}; writing there would replace it. Pass another "
            "folder."
        )


def _check_not_the_current_folder(target: Path, name: str, argument: str) -> None:
    """The swap renames the destination away: done to the current folder, it leaves the shell in a deleted folder."""
    current = Path.cwd().resolve()
    if current.is_relative_to(target):
        what = "is the current folder" if current == target else f"holds the current folder {current}"
        raise ValueError(
            f"{argument} {name} {what}; writing there would replace the folder you are working in. Pass another "
            "folder."
        )


def _beside(path: Path, role: str = "partial") -> Path:
    """A hidden, unused name next to `path`, for a new version of it or the old one on its way out."""
    return path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.{role}")


def _make_parents(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; returns those created, innermost first."""
    missing = [parent for parent in (folder, *folder.parents) if not parent.exists()]
    folder.mkdir(parents=True, exist_ok=True)
    return missing


def _remove_if_empty(folders: list[Path]) -> None:
    for folder in folders:  # innermost first: each is empty once the one inside it is gone
        try:
            folder.rmdir()
        except OSError:
            return


def give_usual_permissions(folder: Path) -> None:
    """Give each file in `folder` what open() gives under the umask: the permissions mkdir() gave the folder, less
    the execute bits. Some writers make their files private (safetensors writes its files 0600), which would lock
    the group out of a checkpoint meant to be shared."""
    usual = stat.S_IMODE(folder.stat().st_mode) & 0o666
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            os.chmod(path, usual)


def _keep_permissions(old: Path, new: Path) -> None:
    """Give the folder `new` and everything in it the permissions of their counterparts in `old`, where there is
    one of the same kind (what is new keeps those mkdir() and open() gave it)."""
    for path in [new, *new.rglob("*")]:
        counterpart = old / path.relative_to(new)
        if path.is_symlink() or not counterpart.exists() or counterpart.is_dir() != path.is_dir():
            continue
        os.chmod(path, stat.S_IMODE(counterpart.stat().st_mode))


def replace_files(folder: Path, contents: dict[str, bytes]) -> None:
    """Write `contents` (file name → bytes) into `folder`: every file is first written beside its destination, then
    each is renamed over it. A replaced file keeps its permissions; a new one gets what open() gives under the umask.

    Raises:
        ValueError: Before anything is written, when one of the names is a folder (or another non-file) in `folder`.
    """
    for name in contents:
        path = folder / name
        if path.exists() and not path.is_file():
            kind = "a folder" if path.is_dir() else "not a regular file"
            raise ValueError(f"{path} is {kind}; only files are replaced there. Nothing was written.")
    written: list[tuple[Path, Path]] = []
    try:
        for name, data in contents.items():
            written.append((_beside(folder / name), folder / name))
            _write_new_file(*written[-1], data)
        for temporary, path in written:
            os.replace(temporary, path)
    finally:
        for temporary, _ in written:
            temporary.unlink(missing_ok=True)


def _write_new_file(path: Path, like: Path, data: bytes) -> None:
    """Create `path` holding `data`, with the permissions of `like` when it exists."""
    # os.open's mode goes through the umask, as open()'s does (tempfile.mkstemp would make the file 0600).
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as file:
        file.write(data)
    if like.exists():
        os.chmod(path, stat.S_IMODE(like.stat().st_mode))
