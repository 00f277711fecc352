"""Builders: a config → the leaf modules of a stack (positional scheme, attention, norms); the layers that hold them
are put together by layer_plan.py.

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
from .norms import make_norm
from .per_head_norm import PerHeadNorm
from .positional import NO_POSITIONAL_ENCODING, POSITIONAL_ENCODINGS, PositionalEncoding
from .scores import make_score


def build_norm(config: HFAttentionConfigBase, dim: int | None = None) -> nn.Module:
    """The configured norm (`norm_type`, `norm_bias`) over the model width, or over `dim` values."""
    return make_norm(
        config.norm_type, dim or config.hidden_size, config.layer_norm_eps, bias=getattr(config, "norm_bias", True)
    )


def build_per_head_norm(config: HFAttentionConfigBase, heads: int) -> PerHeadNorm:
    """The configured norm over each of `heads` heads' head_dim values, with a gain (and bias) per head."""
    bias = getattr(config, "norm_bias", True)
    return PerHeadNorm(config.norm_type, heads, config.head_dim, config.layer_norm_eps, bias=bias)


def build_positional(config: HFAttentionConfigBase, *, bidirectional: bool) -> PositionalEncoding | None:
    """The positional-encoding module named by `config.position_encoding` (None for "none")."""
    if config.position_encoding == NO_POSITIONAL_ENCODING:
        return None
    return POSITIONAL_ENCODINGS[config.position_encoding].from_config(config, bidirectional=bidirectional)


def build_attention(config: HFAttentionConfigBase, layer_idx: int, *, is_causal: bool, is_cross: bool):
    """A MultiHeadAttention with the configured score, heads, biases, QK-norm, score cap, sinks and output gate."""
    score, scaling = make_score(config.attention_score, num_heads=config.num_attention_heads, head_dim=config.head_dim)
    if config.query_pre_attn_scalar is not None:  # Gemma: q·k / √s with s chosen apart from the head width
        scaling = config.query_pre_attn_scalar**-0.5
    if config.attention_multiplier is not None:  # µP (Yang et al. 2022; Granite): q·k times m itself, e.g. 1/D
        scaling = config.attention_multiplier
    query_norm = key_norm = None
    # (after the rotation, Hunyuan's, they are the layer plan's QueryKeyTuning's: query_key_tuning.py)
    if config.qk_norm != "none" and not is_cross and not getattr(config, "qk_norm_after_rotation", False):
        if config.qk_norm == "per_head":  # Cohere: a gain of each head's own, over the projection (per_head_norm.py)
            query_norm = build_per_head_norm(config, config.num_attention_heads)
            key_norm = build_per_head_norm(config, config.num_key_value_heads)
        else:
            each = config.qk_norm == "head"
            query_norm = build_norm(config, config.head_dim if each else config.num_attention_heads * config.head_dim)
            key_norm = build_norm(config, config.head_dim if each else config.num_key_value_heads * config.head_dim)
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
        output_bias=config.attention_output_bias,
        query_norm=query_norm,
        key_norm=key_norm,
        qk_norm=config.qk_norm,
        softcap=config.attn_logit_softcapping,
        # (knobs of the encoder and decoder families: an encoder-decoder config has neither)
        sinks=getattr(config, "attention_sinks", False),
        output_gate=getattr(config, "attention_output_gate", False),
    )
