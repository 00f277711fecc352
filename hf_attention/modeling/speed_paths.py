"""The speed paths of the layers, beside their plain paths: other ways to the same numbers where they pay.

Notation: B batch, T length, H query heads, K key/value heads, D head dim, E model dim, F feed-forward dim.

The plain paths (attention.py, norms.py, layers.py) are what inference runs: three q/k/v products viewed as heads,
RMSNorm as its formula, the gated product. Two situations pay for another way, and each module hands them here from
one test of attributes at the top of its forward, so plain inference never enters this file:
- **a training step** (`module.training` with gradients): q/k/v from one (B·T, E) × (E, 3·H·D) product over the
  concatenated weights forward and one of each kind backward (`project_fused`; the gate and up projections likewise
  in 16-bit); RMSNorm with its gradient in closed form (`RMSNormFunction`); and on a GPU the elementwise regions
  (the norm, the gated product, the rotation) compiled into fused kernels (compiled_regions.py).
- **a one-token decoding step inside generate()** (`StackedProjections`, `project_stacked`): each of the three
  products is a small matrix-vector product whose fixed cost (dispatch, output allocation) is a large share of it on
  CPU; with the weights stacked once per generate() call, one product does the work of three.
Each path is compared with the plain one by the tests (tests/test_fast_paths.py, tests/test_decoding.py,
tests/test_compiled_regions.py).

This module is inside the remote-code closure: it imports only torch and its siblings linear_products.py and
compiled_regions.py.
"""

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor, nn

from .compiled_regions import ElementwiseRegion
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
    if getattr(module, "output_gate", False):
        return None  # a gated q_proj (Qwen3-Next) holds gates beside the queries: its module projects its own way
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


class DecodingStates:
    """Mixin of MultiHeadAttention: the decoding states that generate() switches on for its call and off when it
    returns (generation_mixin.py), each held in a `decoding.DecodingState` (`_stacked`, `_pinned_backend`)."""

    def stack_projections(self) -> None:
        """Decoding state, switched on by generate() for its call: q, k and v of one-token steps from one product
        (`speed_paths.StackedProjections`, which says when it is made and used). The stacked copy is made here
        for this generate() call alone, read only by it (in its thread) and dropped by the matching
        `unstack_projections`: weights may change between and during generations, and no copy outlives its call."""
        self._stacked.enter(lambda: make_stacked_projections(self))

    def unstack_projections(self) -> None:
        """The end of a `stack_projections`: the call's stacked weights are dropped."""
        self._stacked.leave()

    def pin_backend(self) -> None:
        """Decoding state, switched on by generate() for its call: the backend looked up by name once for the whole
        call instead of at every step. Reading `config._attn_implementation` goes through transformers' config
        attribute machinery, a few µs, which is a share of a one-token step of a small model. The backend is the
        call's own (see `DecodingState`): `set_attn_implementation` during the call is seen by every call that
        starts after it and by forward() calls outside generate(), not by the rest of this call."""
        self._pinned_backend.enter(lambda: None if self.config is None else self.backend_function())

    def unpin_backend(self) -> None:
        """The end of a `pin_backend`: the call's backend is dropped."""
        self._pinned_backend.leave()


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


def project_qkv_for_training(
    module: nn.Module,
    hidden_states: Tensor,
    position_embeddings: tuple[Tensor, Tensor] | None,
    rotary_region: ElementwiseRegion,
) -> tuple[Tensor, Tensor, Tensor]:
    """`MultiHeadAttention.project_qkv` in a training step: one fused product on enough rows (`fuse_projections`),
    and the rotation as its compiled region on a GPU (`rotary_region`, whose plain function is the plain rotation)."""
    if fuse_projections(module, hidden_states):
        query, key, value = project_fused(
            module,
            (module.q_proj, module.k_proj, module.v_proj),
            hidden_states,
            (module.q_norm, module.k_norm, None),
        )
    else:
        query = module.project_heads(module.q_proj, hidden_states, module.num_heads, module.q_norm)
        key = module.project_heads(module.k_proj, hidden_states, module.num_kv_heads, module.k_norm)
        value = module.project_heads(module.v_proj, hidden_states, module.num_kv_heads)
    if position_embeddings is not None:
        region = rotary_region
        rotate = region if query.device.type in region.device_types and region.applies(query, key) else region.plain
        query, key = rotate(query, key, *position_embeddings)
    return query, key, value


class RMSNormFunction(torch.autograd.Function):
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


def rms_norm_for_training(x: Tensor, weight: Tensor, eps: float, region: ElementwiseRegion) -> Tensor | None:
    """RMSNorm in a training step: the compiled region on a GPU, the closed-form gradient in fp32; None where neither
    applies (the norm then runs its plain path)."""
    if x.device.type in region.device_types and region.applies(x, weight):
        return region(x, weight, eps)
    fp32 = x.dtype == weight.dtype == torch.float32
    if fp32 and not torch.compiler.is_compiling() and (x.requires_grad or weight.requires_grad):
        return RMSNormFunction.apply(x, weight, eps)
    return None


def fuse_gate_and_up(x: Tensor) -> bool:
    """Whether a training step's gated feed-forward network computes its gate and up projections as one product: in
    16-bit (autocast or bf16/fp16 weights) on enough rows. In fp32 the two products already run at the matmul
    ceiling, so the fused one's weight copy and strided halves cost more than they save (the fused block measured
    slower forward + backward); in bf16 the wider product pays, as it does for q/k/v (`project_fused`)."""
    if x.shape[:-1].numel() < FUSED_PROJECTION_MIN_ROWS:
        return False
    return torch.is_autocast_enabled(x.device.type) or x.dtype in (torch.bfloat16, torch.float16)


def gated_product_for_training(module: nn.Module, x: Tensor, region: ElementwiseRegion) -> Tensor:
    """act(x W_gate) ⊙ x W_up of a GatedFeedForward in a training step: one (E, 2F) product instead of two (E, F) ones
    in 16-bit (`fuse_gate_and_up`), and the product as its compiled region on a GPU (`region`, whose plain function
    is the gated product)."""
    if fuse_gate_and_up(x):
        gate, up = fused_linear((module.gate_proj, module.up_proj), x).chunk(2, dim=-1)
    else:
        gate, up = module.gate_proj(x), module.up_proj(x)
    product = region if gate.device.type in region.device_types and region.applies(gate, up) else region.plain
    return product(gate, up, module.act)
