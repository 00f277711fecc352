"""One product for the q, k and v projections of causal self-attention while `generate()` runs.

A decoding step projects one token per sequence: each of the three (E → H·D) products is a small matrix-vector
product, and on CPU the fixed cost of a call (dispatch, output allocation) is a large share of it. Stacking the three
weights into one (3·H·D, E) matrix turns three calls into one. (A gated feed-forward network's gate and up
projections were tried too: there the wider product and its strided halves cost more than the saved call.)

The weights cannot change while `generate()` runs, so the stacked copy is made when generation starts and dropped
when it ends: nothing is cached across calls that an in-place weight update (an optimizer step,
`param.data.copy_`, a merged LoRA adapter) could leave stale.

The results are the same to the bit. Each output element is still one dot product over E, but a BLAS picks its
kernel by matrix shape, and for some shapes the wider product sums in another order (MKL, float32: E = 128 with 4
rows). So the stacked product is only used for one-token steps, and in each generate() call the first step with a
given number of rows computes both ways and compares them (`MultiHeadAttention._use_stacked`): a shape where they
differ keeps the three products. Only plain `nn.Linear` projections without hooks on CPU are stacked (a PEFT
adapter, a quantized layer or a forward hook must see its own call), and only up to `MAX_STACKED_ELEMENTS` per layer,
so that a large model does not pay memory for a saving that its larger products make negligible.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
from torch import nn

# Stacked weights above this many elements (12.6M: q/k/v at E = 2048) are not made: products that large dominate the
# cost of a call, and a large model should not pay memory for a negligible saving.
MAX_STACKED_ELEMENTS = 3 * 2048 * 2048

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
def stacked_projections(model: nn.Module) -> Iterator[None]:
    """Within the block, every eligible module of `model` (one offering `stackable_projections`: causal self-attention)
    runs those projections as one stacked product when gradients are off. Re-entrant and thread-safe: the stacked
    weights live while any caller is inside."""
    global_hooks = nn.modules.module._global_forward_hooks or nn.modules.module._global_forward_pre_hooks
    with _lock:
        depth = getattr(model, "_stacked_projection_depth", 0)
        model._stacked_projection_depth = depth + 1
        if depth == 0:
            model._stacked_modules = (
                [] if global_hooks else [module for module in model.modules() if _stackable(module)]
            )
            with torch.no_grad():
                for module in model._stacked_modules:
                    module.stack_projections()
    try:
        yield
    finally:
        with _lock:
            model._stacked_projection_depth -= 1
            if model._stacked_projection_depth == 0:
                for module in model._stacked_modules:
                    module.unstack_projections()
                model._stacked_modules = []
