"""DeepSeek-V3 (and Kimi K2, whose configs say `deepseek_v3`): multi-head latent attention in every layer (keys and
values decompressed per head from a cached latent, one rotated key shared by the heads, queries through a low-rank
path of their own when `q_lora_rank` is set) and, after the first `first_k_dense_replace` dense layers, a mixture of
experts routed by sigmoid scores within the best groups of experts, a balancing bias steering the choice only, the
weights scaled by `routed_scaling_factor`, and shared experts every token runs."""

from transformers import DeepseekV3Config, DeepseekV3ForCausalLM, DeepseekV3ForSequenceClassification, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import LLAMA_NORMS, copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, TinyReference
from .weights import Weights

LATENT_KNOBS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "rope_interleave")
LATENT_PROJECTIONS = ("q_a_proj", "q_a_layernorm", "q_b_proj", "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj")


def to_ours(model: DeepseekV3ForCausalLM | DeepseekV3ForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, DeepseekV3ForSequenceClassification)
    dense = list(range(min(c.first_k_dense_replace, c.num_hidden_layers)))
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        head_dim=c.qk_rope_head_dim,
        q_lora_rank=c.q_lora_rank,
        **{name: getattr(c, name) for name in LATENT_KNOBS},
        num_experts=c.n_routed_experts,
        num_experts_per_tok=c.num_experts_per_tok,
        moe_intermediate_size=c.moe_intermediate_size,
        mlp_only_layers=dense or None,
        router="sigmoid_group_top_k",
        n_group=c.n_group,
        topk_group=c.topk_group,
        norm_topk_prob=bool(c.norm_topk_prob),
        routed_scaling_factor=c.routed_scaling_factor,
        shared_expert_intermediate_size=(c.n_shared_experts * c.moe_intermediate_size) or None,
        # transformers' DeepSeek-V3 returns the router scores when asked but adds no balancing loss to its loss
        output_router_logits=bool(getattr(c, "output_router_logits", False)),
        router_aux_loss_coef=0.0,
        **rope_knobs(dict(c.rope_parameters or {}), architecture="DeepSeek-V3"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS)
    for i in range(c.num_hidden_layers):
        src, dst = f"model.layers.{i}", f"model.decoder.layers.{i}"
        for name in LATENT_PROJECTIONS:
            w.copy(f"{dst}.self_attn.{name}", f"{src}.self_attn.{name}")
        if i in dense:
            continue
        w.copy(f"{dst}.mlp.router", f"{src}.mlp.gate", names=("weight", "e_score_correction_bias"))
        w.copy(f"{dst}.mlp.experts", f"{src}.mlp.experts", names=("gate_up_proj", "down_proj"))
        if c.n_shared_experts:
            for name in ("gate_proj", "up_proj", "down_proj"):
                w.copy(f"{dst}.mlp.shared_expert.{name}", f"{src}.mlp.shared_experts.{name}")
    # without shared experts transformers still builds them, zero units wide: they add nothing
    empty = [] if c.n_shared_experts else [i for i in range(c.num_hidden_layers) if i not in dense]
    dropped = {f"model.layers.{i}.mlp.shared_experts.": "n_shared_experts=0: zero units wide" for i in empty}
    return decoder_head(w, config, "lm_head", classifier=classifier), config, dropped


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    experts = c.num_experts or 1
    moe_width = c.moe_intermediate_size or c.intermediate_size
    shared = getattr(c, "shared_expert_intermediate_size", None)
    dense = sorted(c.mlp_only_layers or [])
    return DeepseekV3Config(
        **reference_fields(c),
        num_experts_per_tok=min(c.num_experts_per_tok, experts),
        output_router_logits=getattr(c, "output_router_logits", False),
        n_routed_experts=experts,
        moe_intermediate_size=moe_width,
        # the dense layers are the first ones; other layouts come back different and the comparison names them
        first_k_dense_replace=len(dense) if dense == list(range(len(dense))) else 0,
        n_group=getattr(c, "n_group", 1),
        topk_group=getattr(c, "topk_group", 1),
        norm_topk_prob=c.norm_topk_prob,
        routed_scaling_factor=getattr(c, "routed_scaling_factor", 1.0),
        n_shared_experts=shared // moe_width if shared and shared % moe_width == 0 else 0,
        attention_bias=c.attention_bias,
        rope_parameters=reference_rope(c),
        q_lora_rank=getattr(c, "q_lora_rank", None),  # None is a value here: plain queries (the class says 1536)
        # The router as DeepSeek-V3's released config.json names it (sigmoid scores, the bias-corrected group top-k):
        # transformers' class has it built in and does not read these; llama.cpp's converter does, and takes a
        # softmax router without them.
        scoring_func="sigmoid",
        topk_method="noaux_tc",
        **{name: getattr(c, name, None) for name in LATENT_KNOBS if getattr(c, name, None) is not None},
    )


def _tiny(**latent):
    """3 layers (the first dense), 4 heads of 8 + 4 rotated query/key dims and 8 value dims over a latent of 16;
    4 experts in 2 groups, 1 group kept, 2 experts per token, one shared expert, weights × 2.5."""

    def make(**extra):
        return DeepseekV3Config(
            **{**DECODER, "num_hidden_layers": 3, "num_key_value_heads": 4},
            moe_intermediate_size=32,
            n_routed_experts=4,
            num_experts_per_tok=2,
            n_group=2,
            topk_group=1,
            n_shared_experts=1,
            first_k_dense_replace=1,
            routed_scaling_factor=2.5,
            kv_lora_rank=16,
            qk_nope_head_dim=8,
            qk_rope_head_dim=4,
            v_head_dim=8,
            **latent,
            **extra,
        )

    return TinyReference(DeepseekV3ForCausalLM, make)


TINY_REFERENCES = {
    "deepseek_v3": _tiny(q_lora_rank=24),  # queries through their own low-rank path
    "deepseek_v3_plain_queries": _tiny(q_lora_rank=None, rope_interleave=False),
}
TINY_REFERENCES["deepseek_v3_classifier"] = TINY_REFERENCES["deepseek_v3"].classifier(
    DeepseekV3ForSequenceClassification
)

ARCHITECTURE = Architecture(
    name="deepseek_v3",
    model_type="deepseek_v3",
    classes={
        HFAttentionForCausalLM: DeepseekV3ForCausalLM,
        HFAttentionDecoderForSequenceClassification: DeepseekV3ForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(
        ("ForSequenceClassification", DeepseekV3ForSequenceClassification),
        ("", DeepseekV3ForCausalLM),
    ),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="DeepSeek-V3",
        detail=" and Kimi K2, with and without q_lora_rank",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams",
        llama_cpp="with `q_lora_rank` ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it (no mixture-of-experts code)",
    ),
)
