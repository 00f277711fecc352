"""EXAONE 4 (LG AI Research, 2025): OLMo 2's norms on the sublayers' outputs (x + Norm(Sublayer(x)), none on their
inputs), Qwen3's QK-norm over each head, three sliding-window layers to one global one (`sliding_window_pattern`, or
`layer_types`), and, when a window is set, RoPE on the sliding layers only: the global layers are NoPE.

Without a window (EXAONE 4.0 1.2B) every layer is global and every layer rotates. With one (the 32B) the global
layers see every earlier token without positions, as SmolLM3's and Llama 4's NoPE layers do (our `nope_layers`).
"""

from transformers import Exaone4Config, Exaone4ForCausalLM, Exaone4ForSequenceClassification, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import copy_layers, decoder_config, layer_types_of, reference_fields, reference_rope, rope_knobs
from .ministral import IDLE_WINDOW
from .olmo2 import OLMO2_NORMS
from .tiny import DECODER, WINDOW, TinyReference
from .weights import Weights


def to_ours(model: Exaone4ForCausalLM | Exaone4ForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, Exaone4ForSequenceClassification)
    windows = layer_types_of(c)  # refuses sliding layers without a window, as transformers' forward pass fails there
    # transformers' attention rotates a layer when `sliding_window is None or is_sliding`: with a window set, its full
    # layers are NoPE (all of them when no layer slides: the window itself is then read by no layer).
    types = list(c.layer_types or [])
    nope_layers = (
        [] if c.sliding_window is None else [i for i, kind in enumerate(types) if kind != "sliding_attention"]
    )
    # No bias anywhere (fixed in EXAONE 4's attention and MLP; its config has no switch for them).
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        attention_bias=False,
        mlp_bias=False,
        norm_position="output",
        qk_norm="head",
        nope_layers=nope_layers,
        **windows,
        **rope_knobs(dict(c.rope_parameters or {}), architecture="EXAONE 4"),
    )
    copy_layers(w, c.num_hidden_layers, norms=OLMO2_NORMS, qk_norm=True)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    return Exaone4Config(
        **reference_fields(c),
        head_dim=c.head_dim,  # not a declared field: a keyword the config keeps and the attention and RoPE read
        rope_parameters=reference_rope(c),
        **window_fields(c),
    )


def window_fields(c: HFAttentionConfigBase) -> dict:
    """EXAONE 4's `sliding_window`, `sliding_window_pattern` and `layer_types` for our layer types and NoPE layers.

    Its window also decides which layers rotate: with one, exactly the sliding layers; without, every layer. So a
    model none of whose layers slides but all of whose layers are NoPE gets a window that no layer reads; other NoPE
    layers are written as rotating ones, and `to_hf` names the difference."""
    types = c.attention_types()
    full = [index for index, kind in enumerate(types) if kind == "full_attention"]
    if "sliding_attention" in types:
        window = c.sliding_window
    elif full and sorted(set(c.nope_layers)) == full:
        window = IDLE_WINDOW
    else:
        window = None
    # the layer types are written out whatever the window: without one, transformers derives them by dividing by a
    # pattern it has set to 0
    return {"sliding_window": window, "sliding_window_pattern": window_pattern(types), "layer_types": types}


def window_pattern(types: list[str]) -> int | str:
    """The `sliding_window_pattern` that describes `types` (transformers derives the layer types from it when the
    config has none, and keeps it beside them otherwise): k, every k-th layer global (4, EXAONE's own, when it
    fits), else the "L"/"G" string its documentation describes, one letter per layer."""

    def fits(k: int) -> bool:
        return types == [
            "full_attention" if (index + 1) % k == 0 else "sliding_attention" for index in range(len(types))
        ]

    if fits(4):
        return 4
    pattern = next((k for k in range(1, len(types) + 2) if fits(k)), None)
    return pattern or "".join("L" if kind == "sliding_attention" else "G" for kind in types)


# Four layers in EXAONE's own pattern (4): layers 0-2 slide (windows of 8 on a 24-token batch) and rotate, layer 3 is
# global and NoPE. head_dim 24 ≠ hidden / heads = 16: the per-head q/k norms are 24 wide.
TINY_REFERENCES = {
    "exaone4": TinyReference(
        Exaone4ForCausalLM,
        lambda **extra: Exaone4Config(
            **{**DECODER, "num_hidden_layers": 4},
            head_dim=24,
            sliding_window=WINDOW,
            sliding_window_pattern=4,
            **extra,
        ),
    ),
    # No window (EXAONE 4.0 1.2B): every layer global, and every layer rotates. The layer types are explicit, as
    # transformers derives them by dividing by a pattern it sets to 0 without a window.
    "exaone4_global": TinyReference(
        Exaone4ForCausalLM,
        lambda **extra: Exaone4Config(**DECODER, sliding_window=None, layer_types=["full_attention"] * 2, **extra),
    ),
}
TINY_REFERENCES["exaone4_classifier"] = TINY_REFERENCES["exaone4"].classifier(Exaone4ForSequenceClassification)

ARCHITECTURE = Architecture(
    name="exaone4",
    model_type="exaone4",
    classes={
        HFAttentionForCausalLM: Exaone4ForCausalLM,
        HFAttentionDecoderForSequenceClassification: Exaone4ForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(
        ("ForSequenceClassification", Exaone4ForSequenceClassification),
        ("", Exaone4ForCausalLM),
    ),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="EXAONE 4",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams, sampling",
        llama_cpp="without a window, `head_dim` = hidden / heads ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it",
    ),
)
