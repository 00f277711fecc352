"""Qwen3-MoE: Qwen3's attention (QK-norm per head, a head width of its own) with mixture-of-experts feed-forward
networks of their own width (`moe_intermediate_size`): softmax over the experts, the k largest kept, renormalised
only with `norm_topk_prob`. The layers listed in `mlp_only_layers`, and all but every `decoder_sparse_step`-th,
keep a dense network."""

from transformers import PretrainedConfig, Qwen3MoeConfig, Qwen3MoeForCausalLM, Qwen3MoeForSequenceClassification

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import LLAMA_NORMS, copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .mixtral import copy_experts, experts_knobs, experts_reference_fields
from .tiny import DECODER, WINDOW, TinyReference
from .weights import Weights


def dense_layers(c: Qwen3MoeConfig) -> set[int]:
    """The layers transformers' Qwen3-MoE builds with a dense feed-forward network."""
    step = c.decoder_sparse_step
    return {
        index
        for index in range(c.num_hidden_layers)
        if index in c.mlp_only_layers or not (c.num_experts > 0 and (index + 1) % step == 0)
    }


def to_ours(model: Qwen3MoeForCausalLM | Qwen3MoeForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, Qwen3MoeForSequenceClassification)
    dense = dense_layers(c)
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        qk_norm="head",
        sliding_window=c.sliding_window,  # None unless use_sliding_window; then on every layer
        moe_intermediate_size=c.moe_intermediate_size,
        **experts_knobs(c, num_experts=c.num_experts, normalize=bool(c.norm_topk_prob), dense_layers=dense),
        **rope_knobs(dict(c.rope_parameters or {}), architecture="Qwen3-MoE"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS, qk_norm=True)
    copy_experts(w, c.num_hidden_layers, dense_layers=dense)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    window = c.sliding_window if c.layer_types is None else None
    return Qwen3MoeConfig(
        **reference_fields(c),
        **experts_reference_fields(c),
        num_experts=c.num_experts or 1,
        moe_intermediate_size=c.moe_intermediate_size or c.intermediate_size,
        norm_topk_prob=c.norm_topk_prob,
        decoder_sparse_step=1,
        mlp_only_layers=list(c.mlp_only_layers or []),
        head_dim=c.head_dim,
        attention_bias=c.attention_bias,
        use_sliding_window=window is not None,
        sliding_window=window,
        rope_parameters=reference_rope(c),
    )


# 4 experts of width 48, 2 per token, not renormalised; layer 0 dense (width 96); head_dim 24 ≠ 64 / 4; a window on
# every layer, crossed by the 24-token batch.
TINY_REFERENCES = {
    "qwen3_moe": TinyReference(
        Qwen3MoeForCausalLM,
        lambda **extra: Qwen3MoeConfig(
            **DECODER,
            head_dim=24,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=48,
            mlp_only_layers=[0],
            use_sliding_window=True,
            sliding_window=WINDOW,
            **extra,
        ),
    )
}
TINY_REFERENCES["qwen3_moe_classifier"] = TINY_REFERENCES["qwen3_moe"].classifier(Qwen3MoeForSequenceClassification)

ARCHITECTURE = Architecture(
    name="qwen3_moe",
    model_type="qwen3_moe",
    classes={
        HFAttentionForCausalLM: Qwen3MoeForCausalLM,
        HFAttentionDecoderForSequenceClassification: Qwen3MoeForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(
        ("ForSequenceClassification", Qwen3MoeForSequenceClassification),
        ("", Qwen3MoeForCausalLM),
    ),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Qwen3-MoE",
        heads="LM, classifier",
        from_hf="test_modern_parity.py, test_mixture_of_experts.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams",
        llama_cpp="experts in every layer, renormalised, no window ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it (no mixture-of-experts code)",
    ),
)
