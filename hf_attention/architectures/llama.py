"""Llama: a pre-norm RMSNorm decoder with rotary positions, a gated feed-forward network, grouped-query attention."""

from transformers import LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification, PretrainedConfig

from ..activations import GATED_ACTIVATIONS
from ..configuration_hf_attention import HFAttentionConfigBase, HFAttentionDecoderConfig
from ..modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, activation, decoder_head, our_labels, our_token_ids, their_labels, their_token_ids
from .weights import Weights, tied, unsupported


def to_ours(model: LlamaForCausalLM | LlamaForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, LlamaForSequenceClassification)
    rope = dict(getattr(c, "rope_parameters", None) or {})
    if rope.get("rope_type", "default") != "default":
        raise unsupported(f"Llama rope_parameters rope_type={rope['rope_type']!r} (only 'default' RoPE)")
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        raise unsupported(f"Llama partial_rotary_factor={rope['partial_rotary_factor']}")
    config = HFAttentionDecoderConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads,
        head_dim=c.head_dim,
        intermediate_size=c.intermediate_size,
        hidden_act=activation(c.hidden_act, "hidden_act", gated=True),
        max_position_embeddings=c.max_position_embeddings,
        position_encoding="rotary",
        rope_theta=rope.get("rope_theta", getattr(c, "rope_theta", 10000.0)),
        norm_position="pre",
        norm_type="rmsnorm",
        scale_embeddings=False,
        final_norm=True,
        attention_bias=c.attention_bias,
        mlp_bias=c.mlp_bias,
        layer_norm_eps=c.rms_norm_eps,
        hidden_dropout_prob=0.0,
        attention_dropout=c.attention_dropout,
        initializer_range=c.initializer_range,
        tie_word_embeddings=tied(w, "lm_head.weight", "model.embed_tokens.weight", c.tie_word_embeddings),
        **their_token_ids(c),
        **(their_labels(c) if classifier else {}),
    )
    w.copy("model.decoder.embed_tokens", "model.embed_tokens")
    for i in range(c.num_hidden_layers):
        src, dst = f"model.layers.{i}", f"model.decoder.layers.{i}"
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            w.copy(f"{dst}.self_attn.{name}", f"{src}.self_attn.{name}")
        for name in ("gate_proj", "up_proj", "down_proj"):
            w.copy(f"{dst}.mlp.{name}", f"{src}.mlp.{name}")
        w.copy(f"{dst}.self_attn_norm", f"{src}.input_layernorm")
        w.copy(f"{dst}.mlp_norm", f"{src}.post_attention_layernorm")
    w.copy("model.decoder.norm", "model.norm")
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    return LlamaConfig(
        vocab_size=c.vocab_size,
        hidden_size=c.hidden_size,
        num_hidden_layers=c.num_hidden_layers,
        num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads,
        head_dim=c.head_dim,
        intermediate_size=c.intermediate_size,
        hidden_act=GATED_ACTIVATIONS.get(c.hidden_act, "silu"),
        max_position_embeddings=c.max_position_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": float(c.rope_theta)},
        attention_bias=c.attention_bias,
        mlp_bias=c.mlp_bias,
        rms_norm_eps=c.layer_norm_eps,
        attention_dropout=c.attention_dropout,
        initializer_range=c.initializer_range,
        tie_word_embeddings=c.tie_word_embeddings,
        **our_token_ids(c),
        **our_labels(c),
    )


# Rotary positions: attention sees only the distances between tokens, so no table, and left padding changes nothing.
ARCHITECTURE = Architecture(
    name="llama",
    model_type="llama",
    classes={
        HFAttentionForCausalLM: LlamaForCausalLM,
        HFAttentionDecoderForSequenceClassification: LlamaForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", LlamaForSequenceClassification), ("", LlamaForCausalLM)),
)
