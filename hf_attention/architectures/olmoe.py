"""OLMoE: a pre-norm Llama with QK-norm over the whole query and key projections (as OLMo 2) and a mixture of
experts in every layer whose k weights are the router's probabilities themselves (not renormalised)."""

from transformers import OlmoeConfig, OlmoeForCausalLM, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import LLAMA_NORMS, copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .mixtral import copy_experts, experts_knobs, experts_reference_fields
from .tiny import DECODER, TinyReference
from .weights import Weights, unsupported


def to_ours(model: OlmoeForCausalLM, w: Weights):
    c = model.config
    if c.clip_qkv is not None:
        raise unsupported(f"OlmoeConfig.clip_qkv={c.clip_qkv} (queries, keys and values clamped to ±clip_qkv)")
    config = decoder_config(
        c,
        w,
        classifier=False,
        qk_norm="projection",
        **experts_knobs(c, num_experts=c.num_experts, normalize=bool(c.norm_topk_prob)),
        **rope_knobs(dict(c.rope_parameters or {}), architecture="OLMoE"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS, qk_norm=True)
    copy_experts(w, c.num_hidden_layers)
    return decoder_head(w, config, "lm_head", classifier=False), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    return OlmoeConfig(
        **reference_fields(c),
        **experts_reference_fields(c),
        num_experts=c.num_experts or 1,
        norm_topk_prob=c.norm_topk_prob,
        attention_bias=c.attention_bias,
        rope_parameters=reference_rope(c),
    )


# 4 experts, 2 per token, weights not renormalised (OLMoE's default).
TINY_REFERENCES = {
    "olmoe": TinyReference(
        OlmoeForCausalLM, lambda **extra: OlmoeConfig(**DECODER, num_experts=4, num_experts_per_tok=2, **extra)
    )
}

ARCHITECTURE = Architecture(
    name="olmoe",
    model_type="olmoe",
    classes={HFAttentionForCausalLM: OlmoeForCausalLM},
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("", OlmoeForCausalLM),),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="OLMoE",
        heads="LM",
        from_hf="test_modern_parity.py, test_mixture_of_experts.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams",
        llama_cpp="without grouped heads ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it (no mixture-of-experts code)",
    ),
)
