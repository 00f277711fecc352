"""The KV cache under both of its names (transformers 5.24 renamed `past_key_values` to `cache`), checkpoints saved
before the rename, and `hf-attention refresh-code`, which updates the model code a checkpoint ships."""

import json
import os
import shutil
import stat
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from conftest import POSITION_ENCODINGS, build, left_pad, right_pad
from test_save_load import thread_env
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

from hf_attention import (
    HFAttentionDecoderModel,
    HFAttentionForCausalLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionSeq2SeqModel,
)
from hf_attention.commands.cli import main
from hf_attention.commands.refresh_code import PACKAGE, closure_files
from hf_attention.modeling.cache_argument import CACHE_FIELD, RENAMED, cache_of
from hf_attention.modeling.modeling_hf_attention import auto_map_of
from hf_attention.modeling.scores import SCORES

FIXTURES = Path(__file__).parent / "fixtures" / "release_0_1_0"
AUTO = {"decoder": AutoModelForCausalLM, "seq2seq": AutoModelForSeq2SeqLM}


def _empty_cache(model):
    return EncoderDecoderCache(DynamicCache(), DynamicCache()) if model.config.is_encoder_decoder else DynamicCache()


def _step_inputs(model) -> dict:
    ids = torch.tensor([[5, 17, 33, 8]])
    if model.config.is_encoder_decoder:
        return {"input_ids": ids, "decoder_input_ids": torch.tensor([[1, 7, 9]])}
    return {"input_ids": ids}


@pytest.mark.parametrize(
    ("model_class", "family"),
    [
        (HFAttentionDecoderModel, "decoder"),
        (HFAttentionForCausalLM, "decoder"),
        (HFAttentionSeq2SeqModel, "seq2seq"),
        (HFAttentionForSeq2SeqLM, "seq2seq"),
    ],
)
def test_forward_takes_the_cache_under_either_name(model_class, family):
    model = build(model_class, family)
    inputs = _step_inputs(model)
    results = []
    for name in ("cache", "past_key_values"):
        cache = _empty_cache(model)
        with torch.no_grad():
            output = model(**inputs, **{name: cache}, use_cache=True)
        assert cache_of(output) is cache  # the cache passed in is the one filled and returned
        assert cache.get_seq_length() > 0
        results.append((output[0], cache))
    (first, first_cache), (second, second_cache) = results
    assert torch.equal(first, second)
    self_first = getattr(first_cache, "self_attention_cache", first_cache)
    self_second = getattr(second_cache, "self_attention_cache", second_cache)
    for a, b in zip(self_first.layers, self_second.layers, strict=True):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
    with pytest.raises(ValueError, match="Both `cache` and `past_key_values` were passed"):
        model(**inputs, cache=_empty_cache(model), past_key_values=_empty_cache(model), use_cache=True)


@pytest.mark.parametrize("model_class", [HFAttentionForCausalLM, HFAttentionForSeq2SeqLM])
def test_outputs_carry_the_cache_under_the_installed_releases_name(model_class):
    family = "decoder" if model_class is HFAttentionForCausalLM else "seq2seq"
    model = build(model_class, family)
    with torch.no_grad():
        output = model(**_step_inputs(model), use_cache=True)
    assert ("cache" if RENAMED else "past_key_values") == CACHE_FIELD
    assert CACHE_FIELD in list(output.keys())  # the output's own key (`in output` would accept the old name too)
    assert output[CACHE_FIELD] is output.past_key_values  # the old name still reads it (an alias from 5.24 on)
    assert output.to_tuple()[1] is output[CACHE_FIELD]  # (logits, cache, ...) as transformers' tuples
    with torch.no_grad():
        assert cache_of(model(**_step_inputs(model), use_cache=False)) is None


# Every positional scheme with every score (a score that is not a dot product runs on the eager backend).
SCHEME_AND_SCORE = [(position, score) for position in POSITION_ENCODINGS for score in SCORES]


@pytest.mark.parametrize("family", ["decoder", "seq2seq"])
@pytest.mark.parametrize(("position", "score"), SCHEME_AND_SCORE)
def test_cached_generation_equals_uncached_for_every_scheme_and_score(family, position, score):
    model_class = HFAttentionForCausalLM if family == "decoder" else HFAttentionForSeq2SeqLM
    backend = "sdpa" if SCORES[score].dot_product else "eager"
    model = build(model_class, family, position_encoding=position, attention_score=score, attn_implementation=backend)
    rows = [[5, 17, 33, 8, 61], [7, 21, 3]]
    ids, mask = left_pad(rows) if family == "decoder" else right_pad(rows)
    options = {"attention_mask": mask, "max_new_tokens": 8, "min_new_tokens": 8, "do_sample": False}
    for num_beams in (1, 2):
        cached = model.generate(ids, num_beams=num_beams, **options)
        assert torch.equal(model.generate(ids, num_beams=num_beams, use_cache=False, **options), cached)


def _expected(family: str) -> dict:
    return json.loads((FIXTURES / family / "expected_generation.json").read_text())


def _generate(model, expected: dict, strategy: str, **options) -> list:
    inputs = {name: torch.tensor(value) for name, value in expected["inputs"].items()}
    settings = {"max_new_tokens": 8, "eos_token_id": None, "do_sample": False}
    num_beams = 4 if strategy == "beam4" else 1
    return model.generate(**inputs, **settings, num_beams=num_beams, **options).tolist()


@pytest.mark.parametrize("family", ["decoder", "seq2seq"])
def test_a_checkpoint_saved_before_the_rename_loads_and_generates_its_tokens(family):
    """Saved by hf-attention 0.1.0 on transformers 5.23 (tests/fixtures/release_0_1_0): loaded with the installed
    hf_attention on the installed transformers, it generates the tokens it generated then, with and without cache."""
    expected = _expected(family)
    model = AUTO[family].from_pretrained(FIXTURES / family)
    for strategy in ("greedy", "beam4"):
        for use_cache in (True, False):
            assert _generate(model, expected, strategy, use_cache=use_cache) == expected[strategy], (
                strategy,
                use_cache,
            )


REMOTE_SCRIPT = """
import json, sys
import torch, transformers
folder, family = sys.argv[1], sys.argv[2]
auto = transformers.AutoModelForCausalLM if family == "decoder" else transformers.AutoModelForSeq2SeqLM
model = auto.from_pretrained(folder, trust_remote_code=True)
expected = json.load(open(f"{folder}/expected_generation.json"))
inputs = {name: torch.tensor(value) for name, value in expected["inputs"].items()}
result = {"module": type(model).__module__}
for strategy, beams in (("greedy", 1), ("beam4", 4)):
    for use_cache in (True, False):
        result[f"{strategy}-{use_cache}"] = model.generate(
            **inputs, max_new_tokens=8, eos_token_id=None, do_sample=False, num_beams=beams, use_cache=use_cache
        ).tolist()
print(json.dumps(result))
"""


def _remote_generate(tmp_path: Path, folder: Path, family: str) -> dict:
    """Generate in a fresh process that does not import hf_attention: the code shipped in `folder` runs."""
    (tmp_path / "remote.py").write_text(REMOTE_SCRIPT)
    env = {
        "PATH": os.environ.get("PATH", ""),
        **thread_env(),
        "HOME": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
        "HF_MODULES_CACHE": str(tmp_path / "modules"),
    }
    result = subprocess.run(
        [sys.executable, "remote.py", str(folder), family],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("family", ["decoder", "seq2seq"])
def test_refresh_code_ships_the_installed_code_and_it_generates_remotely(tmp_path, family, capsys):
    folder = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / family, folder)
    stale = folder / "modeling_hf_attention.py"
    stale.write_text("raise ImportError('the code of an older release')\n")
    weights = (folder / "model.safetensors").read_bytes()
    config_before = json.loads((folder / "config.json").read_text())

    assert main(["refresh-code", str(folder)]) == 0
    assert "modeling_hf_attention.py" in capsys.readouterr().out

    for name in closure_files():
        assert (folder / name).read_bytes() == (PACKAGE / name).read_bytes(), name
    assert (folder / "model.safetensors").read_bytes() == weights
    config_after = json.loads((folder / "config.json").read_text())
    assert {k: v for k, v in config_after.items() if k != "auto_map"} == {
        k: v for k, v in config_before.items() if k != "auto_map"
    }
    assert config_after["auto_map"] == auto_map_of(config_before["model_type"])
    remote = _remote_generate(tmp_path, folder, family)
    assert remote.pop("module").startswith("transformers_modules.")
    expected = _expected(family)
    for key, tokens in remote.items():
        assert tokens == expected[key.split("-")[0]], key


def test_refresh_code_refuses_folders_that_are_not_hf_attention_checkpoints(tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    cases = {
        tmp_path / "missing": "is not a folder",
        tmp_path: "has no config.json",
        other: "model_type='gpt2'; refresh-code updates hf-attention checkpoints only",
        tmp_path / "broken": "is not valid JSON",
    }
    for folder, message in cases.items():
        before = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else None
        assert main(["refresh-code", str(folder)]) == 1
        assert message in capsys.readouterr().err
        assert (sorted(p.name for p in folder.iterdir()) if folder.is_dir() else None) == before


@pytest.mark.parametrize("model_class", [HFAttentionForCausalLM, HFAttentionForSeq2SeqLM])
def test_the_old_cache_name_warns_as_transformers_models_do(model_class):
    """On releases that renamed the argument, `past_key_values=` gives transformers' FutureWarning through Python's
    warnings (seen by catch_warnings and -W error); on 5.23, where it is the name, nothing is said."""
    family = "decoder" if model_class is HFAttentionForCausalLM else "seq2seq"
    model = build(model_class, family)
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        model(**_step_inputs(model), past_key_values=_empty_cache(model), use_cache=True)
        model(**_step_inputs(model), cache=_empty_cache(model), use_cache=True)
    said = [w for w in caught if "past_key_values" in str(w.message)]
    if RENAMED:
        assert [w.category for w in said] == [FutureWarning]
        with warnings.catch_warnings(), pytest.raises(FutureWarning, match="use `cache` instead"):
            warnings.simplefilter("error", FutureWarning)
            model(**_step_inputs(model), past_key_values=_empty_cache(model), use_cache=True)
    else:
        assert said == []


@pytest.mark.parametrize("model_class", [HFAttentionForCausalLM, HFAttentionForSeq2SeqLM])
def test_generate_refuses_two_different_caches_as_forward_does(model_class):
    family = "decoder" if model_class is HFAttentionForCausalLM else "seq2seq"
    model = build(model_class, family)
    ids = torch.tensor([[5, 6, 7]])
    with pytest.raises(ValueError, match="Both `cache` and `past_key_values` were passed"):
        model.generate(ids, max_new_tokens=2, cache=_empty_cache(model), past_key_values=_empty_cache(model))
    shared = _empty_cache(model)  # one object under both names is one cache: accepted, as by forward()
    expected = model.generate(ids, max_new_tokens=2, do_sample=False)
    assert torch.equal(
        model.generate(ids, max_new_tokens=2, do_sample=False, cache=shared, past_key_values=shared), expected
    )
    assert shared.get_seq_length() > 0  # the cache passed is the one generate() filled
    # Either name alone, on every release (before 5.24 generate() knows only `past_key_values`; `cache=` reached the
    # encoder of the encoder-decoder family as a model input).
    for name in ("cache", "past_key_values"):
        passed = _empty_cache(model)
        assert torch.equal(model.generate(ids, max_new_tokens=2, do_sample=False, **{name: passed}), expected)
        assert passed.get_seq_length() > 0


def _files(folder: Path) -> dict[str, tuple[bytes | None, int]]:
    """Name → (bytes, or None for a folder; permission bits) of everything in `folder`."""
    return {p.name: (None if p.is_dir() else p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in folder.iterdir()}


def test_refresh_code_refuses_a_folder_without_weights_before_writing(tmp_path, capsys):
    """An hf-attention config.json beside a user's own layers.py and losses.py is not a checkpoint: nothing of it is
    replaced."""
    folder = tmp_path / "notes"
    folder.mkdir()
    shutil.copy(FIXTURES / "decoder" / "config.json", folder)
    (folder / "layers.py").write_text("# my notes on layers\n")
    (folder / "losses.py").write_text("# my notes on losses\n")
    before = _files(folder)
    assert main(["refresh-code", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "error:" in err and "has no model weights" in err and "model.safetensors" in err, err
    assert _files(folder) == before


def test_refresh_code_refuses_a_code_file_that_is_a_folder_before_writing(tmp_path, capsys):
    folder = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / "decoder", folder)
    (folder / "layers.py").mkdir()
    before = _files(folder)
    assert main(["refresh-code", str(folder)]) == 1
    assert "layers.py is a folder" in capsys.readouterr().err
    assert _files(folder) == before


def test_refresh_code_keeps_the_permissions_of_the_files_it_replaces(tmp_path, capsys):
    folder = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / "decoder", folder)
    names = closure_files()
    # an older release's code: its modeling file imports the others, which makes them the code the checkpoint ships
    older = "".join(f"from .{Path(name).stem} import *\n" for name in names[:-1])
    for name in names[:-1]:
        (folder / name).write_text(older)
        (folder / name).chmod(0o644)
    (folder / names[0]).chmod(0o640)
    (folder / "config.json").chmod(0o664)
    umask = os.umask(0o022)
    try:
        assert main(["refresh-code", str(folder)]) == 0
    finally:
        os.umask(umask)
    modes = {name: mode for name, (_, mode) in _files(folder).items()}
    assert modes["config.json"] == 0o664
    assert modes[names[0]] == 0o640
    assert {modes[name] for name in names[1:-1]} == {0o644}
    assert modes[names[-1]] == 0o644  # a file the folder did not have: what open() gives under the umask
    assert not [name for name in modes if name.startswith(".")]  # no temporary file left


MALFORMED = {
    "a list auto_map": ("auto_map", ["modeling_hf_attention.HFAttentionForCausalLM"], "a list"),
    "a string auto_map": ("auto_map", "modeling_hf_attention.HFAttentionForCausalLM", "a str"),
    "an auto_map entry that is a number": ("auto_map", {"AutoModel": 3}, "auto_map['AutoModel']"),
    "an auto_map entry that is a dict": ("auto_map", {"AutoModel": {"x": 1}}, "auto_map['AutoModel']"),
    "a list custom_pipelines": ("custom_pipelines", [{"impl": "pipelines.X"}], "a list"),
    "a string custom_pipelines": ("custom_pipelines", "pipelines.X", "a str"),
    "a pipeline that is a string": (
        "custom_pipelines",
        {"translation": "pipelines.X"},
        "custom_pipelines['translation']",
    ),
    "a pipeline impl that is a number": ("custom_pipelines", {"translation": {"impl": 3}}, "['impl']"),
}


@pytest.mark.parametrize(("field", "value", "words"), MALFORMED.values(), ids=MALFORMED)
def test_refresh_code_names_a_malformed_field_of_config_json(tmp_path, capsys, field, value, words):
    folder = tmp_path / "checkpoint"
    shutil.copytree(FIXTURES / "decoder", folder)
    config = json.loads((folder / "config.json").read_text())
    config[field] = value
    (folder / "config.json").write_text(json.dumps(config))
    before = _files(folder)
    assert main(["refresh-code", str(folder)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"refresh-code: error: {folder / 'config.json'}: {field}" in err, err
    assert words in err, err
    assert _files(folder) == before
