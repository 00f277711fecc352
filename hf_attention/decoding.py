"""One product for the q, k and v projections while `generate()` runs.

A decoding step projects one token per sequence: each of the three (E → H·D) products is a small matrix-vector
product, and on CPU the fixed cost of a call (dispatch, output allocation) is a large share of it. Stacking the three
weights into one (3·H·D, E) matrix turns three calls into one. The weights cannot change while `generate()` runs, so
the stacked copy is made when generation starts and dropped when it ends: nothing is cached across calls that an
in-place weight update (an optimizer step, `param.data.copy_`, a merged LoRA adapter) could leave stale.

The results are the same to the bit: each output element is still one dot product over E, and the CPU kernels
compute it in the same order whatever the number of output columns (checked for fp32, bf16 and fp16 by the tests).
Only plain `nn.Linear` projections without hooks on CPU are stacked (a PEFT adapter, a quantized layer or a forward
hook must see its own call), and only up to `MAX_STACKED_ELEMENTS` per layer, so that a large model does not pay
memory for a saving that its larger products make negligible.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import torch
from torch import nn

from .attention import MultiHeadAttention

# 3·H·D·E above this (12.6M, i.e. E = 2048 with H·D = E) is not stacked: the products dominate the call cost there.
MAX_STACKED_ELEMENTS = 3 * 2048 * 2048

_lock = threading.Lock()


def _stackable(attention: MultiHeadAttention) -> bool:
    projections = (attention.q_proj, attention.k_proj, attention.v_proj)
    if attention.is_cross_attention or any(type(p) is not nn.Linear for p in projections):
        return False
    if any(p._forward_hooks or p._forward_pre_hooks for p in projections):
        return False
    weights = [p.weight for p in projections]
    biases = [p.bias for p in projections]
    if any(type(w.data) is not torch.Tensor or w.device.type != "cpu" or w.dtype != weights[0].dtype for w in weights):
        return False
    if (biases[0] is None) != (biases[1] is None) or (biases[0] is None) != (biases[2] is None):
        return False
    return sum(w.numel() for w in weights) <= MAX_STACKED_ELEMENTS


@contextlib.contextmanager
def stacked_projections(model: nn.Module) -> Iterator[None]:
    """Within the block, every eligible self-attention of `model` projects q, k and v with one stacked product
    when gradients are off. Re-entrant and thread-safe: the stacked weights live while any caller is inside."""
    global_hooks = nn.modules.module._global_forward_hooks or nn.modules.module._global_forward_pre_hooks
    with _lock:
        depth = getattr(model, "_stacked_projection_depth", 0)
        model._stacked_projection_depth = depth + 1
        if depth == 0 and not global_hooks:
            with torch.no_grad():
                for module in model.modules():
                    if isinstance(module, MultiHeadAttention) and _stackable(module):
                        module.stack_projections()
    try:
        yield
    finally:
        with _lock:
            model._stacked_projection_depth -= 1
            if model._stacked_projection_depth == 0:
                for module in model.modules():
                    if isinstance(module, MultiHeadAttention):
                        module.unstack_projections()
