"""Llama: a pre-norm RMSNorm decoder with rotary positions, a gated feed-forward network, grouped-query attention.

Llama 3.x is the same network with a scaled rotation (`rope_type` "llama3", or "linear", "dynamic", "yarn",
"longrope"). Its descendants (Mistral, Qwen2/Qwen3, SmolLM3, OLMo 2, Gemma 3) keep its weight names and change one or
two ideas each, so the reading and writing of a Llama-shaped checkpoint live here (`rope_knobs`, `copy_layers`,
`reference_rope`) and their modules add only what differs.
"""

from transformers import LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification, PretrainedConfig

from ..modeling.activations import GATED_ACTIVATIONS
from ..modeling.configuration_hf_attention import HFAttentionConfigBase, HFAttentionDecoderConfig
from ..modeling.modeling_hf_attention import HFAttentionDecoderForSequenceClassification, HFAttentionForCausalLM
from ..modeling.rope_scaling import ROPE_SCALINGS
from .base import (
    Architecture,
    ConversionRow,
    activation,
    build_config,
    decoder_head,
    our_labels,
    our_token_ids,
    their_labels,
    their_token_ids,
)
from .tiny import DECODER, ORIGINAL_LENGTH, PARITY_VOCAB, THETA, TinyReference
from .weights import Weights, tied, unsupported

# The keys of transformers' `rope_parameters` that are not a scaling's options.
_ROPE_OWN_KEYS = ("rope_type", "rope_theta", "partial_rotary_factor")


def rope_knobs(rope: dict, *, architecture: str, partial: bool = False) -> dict:
    """Our rotary knobs for a reference's (standardized, flat) `rope_parameters`: the type, its base and the options
    that type reads (transformers keeps some that its formula never reads: they change nothing and are left out).
    `partial`: whether the architecture rotates part of each head (Phi-3); elsewhere a factor is refused by name."""
    rope_type = rope.get("rope_type", "default")
    if rope_type not in ROPE_SCALINGS:
        raise unsupported(
            f"{architecture} rope_parameters rope_type={rope_type!r} (supported: {', '.join(ROPE_SCALINGS)})"
        )
    factor = rope.get("partial_rotary_factor", 1.0) or 1.0
    if factor != 1.0 and not partial:
        raise unsupported(f"{architecture} partial_rotary_factor={factor} (its attention rotates whole heads)")
    scaling = ROPE_SCALINGS[rope_type]
    options = {key: value for key, value in rope.items() if key in (*scaling.required, *scaling.optional)}
    return {
        "rope_theta": rope.get("rope_theta", 10000.0),
        "rope_type": rope_type,
        "rope_scaling_options": options,
        "partial_rotary_factor": factor,
    }


def reference_rope(c: HFAttentionConfigBase, *, partial: bool = False) -> dict:
    """transformers' `rope_parameters` for our rotary knobs (the inverse of `rope_knobs`). A partial rotation where
    the architecture has none is written as a plain one (the scaling's per-frequency options would not fit the whole
    head), and the comparison names the difference."""
    if not partial and c.partial_rotary_factor != 1.0:
        return {"rope_type": "default", "rope_theta": float(c.rope_theta)}
    rope = {"rope_type": c.rope_type, "rope_theta": float(c.rope_theta), **c.rope_scaling_options}
    if partial:
        rope["partial_rotary_factor"] = c.partial_rotary_factor
    return rope


def layer_types_of(c: PretrainedConfig) -> dict:
    """`sliding_window` and `layer_types` of a reference that names its layers' types; None for types that are all
    what our config derives by itself (every layer sliding with a window, every layer full without)."""
    window = getattr(c, "sliding_window", None)
    types = list(getattr(c, "layer_types", None) or [])
    if "sliding_attention" not in types:
        return {"sliding_window": None, "layer_types": None}
    if window is None:
        # transformers builds such a model, then fails on its first forward pass (its cache and its mask need the
        # window): there is no computation to convert.
        name = type(c).__name__
        sliding = [index for index, kind in enumerate(types) if kind == "sliding_attention"]
        flag = (
            f" (and use_sliding_window=True: {name} keeps the window only with it)"
            if getattr(c, "use_sliding_window", None) is False
            else ""
        )
        raise ValueError(
            f"from_hf: {name}.layer_types makes layers {sliding} 'sliding_attention' but {name}.sliding_window=None: "
            f"those layers have no window (transformers' own forward pass fails on them). Set config.sliding_window "
            f"to the window they were trained with{flag}, or make them 'full_attention', before converting."
        )
    if all(kind == "sliding_attention" for kind in types):
        return {"sliding_window": window, "layer_types": None}
    return {"sliding_window": window, "layer_types": types}


def decoder_config(c: PretrainedConfig, w: Weights, *, classifier: bool, **knobs) -> HFAttentionDecoderConfig:
    """Our decoder config for a Llama-shaped reference; `knobs` are the architecture's own ideas (and overrides)."""
    hidden_act = knobs.pop("hidden_act", None) or activation(c.hidden_act, "hidden_act", gated=True)
    fields = {
        "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "head_dim": getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads,
        "intermediate_size": c.intermediate_size,
        "hidden_act": hidden_act,
        "max_position_embeddings": c.max_position_embeddings,
        "position_encoding": "rotary",
        "norm_position": "pre",
        "norm_type": "rmsnorm",
        "scale_embeddings": False,
        "final_norm": True,
        "attention_bias": bool(getattr(c, "attention_bias", False)),
        "mlp_bias": bool(getattr(c, "mlp_bias", False)),
        "layer_norm_eps": c.rms_norm_eps,
        "hidden_dropout_prob": 0.0,
        "attention_dropout": c.attention_dropout,
        "initializer_range": c.initializer_range,
        "tie_word_embeddings": tied(w, "lm_head.weight", "model.embed_tokens.weight", c.tie_word_embeddings),
        # only the classifier reads the pad id (each row's last real token); a causal LM's forward pass does not
        **their_token_ids(c, reads_pad=classifier),
        **(their_labels(c) if classifier else {}),
    }
    fields |= knobs
    _check_rope_options(c, fields)
    return build_config(HFAttentionDecoderConfig, c, **fields)


def _check_rope_options(c: PretrainedConfig, fields: dict) -> None:
    """Refuse, in the source's words, the RoPE scaling options our config refuses (a `factor` of 0 where transformers'
    formula divides by it, a negative number), of which transformers' own validation only warns."""
    rope_type = fields.get("rope_type", "default")
    if rope_type not in ROPE_SCALINGS:  # our config names the type and what it allows
        return
    rotary_dim = int(fields["head_dim"] * fields.get("partial_rotary_factor", 1.0))
    field = f"{type(c).__name__}.rope_parameters"
    try:
        ROPE_SCALINGS[rope_type].check_options(
            fields.get("rope_scaling_options") or {}, rotary_dim=rotary_dim, field=field
        )
    except ValueError as error:
        raise ValueError(f"from_hf: {error} Correct config.rope_parameters before converting.") from None


def copy_layers(w: Weights, num_layers: int, *, norms: dict[str, str], qk_norm: bool = False) -> None:
    """The embedding, layers and final norm of a Llama-shaped reference: q/k/v/o and gate/up/down projections under
    Llama's names, `norms` (our layer norm name → theirs), and q_norm/k_norm when `qk_norm`."""
    w.copy("model.decoder.embed_tokens", "model.embed_tokens")
    for i in range(num_layers):
        src, dst = f"model.layers.{i}", f"model.decoder.layers.{i}"
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            w.copy(f"{dst}.self_attn.{name}", f"{src}.self_attn.{name}")
        if qk_norm:
            w.copy(f"{dst}.self_attn.q_norm", f"{src}.self_attn.q_norm")
            w.copy(f"{dst}.self_attn.k_norm", f"{src}.self_attn.k_norm")
        for name in ("gate_proj", "up_proj", "down_proj"):
            w.copy(f"{dst}.mlp.{name}", f"{src}.mlp.{name}")
        for ours, theirs in norms.items():
            w.copy(f"{dst}.{ours}", f"{src}.{theirs}")
    w.copy("model.decoder.norm", "model.norm")


LLAMA_NORMS = {"self_attn_norm": "input_layernorm", "mlp_norm": "post_attention_layernorm"}


def reference_fields(c: HFAttentionConfigBase) -> dict:
    """The fields every Llama-shaped reference config takes from ours."""
    return {
        "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size,
        "num_hidden_layers": c.num_hidden_layers,
        "num_attention_heads": c.num_attention_heads,
        "num_key_value_heads": c.num_key_value_heads,
        "intermediate_size": c.intermediate_size,
        "hidden_act": GATED_ACTIVATIONS.get(c.hidden_act, "silu"),
        "max_position_embeddings": c.max_position_embeddings,
        "rms_norm_eps": c.layer_norm_eps,
        "attention_dropout": c.attention_dropout,
        "initializer_range": c.initializer_range,
        "tie_word_embeddings": c.tie_word_embeddings,
        **our_token_ids(c),
        **our_labels(c),
    }


def to_ours(model: LlamaForCausalLM | LlamaForSequenceClassification, w: Weights):
    c = model.config
    classifier = isinstance(model, LlamaForSequenceClassification)
    config = decoder_config(
        c, w, classifier=classifier, **rope_knobs(dict(c.rope_parameters or {}), architecture="Llama")
    )
    copy_layers(w, c.num_hidden_layers, norms=LLAMA_NORMS)
    return decoder_head(w, config, "lm_head", classifier=classifier), config, {}


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    return LlamaConfig(
        **reference_fields(c),
        head_dim=c.head_dim,
        rope_parameters=reference_rope(c),
        attention_bias=c.attention_bias,
        mlp_bias=c.mlp_bias,
    )


# Rotary positions: attention sees only the distances between tokens, so no table, and left padding changes nothing.

# Llama 3's RoPE variants: 2 heads of 32 dims (16 frequencies), so that each variant's piecewise formula has
# frequencies in each of its ranges (YaRN's ramp has a fractional step, llama3 has unscaled, blended and scaled ones).
LLAMA3 = {**DECODER, "num_attention_heads": 2, "num_key_value_heads": 1, "tie_word_embeddings": False}
ROTARY_PAIRS = 16  # LLAMA3's head_dim / 2


def longrope_factors(pairs: int) -> dict:
    """Distinct short and long factors per frequency (1.0 … 3.0), so a swapped or reversed list changes the output."""
    return {
        "short_factor": [1.0 + i / (pairs - 1) for i in range(pairs)],
        "long_factor": [1.0 + 2.0 * i / (pairs - 1) for i in range(pairs)][::-1],
    }


def _llama3(rope: dict, **overrides) -> TinyReference:
    config = {**LLAMA3, **overrides}
    return TinyReference(
        LlamaForCausalLM, lambda **extra: LlamaConfig(**config, **extra, rope_parameters={"rope_theta": THETA, **rope})
    )


# The cases differ only in config.rope_parameters.
TINY_REFERENCES = {
    "llama3_default": _llama3({"rope_type": "default"}),
    "llama3_linear": _llama3({"rope_type": "linear", "factor": 2.0}),
    # dynamic NTK rescales once a call's positions pass max_position_embeddings, its original length.
    "llama3_dynamic": _llama3({"rope_type": "dynamic", "factor": 2.0}, max_position_embeddings=ORIGINAL_LENGTH),
    "llama3_yarn": _llama3({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIGINAL_LENGTH}),
    # Original length 32 (not 16): with 32-dim heads it puts one frequency in each of llama3's three ranges
    # (wavelength < 32/4 kept, 32/4 … 32/1 blended, > 32 divided by the factor). The formula ignores the input length.
    "llama3_llama3": _llama3(
        {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 32,
        }
    ),
    "llama3_longrope": _llama3(
        {
            "rope_type": "longrope",
            "original_max_position_embeddings": ORIGINAL_LENGTH,
            "factor": 4.0,  # max_position_embeddings / original: what transformers infers, said explicitly
            **longrope_factors(ROTARY_PAIRS),
        }
    ),
}


def parity_config(**extra) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=PARITY_VOCAB,
        hidden_size=32,
        intermediate_size=37,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
        **extra,
    )


PARITY_REFERENCES = {
    "llama": TinyReference(LlamaForCausalLM, parity_config),
    "llama_classifier": TinyReference(LlamaForSequenceClassification, lambda: parity_config(num_labels=3)),
}

ARCHITECTURE = Architecture(
    name="llama",
    model_type="llama",
    classes={
        HFAttentionForCausalLM: LlamaForCausalLM,
        HFAttentionDecoderForSequenceClassification: LlamaForSequenceClassification,
    },
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("ForSequenceClassification", LlamaForSequenceClassification), ("", LlamaForCausalLM)),
    parity_references=PARITY_REFERENCES,
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Llama",
        detail=", Llama 3.x RoPE: default, linear, dynamic, yarn, llama3, longrope",
        heads="LM, classifier",
        from_hf="test_parity_hf.py, test_modern_parity.py",
        to_hf="test_to_hf.py, test_modern_parity.py",
        generate="greedy all; beams dynamic; sampling yarn (test_modern_parity.py)",
        llama_cpp="docs/deploy.md (default RoPE)",
        ctranslate2="test_ctranslate2.py (default RoPE)",
    ),
)
