"""Bad command-line input: a one-line `error: ...` on stderr naming the problem, a non-zero exit status, no traceback,
and nothing lost: no checkpoint overwritten or deleted, no gigabyte-sized figure, no network call for a local path."""

import hashlib
from pathlib import Path

import pytest
from test_convert_cli import tiny_tokenizer
from test_parity_hf import build_reference
from test_visualize import TEXT, model_and_tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

import hf_attention.inspection.attention_maps as attention_maps
import hf_attention.inspection.heatmaps as visualize
from hf_attention import HFAttentionForCausalLM, HFAttentionForSeq2SeqLM
from hf_attention.commands.cli import main
from hf_attention.commands.paths import check_checkpoint, looks_like_local_path
from hf_attention.inspection.heatmaps import MAX_TOKENS, MAX_TOKENS_LIMIT, HeatmapTooLarge, plot_attention


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
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


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
    `afile`, an empty folder `empty`, a non-checkpoint folder `notes`, another checkpoint `other`, a project folder
    `proj` whose config.json is not a model's, and a checkpoint `mixed` that also holds a user's file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "src").mkdir()
    for file in reference_checkpoint.iterdir():
        (tmp_path / "src" / file.name).write_bytes(file.read_bytes())
    (tmp_path / "afile").write_text("not a checkpoint")
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "config.json").write_text('{"model_type": "gpt2"}')
    (tmp_path / "other" / "model.safetensors").write_bytes(b"old weights")
    (tmp_path / "proj" / "data").mkdir(parents=True)
    (tmp_path / "proj" / "config.json").write_text('{"editor": "vim"}')
    (tmp_path / "proj" / "data" / "thesis.txt").write_text("work")
    (tmp_path / "mixed").mkdir()
    for name in ("config.json", "model.safetensors"):
        (tmp_path / "mixed" / name).write_bytes((tmp_path / "other" / name).read_bytes())
    (tmp_path / "mixed" / "thesis.txt").write_text("work")
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
        ("notes", ["--overwrite"], ["destination notes", "not only a model checkpoint", "has no config.json"]),
        ("proj", ["--overwrite"], ["destination proj", "config.json has no model_type"]),
        ("mixed", ["--overwrite"], ["destination mixed", "it also holds thesis.txt"]),
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
    assert sorted(p.name for p in workdir.iterdir()) == [
        "afile",
        "empty",
        "link-to-src",
        "mixed",
        "notes",
        "other",
        "proj",
        "src",
    ]


def test_convert_refuses_to_replace_the_current_folder_even_a_checkpoint(workdir, capsys, monkeypatch):
    monkeypatch.chdir(workdir / "other")
    before = snapshot(workdir)
    code, _, err = run(capsys, ["convert", "../src", ".", "--overwrite"])
    assert_error(code, err, ["destination .", "is the current folder"])
    assert snapshot(workdir) == before


def test_convert_names_a_damaged_weights_file_in_one_line(workdir, capsys):
    weights = workdir / "src" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    code, _, err = run(capsys, ["convert", "src", "new"])
    assert_error(code, err, ["source weights src/model.safetensors cannot be read", "damaged"])
    assert not (workdir / "new").exists()


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

    monkeypatch.setattr("hf_attention.conversion.from_hf.AutoTokenizer.from_pretrained", fail)  # fails mid-write
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
        ("gpt2", False),
        ("openai-community/gpt2", False),
        ("Helsinki-NLP/opus-mt-en-de", False),
        ("google-t5/t5-small", False),
        ("./gpt2", True),
        ("/models/gpt2", True),
        ("~/gpt2", True),
        ("a/b/c", True),
        ("runs\\final", True),
        ("C:models", True),
        ("my model", True),
        ("owner/-bad", True),
        ("owner/a..b", True),
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
# attention-map: size limits, output path, flags


@pytest.fixture
def decoder_folder(saved_checkpoint) -> Path:
    return saved_checkpoint(HFAttentionForCausalLM, "decoder")


@pytest.fixture
def seq2seq_folder(saved_checkpoint) -> Path:
    return saved_checkpoint(HFAttentionForSeq2SeqLM, "seq2seq")


def text_of_tokens(tokenizer, tokens: int) -> str:
    """A text of `tokens` to `tokens` + 3 tokens."""
    text = "word"
    while len(tokenizer(text)["input_ids"]) < tokens:
        text += " word"
    assert len(tokenizer(text)["input_ids"]) <= tokens + 3
    return text


@pytest.fixture
def no_forward(monkeypatch):
    """Fails the test if the attention forward pass or a figure is started."""

    def fail(*args, **kwargs):
        raise AssertionError("the forward pass ran or a figure was allocated before the size check")

    monkeypatch.setattr(attention_maps, "forward_with_attentions", fail)
    monkeypatch.setattr(visualize, "_draw", fail)


@pytest.mark.parametrize(
    ("tokens", "extra", "words"),
    [
        (1201, [], ["--text is", "tokens, more than the cap of 128", "--max-tokens", "--truncate"]),
        (MAX_TOKENS + 1, [], ["--text is", f"tokens, more than the cap of {MAX_TOKENS}", "at most 200"]),
        (150, ["--max-tokens", "140"], ["tokens, more than the cap of 140"]),
        # one panel per head (4 heads) of 190 tokens: a 27000 × 6800-pixel figure
        (190, ["--max-tokens", "200"], ["4 panels (one per head)", "tokens make a", "million pixels", "--head mean"]),
    ],
)
def test_attention_map_refuses_a_text_too_long_before_the_forward_pass(
    decoder_folder, tmp_path, capsys, no_forward, tokens, extra, words
):
    text = text_of_tokens(AutoTokenizer.from_pretrained(decoder_folder), tokens)
    out = tmp_path / "map.png"
    code, _, err = run(
        capsys, ["attention-map", "--model", str(decoder_folder), "--text", text, "--out", str(out), *extra]
    )
    assert_error(code, err, words)
    assert not out.exists()


def test_attention_map_truncates_on_request(decoder_folder, tmp_path, capsys):
    out = tmp_path / "map.png"
    code, printed, err = run(
        capsys,
        [
            "attention-map",
            "--model",
            str(decoder_folder),
            "--text",
            "word " * 1201,
            "--out",
            str(out),
            "--head",
            "mean",
            "--truncate",
            "--max-tokens",
            "40",
        ],
    )
    assert code == 0, err
    assert f"wrote {out}: layer 1, 40 × 40 tokens" in printed and out.is_file()


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--kind", "cross", "--max-new-tokens", "300"], ["--max-new-tokens 300", "cap of 128", "--target"]),
        (["--kind", "decoder", "--target", "word " * 300], ["--target is", "tokens, more than the cap of 128"]),
    ],
)
def test_attention_map_refuses_a_target_too_long_before_generating(
    seq2seq_folder, capsys, monkeypatch, no_forward, argv, words
):
    def fail(*args, **kwargs):
        raise AssertionError("generated before the size check")

    monkeypatch.setattr(HFAttentionForSeq2SeqLM, "generate", fail)
    code, _, err = run(capsys, ["attention-map", "--model", str(seq2seq_folder), "--text", TEXT, *argv])
    assert_error(code, err, words)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"text": "word " * 1201}, "tokens, more than max_tokens=128"),
        ({"text": "word " * 1201, "max_tokens": None}, "max_tokens=None is out of range"),
        ({"max_tokens": 10_000}, "max_tokens=10000 is out of range: 1 … 200"),
        ({"max_tokens": 0}, "max_tokens=0 is out of range"),
    ],
)
def test_plot_attention_refuses_absurd_sizes_before_the_forward_pass(trained_tokenizer, no_forward, options, message):
    model, tokenizer = model_and_tokenizer(trained_tokenizer, "decoder")
    with pytest.raises(ValueError, match=message):
        plot_attention(model, tokenizer, **{"text": TEXT, **options})


def test_plot_attention_size_error_is_a_value_error_naming_the_api(trained_tokenizer, no_forward):
    model, tokenizer = model_and_tokenizer(trained_tokenizer, "decoder")
    with pytest.raises(HeatmapTooLarge) as error:
        plot_attention(model, tokenizer, text_of_tokens(tokenizer, 190), max_tokens=MAX_TOKENS_LIMIT)
    assert "head='mean'" in str(error.value) and "--head mean" in error.value.cli_message


@pytest.mark.parametrize(
    ("out", "written"),
    [
        ("maps", "maps/attention_map.png"),  # an existing folder
        ("new/", "new/attention_map.png"),  # a folder to create
        ("map", "map.png"),  # no suffix: matplotlib adds .png
        ("deeper/map.png", "deeper/map.png"),
    ],
)
def test_attention_map_prints_the_file_it_wrote(decoder_folder, tmp_path, capsys, monkeypatch, out, written):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "maps").mkdir()
    code, printed, err = run(
        capsys, ["attention-map", "--model", str(decoder_folder), "--text", TEXT, "--out", out, "--head", "mean"]
    )
    assert code == 0, err
    assert printed.startswith(f"wrote {written}: ")
    assert (tmp_path / written).is_file()
    assert sorted(p.name for p in tmp_path.rglob("*.png")) == [Path(written).name]


@pytest.mark.parametrize(
    ("argv", "words", "status"),
    [
        (["--out", "map.v2"], ["--out", "'.v2'", ".png"], 1),
        (["--out", "afile/map.png"], ["--out", "afile is a file"], 1),
        (["--out", ""], ["--out", "empty"], 1),
        (["--head", "x"], ["argument --head", "'mean'", "'x'"], 2),
        (["--head", "9"], ["head=9 is out of range", "valid: -4 … 3"], 1),
        (["--layer", "9"], ["layer=9 is out of range", "valid: -2 … 1"], 1),
        (["--kind", "cross"], ["kind='cross' needs an encoder-decoder model"], 1),
        (["--target", "Gibt den Wert"], ["--target is only drawn with --kind decoder or --kind cross"], 1),
        (["--text", "   "], ["--text is empty"], 1),
        # bytes that are not UTF-8 reach sys.argv as lone surrogates (os.fsdecode of b"caf\xe9")
        (["--text", "caf\udce9"], ["--text is not valid UTF-8", "byte 0xe9 at byte 3"], 1),
        (["--max-new-tokens", "0"], ["argument --max-new-tokens", "positive integer", "'0'"], 2),
        (["--max-tokens", "500"], ["argument --max-tokens", f"1 … {MAX_TOKENS_LIMIT}", "'500'"], 2),
        (["--max-tokens", "many"], ["argument --max-tokens", "'many'"], 2),
    ],
)
def test_attention_map_bad_flags(decoder_folder, tmp_path, capsys, monkeypatch, argv, words, status):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("")
    code, _, err = run(capsys, ["attention-map", "--model", str(decoder_folder), "--text", TEXT, *argv])
    if status == 2:  # argparse: usage, then the error line
        assert code == 2 and "Traceback" not in err and all(word in err.splitlines()[-1] for word in words), err
    else:
        assert_error(code, err, words)
    assert not list(tmp_path.rglob("*.png"))


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--kind", "cross", "--target", "  "], ["--target is empty"]),
        (["--kind", "decoder", "--head", "mean", "--layer", "-3"], ["layer=-3 is out of range"]),
    ],
)
def test_attention_map_bad_flags_on_an_encoder_decoder(seq2seq_folder, tmp_path, capsys, argv, words):
    code, _, err = run(
        capsys,
        ["attention-map", "--model", str(seq2seq_folder), "--text", TEXT, "--out", str(tmp_path / "map.png"), *argv],
    )
    assert_error(code, err, words)


# ---------------------------------------------------------------------------------------------------------------------
# demo


def test_demo_output_dir_under_a_file(tmp_path, capsys):
    (tmp_path / "afile").write_text("")
    code, _, err = run(capsys, ["demo", "--output-dir", str(tmp_path / "afile" / "demo")])
    assert_error(code, err, ["--output-dir", "afile is a file, not a folder"])
