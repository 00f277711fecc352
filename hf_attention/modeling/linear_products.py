"""Products of `nn.Linear` layers computed from their weights instead of by calling them: when that is allowed
(`plain_linear`), several layers on the same input as one product over their stacked weights (`stack_weights`), and
a wide layer on a few rows in blocks of output features (`BlockedLinear`).

Notation: E input features, V output features (the vocabulary, for an LM head).

This module is inside the remote-code closure: it imports only torch.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

# Weights per block of `BlockedLinear`: 2 MiB, the L2 cache of a core on recent x86 CPUs, so that a block read by the
# first pass over the rows is still in the core's cache for the later ones.
VOCABULARY_BLOCK_BYTES = 2 * 2**20

# Rows per product for which the blocked product pays: with 1-3 rows MKL reads the weights once (blocks would only
# add calls), and from 12-16 rows on it switches to a product that blocks by itself.
BLOCKED_ROWS = range(4, 12)


def plain_linear(module: nn.Module) -> bool:
    """Whether `module` is a plain nn.Linear whose forward nothing intercepts (module or global hooks, such as the
    parameter gathering of DeepSpeed ZeRO-3; a replaced `forward`; adapters such as LoRA or a quantized layer, which
    are other classes), so that a product computed from its `weight` and `bias` is what calling it computes."""
    return (
        type(module) is nn.Linear
        and not module._forward_hooks
        and not module._forward_pre_hooks
        and "forward" not in vars(module)
        and not nn.modules.module._global_forward_hooks
        and not nn.modules.module._global_forward_pre_hooks
    )


def stack_weights(projections: tuple[nn.Linear, ...]) -> tuple[Tensor, Tensor | None]:
    """The weights (and biases) of several nn.Linear on the same input stacked into one: `linear(x, *stacked)` holds
    their outputs side by side. Made under autograd (a training step's fused product differentiates through it);
    make it under `torch.no_grad()` for a copy kept for inference."""
    weight = torch.cat([projection.weight for projection in projections])
    bias = None if projections[0].bias is None else torch.cat([projection.bias for projection in projections])
    return weight, bias


def on_cpu_as_plain_tensors(projections: tuple[nn.Linear, ...]) -> bool:
    """Whether the weights are ordinary tensors (no tensor subclass, which might compute its own product) on CPU,
    the only device the decoding speed-ups were measured on."""
    return all(
        type(projection.weight.data) is torch.Tensor and projection.weight.device.type == "cpu"
        for projection in projections
    )


def blockable(linear: nn.Module | None) -> bool:
    """Whether `BlockedLinear` may stand for `linear`: a plain nn.Linear with float32 weights on CPU (what was
    measured), large enough for at least two blocks."""
    if linear is None or not plain_linear(linear) or not on_cpu_as_plain_tensors((linear,)):
        return False
    weight = linear.weight
    return weight.dtype == torch.float32 and weight.numel() * weight.element_size() >= 2 * VOCABULARY_BLOCK_BYTES


class BlockedLinear:
    """`linear(x)` for x of 4 to 11 rows (`BLOCKED_ROWS`), computed block of output features by block, to the bit.

    With that many rows MKL's product streams the whole (V, E) weight matrix from memory once per 3 rows; cut into
    blocks of `VOCABULARY_BLOCK_BYTES`, each block is still in the core's cache for the later passes. Each output
    element is still one dot product over E, computed by the same kernel. Still, a BLAS picks its kernel by matrix
    shape, so the first call with a given row count computes both and compares them, and a row count whose blocked
    product differed keeps `linear` (checked once per row count, for as long as this object lives). Other row
    counts, gradients and compiled code go to `linear` itself.

    Args:
        linear: An nn.Linear for which `blockable` holds.
    """

    def __init__(self, linear: nn.Linear):
        self.linear = linear
        self.block = max(1, VOCABULARY_BLOCK_BYTES // (linear.in_features * linear.weight.element_size()))
        self.is_exact: dict[int, bool] = {}  # rows → whether the blocked product gave linear's bits

    def __call__(self, x: Tensor) -> Tensor:
        rows = x.shape[:-1].numel()
        if rows not in BLOCKED_ROWS or torch.is_grad_enabled() or torch.compiler.is_compiling():
            return self.linear(x)
        exact = self.is_exact.get(rows)
        if exact is None:
            plain = self.linear(x)
            self.is_exact[rows] = torch.equal(self.blocked(x), plain)
            return plain
        return self.blocked(x) if exact else self.linear(x)

    def blocked(self, x: Tensor) -> Tensor:
        """x Wᵀ + b, written into the output block by block of `self.block` output features."""
        weight, bias = self.linear.weight, self.linear.bias
        out_features = weight.shape[0]
        out = x.new_empty((*x.shape[:-1], out_features))
        flat_x, flat_out = x.reshape(-1, x.shape[-1]), out.view(-1, out_features)
        for start in range(0, out_features, self.block):
            block = slice(start, start + self.block)
            if bias is None:
                torch.mm(flat_x, weight[block].t(), out=flat_out[:, block])
            else:
                torch.addmm(bias[block], flat_x, weight[block].t(), out=flat_out[:, block])
        return out
