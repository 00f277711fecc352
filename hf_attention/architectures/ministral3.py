"""Ministral 3 (the `ministral3` model type, Mistral AI 2025; not the 2024 Ministral of ministral.py): Mistral's
bias-free layers, a window on every layer when `sliding_window` is set, YaRN RoPE, and one idea of its own: after the
rotation, on every layer, the query of the token at position id p is multiplied by 1 + β·ln(1 + ⌊p / L⌋), β =
`rope_parameters["llama_4_scaling_beta"]` and L = `rope_parameters["original_max_position_embeddings"]` (transformers'
`get_llama_4_attn_scale`): our `llama_4_scaling_beta` and `llama_4_scaling_length` (query_key_tuning.py).

The scale reads the position ids themselves, not their distances: a plain forward pass of transformers' class numbers a
left-padded row's positions from its first column unless it is given `position_ids`, as `generate()` gives them."""

from transformers import Ministral3Config, Ministral3ForCausalLM, Ministral3ForSequenceClassification, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.field_checks import is_int, is_number
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import FROM_THE_FIRST_COLUMN, POSITION_IDS, Architecture, ConversionRow, decoder_head
from .llama import LLAMA_NORMS, copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, THETA, WINDOW, TinyReference
from .weights import Weights, unsupported

_ROPE = "Ministral3Config.rope_parameters"


def _scaling_fields(rope: dict) -> dict:
    """`llama_4_scaling_beta` and `llama_4_scaling_length` of ours for the reference's `rope_parameters`; a β of 0
    scales by 1 everywhere: off. transformers' forward pass reads both keys whatever the rope_type, and fails without
    them."""
    beta, length = rope.get("llama_4_scaling_beta"), rope.get("original_max_position_embeddings")
    missing = [key for key in ("llama_4_scaling_beta", "original_max_position_embeddings") if rope.get(key) is None]
    if missing:
        raise ValueError(
            f"from_hf: {_ROPE} has no {' or '.join(map(repr, missing))}, which Ministral 3's query scale reads on "
            "every layer (transformers' own forward pass fails without them): set them in config.rope_parameters "
            "(Ministral 3: 0.1 and 16384) before converting."
        )
    if not is_number(beta) or beta < 0:
        raise unsupported(f"{_ROPE}['llama_4_scaling_beta']={beta!r} (allowed: a finite number >= 0)")
    if not is_int(length) or length <= 0:
        raise unsupported(f"{_ROPE}['original_max_position_embeddings']={length!r} (allowed: a positive integer)")
    if beta == 0:
        return {"llama_4_scaling_beta": None}
    return {"llama_4_scaling_beta": float(beta), "llama_4_scaling_length": length}


def to_ours(model: Ministral3ForCausalLM | Ministral3ForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, Ministral3ForSequenceClassification)
    rope = dict(c.rope_parameters or {})
    # No bias anywhere (fixed in its attention and MLP; its config has no switch for them). Its mask ignores
    # `layer_types` (transformers warns of them): the window, when set, is on every layer, as Mistral's.
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        attention_bias=False,
        mlp_bias=False,
        sliding_window=c.sliding_window,
        **_scaling_fields(rope),
        **rope_knobs(rope, architecture="Ministral 3"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    # A layer without the window cannot be written: the window is on every layer or none (the comparison names it).
    window = c.sliding_window if c.layer_types is None else None
    rope = reference_rope(c)
    # One key holds both lengths: a YaRN (or llama3, LongRoPE) rotation's own is written, and a scale's length that
    # differs from it is named by the comparison. Without the scale, β = 0 (transformers' forward pass needs a value).
    rope.setdefault("original_max_position_embeddings", c.llama_4_scaling_length)
    rope["llama_4_scaling_beta"] = 0.0 if c.llama_4_scaling_beta is None else c.llama_4_scaling_beta
    return Ministral3Config(**reference_fields(c), head_dim=c.head_dim, sliding_window=window, rope_parameters=rope)


# YaRN as Ministral 3 sets it (factor 16 = max_position_embeddings / original length), at an original length of 4 so
# that a 24-token batch reaches six steps of the query scale (β 0.5: ×1 … ×1.9); beta_fast/beta_slow 0.5/0.01 put
# YaRN's ramp over the 12 frequencies of 24-dim heads (at length 4 the defaults 32/1 would interpolate every one), and
# mscale 1 over mscale_all_dim 0.5 gives an attention factor other than 1. Windows of 8 on every layer; head_dim 24 ≠
# hidden / heads = 16.
ROPE = {
    "rope_type": "yarn",
    "rope_theta": THETA,
    "factor": 16.0,
    "original_max_position_embeddings": 4,
    "beta_fast": 0.5,
    "beta_slow": 0.01,
    "mscale": 1.0,
    "mscale_all_dim": 0.5,
    "llama_4_scaling_beta": 0.5,
}

TINY_REFERENCES = {
    "ministral3": TinyReference(
        Ministral3ForCausalLM,
        lambda **extra: Ministral3Config(
            **DECODER, head_dim=24, sliding_window=WINDOW, rope_parameters=dict(ROPE), **extra
        ),
    )
}
TINY_REFERENCES["ministral3_classifier"] = TINY_REFERENCES["ministral3"].classifier(
    Ministral3ForSequenceClassification
)

ARCHITECTURE = Architecture(
    name="ministral3",
    model_type="ministral3",
    classes={
        HFAttentionForCausalLM: Ministral3ForCausalLM,
        HFAttentionDecoderForSequenceClassification: Ministral3ForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(
        ("ForSequenceClassification", Ministral3ForSequenceClassification),
        ("", Ministral3ForCausalLM),
    ),
    left_padding_note=(
        f"{FROM_THE_FIRST_COLUMN}, and its query scale (`llama_4_scaling_beta`) reads them: {POSITION_IDS}. "
        "`generate()` passes them itself: the same tokens."
    ),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Ministral 3",
        heads="LM, classifier",
        from_hf="test_modern_parity.py, test_query_position_scaling.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams, sampling",
        llama_cpp="differs ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it",
    ),
)
