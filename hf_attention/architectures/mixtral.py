"""Mixtral: Mistral whose every feed-forward network is a mixture of experts, 2 of 8 per token in the real model
(softmax over the experts, the two largest kept and renormalised).

The reading and writing of transformers' mixture-of-experts layers live here (`experts_knobs`, `copy_experts`,
`experts_reference_fields`), as Llama's live in llama.py: Qwen3-MoE and OLMoE add only what differs. transformers
holds the experts of a layer in memory as two stacked tensors, `experts.gate_up_proj` (X, 2F, E) and
`experts.down_proj` (X, E, F), our layout too, and writes one tensor per expert on disk: an export is the reference
class's own `save_pretrained`, so it writes what that class's `from_pretrained` reads.
"""

from transformers import MixtralConfig, MixtralForCausalLM, MixtralForSequenceClassification, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import LLAMA_NORMS, copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, WINDOW, TinyReference
from .weights import Weights, unsupported


def experts_knobs(c: PretrainedConfig, *, num_experts: int, normalize: bool, dense_layers=()) -> dict:
    """Our mixture-of-experts knobs for a reference with `num_experts` experts per sparse layer, `normalize`d top-k
    weights and the layers that stay dense. A router that perturbs its inputs while training is refused."""
    jitter = getattr(c, "router_jitter_noise", None) or 0.0
    if jitter:
        raise unsupported(
            f"{type(c).__name__}.router_jitter_noise={jitter} (training multiplies the router's inputs by noise)",
            "set config.router_jitter_noise=0.0 before converting: it changes training only",
        )
    return {
        "num_experts": num_experts,
        "num_experts_per_tok": c.num_experts_per_tok,
        "norm_topk_prob": normalize,
        "router": "softmax_top_k",
        "mlp_only_layers": sorted(dense_layers) or None,
        "router_aux_loss_coef": c.router_aux_loss_coef,
        "output_router_logits": bool(c.output_router_logits),
    }


def copy_experts(w: Weights, num_layers: int, *, dense_layers=()) -> None:
    """Each sparse layer's router (`mlp.gate`) and stacked experts (`mlp.experts.*`), as they are in memory; the dense
    layers' gate/up/down projections are copied by llama.copy_layers."""
    for i in range(num_layers):
        if i in dense_layers:
            continue
        src, dst = f"model.layers.{i}.mlp", f"model.decoder.layers.{i}.mlp"
        w.copy(f"{dst}.router", f"{src}.gate", names=("weight",))
        w.copy(f"{dst}.experts", f"{src}.experts", names=("gate_up_proj", "down_proj"))


def experts_reference_fields(c: HFAttentionConfigBase) -> dict:
    """The mixture-of-experts fields every reference config takes from ours (a dense model of ours is written with
    one expert, which the comparison after the export names)."""
    experts = c.num_experts or 1
    return {
        "num_experts_per_tok": min(c.num_experts_per_tok, experts),
        "router_aux_loss_coef": getattr(c, "router_aux_loss_coef", 0.001),  # a dense model of ours has neither
        "output_router_logits": getattr(c, "output_router_logits", False),
    }


def to_ours(model: MixtralForCausalLM | MixtralForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, MixtralForSequenceClassification)
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        sliding_window=c.sliding_window,  # as Mistral's: on every layer when set
        **experts_knobs(c, num_experts=c.num_local_experts, normalize=True),
        **rope_knobs(dict(c.rope_parameters or {}), architecture="Mixtral"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS)
    copy_experts(w, c.num_hidden_layers)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    window = c.sliding_window if c.layer_types is None else None
    return MixtralConfig(
        **reference_fields(c),
        **experts_reference_fields(c),
        num_local_experts=c.num_experts or 1,
        # None where it is hidden_size / heads, as Mixtral's configs leave it (the class derives it then)
        head_dim=None if c.head_dim * c.num_attention_heads == c.hidden_size else c.head_dim,
        sliding_window=window,
        rope_parameters=reference_rope(c),
    )


# 4 experts, 2 per token; a window on every layer, crossed by the 24-token batch.
TINY_REFERENCES = {
    "mixtral": TinyReference(
        MixtralForCausalLM,
        lambda **extra: MixtralConfig(
            **DECODER, num_local_experts=4, num_experts_per_tok=2, sliding_window=WINDOW, **extra
        ),
    )
}
TINY_REFERENCES["mixtral_classifier"] = TINY_REFERENCES["mixtral"].classifier(MixtralForSequenceClassification)

ARCHITECTURE = Architecture(
    name="mixtral",
    model_type="mixtral",
    classes={
        HFAttentionForCausalLM: MixtralForCausalLM,
        HFAttentionDecoderForSequenceClassification: MixtralForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", MixtralForSequenceClassification), ("", MixtralForCausalLM)),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Mixtral",
        heads="LM, classifier",
        from_hf="test_modern_parity.py, test_mixture_of_experts.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams",
        llama_cpp="without a window ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it (no mixture-of-experts code)",
    ),
)
