"""Boolean attention masks (True = the query may attend to the key).

Notation: B batch, Q query length, K key length (past + current when a cache is used).

Masks are built once per stack and shared by every layer. They stay boolean until an eager backend needs additive
form (`to_additive`); fused kernels take the boolean mask directly. A query row in which no key is allowed (a padded
query in a left-padded batch, an empty source) must give zeros and never NaN: the backends handle that.
"""

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


def check_attention_mask(attention_mask: Tensor | None, batch_size: int, length: int, name: str) -> None:
    """Raise ValueError when a 2D padding mask does not match its inputs' (batch, length)."""
    if attention_mask is None:
        return
    if tuple(attention_mask.shape) != (batch_size, length):
        raise ValueError(
            f"{name} has shape {tuple(attention_mask.shape)}, expected (batch, length) = ({batch_size}, {length}): "
            "one 0/1 entry per token, cached tokens included."
        )
