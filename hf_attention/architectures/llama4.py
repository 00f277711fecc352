"""Llama 4 text (`Llama4ForCausalLM`, model_type "llama4_text"): Llama with three layers in four chunked and rotated,
the fourth global and without rotation, and three turns of the queries and keys.

- Chunked attention (`attention_chunk_size`, `layer_types` "chunked_attention"): the layers that rotate see only the
  earlier tokens of their own chunk of C tokens; their cache keeps C − 1.
- NoPE layers (`no_rope_layers[i] == 0`, every fourth by default): no rotation, and a query temperature that grows
  with the cache slot (`attn_temperature_tuning`, `floor_scale`, `attn_scale`).
- On the layers that rotate: rotation of adjacent pairs (complex form: `rope_interleave`), then a weightless RMS norm
  of each head's queries and keys (`use_qk_norm`: our `rotated_qk_norm`).

The dense feed-forward networks are Llama's, `intermediate_size_mlp` wide (`intermediate_size` sizes the experts).
Its mixture-of-experts layers (`moe_layers`, or every `interleave_moe_layer_step`-th layer): a top-1 router whose
sigmoid scales the expert's input (not its output), experts held as (X, E, 2F) (ours are their transposes), and a
shared expert. transformers has no sequence classifier for Llama 4.
"""

from transformers import Llama4ForCausalLM, Llama4TextConfig, PretrainedConfig

from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.modeling_hf_attention import HFAttentionForCausalLM
from .base import Architecture, ConversionRow, decoder_head
from .gpt_oss import copy_transposed_experts
from .llama import LLAMA_NORMS, decoder_config, reference_fields, reference_rope, rope_knobs
from .smollm3 import nope_interval
from .tiny import DECODER, THETA, TinyReference
from .weights import Weights, unsupported

# The per-layer attention types Llama 4's model makes masks for (any other name fails in transformers' forward).
_LAYER_TYPES = ("full_attention", "chunked_attention")


def _experts_fields(c: Llama4TextConfig) -> dict:
    """The mixture of experts of the `moe_layers` (Llama 4's top-k router whose σ(score) scales the chosen expert's
    input, its experts `intermediate_size` wide, and a shared expert as wide); the others stay dense. transformers'
    Llama 4 returns the router scores when asked but adds no balancing loss: our coefficient is 0."""
    sparse = sorted(set(c.moe_layers or []))
    if not sparse:
        return {"num_experts": None}
    jitter = getattr(c, "router_jitter_noise", 0.0) or 0.0
    if jitter:
        raise unsupported(
            f"Llama4TextConfig.router_jitter_noise={jitter} (training multiplies the router's inputs by noise)",
            "set config.router_jitter_noise=0.0 before converting: it changes training only",
        )
    return {
        "num_experts": c.num_local_experts,
        "num_experts_per_tok": c.num_experts_per_tok,
        "router": "top_k_sigmoid_input",
        "moe_intermediate_size": c.intermediate_size,
        "shared_expert_intermediate_size": c.intermediate_size,
        "mlp_only_layers": [index for index in range(c.num_hidden_layers) if index not in sparse] or None,
        "output_router_logits": bool(c.output_router_logits),
        "router_aux_loss_coef": 0.0,
    }


def _chunk_fields(c: Llama4TextConfig) -> dict:
    """`attention_chunk_size` and `layer_types` of ours: None where no layer is chunked (and every layer full), the
    types left None where every layer is chunked (our config derives that from the chunk size)."""
    types = list(c.layer_types or [])[: c.num_hidden_layers]
    other = sorted({kind for kind in types if kind not in _LAYER_TYPES})
    if other:
        raise unsupported(
            f"Llama4TextConfig.layer_types entries {other} (Llama 4's model makes masks for "
            f"{', '.join(map(repr, _LAYER_TYPES))} only)"
        )
    if "chunked_attention" not in types:
        return {"attention_chunk_size": None, "layer_types": None}
    if c.attention_chunk_size is None:
        # transformers' own forward pass fails on such a model (its chunked mask needs the size)
        raise ValueError(
            "from_hf: Llama4TextConfig.layer_types has 'chunked_attention' layers but "
            "Llama4TextConfig.attention_chunk_size=None: set config.attention_chunk_size to the chunk they were "
            "trained with, or make them 'full_attention', before converting."
        )
    every = all(kind == "chunked_attention" for kind in types)
    return {"attention_chunk_size": c.attention_chunk_size, "layer_types": None if every else types}


def _tuning_fields(c: Llama4TextConfig, nope_layers: list[int]) -> dict:
    """The turns of the queries and keys: adjacent pairs always (Llama 4 rotates in complex form), the norm where
    some layer rotates, the temperature where some layer does not (each acts on those layers only)."""
    rotating = len(nope_layers) < c.num_hidden_layers
    fields = {
        "rope_interleave": True,
        "rotated_qk_norm": bool(c.use_qk_norm) and rotating,
        "attn_temperature_tuning": bool(c.attn_temperature_tuning) and bool(nope_layers),
    }
    if fields["attn_temperature_tuning"]:
        fields |= {"floor_scale": c.floor_scale, "attn_scale": c.attn_scale}
    return fields


def to_ours(model: Llama4ForCausalLM, w: Weights):
    c = model.config
    # transformers' `no_rope_layers[i]` is 1 where layer i DOES rotate (at least one entry per layer)
    nope_layers = [index for index, rotates in enumerate(c.no_rope_layers[: c.num_hidden_layers]) if not rotates]
    config = decoder_config(
        c,
        w,
        classifier=False,
        intermediate_size=c.intermediate_size_mlp,  # the dense layers' width
        nope_layers=nope_layers,
        **_experts_fields(c),
        **_chunk_fields(c),
        **_tuning_fields(c, nope_layers),
        **rope_knobs(dict(c.rope_parameters or {}), architecture="Llama 4"),
    )
    copy_layers(w, c.num_hidden_layers)
    return decoder_head(w, config, "lm_head", classifier=False), config, {}


def copy_layers(w: Weights, num_layers: int) -> None:
    """Llama's layout, but the feed-forward network is `feed_forward` and the attention has no norm weights."""
    w.copy("model.decoder.embed_tokens", "model.embed_tokens")
    for i in range(num_layers):
        src, dst = f"model.layers.{i}", f"model.decoder.layers.{i}"
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            w.copy(f"{dst}.self_attn.{name}", f"{src}.self_attn.{name}")
        for name in ("gate_proj", "up_proj", "down_proj"):
            w.copy(f"{dst}.mlp.{name}", f"{src}.feed_forward.{name}")
            w.copy(f"{dst}.mlp.shared_expert.{name}", f"{src}.feed_forward.shared_expert.{name}")
        if f"{src}.feed_forward.router.weight" in w:  # a layer of experts
            w.copy(f"{dst}.mlp.router", f"{src}.feed_forward.router")
            copy_transposed_experts(w, f"{src}.feed_forward", f"{dst}.mlp")
        for ours, theirs in LLAMA_NORMS.items():
            w.copy(f"{dst}.{ours}", f"{src}.{theirs}")
    w.copy("model.decoder.norm", "model.norm")


def moe_step(moe_layers: list[int], layers: int) -> int:
    """The `interleave_moe_layer_step` s whose every s-th layer (s-1, 2s-1, ...) gives `moe_layers`, as Llama 4's
    released configs state their pattern (Scout: 1, Maverick: 2); 1 when no step does (transformers reads the list
    itself; tools that read only the step, such as llama.cpp's loader, then take every layer as one of experts)."""
    for step in range(1, layers + 1):
        if moe_layers == list(range(step - 1, layers, step)):
            return step
    return 1


def reference_config(c: HFAttentionConfigBase) -> PretrainedConfig:
    layers = c.num_hidden_layers
    fields = reference_fields(c)
    moe_layers = [index for index, kind in enumerate(c.feed_forward_types()) if kind == "mixture_of_experts"]
    # the dense layers' width is Llama 4's intermediate_size_mlp; its intermediate_size, the experts' and the shared
    # expert's
    fields["intermediate_size_mlp"] = fields.pop("intermediate_size")
    return Llama4TextConfig(
        **fields,
        intermediate_size=c.moe_intermediate_size or c.intermediate_size,
        num_local_experts=c.num_experts or 1,
        num_experts_per_tok=min(c.num_experts_per_tok, c.num_experts or 1),
        output_router_logits=getattr(c, "output_router_logits", False),
        head_dim=c.head_dim,
        attention_bias=c.attention_bias,
        rope_parameters=reference_rope(c),
        moe_layers=moe_layers,
        interleave_moe_layer_step=moe_step(moe_layers, layers),
        no_rope_layers=[int(index not in c.nope_layers) for index in range(layers)],
        no_rope_layer_interval=nope_interval(c.nope_layers, layers),
        attention_chunk_size=c.attention_chunk_size,
        layer_types=c.attention_types(),
        use_qk_norm=c.rotated_qk_norm,
        attn_temperature_tuning=c.attn_temperature_tuning,
        floor_scale=c.floor_scale,
        attn_scale=c.attn_scale,
    )


# Four layers: three chunked and rotated (chunks of 4 tokens: a 24-token batch holds six), the fourth global and NoPE
# with a temperature that grows every 2 slots (0.5: up to ×2.3 over 24 tokens). Every layer dense.
TINY_REFERENCES = {
    # layers 1 and 3 of experts (4 of width 32, one per token, beside a shared expert): Llama 4 Maverick's pattern
    "llama4_moe": TinyReference(
        Llama4ForCausalLM,
        lambda **extra: Llama4TextConfig(
            **{**DECODER, "num_hidden_layers": 4, "intermediate_size": 32},
            head_dim=16,
            intermediate_size_mlp=80,
            num_local_experts=4,
            num_experts_per_tok=1,
            moe_layers=[1, 3],
            no_rope_layers=[1, 1, 1, 0],
            attention_chunk_size=4,
            attn_temperature_tuning=True,
            floor_scale=2,
            attn_scale=0.5,
            use_qk_norm=True,
            rope_parameters={"rope_type": "default", "rope_theta": THETA},
            **extra,
        ),
    ),
    "llama4": TinyReference(
        Llama4ForCausalLM,
        lambda **extra: Llama4TextConfig(
            **{**DECODER, "num_hidden_layers": 4},
            head_dim=16,
            intermediate_size_mlp=80,
            moe_layers=[],
            no_rope_layers=[1, 1, 1, 0],
            attention_chunk_size=4,
            attn_temperature_tuning=True,
            floor_scale=2,
            attn_scale=0.5,
            use_qk_norm=True,
            rope_parameters={"rope_type": "default", "rope_theta": THETA},
            **extra,
        ),
    ),
}

ARCHITECTURE = Architecture(
    name="llama4",
    model_type="llama4_text",
    classes={HFAttentionForCausalLM: Llama4ForCausalLM},
    to_ours=to_ours,
    reference_config=reference_config,
    checkpoint_classes=(("", Llama4ForCausalLM),),
    tiny_references=TINY_REFERENCES,
    docs=ConversionRow(
        title="Llama 4",
        detail=" text",
        heads="LM",
        from_hf="test_modern_parity.py, test_llama4_attention.py",
        to_hf="test_modern_parity.py",
        generate="greedy, beams, sampling",
        llama_cpp="experts every n-th layer, chunks of 8192 ([deploy.md](deploy.md#llamacpp))",
        ctranslate2="no converter for it",
    ),
)
