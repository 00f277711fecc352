"""The checks of a model's inputs: kinds, ranks, shapes and ranges, with errors that name the caller's argument.

Notation: B batch, T new tokens, S keys (cached + new), H heads, E model dim.

Every family runs them before computing anything: `TransformerStack` through `StackInputChecks`, the recurrent
encoder and decoder through the functions it is built on (`check_token_inputs`, `embed_token_ids`), so the same bad
input gets the same error from every family. Shape checks are free (no device sync) and run on every call outside
compilation; token-id range checks cost a sync off the CPU, so they run where they are free or once per generation
(`embed_token_ids`). The errors name the argument as the caller passed it: the decoder of an encoder-decoder model
reports `decoder_input_ids`, `decoder_attention_mask`, ... (`input_prefix`).
"""

from typing import NamedTuple

import torch
from torch import Tensor, nn
from transformers.cache_utils import Cache, EncoderDecoderCache

from .cache_argument import is_paged
from .field_checks import id_outside_vocabulary


def is_integer_tensor(tensor: Tensor) -> bool:
    return not (tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool)


def check_token_inputs(
    input_ids: Tensor | None,
    inputs_embeds: Tensor | None,
    *,
    prefix: str,
    embedding_size: int,
    width_name: str = "hidden_size",
) -> tuple[int, int]:
    """Kinds, ranks and widths of the tokens a stack or an RNN reads: exactly one of `{prefix}input_ids` (2-D integer
    ids) and `{prefix}inputs_embeds` (3-D floating vectors of `embedding_size`, the config's `width_name`), with at
    least one token. Free: shapes only, no device sync. Returns (batch, length)."""
    ids_name, embeds_name = f"{prefix}input_ids", f"{prefix}inputs_embeds"
    if (input_ids is None) == (inputs_embeds is None):
        raise ValueError(f"Pass exactly one of {ids_name} and {embeds_name}.")
    name, given = (ids_name, input_ids) if input_ids is not None else (embeds_name, inputs_embeds)
    if not isinstance(given, Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, got {type(given).__name__}; tokenize with return_tensors='pt'."
        )
    if input_ids is not None:
        if input_ids.dim() != 2:
            raise ValueError(
                f"{ids_name} has shape {tuple(input_ids.shape)}, expected 2-D (batch, length); a single text "
                "needs a batch axis too, e.g. ids[None] or tokenizer(text, return_tensors='pt')."
            )
        if not is_integer_tensor(input_ids):
            raise ValueError(f"{ids_name} must hold integer token ids (torch.long), got dtype {input_ids.dtype}.")
    elif inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != embedding_size:
        raise ValueError(
            f"{embeds_name} has shape {tuple(inputs_embeds.shape)}, expected 3-D (batch, length, {width_name}) = "
            f"(batch, length, {embedding_size})."
        )
    elif not inputs_embeds.is_floating_point():
        raise ValueError(f"{embeds_name} must be floating point vectors, got dtype {inputs_embeds.dtype}.")
    batch, length = given.shape[:2]
    if length == 0:
        # generate() would otherwise fail later with an IndexError on the empty logits.
        raise ValueError(f"{name} is empty (0 tokens); pass at least one token, e.g. the bos token as a prompt.")
    return batch, length


def check_token_ids(input_ids: Tensor, vocab_size: int, name: str) -> None:
    """ValueError naming `name` unless every id is in [0, vocab_size) (a device sync off the CPU)."""
    bad = id_outside_vocabulary(input_ids, vocab_size)
    if bad is not None:
        hint = (
            "check decoder_start_token_id (config or generate()) and that the tokenizer matches the model's vocab_size"
            if name.startswith("decoder_")
            else "check that the tokenizer matches the model's vocab_size"
        )
        raise ValueError(f"{name} contains token id {bad}, outside the vocabulary [0, {vocab_size}); {hint}.")


def embed_token_ids(embedding: nn.Embedding, input_ids: Tensor, name: str, first_call: bool = True) -> Tensor:
    """`embedding(input_ids)`, with ids outside the vocabulary refused by a ValueError naming `name`.

    On CPU the lookup itself finds them for free (an IndexError, translated); elsewhere an explicit check would cost a
    device sync, so it runs on the first call of a generation only (`first_call`: no cache yet), not at every
    decoding step. Inside torch.compile nothing is checked.
    """
    checking = not torch.compiler.is_compiling()
    if checking and input_ids.device.type != "cpu" and first_call:
        check_token_ids(input_ids, embedding.num_embeddings, name)
    try:
        return embedding(input_ids)
    except IndexError:
        if checking:
            check_token_ids(input_ids, embedding.num_embeddings, name)
        raise


class CheckedCall(NamedTuple):
    """A stack's call after its checks: its sizes, the caller's mask split by kind, the cache's lengths and the token
    vectors (`StackInputChecks.checked_call`)."""

    batch: int
    length: int
    ready_mask: Tensor | None  # a caller's ready (B, 1, T, S) mask
    padding: Tensor | None  # or a (B, past + T) 0/1 padding mask
    past: int | Tensor  # tokens already in the self-attention cache
    key_length: int  # keys of this call's full-attention layers
    inputs_embeds: Tensor  # (B, T, E) token vectors before positions
    paged: bool  # the cache is continuous batching's


class StackInputChecks:
    """Mixin of TransformerStack: the checks of its inputs. Reads `config`, `is_decoder`, `input_prefix`,
    `embed_tokens` and `layer_plan`."""

    # What the stack and its layers pass to attention modules and attention functions: not for a caller's kwargs.
    _SET_BY_THE_STACK = frozenset(
        {
            "position_embeddings",
            "position_bias",
            "key_value_states",
            "scaling",
            "dropout",
            "encoder_hidden_states",
            "encoder_attention_mask",
        }
    )

    def checked_call(
        self,
        input_ids: Tensor | None,
        inputs_embeds: Tensor | None,
        token_type_ids: Tensor | None,
        attention_mask: Tensor | None,
        position_ids: Tensor | None,
        encoder_attention_mask: Tensor | None,
        encoder_hidden_states: Tensor | None,
        cache,
        kwargs: dict,
    ) -> CheckedCall:
        """Every check of a stack's call, in one pass before any work, and what the stack reads from its inputs on
        the way: the kind of cache, the caller's mask split by kind, the cache's lengths, the token ids embedded
        (refused by name outside the vocabulary: free on the CPU, off it on the first call of a generation only)."""
        paged = cache is not None and not isinstance(cache, Cache) and is_paged(cache)
        batch, length = self.check_call(
            input_ids,
            inputs_embeds,
            token_type_ids,
            attention_mask,
            encoder_attention_mask,
            encoder_hidden_states,
            cache,
            kwargs,
            paged=paged,
        )
        ready_mask, padding = split_mask(attention_mask)
        past, key_length = cache_lengths(cache, length, ready_mask, paged, self.layer_plan.first_full)
        self.check_shapes(
            position_ids, padding, ready_mask, batch=batch, length=length, past=past, key_length=key_length
        )
        if inputs_embeds is None:
            first_call = cache is None or (isinstance(past, int) and past == 0)
            inputs_embeds = embed_token_ids(self.embed_tokens, input_ids, self.input_prefix + "input_ids", first_call)
        return CheckedCall(batch, length, ready_mask, padding, past, key_length, inputs_embeds, paged)

    def check_call(
        self,
        input_ids: Tensor | None,
        inputs_embeds: Tensor | None,
        token_type_ids: Tensor | None,
        attention_mask: Tensor | None,
        encoder_attention_mask: Tensor | None,
        encoder_hidden_states: Tensor | None,
        cache,
        kwargs: dict,
        *,
        paged: bool,
    ) -> tuple[int, int]:
        """What can be checked before the cache is read: the inputs, the extra keyword arguments, the kinds of the
        masks and the shape of the encoder's (`paged`: the cache is continuous batching's); returns (batch, length)."""
        batch, length = self.check_inputs(input_ids, inputs_embeds, token_type_ids)
        self._check_attention_kwargs(kwargs, cache, encoder_hidden_states, paged)
        check_mask_kind(attention_mask, f"{self.input_prefix}attention_mask")
        check_mask_kind(encoder_attention_mask, "encoder_attention_mask")
        if encoder_hidden_states is not None and not torch.compiler.is_compiling():
            check_attention_mask(
                encoder_attention_mask, batch, encoder_hidden_states.shape[1], "encoder_attention_mask"
            )
        return batch, length

    def check_shapes(
        self,
        position_ids: Tensor | None,
        padding: Tensor | None,
        ready_mask: Tensor | None,
        *,
        batch: int,
        length: int,
        past: int | Tensor,
        key_length: int,
    ) -> None:
        """Shapes of the given positions and self-attention masks against the inputs and the cache (free: no device
        sync; not checked under compilation)."""
        if torch.compiler.is_compiling():
            return
        past = int(past)
        self._check_position_ids(position_ids, batch, length)
        mask_name = f"{self.input_prefix}attention_mask"
        if padding is not None:
            check_attention_mask(padding, batch, past + length, mask_name)
        elif ready_mask is not None:
            self._check_ready_mask(ready_mask, batch, length, key_length, mask_name)

    def check_inputs(
        self, input_ids: Tensor | None, inputs_embeds: Tensor | None, token_type_ids: Tensor | None
    ) -> tuple[int, int]:
        """Kinds, ranks and widths of the inputs (free: shapes only, no device sync); returns (batch, length)."""
        batch, length = check_token_inputs(
            input_ids, inputs_embeds, prefix=self.input_prefix, embedding_size=self.config.hidden_size
        )
        if token_type_ids is not None:
            if not isinstance(token_type_ids, Tensor) or not is_integer_tensor(token_type_ids):
                kind = token_type_ids.dtype if isinstance(token_type_ids, Tensor) else type(token_type_ids).__name__
                raise ValueError(f"token_type_ids must be an integer torch.Tensor, got {kind}.")
            if tuple(token_type_ids.shape) != (batch, length):
                name = (
                    f"{self.input_prefix}input_ids" if input_ids is not None else f"{self.input_prefix}inputs_embeds"
                )
                raise ValueError(
                    f"token_type_ids has shape {tuple(token_type_ids.shape)}, expected (batch, length) = "
                    f"({batch}, {length}): one segment id per token of {name}."
                )
        return batch, length

    def _check_token_type_ids(self, token_type_ids: Tensor) -> None:
        if not token_type_ids.numel():
            return
        low, high = int(token_type_ids.min()), int(token_type_ids.max())
        types = self.config.type_vocab_size
        if low < 0 or high >= max(types, 1):
            bad = low if low < 0 else high
            if types:
                raise ValueError(f"token_type_ids contains segment id {bad}, outside [0, type_vocab_size={types}).")
            raise ValueError(
                f"token_type_ids contains segment id {bad}, but the model has no token-type embeddings "
                "(type_vocab_size=0): only 0, what tokenizers return for single texts, is accepted; set "
                "type_vocab_size to use segments."
            )

    def _check_attention_kwargs(self, kwargs: dict, cache, encoder_hidden_states: Tensor | None, paged: bool) -> None:
        """Extra keyword arguments go to the attention functions; refuse those that would clash with what the stack
        passes itself or replace the configured backend, and a paged cache where it cannot be used."""
        # A loop over the dict, not `frozenset & kwargs.keys()`: Dynamo in torch 2.11 cannot trace set operations on
        # dict views, and this runs inside a compiled forward.
        clashing = sorted(name for name in kwargs if name in self._SET_BY_THE_STACK)
        if clashing:
            raise TypeError(
                f"forward() got {', '.join(clashing)}: {'these are' if len(clashing) > 1 else 'this is'} computed "
                "by the model itself and passed to its attention layers; remove it from the call."
            )
        if "attention_function" in kwargs:
            # The attention modules take it to run a function of their own instead of the configured backend.
            raise TypeError(
                "forward() got attention_function: the attention layers run the backend that "
                "config._attn_implementation names; choose it with attn_implementation= in from_pretrained() or "
                "model.set_attn_implementation(), or register a function with transformers.AttentionInterface."
            )
        if not self.is_decoder and (cache is not None or kwargs.get("past_key_values") is not None):
            # An encoder attends to its whole input in one call: there are no earlier keys to reuse, and a cache it
            # wrote to would be read back as a "past" that shifts positions and masks on the next call.
            given = "cache" if cache is not None else "past_key_values"
            raise TypeError(
                f"forward() got {given}={type(cache if cache is not None else kwargs[given]).__name__}: an encoder "
                "takes no KV cache (it reads the whole input at once); call it without one. Continuous batching "
                "(generate_batch) and generate() with a cache are for the decoder and encoder-decoder families."
            )
        if paged and encoder_hidden_states is not None:
            raise ValueError(
                "Continuous batching (generate_batch, transformers serve) holds decoder-only self-attention in its "
                "paged cache; this decoder attends to an encoder (the encoder-decoder family). "
                "Use generate() for encoder-decoder models."
            )

    def _check_position_ids(self, position_ids: Tensor | None, batch: int, length: int) -> None:
        """Given positions: an integer tensor of shape (batch or 1, length), one position per new token."""
        if position_ids is None:
            return
        name = f"{self.input_prefix}position_ids"
        if not isinstance(position_ids, Tensor) or not is_integer_tensor(position_ids):
            kind = position_ids.dtype if isinstance(position_ids, Tensor) else type(position_ids).__name__
            raise ValueError(f"{name} must be an integer torch.Tensor of positions, got {kind}.")
        if position_ids.dim() != 2 or position_ids.shape[0] not in (1, batch) or position_ids.shape[1] != length:
            raise ValueError(
                f"{name} has shape {tuple(position_ids.shape)}, expected (batch, length) = ({batch} or 1, {length}): "
                "one position per new token."
            )

    def _check_ready_mask(self, mask: Tensor, batch: int, length: int, key_length: int, name: str) -> None:
        """A 4-D mask must broadcast to (batch, heads, T, S) = (B|1, 1|H, new tokens, cached + new tokens)."""
        heads = self.config.num_attention_heads
        batch_ok, heads_ok = mask.shape[0] in (1, batch), mask.shape[1] in (1, heads)
        if not (batch_ok and heads_ok and tuple(mask.shape[2:]) == (length, key_length)):
            raise ValueError(
                f"{name} is 4-D with shape {tuple(mask.shape)}, expected (batch, heads, query length, key length) = "
                f"({batch} or 1, 1 or {heads}, {length}, {key_length}): True/0 where a query may attend to a key, "
                "cached keys included; or pass a 2-D (batch, length) 0/1 padding mask."
            )


def check_mask_kind(attention_mask, name: str) -> None:
    """Raise TypeError/ValueError unless a mask is None or a tensor: a 2-D 0/1 padding mask of any number type, or a
    4-D mask that is boolean (True = attend) or floating (additive: 0 = attend). A 4-D mask of 0/1 integers would
    read the other way round under either convention, so it is refused rather than guessed."""
    if attention_mask is None:
        return
    if not isinstance(attention_mask, Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor, got {type(attention_mask).__name__}; tokenize with return_tensors='pt'."
        )
    if attention_mask.dim() == 4 and not (attention_mask.dtype == torch.bool or attention_mask.is_floating_point()):
        raise ValueError(
            f"{name} is a 4-D mask of {attention_mask.dtype}: a 4-D mask must be boolean (True where a query may "
            "attend to a key) or floating point (additive: 0 where it may, a large negative number elsewhere)."
        )


def check_attention_mask(attention_mask: Tensor | None, batch_size: int, length: int, name: str) -> None:
    """Raise ValueError when a 2D padding mask does not match its inputs' (batch, length)."""
    if attention_mask is None:
        return
    if tuple(attention_mask.shape) != (batch_size, length):
        raise ValueError(
            f"{name} has shape {tuple(attention_mask.shape)}, expected (batch, length) = ({batch_size}, {length}): "
            "one 0/1 entry per token, cached tokens included."
        )


def split_mask(attention_mask: Tensor | None) -> tuple[Tensor | None, Tensor | None]:
    """(a caller's ready 4-D mask, a (B, past + T) 0/1 padding mask): one of them, or neither, is given."""
    ready_mask = attention_mask if attention_mask is not None and attention_mask.dim() == 4 else None
    return ready_mask, None if ready_mask is not None else attention_mask


def cache_lengths(
    cache: Cache | None, length: int, ready_mask: Tensor | None, paged: bool, full_layer: int | None
) -> tuple:
    """(tokens already in the self-attention cache, key length of this call's full-attention layers): (0, T) without
    a cache. A paged cache (continuous batching) holds many requests; its keys are those its ready mask covers. With
    only sliding-window layers (`full_layer` None) the length is that of a full layer: the tokens seen and new."""
    if paged:
        return 0, length if ready_mask is None else ready_mask.shape[-1]
    if isinstance(cache, EncoderDecoderCache):
        cache = cache.self_attention_cache
    if cache is None:
        return 0, length
    try:
        past = cache.get_seq_length()
    except ValueError:  # transformers 5.23: a cache of linear-attention layers only, which read no positions or mask
        past = 0
    if full_layer is None:
        return past, past + length
    return past, cache.get_mask_sizes(length, full_layer)[0]
