"""Hunyuan's QK-norm after the rotation (`qk_norm_after_rotation`) against transformers' own attention layer
(`HunYuanDenseV1Attention`), in float32 at 1e-5:

- one layer of ours, built from our knobs (qk_norm="head", the norms moved after the rotation, q/k/v/o biases, head_dim
  24 ≠ hidden / heads, the fixed-α rotation `ntk_alpha`), with every parameter of transformers' layer randomised
  (the two norms' gains included), gives transformers' outputs on left-padded rows of a 24-token prompt and on a
  cached step after it, eager and sdpa; and the order matters: the same weights with the norms before the rotation
  (Qwen3's order) compute something else;
- the knob is off by default (a Qwen3-like config keeps its norms on the attention, with no tuning), and bad values
  are refused by name when the config is built;
- a model of ours with the knob trains a step (the norms' gains get gradients) and comes back from save_pretrained
  exactly.

The registry's tiny Hunyuan (architectures/hunyuan_v1_dense.py) runs the shared parity suite too
(tests/test_modern_parity.py, tests/test_fuzz_conversion.py).
"""

import functools
import re

import pytest
import torch
from layer_oracles import hf_form, hf_mask, one_training_step, randomised
from modern_references import generate_positions, padded_batch
from transformers import DynamicCache, HunYuanDenseV1Config
from transformers.models.hunyuan_v1_dense.modeling_hunyuan_v1_dense import (
    HunYuanDenseV1Attention,
    HunYuanDenseV1RotaryEmbedding,
)

from hf_attention import HFAttentionDecoderConfig, HFAttentionForCausalLM
from hf_attention.modeling.cache_argument import CACHE_FIELD
from hf_attention.modeling.layer_plan import build_self_attention
from hf_attention.modeling.positional import RotaryEmbedding

TOLERANCE = 1e-5
LENGTH = 24
THETA, ALPHA = 10000.0, 1000.0  # Hunyuan-7B's released rotation
SIZES = {
    "vocab_size": 128,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 24,
    "num_hidden_layers": 2,
    "intermediate_size": 96,
    "max_position_embeddings": 16,  # shorter than the prompt: the α rotation does not change with the length
    "pad_token_id": 0,
}
# Our names of transformers' two norm weights; every other name is the same.
OUR_NAMES = {"query_layernorm.weight": "tuning.q_norm.weight", "key_layernorm.weight": "tuning.k_norm.weight"}

_randomised = functools.partial(randomised, scale=0.3, gains="layernorm")
_hf_form = hf_form
_hf_mask = hf_mask


def hf_config(attn: str = "eager") -> HunYuanDenseV1Config:
    config = HunYuanDenseV1Config(
        **SIZES,
        attention_bias=True,
        rope_parameters={"rope_type": "dynamic", "alpha": ALPHA, "factor": 1.0, "rope_theta": THETA},
    )
    config._attn_implementation = attn
    return config


def our_config(attn: str = "eager", *, after_rotation: bool | None = True, **extra) -> HFAttentionDecoderConfig:
    """The same model as our knobs write it (`after_rotation` None: the knob left to its default)."""
    fields = {
        **SIZES,
        "hidden_act": "swiglu",
        "position_encoding": "rotary",
        "rope_theta": THETA,
        "rope_type": "ntk_alpha",
        "rope_scaling_options": {"alpha": ALPHA},
        "norm_position": "pre",
        "norm_type": "rmsnorm",
        "layer_norm_eps": 1e-5,
        "scale_embeddings": False,
        "attention_bias": True,
        "mlp_bias": False,
        "hidden_dropout_prob": 0.0,
        "tie_word_embeddings": False,
        "qk_norm": "head",
        "attn_implementation": attn,
    }
    if after_rotation is not None:
        fields["qk_norm_after_rotation"] = after_rotation
    return HFAttentionDecoderConfig(**{**fields, **extra})


def _ours_from(theirs: torch.nn.Module, config: HFAttentionDecoderConfig) -> torch.nn.Module:
    ours = build_self_attention(config, 0, True).eval()
    state = {OUR_NAMES.get(name, name): tensor for name, tensor in theirs.state_dict().items()}
    if not config.qk_norm_after_rotation:  # Qwen3's order: the same gains on the attention's own norms
        state = {name.replace("tuning.", ""): tensor for name, tensor in state.items()}
    ours.load_state_dict(state)
    return ours


def _outputs(theirs, ours, attn: str) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(transformers' output, ours) at the real tokens of a left-padded 24-token prompt (rows of 24, 18 and 12 real
    tokens), then of one cached token after it."""
    reference_config = hf_config(attn)
    their_rotary = HunYuanDenseV1RotaryEmbedding(reference_config)
    our_rotary = RotaryEmbedding.from_config(our_config(), bidirectional=False)
    generator = torch.Generator().manual_seed(4)
    real = torch.tensor([LENGTH, LENGTH * 3 // 4, LENGTH // 2])
    mask = (torch.arange(LENGTH)[None] >= LENGTH - real[:, None]).long()
    rows = mask.bool()
    their_cache, our_cache = DynamicCache(), DynamicCache()
    compared = []
    for step, length in enumerate((LENGTH, 1)):
        if step:
            mask = torch.cat([mask, torch.ones(3, 1, dtype=torch.long)], dim=-1)
            rows = torch.ones(3, 1, dtype=torch.bool)
        hidden = torch.randn(3, length, SIZES["hidden_size"], generator=generator)
        positions = generate_positions(mask)[:, -length:]
        allowed = _hf_mask(reference_config, hidden, mask, their_cache, positions)
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
                position_embeddings=our_rotary.rotary_tables(positions, hidden.dtype),
                cache=our_cache,
            )
        compared.append((expected[rows], output[rows]))
    return compared


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_a_layer_gives_hunyuans_attention_on_left_padded_rows_and_a_cached_step(attn):
    theirs = _randomised(HunYuanDenseV1Attention(hf_config(attn), 0))
    ours = _ours_from(theirs, our_config(attn))
    assert ours.q_norm is None and ours.tuning.q_norm is not None  # the norms wait for the rotation
    for step, (expected, output) in enumerate(_outputs(theirs, ours, attn)):
        assert (expected - output).abs().max() <= TOLERANCE, f"step {step}"


def test_the_order_matters():
    """The same weights with the norms before the rotation (Qwen3's order) compute something else: the comparison
    above sees where the norms run."""
    theirs = _randomised(HunYuanDenseV1Attention(hf_config(), 0))
    before = _ours_from(theirs, our_config(after_rotation=False))
    assert before.tuning is None and before.q_norm is not None
    for expected, output in _outputs(theirs, before, "eager"):
        assert (expected - output).abs().max() > 1e-2


def test_the_knob_is_off_by_default():
    """Left out, the per-head norms run before the rotation, on the attention (Qwen3's order): no tuning."""
    config = our_config(after_rotation=None)
    assert config.qk_norm_after_rotation is False
    attention = build_self_attention(config, 0, True)
    assert attention.tuning is None and attention.q_norm is not None


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"qk_norm": "none"}, "qk_norm_after_rotation=True moves the qk_norm='head' norms after the rotation, and "),
        ({"qk_norm": "projection"}, "qk_norm='projection': set qk_norm='head'"),
        ({"rotated_qk_norm": True}, "qk_norm_after_rotation=True and rotated_qk_norm=True"),
        (
            {"position_encoding": "alibi", "rope_type": "default", "rope_scaling_options": None},
            "qk_norm_after_rotation=True needs position_encoding='rotary'",
        ),
        ({"qk_norm_after_rotation": "yes"}, "qk_norm_after_rotation"),
    ],
)
def test_bad_values_are_refused_by_name(knobs, message):
    with pytest.raises((ValueError, TypeError), match=re.escape(message)) as error:
        our_config(**knobs)
    assert "qk_norm_after_rotation" in str(error.value)


def test_a_model_with_the_knob_trains_and_comes_back_from_save_pretrained_exactly(tmp_path):
    torch.manual_seed(0)
    model = HFAttentionForCausalLM(our_config("sdpa"))
    attention = model.model.decoder.layers[0].self_attn
    assert torch.equal(attention.tuning.q_norm.weight, torch.ones(SIZES["head_dim"]))  # a norm starts as identity
    inputs = padded_batch("hunyuan_v1_dense", LENGTH)
    one_training_step(model, inputs)
    assert attention.tuning.q_norm.weight.grad.abs().sum() > 0 and attention.tuning.k_norm.weight.grad.abs().sum() > 0
    model.save_pretrained(tmp_path)
    reloaded = HFAttentionForCausalLM.from_pretrained(tmp_path).eval()
    assert reloaded.config.qk_norm_after_rotation and reloaded.config.rope_scaling_options == {"alpha": ALPHA}
    with torch.no_grad():
        assert torch.equal(reloaded(**inputs).logits, model(**inputs).logits)
