"""The layer plan: each layer is a token mixer and a feed-forward network, each chosen per layer by name from a
registry (layer_plan.TOKEN_MIXERS by `layer_types`, layer_plan.FEED_FORWARDS by `feed_forward_types`), so that a new
kind of layer is a registry entry, not a branch in the stack."""

import torch
from torch import nn

from hf_attention import HFAttentionDecoderConfig, HFAttentionForCausalLM
from hf_attention.modeling import knobs, layer_plan
from hf_attention.modeling.attention import MultiHeadAttention
from hf_attention.modeling.layer_plan import TokenMixer, plan_layers
from hf_attention.modeling.layers import FeedForward, GatedFeedForward

TINY = {
    "vocab_size": 64,
    "hidden_size": 16,
    "num_attention_heads": 2,
    "intermediate_size": 32,
    "hidden_dropout_prob": 0.0,
    "position_encoding": "rotary",
    "norm_position": "pre",
    "norm_type": "rmsnorm",
}


def test_the_plan_follows_layer_types_and_the_rotations():
    config = HFAttentionDecoderConfig(
        **TINY,
        num_hidden_layers=4,
        sliding_window=3,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        local_rope_theta=100.0,
        nope_layers=[3],
    )
    plan = plan_layers(config, 4)
    assert plan.mixers == config.layer_types and plan.feed_forwards == ["dense"] * 4
    assert plan.layers == [
        ("sliding_attention", "local"),
        ("full_attention", "global"),
        ("sliding_attention", "local"),
        ("full_attention", None),
    ]
    assert (plan.first_full, plan.first_sliding, plan.uniform) == (1, 0, False)
    model = HFAttentionForCausalLM(config)
    assert all(type(layer.self_attn) is MultiHeadAttention for layer in model.model.decoder.layers)
    assert plan_layers(HFAttentionDecoderConfig(**TINY, num_hidden_layers=2), 2).uniform
    gated = HFAttentionForCausalLM(HFAttentionDecoderConfig(**TINY, num_hidden_layers=1, hidden_act="swiglu"))
    assert isinstance(gated.model.decoder.layers[0].mlp, GatedFeedForward)  # "dense" is plain or gated by hidden_act
    gated = HFAttentionForCausalLM(HFAttentionDecoderConfig(**TINY, num_hidden_layers=1, hidden_act="swiglu"))
    assert isinstance(gated.model.decoder.layers[0].mlp, GatedFeedForward)  # "dense" is plain or gated by hidden_act


class CausalMeanMixer(nn.Module):
    """A token mixer of the test's own: each position reads the mean of the values up to it, linear attention in its
    simplest form (every query-key score 1, no softmax), under the name transformers gives linear-attention layers
    (it checks `layer_types` against its own names)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.value = nn.Linear(hidden_size, hidden_size)
        self.masks = []

    def forward(self, hidden_states, position_bias=None, *, attention_mask=None, **kwargs):
        self.masks.append(attention_mask)
        values = self.value(hidden_states).cumsum(1)
        counts = torch.arange(1, hidden_states.shape[1] + 1, dtype=values.dtype)[:, None]
        return values / counts, None


class TwoLayerPerceptron(nn.Sequential):
    """A feed-forward network of the test's own."""


def test_a_new_mixer_and_a_new_feed_forward_are_registry_entries(monkeypatch):
    monkeypatch.setitem(
        layer_plan.TOKEN_MIXERS,
        "linear_attention",
        TokenMixer(lambda config, layer_idx, is_causal: CausalMeanMixer(config.hidden_size), "full_attention"),
    )
    monkeypatch.setitem(
        layer_plan.FEED_FORWARDS,
        "perceptron",
        lambda config, layer_idx: TwoLayerPerceptron(
            nn.Linear(config.hidden_size, 8), nn.ReLU(), nn.Linear(8, config.hidden_size)
        ),
    )
    monkeypatch.setattr(knobs, "LAYER_TYPES", (*knobs.LAYER_TYPES, "linear_attention"))  # the names layer_types takes
    # (the config's choice of feed-forward networks, as a mixture-of-experts config will make it from its knobs)
    monkeypatch.setattr(HFAttentionDecoderConfig, "feed_forward_types", lambda self: ["dense", "perceptron", "dense"])
    config = HFAttentionDecoderConfig(
        **TINY, num_hidden_layers=3, layer_types=["full_attention", "linear_attention", "full_attention"]
    )
    torch.manual_seed(0)
    model = HFAttentionForCausalLM(config).eval()
    layers = model.model.decoder.layers
    assert [type(layer.self_attn) for layer in layers] == [MultiHeadAttention, CausalMeanMixer, MultiHeadAttention]
    assert [type(layer.mlp) for layer in layers] == [FeedForward, TwoLayerPerceptron, FeedForward]
    ids = torch.randint(1, 64, (2, 5))
    mask = torch.ones(2, 5, dtype=torch.long)
    mask[1, :2] = 0  # left padding: the mixer gets the stack's full-attention mask
    output = model(ids, attention_mask=mask, labels=ids, use_cache=False)
    assert torch.isfinite(output.loss) and output.logits.shape == (2, 5, 64)
    mixer = layers[1].self_attn
    assert mixer.masks[0] is not None and mixer.masks[0].shape[-2:] == (5, 5)
    # The stack runs the new kinds as it runs its own: a later token changes no earlier position's logits.
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 64
    again = model(changed, attention_mask=mask, use_cache=False).logits
    torch.testing.assert_close(again[:, :-1], output.logits[:, :-1])
    assert not torch.allclose(again[:, -1], output.logits[:, -1])
