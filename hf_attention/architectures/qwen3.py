"""Qwen3: Qwen2's layout with QK-norm (an RMSNorm over each head's queries and keys, before the rotation), a head
width of its own, and the same bias on all four attention projections."""

from transformers import PretrainedConfig, Qwen3Config, Qwen3ForCausalLM, Qwen3ForSequenceClassification

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
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
from .tiny import DECODER, TinyReference
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


# head_dim 24 ≠ hidden / heads = 16: the projections are not square.
TINY_REFERENCES = {
    "qwen3": TinyReference(Qwen3ForCausalLM, lambda **extra: Qwen3Config(**DECODER, head_dim=24, **extra))
}
TINY_REFERENCES["qwen3_classifier"] = TINY_REFERENCES["qwen3"].classifier(Qwen3ForSequenceClassification)

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
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Qwen3",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, sampling",
        llama_cpp="yes ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="test_ctranslate2.py",
    ),
)
