"""Gemma 3 (text): five sliding-window layers to one global, each with a rotation of its own base (10 000 locally,
10⁶ globally, only the global one scaled); "sandwich" norms, a norm before and one after each sublayer, all RMSNorms
with gain 1 + w; QK-norm; q·k scaled by `query_pre_attn_scalar`^(-1/2); embeddings × √E; a tanh cap on the final
logits; and a tanh-GELU gate."""

from transformers import Gemma3ForCausalLM, Gemma3TextConfig, Gemma3TextForSequenceClassification, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import copy_layers, decoder_config, layer_types_of, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, WINDOW, TinyReference
from .weights import Weights, unsupported

GEMMA3_NORMS = {
    "self_attn_norm": "input_layernorm",
    "self_attn_output_norm": "post_attention_layernorm",
    "mlp_norm": "pre_feedforward_layernorm",
    "mlp_output_norm": "post_feedforward_layernorm",
}

# The window written for a model none of whose layers slides (Gemma 3's default). Gemma's attention masks always build
# a sliding-window mask, whether a layer uses it or not, and raise on any input when `sliding_window` is null; a
# value no layer reads changes nothing, and `from_hf` reads it back as no window.
IDLE_WINDOW = 4096


def to_ours(model: Gemma3ForCausalLM | Gemma3TextForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, Gemma3TextForSequenceClassification)
    if c.use_bidirectional_attention:
        raise unsupported("Gemma 3 use_bidirectional_attention=True (EmbeddingGemma's bidirectional layers)")
    full, local = dict(c.rope_parameters["full_attention"]), c.rope_parameters["sliding_attention"]
    # transformers reads YaRN's `truncate` from the top level of rope_parameters, which a per-layer-type dict never
    # has there: Gemma 3 always truncates, whatever its full-attention entry says
    full.pop("truncate", None)
    if local.get("rope_type", "default") != "default":
        raise unsupported(f"Gemma 3 sliding layers with rope_type={local['rope_type']!r} (only 'default' there)")
    layers = layer_types_of(c)
    sliding = layers["sliding_window"] is not None
    # `attn_logit_softcapping` is stored by Gemma 3's config but its attention never reads it: not carried over.
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        hidden_act=_gelu_tanh_gate(c.hidden_activation),
        norm_position="sandwich",
        norm_type="offset_rmsnorm",
        qk_norm="head",
        scale_embeddings=True,
        query_pre_attn_scalar=c.query_pre_attn_scalar,
        final_logit_softcapping=c.final_logit_softcapping,
        local_rope_theta=local["rope_theta"] if sliding else None,
        **layers,
        **rope_knobs(full, architecture="Gemma 3"),
    )
    copy_layers(w, c.num_hidden_layers, norms=GEMMA3_NORMS, qk_norm=True)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def _gelu_tanh_gate(name: str) -> str:
    if name not in ("gelu_pytorch_tanh", "gelu_new"):
        raise unsupported(f"Gemma 3 hidden_activation={name!r} (supported: 'gelu_pytorch_tanh')")
    return "geglu_new"


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    fields = reference_fields(c)
    del fields["hidden_act"]
    local = c.local_rope_theta if c.local_rope_theta is not None else 10000.0
    types = c.attention_types()
    return Gemma3TextConfig(
        **fields,
        hidden_activation="gelu_pytorch_tanh",
        head_dim=c.head_dim,
        attention_bias=c.attention_bias,
        query_pre_attn_scalar=c.query_pre_attn_scalar if c.query_pre_attn_scalar is not None else c.head_dim,
        final_logit_softcapping=c.final_logit_softcapping,
        sliding_window=c.sliding_window if c.sliding_window is not None else IDLE_WINDOW,
        layer_types=types,
        rope_parameters={
            "full_attention": reference_rope(c),
            "sliding_attention": {"rope_type": "default", "rope_theta": float(local)},
        },
    )


# Six layers: the default pattern makes layers 0-4 sliding and layer 5 global. query_pre_attn_scalar (20) is not
# head_dim (16), so a 1/sqrt(head_dim) scaling shows. The legacy rope_scaling applies to the global layers only. The
# final cap is 0.5, not the real model's 30: the tiny model's logits stay below 1 (0.91 at most on the test batch),
# which a cap of 30 moves by 3e-4 at most and 0.5 by 0.43, so that a missing or misplaced cap fails by far.
TINY_REFERENCES = {
    "gemma3": TinyReference(
        Gemma3ForCausalLM,
        lambda **extra: Gemma3TextConfig(
            **{**DECODER, "num_hidden_layers": 6, "head_dim": 16},
            sliding_window=WINDOW,
            query_pre_attn_scalar=20,
            final_logit_softcapping=0.5,
            rope_scaling={"rope_type": "linear", "factor": 2.0},
            **extra,
        ),
    )
}
# Gemma3ForSequenceClassification takes the multimodal Gemma3Config; the text-only classifier is this one.
TINY_REFERENCES["gemma3_classifier"] = TINY_REFERENCES["gemma3"].classifier(Gemma3TextForSequenceClassification)

ARCHITECTURE = Architecture(
    name="gemma3",
    model_type="gemma3_text",
    classes={
        HFAttentionForCausalLM: Gemma3ForCausalLM,
        HFAttentionDecoderForSequenceClassification: Gemma3TextForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", Gemma3TextForSequenceClassification), ("", Gemma3ForCausalLM)),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Gemma 3",
        detail=" text",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams, sampling",
        llama_cpp="Gemma's own shapes ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="test_ctranslate2.py (Gemma 3 1B's settings)",
    ),
)
