"""Norms, and `NORMS`, the one table of them by name that the config, the builders and the models' initialisation read.

Notation: E model dim.

A norm takes `(dim, eps=)` and starts as the identity scale (weight 1, bias 0 if it has one; `_init_weights` does this
for every registered norm). This file imports only torch, so the config (shipped alone with every checkpoint) can
validate `norm_type` against the table without loading the modeling code.
"""

import torch
from torch import Tensor, nn

from .compiled_regions import ElementwiseRegion


class _RMSNormFunction(torch.autograd.Function):
    """g ⊙ x̂ with x̂ = x·r, r = (mean(x²) + ε)^(-1/2), and its gradient in closed form (fp32 training).

    dL/dx = r·(g' − x̂·mean(g'·x̂)) with g' = dL/dy ⊙ g, and dL/dg = Σ dL/dy ⊙ x̂ over all rows. Autograd through the
    composite form runs a dozen elementwise passes backward; this runs five, which matters because a T5 step has 22
    norms.
    """

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, eps: float) -> Tensor:
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)  # (…, 1)
        normed = x * rstd
        ctx.save_for_backward(normed, rstd, weight)
        return weight * normed

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_output: Tensor):
        normed, rstd, weight = ctx.saved_tensors
        grad_x = grad_weight = None
        if ctx.needs_input_grad[0]:
            grad_normed = grad_output * weight
            grad_x = (grad_normed - normed * (grad_normed * normed).mean(-1, keepdim=True)).mul_(rstd)
        if ctx.needs_input_grad[1]:
            grad_weight = (grad_output * normed).reshape(-1, normed.shape[-1]).sum(0)
        return grad_x, grad_weight, None


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
        if x.device.type in rms_norm_region.device_types and rms_norm_region.applies(x, self.weight):
            return rms_norm_region(x, self.weight, self.eps)
        fp32 = x.dtype == self.weight.dtype == torch.float32
        if (
            fp32
            and torch.is_grad_enabled()
            and not torch.compiler.is_compiling()
            and (x.requires_grad or self.weight.requires_grad)
        ):
            return _RMSNormFunction.apply(x, self.weight, self.eps)
        # torch's kernel computes exactly x·rsqrt(mean(x²) + ε) (bit-identical to the three-op form above); in fp32
        # it also applies the gain (the same products as `weight * normed`, one op fewer per call).
        if fp32:
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
