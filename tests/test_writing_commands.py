"""The rule of the writing commands, "only what we wrote is replaced", on the paths beyond the destination itself:
`refresh-code` (the code a checkpoint ships), training's export (final/, final-<architecture>/ and the run's folder
replaced by --overwrite_output_dir), where the hidden new folder is written (which must be writable), and what a killed
run leaves beside a destination (removed by the next run when it is ours, never when it is the user's)."""

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli_errors import assert_error, run
from test_destinations import state
from test_training import LLAMA_SHAPE, _FakeAccelerator, _FakeScheduler, argv

from hf_attention.commands import destinations
from hf_attention.commands.checkpoint_files import code_files, not_only_a_checkpoint
from hf_attention.modeling.closure import PACKAGE, closure_files
from training import objectives
from training.args import parse_args
from training.finish import export as export_lib
from training.run.checkpoint import Progress, save_checkpoint
from training.run.run_state import RunArguments
from training.train import configure, start_output_dir
from training.train import run as train

FIXTURES = Path(__file__).parent / "fixtures" / "release_0_1_0"
BEFORE_THE_SHIPPED_FOLDER = Path(__file__).parent / "fixtures" / "before_the_shipped_folder"


def can_write_read_only_folders(tmp_path: Path) -> bool:
    """Whether this process writes into a folder of mode 0o500 anyway (root does, by CAP_DAC_OVERRIDE)."""
    probe = tmp_path / "read-only-probe"
    probe.mkdir()
    probe.chmod(0o500)
    try:
        (probe / "file").write_text("")
        return True
    except PermissionError:
        return False
    finally:
        probe.chmod(0o700)
        shutil.rmtree(probe)


# setpriv (util-linux) takes the capabilities that override file permissions out of the child it starts
WITHOUT_OVERRIDE = [
    "setpriv",
    "--bounding-set=-dac_override,-dac_read_search",
    "--inh-caps=-dac_override,-dac_read_search",
]
CHILD = "HF_ATTENTION_TEST_WITHOUT_PERMISSION_OVERRIDE"


@pytest.fixture
def read_only_is_enforced(request, tmp_path) -> bool:
    """True where the test's body can check permissions in this process. As root (which writes into read-only
    folders anyway) the test runs instead in a child pytest started without that capability, this fixture asserts
    that the child passed, and returns False: the body then has nothing left to check here."""
    if not can_write_read_only_folders(tmp_path):
        return True
    if os.environ.get(CHILD):
        pytest.fail("setpriv left this process able to write into read-only folders")
    if shutil.which("setpriv") is None or subprocess.run([*WITHOUT_OVERRIDE, "true"]).returncode != 0:
        pytest.skip("root writes into read-only folders and setpriv cannot drop that here: permissions not tested")
    child = subprocess.run(
        [*WITHOUT_OVERRIDE, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", request.node.nodeid],
        cwd=request.config.rootpath,
        env={**os.environ, CHILD: "1"},
        capture_output=True,
        text=True,
    )
    assert child.returncode == 0 and " passed" in child.stdout, child.stdout[-3000:] + child.stderr[-3000:]
    return False


def old_checkpoint(tmp_path: Path, family: str = "decoder") -> Path:
    """A checkpoint saved by release 0.1.0 (config.json, weights; the code it shipped left out)."""
    folder = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / family, folder)
    return folder


# ---------------------------------------------------------------------------------------------------------------------
# refresh-code replaces only the code the checkpoint ships


@pytest.mark.parametrize("name", ["linear_products.py", "closure.py", "compiled_regions.py"])
def test_refresh_code_refuses_a_users_file_named_as_a_newer_module(tmp_path, capsys, name):
    """0.1.0 had no module of that name: the file beside its checkpoint is the user's, as `convert --overwrite`
    says too; refresh-code used to replace it with the package's module."""
    folder = old_checkpoint(tmp_path)
    (folder / name).write_text("# my own code\n")
    before = state(tmp_path)
    code, _, err = run(capsys, ["refresh-code", str(folder)])
    assert_error(code, err, [f"checkpoint '{folder}' holds {name}", "does not include", "Nothing was written"])
    assert state(tmp_path) == before
    assert name in not_only_a_checkpoint(folder)  # (the rule convert --overwrite follows, for the same file)


def test_refresh_code_replaces_the_code_the_checkpoint_ships(tmp_path, capsys):
    """A module the checkpoint ships (its modeling file imports it) is replaced; the weights are the same file."""
    folder = old_checkpoint(tmp_path)
    (folder / "modeling_hf_attention.py").write_text("from .layers import Layer\n")
    (folder / "layers.py").write_text("class Layer: ...\n")
    (folder / "notes.txt").write_text("mine")
    weights = (folder / "model.safetensors").stat().st_ino
    code, _, err = run(capsys, ["refresh-code", str(folder)])
    assert code == 0, err
    assert (folder / "layers.py").read_bytes() == (PACKAGE / "layers.py").read_bytes()
    assert (folder / "notes.txt").read_text() == "mine"
    assert (folder / "model.safetensors").stat().st_ino == weights
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]  # nothing hidden left beside it


def _before_the_shipped_folder(tmp_path: Path) -> Path:
    """A checkpoint saved before the shipped code had a folder of its own: its code includes signatures.py, which its
    pretrained.py imports and today's code no longer has (the function moved into pretrained.py)."""
    with tarfile.open(BEFORE_THE_SHIPPED_FOLDER / "decoder.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    folder = tmp_path / "decoder"
    assert "signatures.py" in code_files(folder, json.loads((folder / "config.json").read_text()), "config.json")
    assert "signatures.py" not in closure_files()
    return folder


def test_refresh_code_removes_the_modules_it_shipped_that_the_installed_code_no_longer_has(tmp_path, capsys):
    """signatures.py (shipped, imported by the checkpoint's own code, gone from today's) and what an earlier
    refresh-code left half written are removed; a user's files stay, one named as an earlier module among them."""
    folder = _before_the_shipped_folder(tmp_path)
    (folder / ".layers.py.0123abcd.partial").write_text("# the first half of a file\n")
    (folder / "heads.py").write_text("# mine: the checkpoint's code does not import it\n")  # a name 0.x shipped
    (folder / ".notes.txt.0123abcd.partial").write_text("mine")  # the form, but not a file refresh-code writes
    (folder / "notes.py").write_text("mine")
    code, out, err = run(capsys, ["refresh-code", str(folder)])
    assert code == 0, err
    assert "removed .layers.py.0123abcd.partial, signatures.py" in out
    assert sorted(p.name for p in folder.glob("*.py")) == sorted([*closure_files(), "heads.py", "notes.py"])
    for name in ("heads.py", ".notes.txt.0123abcd.partial", "notes.py"):
        assert (folder / name).read_text().startswith(("mine", "# mine")), name
    assert not (folder / ".layers.py.0123abcd.partial").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decoder"]  # nothing hidden left beside it
    assert not_only_a_checkpoint(folder) == "it also holds .notes.txt.0123abcd.partial, heads.py, notes.py"


def test_refresh_code_keeps_an_earlier_module_that_config_json_still_names(tmp_path, capsys):
    """An auto_map entry that today's does not replace still loads from signatures.py: it is still used, so kept."""
    folder = _before_the_shipped_folder(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"]["AutoModelForTokenClassification"] = "signatures.Tagger"
    (folder / "config.json").write_text(json.dumps(config))
    signatures = (folder / "signatures.py").read_bytes()
    code, _, err = run(capsys, ["refresh-code", str(folder)])
    assert code == 0, err
    assert (folder / "signatures.py").read_bytes() == signatures
    assert json.loads((folder / "config.json").read_text())["auto_map"]["AutoModelForTokenClassification"] == (
        "signatures.Tagger"
    )


def test_refresh_code_keeps_a_users_module_that_the_shipped_code_was_edited_to_import(tmp_path, capsys):
    """Imported by the checkpoint's code, but not a name hf-attention ever shipped: the user's, so it stays."""
    folder = _before_the_shipped_folder(tmp_path)
    with (folder / "modeling_hf_attention.py").open("a") as modeling:
        modeling.write("from .my_head import MyHead  # noqa\n")
    (folder / "my_head.py").write_text("class MyHead: ...\n")
    code, _, err = run(capsys, ["refresh-code", str(folder)])
    assert code == 0, err
    assert (folder / "my_head.py").read_text() == "class MyHead: ...\n"
    assert not (folder / "signatures.py").exists()


def test_refresh_code_refuses_the_current_folder(tmp_path, capsys, monkeypatch):
    """The refreshed folder is swapped in for the old one: from inside it, the shell would be left in a deleted
    folder."""
    folder = old_checkpoint(tmp_path)
    monkeypatch.chdir(folder)
    before = state(tmp_path)
    code, _, err = run(capsys, ["refresh-code", "."])
    assert_error(code, err, ["checkpoint . is the current folder"])
    assert state(tmp_path) == before


# ---------------------------------------------------------------------------------------------------------------------
# Where the hidden new folder is written must be writable


def test_an_empty_destination_in_a_read_only_folder_is_refused_before_any_work(
    tmp_path, capsys, monkeypatch, read_only_is_enforced
):
    if not read_only_is_enforced:
        return  # checked by the child run without the permission override

    def no_work(*args, **kwargs):
        raise AssertionError("the model was loaded before the destination was checked")

    monkeypatch.setattr("hf_attention.conversion.from_hf.load_reference", no_work)
    parent = tmp_path / "shared"
    (parent / "out").mkdir(parents=True)
    parent.chmod(0o500)
    try:
        code, _, err = run(capsys, ["convert", str(FIXTURES / "decoder"), str(parent / "out")])
    finally:
        parent.chmod(0o700)
    assert_error(code, err, [f"destination {parent / 'out'}: {parent} is not writable", "then renamed"])


def test_a_read_only_empty_destination_in_a_writable_folder_is_written(tmp_path, capsys, read_only_is_enforced):
    """The new checkpoint is written beside it and renamed over it: only the folder holding it is written."""
    if not read_only_is_enforced:
        return  # checked by the child run without the permission override
    from test_parity_hf import build_reference

    build_reference("gpt2").save_pretrained(tmp_path / "src")
    (tmp_path / "out").mkdir(mode=0o500)
    code, _, err = run(capsys, ["convert", str(tmp_path / "src"), str(tmp_path / "out")])
    assert code == 0, err
    assert (tmp_path / "out" / "model.safetensors").is_file()
    assert oct((tmp_path / "out").stat().st_mode & 0o777) == oct(0o500)  # it keeps its permissions
    (tmp_path / "out").chmod(0o700)


@pytest.mark.parametrize("read_only", ["checkpoint", "parent"])
def test_refresh_code_on_a_read_only_checkpoint_names_the_folder(tmp_path, capsys, read_only, read_only_is_enforced):
    if not read_only_is_enforced:
        return  # checked by the child run without the permission override
    folder = old_checkpoint(tmp_path / "parent")
    locked = folder if read_only == "checkpoint" else folder.parent
    locked.chmod(0o500)
    try:
        before = state(tmp_path)
        code, _, err = run(capsys, ["refresh-code", str(folder)])
        after = state(tmp_path)
    finally:
        locked.chmod(0o700)
    assert_error(code, err, [f"checkpoint {folder}: {locked} is not writable", "Nothing was written"])
    assert ".partial" not in err
    assert after == before


# ---------------------------------------------------------------------------------------------------------------------
# What a killed run leaves: the next run removes it when it is ours, never a user's


def _leftover(destination: Path, tag: str, pid: int, marked: bool = True) -> Path:
    """A hidden folder beside `destination` as a killed run (of process `pid`) leaves it, with its marker."""
    folder = destination.with_name(f".{destination.name}.{tag}.partial")
    folder.mkdir()
    (folder / "model.safetensors").write_text("half")
    if marked:
        folder.with_name(folder.name + destinations.MARKER).write_text(f"hf-attention {socket.gethostname()} {pid}\n")
    return folder


def _dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_the_next_write_removes_what_a_killed_run_of_ours_left_and_nothing_else(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _leftover(tmp_path / "out", "0000dead", _dead_pid())
    running = _leftover(tmp_path / "out", "1111aaaa", os.getppid())  # another command, still writing there
    users = _leftover(tmp_path / "out", "2222bbbb", _dead_pid(), marked=False)  # named as ours, not ours
    other = _leftover(tmp_path / "other", "3333cccc", _dead_pid())  # beside another destination
    kept = sorted(p.name for p in tmp_path.iterdir() if "0000dead" not in p.name)
    code, _, err = run(capsys, ["demo", "--output-dir", "out"])
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*kept, "out"])
    for folder in (running, users, other):
        assert (folder / "model.safetensors").read_text() == "half"


def _kill_after(monkeypatch, number: int) -> None:
    """Make the process "die" at its `number`-th rename, exchange, link or removal: that operation and every later
    one raise, so no handler can tidy up (as after SIGKILL)."""
    calls = {"n": 0}

    def dying(real):
        def operation(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] >= number:
                raise KeyboardInterrupt("killed")
            return real(*args, **kwargs)

        return operation

    for module, name in [(os, "rename"), (os, "link"), (os, "unlink"), (os, "rmdir"), (shutil, "rmtree")]:
        monkeypatch.setattr(module, name, dying(getattr(module, name)))
    monkeypatch.setattr(destinations, "_exchange", dying(destinations._exchange))


def _code(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.glob("*.py")}


def test_refresh_code_killed_at_any_instant_leaves_the_old_or_the_new_code_and_the_next_run_tidies(tmp_path, capsys):
    source = tmp_path / "source"
    shutil.copytree(FIXTURES / "decoder", source)
    (source / "modeling_hf_attention.py").write_text("# the code of an older release\n")
    (source / "expected_generation.json").unlink()  # (the fixture's own file: not a checkpoint's)
    old = _code(source)
    new = {name: (PACKAGE / name).read_bytes() for name in closure_files()}
    number = 0
    while True:
        number += 1
        root = tmp_path / f"kill_{number}"
        folder = root / "checkpoint"
        shutil.copytree(source, folder)
        with pytest.MonkeyPatch.context() as patch:
            _kill_after(patch, number)
            try:
                code, _, err = run(capsys, ["refresh-code", str(folder)])
            except KeyboardInterrupt:
                code = None
        destinations._ACTIVE.clear()  # (the killed process's memory is gone with it)
        if code == 0:
            break  # the run needs fewer operations than `number`: every instant was tried
        assert _code(folder) in (old, new), number
        code, _, err = run(capsys, ["refresh-code", str(folder)])
        assert code == 0, err
        assert _code(folder) == new
        assert sorted(p.name for p in root.iterdir()) == ["checkpoint"], number
        assert not [p.name for p in folder.iterdir() if p.name.startswith(".")], number
        assert not_only_a_checkpoint(folder) is None  # convert --overwrite would replace it
    assert number > 3


KILLED_WHILE_WRITING = """
import os, signal, sys
from hf_attention.conversion import from_hf as convert
from hf_attention.commands import destinations
real_write = destinations.Destination.write


def write_then_die(self, fill):
    real_write(self, lambda folder: (fill(folder), os.kill(os.getpid(), signal.SIGKILL)))


destinations.Destination.write = write_then_die
convert.convert_checkpoint(sys.argv[1], sys.argv[2])
"""


def test_a_convert_killed_by_sigkill_leaves_what_the_next_convert_removes(tmp_path):
    from test_parity_hf import build_reference

    build_reference("gpt2").save_pretrained(tmp_path / "src")
    src, out = str(tmp_path / "src"), str(tmp_path / "out")
    killed = subprocess.run([sys.executable, "-c", KILLED_WHILE_WRITING, src, out], timeout=300)
    assert killed.returncode == -signal.SIGKILL
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out."))
    assert len(left) == 2 and left[1] == left[0] + destinations.MARKER, left  # the folder and its marker
    subprocess.run([sys.executable, "-m", "hf_attention.commands.cli", "convert", src, out], check=True, timeout=300)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]


# ---------------------------------------------------------------------------------------------------------------------
# Training's export follows the rule


def _fake_export(version: str):
    def write(model, tokenizer, directory, **kwargs):
        (directory / "model.safetensors").write_text("weights")
        (directory / "config.json").write_text(json.dumps({"model_type": "hf_attention_decoder", "v": version}))
        (directory / export_lib.LOSS_PLOT).write_text("plot")

    return write


def _export(monkeypatch, final: Path, version: str) -> Path:
    monkeypatch.setattr(export_lib, "_write_export", _fake_export(version))
    return export_lib.export_model(None, None, final, objective=objectives.OBJECTIVES["causal_lm"], card={})


def test_the_export_refuses_a_users_file_in_final_and_never_touches_the_old_swap_folders(tmp_path, monkeypatch):
    final = tmp_path / "final"
    _export(monkeypatch, final, "1")
    for name in ("final.partial", "final.previous"):  # the names an older release swapped through: the user's here
        (tmp_path / name).mkdir()
        (tmp_path / name / "data.txt").write_text("mine")
    _export(monkeypatch, final, "2")  # an export of ours, with its figures, is replaced
    assert json.loads((final / "config.json").read_text())["v"] == "2"
    (final / "my_eval.txt").write_text("mine")
    before = state(tmp_path)
    with pytest.raises(
        ValueError,
        match=r"export folder .*final is not only a training run's export: it also holds "
        r"my_eval.txt",
    ):
        _export(monkeypatch, final, "3")
    assert state(tmp_path) == before


def _configure(output_dir: Path, *flags: str):
    return configure(RunArguments(*parse_args(argv("causal_lm", output_dir, *flags, model=LLAMA_SHAPE))))


def _previous_run(output_dir: Path, *exports: str) -> None:
    """A finished run's folder, made by hand: a checkpoint to resume from and its exports."""
    save_checkpoint(_FakeAccelerator(), output_dir, Progress(step=4), scheduler=_FakeScheduler())
    for name in exports:
        shutil.copytree(FIXTURES / "decoder", output_dir / name, ignore=shutil.ignore_patterns("expected_*"))


@pytest.mark.parametrize(
    ("flags", "folder"),
    [
        (["--resume_from_checkpoint", "latest"], "final"),
        (["--resume_from_checkpoint", "latest", "--export_to", "llama"], "final-llama"),
        (["--resume_from_checkpoint", "latest", "--export_to", "auto"], "final-llama"),
        (["--overwrite_output_dir"], "final"),
        (["--overwrite_output_dir", "--export_to", "llama"], "final-llama"),
        (["--overwrite_output_dir"], "final-llama"),  # a stale export of the replaced run: removed, so checked
        (["--overwrite_output_dir"], "final.partial"),
    ],
)
def test_a_users_file_in_an_export_folder_is_refused_before_training(tmp_path, flags, folder):
    out = tmp_path / "run"
    _previous_run(out, "final", "final-llama")
    (out / folder).mkdir(exist_ok=True)
    (out / folder / "my_eval.txt").write_text("mine")
    before = state(tmp_path)
    found = "it has no config.json" if folder == "final.partial" else "it also holds my_eval.txt"
    with pytest.raises(ValueError, match=rf"{out / folder} is not only .*: {found}.*never deleted. Move them out"):
        _configure(out, *flags)
    assert state(tmp_path) == before


def test_overwrite_output_dir_removes_the_replaced_runs_exports_that_are_ours_only(tmp_path):
    out = tmp_path / "run"
    _previous_run(out, "final", "final-bart", "final.previous")
    (out / "final-notes").mkdir()  # not a name of ours
    (out / "final-notes" / "todo.txt").write_text("mine")
    start_output_dir(_configure(out, "--overwrite_output_dir"))
    assert sorted(p.name for p in out.iterdir()) == ["final-notes", "run_config.json"]


def test_resuming_a_finished_run_keeps_the_users_files_and_refuses_one_in_final(tmp_path):
    out = tmp_path / "run"
    common = ("--max_train_samples", "64", "--save_steps", "4", "--eval_steps", "0")
    train(*parse_args(argv("causal_lm", out, *common, "--max_steps", "4")))
    (out / "final.partial").mkdir()
    (out / "final.partial" / "data.txt").write_text("mine")
    train(*parse_args(argv("causal_lm", out, *common, "--max_steps", "6", "--resume_from_checkpoint", "latest")))
    assert (out / "final.partial" / "data.txt").read_text() == "mine"
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]
    (out / "final" / "my_eval.txt").write_text("mine")
    before = state(out)
    with pytest.raises(ValueError, match=r"final is not only a training run's export: it also holds my_eval.txt"):
        train(*parse_args(argv("causal_lm", out, *common, "--max_steps", "8", "--resume_from_checkpoint", "latest")))
    assert state(out) == before


# ---------------------------------------------------------------------------------------------------------------------
# The property: whatever the writing path, a user's file is never deleted or replaced

USER_FILES = ["closure.py", "linear_products.py", "notes.txt", "sub/data.txt", ".hidden"]
WRITING_PATHS = ["convert", "export", "demo", "refresh-code", "training export", "overwrite_output_dir"]


def _write_by(path: str, destination: Path, sources: dict[str, Path], overwrite: bool, monkeypatch) -> None:
    """Run writing path `path` against `destination`; a refusal (ValueError) is one of the allowed outcomes."""
    if path == "training export":
        _export(monkeypatch, destination, "new")
    elif path == "overwrite_output_dir":
        start_output_dir(_configure(destination.parent, "--overwrite_output_dir"))
    elif path == "refresh-code":
        from hf_attention.commands.refresh_code import refresh_shipped_code

        refresh_shipped_code(destination)
    else:
        from hf_attention.commands.cli import build_parser

        line = {"convert": [path, str(sources["convert"])], "export": [path, str(sources["export"])]}.get(path, [path])
        line += ["--output-dir", str(destination)] if path == "demo" else [str(destination)]
        args = build_parser().parse_args(line + (["--overwrite"] if overwrite else []))
        args.run(args)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    path=st.sampled_from(WRITING_PATHS),
    user_file=st.sampled_from(USER_FILES),
    beside=st.booleans(),
    overwrite=st.booleans(),
)
def test_no_writing_path_deletes_or_replaces_a_users_file(
    tmp_path_factory, sources, path, user_file, beside, overwrite
):
    """A checkpoint at the destination (final/ for training), with a file of the user's in it, or in a
    hidden folder beside it named as our temporaries are: the command refuses or succeeds, and the file is as it
    was."""
    root = tmp_path_factory.mktemp("property")
    destination = root / "run" / "final"
    # a checkpoint that ships no code (release 0.1.0's, as saved), so that closure.py there is the user's: in one
    # that ships a closure.py, that file is the checkpoint's code
    shutil.copytree(FIXTURES / "decoder", destination, ignore=shutil.ignore_patterns("expected_*"))
    holder = destination.with_name(".final.0123abcd.partial") if beside else destination
    mine = holder / user_file
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("the user's")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        with contextlib.suppress(ValueError):  # a refusal is an allowed outcome
            _write_by(path, destination, sources, overwrite, patch)
    assert mine.read_text() == "the user's", (path, user_file, beside)
