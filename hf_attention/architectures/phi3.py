"""Phi-3 / Phi-4-mini: Llama with the query, key and value projections fused into one matrix (`qkv_proj`) and the
gate and up projections into another (`gate_up_proj`), read into our separate ones; a partial rotation (the first
`partial_rotary_factor` of each head); LongRoPE's per-frequency factors; an optional window on every layer."""

from transformers import Phi3Config, Phi3ForCausalLM, Phi3ForSequenceClassification, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .llama import decoder_config, longrope_factors, reference_fields, reference_rope, rope_knobs
from .tiny import DECODER, ORIGINAL_LENGTH, THETA, TinyReference
from .weights import Weights, unsupported


def to_ours(model: Phi3ForCausalLM | Phi3ForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, Phi3ForSequenceClassification)
    rope = dict(c.rope_parameters or {})
    if rope.get("rope_type") == "longrope" and getattr(c, "original_max_position_embeddings", None):
        # Phi-3 reads the original length from its config, over the one in rope_parameters
        rope["original_max_position_embeddings"] = c.original_max_position_embeddings
    if rope.get("rope_type", "default") not in ("default", "longrope"):
        raise unsupported(f"Phi-3 rope_type={rope['rope_type']!r} (Phi-3 has 'default' and 'longrope')")
    config = decoder_config(
        c,
        w,
        classifier=classifier,
        hidden_dropout_prob=c.resid_pdrop,
        sliding_window=c.sliding_window,
        # Phi-3's generate() re-encodes the sequence when it first passes the original length
        longrope_recompute_cache=rope.get("rope_type") == "longrope",
        **rope_knobs(rope, architecture="Phi-3", partial=True),
    )
    heads, kv_heads, head_dim = c.num_attention_heads, c.num_key_value_heads, config.head_dim
    w.copy("model.decoder.embed_tokens", "model.embed_tokens")
    for i in range(c.num_hidden_layers):
        src, dst = f"model.layers.{i}", f"model.decoder.layers.{i}"
        # qkv_proj's rows are [q: H·D | k: K·D | v: K·D]; gate_up_proj's [gate: F | up: F]. Views, so that an export
        # writes into the fused matrices.
        query, key, value = w.get(f"{src}.self_attn.qkv_proj.weight").split(
            (heads * head_dim, kv_heads * head_dim, kv_heads * head_dim)
        )
        for name, tensor in (("q_proj", query), ("k_proj", key), ("v_proj", value)):
            w.out[f"{dst}.self_attn.{name}.weight"] = tensor
        gate, up = w.get(f"{src}.mlp.gate_up_proj.weight").chunk(2)
        w.out[f"{dst}.mlp.gate_proj.weight"], w.out[f"{dst}.mlp.up_proj.weight"] = gate, up
        w.copy(f"{dst}.self_attn.o_proj", f"{src}.self_attn.o_proj")
        w.copy(f"{dst}.mlp.down_proj", f"{src}.mlp.down_proj")
        w.copy(f"{dst}.self_attn_norm", f"{src}.input_layernorm")
        w.copy(f"{dst}.mlp_norm", f"{src}.post_attention_layernorm")
    w.copy("model.decoder.norm", "model.norm")
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    rope = reference_rope(c, partial=True)
    if rope["rope_type"] not in (
        "default",
        "longrope",
    ):  # Phi-3 refuses others: written plain, named by the comparison
        rope = {
            "rope_type": "default",
            "rope_theta": rope["rope_theta"],
            "partial_rotary_factor": c.partial_rotary_factor,
        }
    original = rope.get("original_max_position_embeddings", c.max_position_embeddings)
    window = c.sliding_window if c.layer_types is None else None
    return Phi3Config(
        **reference_fields(c),
        resid_pdrop=c.hidden_dropout_prob,
        sliding_window=window,
        original_max_position_embeddings=original,
        rope_parameters=rope,
    )


# Rotary on the first half of each head's 16 dims; the rest pass through. Phi-3 reads original_max_position_embeddings
# from the config itself, over the one in rope_parameters.
LONGROPE = {"rope_type": "longrope", "rope_theta": THETA, "partial_rotary_factor": 0.5, **longrope_factors(4)}
TINY_REFERENCES = {
    "phi3": TinyReference(Phi3ForCausalLM, lambda **extra: Phi3Config(**DECODER, partial_rotary_factor=0.5, **extra)),
    "phi3_longrope": TinyReference(
        Phi3ForCausalLM,
        lambda **extra: Phi3Config(
            **DECODER, original_max_position_embeddings=ORIGINAL_LENGTH, rope_parameters=LONGROPE, **extra
        ),
    ),
}
TINY_REFERENCES["phi3_classifier"] = TINY_REFERENCES["phi3"].classifier(Phi3ForSequenceClassification)

ARCHITECTURE = Architecture(
    name="phi3",
    model_type="phi3",
    classes={
        HFAttentionForCausalLM: Phi3ForCausalLM,
        HFAttentionDecoderForSequenceClassification: Phi3ForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", Phi3ForSequenceClassification), ("", Phi3ForCausalLM)),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Phi-3",
        detail=", plain and LongRoPE",
        heads="LM, classifier",
        from_hf="test_modern_parity.py",
        to_hf="test_modern_parity.py",
        generate="greedy; beams with LongRoPE",
        llama_cpp="needs `tokenizer_class` ([deploy.md](deploy.md#llamacpp))",
        ctranslate2='no: its converter reads transformers 4\'s `rope_scaling["type"]`',
    ),
)
