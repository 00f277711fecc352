"""Property-based tests (hypothesis) over the public inputs: configs, model inputs, generation options and command
lines, drawn at random, valid and invalid, for every family (the recurrent one has a section of its own).

The properties:
- a valid config builds a model whose outputs are finite and equal to the reference semantics: an all-ones mask
  changes nothing, a padded batch equals its rows alone, cached decoding equals uncached, packed texts equal the texts
  alone;
- an invalid config value, or an invalid model input, raises ValueError or TypeError naming the field or argument,
  never an IndexError, a RuntimeError from a kernel or a traceback from a dependency (the recurrent family ignores
  the arguments it has no use for, position ids and token types: its output is then the plain call's);
- generate() with any combination of options either gives ids of the vocabulary or refuses with a ValueError;
- a refused command line exits with a one-line error and changes nothing on disk;
- a writing command (convert, export, demo, refresh-code) pointed at a drawn destination layout either refuses with a
  ValueError and changes no file, byte or permission, or leaves the destination holding exactly what it writes.

Every example is deterministic (`derandomize`). The suite runs the "suite" profile (a few dozen examples per
property, on tiny models); `HF_ATTENTION_FUZZ_PROFILE=long python -m pytest tests/test_fuzz.py` runs 1000
random examples per property (`HF_ATTENTION_FUZZ_EXAMPLES` sets another number; docs/testing.md gives the last
result). A finding is fixed and its shrunk example kept as a regular test.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from fuzz_strategies import (
    DESTINATION_LAYOUTS,
    GENERATION_OPTIONS,
    VOCAB,
    batches,
    decoder_inputs,
    destination_cases,
    invalid_configs,
    malformed_inputs,
    train_command_lines,
    valid_configs,
    valid_recurrent_configs,
)
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from test_parity_hf import build_reference
from transformers import AutoConfig

from hf_attention import (
    HFAttentionDecoderConfig,
    HFAttentionEncoderConfig,
    HFAttentionEncoderModel,
    HFAttentionForCausalLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionRecurrentConfig,
    HFAttentionRecurrentForSeq2SeqLM,
    HFAttentionSeq2SeqConfig,
)
from hf_attention.commands.cli import build_parser, main
from hf_attention.commands.refresh_code import PACKAGE, closure_files
from training.args import parse_args
from training.run.run_state import RunArguments
from training.train import configure

CONFIGS = {
    "encoder": HFAttentionEncoderConfig,
    "decoder": HFAttentionDecoderConfig,
    "seq2seq": HFAttentionSeq2SeqConfig,
}
MODELS = {"encoder": HFAttentionEncoderModel, "decoder": HFAttentionForCausalLM, "seq2seq": HFAttentionForSeq2SeqLM}
TOLERANCE = {"rtol": 0, "atol": 2e-5}
SLOW_IS_FINE = settings(
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    deadline=None,
)

settings.register_profile("suite", max_examples=25, derandomize=True, parent=SLOW_IS_FINE)
settings.register_profile(
    "long",
    max_examples=int(os.environ.get("HF_ATTENTION_FUZZ_EXAMPLES", "1000")),
    derandomize=False,
    parent=SLOW_IS_FINE,
)
settings.load_profile(os.environ.get("HF_ATTENTION_FUZZ_PROFILE", "suite"))


def _model(family: str, fields: dict):
    config = CONFIGS[family](**{k: v for k, v in fields.items() if k != "attn_implementation"})
    torch.manual_seed(0)
    return MODELS[family]._from_config(config, attn_implementation=fields["attn_implementation"]).eval()


def _outputs(model, family: str, ids: torch.Tensor, mask: torch.Tensor | None, **extra) -> torch.Tensor:
    inputs = {"input_ids": ids, "attention_mask": mask, **extra}
    if family == "seq2seq":
        inputs.setdefault("decoder_input_ids", torch.tensor([[1, 5, 7]]).expand(ids.shape[0], -1))
    if family == "decoder":
        inputs.setdefault("use_cache", False)
    with torch.no_grad():
        return model(**inputs)[0]


# ---------------------------------------------------------------------------------------------------------------------
# Valid configs: finite outputs with the reference semantics


@given(valid_configs(), batches())
def test_valid_configs_give_finite_outputs_that_padding_and_masks_do_not_change(config, batch):
    family, fields = config
    model = _model(family, fields)
    ids, mask = batch.tensors()
    padded = _outputs(model, family, ids, mask)
    assert torch.isfinite(padded).all()
    for row, tokens in enumerate(batch.rows):
        alone = torch.tensor([tokens])
        expected = _outputs(model, family, alone, None)
        torch.testing.assert_close(_outputs(model, family, alone, torch.ones_like(alone)), expected, **TOLERANCE)
        real = mask[row].bool()
        got = padded[row] if family == "seq2seq" else padded[row][real]
        torch.testing.assert_close(got, expected[0], **TOLERANCE)


@given(valid_configs(families=("decoder", "seq2seq")), batches(max_rows=2))
def test_valid_configs_decode_the_same_with_and_without_a_cache(config, batch):
    family, fields = config
    model = _model(family, fields)
    ids, mask = batch.tensors()
    if family == "decoder" and batch.side == "right":
        ids, mask = ids[:1, : len(batch.rows[0])], mask[:1, : len(batch.rows[0])]  # generation pads on the left
    options = {"attention_mask": mask, "max_new_tokens": 4, "min_new_tokens": 4, "do_sample": False}
    cached = model.generate(ids, **options)
    assert torch.equal(model.generate(ids, use_cache=False, **options), cached)
    assert int(cached.min()) >= 0 and int(cached.max()) < VOCAB


@given(valid_configs(families=("decoder",)), st.lists(st.integers(1, 4), min_size=2, max_size=3))
def test_packed_texts_equal_the_texts_alone(config, lengths):
    family, fields = config
    model = _model(family, fields)
    texts = [torch.randint(3, VOCAB, (length,), generator=torch.Generator().manual_seed(length)) for length in lengths]
    packed = torch.cat(texts)[None]
    positions = torch.cat([torch.arange(length) for length in lengths])[None]
    together = _outputs(model, family, packed, None, position_ids=positions)[0]
    alone = torch.cat([_outputs(model, family, text[None], None)[0] for text in texts])
    torch.testing.assert_close(together, alone, **TOLERANCE)


@given(valid_configs(), batches(), st.sampled_from((torch.long, torch.int32, torch.bool, torch.float32)))
def test_equivalent_input_forms_give_the_same_outputs(config, batch, mask_dtype):
    """A 2-D mask of any number type, embeddings instead of ids, and a 4-D boolean mask spelling out what the 2-D one
    means give the outputs of the plain call."""
    family, fields = config
    model = _model(family, fields)
    ids, mask = batch.tensors()
    expected = _outputs(model, family, ids, mask)
    real = mask.bool() if family != "seq2seq" else slice(None)
    torch.testing.assert_close(_outputs(model, family, ids, mask.to(mask_dtype))[real], expected[real], **TOLERANCE)
    embeddings = model.get_input_embeddings()(ids)
    inputs = {"inputs_embeds": embeddings, "attention_mask": mask}
    if family == "seq2seq":
        inputs["decoder_input_ids"] = torch.tensor([[1, 5, 7]]).expand(ids.shape[0], -1)
    if family == "decoder":
        inputs["use_cache"] = False
    with torch.no_grad():
        from_embeddings = model(**inputs)[0]
    torch.testing.assert_close(from_embeddings[real], expected[real], **TOLERANCE)
    if family != "seq2seq":
        allowed = mask.bool()[:, None, None, :].expand(-1, 1, ids.shape[1], -1)  # (B, 1, T, S)
        if family == "decoder":
            allowed = allowed & torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool).tril()
        ready = _outputs(model, family, ids, allowed, position_ids=(mask.cumsum(-1) - 1).clamp(min=0))
        torch.testing.assert_close(ready[real], expected[real], **TOLERANCE)


# ---------------------------------------------------------------------------------------------------------------------
# Invalid configs and inputs: ValueError / TypeError naming what is wrong


@given(invalid_configs())
def test_invalid_config_values_are_refused_naming_the_field(case):
    family, fields, field = case
    fields = {k: v for k, v in fields.items() if k != "attn_implementation"}
    with pytest.raises((ValueError, TypeError)) as error:
        CONFIGS[family](**fields)
    assert field in str(error.value), (field, fields[field], str(error.value))


@given(invalid_configs())
def test_a_hand_edited_config_json_is_refused_naming_the_field(tmp_path_factory, case):
    family, fields, field = case
    folder = tmp_path_factory.mktemp("edited")
    valid = {k: v for k, v in fields.items() if k not in (field, "attn_implementation")}
    CONFIGS[family](**valid).save_pretrained(folder)
    saved = json.loads((folder / "config.json").read_text())
    saved[field] = fields[field]
    (folder / "config.json").write_text(json.dumps(saved))
    with pytest.raises((ValueError, TypeError)) as error:
        AutoConfig.from_pretrained(folder)
    assert field in str(error.value), (field, fields[field], str(error.value))


@given(valid_configs(), batches(), malformed_inputs())
def test_malformed_inputs_are_refused_naming_the_argument(config, batch, malformed):
    family, fields = config
    model = _model(family, fields)
    argument, make = malformed
    assume(not (argument == "labels" and family == "encoder"))  # the base encoder takes no labels (its heads do)
    assume(not (argument == "token_type_ids" and fields.get("type_vocab_size", 0) == 0 and family != "encoder"))
    assume(not (argument == "cache" and family == "encoder"))  # an encoder takes no cache
    ids, mask = batch.tensors()
    inputs = make(ids, mask)
    if family == "seq2seq":  # decoder inputs of the ids' shape: labels must then match them
        inputs["decoder_input_ids"] = ids if argument == "labels" else torch.tensor([[1, 5]]).expand(ids.shape[0], -1)
    with pytest.raises((ValueError, TypeError)) as error, torch.no_grad():
        model(**inputs)
    assert argument.split("_")[0] in str(error.value), (argument, str(error.value))


@given(valid_configs(families=("decoder", "seq2seq")), batches(max_rows=2), GENERATION_OPTIONS)
def test_generate_gives_vocabulary_ids_or_refuses_with_a_value_error(config, batch, options):
    family, fields = config
    model = _model(family, fields)
    ids, mask = batch.tensors()
    try:
        output = model.generate(ids, attention_mask=mask, **options)
    except ValueError:
        return  # transformers' own checks of the options (e.g. top_k with greedy decoding and no sampling)
    assert int(output.min()) >= 0 and int(output.max()) < VOCAB


# ---------------------------------------------------------------------------------------------------------------------
# The recurrent family: the same properties, on right-padded sources (its encoder refuses left padding)

# What the recurrent family has no use for and ignores: its RNNs read positions in order and it has no segments.
RECURRENT_IGNORES = ("position_ids", "token_type_ids")


def _recurrent_model(fields: dict) -> HFAttentionRecurrentForSeq2SeqLM:
    torch.manual_seed(0)
    return HFAttentionRecurrentForSeq2SeqLM(HFAttentionRecurrentConfig(**fields)).eval()


def _recurrent_logits(model, **inputs) -> torch.Tensor:
    with torch.no_grad():
        return model(**inputs).logits


@given(valid_recurrent_configs(), batches(sides=("right",)), st.sampled_from((torch.long, torch.int32, torch.bool)))
def test_recurrent_outputs_are_finite_and_padding_masks_and_embeddings_do_not_change_them(fields, batch, mask_dtype):
    model = _recurrent_model(fields)
    ids, mask = batch.tensors()
    targets = decoder_inputs(ids)
    padded = _recurrent_logits(model, input_ids=ids, attention_mask=mask, decoder_input_ids=targets)
    assert torch.isfinite(padded).all()
    for row, tokens in enumerate(batch.rows):
        alone = torch.tensor([tokens])
        expected = _recurrent_logits(model, input_ids=alone, decoder_input_ids=targets[:1])
        ones = _recurrent_logits(
            model, input_ids=alone, attention_mask=torch.ones_like(alone), decoder_input_ids=targets[:1]
        )
        torch.testing.assert_close(ones, expected, **TOLERANCE)
        torch.testing.assert_close(padded[row], expected[0], **TOLERANCE)
    other_mask = _recurrent_logits(model, input_ids=ids, attention_mask=mask.to(mask_dtype), decoder_input_ids=targets)
    torch.testing.assert_close(other_mask, padded, **TOLERANCE)
    embeddings = model.get_input_embeddings()(ids)
    from_embeddings = _recurrent_logits(
        model, inputs_embeds=embeddings, attention_mask=mask, decoder_input_ids=targets
    )
    torch.testing.assert_close(from_embeddings, padded, **TOLERANCE)


@given(valid_recurrent_configs(), batches(max_rows=2, sides=("right",)), GENERATION_OPTIONS)
def test_recurrent_generate_gives_vocabulary_ids_the_same_with_and_without_its_state(fields, batch, options):
    model = _recurrent_model(fields)
    ids, mask = batch.tensors()
    options = {"max_new_tokens": 4, **options, "attention_mask": mask}
    try:
        output = model.generate(ids, **options)
    except ValueError:
        return  # transformers' own checks of the options
    assert int(output.min()) >= 0 and int(output.max()) < VOCAB
    if not options.get("do_sample"):
        assert torch.equal(model.generate(ids, **{**options, "use_cache": not options.get("use_cache", True)}), output)


@given(valid_recurrent_configs(), batches(), malformed_inputs(recurrent=True))
def test_malformed_recurrent_inputs_are_refused_naming_the_argument_or_ignored(fields, batch, malformed):
    model = _recurrent_model(fields)
    argument, make = malformed
    ids, mask = batch.tensors()
    inputs = make(ids, mask)
    # decoder inputs of the ids' shape where labels are the point: labels must then match them
    inputs.setdefault("decoder_input_ids", ids if argument == "labels" else decoder_inputs(ids))
    if argument in RECURRENT_IGNORES:
        plain = {name: value for name, value in inputs.items() if name != argument}
        assert torch.equal(_recurrent_logits(model, **inputs), _recurrent_logits(model, **plain))
        return
    with pytest.raises((ValueError, TypeError)) as error, torch.no_grad():
        model(**inputs)
    assert argument in str(error.value), (argument, str(error.value))


# ---------------------------------------------------------------------------------------------------------------------
# Command lines: refused ones exit with one line and leave the disk as it was


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(folder.rglob("*"))
    }


@pytest.fixture(scope="module")
def cli_workdir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cli")
    (folder / "afile").write_text("x")
    (folder / "notes").mkdir()
    (folder / "notes" / "todo.txt").write_text("keep")
    return folder


PATHS = st.sampled_from(["afile", "notes", "nope", "", ".", "notes/todo.txt", "new", "a/b/c.png", "map.v2"])
NUMBERS = st.sampled_from(["-1", "0", "1", "3", "999", "x", "1.5"])
TEXTS = st.sampled_from(["Open the file", "", "   ", "caf\udce9", "</script>", "a" * 10])


@st.composite
def command_lines(draw) -> list[str]:
    command = draw(st.sampled_from(["convert", "explore", "attention-map", "refresh-code"]))
    if command == "convert":
        argv = ["convert", draw(PATHS), draw(PATHS)] + draw(st.sampled_from([[], ["--overwrite"]]))
    elif command == "refresh-code":
        argv = ["refresh-code", draw(PATHS)]
    else:
        argv = [command, "--model", draw(PATHS), "--text", draw(TEXTS), "--out", draw(PATHS)]
        for flag in draw(st.lists(st.sampled_from(["--layer", "--head", "--max-tokens", "--max-new-tokens"]))):
            argv += [flag, draw(NUMBERS)]
    return argv


@given(command_lines())
def test_refused_command_lines_print_one_error_line_and_change_nothing(cli_workdir, capsys, command_line):
    before = _snapshot(cli_workdir)
    old = os.getcwd()
    os.chdir(cli_workdir)
    try:
        code = main(command_line)
    except SystemExit as exit:  # argparse's usage errors
        code = exit.code
    finally:
        os.chdir(old)
    err = capsys.readouterr().err
    assert code in (1, 2), (command_line, code, err)  # no valid model or source lives in this folder
    assert "Traceback" not in err and "error:" in err.splitlines()[-1], (command_line, err)
    assert _snapshot(cli_workdir) == before, command_line


@given(train_command_lines())
def test_refused_training_command_lines_name_the_problem_before_any_file_is_written(tmp_path_factory, argv):
    """`python -m training.train` with an out-of-range flag: refused by its checks (a ValueError naming the flag, or
    argparse's usage error), before data is read and before the output folder exists."""
    output = tmp_path_factory.mktemp("train") / "run"
    argv = [*argv, "--output_dir", str(output)]
    try:
        model_args, data_args, train_args, model_config = parse_args(argv)
        configure(RunArguments(model_args, data_args, train_args, model_config))
    except SystemExit as exit:
        assert exit.code == 2, argv
    except ValueError as error:
        assert str(error).strip(), argv
    else:
        assume(False)  # every flag happened to be valid: not this property's case
    assert not output.exists(), argv


# ---------------------------------------------------------------------------------------------------------------------
# Writing commands: a destination is refused with a ValueError and nothing changes, or it ends up holding exactly
# what the command writes


def _state(root: Path) -> dict[str, tuple]:
    """Relative path → (kind, content hash, permission bits) of everything under `root`."""
    found = {}
    for path in sorted(root.rglob("*")):
        content = ("dir", None) if path.is_dir() else ("file", hashlib.sha256(path.read_bytes()).hexdigest())
        found[path.relative_to(root).as_posix()] = (*content, stat.S_IMODE(path.lstat().st_mode))
    return found


@pytest.fixture(scope="module")
def writing_sources(tmp_path_factory) -> dict[str, Path]:
    """A tiny GPT-2 (what `convert` reads) and a tiny hf-attention decoder that exports as Llama (what `export` reads,
    and the checkpoint the layouts copy)."""
    root = tmp_path_factory.mktemp("writing-sources")
    build_reference("gpt2").save_pretrained(root / "gpt2")
    fields = {"position_encoding": "rotary", "norm_type": "rmsnorm", "hidden_act": "swiglu", "norm_position": "pre"}
    fields |= {"scale_embeddings": False, "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False}
    HFAttentionForCausalLM(tiny_config("decoder", **fields)).eval().save_pretrained(root / "ours")
    return {"convert": root / "gpt2", "ours": root / "ours"}


def _lay_out(root: Path, sources: dict[str, Path], command: str, layout: str) -> Path:
    """Build root/src (the command's source) and, in the current folder root/work/here, the `layout` case; returns the
    current folder."""
    shutil.copytree(sources["convert" if command == "convert" else "ours"], root / "src")
    here = root / "work" / "here"
    here.mkdir(parents=True)
    checkpoint = sources["ours"]
    if layout == "empty":
        (here / "empty").mkdir()
    elif layout == "foreign files":
        (here / "mine").mkdir()
        (here / "mine" / "notes.txt").write_text("keep")
    elif layout == "a checkpoint and foreign files":
        shutil.copytree(checkpoint, here / "mixed")
        (here / "mixed" / "thesis.txt").write_text("work")
    elif layout == "a config without weights":
        (here / "noweights").mkdir()
        shutil.copy(checkpoint / "config.json", here / "noweights")
        (here / "noweights" / "layers.py").write_text("# my notes\n")
    elif layout in ("a file", "under a file"):
        (here / "afile").write_text("not a folder")
    elif layout == "a checkpoint":  # shared with a group: permissions a replacement must keep
        shutil.copytree(checkpoint, here / "old")
        (here / "old").chmod(0o750)
        (here / "old" / "config.json").chmod(0o640)
    elif layout == "an earlier demo's output":
        for family in ("decoder", "encoder", "seq2seq"):
            shutil.copytree(checkpoint, here / "demo" / family)
    return here


def _accepted(command: str, layout: str, overwrite: bool) -> bool:
    """The rule: a new or empty folder, or with --overwrite one holding only what the command writes; refresh-code
    updates a checkpoint in place and leaves every other file alone."""
    if command == "refresh-code":
        return layout in ("a checkpoint", "a checkpoint and foreign files", "the source")
    new = layout in ("missing", "missing, deeper", "empty") or (command == "demo" and layout == "inside the source")
    replaceable = "an earlier demo's output" if command == "demo" else "a checkpoint"
    return new or (overwrite and layout == replaceable)


def _command_line(command: str, destination: str, overwrite: bool) -> list[str]:
    flags = ["--overwrite"] if overwrite else []
    if command == "demo":
        return ["demo", "--output-dir", destination, *flags]
    if command == "refresh-code":
        return ["refresh-code", destination]
    return [command, "../../src", destination, *flags]


def _run_from(folder: Path, argv: list[str]) -> str | None:
    """Run `hf-attention argv` in `folder`: None when it succeeds, the message of its ValueError when refused (any
    other exception is a failure of the property)."""
    args = build_parser().parse_args(argv)
    old = os.getcwd()
    os.chdir(folder)
    try:
        args.run(args)
    except ValueError as error:
        return str(error)
    finally:
        os.chdir(old)
    return None


_WRITTEN: dict[str, dict[str, tuple]] = {}


def _what_it_writes(command: str, sources: dict[str, Path], tmp_path_factory) -> dict[str, tuple]:
    """What `command` writes into a new folder (computed once per command), as `_state` gives it."""
    if command not in _WRITTEN:
        root = tmp_path_factory.mktemp(f"{command}-written")
        here = _lay_out(root, sources, command, "missing")
        assert _run_from(here, _command_line(command, "out", overwrite=False)) is None
        _WRITTEN[command] = _state(here / "out")
    return _WRITTEN[command]


def _outside(state: dict[str, tuple], destination: str) -> dict[str, tuple]:
    """The entries of `state` that are neither the destination, in it, nor a folder it lies in."""
    return {
        path: entry
        for path, entry in state.items()
        if not (path == destination or path.startswith(f"{destination}/") or destination.startswith(f"{path}/"))
    }


def _umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _assert_holds_what_it_writes(written, before, after, command):
    """The destination's files are those the command writes into a new folder, with the same bytes (the export's
    model card names the folder); each keeps the permissions of what it replaced, else gets the usual ones."""
    assert set(after) == set(written), (command, sorted(set(after) ^ set(written)))
    usual = {"dir": 0o777 & ~_umask(), "file": 0o666 & ~_umask()}
    for path, (kind, content, mode) in after.items():
        assert kind == written[path][0], path
        assert content == written[path][1] or path == "README.md", path
        old = before.get(path)
        assert mode == (old[2] if old and old[0] == kind else usual[kind]), (path, oct(mode))


def _assert_refreshed(before, after):
    """refresh-code wrote the installed code and config.json, kept each replaced file's permissions, and left every
    other file as it was."""
    written = {*closure_files(), "config.json"}
    assert set(after) == set(before) | written
    for path, (_, content, mode) in after.items():
        if path not in written:
            assert after[path] == before[path], path
            continue
        if path.endswith(".py"):
            assert content == hashlib.sha256((PACKAGE / path).read_bytes()).hexdigest(), path
        assert mode == (before[path][2] if path in before else 0o666 & ~_umask()), (path, oct(mode))


@settings(max_examples=2 * settings.default.max_examples)
@given(destination_cases())
def test_writing_commands_refuse_a_destination_untouched_or_leave_exactly_their_output(
    writing_sources, tmp_path_factory, case
):
    command, layout, overwrite = case
    root = tmp_path_factory.mktemp("writing")
    here = _lay_out(root, writing_sources, command, layout)
    typed = DESTINATION_LAYOUTS[layout]
    destination = Path(os.path.normpath(here / typed)).relative_to(root).as_posix()
    before = _state(root)
    refusal = _run_from(here, _command_line(command, typed, overwrite))
    after = _state(root)
    event(f"{command}: {'refused' if refusal else 'written'}")  # (shown by pytest --hypothesis-show-statistics)
    assert (refusal is None) == _accepted(command, layout, overwrite), (case, refusal)
    if refusal is not None:
        named = typed if command == "refresh-code" else ("--output-dir " if command == "demo" else "destination ")
        assert named in refusal, (case, refusal)
        assert after == before, case
        return
    inside = f"{destination}/"
    mine = {path.removeprefix(inside): entry for path, entry in after.items() if path.startswith(inside)}
    was = {path.removeprefix(inside): entry for path, entry in before.items() if path.startswith(inside)}
    if command == "refresh-code":
        _assert_refreshed(was, mine)
        assert _outside(after, destination) == _outside(before, destination), case
        return
    _assert_holds_what_it_writes(_what_it_writes(command, writing_sources, tmp_path_factory), was, mine, command)
    replaced = before.get(destination)  # the folder itself: its permissions are kept too
    assert after[destination][2] == (replaced[2] if replaced else 0o777 & ~_umask()), case
    assert _outside(after, destination) == _outside(before, destination), case
