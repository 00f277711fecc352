"""Qwen3.5 (text): three Gated DeltaNet layers to one full-attention layer. The full layers are Qwen3's attention with
an output gate (q_proj also gives a sigmoid gate per head on the attention output), QK-norm and a quarter of each head
rotated; every norm but Gated DeltaNet's own is the (1 + w) RMSNorm. Its multimodal RoPE rotates text-only positions
as plain 1-D RoPE (the three position rows are equal), which is what a text model of ours computes."""

from transformers import (
    PretrainedConfig,
    Qwen3_5ForCausalLM,
    Qwen3_5TextConfig,
    Qwen3_5TextForSequenceClassification,
)

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import LLAMA_NORMS, copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, TinyReference
from .weights import Weights, unsupported

# Gated DeltaNet's parameters, under the same names in Qwen3.5's `linear_attn` and our mixer (gated_deltanet.py).
LINEAR_ATTENTION_LINEARS = ("in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "conv1d", "out_proj", "norm")
LINEAR_SIZES = (
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)


def copy_linear_attention(w: Weights, layer_types: list[str]) -> None:
    """Each `linear_attention` layer's Gated DeltaNet (`linear_attn` in transformers; our layer's mixer,
    `self_attn`)."""
    for i, kind in enumerate(layer_types):
        if kind != "linear_attention":
            continue
        src, dst = f"model.layers.{i}.linear_attn", f"model.decoder.layers.{i}.self_attn"
        for name in LINEAR_ATTENTION_LINEARS:
            w.copy(f"{dst}.{name}", f"{src}.{name}", names=("weight",))
        w.copy(dst, src, names=("dt_bias", "A_log"))


def linear_knobs(c: PretrainedConfig) -> dict:
    """The Gated DeltaNet sizes, for a model that has such layers (the config keeps its defaults otherwise)."""
    if "linear_attention" not in (c.layer_types or []):
        return {}
    if c.hidden_act not in ("silu", "swish"):
        raise unsupported(
            f"{type(c).__name__}.hidden_act={c.hidden_act!r} with linear_attention layers (transformers' Gated "
            "DeltaNet runs the feed-forward network's activation after its convolution; ours runs SiLU there)"
        )
    return {name: getattr(c, name) for name in LINEAR_SIZES}


def to_ours(model: Qwen3_5ForCausalLM | Qwen3_5TextForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, Qwen3_5TextForSequenceClassification)
    rope = dict(c.rope_parameters or {})
    # how multimodal RoPE splits the frequencies among (time, height, width) positions: text positions are equal in
    # all three, so every split rotates them as 1-D RoPE
    rope.pop("mrope_section", None)
    rope.pop("mrope_interleaved", None)
    types = list(c.layer_types)
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        qk_norm="head",
        norm_type="offset_rmsnorm",
        attention_output_gate=True,
        layer_types=types,
        **linear_knobs(c),
        **rope_knobs(rope, architecture="Qwen3.5", partial=True),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS, qk_norm=True)
    copy_linear_attention(w, types)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    sizes = {name: getattr(c, name, None) for name in LINEAR_SIZES}
    return Qwen3_5TextConfig(
        **reference_fields(c),
        head_dim=c.head_dim,
        attention_bias=c.attention_bias,
        layer_types=c.attention_types(),
        rope_parameters=reference_rope(c, partial=True),
        **{name: value for name, value in sizes.items() if value is not None},
    )


# Three linear layers to one full (Qwen3.5's pattern), 4 heads of 16 (4 of them rotated), Gated DeltaNet with 2 key
# heads of 8 shared by 4 value heads of 8. 24 tokens: the chunked form's one chunk (its 64) holds them.
TINY_REFERENCES = {
    "qwen3_5": TinyReference(
        Qwen3_5ForCausalLM,
        lambda **extra: Qwen3_5TextConfig(
            **{**DECODER, "num_hidden_layers": 4},
            head_dim=16,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=8,
            linear_value_head_dim=8,
            **extra,
        ),
    )
}
TINY_REFERENCES["qwen3_5_classifier"] = TINY_REFERENCES["qwen3_5"].classifier(Qwen3_5TextForSequenceClassification)

ARCHITECTURE = Architecture(
    name="qwen3_5",
    model_type="qwen3_5_text",
    classes={
        HFAttentionForCausalLM: Qwen3_5ForCausalLM,
        HFAttentionDecoderForSequenceClassification: Qwen3_5TextForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(
        ("ForSequenceClassification", Qwen3_5TextForSequenceClassification),
        ("", Qwen3_5ForCausalLM),
    ),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Qwen3.5",
        detail=" text",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams",
        llama_cpp="M-RoPE sections that fit `head_dim` ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it",
    ),
)
