"""The speed paths of attention's q/k/v projections, beside the plain path of `MultiHeadAttention.project_qkv`.

Notation: B batch, T length, H query heads, K key/value heads, D head dim, E model dim.

The plain path is three products, `q_proj(x)`, `k_proj(x)` and `v_proj(x)`, viewed as heads. Two situations pay for
another way to compute the same numbers, and `project_qkv` hands them here, at its one seam (two attribute reads, so
plain inference never enters this file):
- **training** (`fuse_projections`, `project_fused`): one (B·T, E) × (E, 3·H·D) product over the concatenated weights
  forward, and one of each kind backward, run faster than three thin ones (CPU, fp32 and more so bf16). The gated
  feed-forward network's gate and up projections take the same product in 16-bit training (layers.py).
- **a one-token decoding step inside generate()** (`StackedProjections`, `project_stacked`): each of the three
  products is a small matrix-vector product whose fixed cost (dispatch, output allocation) is a large share of it on
  CPU; with the weights stacked once per generate() call, one product does the work of three.
Each path is compared with the plain one by the tests (tests/test_fast_paths.py, tests/test_decoding.py).

This module is inside the remote-code closure: it imports only torch and its sibling linear_products.py.
"""

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor, nn

from .linear_products import on_cpu_as_plain_tensors, plain_linear, stack_weights

# Fewer (batch × length) rows than this: the q/k/v projections run separately even in training (the fused product's
# weight concatenation is a fixed cost that small batches do not repay).
FUSED_PROJECTION_MIN_ROWS = 256

# Stacked q/k/v weights above this many elements (12.6M: q/k/v at E = 2048) are not made: products that large
# dominate the cost of a call, and a large model should not pay memory for a negligible saving.
MAX_STACKED_ELEMENTS = 3 * 2048 * 2048


def fused_linear(projections: tuple[nn.Linear, ...], states: Tensor) -> Tensor:
    """The outputs of several nn.Linear on the same input, side by side, from one matmul over their stacked weights."""
    return nn.functional.linear(states, *stack_weights(projections))


def fuse_projections(module: nn.Module, states: Tensor) -> bool:
    """Whether a training step of `module` (a MultiHeadAttention) projects `states` (B, T, E) with one fused
    product: gradients wanted, trainable projections, at least FUSED_PROJECTION_MIN_ROWS rows."""
    return (
        module.training
        and torch.is_grad_enabled()
        and module.q_proj.weight.requires_grad
        and states.shape[0] * states.shape[1] >= FUSED_PROJECTION_MIN_ROWS
    )


def project_fused(
    module: nn.Module,
    projections: tuple[nn.Linear, ...],
    states: Tensor,
    norms: tuple[nn.Module | None, ...] = (None,) * 3,
) -> tuple[Tensor, ...]:
    """Several projections of the same states as one matmul over their concatenated weights, split back into heads
    (with each one's QK-norm, as `MultiHeadAttention.as_heads`).

    Training only: without gradients the weight copy at every call would cost more than it saves, so inference keeps
    separate projections, except inside generate(), which stacks the weights once per call (`StackedProjections`).
    The parameters stay separate (q_proj, k_proj, v_proj), as in the checkpoints.
    """
    batch, length, _ = states.shape
    fused = fused_linear(projections, states)
    sizes = [proj.out_features for proj in projections]
    return tuple(
        module.as_heads(part, batch, length, size // module.head_dim, norm)
        for part, size, norm in zip(fused.split(sizes, -1), sizes, norms, strict=False)
    )


class StackedProjections(NamedTuple):
    """The q, k and v weights of one attention module stacked into one (3·H·D, E) matrix (H + 2K heads with grouped
    heads), made when a generation starts (`MultiHeadAttention.stack_projections`), and per row count whether the
    stacked product gave the three separate products' bits on its first use.

    `sources` are the weights and biases it copied and `versions` their version counters then: autograd bumps a
    tensor's counter at every in-place change it sees (an optimizer step, `load_state_dict`, `copy_` under no_grad),
    so comparing a few integers tells whether the copy is still theirs, at a step's cost of a few attribute reads."""

    weight: Tensor
    bias: Tensor | None
    is_exact: dict[int, bool]
    sources: tuple[Tensor, ...]
    versions: list[int]

    def is_current(self) -> bool:
        """Whether no weight it copied was changed in place since."""
        return [source._version for source in self.sources] == self.versions


def make_stacked_projections(module: nn.Module) -> StackedProjections | None:
    """The stacked q/k/v weights of `module` (a MultiHeadAttention), or None where the stacked product would not
    compute what calling the layers computes, or would not pay.

    Only causal self-attention is stacked (it runs once per new token; an encoder's runs once per generation, and
    cross-attention projects its keys and values once per generation), and only plain CPU nn.Linear without hooks (a
    PEFT adapter, a quantized layer or a forward hook must see its own call) of one dtype and bias layout, up to
    `MAX_STACKED_ELEMENTS`. (A gated feed-forward network's gate and up projections were tried too: there the wider
    product and its strided halves cost more than the saved call.)
    """
    projections = (module.q_proj, module.k_proj, module.v_proj)
    if not module.is_causal or module.is_cross_attention or (module.q_norm is not None and not module.norm_each_head):
        return None  # (a norm over the whole projection needs the heads side by side again: not worth it)
    if not all(plain_linear(p) for p in projections) or not on_cpu_as_plain_tensors(projections):
        return None
    if len({p.weight.dtype for p in projections}) != 1 or len({p.bias is None for p in projections}) != 1:
        return None
    if sum(p.weight.numel() for p in projections) > MAX_STACKED_ELEMENTS:
        return None
    sources = tuple(t for p in projections for t in (p.weight, p.bias) if t is not None)
    if any(source.is_inference() for source in sources):
        return None  # made under torch.inference_mode: no version counter to tell a stale copy by
    versions = [source._version for source in sources]  # read first: an update made while copying marks it stale
    with torch.no_grad():
        return StackedProjections(*stack_weights(projections), is_exact={}, sources=sources, versions=versions)


def stacked_product_applies(module: nn.Module, stacked: StackedProjections, hidden_states: Tensor) -> bool:
    """A one-token step without gradients, with a row count whose stacked product gives the separate products' bits.

    A BLAS picks its kernel and blocking by matrix shape, and for some shapes the wider product sums over E in another
    order (seen with MKL in float32: E = 128 with 4 rows; E = 384 with grouped heads and 4 rows), so the first step
    with a given row count computes both ways and compares them. Weights changed in place since the copy was made
    (during this call) leave the copy unused for the rest of the call. A compiled step (torch.compile) takes the
    stacked product unchecked: inductor chooses its own kernels there, and a graph does not read version counters.
    """
    batch, length, _ = hidden_states.shape
    if length != 1 or torch.is_grad_enabled():
        return False
    if torch.compiler.is_compiling():
        return True
    if not stacked.is_current():
        return False
    exact = stacked.is_exact.get(batch)
    if exact is None:
        together = nn.functional.linear(hidden_states, stacked.weight, stacked.bias)
        separate = torch.cat([p(hidden_states) for p in (module.q_proj, module.k_proj, module.v_proj)], dim=-1)
        exact = stacked.is_exact[batch] = torch.equal(together, separate)
    return exact


def project_stacked(
    module: nn.Module,
    stacked: StackedProjections,
    hidden_states: Tensor,
    position_embeddings: tuple[Tensor, Tensor] | None,
    rotate: Callable[[Tensor, Tensor, Tensor], Tensor],
) -> tuple[Tensor, Tensor, Tensor]:
    """`project_qkv` from one product, viewed as H + 2K heads; `rotate` is attention's rotary rotation of (B, heads,
    T, D) by (cos, sin). Without QK-norm q and k are rotated together (one elementwise pass over their H + K heads
    instead of two: the same values)."""
    batch, length, _ = hidden_states.shape
    heads = nn.functional.linear(hidden_states, stacked.weight, stacked.bias)
    heads = heads.view(batch, length, -1, module.head_dim).transpose(1, 2)  # (B, H + 2K, T, D)
    query_and_key_heads = module.num_heads + module.num_kv_heads
    query_and_key, value = heads[:, :query_and_key_heads], heads[:, query_and_key_heads:]  # (B, H + K, T, D)
    if module.q_norm is not None:  # QK-norm of each head (Qwen3, Gemma 3), then the rotation as unstacked
        query, key = query_and_key.split((module.num_heads, module.num_kv_heads), dim=1)
        query, key = module.q_norm(query), module.k_norm(key)
        if position_embeddings is not None:
            query, key = rotate(query, *position_embeddings), rotate(key, *position_embeddings)
        return query, key, value
    if position_embeddings is not None:
        query_and_key = rotate(query_and_key, *position_embeddings)
    query, key = query_and_key.split((module.num_heads, module.num_kv_heads), dim=1)
    return query, key, value
