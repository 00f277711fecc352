"""ERNIE 4.5's rotation as knobs of ours, against transformers' `Ernie4_5` (its `apply_rotary_pos_emb`,
`Ernie4_5Attention` and `Ernie4_5ForCausalLM`):

- `rope_interleave` with `rope_in_float32`: adjacent pairs turned in float32 (float32 tables and products), the result
  cast back to the queries' dtype. The rotated queries and keys are transformers' bit for bit in float32, bf16 and
  fp16 (ours in the halves order `pair_halves` gives them); in bf16 they are not without `rope_in_float32`.
- one attention layer with every parameter randomised (biases included, `use_bias`) gives transformers' layer on a
  left-padded prompt and a cached step: float32 at 1e-5 (eager and sdpa), bf16 eager bit for bit;
- the tiny ERNIE 4.5 loaded in bf16 (as `from_pretrained(dtype=torch.bfloat16)` loads both) gives transformers'
  logits bit for bit with eager attention, and its greedy tokens;
- a model of ours with the knob trains a step, comes back from save_pretrained exactly and keeps its cache in its own
  dtype; bad values are refused by name.

The registry's tiny ERNIE 4.5 (architectures/ernie4_5.py) also runs the shared parity suite (test_modern_parity.py).
"""

import functools

import pytest
import torch
from layer_oracles import left_padded_mask, one_training_step, randomised
from modern_references import forward_inputs, generate_positions, padded_batch, reference
from transformers import DynamicCache, Ernie4_5Config, Ernie4_5ForCausalLM
from transformers.masking_utils import create_causal_mask
from transformers.models.ernie4_5.modeling_ernie4_5 import (
    Ernie4_5Attention,
    Ernie4_5RotaryEmbedding,
    apply_rotary_pos_emb,
)

from hf_attention import HFAttentionDecoderConfig, HFAttentionForCausalLM, from_hf
from hf_attention.modeling.attention import rotate_query_and_key
from hf_attention.modeling.cache_argument import CACHE_FIELD
from hf_attention.modeling.layer_plan import build_self_attention
from hf_attention.modeling.positional import RotaryEmbedding
from hf_attention.modeling.query_key_tuning import QueryKeyTuning, pair_halves

TOLERANCE = 1e-5
LENGTH = 24
SIZES = {
    "vocab_size": 128,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 24,
    "num_hidden_layers": 2,
    "intermediate_size": 96,
    "pad_token_id": 0,
}
THETA = 500000.0  # ERNIE's default base

_randomised = functools.partial(randomised, scale=0.1)
_left_padded_mask = left_padded_mask


def hf_config(attn: str = "eager") -> Ernie4_5Config:
    config = Ernie4_5Config(**SIZES, use_bias=True, rope_parameters={"rope_type": "default", "rope_theta": THETA})
    config._attn_implementation = attn
    return config


def our_config(attn: str = "eager", **extra) -> HFAttentionDecoderConfig:
    """ERNIE 4.5 as our knobs write it (what `from_hf` reads off `hf_config`)."""
    fields = {
        **SIZES,
        "hidden_act": "swiglu",
        "position_encoding": "rotary",
        "rope_theta": THETA,
        "norm_position": "pre",
        "norm_type": "rmsnorm",
        "scale_embeddings": False,
        "attention_bias": True,
        "mlp_bias": True,
        "hidden_dropout_prob": 0.0,
        "rope_interleave": True,
        "rope_in_float32": True,
        "attn_implementation": attn,
    }
    return HFAttentionDecoderConfig(**{**fields, **extra})


def test_the_converter_reads_ernies_rotation_and_bias_switch():
    for case, bias in (("ernie4_5", True), ("ernie4_5_plain", False)):
        config = from_hf(reference(case)).config
        assert config.rope_interleave and config.rope_in_float32
        assert config.attention_bias is config.mlp_bias is bias and config.attention_output_bias is None
        assert config.attention_dropout == 0.0


def test_a_partial_factor_is_read_as_ernie_reads_it():
    """ERNIE's default frequencies span the whole head whatever `partial_rotary_factor` says: converted, with the
    reference's logits. A scaling that reads the factor makes its own forward pass fail: refused by name."""
    fields = {**SIZES, "num_hidden_layers": 1, "head_dim": 16}
    rope = {"rope_type": "default", "rope_theta": THETA, "partial_rotary_factor": 0.5}
    torch.manual_seed(0)
    theirs = Ernie4_5ForCausalLM(Ernie4_5Config(**fields, rope_parameters=rope)).eval()
    ours = from_hf(theirs)
    assert ours.config.partial_rotary_factor == 1.0
    ids = torch.randint(3, 128, (2, LENGTH), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert (theirs(input_ids=ids).logits - ours(input_ids=ids).logits).abs().max() <= TOLERANCE
    linear = Ernie4_5ForCausalLM(
        Ernie4_5Config(**fields, rope_parameters={**rope, "rope_type": "linear", "factor": 2.0})
    )
    with pytest.raises(ValueError, match="ERNIE 4.5 partial_rotary_factor=0.5"):
        from_hf(linear)


# ---------------------------------------------------------------------------------------------------------------------
# The rotation alone


def _our_rotation(query, key, positions, *, float32: bool):
    """Our layers' rotation of (B, H, T, D) queries and (B, K, T, D) keys: tables as the stack makes them for the
    queries' dtype, the tuning's turns around `rotate_query_and_key`."""
    rotary = RotaryEmbedding(head_dim=query.shape[-1], base=THETA, float32_tables=float32)
    tuning = QueryKeyTuning(pair_adjacent=True, norm_eps=None, temperature=None, float32=float32)
    cos, sin = rotary.rotary_tables(positions, query.dtype)
    rotated = rotate_query_and_key(*tuning.before_rotation(query, key, query.shape[-1]), cos, sin)
    return tuning.after_rotation(*rotated, past=0, dtype=query.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_rotation_is_ernies_bit_for_bit(dtype):
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(2, 4, LENGTH, 24, generator=generator).to(dtype)
    key = torch.randn(2, 2, LENGTH, 24, generator=generator).to(dtype)
    positions = torch.arange(LENGTH).expand(2, -1) + torch.tensor([[0], [100]])  # far positions too
    cos, sin = Ernie4_5RotaryEmbedding(hf_config())(query, positions)
    expected = apply_rotary_pos_emb(query, key, cos, sin)
    got = _our_rotation(query, key, positions, float32=True)
    for theirs, ours in zip(expected, got, strict=True):
        assert ours.dtype == dtype
        assert torch.equal(pair_halves(theirs, 24), ours)  # ours hold each pair as halves: every q·k the same


def test_in_bf16_the_plain_rotation_rounds_differently():
    """Without the knob the tables and products are bf16: not ERNIE's numbers (why the knob exists)."""
    generator = torch.Generator().manual_seed(0)
    query = torch.randn(2, 4, LENGTH, 24, generator=generator).to(torch.bfloat16)
    key = torch.randn(2, 2, LENGTH, 24, generator=generator).to(torch.bfloat16)
    positions = torch.arange(LENGTH).expand(2, -1) + 100
    cos, sin = Ernie4_5RotaryEmbedding(hf_config())(query, positions)
    expected, _ = apply_rotary_pos_emb(query, key, cos, sin)
    plain, _ = _our_rotation(query, key, positions, float32=False)
    assert not torch.equal(pair_halves(expected, 24), plain)
    assert (pair_halves(expected, 24).float() - plain.float()).abs().max() > 1e-3


# ---------------------------------------------------------------------------------------------------------------------
# One layer against Ernie4_5Attention


def _layer_outputs(attn: str, dtype: torch.dtype) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """(transformers' output, ours, the real rows) for a left-padded prompt, then one cached token, in `dtype`."""
    config = hf_config(attn)
    theirs = _randomised(Ernie4_5Attention(config, 0)).to(dtype)
    ours = build_self_attention(our_config(attn), 0, True).eval()
    assert ours.tuning.float32 and ours.tuning.pair_adjacent
    ours.load_state_dict(theirs.state_dict())  # q/k/v/o_proj with their biases: the same names
    ours.to(dtype)
    their_rotary = Ernie4_5RotaryEmbedding(config)
    our_rotary = RotaryEmbedding.from_config(our_config(), bidirectional=False)
    generator = torch.Generator().manual_seed(4)
    mask = _left_padded_mask()
    rows = mask.bool()
    their_cache, our_cache = DynamicCache(), DynamicCache()
    outputs = []
    for step, length in enumerate((LENGTH, 1)):
        if step:
            mask = torch.cat([mask, torch.ones(3, 1, dtype=torch.long)], dim=-1)
            rows = torch.ones(3, 1, dtype=torch.bool)
        hidden = torch.randn(3, length, SIZES["hidden_size"], generator=generator).to(dtype)
        positions = generate_positions(mask)[:, -length:]
        sdpa = hf_config("sdpa")  # the mask builder's boolean form
        allowed = create_causal_mask(
            config=sdpa,
            inputs_embeds=hidden,
            attention_mask=mask,
            **{CACHE_FIELD: their_cache},
            position_ids=positions,
            allow_is_causal_skip=False,
        )
        their_mask = allowed
        if attn == "eager":
            their_mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
        with torch.no_grad():
            expected, _ = theirs(
                hidden,
                position_embeddings=their_rotary(hidden, positions),
                attention_mask=their_mask,
                **{CACHE_FIELD: their_cache},
            )
            output, _ = ours(
                hidden,
                attention_mask=allowed,
                position_embeddings=our_rotary.rotary_tables(positions, hidden.dtype),
                cache=our_cache,
            )
        assert output.dtype == dtype and our_cache.layers[0].keys.dtype == dtype
        outputs.append((expected, output, rows))
    return outputs


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_a_layer_gives_ernies_attention_on_left_padded_rows_and_a_cached_step(attn):
    for step, (expected, output, rows) in enumerate(_layer_outputs(attn, torch.float32)):
        assert (expected[rows] - output[rows]).abs().max() <= TOLERANCE, f"step {step}"


def test_in_bf16_a_layer_gives_ernies_attention_bit_for_bit():
    for step, (expected, output, rows) in enumerate(_layer_outputs("eager", torch.bfloat16)):
        assert torch.equal(expected[rows], output[rows]), f"step {step}"


# ---------------------------------------------------------------------------------------------------------------------
# The whole model in bf16


def test_the_tiny_ernie_in_bf16_gives_transformers_logits_bit_for_bit_and_its_tokens(tmp_path):
    """Both loaded by `from_pretrained(dtype=torch.bfloat16)` (transformers keeps its inverse frequencies float32, as
    ours are always), eager attention: the same logits to the bit, the same greedy tokens."""
    reference("ernie4_5").save_pretrained(tmp_path / "theirs")
    from_hf(reference("ernie4_5")).save_pretrained(tmp_path / "ours")
    load = {"dtype": torch.bfloat16, "attn_implementation": "eager"}
    theirs = Ernie4_5ForCausalLM.from_pretrained(tmp_path / "theirs", **load).eval()
    ours = HFAttentionForCausalLM.from_pretrained(tmp_path / "ours", **load).eval()
    assert ours.dtype == theirs.dtype == torch.bfloat16 and ours.config.rope_in_float32
    inputs = forward_inputs("ernie4_5")  # left-padded rows, positions counted from each row's first real token
    real = inputs["attention_mask"].bool()
    with torch.no_grad():
        assert torch.equal(theirs(**inputs).logits[real], ours(**inputs).logits[real])
        prompt = padded_batch("ernie4_5", LENGTH)  # generate() counts the positions itself
        greedy = {"max_new_tokens": 8, "min_new_tokens": 8, "do_sample": False}
        assert torch.equal(theirs.generate(**prompt, **greedy), ours.generate(**prompt, **greedy))


# ---------------------------------------------------------------------------------------------------------------------
# From scratch


def test_a_model_with_the_knob_trains_and_comes_back_from_save_pretrained_exactly(tmp_path):
    """The knob alone (halves, not adjacent pairs): every rotating layer takes it, the NoPE layer does not."""
    torch.manual_seed(0)
    model = HFAttentionForCausalLM(our_config("sdpa", rope_interleave=False, nope_layers=[1]))
    tunings = [layer.self_attn.tuning for layer in model.model.decoder.layers]
    assert tunings[0].float32 and not tunings[0].pair_adjacent and tunings[1] is None
    inputs = padded_batch("ernie4_5", LENGTH)
    one_training_step(model, inputs)
    model.save_pretrained(tmp_path)
    reloaded = HFAttentionForCausalLM.from_pretrained(tmp_path).eval()
    assert reloaded.config.rope_in_float32 and not reloaded.config.rope_interleave
    with torch.no_grad():
        assert torch.equal(reloaded(**inputs).logits, model(**inputs).logits)


def test_in_bf16_the_cache_and_outputs_keep_the_models_dtype():
    torch.manual_seed(0)
    model = HFAttentionForCausalLM(our_config()).to(torch.bfloat16).eval()
    inputs = padded_batch("ernie4_5", LENGTH)
    with torch.no_grad():
        output = model(**inputs, use_cache=True)
    assert output.logits.dtype == torch.bfloat16
    assert all(layer.keys.dtype == layer.values.dtype == torch.bfloat16 for layer in output.past_key_values.layers)


def test_off_by_default_and_the_plain_path_is_unchanged():
    config = HFAttentionDecoderConfig(**SIZES, position_encoding="rotary")
    assert config.rope_in_float32 is False
    assert build_self_attention(config, 0, True).tuning is None  # the plain rotation, no turns
    cos, _ = RotaryEmbedding.from_config(config, bidirectional=False).rotary_tables(
        torch.arange(4)[None], torch.bfloat16
    )
    assert cos.dtype == torch.bfloat16


# ---------------------------------------------------------------------------------------------------------------------
# Refusals


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"rope_in_float32": "yes"}, "rope_in_float32='yes' must be True or False"),
        ({"position_encoding": "sinusoidal", "rope_in_float32": True}, "rope_in_float32=True needs position_enc"),
        (
            {
                "rope_in_float32": True,
                "kv_lora_rank": 8,
                "qk_nope_head_dim": 8,
                "qk_rope_head_dim": 8,
                "num_key_value_heads": 4,
                "head_dim": None,
            },
            "rope_in_float32=True is not available with kv_lora_rank=8",
        ),
    ],
    ids=["not_a_bool", "not_rotary", "latent_attention"],
)
def test_bad_knob_values_are_refused_by_name(fields, message):
    with pytest.raises(ValueError, match=message):
        HFAttentionDecoderConfig(**{**SIZES, "position_encoding": "rotary", **fields})
