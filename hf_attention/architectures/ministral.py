"""Ministral (the `ministral` model type, not Ministral 3): Mistral's bias-free layers with a window on the layers
that `layer_types` names `sliding_attention` and full attention on the others, each layer's cache bounded as its
type says. Its config has no default head width: `head_dim` is always explicit."""

from transformers import MinistralConfig, MinistralForCausalLM, MinistralForSequenceClassification, PretrainedConfig

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
from .tiny import DECODER, WINDOW, TinyReference
from .weights import Weights

# The window written for a model none of whose layers slides (Ministral's default): its attention masks always build a
# sliding-window mask, and raise on any input when `sliding_window` is null; a value no layer reads changes nothing,
# and `from_hf` reads it back as no window.
IDLE_WINDOW = 4096


def to_ours(model: MinistralForCausalLM | MinistralForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, MinistralForSequenceClassification)
    # No bias anywhere (fixed in Ministral's attention and MLP; its config has no switch for them).
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        attention_bias=False,
        mlp_bias=False,
        **layer_types_of(c),
        **rope_knobs(dict(c.rope_parameters or {}), architecture="Ministral"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    return MinistralConfig(
        **reference_fields(c),
        head_dim=c.head_dim,
        sliding_window=c.sliding_window if c.sliding_window is not None else IDLE_WINDOW,
        layer_types=c.attention_types(),
        rope_parameters=reference_rope(c),
    )


# Three layers, sliding / full / sliding: a mix that neither Mistral (every layer or none) nor Qwen2 (full layers
# first) can write. head_dim 24 ≠ hidden / heads = 16.
TINY_REFERENCES = {
    "ministral": TinyReference(
        MinistralForCausalLM,
        lambda **extra: MinistralConfig(
            **{**DECODER, "num_hidden_layers": 3, "head_dim": 24},
            sliding_window=WINDOW,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            **extra,
        ),
    )
}
TINY_REFERENCES["ministral_classifier"] = TINY_REFERENCES["ministral"].classifier(MinistralForSequenceClassification)

ARCHITECTURE = Architecture(
    name="ministral",
    model_type="ministral",
    classes={
        HFAttentionForCausalLM: MinistralForCausalLM,
        HFAttentionDecoderForSequenceClassification: MinistralForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(
        ("ForSequenceClassification", MinistralForSequenceClassification),
        ("", MinistralForCausalLM),
    ),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Ministral",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams, sampling",
        llama_cpp="no converter for `MinistralForCausalLM`",
        ctranslate2="not measured",
    ),
)
