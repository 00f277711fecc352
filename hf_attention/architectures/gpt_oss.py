"""GPT-OSS: a Llama with biases on q, k, v and o, attention sinks (a learned logit per head that joins every softmax),
sliding and full layers alternating, YaRN-scaled RoPE, and a mixture of experts in every layer: top-k on the router's
biased scores, then a softmax over those k; experts with biases and GPT-OSS's clamped unit
(up + 1) · gate · σ(1.702 · gate), gate and up interleaved in one (X, E, 2F) tensor. The Hub's weights are MXFP4
(`*_blocks`, `*_scales`); transformers dequantizes them on load, and a model in memory converts as any other."""

from transformers import GptOssConfig, GptOssForCausalLM, GptOssForSequenceClassification, PretrainedConfig

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
from .mixtral import experts_reference_fields
from .tiny import DECODER, ORIGINAL_LENGTH, WINDOW, TinyReference
from .weights import Weights, unsupported

# transformers' GptOssExperts: α of σ(α · gate), fixed in its code
GPT_OSS_ALPHA = 1.702


def copy_transposed_experts(w: Weights, src: str, dst: str) -> None:
    """Experts held as (X, E, 2F) and (X, F, E) (GPT-OSS, Llama 4): ours are their transposes, views the export
    writes through."""
    for name in ("gate_up_proj", "down_proj"):
        w.out[f"{dst}.experts.{name}"] = w.get(f"{src}.experts.{name}").transpose(1, 2)


def to_ours(model: GptOssForCausalLM | GptOssForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, GptOssForSequenceClassification)
    if c.hidden_act not in ("silu", "swish"):  # its experts run their own unit whatever the field says
        raise unsupported(f"GptOssConfig.hidden_act={c.hidden_act!r} (GPT-OSS's experts compute their own unit)")
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        hidden_act="swiglu",
        attention_bias=bool(c.attention_bias),
        attention_sinks=True,
        num_experts=c.num_local_experts,
        num_experts_per_tok=c.num_experts_per_tok,
        router="top_k_softmax",
        norm_topk_prob=True,
        router_bias=True,
        expert_bias=True,
        swiglu_limit=c.swiglu_limit,
        swiglu_alpha=GPT_OSS_ALPHA,
        router_aux_loss_coef=c.router_aux_loss_coef,
        output_router_logits=bool(c.output_router_logits),
        **layer_types_of(c),
        **rope_knobs(dict(c.rope_parameters or {}), architecture="GPT-OSS"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS)
    for i in range(c.num_hidden_layers):
        src, dst = f"model.layers.{i}", f"model.decoder.layers.{i}"
        w.copy(f"{dst}.self_attn", f"{src}.self_attn", names=("sinks",))
        w.copy(f"{dst}.mlp.router", f"{src}.mlp.router")
        copy_transposed_experts(w, f"{src}.mlp", f"{dst}.mlp")
        w.copy(f"{dst}.mlp.experts", f"{src}.mlp.experts", names=("gate_up_proj_bias", "down_proj_bias"))
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    types = c.attention_types()
    return GptOssConfig(
        **reference_fields(c),
        **experts_reference_fields(c),
        num_local_experts=c.num_experts or 1,
        head_dim=c.head_dim,
        attention_bias=c.attention_bias,
        # transformers' GPT-OSS needs a window even when no layer slides (its cache reads it): its default, which no
        # layer then reads, and which from_hf reads back as none
        sliding_window=c.sliding_window or GptOssConfig().sliding_window,
        layer_types=types,
        swiglu_limit=c.swiglu_limit if c.swiglu_limit is not None else 7.0,
        rope_parameters=reference_rope(c),
    )


# 4 experts, 2 per token, the clamps at 0.5 so that they act on random weights; sliding and full layers alternate
# (sliding first, a window of 8); YaRN as GPT-OSS has it (factor 32 over the trained length), crossed by 24 tokens.
TINY_REFERENCES = {
    "gpt_oss": TinyReference(
        GptOssForCausalLM,
        lambda **extra: GptOssConfig(
            **{**DECODER, "max_position_embeddings": 32 * ORIGINAL_LENGTH},  # YaRN's factor times the trained length
            head_dim=16,
            num_local_experts=4,
            num_experts_per_tok=2,
            swiglu_limit=0.5,
            sliding_window=WINDOW,
            layer_types=["sliding_attention", "full_attention"],
            rope_parameters={
                "rope_type": "yarn",
                "factor": 32.0,
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "truncate": False,
                "original_max_position_embeddings": ORIGINAL_LENGTH,
                "rope_theta": 150000.0,
            },
            **extra,
        ),
    )
}
TINY_REFERENCES["gpt_oss_classifier"] = TINY_REFERENCES["gpt_oss"].classifier(GptOssForSequenceClassification)

ARCHITECTURE = Architecture(
    name="gpt_oss",
    model_type="gpt_oss",
    classes={
        HFAttentionForCausalLM: GptOssForCausalLM,
        HFAttentionDecoderForSequenceClassification: GptOssForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", GptOssForSequenceClassification), ("", GptOssForCausalLM)),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="GPT-OSS",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams",
        llama_cpp="`swiglu_limit` 7 only ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it (no mixture-of-experts code)",
    ),
)
