"""Cohere 2 (Command R7B, Command A): Cohere's parallel block with its bias-free LayerNorm, rotation of adjacent pairs
and logits times `logit_scale`, without q/k norms, and three sliding-window layers to one full one
(`sliding_window_pattern` 4, or `layer_types`) of which only the sliding ones rotate: the full layers are NoPE (our
`nope_layers`), seeing every earlier token without positions. Its config derives head_dim = hidden / heads, but keeps
a `head_dim` keyword, which its attention and RoPE read."""

from transformers import Cohere2Config, Cohere2ForCausalLM, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .cohere import COHERE_NORMS, check_logit_scale, cohere_knobs, llama_shaped, reference_cohere_fields
from .llama import copy_layers, decoder_config, layer_types_of
from .ministral import IDLE_WINDOW
from .tiny import DECODER, THETA, WINDOW, TinyReference
from .weights import Weights

# The layer types Cohere 2 builds masks for (transformers' model has a mask for these two only).
COHERE2_LAYER_TYPES = ("sliding_attention", "full_attention")


def to_ours(model: Cohere2ForCausalLM, w: Weights):
    c = model.config
    check_logit_scale(c)
    types = list(c.layer_types or [])
    others = sorted({kind for kind in types if kind not in COHERE2_LAYER_TYPES})
    if others:
        raise ValueError(
            f"from_hf: {type(c).__name__}.layer_types has {', '.join(map(repr, others))} layers, for which "
            "transformers' Cohere 2 builds no mask (its forward pass fails on them): there is no computation to "
            f"convert. Make them {' or '.join(map(repr, COHERE2_LAYER_TYPES))} before converting."
        )
    windows = layer_types_of(c)  # refuses sliding layers without a window, as transformers' forward pass fails there
    # transformers' attention rotates a layer when its window is set, that is on the sliding layers only
    nope_layers = [index for index, kind in enumerate(types) if kind != "sliding_attention"]
    # q/k/v/o share one bias switch; the feed-forward network never has biases (its config has no switch).
    config = decoder_config(
        llama_shaped(c),
        w,
        classifier=False,
        mlp_bias=False,
        nope_layers=nope_layers,
        **windows,
        **cohere_knobs(c, "Cohere 2"),
    )
    copy_layers(w, c.num_hidden_layers, norms=COHERE_NORMS)
    return decoder_head(w, config, "lm_head", classifier=False), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    # The layer types written out; a window that no layer reads where none slides (transformers' Cohere 2 builds a
    # sliding-window mask whatever its layers, and `from_hf` reads such a window back as none). Which layers rotate
    # follows from the types: NoPE layers elsewhere than on the full ones are a difference that `to_hf` names.
    return Cohere2Config(
        **reference_cohere_fields(c),
        head_dim=c.head_dim,  # a keyword the config keeps over the width it derives
        sliding_window=c.sliding_window if c.sliding_window is not None else IDLE_WINDOW,
        layer_types=c.attention_types(),
    )


# Four layers in Cohere 2's own pattern: layers 0-2 slide (windows of 8 on a 24-token batch) and rotate, layer 3 is
# full and NoPE. Biases on q/k/v/o, head_dim 24 ≠ hidden / heads = 16, and a logit_scale that is no power of two (see
# cohere.py).
TINY_REFERENCES = {
    "cohere2": TinyReference(
        Cohere2ForCausalLM,
        lambda **extra: Cohere2Config(
            **{**DECODER, "num_hidden_layers": 4},
            head_dim=24,
            sliding_window=WINDOW,
            attention_bias=True,
            logit_scale=2.5,
            rope_parameters={"rope_type": "default", "rope_theta": THETA},
            **extra,
        ),
    )
}

ARCHITECTURE = Architecture(
    name="cohere2",
    model_type="cohere2",
    classes={HFAttentionForCausalLM: Cohere2ForCausalLM},
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("", Cohere2ForCausalLM),),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Cohere 2",
        heads="LM",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams, sampling",
        llama_cpp="its converter fails ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it",
    ),
)
