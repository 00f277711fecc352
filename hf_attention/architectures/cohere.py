"""Cohere (Command R, Command R+): Llama's projections in a parallel block, x + Attn(LN(x)) + MLP(LN(x)) with one
LayerNorm per layer that subtracts the mean and has a gain but no bias (`parallel_block`, `norm_bias=False`); rotary
positions on adjacent pairs of each head (`rope_interleave`); optional q/k LayerNorms before the rotation with a gain
of each head's own, (heads, head_dim) (`use_qk_norm`: `qk_norm="per_head"`); the logits times `logit_scale`
(`logit_multiplier`). Its config has no head_dim field; a `head_dim` keyword is kept and read by its attention."""

import copy

from transformers import CohereConfig, CohereForCausalLM, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, THETA, TinyReference
from .weights import Weights

# The layer's one norm, read by both sublayers, is our attention norm (a parallel layer has no mlp_norm).
COHERE_NORMS = {"self_attn_norm": "input_layernorm"}


def llama_shaped(c: PretrainedConfig) -> PretrainedConfig:
    """A copy of a Cohere config that also answers Llama's name for the norms' ε (`rms_norm_eps`, which
    `decoder_config` reads): Cohere calls it `layer_norm_eps`."""
    shaped = copy.copy(c)
    shaped.rms_norm_eps = c.layer_norm_eps
    return shaped


def check_logit_scale(c: PretrainedConfig) -> None:
    """Refuse a `logit_scale` of None in the source's words: transformers' forward multiplies the logits by it and
    fails, so there is no computation to convert."""
    if c.logit_scale is None:
        name = type(c).__name__
        raise ValueError(
            f"from_hf: {name}.logit_scale=None: transformers' forward multiplies the logits by it and fails on its "
            f"first call, so there is no computation to convert. Set config.logit_scale to the factor the model was "
            "trained with (a number > 0; Command R: 0.0625) before converting."
        )


def cohere_knobs(c: PretrainedConfig, architecture: str) -> dict:
    """Our knobs for what every Cohere generation shares: the parallel block and its bias-free LayerNorm, the
    rotation of adjacent pairs, the logits' factor."""
    rope = dict(c.rope_parameters or {})
    if rope.get("rope_type", "default") == "default":
        # its default rotation turns whole heads whatever a partial_rotary_factor says (its frequencies are those of
        # head_dim): no module reads the factor (the scalings' do, and transformers' forward then fails)
        rope.pop("partial_rotary_factor", None)
    return {
        "norm_type": "layernorm",
        "norm_bias": False,
        "parallel_block": True,
        "rope_interleave": True,
        "logit_multiplier": c.logit_scale,
        **rope_knobs(rope, architecture=architecture),
    }


def to_ours(model: CohereForCausalLM, w: Weights):
    c = model.config
    check_logit_scale(c)
    # q/k/v/o share one bias switch; the feed-forward network never has biases (its config has no switch).
    qk_norm = bool(c.use_qk_norm)
    config = decoder_config(
        llama_shaped(c),
        w,
        classifier=False,
        qk_norm="per_head" if qk_norm else "none",
        mlp_bias=False,
        **cohere_knobs(c, "Cohere"),
    )
    copy_layers(w, c.num_hidden_layers, norms=COHERE_NORMS, qk_norm=qk_norm)
    return decoder_head(w, config, "lm_head", classifier=False), config, {}


def reference_cohere_fields(c: HFAttentionConfigBase) -> dict:
    """The fields a Cohere reference config takes from ours: Llama's, the norms' ε under Cohere's name, the one
    bias switch, the logits' factor and the rotation."""
    fields = reference_fields(c)
    fields["layer_norm_eps"] = fields.pop("rms_norm_eps")
    return {
        **fields,
        "attention_bias": c.attention_bias,
        "logit_scale": c.logit_multiplier,
        "rope_parameters": reference_rope(c),
    }


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    return CohereConfig(**reference_cohere_fields(c), head_dim=c.head_dim, use_qk_norm=c.qk_norm == "per_head")


# Command R+'s q/k norms (a gain per head, moved apart by the tests' noise), biases on q/k/v/o, head_dim 24 ≠ hidden /
# heads = 16, and a logit_scale that is no power of two (so that a factor applied in another place than the logits'
# would show), above 1 so that the tiny model's logits stay clear of ties.
TINY_REFERENCES = {
    "cohere": TinyReference(
        CohereForCausalLM,
        lambda **extra: CohereConfig(
            **DECODER,
            head_dim=24,
            use_qk_norm=True,
            attention_bias=True,
            logit_scale=2.5,
            rope_parameters={"rope_type": "default", "rope_theta": THETA},
            **extra,
        ),
    )
}

ARCHITECTURE = Architecture(
    name="cohere",
    model_type="cohere",
    classes={HFAttentionForCausalLM: CohereForCausalLM},
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("", CohereForCausalLM),),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Cohere",
        heads="LM",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams, sampling",
        llama_cpp="`head_dim` = hidden / heads only; not measured further ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it",
    ),
)
