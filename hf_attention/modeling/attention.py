"""Attention: the eager and SDPA backends, the rotary turn of queries and keys, and multi-head attention for self- and
cross-attention.

Notation: B batch, T query length, S key length, H query heads, K key/value heads, D head dim, E model dim.

attention(Q, K, V) = softmax(score(Q, K) + bias, masked) · V. The score is where the classic variants differ; they
live in scores.py. Backends follow HF's attention-function signature
`fn(module, q, k, v, attention_mask, *, scaling, dropout, **kw) -> (out (B, T, H, D), weights | None)`, so any function
registered in `transformers.AttentionInterface` can be plugged in by name.

Two ideas of 2025 models act here, each off by default: attention sinks (GPT-OSS: a learned logit per head joins the
softmax, `MultiHeadAttention.sinks`, read by every backend of ours) and an output gate (Qwen3-Next: σ(g) on each head's
output, g from a q_proj twice as wide). Llama 4's turns of queries and keys around the rotation (adjacent pairs, a
weightless norm, a temperature per position) are query_key_tuning.py's, called from `project_tuned_qkv`.
"""

from collections.abc import Callable

import torch
from torch import Tensor, nn
from transformers import PretrainedConfig
from transformers.cache_utils import Cache, EncoderDecoderCache

from .attention_backends import ATTENTION_BACKENDS, AttentionBackend, get_attention_backend
from .compiled_regions import ElementwiseRegion
from .decoding import DecodingState
from .flex import flex_attention_forward
from .masks import causal_mask
from .query_key_tuning import QueryKeyTuning
from .speed_paths import (
    DecodingStates,
    StackedProjections,
    fuse_projections,
    fused_linear,
    project_fused,
    project_qkv_for_training,
    project_stacked,
    stacked_product_applies,
)


def repeat_kv(x: Tensor, groups: int) -> Tensor:
    """Grouped-query attention: share each of the K key/value heads with `groups` query heads.

    (B, K, S, D) → (B, K·g, S, D).
    """
    if groups == 1:
        return x
    batch, kv_heads, length, dim = x.shape
    return x[:, :, None].expand(batch, kv_heads, groups, length, dim).reshape(batch, kv_heads * groups, length, dim)


# Rotary positions (RoPE, Su et al. 2021) act here, on each layer's queries and keys: the positional scheme
# (positional.RotaryEmbedding) makes the (cos, sin) tables once per call, the attention modules turn q and k by them.


def rotate_half(x: Tensor) -> Tensor:
    """[x1, x2] → [-x2, x1] on the last axis: the 90° turn of every (x_i, x_{i+D/2}) pair."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate (B, H, T, D) queries or keys by the (B, T, R) tables (or (B, 1, T, R), already broadcast over heads,
    as the model passes them): x·cos + rotate_half(x)·sin on the first R dimensions, the rest unchanged."""
    if cos.dim() == x.dim() - 1:
        cos, sin = cos[:, None], sin[:, None]  # (B, 1, T, R)
    rotary_dim = cos.shape[-1]
    if rotary_dim == x.shape[-1]:
        return x * cos + rotate_half(x) * sin
    rotated, passed = x[..., :rotary_dim], x[..., rotary_dim:]  # partial rotation (GPT-NeoX, Phi)
    return torch.cat((rotated * cos + rotate_half(rotated) * sin, passed), dim=-1)


def rotate_query_and_key(query: Tensor, key: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    """`apply_rotary` to the queries and to the keys."""
    return apply_rotary(query, cos, sin), apply_rotary(key, cos, sin)


# Both rotations fused into one kernel forward and one backward while training on a GPU (see compiled_regions.py).
rotary_region = ElementwiseRegion(rotate_query_and_key)


def eager_attention_forward(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    *,
    scaling: float,
    dropout: float = 0.0,
    position_bias: Tensor | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[Tensor, Tensor]:
    """Attention written out: scores, bias, mask, softmax, dropout, weighted sum. Returns the weights too (heatmaps).

    Attention sinks (`module.sinks`, GPT-OSS): the head's sink logit joins each row's softmax as one more column,
    dropped afterwards, as transformers' GPT-OSS computes it; the returned rows then sum to less than 1.

    Args:
        module: The calling attention module (its `score`, `softcap`, `sinks` and `is_causal` are read, as HF
            backends do).
        query: (B, H, T, D). key, value: (B, K, S, D).
        attention_mask: (B|1, 1, T, S) bool, True = attend, causality included; or None (then `is_causal` applies).
        scaling: Factor on q·k for dot-product scores.
        dropout: Probability of dropping an attention weight (callers pass 0 outside training).
        position_bias: Optional (B|1, H, T, S) additive term (ALiBi, relative buckets).
        is_causal: Overrides `module.is_causal` when the mask is None.

    Returns:
        (B, T, H, D) output and (B, H, T, S) weights; rows with no allowed key are all zero.
    """
    groups = query.shape[1] // key.shape[1]
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)  # (B, H, S, D)
    score = getattr(module, "score", None)
    scores = score(query, key) if score is not None else torch.matmul(query, key.transpose(-1, -2)) * scaling
    softcap = getattr(module, "softcap", None)
    if softcap is not None:  # Gemma 2: c·tanh(s / c) keeps every score within ±c
        scores = torch.tanh(scores / softcap) * softcap
    if position_bias is not None:
        scores = scores + position_bias
    causal = module.is_causal if is_causal is None else is_causal
    if attention_mask is None and causal and query.shape[2] > 1:
        attention_mask = causal_mask(query.shape[2], key.shape[2], key.shape[2] - query.shape[2], query.device)
    if attention_mask is not None:
        scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
    # at least float32 (fp16/bf16 overflow), but never below the input's precision (float64 stays float64)
    softmax_dtype = torch.promote_types(scores.dtype, torch.float32)
    sinks = getattr(module, "sinks", None)
    if sinks is None:
        weights = torch.softmax(scores, dim=-1, dtype=softmax_dtype).to(query.dtype)  # (B, H, T, S)
    else:  # GPT-OSS: softmax([s_1 … s_S, sink_h]) without its last column
        sink_column = sinks.to(scores.dtype).view(1, -1, 1, 1).expand(*scores.shape[:-1], 1)  # (B, H, T, 1)
        with_sink = torch.cat([scores, sink_column], dim=-1)
        weights = torch.softmax(with_sink, dim=-1, dtype=softmax_dtype)[..., :-1].to(query.dtype)  # (B, H, T, S)
    if attention_mask is not None:
        weights = weights.masked_fill(~attention_mask, 0.0)  # a row with no allowed key gives zeros, not uniform
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    output = torch.matmul(weights, value)  # (B, H, T, D)
    return output.transpose(1, 2).contiguous(), weights


_LOW_PRECISION = (torch.bfloat16, torch.float16)


def sdpa_attention_forward(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    *,
    scaling: float,
    dropout: float = 0.0,
    position_bias: Tensor | None = None,
    is_causal: bool | None = None,
    **kwargs,
) -> tuple[Tensor, None]:
    """The same maths through `torch.nn.functional.scaled_dot_product_attention` (fused; never stores T×S weights).

    Three cases before the general one (`_sdpa_general`): the plain one-token decoding step, a position bias while
    exporting, and low-precision inputs on CPU; attention sinks (`module.sinks`) take a way of their own
    (`_sdpa_with_sinks`). Arguments as in `eager_attention_forward`; returns (B, T, H, D) and None.
    """
    # (The conditions are written inline, not as helper functions: this runs once per layer and decoded token.)
    dropout = dropout if module.training else 0.0
    sinks = getattr(module, "sinks", None)
    if sinks is not None:
        causal = module.is_causal if is_causal is None else is_causal
        return _sdpa_with_sinks(
            query, key, value, attention_mask, scaling, dropout, position_bias, causal, sinks
        ), None
    if (
        attention_mask is None
        and position_bias is None
        and query.shape[2] == 1
        and query.dtype == torch.float32
        and not torch.is_autocast_enabled(query.device.type)
    ):  # one new token, no mask, no bias, fp32
        return _sdpa_decoding_step(query, key, value, scaling, dropout), None
    if position_bias is not None and torch.compiler.is_exporting():
        # torch.export's decomposition of the kernel with a float bias mask does not survive ONNX translation (NaN
        # rows, a failing reshape); the written-out path computes the same attention and exports cleanly.
        output, _ = eager_attention_forward(
            module,
            query,
            key,
            value,
            attention_mask,
            scaling=scaling,
            dropout=dropout,
            position_bias=position_bias,
            is_causal=is_causal,
        )
        return output, None
    causal = module.is_causal if is_causal is None else is_causal
    if query.device.type == "cpu" and (
        torch.is_autocast_enabled("cpu")
        or query.dtype in _LOW_PRECISION
        or key.dtype in _LOW_PRECISION
        or value.dtype in _LOW_PRECISION
    ):
        return _sdpa_upcast(query, key, value, attention_mask, scaling, dropout, position_bias, causal), None
    return _sdpa_general(query, key, value, attention_mask, scaling, dropout, position_bias, causal), None


def _grouped_heads(query: Tensor, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor, bool]:
    """Keys, values and the kernel's `enable_gqa` for grouped-query heads.

    The kernel serves each key/value head's group of query heads in place, where repeating them (`repeat_kv`) would
    copy the whole cache at every decoding step: the same values, 5x faster for one query over 96 cached keys on CPU,
    and faster forward and backward in training. Under torch.jit.trace (shapes are tensors there) the heads are
    repeated instead: TorchScript's ONNX exporter cannot convert `enable_gqa`."""
    if torch.jit.is_tracing():
        groups = query.shape[1] // key.shape[1]
        return repeat_kv(key, groups), repeat_kv(value, groups), False
    return key, value, query.shape[1] != key.shape[1]


def _sdpa_decoding_step(query: Tensor, key: Tensor, value: Tensor, scaling: float, dropout: float) -> Tensor:
    """The plain decoding step: what `_sdpa_general` would do, without its bookkeeping (no causal flag or mask for a
    single query, no dtype to restore)."""
    key, value, grouped = _grouped_heads(query, key, value)
    output = nn.functional.scaled_dot_product_attention(
        query, key, value, dropout_p=dropout, scale=scaling, enable_gqa=grouped
    )
    return output.transpose(1, 2).contiguous()  # (B, T, H, D)


def _sdpa_upcast(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    scaling: float,
    dropout: float,
    position_bias: Tensor | None,
    causal: bool,
) -> Tensor:
    """bf16/fp16 (or autocast) on CPU: PyTorch's CPU flash kernel has no fast low-precision path (forward + backward
    run slower in bf16 than in fp32). Attention therefore runs in fp32 on CPU (faster and more exact), with autocast
    off around the kernel, which would otherwise cast it back to bf16; the projections around it stay in bf16.
    (Autocast is switched off only here: a context manager per call and layer is a measurable share of a one-token
    decoding step.)"""
    output_dtype = value.dtype
    query, key, value = (t.float() if t.dtype in _LOW_PRECISION else t for t in (query, key, value))
    with torch.autocast(device_type="cpu", enabled=False):
        output = _sdpa_general(query, key, value, attention_mask, scaling, dropout, position_bias, causal)
    return output.to(output_dtype)


def _sdpa_general(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    scaling: float,
    dropout: float,
    position_bias: Tensor | None,
    causal: bool,
) -> Tensor:
    """The kernel with grouped heads, a causal flag or mask, and a bias folded into the mask.

    A causal stack without padding passes no mask and the kernel's own causal flag is used; with a cache (T ≠ S) an
    explicit offset-aware mask is built instead, since the kernel's flag aligns to the top-left corner. A bias is
    folded into a float mask with −inf where attention is not allowed, which the kernel turns into zero rows.
    Returns (B, T, H, D) in the values' dtype.
    """
    key, value, grouped = _grouped_heads(query, key, value)
    mask = attention_mask
    use_causal_flag = causal and mask is None and query.shape[2] > 1
    if use_causal_flag and query.shape[2] != key.shape[2]:
        mask = causal_mask(query.shape[2], key.shape[2], key.shape[2] - query.shape[2], query.device)
        use_causal_flag = False
    if isinstance(use_causal_flag, Tensor):  # shapes are tensors under torch.jit.trace; the kernel wants a bool
        use_causal_flag = bool(use_causal_flag)
    if position_bias is not None:
        bias = position_bias.to(query.dtype)
        if use_causal_flag:
            mask = causal_mask(query.shape[2], key.shape[2], 0, query.device)
            use_causal_flag = False
        mask = bias if mask is None else bias.masked_fill(~mask, float("-inf"))
    output = nn.functional.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=use_causal_flag,
        enable_gqa=grouped,
    )  # (B, H, T, D)
    return output.transpose(1, 2).contiguous().to(value.dtype)


def _sdpa_with_sinks(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    scaling: float,
    dropout: float,
    position_bias: Tensor | None,
    causal: bool,
    sinks: Tensor,
) -> Tensor:
    """Attention sinks (GPT-OSS) through the fused kernel, which has no sink column: one more key per key/value
    head, whose key and value vectors are zero, and a float mask whose entry for that key is the query head's sink.
    That key's score is then q·0·scale + sink_h = sink_h exactly and its value adds nothing, so the kernel computes
    softmax([s_1 … s_S, sink_h])[:S] · V, the eager formula. The mask is (B|1, H, T, S + 1) (the sinks differ per
    head), made from the boolean or float mask, the causal structure and the position bias. Returns (B, T, H, D).

    (The extended keys are a copy: at each decoding step, of the whole cache. An exact way without it would need the
    kernel's log-sum-exp, which torch's public SDPA does not return.)
    """
    length = query.shape[2]
    upcast = query.device.type == "cpu" and (
        torch.is_autocast_enabled("cpu") or any(t.dtype in _LOW_PRECISION for t in (query, key, value))
    )  # as `_sdpa_upcast`: the CPU kernel runs in fp32, so its mask must be fp32 too
    mask_dtype = torch.float32 if upcast else query.dtype
    no_key = key.new_zeros(*key.shape[:2], 1, key.shape[3])  # (B, K, 1, D)
    key, value = torch.cat([key, no_key], dim=2), torch.cat([value, no_key.to(value.dtype)], dim=2)
    mask = _sink_mask(attention_mask, position_bias, sinks, length, key.shape[2] - 1, causal, mask_dtype)
    if upcast:
        return _sdpa_upcast(query, key, value, mask, scaling, dropout, None, False)
    return _sdpa_general(query, key, value, mask, scaling, dropout, None, False)


def _sink_mask(
    attention_mask: Tensor | None,
    position_bias: Tensor | None,
    sinks: Tensor,
    length: int,
    keys: int,
    causal: bool,
    dtype: torch.dtype,
) -> Tensor:
    """The (B|1, H, T, S + 1) float mask of `_sdpa_with_sinks`: the position bias (or 0) where a query may see a key,
    −inf where it may not (a boolean mask: False; a float mask is added as it is), the head's sink in the last
    column. Without a mask, a causal layer's queries see the keys up to their own position (the cache before them
    included)."""
    device = sinks.device
    allowed = attention_mask
    if allowed is None and causal and length > 1:
        allowed = causal_mask(length, keys, keys - length, device)
    scores = torch.zeros(1, 1, length, keys, dtype=dtype, device=device) if position_bias is None else position_bias
    scores = scores.to(dtype)
    if allowed is not None and allowed.dtype == torch.bool:
        scores = scores.masked_fill(~allowed, float("-inf"))
    elif allowed is not None:
        scores = scores + allowed.to(dtype)
    rows, heads = scores.shape[0], sinks.shape[0]
    sink_column = sinks.to(dtype).view(1, heads, 1, 1).expand(rows, heads, length, 1)
    return torch.cat([scores.expand(rows, heads, length, keys), sink_column], dim=-1)


# Our backends by name, registered in the table that attention_backends.py resolves names with. "paged|eager" is the
# name continuous batching gives eager attention (its masks are the same).
ATTENTION_BACKENDS.update(
    {
        "eager": AttentionBackend(eager_attention_forward, "bool"),
        "paged|eager": AttentionBackend(eager_attention_forward, "bool"),
        "sdpa": AttentionBackend(sdpa_attention_forward, "bool", implicit_causal=True),
        "flex_attention": AttentionBackend(flex_attention_forward, "block"),
    }
)


class MultiHeadAttention(DecodingStates, nn.Module):
    """Multi-head attention (Vaswani 2017 §3.2.2) for self-attention (keys from the same sequence) and
    cross-attention (keys from the encoder output), with grouped-query heads (Ainslie et al. 2023).

    Heads are a batch axis: project once to H·D, view as (B, H, T, D), attend per head, merge back to E.

    Args:
        hidden_size: E of the queries' stream.
        num_heads: H.
        num_kv_heads: K (divides H).
        head_dim: D.
        bias: Biases on the q/k/v/o projections.
        dropout: Attention-weight dropout (training only).
        is_causal: Queries only see earlier keys (decoder self-attention).
        is_cross_attention: Keys/values come from `key_value_states` and are cached once per generation.
        layer_idx: Index of the layer, the key of its slot in HF caches.
        score: Score module for non-dot-product scores (None: dot product times `scaling`).
        scaling: Factor on q·k.
        kv_input_size: Width of `key_value_states` (default E).
        config: The model's config, whose `_attn_implementation` names the attention backend at each call, as in
            transformers' attention modules (so `set_attn_implementation` takes effect at once); None, for a module
            used on its own, runs SDPA.
        output_bias: A bias on the output projection; None: as `bias` (Qwen2 has q/k/v biases only).
        query_norm, key_norm: Norms of the queries and keys before the rotation (QK-norm: Qwen3, Gemma 3, OLMo 2),
            or None.
        qk_norm: What those norms normalise: "head" (each head's D values) or "projection" (all H·D of a token).
        softcap: c of the score cap c·tanh(s / c) (Gemma 2), or None.
        sinks: Attention sinks (GPT-OSS): a learned logit per query head, `self.sinks` (H,), that joins every
            softmax as one more column and is dropped after it (the backends read it from the module).
        output_gate: Gated attention (Qwen3-Next; Qiu et al. 2025): q_proj is twice as wide, giving each head its
            query and a gate side by side ([q_h | g_h]), and each head's output is multiplied by σ(g_h).
    """

    def __init__(
        self,
        *,
        hidden_size: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        bias: bool = True,
        dropout: float = 0.0,
        is_causal: bool = False,
        is_cross_attention: bool = False,
        layer_idx: int | None = None,
        score: nn.Module | None = None,
        scaling: float | None = None,
        kv_input_size: int | None = None,
        config: PretrainedConfig | None = None,
        output_bias: bool | None = None,
        query_norm: nn.Module | None = None,
        key_norm: nn.Module | None = None,
        qk_norm: str = "head",
        softcap: float | None = None,
        sinks: bool = False,
        output_gate: bool = False,
    ):
        super().__init__()
        if num_heads % num_kv_heads:
            raise ValueError(f"num_heads={num_heads} is not divisible by num_kv_heads={num_kv_heads}.")
        kv_input_size = kv_input_size or hidden_size
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.num_key_value_groups = num_heads // num_kv_heads
        self.dropout = dropout
        self.is_causal = is_causal
        self.is_cross_attention = is_cross_attention
        self.layer_idx = layer_idx
        self.scaling = head_dim**-0.5 if scaling is None else scaling
        self.score = score
        self.config = config
        self.output_gate = output_gate
        self.q_proj = nn.Linear(hidden_size, num_heads * head_dim * (2 if output_gate else 1), bias=bias)
        self.k_proj = nn.Linear(kv_input_size, num_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(kv_input_size, num_kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(num_heads * head_dim, hidden_size, bias=bias if output_bias is None else output_bias)
        self.q_norm, self.k_norm = query_norm, key_norm
        self.norm_each_head = qk_norm == "head"
        self.softcap = softcap
        # zeros: at the start the sink is one more key of score 0 (a softmax with 1 added to its denominator)
        self.sinks = nn.Parameter(torch.zeros(num_heads)) if sinks else None
        # Llama 4's turns of queries and keys around the rotation (query_key_tuning.py): given by the layer plan to
        # the self-attention layers of a config that sets them; None for every other model.
        self.tuning: QueryKeyTuning | None = None
        self._stacked: DecodingState[StackedProjections] = DecodingState()  # generate()'s (speed_paths.py)
        self._pinned_backend: DecodingState[Callable] = DecodingState()

    def project_qkv(
        self, hidden_states: Tensor, position_embeddings: tuple[Tensor, Tensor] | None
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention's queries, keys and values: (B, H, T, D), (B, K, T, D), (B, K, T, D), q and k rotated when
        rotary (cos, sin) tables are given.

        The plain path: three products viewed as heads (with QK-norm), then the rotation. Two situations take a
        faster way to the same numbers (speed_paths.py), each behind one test of attributes: a one-token step while
        generate() runs (`stack_projections`: one stacked product) and a training step (a fused product, a compiled
        rotation).
        """
        if self._stacked.users:  # inside generate() (`users` first: a plain attribute)
            stacked = self._stacked.value
            if stacked is not None and stacked_product_applies(self, stacked, hidden_states):
                return project_stacked(self, stacked, hidden_states, position_embeddings, apply_rotary)
        if self.training and torch.is_grad_enabled():
            return project_qkv_for_training(self, hidden_states, position_embeddings, rotary_region)
        query = self.project_heads(self.q_proj, hidden_states, self.num_heads, self.q_norm)  # (B, H, T, D)
        key = self.project_heads(self.k_proj, hidden_states, self.num_kv_heads, self.k_norm)  # (B, K, T, D)
        value = self.project_heads(self.v_proj, hidden_states, self.num_kv_heads)  # (B, K, T, D)
        if position_embeddings is not None:
            query, key = rotate_query_and_key(query, key, *position_embeddings)
        return query, key, value

    def project_gated_qkv(
        self, hidden_states: Tensor, position_embeddings: tuple[Tensor, Tensor] | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """`project_qkv` of a gated module (`output_gate`, Qwen3-Next): the queries, keys and values as there, and
        the (B, T, H·D) gate logits, which q_proj gives beside the queries. A training step takes the three products
        as one (`fuse_projections`, as `project_qkv` does); generate()'s stacked product is not made for it."""
        batch, length, _ = hidden_states.shape
        projections = (self.q_proj, self.k_proj, self.v_proj)
        if self.training and fuse_projections(self, hidden_states):  # a speed path (speed_paths.py)
            gated_query, key, value = fused_linear(projections, hidden_states).split(
                [p.out_features for p in projections], dim=-1
            )
            key = self.as_heads(key, batch, length, self.num_kv_heads, self.k_norm)  # (B, K, T, D)
            value = self.as_heads(value, batch, length, self.num_kv_heads, None)  # (B, K, T, D)
        else:
            gated_query = self.q_proj(hidden_states)  # (B, T, H·2D)
            key = self.project_heads(self.k_proj, hidden_states, self.num_kv_heads, self.k_norm)  # (B, K, T, D)
            value = self.project_heads(self.v_proj, hidden_states, self.num_kv_heads)  # (B, K, T, D)
        query, gate = self.split_gate(gated_query, batch, length)
        if position_embeddings is not None:
            query, key = rotate_query_and_key(query, key, *position_embeddings)
        return query, key, value, gate

    def project_tuned_qkv(
        self,
        hidden_states: Tensor,
        position_embeddings: tuple[Tensor, Tensor] | None,
        cache,
        position_ids: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor | None]:
        """`project_qkv` (or `project_gated_qkv`) of a layer with Llama 4's tuning (`self.tuning`): projected as
        there, unrotated, then rotated between the tuning's two halves: adjacent pairs gathered (and float32 taken)
        before, the dtype given back, the weightless norm and the queries' temperature after. Returns q, k, v and the
        gate logits (None without a gate). The temperature counts cache slots from the tokens this layer has cached,
        as transformers does; Ministral 3's position scale reads the (B|1, T) `position_ids` the stack gives."""
        gate = None
        if self.output_gate:
            query, key, value, gate = self.project_gated_qkv(hidden_states, None)
        else:
            query, key, value = self.project_qkv(hidden_states, None)
        dtype = query.dtype  # what a float32 rotation (`rope_in_float32`) casts back to
        if position_embeddings is not None:
            query, key = self.tuning.before_rotation(query, key, position_embeddings[0].shape[-1])
            query, key = rotate_query_and_key(query, key, *position_embeddings)
        past = 0
        if self.tuning.temperature is not None and cache is not None:
            if isinstance(cache, EncoderDecoderCache):
                cache = cache.self_attention_cache
            if not isinstance(cache, Cache):
                raise ValueError(
                    "attn_temperature_tuning=True counts the tokens of a layer's own cache, which continuous "
                    "batching's paged cache does not hold per sequence; generate() without it."
                )
            past = cache.get_seq_length(self.layer_idx)
        query, key = self.tuning.after_rotation(query, key, past, dtype, position_ids)
        return query, key, value, gate

    def split_gate(self, gated_query: Tensor, batch: int, length: int) -> tuple[Tensor, Tensor]:
        """(B, L, H·2D) → the queries (B, H, L, D), QK-normed as `as_heads` does, and the gate logits (B, L, H·D):
        each head's 2·D values are its query, then its gate (Qwen3-Next's `view(..., H, 2·D).chunk(2, -1)`)."""
        query, gate = gated_query.view(batch, length, self.num_heads, 2 * self.head_dim).chunk(2, dim=-1)
        query = self.as_heads(query.reshape(batch, length, -1), batch, length, self.num_heads, self.q_norm)
        return query, gate.reshape(batch, length, -1)

    def project_heads(self, proj: nn.Linear, states: Tensor, heads: int, norm: nn.Module | None = None) -> Tensor:
        batch, length, _ = states.shape
        return self.as_heads(proj(states), batch, length, heads, norm)  # (B, heads, L, D)

    def as_heads(self, projected: Tensor, batch: int, length: int, heads: int, norm: nn.Module | None) -> Tensor:
        """(B, L, heads·D) → (B, heads, L, D), with QK-norm on the way: over the whole projection (OLMo 2) before the
        view, or over each head's D values (Qwen3, Gemma 3) while a token's heads still lie side by side."""
        if norm is not None and not self.norm_each_head:
            projected = norm(projected)
        projected = projected.view(batch, length, heads, self.head_dim)
        if norm is not None and self.norm_each_head:
            projected = norm(projected)
        return projected.transpose(1, 2)

    def _cross_keys_values(self, key_value_states: Tensor, cache: Cache | None) -> tuple[Tensor, Tensor]:
        """Encoder keys/values: projected once per generation, then read back from the cross-attention cache."""
        if isinstance(cache, EncoderDecoderCache) and cache.is_updated.get(self.layer_idx):
            layer = cache.cross_attention_cache.layers[self.layer_idx]
            return layer.keys, layer.values
        if self.training and fuse_projections(self, key_value_states):  # a speed path (speed_paths.py)
            key, value = project_fused(self, (self.k_proj, self.v_proj), key_value_states)  # (B, K, S, D) each
        else:
            key = self.project_heads(self.k_proj, key_value_states, self.num_kv_heads)  # (B, K, S, D)
            value = self.project_heads(self.v_proj, key_value_states, self.num_kv_heads)  # (B, K, S, D)
        if isinstance(cache, EncoderDecoderCache):
            key, value = cache.cross_attention_cache.update(key, value, self.layer_idx)
            cache.is_updated[self.layer_idx] = True
        return key, value

    def forward(
        self,
        hidden_states: Tensor,
        *,
        attention_mask: Tensor | None = None,
        key_value_states: Tensor | None = None,
        position_embeddings: tuple[Tensor, Tensor] | None = None,
        position_bias: Tensor | None = None,
        cache: Cache | None = None,
        attention_function: Callable | None = None,
        output_attentions: bool = False,
        position_ids: Tensor | None = None,
        **kwargs,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from `hidden_states` (B, T, E) to itself or to `key_value_states` (B, S, E).

        Args:
            hidden_states: (B, T, E) queries' stream.
            attention_mask: The mask in the form the backend takes ((B|1, 1, T, S) bool, True = attend, for ours),
                or None.
            key_value_states: Encoder output for cross-attention.
            position_embeddings: Rotary (cos, sin), each (B, 1, T, D) (or (B, T, D)); rotates q and k before caching.
            position_bias: (B|1, H, T, S) additive score bias.
            cache: An HF Cache (self-attention), an EncoderDecoderCache (either kind of layer), or continuous
                batching's paged cache.
            attention_function: A function with HF's attention-function signature to run instead of the configured
                backend (`backend_function`).
            output_attentions: Run the eager backend, which returns the attention weights.
            position_ids: (B|1, T) positions of the new tokens, given by the stack only to the layers whose queries
                scale by them (`llama_4_scaling_beta`); not passed on to the attention function.
            **kwargs: Passed on to the attention function (and to a paged cache's update), as transformers' models
                do: how serving stacks and continuous batching hand their own state to attention.

        Returns:
            (B, T, E) output and the (B, H, T, S) weights when the backend computes them.
        """
        batch, length, _ = hidden_states.shape
        gate = None
        if self.is_cross_attention:
            if self.output_gate:
                query, gate = self.split_gate(self.q_proj(hidden_states), batch, length)
            else:
                query = self.project_heads(self.q_proj, hidden_states, self.num_heads)  # (B, H, T, D)
            key, value = self._cross_keys_values(key_value_states, cache)
        else:
            if self.tuning is not None:  # Llama 4's turns around the rotation (Ministral 3's position scale)
                tuned = self.project_tuned_qkv(hidden_states, position_embeddings, cache, position_ids)
                query, key, value, gate = tuned
            elif self.output_gate:  # Qwen3-Next: the gate comes with the queries
                query, key, value, gate = self.project_gated_qkv(hidden_states, position_embeddings)
            else:
                query, key, value = self.project_qkv(hidden_states, position_embeddings)
            if cache is not None:
                key, value = self._cached_keys_values(cache, key, value, kwargs)  # (B, K, past + T, D)
        if attention_function is None:
            attention_function = self.backend_function(output_attentions)
        output, weights = attention_function(
            self,
            query,
            key,
            value,
            attention_mask,
            scaling=self.scaling,
            dropout=self.dropout if self.training else 0.0,
            position_bias=position_bias,
            **kwargs,
        )  # (B, T, H, D)
        output = output.reshape(batch, length, self.num_heads * self.head_dim)  # (B, T, H·D)
        if gate is not None:  # gated attention: each head's output scaled by σ(g), elementwise
            output = output * torch.sigmoid(gate)
        return self.o_proj(output), weights

    def backend_function(self, output_attentions: bool = False) -> Callable:
        """The attention function this call runs, looked up by name at every call as transformers' attention modules
        do: the one `config._attn_implementation` names (ours or one registered with `AttentionInterface`), eager
        when the weights are asked for (only eager computes them), SDPA for a module built without a config."""
        if output_attentions:
            return eager_attention_forward
        # inside a generate() of this thread: looked up once for it (pin_backend); `users` first, a plain attribute
        pinned = self._pinned_backend.value if self._pinned_backend.users else None
        if pinned is not None:
            return pinned
        if self.config is None:
            return sdpa_attention_forward
        name = self.config._attn_implementation
        return (ATTENTION_BACKENDS.get(name) or get_attention_backend(name)).function  # (ours: a dict read, no call)

    def _cached_keys_values(self, cache, key: Tensor, value: Tensor, kwargs: dict) -> tuple[Tensor, Tensor]:
        """Append this step's keys and values to the self-attention cache; returns every cached key and value.

        A paged cache (continuous batching) reads the batch layout from `kwargs` (this call's own copy, which it
        updates in place with what the attention function needs), as in transformers' models."""
        if isinstance(cache, EncoderDecoderCache):
            cache = cache.self_attention_cache
        if isinstance(cache, Cache):
            return cache.update(key, value, self.layer_idx)
        return cache.update(key, value, self.layer_idx, kwargs)  # the paged cache, which is not a Cache
