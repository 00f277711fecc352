"""Key/value cache layers that `generate()` uses in place of transformers' `DynamicLayer` on CPU, and the cache it
makes of them (`generation_cache`).

transformers' dynamic cache stores each layer's keys and values as (B, K, L, D) tensors and grows them by
concatenation: every new token copies all L cached positions, so a generation of N tokens copies O(N²) positions per
layer, and under beam search each step copies them once more to reorder the beams. Two layers here keep the same
values with less copying:

- `GrowingKVLayer` (self-attention, generation without beams): keys and values live at the front of buffers with room
  to spare, and a new token is written in place, like appending to a Python list; `keys`/`values` are views of the
  first L positions, holding exactly what `DynamicLayer` would hold.
- `BeamReorderedLayer` (self-attention under beam search): a beam reorder is not applied when beam search asks for it
  but by the next append, which gathers the cached rows straight into the grown tensor: one copy per step instead of
  two (`DynamicLayer` copies the cache once to reorder it and once more to concatenate the new token).
- `BeamSharedCrossLayer` (cross-attention under beam search): every beam of a sequence attends to the same encoder
  output, so the cached encoder keys/values of the beams of one sequence are the same rows, and reordering beams
  within a sequence changes nothing. The layer checks this (once per cached tensor: the rows of each sequence's beams
  are compared) and then skips the copy.

All three are `DynamicLayer` subclasses and fall back to its behaviour whenever their assumption does not hold (the
keys were replaced by a reorder, a batch selection or a crop elsewhere, the dtype changes, gradients are recorded, a
reorder moves a row to another sequence). Measured on CPU only; other devices keep transformers' layers.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
from torch import Tensor
from transformers import GenerationConfig, PretrainedConfig
from transformers.cache_utils import (
    Cache,
    DynamicCache,
    DynamicLayer,
    EncoderDecoderCache,
    get_layer_types_and_kwargs,
)

from .latent_attention import latent_cache

# Below this many bytes per cached tensor, appending by `torch.cat` (one op per tensor) costs less than the in-place
# write's bookkeeping (a slice, a copy and a new view per tensor). Above it, each tensor that `torch.cat` grows is a
# fresh allocation large enough for the allocator to take from mmap, page-faulted in again at every step, which the
# in-place write avoids.
IN_PLACE_MIN_BYTES = 96 * 1024

# Below this many bytes per cached tensor, a beam reorder is applied at once (`index_select`, then `torch.cat` on the
# next append, as in `DynamicLayer`): a cache that small is copied quickly (it sits in a core's L2 cache), and the
# deferred reorder's extra tensor calls cost more than the copy it saves; a larger one is read from memory by every
# copy, and one copy fewer per step pays.
DEFERRED_REORDER_MIN_BYTES = 512 * 1024


class GrowingKVLayer(DynamicLayer):
    """A `DynamicLayer` whose new tokens are written into spare capacity instead of concatenated, once the cache is
    large enough for that to pay (`IN_PLACE_MIN_BYTES`).

    Args:
        capacity_hint: The longest the cache is expected to get (the generation's `max_length`); buffers double as
            they fill but are not made longer than this while it suffices.
        min_bytes: Cached tensors smaller than this grow by concatenation, as in `DynamicLayer` (default
            `IN_PLACE_MIN_BYTES`).
    """

    def __init__(self, capacity_hint: int = 0, min_bytes: int | None = None):
        super().__init__()
        self.capacity_hint = capacity_hint
        self.min_bytes = IN_PLACE_MIN_BYTES if min_bytes is None else min_bytes
        self._buffers: tuple[Tensor, Tensor] | None = None
        self._views: tuple[Tensor | None, Tensor | None] = (None, None)  # the keys/values last returned

    def _views_of_buffers(self) -> bool:
        """Whether `keys`/`values` are still the front of our buffers (a crop keeps them so; a reorder, a batch
        selection or a reset replaces them with new tensors)."""
        if self._buffers is None or self.keys is None or self.values is None:
            return False
        if self.keys is self._views[0] and self.values is self._views[1]:
            return True  # untouched since the last append (the common case: checked without tensor calls)
        return all(
            t.data_ptr() == b.data_ptr() and t.stride() == b.stride() and t.shape[:-2] == b.shape[:-2]
            for t, b in zip((self.keys, self.values), self._buffers, strict=True)
        )

    def _fits(self, key_states: Tensor, value_states: Tensor, length: int) -> bool:
        """Whether the new states can be written beside the cached ones without changing what `torch.cat` gives."""
        if length:
            return _appendable((self.keys, self.values), (key_states, value_states))
        return not _recording_gradients(key_states, value_states)

    def _allocate(self, key_states: Tensor, value_states: Tensor, length: int, new_length: int) -> None:
        """Fresh buffers holding the cached positions, with room to grow (double, bounded by the hint when it fits)."""
        capacity = 2 * new_length
        if self.capacity_hint >= new_length:
            capacity = min(capacity, self.capacity_hint)
        buffers = tuple(
            states.new_empty((*states.shape[:-2], capacity, states.shape[-1])) for states in (key_states, value_states)
        )
        if length:
            buffers[0].narrow(-2, 0, length).copy_(self.keys)
            buffers[1].narrow(-2, 0, length).copy_(self.values)
        self._buffers = buffers

    def update(self, key_states: Tensor, value_states: Tensor, *args, **kwargs) -> tuple[Tensor, Tensor]:
        """Append (B, K, T, D) keys and values; returns the whole cache, (B, K, L + T, D) each, like DynamicLayer."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        length = self.get_seq_length()
        added = key_states.shape[-2]
        new_length = length + added
        in_buffers = self._views_of_buffers()
        # (bytes of the grown keys) < min_bytes, as T · (bytes of the grown keys) < T · min_bytes: no division by T
        small = key_states.numel() * key_states.element_size() * new_length < self.min_bytes * added
        if (small and not in_buffers) or not self._fits(key_states, value_states, length):
            self._buffers = None  # (buffers the keys no longer live in are not kept)
            return super().update(key_states, value_states, *args, **kwargs)
        if not in_buffers or new_length > self._buffers[0].shape[-2]:
            self._allocate(key_states, value_states, length, new_length)
        keys, values = self._buffers
        keys.narrow(-2, length, added).copy_(key_states)
        values.narrow(-2, length, added).copy_(value_states)
        self.keys, self.values = self._views = (keys.narrow(-2, 0, new_length), values.narrow(-2, 0, new_length))
        return self.keys, self.values

    def reset(self) -> None:
        self._buffers = None
        self._views = (None, None)
        super().reset()


class BeamReorderedLayer(DynamicLayer):
    """A self-attention `DynamicLayer` for beam search: reorders are deferred to the next append and done by it.

    Beam search reorders the cache after every step and then appends the next token's keys and values. Here the
    reorder only records the row order (composing several), and the append writes the reordered rows and the new ones
    into one new tensor, laid out as `torch.cat` lays it out. Reading `keys` or `values` in between applies the
    pending reorder first, so every reader sees what a `DynamicLayer` would hold. A cache smaller than `min_bytes`
    per tensor is reordered at once, as `DynamicLayer` does.

    Args:
        min_bytes: Smallest cached tensor whose reorders are deferred (default `DEFERRED_REORDER_MIN_BYTES`).
    """

    def __init__(self, min_bytes: int | None = None):
        self._pending: Tensor | None = None  # row order to apply to _keys/_values (set before the base assigns keys)
        self._keys: Tensor | None = None
        self._values: Tensor | None = None
        self.min_bytes = DEFERRED_REORDER_MIN_BYTES if min_bytes is None else min_bytes
        super().__init__()

    def _apply_pending_reorder(self) -> None:
        order, self._pending = self._pending, None
        self._keys, self._values = self._keys.index_select(0, order), self._values.index_select(0, order)

    @property
    def keys(self) -> Tensor | None:
        if self._pending is not None:
            self._apply_pending_reorder()
        return self._keys

    @keys.setter
    def keys(self, tensor: Tensor | None) -> None:
        if self._pending is not None:
            self._apply_pending_reorder()  # the reorder still applies to the values
        self._keys = tensor

    @property
    def values(self) -> Tensor | None:
        if self._pending is not None:
            self._apply_pending_reorder()
        return self._values

    @values.setter
    def values(self, tensor: Tensor | None) -> None:
        if self._pending is not None:
            self._apply_pending_reorder()
        self._values = tensor

    def get_seq_length(self) -> int:
        """Cached positions (a pending reorder does not change them)."""
        if not self.is_initialized or self._keys is None or self._keys.numel() == 0:
            return 0
        return self._keys.shape[-2]

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Record the new row order; the next `update` (or read) applies it. A small cache is reordered now."""
        if self.get_seq_length() == 0:
            return
        if self._keys.numel() * self._keys.element_size() < self.min_bytes:
            super().reorder_cache(beam_idx)  # reads `keys`/`values`, so a pending reorder is applied first
            return
        order = beam_idx.to(self._keys.device)
        self._pending = order if self._pending is None else self._pending.index_select(0, order)

    def update(self, key_states: Tensor, value_states: Tensor, *args, **kwargs) -> tuple[Tensor, Tensor]:
        """`DynamicLayer.update`, with a pending reorder gathered into the result (the same tensor, one copy fewer)."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        cached = (self._keys, self._values)
        if self._pending is None or not _appendable(cached, (key_states, value_states)):
            return super().update(key_states, value_states, *args, **kwargs)
        order, self._pending = self._pending, None
        grown = []
        for old, new in zip(cached, (key_states, value_states), strict=True):
            length = old.shape[-2]
            result = old.new_empty((*old.shape[:-2], length + new.shape[-2], old.shape[-1]))
            torch.index_select(old, 0, order, out=result[..., :length, :])
            result[..., length:, :].copy_(new)
            grown.append(result)
        self._keys, self._values = grown
        return self._keys, self._values


def _appendable(cached: tuple[Tensor, Tensor], new: tuple[Tensor, Tensor]) -> bool:
    """Whether `new` states can be written beside `cached` ones into one tensor exactly as `torch.cat` would make it:
    cached positions exist, same rows, dtype and device, and no gradient is being recorded (writes into a slice
    would break autograd's record)."""
    (old_keys, old_values), (new_keys, new_values) = cached, new
    if old_keys is None or old_values is None or not old_keys.numel() or not old_values.numel():
        return False
    if _recording_gradients(old_keys, old_values, new_keys, new_values):
        return False
    return _same_layout(old_keys, new_keys) and _same_layout(old_values, new_values)


def _same_layout(old: Tensor, new: Tensor) -> bool:
    """Same dtype and device, and the same sizes except the position dimension (-2)."""
    return (
        new.dtype == old.dtype
        and new.device == old.device
        and new.shape[:-2] == old.shape[:-2]
        and new.shape[-1] == old.shape[-1]
    )


def _recording_gradients(*tensors: Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


class BeamSharedCrossLayer(DynamicLayer):
    """A cross-attention `DynamicLayer` whose beam reorders are skipped when they cannot change it.

    Under beam search the batch holds `num_beams` consecutive rows per sequence, all attending to that sequence's
    encoder output, and a reorder only moves rows among the beams of one sequence. When the cached rows of each
    sequence's beams are equal, such a reorder is the identity, so it is skipped.

    Args:
        num_beams: Rows per sequence.
    """

    def __init__(self, num_beams: int):
        super().__init__()
        self.num_beams = num_beams
        self._checked: tuple[Tensor, Tensor] | None = None  # the cached tensors last compared
        self._rows_shared = False

    def _beams_share_rows(self) -> bool:
        """Whether each sequence's beams hold equal keys and values (compared once per cached tensor)."""
        if self._checked is None or self._checked[0] is not self.keys or self._checked[1] is not self.values:
            beams = self.num_beams
            self._rows_shared = all(
                torch.equal(grouped, grouped[:, :1].expand_as(grouped))
                for grouped in (t.unflatten(0, (t.shape[0] // beams, beams)) for t in (self.keys, self.values))
            )
            self._checked = (self.keys, self.values)
        return self._rows_shared

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Reorder the rows by `beam_idx`, unless every row stays within its sequence, whose rows are all equal."""
        if self.get_seq_length() > 0 and self.num_beams > 1 and self.keys.shape[0] % self.num_beams == 0:
            rows = torch.arange(self.keys.shape[0], device=beam_idx.device)
            stays_in_sequence = torch.equal(beam_idx // self.num_beams, rows // self.num_beams)
            if stays_in_sequence and self._beams_share_rows():
                return
        super().reorder_cache(beam_idx)


def generation_cache(
    config: PretrainedConfig,
    generation_config: GenerationConfig,
    *,
    batch_size: int,
    max_cache_length: int,
    dtype: torch.dtype,
    device: torch.device,
) -> DynamicCache | EncoderDecoderCache | None:
    """The cache `generate()` makes for a call that passes none, with the layers above where they pay; None where
    transformers' own cache is the one to make (then generate() makes it).

    On CPU, for a dynamic cache (no `cache_implementation`, or "dynamic"), when the call uses a cache and is not an
    assistant's (whose cache transformers prepares for rollbacks): `GrowingKVLayer` for self-attention without
    beams; with beams, `BeamReorderedLayer` for self-attention and `BeamSharedCrossLayer` for cross-attention.
    Everything else about the cache is what transformers would make: a `DynamicCache` (two in an
    `EncoderDecoderCache` for an encoder-decoder) with one layer per decoder layer of the config. A model with
    latent attention layers (`kv_lora_rank`) gets `latent_attention.latent_cache` on every device.

    Self-attention keeps `DynamicLayer` when one layer's cached keys stay below the size from which the layer above
    pays (`IN_PLACE_MIN_BYTES`, `DEFERRED_REORDER_MIN_BYTES`) even at the generation's longest: the layer would only
    ever act as one, and its checks on every append and reorder would be a cost without a saving.

    Args:
        config: The model's config.
        generation_config: The call's generation config (its cache kind, beams, `max_length`, assistant flag).
        batch_size: Prompts in the call (each has `num_beams` rows in the cache).
        max_cache_length: Positions the cache can reach in this call.
        dtype, device: The model's.
    """
    if (
        generation_config.use_cache is False
        or generation_config.cache_implementation not in (None, "dynamic")
        or generation_config.is_assistant
    ):
        return None
    if getattr(config, "kv_lora_rank", None) is not None:
        return latent_cache(config)  # on every device: latent attention layers cache latents (latent_attention.py)
    if device.type != "cpu":
        return None
    self_layer, cross_layer = _generation_layers(config, generation_config, batch_size, max_cache_length, dtype)
    if self_layer is None and cross_layer is None:
        return None
    layer_types, _ = get_layer_types_and_kwargs(config.get_text_config(decoder=True))
    if any(layer_type != "full_attention" for layer_type in layer_types):
        return None  # transformers' layers for windowed or shared layers: ours are full-attention layers
    self_attention = _dynamic_cache_of(self_layer or DynamicLayer, len(layer_types))
    if not config.is_encoder_decoder:
        return self_attention
    return EncoderDecoderCache(self_attention, _dynamic_cache_of(cross_layer or DynamicLayer, len(layer_types)))


def _generation_layers(
    config: PretrainedConfig,
    generation_config: GenerationConfig,
    batch_size: int,
    max_cache_length: int,
    dtype: torch.dtype,
) -> tuple[Callable[[], DynamicLayer] | None, Callable[[], DynamicLayer] | None]:
    """What makes a self-attention and a cross-attention layer of this call's cache (None: transformers' layer)."""
    num_beams = generation_config.num_beams or 1
    # one layer's keys at the longest this generation can get: (batch · beams, K, max_cache_length, D)
    largest_bytes = (
        batch_size * num_beams * config.num_key_value_heads * max_cache_length * config.head_dim * dtype.itemsize
    )
    if num_beams == 1:
        if largest_bytes < IN_PLACE_MIN_BYTES:
            return None, None
        capacity_hint = generation_config.max_length or 0
        return partial(GrowingKVLayer, capacity_hint), None
    self_layer = BeamReorderedLayer if largest_bytes >= DEFERRED_REORDER_MIN_BYTES else None
    cross_layer = partial(BeamSharedCrossLayer, num_beams) if config.is_encoder_decoder else None
    return self_layer, cross_layer


def _dynamic_cache_of(make_layer: Callable[[], DynamicLayer], layer_count: int) -> DynamicCache:
    """A `DynamicCache` whose layers `make_layer` makes: `layer_count` of them, or, for a config that does not say
    how many, one per layer index the cache is first updated at.

    DynamicCache's constructor makes `DynamicLayer`s itself (from a config: one per full-attention layer; without
    one, on demand); the constructor of its base class, `Cache`, is the one that takes the layers or what makes them.
    DynamicCache's adds nothing else (transformers 5.x), so the cache is made by the base constructor, with
    DynamicCache's defaults: a DynamicCache in every respect but its layers' class (tests/test_kv_cache.py compares
    the two).
    """
    cache = DynamicCache.__new__(DynamicCache)
    if layer_count:
        layers = [make_layer() for _ in range(layer_count)]
        Cache.__init__(cache, layers=layers, offloading=False, offload_only_non_sliding=False)
    else:
        Cache.__init__(cache, layer_class_to_replicate=make_layer, offloading=False, offload_only_non_sliding=False)
    return cache
