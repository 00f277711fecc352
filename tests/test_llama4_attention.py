"""Llama 4's attention ideas as knobs of ours, against transformers' Llama 4 (`Llama4TextAttention`, the masks of
`Llama4TextModel`), in float32 at 1e-5:

- chunked attention (`layer_types` "chunked_attention", `attention_chunk_size`): our masks are transformers' mask
  builder's, element for element, on a left-padded 24-token batch with chunks of 4 and at every cached step after
  it (the chunked layers' cache keeps 3 tokens); eager, sdpa and flex_attention give transformers' logits, and so
  do packed rows;
- the NoPE layers' query temperature (`attn_temperature_tuning`, `floor_scale`, `attn_scale`), which counts cache
  slots (padding included), and the weightless norm after a rotation of adjacent pairs (`rotated_qk_norm`,
  `rope_interleave`): one layer of each kind gives transformers' layer, before and after a cached token;
- a model of ours built with the knobs trains a step and comes back from save_pretrained exactly; bad values are
  refused by name, and so is a Llama 4 with mixture-of-experts layers.

The registry's tiny Llama 4 (architectures/llama4.py) also runs the shared parity suite (tests/test_modern_parity.py).
"""

import functools

import pytest
import torch
from layer_oracles import hf_form, hf_mask, left_padded_mask, one_training_step, randomised
from modern_references import forward_inputs, generate_positions, max_difference_at_real, padded_batch, reference
from transformers import DynamicCache, Llama4ForCausalLM, Llama4TextConfig
from transformers.masking_utils import create_causal_mask, create_chunked_causal_mask
from transformers.models.llama4.modeling_llama4 import Llama4TextAttention, Llama4TextRotaryEmbedding

from hf_attention import HFAttentionDecoderConfig, HFAttentionEncoderConfig, HFAttentionForCausalLM, flex, from_hf
from hf_attention.modeling.cache_argument import CACHE_FIELD, cache_of
from hf_attention.modeling.layer_plan import build_self_attention
from hf_attention.modeling.positional import RotaryEmbedding
from hf_attention.modeling.query_key_tuning import query_temperatures

TOLERANCE = 1e-5
CHUNK, FLOOR, ATTN_SCALE = 4, 2, 0.5
LENGTH = 24  # six chunks of 4
STEPS = 6  # cached steps after the prompt: the chunk boundary is crossed in each row
SIZES = {
    "vocab_size": 128,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "num_hidden_layers": 4,
    "pad_token_id": 0,
}
CHUNKED, NOPE = 0, 3  # a chunked layer that rotates; the global layer without rotation

_randomised = functools.partial(randomised, scale=0.3)
_left_padded_mask = left_padded_mask
_hf_form = hf_form


def hf_config(attn: str = "eager", **extra) -> Llama4TextConfig:
    """Llama 4 text at the tiny sizes: three chunked layers that rotate, a fourth global NoPE one, every layer
    dense."""
    fields = {
        **SIZES,
        "intermediate_size": 96,
        "intermediate_size_mlp": 80,
        "moe_layers": [],
        "no_rope_layers": [1, 1, 1, 0],
        "attention_chunk_size": CHUNK,
        "floor_scale": FLOOR,
        "attn_scale": ATTN_SCALE,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
    }
    config = Llama4TextConfig(**{**fields, **extra})
    config._attn_implementation = attn
    return config


def our_config(attn: str = "eager", **extra) -> HFAttentionDecoderConfig:
    """The same model as our knobs write it."""
    return HFAttentionDecoderConfig(
        **SIZES,
        intermediate_size=80,
        hidden_act="swiglu",
        position_encoding="rotary",
        rope_theta=10000.0,
        norm_position="pre",
        norm_type="rmsnorm",
        scale_embeddings=False,
        attention_bias=False,
        hidden_dropout_prob=0.0,
        tie_word_embeddings=False,
        layer_types=["chunked_attention"] * 3 + ["full_attention"],
        attention_chunk_size=CHUNK,
        nope_layers=[NOPE],
        rope_interleave=True,
        rotated_qk_norm=True,
        attn_temperature_tuning=True,
        floor_scale=FLOOR,
        attn_scale=ATTN_SCALE,
        attn_implementation=attn,
        **extra,
    )


def test_the_converter_reads_llama4s_knobs():
    config = from_hf(reference("llama4")).config
    expected = our_config()
    for field in (
        "layer_types",
        "attention_chunk_size",
        "nope_layers",
        "rope_interleave",
        "rotated_qk_norm",
        "attn_temperature_tuning",
        "floor_scale",
        "attn_scale",
        "intermediate_size",
        "hidden_act",
        "layer_norm_eps",
    ):
        assert getattr(config, field) == getattr(expected, field), field


def test_the_temperature_is_transformers_formula():
    """1 + 0.5·log(1 + ⌊(p + 1) / 2⌋): slots 0, 1, 2, 3 → ⌊·⌋ = 0, 1, 1, 2."""
    scales = query_temperatures(torch.arange(4), FLOOR, ATTN_SCALE)
    expected = 1 + ATTN_SCALE * torch.log1p(torch.tensor([0.0, 1.0, 1.0, 2.0]))
    torch.testing.assert_close(scales, expected, rtol=0, atol=1e-7)


# ---------------------------------------------------------------------------------------------------------------------
# One layer against Llama4TextAttention


def _hf_mask(config, layer: int, hidden, attention_mask, cache, position_ids, cache_layer=None) -> torch.Tensor:
    """transformers' (B, 1, T, S) boolean mask of `layer` (its mask builder, as Llama4TextModel calls it; sized by
    the cache's layer `cache_layer`, by default the first of the mask's kind)."""
    builder = create_chunked_causal_mask if config.layer_types[layer] == "chunked_attention" else create_causal_mask
    return hf_mask(config, hidden, attention_mask, cache, position_ids, builder=builder, layer_idx=cache_layer)


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("layer", [CHUNKED, NOPE], ids=["chunked_rope_layer", "nope_layer"])
def test_a_layer_gives_llama4_attention_on_left_padded_rows_and_a_cached_step(layer, attn):
    """The rotation of adjacent pairs and the weightless norm (layer 0), the temperature of the cache slots (layer 3,
    whose step after the 24-token prompt reads slot 24, padding included): transformers' layer's outputs."""
    reference_config = hf_config(attn)
    theirs = _randomised(Llama4TextAttention(reference_config, layer))
    ours = build_self_attention(our_config(attn), layer, True).eval()
    ours.load_state_dict(theirs.state_dict())  # q/k/v/o_proj: the same names
    assert (ours.tuning.norm_eps is not None) == (layer == CHUNKED) == (ours.tuning.temperature is None)
    their_rotary = Llama4TextRotaryEmbedding(reference_config)
    our_rotary = RotaryEmbedding.from_config(our_config(), bidirectional=False)
    generator = torch.Generator().manual_seed(4)
    mask = _left_padded_mask()
    rows = mask.bool()
    their_cache, our_cache = DynamicCache(), DynamicCache()
    for step, length in enumerate((LENGTH, 1)):  # the prompt, then one cached token
        if step:
            mask = torch.cat([mask, torch.ones(3, 1, dtype=torch.long)], dim=-1)
            rows = torch.ones(3, 1, dtype=torch.bool)
        hidden = torch.randn(3, length, 64, generator=generator)
        positions = generate_positions(mask)[:, -length:]
        allowed = _hf_mask(reference_config, layer, hidden, mask, their_cache, positions, cache_layer=layer)
        with torch.no_grad():
            expected, _ = theirs(
                hidden,
                position_embeddings=their_rotary(hidden, positions),
                attention_mask=_hf_form(allowed, attn),
                **{CACHE_FIELD: their_cache},
            )
            output, _ = ours(
                hidden,
                attention_mask=allowed,
                position_embeddings=None if layer == NOPE else our_rotary.rotary_tables(positions, hidden.dtype),
                cache=our_cache,
            )
        assert (expected[rows] - output[rows]).abs().max() <= TOLERANCE, f"step {step}"


# ---------------------------------------------------------------------------------------------------------------------
# The whole model: masks, cached steps, backends


class _MaskRecorder:
    """The attention mask each of `layers` of our model receives, call by call."""

    def __init__(self, model, layers):
        self.masks = {layer: [] for layer in layers}
        self.handles = [
            model.model.decoder.layers[layer].self_attn.register_forward_pre_hook(self._hook(layer), with_kwargs=True)
            for layer in layers
        ]

    def _hook(self, layer):
        def record(module, args, kwargs):
            self.masks[layer].append(kwargs["attention_mask"])

        return record

    def remove(self):
        for handle in self.handles:
            handle.remove()


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_chunk_masks_and_cached_steps_give_transformers_logits(attn):
    """A left-padded 24-token prompt (rows of 24, 18, 12 real tokens: their chunks start at their first real token),
    then 6 cached steps, one token each: at every call our chunked and global layers receive transformers' masks,
    element for element, and the logits at the real tokens are transformers'."""
    ref = reference("llama4", attn)
    ours = from_hf(ref)
    recorder = _MaskRecorder(ours, (CHUNKED, NOPE))
    inputs = padded_batch("llama4", LENGTH)
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    their_cache, our_cache = DynamicCache(config=ref.config), None
    generator = torch.Generator().manual_seed(5)
    expected_masks = {CHUNKED: [], NOPE: []}
    try:
        for step in range(STEPS + 1):
            positions = generate_positions(mask)[:, -ids.shape[1] :]
            embeds = ref.model.embed_tokens(ids)
            for layer in (CHUNKED, NOPE):
                expected_masks[layer].append(_hf_mask(ref.config, layer, embeds, mask, their_cache, positions))
            with torch.no_grad():
                theirs = ref(input_ids=ids, attention_mask=mask, position_ids=positions, **{CACHE_FIELD: their_cache})
                mine = ours(input_ids=ids, attention_mask=mask, position_ids=positions, cache=our_cache)
            our_cache = cache_of(mine) if hasattr(mine, "cache") else mine.past_key_values
            real = mask[:, -ids.shape[1] :]
            assert max_difference_at_real(theirs.logits, mine.logits, real) <= TOLERANCE, f"step {step}"
            ids = torch.randint(3, 128, (3, 1), generator=generator)
            mask = torch.cat([mask, torch.ones(3, 1, dtype=torch.long)], dim=-1)
    finally:
        recorder.remove()
    for layer in (CHUNKED, NOPE):
        for step, (expected, received) in enumerate(zip(expected_masks[layer], recorder.masks[layer], strict=True)):
            assert received is not None and received.shape == expected.shape, (layer, step)
            assert torch.equal(received.expand_as(expected), expected), (layer, step)
    # the chunked layers' cache is transformers' chunked (sliding) layer, keeping C - 1 tokens
    kept = [layer.keys.shape[-2] for layer in our_cache.layers]
    assert kept == [CHUNK - 1] * 3 + [LENGTH + STEPS]


def test_the_chunk_matters():
    """Without its chunks the model computes something else: the comparisons above see the chunk mask."""
    ours = from_hf(reference("llama4"))
    config = HFAttentionDecoderConfig(**{**ours.config.to_dict(), "layer_types": None, "attention_chunk_size": None})
    unchunked = HFAttentionForCausalLM(config).eval()  # every layer full
    unchunked.load_state_dict(ours.state_dict())
    inputs = forward_inputs("llama4")
    with torch.no_grad():
        chunked, full = ours(**inputs).logits, unchunked(**inputs).logits
    assert max_difference_at_real(chunked, full, inputs["attention_mask"]) > 0.1


def test_flex_attention_gives_transformers_logits_and_tokens(monkeypatch):
    """The chunk condition as FlexAttention's mask function (unfused FlexAttention, as in test_flex_attention.py):
    the padded batch's logits and greedy tokens of 12 cached steps."""
    monkeypatch.setattr(flex, "COMPILE", False)
    ref = reference("llama4")
    ours = from_hf(ref)
    ours.set_attn_implementation("flex_attention")
    inputs = forward_inputs("llama4")
    with torch.no_grad():
        difference = max_difference_at_real(ref(**inputs).logits, ours(**inputs).logits, inputs["attention_mask"])
    assert difference <= TOLERANCE
    prompt = padded_batch("llama4", 12, seed=1)
    settings = {"max_new_tokens": 12, "min_new_tokens": 12, "do_sample": False}
    assert torch.equal(ours.generate(**prompt, **settings), ref.generate(**prompt, **settings))


def test_packed_rows_chunk_each_text_from_its_start():
    """Texts packed into one row (positions restart, no attention mask, no cache): each text sees only itself and its
    chunks start at its first token, as transformers counts them from the positions (the temperature still counts
    the row's slots, as transformers' does)."""
    ref = reference("llama4")
    ours = from_hf(ref)
    lengths = (10, 7, 7)
    ids = torch.randint(3, 128, (1, sum(lengths)), generator=torch.Generator().manual_seed(6))
    positions = torch.cat([torch.arange(length) for length in lengths])[None]
    with torch.no_grad():
        theirs = ref(input_ids=ids, position_ids=positions, use_cache=False).logits
        mine = ours(input_ids=ids, position_ids=positions, use_cache=False).logits
    assert (theirs - mine).abs().max() <= TOLERANCE


# ---------------------------------------------------------------------------------------------------------------------
# A model of our own with the knobs


def test_a_model_with_the_knobs_trains_and_comes_back_from_save_pretrained_exactly(tmp_path):
    torch.manual_seed(0)
    model = HFAttentionForCausalLM(our_config("sdpa"))
    layers = model.model.decoder.layers
    assert [layer.self_attn.tuning.norm_eps is not None for layer in layers] == [True, True, True, False]
    assert layers[NOPE].self_attn.tuning.temperature == (FLOOR, ATTN_SCALE)
    inputs = padded_batch("llama4", LENGTH)
    one_training_step(model, inputs)
    model.save_pretrained(tmp_path)
    reloaded = HFAttentionForCausalLM.from_pretrained(tmp_path).eval()
    for field in ("attention_chunk_size", "layer_types", "rope_interleave", "rotated_qk_norm", "floor_scale"):
        assert getattr(reloaded.config, field) == getattr(model.config, field), field
    with torch.no_grad():
        assert torch.equal(reloaded(**inputs).logits, model(**inputs).logits)


# ---------------------------------------------------------------------------------------------------------------------
# Refusals


ROTARY = {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 4, "position_encoding": "rotary"}


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"attention_chunk_size": 0}, "attention_chunk_size"),
        ({"attention_chunk_size": 4.0}, "attention_chunk_size"),
        ({"layer_types": ["chunked_attention"] * 4}, "attention_chunk_size"),
        ({"attention_chunk_size": 4, "layer_types": ["full_attention"] * 4}, "attention_chunk_size"),
        ({"attention_chunk_size": 4, "sliding_window": 8}, "attention_chunk_size"),
        ({"layer_types": ["chunked", "full_attention", "full_attention", "full_attention"]}, "layer_types"),
        ({"rope_interleave": 1}, "rope_interleave"),
        ({"rope_interleave": True, "position_encoding": "alibi"}, "rope_interleave"),
        ({"rotated_qk_norm": "yes"}, "rotated_qk_norm"),
        ({"rotated_qk_norm": True, "position_encoding": "sinusoidal"}, "rotated_qk_norm"),
        ({"rotated_qk_norm": True, "nope_layers": [0, 1, 2, 3]}, "rotated_qk_norm"),
        ({"attn_temperature_tuning": True}, "attn_temperature_tuning"),
        ({"attn_temperature_tuning": True, "nope_layers": [3], "floor_scale": 0}, "floor_scale"),
        ({"attn_temperature_tuning": True, "nope_layers": [3], "floor_scale": 2.5}, "floor_scale"),
        ({"attn_temperature_tuning": True, "nope_layers": [3], "attn_scale": -0.1}, "attn_scale"),
        ({"floor_scale": 2}, "floor_scale"),
        ({"attn_scale": 0.5}, "attn_scale"),
        (
            {"kv_lora_rank": 12, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "attention_chunk_size": 4},
            "attention_chunk_size",
        ),
        (
            {"kv_lora_rank": 12, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "rotated_qk_norm": True},
            "rotated_qk_norm",
        ),
    ],
)
def test_bad_knob_values_are_refused_by_name(fields, field):
    with pytest.raises(ValueError, match=rf"\b{field}\b"):
        HFAttentionDecoderConfig(**{**ROTARY, **fields})


def test_an_encoder_refuses_chunked_layers_by_name():
    with pytest.raises(ValueError, match="chunked_attention"):
        HFAttentionEncoderConfig(**ROTARY, layer_types=["chunked_attention"] * 4)


def test_a_llama4_with_experts_every_other_layer_converts():
    """Llama 4's experts (a top-1 router whose sigmoid scales the expert's input, a shared expert), on the layers
    `interleave_moe_layer_step` derives when `moe_layers` is None: the other layers stay dense, the logits are the
    reference's; a router perturbing its inputs in training is refused by name."""
    torch.manual_seed(0)
    config = hf_config(moe_layers=None, interleave_moe_layer_step=2, num_local_experts=2)
    model = Llama4ForCausalLM(config).eval()
    ours = from_hf(model)
    assert ours.config.feed_forward_types() == ["dense", "mixture_of_experts"] * (config.num_hidden_layers // 2)
    ids = torch.randint(3, config.vocab_size, (2, 12))
    with torch.no_grad():
        assert (ours(input_ids=ids).logits - model(input_ids=ids).logits).abs().max() <= 1e-5
    model.config.router_jitter_noise = 0.1
    with pytest.raises(ValueError, match=r"Llama4TextConfig.router_jitter_noise=0.1"):
        from_hf(model)
