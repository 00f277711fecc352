"""Bad command-line input: a one-line `error: ...` on stderr naming the problem, a non-zero exit status, no traceback,
and nothing lost: no checkpoint overwritten or deleted, no gigabyte-sized figure, no network call for a local path."""

import hashlib
from pathlib import Path

import pytest
from test_convert_cli import tiny_tokenizer
from test_parity_hf import build_reference
from transformers import AutoModelForCausalLM

from hf_attention.cli import main
from hf_attention.paths import check_checkpoint, looks_like_local_path


def run(capsys, argv: list[str]) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `hf-attention argv`."""
    try:
        code = main(argv)
    except SystemExit as exit:  # argparse's usage errors
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_error(code, err: str, words: list[str], status: int = 1) -> None:
    assert code == status, err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0] == err.splitlines()[-1], err
    assert errors[0].startswith("hf-attention ")
    for word in words:
        assert word in errors[0], (word, errors[0])


def snapshot(folder: Path) -> dict[str, str]:
    """Relative path → content hash of every file under `folder`."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def reference_checkpoint(tmp_path_factory) -> Path:
    """A saved tiny GPT-2 with a tokenizer: a valid `convert` source."""
    folder = tmp_path_factory.mktemp("gpt2") / "source"
    build_reference("gpt2").save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture
def workdir(tmp_path, monkeypatch, reference_checkpoint) -> Path:
    """A fresh working folder (also the current one) holding a copy of the reference checkpoint as `src`, a file
    `afile`, an empty folder `empty`, a non-checkpoint folder `notes` and another checkpoint `other`."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    for file in reference_checkpoint.iterdir():
        (tmp_path / "src" / file.name).write_bytes(file.read_bytes())
    (tmp_path / "afile").write_text("not a checkpoint")
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text("{}")
    (tmp_path / "other" / "model.safetensors").write_bytes(b"old weights")
    return tmp_path


# ---------------------------------------------------------------------------------------------------------------------
# convert: the destination


@pytest.mark.parametrize(
    ("destination", "extra", "words"),
    [
        ("src", [], ["destination src", "is the source checkpoint"]),
        ("./src/../src", ["--overwrite"], ["is the source checkpoint"]),
        ("link-to-src", ["--overwrite"], ["destination link-to-src", "is the source checkpoint"]),
        ("src/converted", [], ["is inside the source checkpoint"]),
        (".", ["--overwrite"], ["destination .", "holds the source checkpoint"]),
        ("afile", [], ["destination afile", "is a file"]),
        ("afile/sub", [], ["afile is a file"]),
        ("other", [], ["destination other", "non-empty folder", "--overwrite"]),
        ("notes", ["--overwrite"], ["destination notes", "without config.json", "not a checkpoint"]),
        ("", [], ["destination is empty"]),
    ],
)
def test_convert_refuses_a_destination_that_would_lose_data(workdir, capsys, destination, extra, words):
    (workdir / "link-to-src").symlink_to(workdir / "src", target_is_directory=True)
    before = snapshot(workdir)
    code, out, err = run(capsys, ["convert", "src", destination, *extra])
    assert_error(code, err, words)
    assert "Wrote" not in out
    assert snapshot(workdir) == before  # nothing written, nothing overwritten
    assert sorted(p.name for p in workdir.iterdir()) == ["afile", "empty", "link-to-src", "notes", "other", "src"]


@pytest.mark.parametrize("destination", ["other", "empty", "new/deeper"])
def test_convert_writes_into_a_new_or_empty_folder_or_replaces_on_overwrite(workdir, capsys, destination):
    source = snapshot(workdir / "src")
    code, out, err = run(capsys, ["convert", "src", destination, *(["--overwrite"] if destination == "other" else [])])
    assert code == 0, err
    assert f"to {destination}" in out
    model = AutoModelForCausalLM.from_pretrained(workdir / destination)
    assert model.config.model_type == "hf_attention_decoder"
    assert (workdir / destination / "tokenizer.json").is_file()
    assert snapshot(workdir / "src") == source
    leftovers = [p.name for p in (workdir / destination).parent.iterdir() if p.name.startswith(".")]
    assert leftovers == []


@pytest.mark.parametrize("destination", ["other", "new"])
def test_a_failed_conversion_leaves_the_destination_as_it_was(workdir, monkeypatch, destination):
    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("hf_attention.convert.AutoTokenizer.from_pretrained", fail)  # fails mid-write
    before = snapshot(workdir)
    with pytest.raises(RuntimeError, match="disk full"):
        main(["convert", "src", destination, "--overwrite"])
    assert snapshot(workdir) == before
    assert not any(p.name.startswith(".") for p in workdir.iterdir())  # no half-written folder left behind


# ---------------------------------------------------------------------------------------------------------------------
# Local paths that do not exist, or are no checkpoint: refused before any network call


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["convert", "./nope", "out"], ["source: no such folder: ./nope"]),
        (["convert", "runs/x/final", "out"], ["source: no such folder: runs/x/final", "runs/x does not exist"]),
        (["convert", "runs/final", "out"], ["source: no such folder: runs/final"]),  # `runs` exists here
        (["convert", "nope/x/y", "out"], ["no such folder: nope/x/y"]),
        (["convert", "~/surely-no-such-checkpoint", "out"], ["no such folder: ~/surely-no-such-checkpoint"]),
        (["convert", "empty", "out"], ["source: empty has no config.json"]),
        (["convert", "afile", "out"], ["source: afile is a file, not a checkpoint folder"]),
        (["convert", "", "out"], ["source is empty"]),
        (["attention-map", "--model", "./nope", "--text", "a"], ["--model: no such folder: ./nope"]),
        (["attention-map", "--model", "runs/x/final", "--text", "a"], ["--model: no such folder: runs/x/final"]),
        (["attention-map", "--model", "empty", "--text", "a"], ["--model: empty has no config.json"]),
        (["attention-map", "--model", "afile", "--text", "a"], ["--model: afile is a file"]),
        (["attention-map", "--model", "src-without-tokenizer", "--text", "a"], ["--model", "holds no tokenizer"]),
    ],
)
def test_a_local_path_that_is_no_checkpoint_is_named(workdir, capsys, monkeypatch, argv, words):
    (workdir / "runs").mkdir()
    (workdir / "src-without-tokenizer").mkdir()
    for name in ("config.json", "model.safetensors"):
        (workdir / "src-without-tokenizer" / name).write_bytes((workdir / "src" / name).read_bytes())

    def no_network(*args, **kwargs):
        raise AssertionError("the checkpoint was looked up on the Hub")

    monkeypatch.setattr("transformers.AutoConfig.from_pretrained", no_network)  # (also convert.py's AutoConfig)
    code, out, err = run(capsys, argv)
    assert_error(code, err, words)
    assert not (workdir / "out").exists()


@pytest.mark.parametrize(
    ("name", "local"),
    [
        ("gpt2", False), ("openai-community/gpt2", False), ("Helsinki-NLP/opus-mt-en-de", False),
        ("google-t5/t5-small", False), ("./gpt2", True), ("/models/gpt2", True), ("~/gpt2", True), ("a/b/c", True),
        ("runs\\final", True), ("C:models", True), ("my model", True), ("owner/-bad", True), ("owner/a..b", True),
        ("runs/final", True),  # only because a `runs` folder exists here
        ("elsewhere/final", False),
    ],
)
def test_hub_ids_stay_hub_ids(tmp_path, monkeypatch, name, local):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    assert looks_like_local_path(name) is local
    if not local:
        assert check_checkpoint(name, argument="source") == name  # passed on to transformers untouched


# ---------------------------------------------------------------------------------------------------------------------
# demo


def test_demo_output_dir_under_a_file(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    code, _, err = run(capsys, ["demo", "--output-dir", str(tmp_path / "afile" / "demo")])
    assert_error(code, err, ["--output-dir", "afile is a file, not a folder"])
