"""Qwen2 / Qwen2.5: Llama with biases on the query, key and value projections and none on the output, and optional
sliding windows on the layers above the first `max_window_layers`."""

from transformers import PretrainedConfig, Qwen2Config, Qwen2ForCausalLM, Qwen2ForSequenceClassification

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


def to_ours(model: Qwen2ForCausalLM | Qwen2ForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, Qwen2ForSequenceClassification)
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        attention_bias=True,  # q/k/v: fixed in Qwen2's attention, whatever the config says
        attention_output_bias=False,
        **layer_types_of(c),
        **rope_knobs(dict(c.rope_parameters or {}), architecture="Qwen2"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def window_fields(c: HFAttentionConfigBase) -> dict:
    """Qwen's window settings for our layer types: full layers first (`max_window_layers` of them), sliding above."""
    types = c.attention_types()
    if "sliding_attention" not in types:
        return {"use_sliding_window": False, "sliding_window": None, "max_window_layers": c.num_hidden_layers}
    return {
        "use_sliding_window": True,
        "sliding_window": c.sliding_window,
        "max_window_layers": types.index("sliding_attention"),
        "layer_types": types,
    }


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    return Qwen2Config(**reference_fields(c), rope_parameters=reference_rope(c), **window_fields(c))


# Qwen2 keeps the first max_window_layers layers full: layer 0 full, layer 1 sliding.
TINY_REFERENCES = {
    "qwen2": TinyReference(
        Qwen2ForCausalLM,
        lambda **extra: Qwen2Config(
            **DECODER, use_sliding_window=True, sliding_window=WINDOW, max_window_layers=1, **extra
        ),
    )
}
TINY_REFERENCES["qwen2_classifier"] = TINY_REFERENCES["qwen2"].classifier(Qwen2ForSequenceClassification)

ARCHITECTURE = Architecture(
    name="qwen2",
    model_type="qwen2",
    classes={
        HFAttentionForCausalLM: Qwen2ForCausalLM,
        HFAttentionDecoderForSequenceClassification: Qwen2ForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", Qwen2ForSequenceClassification), ("", Qwen2ForCausalLM)),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Qwen2",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy",
        llama_cpp="without a window ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="test_ctranslate2.py (without a window)",
    ),
)
