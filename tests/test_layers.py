"""Norms, feed-forward networks and encoder/decoder layers against their written-out formulas.

Notation: B batch, T target length, S source length, E model dim, F feed-forward dim.
"""

import math

import pytest
import torch
from reference import naive
from torch import nn

from hf_attention.modeling.attention import MultiHeadAttention, eager_attention_forward, sdpa_attention_forward
from hf_attention.modeling.layers import DecoderLayer, EncoderLayer, FeedForward, GatedFeedForward, make_feed_forward
from hf_attention.modeling.masks import causal_mask
from hf_attention.modeling.norms import RMSNorm, make_norm

E, F, H = 16, 32, 4

# Activations written from their definitions, not taken from transformers.activations.
ACTIVATIONS = {
    "relu": lambda x: x.clamp(min=0),
    "gelu": lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2))),
    "gelu_new": lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "silu": lambda x: x / (1 + torch.exp(-x)),
}


# --- norms --------------------------------------------------------------------------------------------------------


def test_rms_norm_matches_formula():
    norm = RMSNorm(E, eps=1e-6)
    with torch.no_grad():
        norm.weight.normal_()
    x = torch.randn(2, 3, E) * 3
    torch.testing.assert_close(norm(x).double(), naive.rms_norm(x, norm.weight.detach(), 1e-6), atol=1e-5, rtol=1e-5)


def test_rms_norm_keeps_half_precision_inputs_stable():
    norm = RMSNorm(E, eps=1e-6).half()
    x = torch.randn(2, 3, E) * 300  # x² overflows fp16 (max 65504): the statistics must be float32
    output = norm(x.half())
    assert output.dtype == torch.float16 and torch.isfinite(output).all()
    torch.testing.assert_close(
        output.double(), naive.rms_norm(x.half().float(), norm.weight.float(), 1e-6), atol=1e-2, rtol=1e-2
    )


def test_layer_norm_matches_formula():
    norm = make_norm("layernorm", E, eps=1e-5)
    assert isinstance(norm, nn.LayerNorm) and norm.eps == 1e-5
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    x = torch.randn(2, 3, E) * 2 + 1
    expected = naive.layer_norm(x, norm.weight.detach(), norm.bias.detach(), 1e-5)
    torch.testing.assert_close(norm(x).double(), expected, atol=1e-5, rtol=1e-5)


def test_make_norm_builds_rmsnorm():
    norm = make_norm("rmsnorm", E, eps=1e-3)
    assert isinstance(norm, RMSNorm) and norm.eps == 1e-3


# --- feed-forward -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_feed_forward_matches_formula(activation):
    mlp = make_feed_forward(activation, hidden_size=E, intermediate_size=F, bias=True, dropout=0.0)
    assert isinstance(mlp, FeedForward)
    x = torch.randn(2, 3, E)
    # FFN(x) = act(x W₁ + b₁) W₂ + b₂
    hidden = ACTIVATIONS[activation](x @ mlp.fc1.weight.T + mlp.fc1.bias)
    expected = hidden @ mlp.fc2.weight.T + mlp.fc2.bias
    torch.testing.assert_close(mlp(x), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(("hidden_act", "gate"), [("swiglu", "silu"), ("geglu", "gelu")])
@pytest.mark.parametrize("bias", [False, True])
def test_gated_feed_forward_matches_formula(hidden_act, gate, bias):
    mlp = make_feed_forward(hidden_act, hidden_size=E, intermediate_size=F, bias=bias, dropout=0.0)
    assert isinstance(mlp, GatedFeedForward)
    x = torch.randn(2, 3, E)

    def linear(layer: nn.Linear, inputs: torch.Tensor) -> torch.Tensor:
        return inputs @ layer.weight.T + (layer.bias if bias else 0.0)

    # (act(x W_gate) ⊙ x W_up) W_down, Shazeer 2020
    expected = linear(mlp.down_proj, ACTIVATIONS[gate](linear(mlp.gate_proj, x)) * linear(mlp.up_proj, x))
    torch.testing.assert_close(mlp(x), expected, atol=1e-5, rtol=1e-5)


def test_feed_forward_dropout_only_in_training():
    mlp = FeedForward(hidden_size=E, intermediate_size=F, activation="relu", dropout=0.5)
    x = torch.randn(2, 3, E)
    mlp.eval()
    torch.testing.assert_close(mlp(x), mlp.fc2(mlp.fc1(x).relu()))
    mlp.train()
    assert not torch.allclose(mlp(x), mlp.fc2(mlp.fc1(x).relu()))


# --- encoder and decoder layers -----------------------------------------------------------------------------------


def _attention(**kwargs) -> MultiHeadAttention:
    return MultiHeadAttention(hidden_size=E, num_heads=H, num_kv_heads=2, head_dim=E // H, **kwargs)


def _norms(norm_type: str):
    norms = [make_norm(norm_type, E, eps=1e-5) for _ in range(3)]
    with torch.no_grad():
        for norm in norms:  # non-trivial gains (and shifts) so that a swapped norm shows
            for parameter in norm.parameters():
                parameter.normal_()
    return norms


def _encoder_layer(norm_position: str, norm_type: str = "layernorm") -> EncoderLayer:
    attention_norm, mlp_norm, _ = _norms(norm_type)
    return EncoderLayer(
        self_attn=_attention(),
        mlp=make_feed_forward("gelu", hidden_size=E, intermediate_size=F, bias=True, dropout=0.0),
        self_attn_norm=attention_norm,
        mlp_norm=mlp_norm,
        norm_position=norm_position,
    ).eval()


@pytest.mark.parametrize("norm_type", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_encoder_layer_equals_written_out_equations(norm_position, norm_type):
    layer = _encoder_layer(norm_position, norm_type)
    x = torch.randn(2, 5, E)
    mask = torch.ones(2, 1, 1, 5, dtype=torch.bool)
    mask[1, ..., 3:] = False

    def attend(h: torch.Tensor) -> torch.Tensor:
        return layer.self_attn(h, attention_mask=mask, attention_function=eager_attention_forward)[0]

    if norm_position == "pre":  # x + Sub(Norm(x))
        h = x + attend(layer.self_attn_norm(x))
        expected = h + layer.mlp(layer.mlp_norm(h))
    else:  # Norm(x + Sub(x))
        h = layer.self_attn_norm(x + attend(x))
        expected = layer.mlp_norm(h + layer.mlp(h))
    output, weights = layer(x, attention_mask=mask, attention_function=eager_attention_forward)
    torch.testing.assert_close(output, expected)
    assert weights.shape == (2, H, 5, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, H, 5))
    sdpa_output, no_weights = layer(x, attention_mask=mask, attention_function=sdpa_attention_forward)
    assert no_weights is None
    torch.testing.assert_close(sdpa_output, expected, atol=1e-5, rtol=1e-5)


def test_pre_and_post_norm_differ():
    post = _encoder_layer("post")
    pre = _encoder_layer("pre")
    pre.load_state_dict(post.state_dict())
    x = torch.randn(1, 4, E)
    assert not torch.allclose(pre(x)[0], post(x)[0])


def test_encoder_layer_runs_with_the_default_backend():
    layer = _encoder_layer("pre")
    x = torch.randn(1, 4, E)
    torch.testing.assert_close(layer(x)[0], layer(x, attention_function=sdpa_attention_forward)[0])


def _decoder_layer(norm_position: str, with_cross: bool = True) -> DecoderLayer:
    self_norm, mlp_norm, cross_norm = _norms("layernorm")
    cross = _attention(is_cross_attention=True, kv_input_size=12) if with_cross else None
    return DecoderLayer(
        self_attn=_attention(is_causal=True, layer_idx=0),
        cross_attn=cross,
        cross_attn_norm=cross_norm if with_cross else None,
        mlp=make_feed_forward("swiglu", hidden_size=E, intermediate_size=F, bias=False, dropout=0.0),
        self_attn_norm=self_norm,
        mlp_norm=mlp_norm,
        norm_position=norm_position,
    ).eval()


@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_decoder_layer_with_cross_attention(norm_position):
    layer = _decoder_layer(norm_position)
    x, memory = torch.randn(2, 4, E), torch.randn(2, 6, 12)
    self_mask = causal_mask(4, 4, 0, torch.device("cpu"))
    source_mask = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    source_mask[0, ..., 4:] = False  # the first source sentence has two padding tokens
    output, self_weights, cross_weights = layer(
        x,
        attention_mask=self_mask,
        encoder_hidden_states=memory,
        encoder_attention_mask=source_mask,
        attention_function=eager_attention_forward,
    )
    assert output.shape == (2, 4, E)
    assert self_weights.shape == (2, H, 4, 4) and cross_weights.shape == (2, H, 4, 6)
    # cross-attention: each row is a distribution over the allowed source keys, zero on padding
    torch.testing.assert_close(cross_weights.sum(-1), torch.ones(2, H, 4))
    assert torch.equal(cross_weights[0, ..., 4:], torch.zeros(H, 4, 2))
    # self-attention is causal
    assert torch.equal(self_weights.triu(1), torch.zeros_like(self_weights))

    def sub(module: MultiHeadAttention, h: torch.Tensor, **kwargs) -> torch.Tensor:
        return module(h, attention_function=eager_attention_forward, **kwargs)[0]

    self_attn = lambda h: sub(layer.self_attn, h, attention_mask=self_mask)
    cross_attn = lambda h: sub(layer.cross_attn, h, key_value_states=memory, attention_mask=source_mask)
    if norm_position == "pre":
        h = x + self_attn(layer.self_attn_norm(x))
        h = h + cross_attn(layer.cross_attn_norm(h))
        expected = h + layer.mlp(layer.mlp_norm(h))
    else:
        h = layer.self_attn_norm(x + self_attn(x))
        h = layer.cross_attn_norm(h + cross_attn(h))
        expected = layer.mlp_norm(h + layer.mlp(h))
    torch.testing.assert_close(output, expected)
    sdpa_output, _, no_weights = layer(
        x,
        attention_mask=self_mask,
        encoder_hidden_states=memory,
        encoder_attention_mask=source_mask,
        attention_function=sdpa_attention_forward,
    )
    assert no_weights is None
    torch.testing.assert_close(sdpa_output, expected, atol=1e-5, rtol=1e-5)


def test_decoder_layer_without_encoder_skips_cross_attention():
    with_cross = _decoder_layer("pre")
    decoder_only = _decoder_layer("pre", with_cross=False)
    decoder_only.load_state_dict(with_cross.state_dict(), strict=False)
    x = torch.randn(2, 4, E)
    output, self_weights, cross_weights = with_cross(x, attention_function=eager_attention_forward)
    assert cross_weights is None and self_weights.shape == (2, H, 4, 4)
    torch.testing.assert_close(output, decoder_only(x, attention_function=eager_attention_forward)[0])
