"""Two ways of computing the same products faster while `generate()` runs, both exact to the bit.

**One product for the q, k and v projections of causal self-attention.** A decoding step projects one token per
sequence: each of the three (E → H·D) products is a small matrix-vector product, and on CPU the fixed cost of a call
(dispatch, output allocation) is a large share of it. Stacking the three weights into one (3·H·D, E) matrix turns
three calls into one. (A gated feed-forward network's gate and up projections were tried too: there the wider
product and its strided halves cost more than the saved call.) Only plain `nn.Linear` projections without hooks on
CPU are stacked (a PEFT adapter, a quantized layer or a forward hook must see its own call), and only up to
`MAX_STACKED_ELEMENTS` per layer, so that a large model does not pay memory for a saving that its larger products
make negligible.

**The vocabulary projection in blocks of output features** (`BlockedProjection`). The LM head of a decoding step
multiplies a few rows (one per sequence or beam) by a (V, E) matrix of several MiB. With 4 to 11 rows, MKL's product
streams the whole matrix from memory once per 3 rows (measured on an Intel Xeon: 4-6 rows take twice as long as 1-3
rows, 7-9 rows three times); cut into blocks of `VOCABULARY_BLOCK_BYTES` of weights, each block is still in the
core's cache for the later passes (a (4, 256) × (256, 8000) product: 284 → 228 µs; (8, 512) × (512, 32000):
3.6 → 2.6 ms). Each output element is still one dot product over E, computed by the same kernel.

The weights cannot change while `generate()` runs, so the stacked copy is made when generation starts and dropped
when it ends: nothing is cached across calls that an in-place weight update (an optimizer step,
`param.data.copy_`, a merged LoRA adapter) could leave stale.

The results are the same to the bit, and checked to be. A BLAS picks its kernel by matrix shape, and for some shapes
a wider or narrower product sums in another order (MKL, float32: q/k/v stacked at E = 128 with 4 rows; a vocabulary
block product with 1 row). So in each generate() call the first step with a given number of rows computes both ways
and compares them (`MultiHeadAttention._use_stacked`, `BlockedProjection.__call__`); a shape where they differ keeps
the plain products for the rest of the call.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
from torch import Tensor, nn

# Stacked weights above this many elements (12.6M: q/k/v at E = 2048) are not made: products that large dominate the
# cost of a call, and a large model should not pay memory for a negligible saving.
MAX_STACKED_ELEMENTS = 3 * 2048 * 2048

# Weights per block of the blocked vocabulary projection: 2 MiB (the L2 cache of a core on recent x86 CPUs) measured
# fastest among 1, 2 and 4 MiB for vocabularies of 8k-50k × 256-2048 with 4 and 8 rows.
VOCABULARY_BLOCK_BYTES = 2 * 2**20

# Rows per product for which the blocked vocabulary projection pays: with 1-3 rows MKL reads the weights once (blocks
# only add calls), and from 12-16 rows on it switches to a product that blocks by itself.
BLOCKED_ROWS = range(4, 12)

_lock = threading.Lock()


def _stackable(module: nn.Module) -> bool:
    """Whether `module` offers projections to stack, and they are plain hook-free CPU nn.Linear of one dtype."""
    # looked up on the class: a missing attribute on the instance goes through nn.Module.__getattr__, which raises
    # (slow) for every module of the model
    offer = getattr(type(module), "stackable_projections", None)
    projections = offer(module) if offer is not None else ()
    if not projections or any(type(p) is not nn.Linear for p in projections):
        return False
    if any(p._forward_hooks or p._forward_pre_hooks for p in projections):
        return False
    weights = [p.weight for p in projections]
    if any(type(w.data) is not torch.Tensor or w.device.type != "cpu" or w.dtype != weights[0].dtype for w in weights):
        return False
    if len({p.bias is None for p in projections}) != 1:
        return False
    return sum(w.numel() for w in weights) <= MAX_STACKED_ELEMENTS


@contextlib.contextmanager
def _while_inside(model: nn.Module, depth_name: str, start, stop) -> Iterator[None]:
    """`start()` when the first caller enters, `stop()` when the last one leaves: re-entrant (a nested generate())
    and thread-safe (several threads generating with one model), the depth kept on the model as `depth_name`."""
    with _lock:
        depth = getattr(model, depth_name, 0)
        setattr(model, depth_name, depth + 1)
        if depth == 0:
            start()
    try:
        yield
    finally:
        with _lock:
            setattr(model, depth_name, getattr(model, depth_name) - 1)
            if getattr(model, depth_name) == 0:
                stop()


def _global_hooks() -> bool:
    return bool(nn.modules.module._global_forward_hooks or nn.modules.module._global_forward_pre_hooks)


def stacked_projections(model: nn.Module) -> contextlib.AbstractContextManager:
    """Within the block, every eligible module of `model` (one offering `stackable_projections`: causal self-attention)
    runs those projections as one stacked product when gradients are off. Re-entrant and thread-safe: the stacked
    weights live while any caller is inside."""

    def start() -> None:
        model._stacked_modules = [] if _global_hooks() else [m for m in model.modules() if _stackable(m)]
        with torch.no_grad():
            for module in model._stacked_modules:
                module.stack_projections()

    def stop() -> None:
        for module in model._stacked_modules:
            module.unstack_projections()
        model._stacked_modules = []

    return _while_inside(model, "_stacked_projection_depth", start, stop)


class BlockedProjection:
    """`linear(x)` for x of 4 to 11 rows, computed block of output features by block (see the module's docstring).

    Used for the vocabulary projection while `generate()` runs. Other row counts, gradients and compiled code go to
    `linear` itself; so does a row count whose blocked product was not the same to the bit as `linear`'s on its first
    use (checked once per row count).

    Args:
        linear: A plain `nn.Linear` (no hooks) with float32 weights on CPU.
    """

    def __init__(self, linear: nn.Linear):
        self.linear = linear
        in_features = linear.weight.shape[1]
        self.block = max(1, VOCABULARY_BLOCK_BYTES // (in_features * linear.weight.element_size()))
        self._is_exact: dict[int, bool] = {}  # rows → whether the blocked product gives linear's bits

    def __call__(self, x: Tensor) -> Tensor:
        rows = x.shape[:-1].numel()
        if rows not in BLOCKED_ROWS or torch.is_grad_enabled() or torch.compiler.is_compiling():
            return self.linear(x)
        exact = self._is_exact.get(rows)
        if exact is None:
            plain, blocked = self.linear(x), self.blocked(x)
            exact = self._is_exact[rows] = torch.equal(blocked, plain)
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


def _blockable(linear: nn.Module) -> bool:
    """A plain hook-free nn.Linear with float32 weights on CPU, large enough for at least two blocks."""
    if type(linear) is not nn.Linear or linear._forward_hooks or linear._forward_pre_hooks:
        return False
    weight = linear.weight
    if type(weight.data) is not torch.Tensor or weight.device.type != "cpu" or weight.dtype != torch.float32:
        return False
    return weight.numel() * weight.element_size() >= 2 * VOCABULARY_BLOCK_BYTES


def blocked_vocabulary_projection(model: nn.Module) -> contextlib.AbstractContextManager:
    """Within the block, `model`'s vocabulary projection (`model.lm_head`) runs as a `BlockedProjection` when it is
    eligible: `model.vocabulary_projection` is that object, or None. Re-entrant and thread-safe, as
    `stacked_projections`."""

    def start() -> None:
        head = getattr(model, "lm_head", None)
        model.vocabulary_projection = None if _global_hooks() or not _blockable(head) else BlockedProjection(head)

    def stop() -> None:
        model.vocabulary_projection = None

    return _while_inside(model, "_blocked_projection_depth", start, stop)
