"""SmolLM3: Llama with "NoPE" layers, which rotate nothing (every fourth by default: `no_rope_layer_interval`), and
optional sliding windows on those layers only."""

from transformers import PretrainedConfig, SmolLM3Config, SmolLM3ForCausalLM, SmolLM3ForSequenceClassification

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
from .tiny import DECODER, TinyReference
from .weights import Weights


def to_ours(model: SmolLM3ForCausalLM | SmolLM3ForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, SmolLM3ForSequenceClassification)
    # transformers' `no_rope_layers[i]` is 1 where layer i DOES rotate (the name says the opposite)
    nope_layers = [index for index, rotates in enumerate(c.no_rope_layers) if not rotates]
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        nope_layers=nope_layers,
        **layer_types_of(c),
        **rope_knobs(dict(c.rope_parameters or {}), architecture="SmolLM3"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    types = c.attention_types()
    sliding = "sliding_attention" in types
    return SmolLM3Config(
        **reference_fields(c),
        attention_bias=c.attention_bias,
        mlp_bias=c.mlp_bias,
        rope_parameters=reference_rope(c),
        no_rope_layers=[int(index not in c.nope_layers) for index in range(c.num_hidden_layers)],
        no_rope_layer_interval=nope_interval(c.nope_layers, c.num_hidden_layers),
        use_sliding_window=sliding,
        sliding_window=c.sliding_window if sliding else None,
        layer_types=types,
    )


def nope_interval(nope_layers: list[int], num_layers: int) -> int:
    """SmolLM3's `no_rope_layer_interval` for our NoPE layers: the k that makes layers k-1, 2k-1, ... the NoPE ones
    (4, the default, when it does). The model reads only `no_rope_layers`, written beside it; the interval describes
    that list, and a converted checkpoint should give back the interval its source had, not the default."""
    nope = sorted(set(nope_layers))

    def fits(k: int) -> bool:
        return nope == [index for index in range(num_layers) if (index + 1) % k == 0]

    # No interval describes no NoPE layer at all, or an irregular pattern: the default, as SmolLM3's configs say.
    return 4 if fits(4) else next((k for k in range(1, num_layers + 1) if fits(k)), 4)


# Interval 2: layers 1 and 3 skip RoPE (NoPE), layers 0 and 2 use it.
TINY_REFERENCES = {
    "smollm3": TinyReference(
        SmolLM3ForCausalLM,
        lambda **extra: SmolLM3Config(**{**DECODER, "num_hidden_layers": 4}, no_rope_layer_interval=2, **extra),
    )
}
TINY_REFERENCES["smollm3_classifier"] = TINY_REFERENCES["smollm3"].classifier(SmolLM3ForSequenceClassification)

ARCHITECTURE = Architecture(
    name="smollm3",
    model_type="smollm3",
    classes={
        HFAttentionForCausalLM: SmolLM3ForCausalLM,
        HFAttentionDecoderForSequenceClassification: SmolLM3ForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", SmolLM3ForSequenceClassification), ("", SmolLM3ForCausalLM)),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="SmolLM3",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy",
        llama_cpp="NoPE every 4th layer only ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it",
    ),
)
