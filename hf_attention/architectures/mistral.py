"""Mistral (and Ministral): Llama with sliding-window attention on every layer (a query sees the `sliding_window`
most recent tokens), and the cache of each layer bounded by that window."""

from transformers import MistralConfig, MistralForCausalLM, MistralForSequenceClassification, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import LLAMA_NORMS, copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, WINDOW, TinyReference
from .weights import Weights


def to_ours(model: MistralForCausalLM | MistralForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, MistralForSequenceClassification)
    # Mistral's mask ignores `layer_types`: the window, when set, is on every layer.
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        sliding_window=c.sliding_window,
        **rope_knobs(dict(c.rope_parameters or {}), architecture="Mistral"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    # A layer without the window cannot be written: Mistral windows every layer or none (the comparison names it).
    window = c.sliding_window if c.layer_types is None else None
    return MistralConfig(
        **reference_fields(c), head_dim=c.head_dim, sliding_window=window, rope_parameters=reference_rope(c)
    )


TINY_REFERENCES = {
    "mistral": TinyReference(
        MistralForCausalLM, lambda **extra: MistralConfig(**DECODER, sliding_window=WINDOW, **extra)
    )
}
TINY_REFERENCES["mistral_classifier"] = TINY_REFERENCES["mistral"].classifier(MistralForSequenceClassification)

ARCHITECTURE = Architecture(
    name="mistral",
    model_type="mistral",
    classes={
        HFAttentionForCausalLM: MistralForCausalLM,
        HFAttentionDecoderForSequenceClassification: MistralForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", MistralForSequenceClassification), ("", MistralForCausalLM)),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Mistral",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams",
        llama_cpp="without a window only ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="test_ctranslate2.py (prompts up to the window + 1)",
    ),
)
