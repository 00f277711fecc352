"""Llama 4's turns of a layer's queries and keys around the rotation, each off by default.

Notation: B batch, H query heads, K key/value heads, T new tokens, D head dim, R rotated dims per head.

Three ideas of Llama 4 (Meta 2025; transformers' `Llama4TextAttention`), each a knob under transformers' name:

- `rope_interleave`: the rotation turns adjacent pairs (x0, x1), (x2, x3), … (Llama 4 multiplies them as complex
  numbers) where `apply_rotary` turns halves (x_i, x_{i+R/2}). Gathering the even dims, then the odd ones
  (`pair_halves`) makes the pairs halves; queries and keys are reordered alike, so every q·k is unchanged, and so is
  the norm below (a mean over the head's dims).
- `rotated_qk_norm`: after the rotation, on the layers that rotate, a weightless RMS norm over each head's D values,
  x·(mean(x²) + ε)^-1/2, computed in float32 (Llama 4's `use_qk_norm`, `Llama4TextL2Norm`).
- `attn_temperature_tuning`: on the layers that do not rotate (NoPE), the query of the token in cache slot p is
  multiplied by 1 + attn_scale·log(1 + ⌊(p + 1) / floor_scale⌋), so that attention stays sharp as the context grows
  (transformers cites Nakanishi 2025, "Scalable-Softmax Is Superior for Attention"). p counts the cache slots, as
  transformers counts them: the tokens already cached plus the column, padding included.

And one of ERNIE 4.5 (Baidu 2025; transformers' `Ernie4_5` `apply_rotary_pos_emb`): `rope_in_float32`, the rotation
computed in float32 (the positional scheme then makes float32 tables), its output cast back to the queries' dtype
before anything else; in float32 it changes nothing, in bf16 or fp16 it rounds once instead of after every product.

And one of Ministral 3 (Mistral AI 2025; transformers' `get_llama_4_attn_scale`, which its name credits to Llama 4):
`llama_4_scaling_beta`, on every layer after the rotation, the query of the token at position p multiplied by
1 + β·ln(1 + ⌊p / L⌋), L = `llama_4_scaling_length` (the RoPE's original length): 1 within the trained length, growing
by steps past it. Unlike the temperature above, p is the token's position id (the rotation's: counted from a row's
first real token), not its cache slot, p rather than p + 1, and every layer, not only NoPE ones.

And one of Hunyuan (Tencent 2025; transformers' `HunYuanDenseV1Attention`): `qk_norm_after_rotation`, the weighted
norms of `qk_norm='head'` (a norm with a learned gain over each head's D values, as Qwen3's) applied to the rotated
queries and keys instead of before the rotation, on every layer. The two norms are then this module's (`q_norm`,
`k_norm`, built by `from_config`), and the attention has none of its own.

`QueryKeyTuning` holds what one layer does (the layer plan gives it to the layers of a config that sets a knob);
`MultiHeadAttention.project_tuned_qkv` calls it around the rotation. This file is shipped with every checkpoint:
it imports only torch and norms.py.
"""

import torch
from torch import Tensor, nn

from .norms import make_norm


def pair_halves(x: Tensor, rotary_dim: int) -> Tensor:
    """(x0, x1, x2, x3, …) → (x0, x2, …, x1, x3, …) on the first `rotary_dim` dims of the last axis (the rest
    unchanged): adjacent pairs become the halves that `apply_rotary` turns (transformers' DeepSeek and Llama 4
    rotate adjacent pairs)."""
    rotated = x[..., :rotary_dim]
    paired = torch.cat((rotated[..., 0::2], rotated[..., 1::2]), dim=-1)
    if rotary_dim == x.shape[-1]:
        return paired
    return torch.cat((paired, x[..., rotary_dim:]), dim=-1)


def weightless_rms_norm(x: Tensor, eps: float) -> Tensor:
    """x·(mean(x²) + ε)^-1/2 over the last axis, in float32, returned in x's dtype (Llama 4's q/k norm)."""
    wide = x.float()
    return (wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)).type_as(x)


def query_temperatures(slots: Tensor, floor_scale: int, attn_scale: float) -> Tensor:
    """1 + attn_scale·log(1 + ⌊(p + 1) / floor_scale⌋) for each cache slot p, in float32 (transformers' formula)."""
    return torch.log1p(torch.floor((slots.float() + 1.0) / floor_scale)) * attn_scale + 1.0


def position_query_scales(positions: Tensor, beta: float, length: int) -> Tensor:
    """1 + β·ln(1 + ⌊p / L⌋) for each position id p, in float32, in transformers' order of operations (Ministral 3's
    `get_llama_4_attn_scale`)."""
    return 1 + beta * torch.log(1 + torch.floor(positions / length))


class QueryKeyTuning(nn.Module):
    """What one attention layer does to its queries and keys around the rotation (Llama 4). No parameters but the
    weights of `norms`.

    Args:
        pair_adjacent: The rotated dims pair up as adjacent dims (`rope_interleave`).
        float32: The rotation is computed in float32, its output cast back (`rope_in_float32`; a layer that rotates).
        norm_eps: ε of the weightless RMS norm after the rotation (`rotated_qk_norm`; a layer that rotates), or
            None.
        temperature: (floor_scale, attn_scale) of the queries' temperature (`attn_temperature_tuning`; a NoPE
            layer), or None.
        position_scaling: (β, L) of the queries' scale by position id (`llama_4_scaling_beta`,
            `llama_4_scaling_length`; every layer), or None.
        norms: The (query, key) norms of each head, with their weights, run after the rotation
            (`qk_norm_after_rotation`; every layer), or None.
    """

    def __init__(
        self,
        *,
        pair_adjacent: bool,
        norm_eps: float | None,
        temperature: tuple[int, float] | None,
        float32: bool = False,
        position_scaling: tuple[float, int] | None = None,
        norms: tuple[nn.Module, nn.Module] | None = None,
    ):
        super().__init__()
        self.q_norm, self.k_norm = norms or (None, None)
        self.pair_adjacent = pair_adjacent
        self.float32 = float32
        self.norm_eps = norm_eps
        self.temperature = temperature
        self.position_scaling = position_scaling

    @classmethod
    def from_config(cls, config, layer_idx: int) -> "QueryKeyTuning | None":
        """Layer `layer_idx`'s tuning from the config's knobs, or None where it would change nothing (every model
        but Llama-4-like and ERNIE-4.5-like ones): the norm and the float32 rotation on the layers that rotate, the
        temperature on the others."""
        rotates = config.position_encoding == "rotary" and layer_idx not in config.nope_layers
        pair_adjacent = rotates and getattr(config, "rope_interleave", False)
        float32 = rotates and getattr(config, "rope_in_float32", False)
        norm_eps = config.layer_norm_eps if rotates and getattr(config, "rotated_qk_norm", False) else None
        temperature = None
        if not rotates and getattr(config, "attn_temperature_tuning", False):
            temperature = (config.floor_scale, config.attn_scale)
        beta = getattr(config, "llama_4_scaling_beta", None)  # Ministral 3: every layer, rotating or not
        position_scaling = None if beta is None else (beta, config.llama_4_scaling_length)
        norms = None
        if getattr(config, "qk_norm_after_rotation", False):  # Hunyuan: the weighted norms, every layer
            bias = getattr(config, "norm_bias", True)
            norms = tuple(make_norm(config.norm_type, config.head_dim, config.layer_norm_eps, bias=bias) for _ in "qk")
        idle = not pair_adjacent and norm_eps is None and temperature is None and not float32 and not position_scaling
        if idle and norms is None:
            return None
        return cls(
            pair_adjacent=pair_adjacent,
            norm_eps=norm_eps,
            temperature=temperature,
            float32=float32,
            position_scaling=position_scaling,
            norms=norms,
        )

    def before_rotation(self, query: Tensor, key: Tensor, rotary_dim: int) -> tuple[Tensor, Tensor]:
        """(B, H, T, D) queries and (B, K, T, D) keys with their rotated dims paired as halves (`pair_adjacent`),
        in float32 (`float32`)."""
        if self.pair_adjacent:
            query, key = pair_halves(query, rotary_dim), pair_halves(key, rotary_dim)
        if self.float32:
            query, key = query.float(), key.float()
        return query, key

    def after_rotation(
        self,
        query: Tensor,
        key: Tensor,
        past: int | Tensor,
        dtype: torch.dtype | None = None,
        positions: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """The rotated queries and keys back in `dtype`, theirs before the rotation (`float32`), then normalised
        (`norm_eps`), the queries of slots past, past + 1, … scaled by their temperature (`temperature`), and those
        of the (B|1, T) position ids `positions` by their position scale (`position_scaling`). The weighted norms
        (`norms`) run where the weightless one would (the config allows one of them)."""
        if self.float32 and dtype is not None:
            query, key = query.to(dtype), key.to(dtype)
        if self.q_norm is not None:
            query, key = self.q_norm(query), self.k_norm(key)
        if self.norm_eps is not None:
            query, key = weightless_rms_norm(query, self.norm_eps), weightless_rms_norm(key, self.norm_eps)
        if self.temperature is not None:
            slots = torch.arange(query.shape[2], device=query.device) + past
            scales = query_temperatures(slots, *self.temperature)  # (T,)
            query = (query * scales[:, None]).to(query.dtype)  # (B, H, T, D)
        if self.position_scaling is not None:
            if positions is None:
                raise ValueError(
                    "llama_4_scaling_beta scales each query by its position id: pass position_ids to the attention "
                    "layer (the model's stack does)."
                )
            scales = position_query_scales(positions, *self.position_scaling)  # (B|1, T)
            query = query * scales[:, None, :, None].to(query.dtype)  # (B, H, T, D), as transformers casts it
        return query, key

    def extra_repr(self) -> str:
        return (
            f"pair_adjacent={self.pair_adjacent}, float32={self.float32}, norm_eps={self.norm_eps}, "
            f"temperature={self.temperature}, position_scaling={self.position_scaling}"
        )
