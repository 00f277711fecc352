"""Builders: a config → the leaf modules of a stack (positional scheme, attention, layers, norms).

Notation: E model dim.

The only place besides the models that reads a config to build modules: leaves take typed keyword arguments, except
the attention module, which keeps the config to look up its backend by name at each call
(`config._attn_implementation`), as transformers' attention modules do. The variant registries say which class a name
means (`scores.SCORES`, `positional.POSITIONAL_ENCODINGS`, `norms.NORMS`, `activations.py`), and a positional scheme's
`from_config` picks the fields it needs.
"""

from torch import nn

from .attention import MultiHeadAttention
from .configuration_hf_attention import HFAttentionConfigBase
from .layers import DecoderLayer, EncoderLayer, make_feed_forward
from .norms import make_norm
from .positional import NO_POSITIONAL_ENCODING, POSITIONAL_ENCODINGS, PositionalEncoding
from .scores import make_score


def build_norm(config: HFAttentionConfigBase) -> nn.Module:
    """The configured norm (`norm_type`) over the model width."""
    return make_norm(config.norm_type, config.hidden_size, config.layer_norm_eps)


def build_positional(config: HFAttentionConfigBase, *, bidirectional: bool) -> PositionalEncoding | None:
    """The positional-encoding module named by `config.position_encoding` (None for "none")."""
    if config.position_encoding == NO_POSITIONAL_ENCODING:
        return None
    return POSITIONAL_ENCODINGS[config.position_encoding].from_config(config, bidirectional=bidirectional)


def build_attention(config: HFAttentionConfigBase, layer_idx: int, *, is_causal: bool, is_cross: bool):
    """A MultiHeadAttention with the configured score, heads and biases."""
    score, scaling = make_score(config.attention_score, num_heads=config.num_attention_heads, head_dim=config.head_dim)
    return MultiHeadAttention(
        hidden_size=config.hidden_size,
        num_heads=config.num_attention_heads,
        num_kv_heads=config.num_key_value_heads,
        head_dim=config.head_dim,
        bias=config.attention_bias,
        dropout=config.attention_dropout,
        is_causal=is_causal,
        is_cross_attention=is_cross,
        layer_idx=layer_idx,
        score=score,
        scaling=scaling,
        config=config,  # read for its attention implementation only, at each call
    )


def build_layer(config: HFAttentionConfigBase, layer_idx: int, *, is_decoder: bool, has_cross_attention: bool):
    """An EncoderLayer, or a DecoderLayer (causal; with cross-attention in the encoder-decoder family)."""

    common = {
        "self_attn": build_attention(config, layer_idx, is_causal=is_decoder, is_cross=False),
        "self_attn_norm": build_norm(config),
        "mlp": make_feed_forward(
            config.hidden_act,
            hidden_size=config.hidden_size,
            intermediate_size=config.intermediate_size,
            bias=config.mlp_bias,
            dropout=config.activation_dropout,
        ),
        "mlp_norm": build_norm(config),
        "norm_position": config.norm_position,
        "dropout": config.hidden_dropout_prob,
    }
    if not is_decoder:
        return EncoderLayer(**common)
    if has_cross_attention:
        common["cross_attn"] = build_attention(config, layer_idx, is_causal=False, is_cross=True)
        common["cross_attn_norm"] = build_norm(config)
    return DecoderLayer(**common)
