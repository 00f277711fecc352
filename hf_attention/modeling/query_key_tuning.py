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

`QueryKeyTuning` holds what one layer does (the layer plan gives it to the layers of a config that sets a knob);
`MultiHeadAttention.project_tuned_qkv` calls it around the rotation. This file is shipped with every checkpoint:
it imports only torch.
"""

import torch
from torch import Tensor, nn


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


class QueryKeyTuning(nn.Module):
    """What one attention layer does to its queries and keys around the rotation (Llama 4). No parameters.

    Args:
        pair_adjacent: The rotated dims pair up as adjacent dims (`rope_interleave`).
        norm_eps: ε of the weightless RMS norm after the rotation (`rotated_qk_norm`; a layer that rotates), or
            None.
        temperature: (floor_scale, attn_scale) of the queries' temperature (`attn_temperature_tuning`; a NoPE
            layer), or None.
    """

    def __init__(self, *, pair_adjacent: bool, norm_eps: float | None, temperature: tuple[int, float] | None):
        super().__init__()
        self.pair_adjacent = pair_adjacent
        self.norm_eps = norm_eps
        self.temperature = temperature

    @classmethod
    def from_config(cls, config, layer_idx: int) -> "QueryKeyTuning | None":
        """Layer `layer_idx`'s tuning from the config's knobs, or None where it would change nothing (every model
        but Llama-4-like ones): the norm on the layers that rotate, the temperature on the others."""
        rotates = config.position_encoding == "rotary" and layer_idx not in config.nope_layers
        pair_adjacent = rotates and getattr(config, "rope_interleave", False)
        norm_eps = config.layer_norm_eps if rotates and getattr(config, "rotated_qk_norm", False) else None
        temperature = None
        if not rotates and getattr(config, "attn_temperature_tuning", False):
            temperature = (config.floor_scale, config.attn_scale)
        if not pair_adjacent and norm_eps is None and temperature is None:
            return None
        return cls(pair_adjacent=pair_adjacent, norm_eps=norm_eps, temperature=temperature)

    def before_rotation(self, query: Tensor, key: Tensor, rotary_dim: int) -> tuple[Tensor, Tensor]:
        """(B, H, T, D) queries and (B, K, T, D) keys with their rotated dims paired as halves (`pair_adjacent`)."""
        if not self.pair_adjacent:
            return query, key
        return pair_halves(query, rotary_dim), pair_halves(key, rotary_dim)

    def after_rotation(self, query: Tensor, key: Tensor, past: int | Tensor) -> tuple[Tensor, Tensor]:
        """The rotated queries and keys normalised (`norm_eps`), the queries of slots past, past + 1, … scaled by
        their temperature (`temperature`)."""
        if self.norm_eps is not None:
            query, key = weightless_rms_norm(query, self.norm_eps), weightless_rms_norm(key, self.norm_eps)
        if self.temperature is not None:
            slots = torch.arange(query.shape[2], device=query.device) + past
            scales = query_temperatures(slots, *self.temperature)  # (T,)
            query = (query * scales[:, None]).to(query.dtype)  # (B, H, T, D)
        return query, key

    def extra_repr(self) -> str:
        return f"pair_adjacent={self.pair_adjacent}, norm_eps={self.norm_eps}, temperature={self.temperature}"
