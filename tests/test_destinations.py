"""Where the writing commands (convert, export, demo) write: never over the current folder or a folder of someone's
files (nor one whose config.json cannot be read), never under a name that is not UTF-8; a replaced folder keeps its
permissions, and one that was filled while the command worked is left alone."""

import json
import os
import shutil
import stat
from pathlib import Path

import pytest
from test_cli_errors import assert_error, run

from hf_attention.commands.demo import FAMILIES
from hf_attention.conversion.from_hf import convert_checkpoint


def state(folder: Path) -> dict[str, tuple]:
    """Relative path → (kind, bytes or link target, permission bits) of everything under `folder`, `folder` too."""
    found = {}
    for path in [folder, *sorted(folder.rglob("*"))]:
        info = path.lstat()
        if path.is_symlink():
            content = ("link", os.readlink(path))
        elif path.is_dir():
            content = ("dir", None)
        else:
            content = ("file", path.read_bytes())
        found[str(path.relative_to(folder))] = (*content, stat.S_IMODE(info.st_mode))
    return found


@pytest.fixture
def workdir(tmp_path, monkeypatch, sources) -> Path:
    """A fresh folder holding `src` (the convert source), `ours` (the export source) and an empty folder `empty`, which
    is the current folder."""
    shutil.copytree(sources["convert"], tmp_path / "src")
    shutil.copytree(sources["export"], tmp_path / "ours")
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    return tmp_path


SOURCE = {"convert": "../src", "export": "../ours"}


def command_line(command: str, destination: str, *extra: str) -> list[str]:
    if command == "demo":
        return ["demo", "--output-dir", destination, *extra]
    return [command, SOURCE[command], destination, *extra]


# ---------------------------------------------------------------------------------------------------------------------
# The current folder


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]], ids=["plain", "overwrite"])
@pytest.mark.parametrize("command", ["convert", "export", "demo"])
def test_the_current_folder_is_never_a_destination_even_an_empty_one(workdir, capsys, command, overwrite):
    before = state(workdir)
    code, out, err = run(capsys, command_line(command, ".", *overwrite))
    argument = "--output-dir" if command == "demo" else "destination"
    assert_error(code, err, [f"{argument} .", "is the current folder"])
    assert state(workdir) == before
    assert Path.cwd() == workdir / "empty"


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]], ids=["plain", "overwrite"])
@pytest.mark.parametrize("command", ["convert", "export", "demo"])
def test_a_folder_that_holds_the_current_folder_is_never_a_destination(
    workdir, capsys, monkeypatch, command, overwrite
):
    (workdir / "empty" / "deeper").mkdir()
    monkeypatch.chdir(workdir / "empty" / "deeper")
    before = state(workdir)
    if command == "demo":
        argv = ["demo", "--output-dir", "..", *overwrite]
    else:  # the sources are one folder further up from here
        argv = [command, f"../{SOURCE[command]}", "..", *overwrite]
    code, _, err = run(capsys, argv)
    argument = "--output-dir" if command == "demo" else "destination"
    assert_error(code, err, [f"{argument} ..", f"holds the current folder {workdir / 'empty' / 'deeper'}"])
    assert state(workdir) == before


def test_the_export_card_names_the_folder_written(workdir, capsys):
    code, out, err = run(capsys, ["export", "../ours", "new/sub/.."])
    assert code == 0, err
    card = (workdir / "empty" / "new" / "README.md").read_text(encoding="utf-8")
    assert 'from_pretrained("new")' in card and "# new (" in card
    assert 'from_pretrained("")' not in card and 'from_pretrained("..")' not in card


# ---------------------------------------------------------------------------------------------------------------------
# Names that are not UTF-8


@pytest.mark.parametrize("command", ["convert", "export", "demo"])
def test_a_destination_name_that_is_not_utf8_is_refused_before_any_work(workdir, capsys, monkeypatch, command):
    def no_work(*args, **kwargs):
        raise AssertionError("the model was loaded before the destination was checked")

    monkeypatch.setattr("hf_attention.conversion.from_hf.load_reference", no_work)
    monkeypatch.setattr("hf_attention.conversion.to_hf.load_hf_attention", no_work)
    monkeypatch.setattr("hf_attention.commands.demo.AutoModelForCausalLM.from_config", no_work)
    before = state(workdir)
    code, out, err = run(capsys, command_line(command, "bad\udcff"))
    argument = "--output-dir" if command == "demo" else "destination"
    assert_error(code, err, [f"{argument} is not valid UTF-8", "bad\\xff", "byte 0xff at byte 3"])
    assert state(workdir) == before


# ---------------------------------------------------------------------------------------------------------------------
# What a write may replace


def test_overwrite_keeps_the_permissions_of_the_folder_and_of_the_files_it_replaces(workdir, capsys):
    old = workdir / "empty" / "old"
    convert_checkpoint(str(workdir / "src"), old)
    old.chmod(0o750)
    (old / "config.json").chmod(0o640)
    (old / "model.safetensors").chmod(0o600)
    (old / "generation_config.json").unlink()  # a file the new checkpoint brings back: the usual permissions
    umask = os.umask(0o022)
    try:
        code, _, err = run(capsys, ["convert", "../src", "old", "--overwrite"])
    finally:
        os.umask(umask)
    assert code == 0, err
    assert stat.S_IMODE(old.stat().st_mode) == 0o750
    assert stat.S_IMODE((old / "config.json").stat().st_mode) == 0o640
    assert stat.S_IMODE((old / "model.safetensors").stat().st_mode) == 0o600
    assert stat.S_IMODE((old / "generation_config.json").stat().st_mode) == 0o644


@pytest.mark.parametrize("command", ["convert", "export"])
def test_a_new_checkpoint_is_readable_as_the_umask_allows(workdir, capsys, command):
    """safetensors writes its files 0600: a checkpoint meant for a group must not lock the group out."""
    umask = os.umask(0o027)
    try:
        code, _, err = run(capsys, command_line(command, "new"))
    finally:
        os.umask(umask)
    assert code == 0, err
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (workdir / "empty" / "new").iterdir()}
    assert modes["model.safetensors"] == 0o640 and set(modes.values()) == {0o640}, modes
    assert stat.S_IMODE((workdir / "empty" / "new").stat().st_mode) == 0o750


def test_a_destination_filled_while_the_command_works_is_left_alone(workdir, capsys, monkeypatch):
    """The destination was empty when checked; someone saves a file there while the model converts: the finished
    checkpoint must not be swapped in over it."""
    (workdir / "empty" / "out").mkdir()
    from hf_attention.conversion import from_hf as convert

    load = convert.load_reference

    def load_while_someone_writes(source):
        (workdir / "empty" / "out" / "thesis.txt").write_text("work")
        return load(source)

    monkeypatch.setattr(convert, "load_reference", load_while_someone_writes)
    code, _, err = run(capsys, ["convert", "../src", "out"])
    assert_error(code, err, ["destination out", "non-empty folder"])
    assert sorted(p.name for p in (workdir / "empty").iterdir()) == ["out"]  # no partial folder left
    assert [p.name for p in (workdir / "empty" / "out").iterdir()] == ["thesis.txt"]


# An earlier release's refresh-code wrote each file of a checkpoint as `.NAME.<8 hex>.partial` beside it, then renamed
# it over; a run killed between the two left that hidden file, without a marker (those releases wrote none).
EARLIER_PARTIALS = [
    ".modeling_hf_attention.py.0123abcd.partial",
    ".config.json.89abcdef.partial",
    ".signatures.py.deadbeef.partial",  # a module an earlier release shipped, which today's code no longer has
]


def test_overwrite_replaces_a_checkpoint_holding_what_an_earlier_refresh_code_left_half_written(workdir, capsys):
    old = workdir / "empty" / "old"
    convert_checkpoint(str(workdir / "src"), old)
    for name in EARLIER_PARTIALS:
        (old / name).write_text("# the first half of a file\n")
    code, _, err = run(capsys, ["convert", "../src", "old", "--overwrite"])
    assert code == 0, err
    assert not [p.name for p in old.iterdir() if p.name.startswith(".")]  # gone with the folder they were in
    assert (old / "config.json").is_file() and (old / "model.safetensors").is_file()
    assert sorted(p.name for p in (workdir / "empty").iterdir()) == ["old"]  # and nothing hidden beside it


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        (".notes.txt.0123abcd.partial", "file"),  # not a file refresh-code writes
        (".my_model.py.0123abcd.partial", "file"),  # not a module hf-attention ships
        (".layers.py.0123ABCD.partial", "file"),  # not the form: the hex is lower case
        (".layers.py.0123abc.partial", "file"),  # not the form: 8 hex digits
        (".layers.py.0123abcd.partial", "folder"),  # the form, but refresh-code wrote files
        (".layers.py.0123abcd.partial", "link"),  # the form, but a link: what it points to is anyone's
    ],
)
def test_overwrite_still_refuses_a_hidden_file_of_that_kind_that_is_not_ours(workdir, capsys, name, kind):
    old = workdir / "empty" / "old"
    convert_checkpoint(str(workdir / "src"), old)
    path = old / name
    if kind == "file":
        path.write_text("mine")
    elif kind == "folder":
        path.mkdir()
        (path / "data.txt").write_text("mine")
    else:
        path.symlink_to(workdir / "src" / "config.json")
    before = state(workdir)
    code, _, err = run(capsys, ["convert", "../src", "old", "--overwrite"])
    assert_error(code, err, ["destination old", "not only a model checkpoint", f"it also holds {name}"])
    assert state(workdir) == before


def test_overwrite_names_a_malformed_auto_map_of_the_destination(workdir, capsys):
    taken = workdir / "empty" / "taken"
    taken.mkdir()
    (taken / "config.json").write_text(json.dumps({"model_type": "gpt2", "auto_map": ["modeling.X"]}))
    (taken / "model.safetensors").write_bytes(b"weights")
    before = state(workdir)
    code, _, err = run(capsys, ["convert", "../src", "taken", "--overwrite"])
    assert_error(code, err, ["destination taken", "not only a model checkpoint", "auto_map", "list"])
    assert state(workdir) == before


# ---------------------------------------------------------------------------------------------------------------------
# demo --output-dir


def test_demo_refuses_a_folder_of_the_users_files(workdir, capsys):
    mine = workdir / "empty" / "mine" / "decoder"
    mine.mkdir(parents=True)
    (mine / "attention.py").write_text("# my attention, half written\n")
    (mine / "config.json").write_text('{"editor": "vim"}')
    before = state(workdir)
    code, out, err = run(capsys, ["demo", "--output-dir", "mine"])
    assert_error(code, err, ["--output-dir mine", "non-empty folder", "--overwrite"])
    code, out, err = run(capsys, ["demo", "--output-dir", "mine", "--overwrite"])
    assert_error(code, err, ["--output-dir mine", "decoder/", "has no model_type"])
    assert state(workdir) == before


def test_demo_overwrite_refuses_anything_beside_the_checkpoints(workdir, capsys):
    demo = workdir / "empty" / "demo"
    for family in FAMILIES:
        shutil.copytree(workdir / "ours", demo / family)
    (demo / "notes.txt").write_text("keep")
    before = state(workdir)
    code, _, err = run(capsys, ["demo", "--output-dir", "demo", "--overwrite"])
    assert_error(code, err, ["--output-dir demo", "it also holds notes.txt"])
    assert state(workdir) == before


def test_demo_overwrite_replaces_an_earlier_demo_output(workdir, capsys):
    demo = workdir / "empty" / "demo"
    for family in FAMILIES[:2]:  # an earlier output, or part of one
        shutil.copytree(workdir / "ours", demo / family)
    demo.chmod(0o750)
    code, out, err = run(capsys, ["demo", "--output-dir", "demo", "--overwrite"])
    assert code == 0, err
    assert sorted(p.name for p in demo.iterdir()) == sorted(FAMILIES)
    for family in FAMILIES:
        config = json.loads((demo / family / "config.json").read_text())
        assert config["model_type"] == f"hf_attention_{family}"
    assert stat.S_IMODE(demo.stat().st_mode) == 0o750
    assert sorted(p.name for p in (workdir / "empty").iterdir()) == ["demo"]  # nothing left beside it
