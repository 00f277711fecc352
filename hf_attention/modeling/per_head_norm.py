"""A norm over each attention head's values whose gain (and bias) belongs to that head: `qk_norm="per_head"`.

Notation: H heads (query heads, or key/value heads), D head dim.

QK-norm (Dehghani et al. 2023; Wortsman et al. 2023) normalises queries and keys before the dot product so that their
scores cannot grow without bound. Qwen3 and Gemma 3 normalise each head's D values with one gain of D values that every
head shares (`qk_norm="head"`); Cohere's Command R (transformers' `CohereLayerNorm((heads, head_dim))` with
`use_qk_norm`) gives each head its gain of its own, an (H, D) weight. The statistics are still those of one head's D
values; only the gain differs. This module takes the projection as a layer gives it, (…, H·D) with a token's heads
side by side, so that the attention module applies it where it applies a norm over the whole projection (before
viewing the heads), and its speed paths treat it alike. This file is shipped with every checkpoint: it imports only
torch.
"""

import torch
from torch import Tensor, nn

# The norm types (`norm_type`) whose per-head form this module computes, and each one's initial gain.
INITIAL_GAINS = {"layernorm": 1.0, "rmsnorm": 1.0, "offset_rmsnorm": 0.0}


class PerHeadNorm(nn.Module):
    """`norm_type`'s norm over each head's D values, with a gain of each head's own: weight (H, D).

    layernorm: (x − mean) / sqrt(var + ε) · g (+ b with `bias`), var the biased variance (Cohere's q/k norm, no bias);
    rmsnorm: x / sqrt(mean(x²) + ε) · g; offset_rmsnorm: the same times (1 + g), g starting at 0 (Gemma's gain).
    Everything runs in float32 and is cast back to the input's dtype at the end, as Cohere's `CohereLayerNorm` does.

    Args:
        norm_type: A key of `INITIAL_GAINS`.
        heads: H.
        dim: D.
        eps: ε.
        bias: A bias of shape (H, D) (layernorm only).
    """

    def __init__(self, norm_type: str, heads: int, dim: int, eps: float, *, bias: bool = False):
        super().__init__()
        if norm_type not in INITIAL_GAINS:
            raise ValueError(
                f"norm_type={norm_type!r} has no per-head form; allowed values are "
                f"{', '.join(map(repr, INITIAL_GAINS))}."
            )
        self.norm_type, self.heads, self.dim, self.eps = norm_type, heads, dim, eps
        self.initial_gain = INITIAL_GAINS[norm_type]  # `_init_weights` starts the weight here
        self.weight = nn.Parameter(torch.full((heads, dim), self.initial_gain))
        self.bias = nn.Parameter(torch.zeros(heads, dim)) if bias and norm_type == "layernorm" else None

    def forward(self, x: Tensor) -> Tensor:
        """(…, H·D) → (…, H·D)."""
        heads = x.float().unflatten(-1, (self.heads, self.dim))  # (…, H, D)
        if self.norm_type == "layernorm":
            normed = nn.functional.layer_norm(heads, (self.dim,), eps=self.eps)
        else:
            normed = nn.functional.rms_norm(heads, (self.dim,), eps=self.eps)
        gain = self.weight.float()
        if self.norm_type == "offset_rmsnorm":
            gain = 1.0 + gain
        normed = normed * gain
        if self.bias is not None:
            normed = normed + self.bias.float()
        return normed.flatten(-2).to(x.dtype)

    def extra_repr(self) -> str:
        return f"{self.norm_type}, heads={self.heads}, dim={self.dim}, eps={self.eps}, bias={self.bias is not None}"
