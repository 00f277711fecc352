"""Round trips through `from_hf`, `to_hf` and `hf-attention export` that used to fail, or to write what the source
did not say: exports that transformers could not run, candidates that transformers could not build, models without
values (the meta device) or wrapped in adapters, repeated NoPE layers, and SmolLM3's NoPE interval.

The oracle is transformers itself: tiny references built from their configs with random weights (modern_references),
and the exported folders loaded by its Auto classes.
"""

import json

import pytest
import torch
from conftest import tiny_config
from modern_references import LENGTH, NUM_LABELS, VOCAB, WINDOW, perturb
from test_to_hf import LLAMA
from transformers import (
    AutoModelForCausalLM,
    AutoModelForSequenceClassification,
    Gemma2Config,
    Gemma2ForCausalLM,
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    Gemma3TextForSequenceClassification,
    LlamaConfig,
    LlamaForCausalLM,
    MinistralConfig,
    MinistralForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
    SmolLM3Config,
    SmolLM3ForCausalLM,
)

from hf_attention import HFAttentionForCausalLM, from_hf
from hf_attention.architectures import gemma3
from hf_attention.architectures.llama import longrope_factors
from hf_attention.architectures.tiny import DECODER, ORIGINAL_LENGTH, THETA
from hf_attention.commands.cli import main as cli
from hf_attention.conversion import to_hf as to_hf_module
from hf_attention.conversion.to_hf import to_hf


def _reference(model_class, config) -> torch.nn.Module:
    """A tiny reference of `model_class` built from `config`, every weight moved off its initialisation."""
    model = model_class._from_config(config, attn_implementation="eager")
    return perturb(model.float(), seed=7).eval()


def _ids(batch: int = 2) -> torch.Tensor:
    """A batch of real tokens (no special token), longer than every window of the tiny references (8)."""
    return torch.randint(3, VOCAB, (batch, LENGTH), generator=torch.Generator().manual_seed(11))


def _logits(model, ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids).logits


def _export(model, folder, capsys, *extra: str) -> tuple[int, str]:
    """`hf-attention export` of `model` saved as an hf-attention checkpoint: (exit status, its error lines)."""
    source = folder / "ours"
    model.save_pretrained(source)
    capsys.readouterr()
    status = cli(["export", str(source), str(folder / "export"), *extra])
    # (transformers' progress bars share stderr)
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hf-attention export: error:")]
    return status, "\n".join(errors)


# ---------------------------------------------------------------------------------------------------------------------
# Windowed architectures whose every layer is full

FULL = ["full_attention"] * DECODER["num_hidden_layers"]
WINDOWED = {"head_dim": 16, "sliding_window": WINDOW}
ALL_FULL = {
    # name → (class, its config with a window that no layer uses)
    "gemma3": (Gemma3ForCausalLM, lambda: Gemma3TextConfig(**DECODER, **WINDOWED, layer_types=FULL)),
    "gemma3_classifier": (
        Gemma3TextForSequenceClassification,
        lambda: Gemma3TextConfig(**DECODER, **WINDOWED, layer_types=FULL, num_labels=NUM_LABELS),
    ),
    "gemma2": (Gemma2ForCausalLM, lambda: Gemma2Config(**DECODER, **WINDOWED, layer_types=FULL)),
    "ministral": (MinistralForCausalLM, lambda: MinistralConfig(**DECODER, **WINDOWED, layer_types=FULL)),
    # the window starts above the last layer
    "qwen2": (
        Qwen2ForCausalLM,
        lambda: Qwen2Config(**DECODER, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=2),
    ),
    "qwen3": (
        Qwen3ForCausalLM,
        lambda: Qwen3Config(**DECODER, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=2),
    ),
    "mistral": (MistralForCausalLM, lambda: MistralConfig(**DECODER, sliding_window=None)),
    "smollm3": (
        SmolLM3ForCausalLM,
        lambda: SmolLM3Config(**DECODER, use_sliding_window=True, sliding_window=WINDOW, layer_types=FULL),
    ),
}
# The architectures whose attention masks always need a window, used by a layer or not.
NEEDS_A_WINDOW = {"gemma3", "gemma2", "ministral"}


@pytest.mark.parametrize("name", list(ALL_FULL))
def test_an_export_without_sliding_layers_runs_in_transformers(name, tmp_path, capsys):
    model_class, config = ALL_FULL[name]
    reference = _reference(model_class, config())
    assert "sliding_attention" not in (getattr(reference.config, "layer_types", None) or [])
    ours = from_hf(reference)
    ids = _ids()
    torch.testing.assert_close(_logits(to_hf(ours), ids), _logits(reference, ids), rtol=0, atol=1e-5)

    status, error = _export(ours, tmp_path, capsys)
    assert status == 0, error
    written = json.loads((tmp_path / "export" / "config.json").read_text())
    if name.split("_")[0] in NEEDS_A_WINDOW:  # a window no layer reads, but one its masks can be built with
        assert isinstance(written["sliding_window"], int) and written["sliding_window"] > 0
    auto = AutoModelForSequenceClassification if "classifier" in name else AutoModelForCausalLM
    loaded = auto.from_pretrained(tmp_path / "export").eval()
    assert type(loaded) is type(reference)
    torch.testing.assert_close(_logits(loaded, ids), _logits(reference, ids), rtol=0, atol=1e-5)
    # and it reads back as our model: no window
    back = from_hf(loaded)
    assert back.config.sliding_window is None and back.config.layer_types is None


def test_an_export_that_transformers_cannot_run_is_refused_and_leaves_nothing(monkeypatch, tmp_path, capsys):
    """The check of every export: the folder is loaded by transformers and run before it is swapped in. Gemma 3
    without a window (what the export wrote before it wrote an idle one) saves, and fails on every input."""
    model_class, config = ALL_FULL["gemma3"]
    ours = from_hf(_reference(model_class, config()))
    monkeypatch.setattr(gemma3, "IDLE_WINDOW", None)
    status, error = _export(ours, tmp_path, capsys)
    assert status == 1
    assert len(error.splitlines()) == 1, error
    assert error.startswith("hf-attention export: error: export: the gemma3_text checkpoint written does not run")
    assert "sliding_window" in error and "Nothing was written" in error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["ours"]  # no destination, no hidden leftover


# ---------------------------------------------------------------------------------------------------------------------
# `to="auto"` with candidates that transformers cannot build

# LongRoPE with head_dim 8 where hidden / heads is 16: its factors (one per rotated pair) fit 8-dim heads only, and
# transformers' RoPE code fails building a candidate that derives head_dim from the width (Qwen2).
LONGROPE = {
    "rope_type": "longrope",
    "rope_theta": THETA,
    "original_max_position_embeddings": ORIGINAL_LENGTH,
    "factor": 4.0,
    **longrope_factors(4),
}


def _longrope_reference(model_class):
    return _reference(model_class, model_class.config_class(**DECODER, head_dim=8, rope_parameters=LONGROPE))


@pytest.mark.parametrize("model_class", [LlamaForCausalLM, MistralForCausalLM, Qwen3ForCausalLM])
def test_auto_writes_the_remembered_architecture_without_building_the_others(
    model_class, monkeypatch, tmp_path, capsys
):
    reference = _longrope_reference(model_class)
    ours = from_hf(reference)
    tried = []
    build = to_hf_module._try

    def recorded(model, architecture, reference_class):
        tried.append(architecture)
        return build(model, architecture, reference_class)

    with monkeypatch.context() as patch:
        patch.setattr(to_hf_module, "_try", recorded)
        exported = to_hf(ours, "auto")
    assert tried == [ours.config.converted_from]
    assert type(exported) is model_class
    ids = _ids()
    torch.testing.assert_close(_logits(exported, ids), _logits(reference, ids), rtol=0, atol=1e-5)
    status, error = _export(ours, tmp_path, capsys)
    assert status == 0, error


def test_auto_skips_a_candidate_that_cannot_be_built():
    """Without the remembered architecture, the registry's order puts Qwen2 (which cannot be built here) before
    Qwen3 (the match)."""
    reference = _longrope_reference(Qwen3ForCausalLM)
    ours = from_hf(reference)
    ours.config.converted_from = None
    exported = to_hf(ours, "auto")
    assert type(exported) is Qwen3ForCausalLM
    ids = _ids()
    torch.testing.assert_close(_logits(exported, ids), _logits(reference, ids), rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match=r"cannot be written as qwen2: its model cannot be built"):
        to_hf(ours, "qwen2")


def test_when_nothing_matches_the_unbuildable_candidates_say_why(tmp_path, capsys):
    knobs = {
        **LLAMA,
        "hidden_size": 64,
        "head_dim": 8,
        "rope_type": "longrope",
        "rope_scaling_options": {
            key: value for key, value in LONGROPE.items() if key not in ("rope_type", "rope_theta")
        },
        "embedding_norm": True,  # no decoder architecture has one
    }
    model = HFAttentionForCausalLM(tiny_config("decoder", **knobs)).eval()
    with pytest.raises(ValueError) as raised:
        to_hf(model, "auto")
    message = str(raised.value)
    assert "qwen2: its model cannot be built from this config (RuntimeError" in message, message
    assert "embedding_norm=True (llama needs False)" in message and "Nothing was written" in message
    status, error = _export(model, tmp_path, capsys)
    assert status == 1 and len(error.splitlines()) == 1, error
    assert error.startswith("hf-attention export: error: to_hf: this HFAttentionForCausalLM matches none of")
    assert not (tmp_path / "export").exists()


# ---------------------------------------------------------------------------------------------------------------------
# Models without values, and adapters


def test_a_reference_on_the_meta_device_is_refused_by_name():
    from accelerate import init_empty_weights

    config = LlamaConfig(**DECODER)
    with torch.device("meta"):
        on_meta = LlamaForCausalLM(config)
    with init_empty_weights():  # parameters on meta, buffers (the rotary frequencies) where they were
        empty = LlamaForCausalLM(config)
    for model in (on_meta, empty):
        with pytest.raises(ValueError, match=r"from_hf: the weights of this LlamaForCausalLM are on the meta device"):
            from_hf(model)


def test_a_model_of_ours_on_the_meta_device_is_refused_by_name():
    with torch.device("meta"):
        model = HFAttentionForCausalLM(tiny_config("decoder", position_encoding="rotary", norm_type="rmsnorm"))
    with pytest.raises(ValueError, match=r"to_hf: the weights of this HFAttentionForCausalLM are on the meta device"):
        to_hf(model, "llama")


def test_a_peft_model_is_refused_with_the_call_that_merges_it():
    import peft  # (a test dependency; hf_attention itself never imports it)

    base = _reference(LlamaForCausalLM, LlamaConfig(**DECODER))
    # init_lora_weights=False: B is random too, so that the merged weights differ from the base's
    adapted = peft.get_peft_model(
        base, peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    )
    with pytest.raises(ValueError, match=r"call `model = model\.merge_and_unload\(\)` first") as raised:
        from_hf(adapted)
    assert "LlamaForCausalLM" in str(raised.value)
    ids = _ids()
    expected = _logits(adapted, ids)
    merged = from_hf(adapted.merge_and_unload())
    torch.testing.assert_close(_logits(merged, ids), expected, rtol=0, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------------------
# Config values that come back as given


@pytest.mark.parametrize("value", [[0, 0], [1, 0, 1]])
def test_repeated_nope_layers_are_refused(value):
    with pytest.raises(ValueError, match=r"nope_layers=\[.*\] names layers? [01].* more than once; give each layer"):
        tiny_config("decoder", position_encoding="rotary", nope_layers=value)
    config = tiny_config("decoder", position_encoding="rotary", nope_layers=[1])
    with pytest.raises(ValueError, match=r"nope_layers=\[1, 1\] names layer 1 more than once"):
        config.nope_layers = [1, 1]
    # the checks that were there stay
    with pytest.raises(ValueError, match=r"nope_layers=\[-1\] must be a list of layer indices"):
        tiny_config("decoder", position_encoding="rotary", nope_layers=[-1])
    with pytest.raises(ValueError, match=r"nope_layers=\[2\] names layers that do not exist"):
        tiny_config("decoder", position_encoding="rotary", nope_layers=[2])


@pytest.mark.parametrize(("interval", "layers"), [(1, 2), (2, 4), (3, 6), (4, 6)])
def test_smollm3_gives_back_its_nope_interval(interval, layers):
    config = SmolLM3Config(**{**DECODER, "num_hidden_layers": layers}, no_rope_layer_interval=interval)
    reference = _reference(SmolLM3ForCausalLM, config)
    exported = to_hf(from_hf(reference))
    assert exported.config.no_rope_layer_interval == interval
    assert exported.config.no_rope_layers == reference.config.no_rope_layers
    ids = _ids()
    torch.testing.assert_close(_logits(exported, ids), _logits(reference, ids), rtol=0, atol=1e-5)
