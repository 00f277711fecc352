"""Seed-OSS: Llama with a bias on the query, key and value projections (`attention_bias`) and its own switch for the
output projection's (`attention_out_bias`, off), a head width of its own, and dropout on each sublayer's output
before the residual add (`residual_dropout`, training only)."""

from transformers import PretrainedConfig, SeedOssConfig, SeedOssForCausalLM, SeedOssForSequenceClassification

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import LLAMA_NORMS, copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, TinyReference
from .weights import Weights


def to_ours(model: SeedOssForCausalLM | SeedOssForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, SeedOssForSequenceClassification)
    # `pretraining_tp` is stored but read by no module. Our hidden_dropout_prob also drops out the embeddings, which
    # Seed-OSS does not: a difference in training only (as Phi-3's resid_pdrop).
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        attention_output_bias=c.attention_out_bias,
        hidden_dropout_prob=c.residual_dropout,
        **rope_knobs(dict(c.rope_parameters or {}), architecture="Seed-OSS"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    return SeedOssConfig(
        **reference_fields(c),
        head_dim=c.head_dim,
        attention_bias=c.attention_bias,
        attention_out_bias=c.attention_bias if c.attention_output_bias is None else c.attention_output_bias,
        mlp_bias=c.mlp_bias,
        residual_dropout=c.hidden_dropout_prob,
        rope_parameters=reference_rope(c),
    )


# q/k/v biases without an o bias (the class defaults, said explicitly); head_dim 24 ≠ hidden / heads = 16.
TINY_REFERENCES = {
    "seed_oss": TinyReference(
        SeedOssForCausalLM,
        lambda **extra: SeedOssConfig(**DECODER, head_dim=24, attention_bias=True, attention_out_bias=False, **extra),
    )
}
TINY_REFERENCES["seed_oss_classifier"] = TINY_REFERENCES["seed_oss"].classifier(SeedOssForSequenceClassification)

ARCHITECTURE = Architecture(
    name="seed_oss",
    model_type="seed_oss",
    classes={
        HFAttentionForCausalLM: SeedOssForCausalLM,
        HFAttentionDecoderForSequenceClassification: SeedOssForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", SeedOssForSequenceClassification), ("", SeedOssForCausalLM)),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Seed-OSS",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams, sampling",
        llama_cpp="yes ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="not measured",
    ),
)
