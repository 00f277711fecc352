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
  one holding it (the swap would leave the shell in a deleted folder), and its name is UTF-8. The folder that will
  hold the hidden new folder (and a replaced folder, whose contents are removed) must be writable, checked then too.
- Leave nothing behind: the hidden folders carry a marker file naming the process that wrote them; a run killed
  before it removed one leaves it, and the next write beside the same destination removes it. A hidden folder without
  our marker, or whose writer still runs, is never touched.

This module is not shipped with checkpoints.
"""

import contextlib
import ctypes
import errno
import os
import re
import shutil
import socket
import stat
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .checkpoint_files import not_only_a_checkpoint
from .paths import check_text_argument

# How the messages name the flag and its keyword in the Python functions.
_OVERWRITE = "--overwrite (overwrite=True)"
# The end of the name of the file that marks each hidden folder we write beside a destination (and the old one on its
# way out) as ours: `.NAME.<hex>.partial` has its marker `.NAME.<hex>.partial.hf-attention-temporary` beside it. A run
# killed before it removed such a folder leaves both; the marker is how the next run tells that leftover from a
# user's folder that happens to have a name of the same form, which is never touched.
MARKER = ".hf-attention-temporary"


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
    flag: str = _OVERWRITE  # what lets the command replace the output at `path`, as the messages name it

    def write(self, fill: Callable[[Path], None]) -> None:
        """Run `fill` on a fresh folder beside `path`, then swap that folder in, replacing what the checks allow.

        On any failure the new folder, and the parent folders created for it, are removed: the disk is as it was.
        """
        created = _make_parents(self.path.parent)
        clean_leftovers(self.path)
        partial = None
        try:
            partial = _new_temporary(self.path)
            fill(partial)
            give_usual_permissions(partial)
            self._swap_in(partial)
        except BaseException:
            if partial is not None:
                remove_temporary(partial)
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
                f"{self.argument} {self.name} is a non-empty folder; pass a new or empty folder, or {self.flag} to "
                f"replace {self.output.name} there."
            )
        foreign = self.output.foreign(self.path)
        if foreign:
            raise ValueError(
                f"{self.argument} {self.name} is not only {self.output.name}: {foreign}. {self.flag} replaces a "
                f"folder that holds {self.output.holds}, and nothing else. Pass another folder."
            )

    def _swap_in(self, partial: Path) -> None:
        if self.path.exists():
            self.check_contents()  # again: the folder may have been filled while the output was written
            _keep_permissions(self.path, partial)
        swap(self.path, partial)


def check_destination(
    destination: str | os.PathLike,
    *,
    argument: str = "destination",
    output: Output = CHECKPOINT,
    overwrite: bool = False,
    source: str | None = None,
    flag: str = _OVERWRITE,
) -> Destination:
    """The destination folder `destination` (what the user gave as `argument`), checked before any work.

    Raises:
        ValueError: Naming `argument` and the value, when the name is empty or not UTF-8; when the folder is the
            local folder `source`, inside it or holds it; when it is the current folder or holds it; when it is a
            file, or a parent of it is; when it is a non-empty folder and `overwrite` is false, or holds anything
            that `output.foreign` does not accept; when the folder that holds it (where the new folder is written,
            hidden, and renamed into place) is not writable, or a folder it replaces is not (its contents are
            removed). `flag` names what allows a replacement, in the messages.
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
    checked = Destination(target, name, argument, output, overwrite, flag)
    checked.check_contents()
    holder = next(parent for parent in target.parents if parent.exists())
    if not holder.is_dir():
        raise ValueError(f"{argument} {name}: {holder} is a file, not a folder, so no folder can be created there.")
    check_writable(
        holder, f"{argument} {name}", f"{output.name} is written there first (hidden, beside {name}), then renamed"
    )
    if target.is_dir() and any(target.iterdir()):  # what it holds is removed once replaced
        for folder in [target, *(path for path in target.rglob("*") if path.is_dir() and not path.is_symlink())]:
            check_writable(folder, f"{argument} {name}", f"what it holds is removed when {output.name} replaces it")
    return checked


def check_writable(folder: Path, subject: str, why: str) -> None:
    """ValueError naming `folder` when this process cannot create, rename and remove entries in it."""
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(
            f"{subject}: {folder} is not writable, and {why}. Make it writable, or pass another folder. "
            "Nothing was written."
        )


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


def _marker(folder: Path) -> Path:
    """The file beside a temporary folder of ours that says it is ours (beside, not in it: the folder is swapped in
    whole, and a read-only one could not lose a file of its own)."""
    return folder.with_name(folder.name + MARKER)


def _marker_text() -> str:
    """Which process wrote a temporary folder: one still running (another command writing there now) keeps it."""
    return f"hf-attention {socket.gethostname()} {os.getpid()}\n"


def _mark(folder: Path) -> None:
    with open(_marker(folder), "x", encoding="utf-8") as marker:  # ("x": never over a file that is there)
        marker.write(_marker_text())


def _new_temporary(path: Path) -> Path:
    """A fresh hidden folder beside `path`, marked as ours before it exists: a kill at any instant leaves either
    nothing or a folder the next run recognises."""
    partial = _beside(path)
    _mark(partial)
    _ACTIVE.add(partial)
    try:
        partial.mkdir()  # (mkdir, unlike mkdtemp, gives the folder the user's usual permissions)
    except BaseException:
        remove_temporary(partial)
        raise
    return partial


# The temporary folders this process is writing now: a marker naming this process is a leftover only when its folder
# is not among them (a write that failed, in a long-lived process such as a notebook).
_ACTIVE: set[Path] = set()


def _is_ours_and_abandoned(marker: Path) -> bool:
    """Whether `marker` is a marker we wrote, for a folder whose writer is gone (killed, or the machine restarted)."""
    if marker.is_symlink() or not marker.is_file():
        return False
    try:
        words = marker.read_text(encoding="utf-8").split()
    except (OSError, UnicodeDecodeError):
        return False
    if len(words) != 3 or words[0] != "hf-attention" or not words[2].isdigit():
        return False
    if words[1] != socket.gethostname():
        return False  # written from another machine (a shared disk): whether that run is alive cannot be told here
    folder = marker.with_name(marker.name.removesuffix(MARKER))
    return folder not in _ACTIVE if int(words[2]) == os.getpid() else not _running(int(words[2]))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # (exists, owned by someone else)
        return True
    return True


def clean_leftovers(path: Path) -> list[Path]:
    """Tidy what a killed run of ours left beside `path`: hidden folders named as `_beside` names them whose marker
    we wrote. An old folder on its way out while `path` is missing (a kill between the two renames of a swap without
    an exchange) is put back; the others are removed. Anything else, a user's, stays. Returns the folders found."""
    if not path.parent.is_dir():
        return []
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[0-9a-f]{{8}}\.(partial|previous){re.escape(MARKER)}")
    markers = [entry for entry in path.parent.iterdir() if pattern.fullmatch(entry.name)]
    folders = [m.with_name(m.name.removesuffix(MARKER)) for m in markers if _is_ours_and_abandoned(m)]
    for folder in folders:
        if folder.name.endswith(".previous") and not os.path.lexists(path) and folder.is_dir():
            folder.rename(path)
            _marker(folder).unlink()
        else:
            remove_temporary(folder)
    return folders


def remove_temporary(folder: Path) -> None:
    """Remove a temporary folder of ours, then its marker (a kill midway leaves a leftover the next run
    recognises)."""
    _ACTIVE.discard(folder)
    if folder.is_dir() and not folder.is_symlink():
        with contextlib.suppress(OSError):  # it may carry the mode of a read-only folder it replaced
            os.chmod(folder, stat.S_IMODE(folder.stat().st_mode) | stat.S_IRWXU)
        shutil.rmtree(folder, ignore_errors=True)
    if not os.path.lexists(folder):
        _marker(folder).unlink(missing_ok=True)


_RENAME_EXCHANGE = 2  # renameat2's flag (linux/fs.h)
_AT_FDCWD = -100


def _exchange(first: Path, second: Path) -> bool:
    """Swap the names of two folders in one step; False, with nothing done, where the system cannot."""
    if sys.platform != "linux":
        return False
    renameat2 = getattr(ctypes.CDLL(None, use_errno=True), "renameat2", None)  # (glibc 2.28 and later)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(first), _AT_FDCWD, os.fsencode(second), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):  # an older kernel, a file system without it
        return False
    raise OSError(code, os.strerror(code), str(first), None, str(second))


def swap(path: Path, new: Path) -> None:
    """Put the complete folder `new` (a temporary of ours beside `path`) in the place of `path`, which may not exist,
    and remove what was there: in one step where the system exchanges two names at once (Linux), so that a kill at
    any instant leaves the old folder or the new one at `path`; elsewhere in two renames, the old folder marked
    first (the next run puts it back if a kill comes between them) and put back if the second fails."""
    if not path.exists():
        new.rename(path)
        remove_temporary(new)  # (only its marker: the folder is gone from that name)
        return
    if _exchange(new, path):
        previous = new  # the old folder now has the temporary name, and its marker
    else:
        previous = _beside(path, "previous")
        _mark(previous)
        path.rename(previous)
        try:
            new.rename(path)
        except OSError:
            previous.rename(path)
            _marker(previous).unlink()
            raise
        remove_temporary(new)
    remove_temporary(previous)


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


def replace_files(
    folder: Path,
    contents: dict[str, bytes],
    *,
    argument: str = "folder",
    name: str = "",
    remove: list[str] | tuple[str, ...] = (),
) -> None:
    """Write `contents` (file name → bytes) into `folder` in one swap: a copy of the folder is made beside it (hidden),
    each of its files a hard link to the one in `folder` (or, where the file system has none, a copy), the files of
    `contents` are written into it, and it is renamed in place of `folder`. The files named in `remove` (files of
    `folder` that the caller knows to be its own) are not carried into the copy, so they are gone with the old folder.
    A kill at any instant leaves `folder` as it was or as it is after; a hidden leftover is removed by the next run. A
    replaced file keeps its permissions, a new one gets what open() gives under the umask, and the folder keeps its
    own. The messages name the folder as `argument` `name` (`name`: the folder as given; the resolved path by
    default).

    Raises:
        ValueError: Before anything is written, when one of the names of `contents` or `remove` is a folder (or
            another non-file) in `folder`, or a name of both; when `folder` is the current folder or holds it (the swap
            would leave the shell in a deleted folder); when `folder` or the folder holding it is not writable; when
            something in `folder` is not a file, folder or link (it cannot be carried over); and, with nothing
            replaced, when `folder` changed meanwhile.
    """
    folder = folder.resolve()  # a link to the folder stays a link: the swap happens where it points
    name, subject = name or str(folder), f"{argument} {name or folder}"
    for file in contents:
        path = folder / file
        if path.exists() and not path.is_file():
            kind = "a folder" if path.is_dir() else "not a regular file"
            raise ValueError(f"{path} is {kind}; only files are replaced there. Nothing was written.")
    for file in remove:  # (a link is not removed: what it points to may be anyone's)
        path = folder / file
        if file != Path(file).name or path.is_symlink() or not path.is_file():
            raise ValueError(
                f"{path} is not a regular file in {folder}; only such files are removed. Nothing was written."
            )
    both = sorted(set(contents) & set(remove))
    if both:
        raise ValueError(f"{subject}: {', '.join(both)} would be both written and removed. Nothing was written.")
    _check_not_the_current_folder(folder, name, argument)
    check_writable(
        folder.parent, subject, f"the updated folder is written there first (hidden, beside {name}), then renamed"
    )
    check_writable(folder, subject, "its files are updated")
    skip = {*contents, *remove}
    kept = _entries(folder, skip=skip)
    clean_leftovers(folder)
    partial = _new_temporary(folder)
    try:
        _link_tree(folder, partial, kept)
        for file, data in contents.items():
            _write_new_file(partial / file, folder / file, data)
        if _entries(folder, skip=skip) != kept:
            raise ValueError(f"{subject} changed while it was updated; nothing was replaced. Run the command again.")
        os.chmod(partial, stat.S_IMODE(folder.stat().st_mode))
        swap(folder, partial)
    except BaseException:
        remove_temporary(partial)
        raise


def _entries(folder: Path, skip: set[str]) -> dict[str, tuple[str, int]]:
    """Relative path → (kind, inode) of everything under `folder` but the top-level names in `skip`."""
    found = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if relative.parts[0] in skip:
            continue
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            kind = "link"
        elif stat.S_ISDIR(info.st_mode):
            kind = "dir"
        elif stat.S_ISREG(info.st_mode):
            kind = "file"
        else:
            raise ValueError(
                f"{path} is not a file, folder or link, so it cannot be carried into the updated folder. Nothing was "
                "written."
            )
        found[relative.as_posix()] = (kind, info.st_ino)
    return found


def _link_tree(folder: Path, copy: Path, entries: dict[str, tuple[str, int]]) -> None:
    """Recreate `entries` of `folder` in `copy`: folders with their permissions, links as links, files as hard links
    (the same file, untouched: weights are not copied), or copies where the file system refuses a hard link."""
    folders = []
    for relative, (kind, _) in entries.items():  # (sorted: a folder comes before what it holds)
        source, target = folder / relative, copy / relative
        if kind == "dir":
            target.mkdir()
            folders.append((source, target))
        elif kind == "link":
            os.symlink(os.readlink(source), target)
        else:
            try:
                os.link(source, target)
            except OSError:
                shutil.copy2(source, target)
    for source, target in reversed(folders):  # innermost first, once filled: a read-only folder is filled by then
        os.chmod(target, stat.S_IMODE(source.stat().st_mode))


def _write_new_file(path: Path, like: Path, data: bytes) -> None:
    """Create `path` holding `data`, with the permissions of `like` when it exists."""
    # os.open's mode goes through the umask, as open()'s does (tempfile.mkstemp would make the file 0600).
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as file:
        file.write(data)
    if like.exists():
        os.chmod(path, stat.S_IMODE(like.stat().st_mode))
