"""Ministral 3's scale of the queries by position (`llama_4_scaling_beta`, `llama_4_scaling_length`;
query_key_tuning.py) against transformers' Ministral 3 (`get_llama_4_attn_scale`, `Ministral3Attention`,
`Ministral3ForCausalLM`), in float32 at 1e-5:

- the scale is transformers' formula, bit for bit, at the position ids (p, not Llama 4's p + 1);
- one layer gives `Ministral3Attention`'s output (every weight random) on left-padded rows, then on cached steps that
  cross steps of the scale, with eager and sdpa: the new tokens are scaled at their own positions;
- the whole model, cached step by step, gives transformers' logits, the same as our full forward pass over the same
  tokens and as our own positions (from the attention mask, without position_ids); packed rows scale each text from
  its own start; without the scale the logits differ;
- every layer scales (a NoPE layer too); a model of ours built with the knob trains a step and comes back from
  save_pretrained exactly; `to_hf` writes it as Ministral 3 and refuses it as Mistral by name;
- bad values are refused by name, in our config and in a Ministral 3 config being converted.

The registry's tiny Ministral 3 (architectures/ministral3.py) also runs the shared parity suite
(tests/test_modern_parity.py).
"""

import functools

import pytest
import torch
from layer_oracles import hf_form, hf_mask, left_padded_mask, one_training_step, randomised
from modern_references import forward_inputs, generate_positions, max_difference_at_real, padded_batch, reference
from transformers import DynamicCache, Ministral3Config, Ministral3ForCausalLM
from transformers.models.ministral3.modeling_ministral3 import (
    Ministral3Attention,
    Ministral3RotaryEmbedding,
    get_llama_4_attn_scale,
)

from hf_attention import HFAttentionDecoderConfig, HFAttentionForCausalLM, from_hf
from hf_attention.architectures.ministral3 import ROPE
from hf_attention.conversion.to_hf import to_hf
from hf_attention.modeling.cache_argument import CACHE_FIELD, cache_of
from hf_attention.modeling.layer_plan import build_self_attention
from hf_attention.modeling.positional import RotaryEmbedding
from hf_attention.modeling.query_key_tuning import position_query_scales

TOLERANCE = 1e-5
BETA, LENGTH_STEP = ROPE["llama_4_scaling_beta"], ROPE["original_max_position_embeddings"]  # 0.5 and 4
LENGTH = 24  # positions 0 … 23: six steps of the scale
STEPS = 6  # cached one-token steps after the prompt
YARN = {key: ROPE[key] for key in ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow")}
YARN |= {key: ROPE[key] for key in ("mscale", "mscale_all_dim")}
SIZES = {
    "vocab_size": 128,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 24,
    "num_hidden_layers": 2,
    "intermediate_size": 96,
    "max_position_embeddings": 64,
    "pad_token_id": 0,
}

_randomised = functools.partial(randomised, scale=0.1)
_left_padded_mask = left_padded_mask
_hf_form = hf_form
_hf_mask = hf_mask


def hf_config(attn: str = "eager") -> Ministral3Config:
    """Ministral 3 at the tiny sizes, with the registry's rotation and scale (YaRN, β 0.5, steps of 4 positions)."""
    config = Ministral3Config(**SIZES, rope_parameters=dict(ROPE))
    config._attn_implementation = attn
    return config


def our_config(attn: str = "eager", **extra) -> HFAttentionDecoderConfig:
    """The same model as our knobs write it."""
    fields = {
        **SIZES,
        "hidden_act": "swiglu",
        "position_encoding": "rotary",
        "rope_theta": ROPE["rope_theta"],
        "rope_type": "yarn",
        "rope_scaling_options": dict(YARN),
        "norm_position": "pre",
        "norm_type": "rmsnorm",
        "layer_norm_eps": 1e-5,
        "scale_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        "hidden_dropout_prob": 0.0,
        "tie_word_embeddings": False,
        "llama_4_scaling_beta": BETA,
        "llama_4_scaling_length": LENGTH_STEP,
        "attn_implementation": attn,
    }
    return HFAttentionDecoderConfig(**{**fields, **extra})


def test_the_scale_is_transformers_formula_at_the_position_ids():
    """1 + 0.5·ln(1 + ⌊p / 4⌋): 1 for p < 4, then a step every 4 positions (p itself: p = 3 is still 1, where Llama
    4's temperature, counting p + 1, would step), bit for bit as transformers computes it."""
    positions = torch.arange(41)[None].expand(3, -1)
    ours = position_query_scales(positions, BETA, LENGTH_STEP)
    theirs = get_llama_4_attn_scale(positions, BETA, LENGTH_STEP)[:, 0, :, 0]
    assert torch.equal(ours, theirs)
    assert torch.equal(ours[0, :4], torch.ones(4)) and ours[0, 4] > 1
    assert torch.equal(ours[0, 4:8], ours[0, 4].expand(4)) and ours[0, 8] > ours[0, 4]


def test_the_converter_reads_the_knobs():
    config = from_hf(reference("ministral3")).config
    expected = our_config(sliding_window=8)
    for field in (
        "llama_4_scaling_beta",
        "llama_4_scaling_length",
        "rope_type",
        "rope_scaling_options",
        "sliding_window",
        "head_dim",
        "attention_bias",
        "hidden_act",
    ):
        assert getattr(config, field) == getattr(expected, field), field


# ---------------------------------------------------------------------------------------------------------------------
# One layer against Ministral3Attention


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_a_layer_gives_ministral3_attention_on_left_padded_rows_and_cached_steps(attn):
    """A left-padded 24-token prompt, then 6 cached tokens (positions 24 … 29 in the full row, 18 … 23 and 12 … 17
    in the padded ones: each crosses a step of the scale), each call with generate()'s position ids: transformers'
    layer's outputs at the real tokens."""
    reference_config = hf_config(attn)
    theirs = _randomised(Ministral3Attention(reference_config, 0))  # layer 0: the cache slot the mask reads
    ours = build_self_attention(our_config(attn), 0, True).eval()
    ours.load_state_dict(theirs.state_dict())  # q/k/v/o_proj: the same names
    assert ours.tuning.position_scaling == (BETA, LENGTH_STEP)
    their_rotary = Ministral3RotaryEmbedding(reference_config)
    our_rotary = RotaryEmbedding.from_config(our_config(), bidirectional=False)
    generator = torch.Generator().manual_seed(4)
    mask = _left_padded_mask()
    rows = mask.bool()
    their_cache, our_cache = DynamicCache(), DynamicCache()
    for step in range(STEPS + 1):
        length = LENGTH if step == 0 else 1
        if step:
            mask = torch.cat([mask, torch.ones(3, 1, dtype=torch.long)], dim=-1)
            rows = torch.ones(3, 1, dtype=torch.bool)
        hidden = torch.randn(3, length, 64, generator=generator)
        positions = generate_positions(mask)[:, -length:]
        allowed = _hf_mask(reference_config, hidden, mask, their_cache, positions)
        with torch.no_grad():
            expected, _ = theirs(
                hidden,
                position_embeddings=their_rotary(hidden, positions),
                attention_mask=_hf_form(allowed, attn),
                position_ids=positions,
                **{CACHE_FIELD: their_cache},
            )
            output, _ = ours(
                hidden,
                attention_mask=allowed,
                position_embeddings=our_rotary.rotary_tables(positions, hidden.dtype),
                cache=our_cache,
                position_ids=positions,
            )
        assert (expected[rows] - output[rows]).abs().max() <= TOLERANCE, f"step {step}"
        if step == 0:
            prompt = (hidden, positions, allowed, expected, rows)
    # the same layer without the scale: the prompt's outputs differ (the comparison above sees the scale)
    hidden, positions, allowed, expected, rows = prompt
    ours.tuning = None
    with torch.no_grad():
        tables = our_rotary.rotary_tables(positions, hidden.dtype)
        unscaled, _ = ours(hidden, attention_mask=allowed, position_embeddings=tables)
    assert (expected[rows] - unscaled[rows]).abs().max() > 1e-2


def test_a_layer_refuses_to_run_without_positions():
    """The scale needs the tokens' position ids (the stack gives them): a layer called without them says so."""
    ours = build_self_attention(our_config(), 0, True).eval()
    hidden = torch.randn(1, 5, 64)
    tables = RotaryEmbedding.from_config(our_config(), bidirectional=False).rotary_tables(torch.arange(5)[None], None)
    with pytest.raises(ValueError, match="llama_4_scaling_beta"), torch.no_grad():
        ours(hidden, position_embeddings=tables)


# ---------------------------------------------------------------------------------------------------------------------
# The whole model


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_cached_steps_scale_the_new_tokens_as_the_full_forward_does(attn):
    """The registry's tiny Ministral 3 (windows of 8 on every layer): a left-padded 24-token prompt, then 6 cached
    one-token steps. At every call our logits at the real tokens are transformers' (given generate()'s position ids)
    and our own without position_ids (counted from the attention mask); the last step's are those of our full
    forward pass over all 30 columns."""
    ref = reference("ministral3", attn)
    ours = from_hf(ref)
    inputs = padded_batch("ministral3", LENGTH)
    ids, mask = inputs["input_ids"], inputs["attention_mask"]
    every_id = ids
    their_cache, our_cache, own_cache = DynamicCache(config=ref.config), None, None
    generator = torch.Generator().manual_seed(5)
    for step in range(STEPS + 1):
        positions = generate_positions(mask)[:, -ids.shape[1] :]
        with torch.no_grad():
            theirs = ref(input_ids=ids, attention_mask=mask, position_ids=positions, **{CACHE_FIELD: their_cache})
            mine = ours(input_ids=ids, attention_mask=mask, position_ids=positions, cache=our_cache)
            own = ours(input_ids=ids, attention_mask=mask, cache=own_cache)
        our_cache, own_cache = cache_of(mine), cache_of(own)
        real = mask[:, -ids.shape[1] :]
        assert max_difference_at_real(theirs.logits, mine.logits, real) <= TOLERANCE, f"step {step}"
        assert max_difference_at_real(mine.logits, own.logits, real) <= TOLERANCE, f"step {step}"
        last_logits = mine.logits[:, -1]
        ids = torch.randint(3, 128, (3, 1), generator=generator)
        every_id = torch.cat([every_id, ids], dim=-1)
        mask = torch.cat([mask, torch.ones(3, 1, dtype=torch.long)], dim=-1)
    with torch.no_grad():
        full = ours(input_ids=every_id[:, :-1], attention_mask=mask[:, :-1]).logits
    assert (full[:, -1] - last_logits).abs().max() <= TOLERANCE


def test_packed_rows_scale_each_text_from_its_start():
    """Texts packed into one row (positions restart, no attention mask, no cache): each text's queries scale by its
    own positions, as transformers' do."""
    ref = reference("ministral3")
    ours = from_hf(ref)
    lengths = (10, 7, 7)
    ids = torch.randint(3, 128, (1, sum(lengths)), generator=torch.Generator().manual_seed(6))
    positions = torch.cat([torch.arange(length) for length in lengths])[None]
    with torch.no_grad():
        theirs = ref(input_ids=ids, position_ids=positions, use_cache=False).logits
        mine = ours(input_ids=ids, position_ids=positions, use_cache=False).logits
    assert (theirs - mine).abs().max() <= TOLERANCE


def test_the_scale_matters():
    """Without the scale (β 0 in transformers' config) the model computes something else: the comparisons above see
    it; and transformers' β 0 converts to no scale at all."""
    ref = reference("ministral3")
    unscaled_config = Ministral3Config(**ref.config.to_dict())
    unscaled_config.rope_parameters = {**ref.config.rope_parameters, "llama_4_scaling_beta": 0.0}
    unscaled = Ministral3ForCausalLM(unscaled_config).eval()
    unscaled.load_state_dict(ref.state_dict())
    converted = from_hf(unscaled)
    assert converted.config.llama_4_scaling_beta is None
    assert all(layer.self_attn.tuning is None for layer in converted.model.decoder.layers)
    inputs = forward_inputs("ministral3")
    with torch.no_grad():
        scaled, plain = ref(**inputs).logits, unscaled(**inputs).logits
        assert max_difference_at_real(plain, converted(**inputs).logits, inputs["attention_mask"]) <= TOLERANCE
    assert max_difference_at_real(scaled, plain, inputs["attention_mask"]) > 1e-2


# ---------------------------------------------------------------------------------------------------------------------
# A model of our own with the knob


def test_every_layer_scales_a_nope_layer_too():
    """Ministral 3 scales the queries of every layer after the rotation; a layer of ours without rotation is scaled
    too (the scale reads positions, not the rotation), and without the knob no layer has a tuning."""
    model = HFAttentionForCausalLM(our_config(num_hidden_layers=3, nope_layers=[1]))
    assert [layer.self_attn.tuning.position_scaling for layer in model.model.decoder.layers] == [(BETA, 4)] * 3
    plain = HFAttentionForCausalLM(our_config(llama_4_scaling_beta=None, llama_4_scaling_length=16384))
    assert all(layer.self_attn.tuning is None for layer in plain.model.decoder.layers)


def test_a_model_with_the_knob_trains_and_comes_back_from_save_pretrained_exactly(tmp_path):
    torch.manual_seed(0)
    model = HFAttentionForCausalLM(our_config("sdpa", rope_type="default", rope_scaling_options={}))
    inputs = padded_batch("ministral3", LENGTH)
    one_training_step(model, inputs)
    model.save_pretrained(tmp_path)
    reloaded = HFAttentionForCausalLM.from_pretrained(tmp_path).eval()
    for field in ("llama_4_scaling_beta", "llama_4_scaling_length"):
        assert getattr(reloaded.config, field) == getattr(model.config, field), field
    with torch.no_grad():
        assert torch.equal(reloaded(**inputs).logits, model(**inputs).logits)


def test_to_hf_writes_the_scale_as_ministral3_and_refuses_it_elsewhere():
    """A model of ours with plain RoPE and the scale: Ministral 3 holds it (its `original_max_position_embeddings`
    is then the scale's length alone), with our logits; Mistral has no such scale and is refused by name."""
    torch.manual_seed(1)
    ours = HFAttentionForCausalLM(our_config(rope_type="default", rope_scaling_options={})).eval()
    exported = to_hf(ours, "ministral3")
    assert isinstance(exported, Ministral3ForCausalLM)
    assert exported.config.rope_parameters["llama_4_scaling_beta"] == BETA
    assert exported.config.rope_parameters["original_max_position_embeddings"] == LENGTH_STEP
    inputs = forward_inputs("ministral3")
    with torch.no_grad():
        difference = max_difference_at_real(exported(**inputs).logits, ours(**inputs).logits, inputs["attention_mask"])
    assert difference <= TOLERANCE
    with pytest.raises(ValueError, match="llama_4_scaling_beta"):
        to_hf(ours, "mistral")


def test_to_hf_names_a_scale_length_other_than_yarns():
    """transformers' Ministral 3 reads one `original_max_position_embeddings` for YaRN and for the scale: a model of
    ours whose two lengths differ cannot be written, and the difference is named."""
    ours = HFAttentionForCausalLM(our_config(llama_4_scaling_length=8))
    with pytest.raises(ValueError, match="llama_4_scaling_length"):
        to_hf(ours, "ministral3")


# ---------------------------------------------------------------------------------------------------------------------
# Refusals


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"llama_4_scaling_beta": -0.1}, "llama_4_scaling_beta"),
        ({"llama_4_scaling_beta": "0.1"}, "llama_4_scaling_beta"),
        ({"llama_4_scaling_beta": float("nan")}, "llama_4_scaling_beta"),
        ({"llama_4_scaling_beta": 0.1, "llama_4_scaling_length": 0}, "llama_4_scaling_length"),
        ({"llama_4_scaling_beta": 0.1, "llama_4_scaling_length": 2.5}, "llama_4_scaling_length"),
        ({"llama_4_scaling_length": 8}, "llama_4_scaling_length"),
        (
            {"kv_lora_rank": 12, "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "llama_4_scaling_beta": 0.1},
            "llama_4_scaling_beta",
        ),
    ],
)
def test_bad_knob_values_are_refused_by_name(fields, field):
    base = {"hidden_size": 32, "num_attention_heads": 4, "num_hidden_layers": 2, "position_encoding": "rotary"}
    with pytest.raises(ValueError, match=rf"\b{field}\b"):
        HFAttentionDecoderConfig(**{**base, **fields})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"llama_4_scaling_beta": None}, r"rope_parameters has no 'llama_4_scaling_beta'"),
        ({"llama_4_scaling_beta": -0.5}, r"rope_parameters\['llama_4_scaling_beta'\]=-0.5"),
        ({"original_max_position_embeddings": 0}, r"rope_parameters\['original_max_position_embeddings'\]=0"),
    ],
)
def test_a_ministral3_config_the_scale_cannot_read_is_refused_by_name(change, message):
    """β or the length missing (transformers' own forward pass fails), or a value our knob does not take: refused in
    the source's words before any weight is copied."""
    model = Ministral3ForCausalLM(hf_config()).eval()
    model.config.rope_parameters = {**model.config.rope_parameters, **change}
    with pytest.raises(ValueError, match=message):
        from_hf(model)
