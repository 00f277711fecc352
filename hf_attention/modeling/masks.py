"""Boolean attention masks (True = the query may attend to the key).

Notation: B batch, Q query length, K key length (past + current when a cache is used).

Masks are built once per stack and shared by every layer. They stay boolean until an eager backend needs additive
form (`to_additive`); fused kernels take the boolean mask directly. A query row in which no key is allowed (a padded
query in a left-padded batch, an empty source) must give zeros and never NaN: the backends handle that.
"""

from typing import NamedTuple

import torch
from torch import Tensor


def padding_mask(attention_mask: Tensor) -> Tensor:
    """Turn a (B, K) 0/1 padding mask into a key mask.

    Args:
        attention_mask: (B, K) with 1 for real tokens and 0 for padding.

    Returns:
        (B, 1, 1, K) bool, broadcastable over heads and queries.
    """
    return attention_mask.bool()[:, None, None, :]


def causal_mask(query_length: int, key_length: int, past_length: int | Tensor, device: torch.device) -> Tensor:
    """Offset-aware causal mask: query i sits at absolute position past_length + i and sees keys j ≤ that.

    With a cache, queries are fewer than keys; SDPA's own `is_causal` aligns to the top-left corner and would hide the
    past (pytorch#108108), so the alignment here is explicit. Keys beyond past_length + Q (the unfilled tail of a
    static cache) are masked too.

    Args:
        query_length: Q.
        key_length: K.
        past_length: Number of cached positions before the first query (int or 0-d tensor).
        device: Where to build the mask.

    Returns:
        (1, 1, Q, K) bool.
    """
    query_positions = torch.arange(query_length, device=device) + past_length
    key_positions = torch.arange(key_length, device=device)
    return (key_positions[None, :] <= query_positions[:, None])[None, None]


def window_mask(
    query_length: int,
    key_length: int,
    past_length: int | Tensor,
    window: int,
    device: torch.device,
    *,
    causal: bool,
    key_offset: int | Tensor = 0,
) -> Tensor:
    """Sliding-window (local) attention (Beltagy et al. 2020; Mistral): query i, at absolute position past + i, sees
    only keys less than `window` positions away; causal, the `window` most recent tokens, itself included.

    Args:
        query_length, key_length, past_length, device: As `causal_mask`.
        window: W.
        causal: Also hide the keys after the query.
        key_offset: Absolute position of the first key: a sliding-window cache keeps only the last W − 1 tokens, so
            its key j sits at key_offset + j.

    Returns:
        (1, 1, Q, K) bool.
    """
    query_positions = torch.arange(query_length, device=device) + past_length
    key_positions = torch.arange(key_length, device=device) + key_offset
    distance = query_positions[:, None] - key_positions[None, :]  # (Q, K), > 0 for keys in the past
    allowed = distance < window if causal else distance.abs() < window
    if causal:
        allowed = allowed & (distance >= 0)
    return allowed[None, None]


def left_padding(attention_mask: Tensor) -> Tensor:
    """(B, K) 0/1 padding mask → (B,) the number of padding tokens before each row's first real token (as
    transformers counts them for chunked attention: only the leading ones)."""
    return (attention_mask.long().cumsum(-1) == 0).sum(-1)


def chunk_indices(first_slot: int | Tensor, length: int, origin: Tensor | None, chunk: int, device) -> Tensor:
    """The chunk of each of `length` consecutive slots starting at `first_slot`, for chunked attention (Llama 4):
    (slot − origin) // chunk, a row's chunks counted from its first real token (`origin`: (B,) leading padding,
    or None for 0). Returns (B|1, length)."""
    slots = (torch.arange(length, device=device) + first_slot)[None]  # (1, length)
    if origin is not None:
        slots = slots - origin[:, None]
    return torch.div(slots, chunk, rounding_mode="floor")  # (padding before the origin: negative chunks, masked)


def same_chunk_mask(query_chunks: Tensor, key_chunks: Tensor) -> Tensor:
    """(B|1, T) and (B|1, S) chunk indices → (B|1, 1, T, S) bool: a query sees only keys of its own chunk."""
    return (query_chunks[:, :, None] == key_chunks[:, None, :])[:, None]


def packed_documents(position_ids: Tensor) -> Tensor:
    """Which document each token belongs to when several texts are packed into one row without padding.

    Packing collators (transformers' `DataCollatorWithFlattening`, TRL's `packing=True`) restart `position_ids` at
    0 for every text and pass no attention mask; a new document starts wherever a position does not follow its
    predecessor by one. This is how transformers' own models find packed sequences.

    Args:
        position_ids: (B, T) positions.

    Returns:
        (B, T) document index, counted from 0 in each row: [0 1 2 0 1 0 1 2] → [0 0 0 1 1 2 2 2].
    """
    steps = torch.diff(position_ids, prepend=position_ids[:, :1] - 1, dim=-1)
    return (steps != 1).cumsum(-1)


def same_document_mask(documents: Tensor) -> Tensor:
    """(B, T) document indices → (B, 1, T, T) bool: a token attends only to tokens of its own document."""
    return (documents[:, :, None] == documents[:, None, :])[:, None]


def fit_to_length(attention_mask: Tensor, key_length: int) -> Tensor:
    """Pad (with 0) or cut a (B, L) padding mask to (B, key_length), e.g. for a static cache longer than the text."""
    length = attention_mask.shape[-1]
    if length == key_length:
        return attention_mask
    if length > key_length:
        return attention_mask[:, :key_length]
    return torch.nn.functional.pad(attention_mask, (0, key_length - length), value=0)


def combine(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of broadcastable boolean masks; `None` entries mean "no restriction"."""
    result = None
    for mask in masks:
        if mask is not None:
            result = mask if result is None else result & mask
    return result


def to_additive(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """Boolean mask → additive float mask: 0 where allowed, the dtype's most negative finite value elsewhere.

    A finite minimum (not -1e9, not -inf) keeps fp16 and bf16 from overflowing to NaN in a fully masked row.
    """
    zero = torch.zeros((), dtype=dtype, device=mask.device)
    return torch.where(mask, zero, torch.finfo(dtype).min)


def has_padding(attention_mask: Tensor | None) -> bool:
    """True when a (B, K) mask hides at least one position (an all-ones mask needs no mask at all)."""
    return attention_mask is not None and not bool(attention_mask.all())


class MaskParts(NamedTuple):
    """What decides which keys each query of a stack may attend to, before it is drawn in the form a backend takes:
    a boolean tensor (`boolean`), or a flex-attention block mask built from the same parts (flex.py).

    Args:
        query_length: T, the new tokens of this call.
        key_length: S, cached + new tokens (or the source length for cross-attention).
        past: Cached positions before the first query (the causal offset).
        causal: Query i sees keys j <= past + i.
        key_padding: (B, S) 0/1 or bool, 1 = a real key; None when no key is padding.
        documents: (B, T) document index of each token of packed rows (T = S), or None.
        ready: A (B|1, 1|H, T, S) boolean mask given by the caller (causality included), used as it is.
        window: Sliding-window width W (keys less than W positions away), or None.
        key_offset: Absolute position of the first key (a sliding-window cache's kept tail), 0 otherwise.
        query_chunks, key_chunks: (B|1, T) and (B|1, S) chunk of each query and key (chunked attention, Llama 4:
            a query sees only keys of its own chunk), or None.
    """

    query_length: int
    key_length: int
    past: int | Tensor = 0
    causal: bool = False
    key_padding: Tensor | None = None
    documents: Tensor | None = None
    ready: Tensor | None = None
    window: int | None = None
    key_offset: int = 0
    query_chunks: Tensor | None = None
    key_chunks: Tensor | None = None

    def window_restricts(self) -> bool:
        """Whether the window hides a key that the rest would show: some query lies W or more positions from the
        first key (the last query, causal; any pair, bidirectional)."""
        if self.window is None:
            return False
        if not isinstance(self.past, int):
            return True
        span = self.past + self.query_length - 1 - self.key_offset
        if not self.causal:
            span = max(span, self.key_length - 1 + self.key_offset - self.past)
        return span >= self.window

    def restricts_only_causally(self) -> bool:
        """True when nothing but causality (if any) limits the keys, with no cache offset that a kernel's own causal
        flag would misplace: one query over the whole past, or as many queries as keys."""
        if self.ready is not None or self.key_padding is not None or self.documents is not None:
            return False
        if self.query_chunks is not None:
            return False
        if self.window_restricts():
            return False
        plain = isinstance(self.past, int) and self.key_length == self.past + self.query_length
        return plain and (self.query_length == self.key_length or self.query_length == 1)

    def boolean(self, device: torch.device, *, implicit_causal: bool) -> Tensor | None:
        """(B|1, 1, T, S) bool mask, or None when every key is allowed (`implicit_causal`: the backend applies a
        causal stack's mask itself when nothing else restricts, as SDPA's causal flag does)."""
        if self.ready is not None:
            return self.ready
        if implicit_causal and self.restricts_only_causally():
            return None
        keys = None if self.key_padding is None else padding_mask(self.key_padding)
        if self.documents is not None:
            keys = combine(keys, same_document_mask(self.documents))
        if self.query_chunks is not None:
            keys = combine(keys, same_chunk_mask(self.query_chunks, self.key_chunks))
        if self.window_restricts():
            window = window_mask(
                self.query_length,
                self.key_length,
                self.past,
                self.window,
                device,
                causal=self.causal,
                key_offset=self.key_offset,
            )
            return combine(window, keys)
        if not self.causal:
            return keys
        return combine(causal_mask(self.query_length, self.key_length, self.past, device), keys)
