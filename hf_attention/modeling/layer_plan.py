"""The layer plan: what each layer of a stack is made of, chosen per layer from two registries.

Notation: E model dim.

A layer is a token mixer (how a position reads the others: self-attention over the whole sequence, or over a sliding
window) and a feed-forward network (what each position then computes alone), each wrapped in its residual block with
its norms (layers.py). Which mixer a layer has is named by the config's `layer_types` (transformers 5's names, one
per layer; `HFAttentionConfigBase.attention_types`), which feed-forward network by `feed_forward_types`; the names are
keys of `TOKEN_MIXERS` and `FEED_FORWARDS`. A new kind of layer (latent attention, a linear-attention layer, a
mixture-of-experts feed-forward network) is a new entry of a registry and a name the config gives some layers, not a
branch in the stack: the stack asks the plan for each layer's parts and, per layer, for the mask its mixer reads and
the rotation its positions take.
"""

from collections.abc import Callable
from typing import NamedTuple

from torch import nn

from .activations import activation_options
from .builders import build_attention, build_norm
from .configuration_hf_attention import HFAttentionConfigBase
from .gated_deltanet import GatedDeltaNet
from .latent_attention import MultiHeadLatentAttention
from .layers import DecoderLayer, EncoderLayer, make_feed_forward
from .mixture_of_experts import build_mixture_of_experts
from .parallel_block import ParallelDecoderLayer
from .query_key_tuning import QueryKeyTuning


class TokenMixer(NamedTuple):
    """A kind of token mixer: how to build one, and which of the stack's masks it reads.

    build(config, layer_idx, is_causal) → the module, called as self-attention modules are (hidden states, then the
    mask, rotary tables and cache by name). mask: "full_attention" (every allowed key), "sliding_attention" (the
    keys within the window), "chunked_attention" (the keys of the query's chunk), or "padding": no attention mask
    but the new tokens' (B, T) 0/1 padding mask (None when no token is padding), for a mixer that attends to nothing
    (linear attention; it takes no rotation either).
    """

    build: Callable[[HFAttentionConfigBase, int, bool], nn.Module]
    mask: str


def build_self_attention(config: HFAttentionConfigBase, layer_idx: int, is_causal: bool) -> nn.Module:
    """The configured multi-head self-attention (the window or chunk, when there is one, is in the mask it is given),
    with Llama 4's turns of its queries and keys when the config sets them (query_key_tuning.py)."""
    attention = build_attention(config, layer_idx, is_causal=is_causal, is_cross=False)
    attention.tuning = QueryKeyTuning.from_config(config, layer_idx)  # None for every model but Llama-4-like ones
    return attention


def build_linear_attention(config: HFAttentionConfigBase, layer_idx: int, is_causal: bool) -> nn.Module:
    """Gated DeltaNet of the config's `linear_*` sizes (gated_deltanet.py; causal whatever `is_causal`: the config
    admits it in decoders only)."""
    return GatedDeltaNet.from_config(config, layer_idx)


def build_dense_feed_forward(config: HFAttentionConfigBase, layer_idx: int) -> nn.Module:
    """The position-wise feed-forward network of the configured activation, plain or gated (layers.py); a learned
    activation (xIELU) starts from the config's knobs."""
    return make_feed_forward(
        config.hidden_act,
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        bias=config.mlp_bias,
        dropout=config.activation_dropout,
        activation_options=activation_options(config),
    )


# The token mixer of each layer type, by the name `layer_types` gives it.
TOKEN_MIXERS: dict[str, TokenMixer] = {
    "full_attention": TokenMixer(build_self_attention, "full_attention"),
    "sliding_attention": TokenMixer(build_self_attention, "sliding_attention"),
    "chunked_attention": TokenMixer(build_self_attention, "chunked_attention"),
    "linear_attention": TokenMixer(build_linear_attention, "padding"),
    # Not a name of `layer_types`: the plan gives it to the full_attention layers when `kv_lora_rank` is set, as
    # transformers' DeepSeek-V2/V3 configs call their latent attention layers full_attention.
    "latent_attention": TokenMixer(MultiHeadLatentAttention.from_config, "full_attention"),
}
# The feed-forward network of each kind, by the name `feed_forward_types` gives it: (config, layer_idx) → module.
FEED_FORWARDS: dict[str, Callable[[HFAttentionConfigBase, int], nn.Module]] = {
    "dense": build_dense_feed_forward,
    "mixture_of_experts": build_mixture_of_experts,
}


class LayerPlan(NamedTuple):
    """What differs between the layers of a stack.

    layers: each layer's (mask, rotation): the mask its mixer reads ("full_attention", "sliding_attention",
        "chunked_attention" or "padding") and its rotation, "global" (the stack's rotary scheme), "local" (the
        sliding layers' own base) or None (no rotation: NoPE, a mixer that does not attend, or no rotary scheme).
    mixers, feed_forwards: each layer's token mixer and feed-forward network, by registry name.
    first_full, first_sliding, first_chunked: the first layer of each mask, whose cache slot tells a mask's key
        length.
    uniform: every layer reads the full mask with the stack's rotation (the stack then passes one set to all).
    """

    layers: list[tuple[str, str | None]]
    mixers: list[str]
    feed_forwards: list[str]
    first_full: int | None
    first_sliding: int | None
    first_chunked: int | None
    uniform: bool


def plan_layers(config: HFAttentionConfigBase, num_layers: int) -> LayerPlan:
    """The plan of a stack of `num_layers` layers (the encoder-decoder family's two stacks: all full, dense)."""
    own = config.layer_count() == num_layers
    mixers = (config.attention_types() if own else []) or ["full_attention"] * num_layers
    feed_forwards = (config.feed_forward_types() if own else []) or ["dense"] * num_layers
    if getattr(config, "kv_lora_rank", None) is not None:  # multi-head latent attention (DeepSeek-V2/V3)
        mixers = ["latent_attention" if kind == "full_attention" else kind for kind in mixers]
    masks = [TOKEN_MIXERS[kind].mask for kind in mixers]
    rotary = config.position_encoding == "rotary"
    local = rotary and config.local_rope_theta is not None
    layers = []
    for index, mask in enumerate(masks):
        rotation = "global" if rotary else None
        if rotary and (index in config.nope_layers or mask == "padding"):
            rotation = None
        elif local and mask == "sliding_attention":
            rotation = "local"
        layers.append((mask, rotation))
    return LayerPlan(
        layers=layers,
        mixers=mixers,
        feed_forwards=feed_forwards,
        first_full=masks.index("full_attention") if "full_attention" in masks else None,
        first_sliding=masks.index("sliding_attention") if "sliding_attention" in masks else None,
        first_chunked=masks.index("chunked_attention") if "chunked_attention" in masks else None,
        uniform=set(layers) <= {("full_attention", "global" if rotary else None)},
    )


def build_layer(
    config: HFAttentionConfigBase,
    layer_idx: int,
    *,
    is_decoder: bool,
    has_cross_attention: bool,
    mixer: str = "full_attention",
    feed_forward: str = "dense",
) -> nn.Module:
    """An EncoderLayer, or a DecoderLayer (causal; with cross-attention in the encoder-decoder family), of the plan's
    `mixer` and `feed_forward` kinds, with the configured norms around them."""
    sandwich = config.norm_position == "sandwich"
    # ModernBERT: the embedding norm already normalised the first layer's input
    first_norm = config.first_attention_norm or layer_idx > 0
    parallel = getattr(config, "parallel_block", False)  # (a decoder knob) GPT-J, PaLM, Cohere: one norm for both
    common = {
        "self_attn": TOKEN_MIXERS[mixer].build(config, layer_idx, is_decoder),
        "self_attn_norm": build_norm(config) if first_norm else nn.Identity(),
        "self_attn_output_norm": build_norm(config) if sandwich else None,
        "mlp_output_norm": build_norm(config) if sandwich else None,
        "mlp": FEED_FORWARDS[feed_forward](config, layer_idx),
        "mlp_norm": None if parallel else build_norm(config),
        "norm_position": config.norm_position,
        "dropout": config.hidden_dropout_prob,
        "residual_multiplier": config.residual_multiplier,
    }
    if not is_decoder:
        return EncoderLayer(**common)
    if parallel:  # x + Attn(Norm(x)) + MLP(Norm(x)) (parallel_block.py)
        return ParallelDecoderLayer(**common)
    if has_cross_attention:
        common["cross_attn"] = build_attention(config, layer_idx, is_causal=False, is_cross=True)
        common["cross_attn_norm"] = build_norm(config)
        common["cross_attn_output_norm"] = build_norm(config) if sandwich else None
    return DecoderLayer(**common)
