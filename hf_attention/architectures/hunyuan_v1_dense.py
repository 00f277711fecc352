"""Hunyuan dense (Tencent 2025: Hunyuan-0.5B … 7B; transformers' `HunYuanDenseV1`, model_type "hunyuan_v1_dense"):
Llama with the same bias on all four attention projections (`attention_bias`), a head width of its own, and two ideas:

- QK-norm after the rotation: an RMSNorm with a learned gain over each head's queries and keys (`query_layernorm`,
  `key_layernorm`), applied to the rotated ones, where Qwen3 normalises before rotating (our `qk_norm="head"` with
  `qk_norm_after_rotation`: the norms are then the attention's `tuning.q_norm` / `tuning.k_norm`).
- NTK scaling by a fixed α: `rope_parameters` of rope_type "dynamic" with an `alpha` rotate with the base
  θ·α^(D/(D−2)) at every length (transformers' "ntk_alpha"; released configs: α = 1000). Ours is rope_type
  "ntk_alpha" with that `alpha`; the export writes transformers' form back. The `factor` transformers requires beside
  it, and the YaRN-style keys the released configs carry (`beta_fast`, `mscale`, ...), are read by no formula: they
  are left out, and the export writes factor 1.0, the released value.
"""

from transformers import (
    HunYuanDenseV1Config,
    HunYuanDenseV1ForCausalLM,
    HunYuanDenseV1ForSequenceClassification,
    PretrainedConfig,
)

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import LLAMA_NORMS, copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, THETA, TinyReference
from .weights import Weights

# transformers' rope_type for the fixed-α scaling, and the `factor` its config validation requires beside `alpha`
_ALPHA_ROPE_TYPE, _RELEASED_FACTOR = "dynamic", 1.0


def _rope_fields(rope: dict) -> dict:
    """Our rotary knobs for Hunyuan's `rope_parameters`: "dynamic" with a (non-zero) `alpha` is the fixed-α scaling
    (transformers' HunYuanDenseV1RotaryEmbedding; a zero or missing alpha leaves the length-dependent dynamic NTK).
    A `partial_rotary_factor` is read by none of Hunyuan's own two formulas (plain and α; they rotate whole heads):
    left out there, refused by name with the other types (transformers' rotation then fails on the widths)."""
    rope_type = rope.get("rope_type", "default")
    if rope_type == _ALPHA_ROPE_TYPE and rope.get("alpha"):
        rope_type = "ntk_alpha"
    rope = {**rope, "rope_type": rope_type}
    if rope_type in ("default", "ntk_alpha"):
        rope.pop("partial_rotary_factor", None)
    return rope_knobs(rope, architecture="Hunyuan")


def to_ours(model: HunYuanDenseV1ForCausalLM | HunYuanDenseV1ForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, HunYuanDenseV1ForSequenceClassification)
    # `pretraining_tp` and `eod_token_id` are stored but read by no module (generate() reads the generation config).
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        qk_norm="head",
        qk_norm_after_rotation=True,
        **_rope_fields(dict(c.rope_parameters or {})),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS)
    for i in range(c.num_hidden_layers):
        src, dst = f"model.layers.{i}.self_attn", f"model.decoder.layers.{i}.self_attn.tuning"
        w.copy(f"{dst}.q_norm", f"{src}.query_layernorm")
        w.copy(f"{dst}.k_norm", f"{src}.key_layernorm")
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    rope = reference_rope(c)
    if rope["rope_type"] == "ntk_alpha":  # transformers' form of it
        rope = {**rope, "rope_type": _ALPHA_ROPE_TYPE, "factor": _RELEASED_FACTOR}
    return HunYuanDenseV1Config(
        **reference_fields(c),
        head_dim=c.head_dim,  # (transformers' attention fails on head_dim=None: always written)
        attention_bias=c.attention_bias,
        rope_parameters=rope,
    )


# The released rotation (dynamic with α = 1000: the base grows ×1000^(24/22)), q/k/v/o biases, head_dim 24 ≠ hidden /
# heads = 16. transformers' own attention needs head_dim set (None fails in its constructor).
TINY_REFERENCES = {
    "hunyuan_v1_dense": TinyReference(
        HunYuanDenseV1ForCausalLM,
        lambda **extra: HunYuanDenseV1Config(
            **DECODER,
            head_dim=24,
            attention_bias=True,
            rope_parameters={"rope_type": "dynamic", "alpha": 1000.0, "factor": 1.0, "rope_theta": THETA},
            **extra,
        ),
    )
}
TINY_REFERENCES["hunyuan_v1_dense_classifier"] = TINY_REFERENCES["hunyuan_v1_dense"].classifier(
    HunYuanDenseV1ForSequenceClassification
)

ARCHITECTURE = Architecture(
    name="hunyuan_v1_dense",
    model_type="hunyuan_v1_dense",
    classes={
        HFAttentionForCausalLM: HunYuanDenseV1ForCausalLM,
        HFAttentionDecoderForSequenceClassification: HunYuanDenseV1ForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(
        ("ForSequenceClassification", HunYuanDenseV1ForSequenceClassification),
        ("", HunYuanDenseV1ForCausalLM),
    ),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Hunyuan",
        detail=" dense v1",
        heads="LM, classifier",
        from_hf="test_modern_parity.py, test_qk_norm_after_rotation.py, test_ntk_alpha_rope.py",
        to_hf="test_modern_parity.py, test_ntk_alpha_rope.py",
        generate="greedy, beams, sampling",
        llama_cpp="does not load ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it",
    ),
)
