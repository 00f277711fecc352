"""Granite (IBM, the `granite` model type of Granite 3.x): Llama trained with µP's multipliers (Yang et al. 2022,
Tensor Programs V), each a knob of ours: the embeddings times `embedding_multiplier`, q·k times
`attention_multiplier` itself (in place of 1/√head_dim), each sublayer's output times `residual_multiplier` before the
residual add, and the logits divided by `logits_scaling`. One switch `attention_bias` for all four attention
projections; transformers has no Granite classifier."""

from transformers import GraniteConfig, GraniteForCausalLM, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import LLAMA_NORMS, copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, TinyReference
from .weights import Weights


def to_ours(model: GraniteForCausalLM, w: Weights):
    c = model.config
    # The multipliers keep Granite's names; one our config refuses (0, a negative number: transformers takes any) is
    # named by build_config before a weight is copied.
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    # Granite always writes its attention scale; the plain one, head_dim^-1/2, is our default (None), so that a model
    # of ours exported to Granite and read back compares equal.
    attention_multiplier = None if c.attention_multiplier == head_dim**-0.5 else c.attention_multiplier
    # `attention_bias` is also the output projection's (Granite has no switch of its own for it).
    config = decoder_config(
        c,
        w,
        classifier=False,
        embedding_multiplier=c.embedding_multiplier,
        residual_multiplier=c.residual_multiplier,
        attention_multiplier=attention_multiplier,
        logits_scaling=c.logits_scaling,
        **rope_knobs(dict(c.rope_parameters or {}), architecture="Granite"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS)
    return decoder_head(w, config, "lm_head", classifier=False), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    # The scale our attention computes with when no multiplier is set (query_pre_attn_scalar's, else head_dim's): the
    # same numbers, though a model with query_pre_attn_scalar reads back as attention_multiplier, a difference to_hf
    # names.
    scale = c.query_pre_attn_scalar if c.query_pre_attn_scalar is not None else c.head_dim
    head_dim = {} if c.head_dim == c.hidden_size // c.num_attention_heads else {"head_dim": c.head_dim}
    return GraniteConfig(
        **reference_fields(c),
        **head_dim,  # not a field of GraniteConfig, but read by its attention and rotation when set
        attention_bias=c.attention_bias,
        mlp_bias=c.mlp_bias,
        rope_parameters=reference_rope(c),
        embedding_multiplier=c.embedding_multiplier,
        residual_multiplier=c.residual_multiplier,
        attention_multiplier=c.attention_multiplier if c.attention_multiplier is not None else scale**-0.5,
        logits_scaling=c.logits_scaling,
    )


# Every multiplier far enough from 1 (and from head_dim^-1/2) to move the tiny model's logits well past the tolerance:
# scores scaled by 2 rather than 1/√24, embeddings by 12 and branches by 0.22 (Granite 3's own), logits divided by 3.
# q/k/v/o and MLP biases; head_dim 24 ≠ hidden / heads = 16 (Granite's modules read `head_dim` when the config has it).
TINY_REFERENCES = {
    "granite": TinyReference(
        GraniteForCausalLM,
        lambda **extra: GraniteConfig(
            **DECODER,
            head_dim=24,
            attention_bias=True,
            mlp_bias=True,
            embedding_multiplier=12.0,
            residual_multiplier=0.22,
            attention_multiplier=2.0,
            logits_scaling=3.0,
            **extra,
        ),
    )
}

ARCHITECTURE = Architecture(
    name="granite",
    model_type="granite",
    classes={HFAttentionForCausalLM: GraniteForCausalLM},
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("", GraniteForCausalLM),),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Granite",
        heads="LM",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams, sampling",
        llama_cpp="`head_dim` = hidden / heads ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it",
    ),
)
