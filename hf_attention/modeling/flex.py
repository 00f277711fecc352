"""The flex_attention backend: torch's FlexAttention with block masks and score modifications.

Notation: B batch, T query length, S key length, H query heads, K key/value heads, D head dim.

FlexAttention (torch.nn.attention.flex_attention) computes softmax(score_mod(q·k·scale) | mask) · v with two plain
Python functions compiled into the kernel:
- a `mask_mod(b, h, q, kv) -> bool` that says which keys a query sees; `create_block_mask` evaluates it per block of
  128 × 128 positions, and blocks where it is False everywhere are never computed. Packed documents thus skip most of
  the work at long lengths, where SDPA with an explicit (T, S) mask computes every score.
- a `score_mod(score, b, h, q, kv) -> score` that changes a score: the distance biases of ALiBi and T5 are written as
  functions of the two positions (`PositionalEncoding.score_mod`), so no (B, H, T, S) bias tensor is ever stored.

The stack builds both from the same `MaskParts` and positions as the other backends' masks and biases, so every
positional scheme, padding, causality, cross-attention and packed documents give the logits of SDPA and eager (to
float rounding). On CPU, torch has no FlexAttention backward pass: training with this backend on CPU is refused with
a clear error, and inference (forward, generate) works. The kernel is compiled by torch.compile on first use (seconds)
and, on the CPU, again for new shapes (on a GPU once for all lengths), so it pays for long inputs, not for short ones.
"""

import warnings
from collections.abc import Callable

import torch
from torch import Tensor, nn

from .masks import MaskParts

try:
    from torch.nn.attention.flex_attention import AuxRequest, BlockMask, create_block_mask, flex_attention
except ImportError:  # pragma: no cover - torch without FlexAttention
    AuxRequest = BlockMask = create_block_mask = flex_attention = None

# Compile the kernel (the point of FlexAttention). False runs torch's unfused reference implementation instead, which
# stores the (B, H, T, S) scores: the same results without compile time, for debugging and quick tests.
COMPILE = True
# From this many (query, key) positions on, the block mask is built by a compiled function too (seconds of compiling
# once per shape; below it, evaluating the mask function directly is cheap).
COMPILED_BLOCK_MASK_MIN_POSITIONS = 2**20
# Fewest queries run by the compiled kernel (one block of FlexAttention's 128 × 128; see `_kernel`).
COMPILED_MIN_QUERIES = 128
# Device types whose kernel is compiled once for every length (dynamic shapes). Elsewhere (the CPU) the kernel is
# compiled per shape: inductor's dynamic-shape FlexAttention kernels for the CPU fail to build in torch 2.11 to 2.15
# (undeclared `cur_qSplitSize`/`cur_kvSplitSize` variables in the generated C++).
DYNAMIC_DEVICE_TYPES = frozenset({"cuda"})
# Device types whose compiled kernel returns the log-sum-exp that attention sinks need (`with_sinks`); elsewhere (the
# CPU: "torch.compile on CPU only supports inference and `return_lse` is not supported yet", torch 2.15) layers with
# sinks run the plain function, which returns it everywhere.
LSE_KERNEL_DEVICE_TYPES = frozenset({"cuda"})
_compiled_flex_attention: dict[bool, Callable] = {}


def _kernel(query: Tensor) -> Callable:
    """The FlexAttention to call: the compiled kernel for at least one block of queries, else the plain function.

    On a GPU the kernel is compiled once, with symbolic lengths: packed training batches change length at every step
    and must not compile again each time (the first call compiles; measured by the benchmarks' flex_train section).
    On the CPU it is compiled for each input shape it meets, up to torch.compile's limit of recompilations per
    function (`torch._dynamo.config.recompile_limit`, 8 by default), after which further shapes run the plain
    function. Fewer queries than a block (128), a decoding step among them, run the plain function: their scores are
    at most a block's rows, and a kernel per step's key length would be compiled at every step. Inside an already
    compiled graph the plain function is traced into it.
    """
    if torch.compiler.is_compiling() or query.shape[2] < COMPILED_MIN_QUERIES or not COMPILE:
        return _plain_flex_attention
    dynamic = query.device.type in DYNAMIC_DEVICE_TYPES
    if dynamic not in _compiled_flex_attention:
        _compiled_flex_attention[dynamic] = torch.compile(flex_attention, dynamic=dynamic)
    return _compiled_flex_attention[dynamic]


def _plain_flex_attention(*args, **kwargs) -> Tensor:
    with warnings.catch_warnings():  # "...without torch.compile()...": intended here (see `_kernel`)
        warnings.filterwarnings("ignore", message=".*flex_attention called without torch.compile.*")
        return flex_attention(*args, **kwargs)


def block_mask(parts: MaskParts, *, batch: int, device: torch.device) -> "BlockMask | None":
    """The block mask of `parts` for a batch of `batch` rows, or None when every query sees every key."""
    if parts.ready is not None:
        ready = parts.ready.expand(batch, -1, -1, -1)  # (B, 1|H, T, S)
        per_head = ready.shape[1] > 1

        def mask_mod(b, h, q, kv):
            return ready[b, h if per_head else 0, q, kv]

        return _create(mask_mod, parts, batch, ready.shape[1] if per_head else None, device)
    per_row = (parts.key_padding, parts.documents, parts.query_chunks)
    rows = batch if any(part is not None for part in per_row) else None
    conditions = []
    # tensors, not ints: a compiled kernel takes them as inputs instead of being rebuilt for every cache length
    past = torch.as_tensor(parts.past, device=device)
    offset = torch.as_tensor(parts.key_offset, device=device)  # a sliding-window cache's first key position
    if parts.causal:
        conditions.append(lambda b, h, q, kv: kv + offset <= q + past)
    if parts.window_restricts():
        window = parts.window
        if parts.causal:
            conditions.append(lambda b, h, q, kv: q + past - (kv + offset) < window)
        else:
            conditions.append(lambda b, h, q, kv: (q + past - (kv + offset)).abs() < window)
    if parts.key_padding is not None:
        keys = parts.key_padding.bool().expand(batch, -1)  # (B, S)
        conditions.append(lambda b, h, q, kv: keys[b, kv])
    if parts.documents is not None:
        documents = parts.documents.expand(batch, -1)  # (B, T), T = S
        conditions.append(lambda b, h, q, kv: documents[b, q] == documents[b, kv])
    if parts.query_chunks is not None:  # chunked attention (Llama 4): the keys of the query's own chunk
        query_chunks, key_chunks = parts.query_chunks.expand(batch, -1), parts.key_chunks.expand(batch, -1)
        conditions.append(lambda b, h, q, kv: query_chunks[b, q] == key_chunks[b, kv])
    if not conditions:
        return None

    def mask_mod(b, h, q, kv):
        allowed = conditions[0](b, h, q, kv)
        for condition in conditions[1:]:
            allowed = allowed & condition(b, h, q, kv)
        return allowed

    return _create(mask_mod, parts, rows, None, device)


def _create(
    mask_mod: Callable, parts: MaskParts, batch: int | None, heads: int | None, device: torch.device
) -> "BlockMask":
    """`create_block_mask` over (batch or broadcast, heads or broadcast, T, S); compiled for large masks, where
    evaluating `mask_mod` position by position would store (T, S) intermediates (4096² int64 indices: 128 MiB)."""
    compile_mask = COMPILE and parts.query_length * parts.key_length >= COMPILED_BLOCK_MASK_MIN_POSITIONS
    return create_block_mask(
        mask_mod,
        B=batch,
        H=heads,
        Q_LEN=parts.query_length,
        KV_LEN=parts.key_length,
        device=device,
        _compile=compile_mask,
    )


def dense_bias_score_mod(position_bias: Tensor, batch: int) -> Callable:
    """A score_mod adding a (B|1, H, T, S) bias tensor (for a bias given as a tensor rather than as positions)."""
    bias = position_bias.expand(batch, -1, -1, -1)

    def score_mod(score, b, h, q, kv):
        return score + bias[b, h, q, kv]

    return score_mod


def softcap_score_mod(cap: float, then: Callable | None, device: torch.device) -> Callable:
    """A score_mod capping the scaled score at ±cap (c·tanh(s / c), Gemma 2) before `then` (a position bias).

    The cap is captured as a 0-dim float32 tensor, not a Python float: torch.compile (which FlexAttention runs
    through even when called plainly) turns a captured float whose value changed since the last call into a symbolic
    float, and FlexAttention's operator accepts only tensors and integers as captured values. A float32 0-dim tensor
    computes as the float would (it does not promote the scores' dtype).
    """
    cap_tensor = torch.tensor(cap, dtype=torch.float32, device=device)

    def score_mod(score, b, h, q, kv):
        capped = torch.tanh(score / cap_tensor) * cap_tensor
        return capped if then is None else then(capped, b, h, q, kv)

    return score_mod


def with_sinks(output: Tensor, log_sum_exp: Tensor, sinks: Tensor) -> Tensor:
    """Attention sinks (GPT-OSS) applied after FlexAttention, which has no sink column: the kernel's rows are
    normalised by Σ exp(s) = exp(lse); with the head's sink in the softmax they are normalised by exp(lse) +
    exp(sink), so the output is scaled by exp(lse) / (exp(lse) + exp(sink)) = σ(lse − sink). A query that sees no
    key (lse = −inf) keeps its zero output.

    output: (B, H, T, D); log_sum_exp: (B, H, T), float32; sinks: (H,). Returns (B, H, T, D)."""
    share = torch.sigmoid(log_sum_exp - sinks.float()[:, None])  # (B, H, T): what the keys keep of each row
    return output * share[..., None].to(output.dtype)


def flex_attention_forward(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: "BlockMask | None",
    *,
    scaling: float,
    dropout: float = 0.0,
    position_bias: Tensor | Callable | None = None,
    **kwargs,
) -> tuple[Tensor, None]:
    """Attention through FlexAttention. Returns (B, T, H, D) and None.

    Args:
        attention_mask: A BlockMask, or None (every query sees every key).
        position_bias: The positional score bias: as the stack passes it for this backend, a score modification
            computing it from the positions (`PositionalEncoding.score_mod`); or a (B|1, H, T, S) tensor.
        Others: as `eager_attention_forward`. The module's attention sinks (`module.sinks`) rescale the output by
            the kernel's log-sum-exp (`with_sinks`).
    """
    if dropout > 0.0:
        raise ValueError(
            "attn_implementation='flex_attention' has no attention dropout: set attention_dropout=0.0, call "
            "model.eval(), or use 'sdpa' or 'eager' to train with it."
        )
    if query.device.type == "cpu" and torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
        raise ValueError(
            f"attn_implementation='flex_attention' cannot train on CPU: torch {torch.__version__} has no "
            "FlexAttention backward pass on CPU. Use it for inference (torch.no_grad(), generate()), or train with "
            "'sdpa' or 'eager' and switch with model.set_attn_implementation('flex_attention') afterwards."
        )
    if getattr(module, "score", None) is not None:
        raise ValueError("attn_implementation='flex_attention' computes dot-product scores only; use 'eager'.")
    score_mod = position_bias
    if isinstance(position_bias, Tensor):
        score_mod = dense_bias_score_mod(position_bias.to(query.dtype), query.shape[0])
    softcap = getattr(module, "softcap", None)
    if softcap is not None:
        score_mod = softcap_score_mod(softcap, score_mod, query.device)
    sinks = getattr(module, "sinks", None)
    if sinks is not None:
        kernel = _kernel(query) if query.device.type in LSE_KERNEL_DEVICE_TYPES else _plain_flex_attention
        output, aux = kernel(
            query,
            key,
            value,
            score_mod=score_mod,
            block_mask=attention_mask,
            scale=scaling,
            enable_gqa=query.shape[1] != key.shape[1],
            return_aux=AuxRequest(lse=True),
        )  # (B, H, T, D) and the (B, H, T) log-sum-exp
        return with_sinks(output, aux.lse, sinks).transpose(1, 2).contiguous(), None
    output = _kernel(query)(
        query,
        key,
        value,
        score_mod=score_mod,
        block_mask=attention_mask,
        scale=scaling,
        enable_gqa=query.shape[1] != key.shape[1],
    )  # (B, H, T, D)
    return output.transpose(1, 2).contiguous(), None
