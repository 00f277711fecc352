"""GLM-4 (`Glm4ForCausalLM`, model_type "glm4"; Team GLM 2024, "ChatGLM: A Family of Large Language Models from
GLM-130B to GLM-4 All Tools"): Llama with four RMSNorms per layer, a bias on the query, key and value projections,
and a rotation of part of each head on adjacent pairs.

- Sandwich norms: each sublayer reads Norm(x) and adds Norm'(Sublayer(Norm(x))), as Gemma 2/3 (plain RMSNorms with
  gain w, not Gemma's 1 + w). Its names: `input_layernorm` and `post_self_attn_layernorm` around the attention,
  `post_attention_layernorm` (before the feed-forward network, as in Llama) and `post_mlp_layernorm` around it.
- The first int(D · partial_rotary_factor) dims of each head (half, by default) rotate as adjacent pairs (x0, x1),
  (x2, x3), … (its `rotate_half` turns dims 2i and 2i+1 by p·θ_i): our `rope_interleave` with our
  `partial_rotary_factor`.
- `attention_bias` puts a bias on q/k/v only; the output projection has none (our `attention_output_bias=False`).
- The gate and up projections are one matrix `gate_up_proj`, rows [gate: F | up: F], read as views into ours (as
  Phi-3's), so that an export writes into the fused matrix.
"""

from transformers import Glm4Config, Glm4ForCausalLM, Glm4ForSequenceClassification, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import decoder_config, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, THETA, TinyReference
from .weights import Weights

# Our norm → GLM-4's: the "sandwich" placement's four norms of a layer.
GLM4_NORMS = {
    "self_attn_norm": "input_layernorm",
    "self_attn_output_norm": "post_self_attn_layernorm",
    "mlp_norm": "post_attention_layernorm",
    "mlp_output_norm": "post_mlp_layernorm",
}


def to_ours(model: Glm4ForCausalLM | Glm4ForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, Glm4ForSequenceClassification)
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        norm_position="sandwich",
        attention_output_bias=False,
        rope_interleave=True,
        **rope_knobs(dict(c.rope_parameters or {}), architecture="GLM-4", partial=True),
    )
    w.copy("model.decoder.embed_tokens", "model.embed_tokens")
    for i in range(c.num_hidden_layers):
        src, dst = f"model.layers.{i}", f"model.decoder.layers.{i}"
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            w.copy(f"{dst}.self_attn.{name}", f"{src}.self_attn.{name}")
        # gate_up_proj's rows are [gate: F | up: F] (its forward pass chunks the product in two, gate first)
        gate, up = w.get(f"{src}.mlp.gate_up_proj.weight").chunk(2)
        w.out[f"{dst}.mlp.gate_proj.weight"], w.out[f"{dst}.mlp.up_proj.weight"] = gate, up
        w.copy(f"{dst}.mlp.down_proj", f"{src}.mlp.down_proj")
        for ours, theirs in GLM4_NORMS.items():
            w.copy(f"{dst}.{ours}", f"{src}.{theirs}")
    w.copy("model.decoder.norm", "model.norm")
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    reference = Glm4Config(
        **reference_fields(c),
        head_dim=c.head_dim,
        attention_bias=c.attention_bias,
        rope_parameters=reference_rope(c, partial=True),
    )
    # Glm4Config replaces a None eos id by GLM-4's three ids, which are rows of a full-size vocabulary: ours, as it is
    reference.eos_token_id = c.eos_token_id
    return reference


# head_dim 24 ≠ hidden / heads (16); the first 12 dims of each head rotate as 6 adjacent pairs, the other 12 carry no
# position. q/k/v biases and partial_rotary_factor 0.5 are the class defaults, said explicitly.
TINY_REFERENCES = {
    "glm4": TinyReference(
        Glm4ForCausalLM,
        lambda **extra: Glm4Config(
            **DECODER,
            head_dim=24,
            attention_bias=True,
            rope_parameters={"rope_type": "default", "rope_theta": THETA, "partial_rotary_factor": 0.5},
            **extra,
        ),
    )
}
TINY_REFERENCES["glm4_classifier"] = TINY_REFERENCES["glm4"].classifier(Glm4ForSequenceClassification)

ARCHITECTURE = Architecture(
    name="glm4",
    model_type="glm4",
    classes={
        HFAttentionForCausalLM: Glm4ForCausalLM,
        HFAttentionDecoderForSequenceClassification: Glm4ForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", Glm4ForSequenceClassification), ("", Glm4ForCausalLM)),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="GLM-4",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams, sampling",
        llama_cpp="its vocabulary reader wants GLM's own tokens ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it",
    ),
)
