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
and compares them (`StackedProjection.__call__`, `BlockedProjection.__call__`); a shape where they differ keeps
the plain products for the rest of the call.

**How they are installed.** The model's own code has one plain path for each product: `MultiHeadAttention.project_qkv`
and `lm_head`. `faster_decoding(model)` replaces them from outside for the length of the call: a `StackedProjection`
is set as the `project_qkv` of each eligible attention module (an instance attribute, which Python finds before the
class's method), a `BlockedProjection` as the model's `vocabulary_projection`; leaving the block deletes them again,
which brings the class's plain paths back.
"""

from __future__ import annotations

import contextlib
import threading
import types
from collections.abc import Callable, Iterator

import torch
from torch import Tensor, nn

from .attention import MultiHeadAttention
from .positional import apply_rotary

# Stacked weights above this many elements (12.6M: q/k/v at E = 2048) are not made: products that large dominate the
# cost of a call, and a large model should not pay memory for a negligible saving.
MAX_STACKED_ELEMENTS = 3 * 2048 * 2048

# Weights per block of the blocked vocabulary projection: 2 MiB (the L2 cache of a core on recent x86 CPUs) measured
# fastest among 1, 2 and 4 MiB for vocabularies of 8k-50k × 256-2048 with 4 and 8 rows.
VOCABULARY_BLOCK_BYTES = 2 * 2**20

# Rows per product for which the blocked vocabulary projection pays: with 1-3 rows MKL reads the weights once (blocks
# only add calls), and from 12-16 rows on it switches to a product that blocks by itself.
BLOCKED_ROWS = range(4, 12)


def _plain_cpu_linears(projections: tuple[nn.Module, ...]) -> bool:
    """Whether each is a plain nn.Linear without hooks (a PEFT adapter, a quantized layer or a forward hook must see
    its own call) holding an ordinary tensor on CPU (the only device measured)."""
    if _global_hooks():
        return False
    for linear in projections:
        if type(linear) is not nn.Linear or linear._forward_hooks or linear._forward_pre_hooks:
            return False
        if type(linear.weight.data) is not torch.Tensor or linear.weight.device.type != "cpu":
            return False
    return True


def _global_hooks() -> bool:
    return bool(nn.modules.module._global_forward_hooks or nn.modules.module._global_forward_pre_hooks)


def stack_weights(projections: tuple[nn.Linear, ...]) -> tuple[Tensor, Tensor | None]:
    """The weights (and biases) of several nn.Linear stacked into one, detached: for inference-only products."""
    bias = None if projections[0].bias is None else torch.cat([p.bias.detach() for p in projections])
    return torch.cat([p.weight.detach() for p in projections]), bias


class StackedProjection:
    """`MultiHeadAttention.project_qkv` of one module, with q, k and v from one stacked product on one-token steps.

    Prompts (several tokens per row), gradients and a row count whose stacked product was not the same to the bit as
    the three separate ones on its first use go to the module's own `project_qkv`.

    The wider product is not always exact: a BLAS picks its kernel and blocking by matrix shape, and for some shapes
    the sum over E runs in another order in the wider product (seen with MKL in float32: E = 128 with 4 rows;
    E = 384 with grouped heads and 4 rows). So the first step with a given number of rows computes both and compares
    them; later steps use the stacked product only if they agreed. A compiled step (torch.compile) uses it without
    the check: inductor chooses its own kernels there.

    Args:
        attention: Causal self-attention whose q/k/v projections are plain CPU nn.Linear (see `_stackable`).
    """

    def __init__(self, attention: MultiHeadAttention):
        self.plain = types.MethodType(type(attention).project_qkv, attention)  # the class's own path
        self.projections = (attention.q_proj, attention.k_proj, attention.v_proj)
        self.weight, self.bias = stack_weights(self.projections)
        self.head_dim = attention.head_dim
        self.split = (attention.num_heads, attention.num_kv_heads)
        self.query_and_key_heads = attention.num_heads + attention.num_kv_heads
        self.is_exact: dict[int, bool] = {}  # rows → whether the stacked product gives the separate bits

    def __call__(
        self, hidden_states: Tensor, position_embeddings: tuple[Tensor, Tensor] | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        batch, length, _ = hidden_states.shape
        if length != 1 or torch.is_grad_enabled():
            return self.plain(hidden_states, position_embeddings)
        if not torch.compiler.is_compiling():
            exact = self.is_exact.get(batch)
            if exact is None:
                stacked = nn.functional.linear(hidden_states, self.weight, self.bias)
                separate = torch.cat([proj(hidden_states) for proj in self.projections], dim=-1)
                exact = self.is_exact[batch] = torch.equal(stacked, separate)
            if not exact:
                return self.plain(hidden_states, position_embeddings)
        # one product, viewed as H + 2K heads; with rotary tables q and k are rotated together (one elementwise pass
        # over their H + K heads instead of two: the same values)
        heads = nn.functional.linear(hidden_states, self.weight, self.bias)
        heads = heads.view(batch, length, -1, self.head_dim).transpose(1, 2)  # (B, H + 2K, T, D)
        query_and_key = heads[:, : self.query_and_key_heads]  # (B, H + K, T, D)
        if position_embeddings is not None:
            query_and_key = apply_rotary(query_and_key, *position_embeddings)
        query, key = query_and_key.split(self.split, dim=1)
        return query, key, heads[:, self.query_and_key_heads :]


def _stackable(module: nn.Module) -> bool:
    """Causal self-attention (it runs once per new token; an encoder's runs once per generation, and cross-attention
    projects its keys and values once per generation) with plain CPU q/k/v projections of one dtype and bias layout,
    small enough for the saving to be worth the copy (`MAX_STACKED_ELEMENTS`)."""
    if not isinstance(module, MultiHeadAttention) or not module.is_causal or module.is_cross_attention:
        return False
    projections = (module.q_proj, module.k_proj, module.v_proj)
    if not _plain_cpu_linears(projections):
        return False
    if len({p.weight.dtype for p in projections}) != 1 or len({p.bias is None for p in projections}) != 1:
        return False
    return sum(p.weight.numel() for p in projections) <= MAX_STACKED_ELEMENTS


def install_stacked_projections(model: nn.Module) -> Callable[[], None]:
    """Give every eligible attention module of `model` a `StackedProjection` as its `project_qkv`; returns the undo."""
    modules = [module for module in model.modules() if _stackable(module)]
    with torch.no_grad():
        for module in modules:
            module.project_qkv = StackedProjection(module)

    def undo() -> None:
        for module in modules:
            del module.project_qkv  # the class's method again

    return undo


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


def _blockable(linear: nn.Module | None) -> bool:
    """A plain hook-free nn.Linear with float32 weights on CPU, large enough for at least two blocks."""
    if linear is None or not _plain_cpu_linears((linear,)) or linear.weight.dtype != torch.float32:
        return False
    return linear.weight.numel() * linear.weight.element_size() >= 2 * VOCABULARY_BLOCK_BYTES


def install_blocked_vocabulary_projection(model: nn.Module) -> Callable[[], None]:
    """Set `model.vocabulary_projection` (which the heads call in place of `lm_head` when it is set) to a
    `BlockedProjection` of `model.lm_head` when that is eligible; returns the undo."""
    head = getattr(model, "lm_head", None)
    if not _blockable(head):
        return lambda: None
    model.vocabulary_projection = BlockedProjection(head)

    def undo() -> None:
        del model.vocabulary_projection  # the class's None again

    return undo


# What `faster_decoding` installs, in order.
DECODING_SPEEDUPS: tuple[Callable[[nn.Module], Callable[[], None]], ...] = (
    install_stacked_projections,
    install_blocked_vocabulary_projection,
)


class _Installed:
    """A model's speed-ups while any `faster_decoding` block of it runs: how many are inside, the undo functions, and
    the lock that guards them (this model's own: other models' generations never wait for it)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.depth = 0
        self.undo: list[Callable[[], None]] = []

    def __reduce__(self):
        return _Installed, ()  # a copied or pickled model carries no generation in progress (and no lock)


_STATE = "_decoding_speedups"


@contextlib.contextmanager
def faster_decoding(model: nn.Module) -> Iterator[None]:
    """Within the block, `model` decodes with the speed-ups of `DECODING_SPEEDUPS` (identical results).

    Re-entrant (a nested generate()) and thread-safe (several threads generating with one model): the first caller
    to enter installs them, the last one to leave removes them, under a lock of this model's. The state lives in the
    model's `__dict__`, set there with `dict.setdefault`, which is atomic, so two first callers share one state.
    """
    state = model.__dict__.get(_STATE) or model.__dict__.setdefault(_STATE, _Installed())
    with state.lock:
        if state.depth == 0:
            state.undo = [install(model) for install in DECODING_SPEEDUPS]
        state.depth += 1
    try:
        yield
    finally:
        with state.lock:
            state.depth -= 1
            if state.depth == 0:
                for undo in reversed(state.undo):
                    undo()
                state.undo = []
