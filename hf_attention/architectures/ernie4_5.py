"""ERNIE 4.5 dense (`Ernie4_5ForCausalLM`, model_type "ernie4_5"; Baidu 2025): Llama's layer with two differences.

- The rotation turns adjacent pairs (x0, x1), (x2, x3), … (transformers' comment: "glm rope style"): our
  `rope_interleave`, and it is computed in float32, the rotated queries and keys cast back to the model's dtype
  afterwards: our `rope_in_float32` (in float32 the same numbers as a rotation in the model's dtype; in bf16 and
  fp16 only it gives transformers' numbers). Its default frequencies span the whole head whatever a
  `partial_rotary_factor` in `rope_parameters` says (the other scalings honour one, and then its attention fails).
- One switch, `use_bias`, puts a bias on the q/k/v/o projections and on the feed-forward network's three: our
  `attention_bias` and `mlp_bias` together (the output projection's follows `attention_bias`).

Its attention has no dropout (its config has no such field). transformers has no sequence classifier for it.
"""

import copy

from transformers import Ernie4_5Config, Ernie4_5ForCausalLM, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import LLAMA_NORMS, copy_layers, decoder_config, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, TinyReference
from .weights import Weights


def to_ours(model: Ernie4_5ForCausalLM, w: Weights):
    c = model.config
    bias = bool(c.use_bias)
    # Llama's reading of a config reads its attention dropout, which ERNIE's attention fixes at 0.0: read a copy that
    # says so (a value a user stored on the config changes nothing in transformers' model, nor here).
    source = copy.copy(c)
    source.attention_dropout = 0.0
    rope = dict(c.rope_parameters or {})
    if rope.get("rope_type", "default") == "default":  # ERNIE's own default frequencies ignore the factor
        rope.pop("partial_rotary_factor", None)
    config = decoder_config(
        source,
        w,
        classifier=False,
        attention_bias=bias,
        mlp_bias=bias,
        rope_interleave=True,
        rope_in_float32=True,
        **rope_knobs(rope, architecture="ERNIE 4.5"),
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS)
    return decoder_head(w, config, "lm_head", classifier=False), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    # One switch for every bias: ours with the feed-forward network's or the output projection's set apart differ
    # from what the reference derives, and to_hf names that field.
    fields = reference_fields(c)
    del fields["attention_dropout"]  # no such field: ERNIE's attention has no dropout (to_hf reports ours)
    return Ernie4_5Config(**fields, head_dim=c.head_dim, use_bias=c.attention_bias, rope_parameters=reference_rope(c))


# Biases everywhere, head_dim 24 ≠ hidden / heads = 16, the class's tied embeddings; then no bias, the head_dim the
# class derives (hidden / heads) and an untied LM head.
TINY_REFERENCES = {
    "ernie4_5": TinyReference(
        Ernie4_5ForCausalLM, lambda **extra: Ernie4_5Config(**DECODER, head_dim=24, use_bias=True, **extra)
    ),
    "ernie4_5_plain": TinyReference(
        Ernie4_5ForCausalLM,
        lambda **extra: Ernie4_5Config(**DECODER, head_dim=None, use_bias=False, tie_word_embeddings=False, **extra),
    ),
}

ARCHITECTURE = Architecture(
    name="ernie4_5",
    model_type="ernie4_5",
    classes={HFAttentionForCausalLM: Ernie4_5ForCausalLM},
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("", Ernie4_5ForCausalLM),),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="ERNIE 4.5",
        heads="LM",
        from_hf="test_modern_parity.py, test_rope_in_float32.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams, sampling",
        llama_cpp="its converter needs a SentencePiece `tokenizer.model` ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it",
    ),
)
