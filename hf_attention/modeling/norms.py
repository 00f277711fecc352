"""Norms, and `NORMS`, the one table of them by name that the config, the builders and the models' initialisation read.

Notation: E model dim.

A norm takes `(dim, eps=)` and starts as the identity scale (weight 1, bias 0 if it has one; `_init_weights` does this
for every registered norm). This file imports only torch and two siblings that import only torch (compiled_regions.py,
speed_paths.py), so the config (knobs.py) can validate `norm_type` against the table without loading the modeling
code.
"""

import torch
from torch import Tensor, nn

from .compiled_regions import ElementwiseRegion
from .speed_paths import rms_norm_for_training


def _rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """g ⊙ x / sqrt(mean(x²) + ε), the statistics in float32, the result in x's dtype times g."""
    return weight * nn.functional.rms_norm(x.float(), (x.shape[-1],), eps=eps).to(x.dtype)


# Fused into one kernel forward and one or two backward while training on a GPU (see compiled_regions.py).
rms_norm_region = ElementwiseRegion(_rms_norm)


class RMSNorm(nn.Module):
    """Root-mean-square norm (Zhang & Sennrich 2019): x / sqrt(mean(x²) + ε) · g, no mean subtraction, no bias.

    Statistics are computed in float32 whatever the input dtype (as T5 and Llama do).

    Args:
        dim: E.
        eps: ε.
    """

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor) -> Tensor:
        """(…, E) → (…, E)."""
        if self.training and torch.is_grad_enabled():  # a training step's speed paths (speed_paths.py)
            fast = rms_norm_for_training(x, self.weight, self.eps, rms_norm_region)
            if fast is not None:
                return fast
        if x.dtype == self.weight.dtype == torch.float32:
            # torch's kernel computes exactly x·rsqrt(mean(x²) + ε), and in fp32 also applies the gain (the same
            # products as `_rms_norm`, one op fewer per call)
            return nn.functional.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        return _rms_norm(x, self.weight, self.eps)


class OffsetRMSNorm(nn.Module):
    """RMSNorm whose gain is 1 + w, w starting at 0 (Gemma): x / sqrt(mean(x²) + ε) · (1 + w).

    Weight decay then pulls the gain towards 1, not 0. Everything runs in float32 and is cast back at the end, as
    Gemma does.

    Args:
        dim: E.
        eps: ε.
    """

    initial_gain = 0.0  # `_init_weights` starts the weight here: a gain of 1

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x: Tensor) -> Tensor:
        """(…, E) → (…, E)."""
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (normed * (1.0 + self.weight.float())).type_as(x)


NORMS = {"layernorm": nn.LayerNorm, "rmsnorm": RMSNorm, "offset_rmsnorm": OffsetRMSNorm}


def make_norm(norm_type: str, dim: int, eps: float, *, bias: bool = True) -> nn.Module:
    """A norm by name (`NORMS`); `bias` applies to LayerNorm, the only one with a bias (ModernBERT's have none)."""
    if norm_type == "layernorm":
        return nn.LayerNorm(dim, eps=eps, bias=bias)
    return NORMS[norm_type](dim, eps=eps)
