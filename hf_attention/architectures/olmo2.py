"""OLMo 2: Llama with its norms moved onto the sublayers' outputs (x + Norm(Sublayer(x)), no norm on their inputs)
and QK-norm over the whole query and key projections."""

from transformers import Olmo2Config, Olmo2ForCausalLM, Olmo2ForSequenceClassification, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, TinyReference
from .weights import Weights

# The norm on each sublayer's output is our layer's one norm of that block ("output" placement).
OLMO2_NORMS = {"self_attn_norm": "post_attention_layernorm", "mlp_norm": "post_feedforward_layernorm"}


def to_ours(model: Olmo2ForCausalLM | Olmo2ForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, Olmo2ForSequenceClassification)
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        norm_position="output",
        qk_norm="projection",
        **rope_knobs(dict(c.rope_parameters or {}), architecture="OLMo 2"),
    )
    copy_layers(w, c.num_hidden_layers, norms=OLMO2_NORMS, qk_norm=True)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    return Olmo2Config(**reference_fields(c), attention_bias=c.attention_bias, rope_parameters=reference_rope(c))


TINY_REFERENCES = {"olmo2": TinyReference(Olmo2ForCausalLM, lambda **extra: Olmo2Config(**DECODER, **extra))}
TINY_REFERENCES["olmo2_classifier"] = TINY_REFERENCES["olmo2"].classifier(Olmo2ForSequenceClassification)

ARCHITECTURE = Architecture(
    name="olmo2",
    model_type="olmo2",
    classes={
        HFAttentionForCausalLM: Olmo2ForCausalLM,
        HFAttentionDecoderForSequenceClassification: Olmo2ForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", Olmo2ForSequenceClassification), ("", Olmo2ForCausalLM)),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="OLMo 2",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy",
        llama_cpp="yes ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it",
    ),
)
