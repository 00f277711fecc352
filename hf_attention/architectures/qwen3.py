"""Qwen3: Qwen2's layout with QK-norm (an RMSNorm over each head's queries and keys, before the rotation), a head
width of its own, and the same bias on all four attention projections."""

from transformers import PretrainedConfig, Qwen3Config, Qwen3ForCausalLM, Qwen3ForSequenceClassification

from ..configuration_hf_attention import HFAttentionConfigBase
from ..modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, decoder_head
from .llama import (
    LLAMA_NORMS,
    copy_layers,
    decoder_config,
    layer_types_of,
    reference_fields,
    reference_rope,
    rope_knobs,
)
from .qwen2 import window_fields
from .weights import Weights


def to_ours(model: Qwen3ForCausalLM | Qwen3ForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, Qwen3ForSequenceClassification)
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        qk_norm="head",
        **layer_types_of(c),
        **rope_knobs(dict(c.rope_parameters or {}), architecture="Qwen3"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS, qk_norm=True)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    return Qwen3Config(
        **reference_fields(c),
        head_dim=c.head_dim,
        attention_bias=c.attention_bias,
        rope_parameters=reference_rope(c),
        **window_fields(c),
    )


ARCHITECTURE = Architecture(
    name="qwen3",
    model_type="qwen3",
    classes={
        HFAttentionForCausalLM: Qwen3ForCausalLM,
        HFAttentionDecoderForSequenceClassification: Qwen3ForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", Qwen3ForSequenceClassification), ("", Qwen3ForCausalLM)),
)
