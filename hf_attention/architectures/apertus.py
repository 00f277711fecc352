"""Apertus (Swiss AI Initiative 2025, arXiv:2509.14233): Llama with per-head QK-norm (as Qwen3), a feed-forward network
without a gate, down(act(up(x))), whose activation is the learned xIELU (`hidden_act="xielu"`: each layer's α_p and
α_n trained, its β and ε held with the weights; activations.XIELU), and Llama 3's RoPE scaling by default.

Its `up_proj` and `down_proj` are our plain network's `fc1` and `fc2`, its `act_fn`'s tensors our `act`'s. Its two
layer norms are named after their sublayers (`attention_layernorm`, `feedforward_layernorm`). transformers has no
Apertus sequence classifier (its token classifier is a decoder one, which hf-attention does not have).
"""

from transformers import ApertusConfig, ApertusForCausalLM, PretrainedConfig

from ..modeling.activations import (
    ACTIVATION_SYNONYMS,
    GATED_ACTIVATIONS,
    LEARNED_ACTIVATIONS,
    PLAIN_ACTIVATIONS,
    hidden_act_of,
)
from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionForCausalLM
from .base import Architecture, ConversionRow, activation, decoder_head
from .llama import decoder_config, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, THETA, TinyReference
from .weights import Weights, unsupported

APERTUS_NORMS = {"self_attn_norm": "attention_layernorm", "mlp_norm": "feedforward_layernorm"}
# xIELU's tensors: the learned parameters (before their softplus) and the fixed buffers, one number each per layer.
XIELU_TENSORS = ("alpha_p", "alpha_n", "beta", "eps")


def _hidden_act(c: ApertusConfig) -> str:
    """Our `hidden_act` for Apertus's (its network has no gate): xIELU, or a plain activation of ours."""
    if c.hidden_act in LEARNED_ACTIVATIONS:
        return c.hidden_act
    if hidden_act_of(c.hidden_act, gated=False) is None:
        supported = ", ".join((*LEARNED_ACTIVATIONS, *PLAIN_ACTIVATIONS, *ACTIVATION_SYNONYMS))
        raise unsupported(
            f"hidden_act={c.hidden_act!r} (Apertus's activation, without a gate; supported: {supported})",
            "choose one of the supported activations",
        )
    return activation(c.hidden_act, "hidden_act")


def to_ours(model: ApertusForCausalLM, w: Weights):
    c = model.config
    hidden_act = _hidden_act(c)  # refused by name before any weight is copied
    # The xielu_* knobs keep their defaults: transformers starts every Apertus xIELU from them (its config has no
    # such field), and the converted values are each layer's tensors, copied below.
    config = decoder_config(
        c,
        w,
        classifier=False,
        hidden_act=hidden_act,
        qk_norm="head",
        mlp_bias=False,
        **rope_knobs(dict(c.rope_parameters or {}), architecture="Apertus"),
    )
    w.copy("model.decoder.embed_tokens", "model.embed_tokens")
    for i in range(c.num_hidden_layers):
        src, dst = f"model.layers.{i}", f"model.decoder.layers.{i}"
        for name in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm"):
            w.copy(f"{dst}.self_attn.{name}", f"{src}.self_attn.{name}")
        w.copy(f"{dst}.mlp.fc1", f"{src}.mlp.up_proj")
        w.copy(f"{dst}.mlp.fc2", f"{src}.mlp.down_proj")
        w.copy(f"{dst}.mlp.act", f"{src}.mlp.act_fn", names=XIELU_TENSORS)  # (a plain activation has none)
        for ours, theirs in APERTUS_NORMS.items():
            w.copy(f"{dst}.{ours}", f"{src}.{theirs}")
    w.copy("model.decoder.norm", "model.norm")
    return decoder_head(w, config, "lm_head", classifier=False), config, {}


def _their_activation(hidden_act: str) -> str:
    """Apertus's `hidden_act` for ours: xIELU, the ACT2FN kernel of a plain one; for a gated one, its gate's (which
    Apertus runs without a gate: the comparison then names the difference)."""
    if hidden_act in LEARNED_ACTIVATIONS:
        return hidden_act
    return PLAIN_ACTIVATIONS[GATED_ACTIVATIONS.get(hidden_act, hidden_act)]


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    # ApertusConfig has no head_dim field, but its attention and rotary tables read one given to it.
    head_dim = {"head_dim": c.head_dim} if c.head_dim != c.hidden_size // c.num_attention_heads else {}
    return ApertusConfig(
        **{**reference_fields(c), "hidden_act": _their_activation(c.hidden_act)},
        attention_bias=c.attention_bias,
        rope_parameters=reference_rope(c),
        **head_dim,
    )


# Llama 3's scaling, Apertus's default, on 16-dim heads with an original length of 32: one frequency kept
# (wavelength 6.3 < 32/4), one blended (19.9), the rest divided by the factor. Biases on q/k/v/o (its option).
ROPE = {
    "rope_type": "llama3",
    "rope_theta": THETA,
    "factor": 8.0,
    "original_max_position_embeddings": 32,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
}
TINY_REFERENCES = {
    "apertus": TinyReference(
        ApertusForCausalLM,
        lambda **extra: ApertusConfig(
            **DECODER, hidden_act="xielu", attention_bias=True, rope_parameters=dict(ROPE), **extra
        ),
    )
}

ARCHITECTURE = Architecture(
    name="apertus",
    model_type="apertus",
    classes={HFAttentionForCausalLM: ApertusForCausalLM},
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("", ApertusForCausalLM),),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Apertus",
        heads="LM",
        from_hf="test_modern_parity.py, test_xielu.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams, sampling",
        llama_cpp="yes ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it",
    ),
)
