"""The stack shared by every family: embeddings → positions → masks → N layers → final norm.

Notation: B batch, T new tokens, S keys (cached + new), H heads, D head dim, E model dim.

A `TransformerStack` is an encoder (bidirectional), a causal decoder, or a decoder with cross-attention (the
encoder-decoder family). Per call it computes once what every layer needs, and hands it down: the positions (which
count real tokens, so left padding and the cache keep them right), the positional scheme's signals (it answers for
itself where they act: `positional.PositionalEncoding`), and the masks in the form the attention backend takes. Its
inputs are checked first (input_checks.py); its modules come from the builders (builders.py).
"""

import math

import torch
from torch import Tensor, nn
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.modeling_outputs import BaseModelOutputWithPastAndCrossAttentions

from .attention import ATTENTION_BACKENDS, AttentionBackend, get_attention_backend
from .builders import build_norm, build_positional
from .cache_argument import CACHE_FIELD
from .configuration_hf_attention import HFAttentionConfigBase
from .flex import block_mask
from .input_checks import StackInputChecks
from .layer_plan import build_layer, plan_layers
from .masks import (
    MaskParts,
    chunk_indices,
    fit_to_length,
    has_padding,
    left_padding,
    packed_documents,
    to_additive,
)
from .positional import RotaryEmbedding


class TransformerStack(StackInputChecks, nn.Module):
    """Embeddings, N layers and an optional final norm; an encoder, a causal decoder, or a decoder with
    cross-attention.

    Args:
        config: The family config.
        num_layers: N.
        is_decoder: Causal self-attention (and a cache).
        has_cross_attention: Attend to `encoder_hidden_states` in every layer.
        embed_tokens: The token embedding (shared between encoder and decoder in the encoder-decoder family).
    """

    def __init__(
        self,
        config: HFAttentionConfigBase,
        *,
        num_layers: int,
        is_decoder: bool,
        has_cross_attention: bool = False,
        embed_tokens: nn.Embedding,
    ):
        super().__init__()
        self.config = config
        self.is_decoder = is_decoder
        # Errors name the arguments the caller passed: the decoder of an encoder-decoder gets decoder_input_ids, ...
        self.input_prefix = "decoder_" if has_cross_attention else ""
        self.embed_tokens = embed_tokens
        # √E (the 2017 paper, Gemma) times µP's embedding multiplier (Yang et al. 2022; Granite), 1.0 by default
        root = math.sqrt(config.hidden_size) if config.scale_embeddings else 1.0
        self.embed_scale = root * config.embedding_multiplier
        self.token_type_embeddings = (
            nn.Embedding(config.type_vocab_size, config.hidden_size) if config.type_vocab_size else None
        )
        self.position = build_positional(config, bidirectional=not is_decoder)
        # Gemma 3, ModernBERT: the sliding-window layers rotate with a base of their own
        self.local_position = (
            RotaryEmbedding.local_from_config(config) if config.position_encoding == "rotary" else None
        )
        self.layer_plan = plan_layers(config, num_layers)  # each layer's token mixer and feed-forward network
        # Ministral 3: the attention layers scale their queries by the position ids, so they receive them
        self.queries_read_positions = getattr(config, "llama_4_scaling_beta", None) is not None
        self.embedding_norm = build_norm(config) if config.embedding_norm else None
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.layers = nn.ModuleList(
            build_layer(
                config,
                i,
                is_decoder=is_decoder,
                has_cross_attention=has_cross_attention,
                mixer=self.layer_plan.mixers[i],
                feed_forward=self.layer_plan.feed_forwards[i],
            )
            for i in range(num_layers)
        )
        self.norm = build_norm(config) if config.final_norm else None
        self.gradient_checkpointing = False

    def embed(self, inputs_embeds: Tensor, token_type_ids: Tensor | None) -> Tensor:
        """Token embeddings × scale (+ token-type embeddings): (B, T, E) → (B, T, E). Inputs passed `check_inputs`."""
        if token_type_ids is not None and not torch.compiler.is_compiling():
            self._check_token_type_ids(token_type_ids)
        # ×1 would still be a pass over (B, T, E), forward and backward
        hidden = inputs_embeds * self.embed_scale if self.embed_scale != 1.0 else inputs_embeds
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros(hidden.shape[:2], dtype=torch.long, device=hidden.device)
            hidden = hidden + self.token_type_embeddings(token_type_ids)
        return hidden

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        encoder_hidden_states: Tensor | None = None,
        encoder_attention_mask: Tensor | None = None,
        cache: Cache | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        return_dict: bool = True,
        **kwargs,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """Run the stack over (B, T) new tokens (after `past` cached ones): embed → positions → masks → layers.

        `attention_mask` is a (B, past + T) 0/1 padding mask, or a ready (B, 1, T, S) mask (boolean, True = attend,
        or additive, 0 = attend; causality included). Position ids default to the number of real tokens before each
        token, which keeps every positional scheme right under left padding and caching. Other keyword arguments
        reach the attention function of every layer (and a paged cache), as in transformers' models.
        """
        # The masks take the form of the backend that the attention modules look up by the same name (ours are read
        # from the table directly: this runs at every decoding step).
        name = "eager" if output_attentions else self.config._attn_implementation
        backend = ATTENTION_BACKENDS[name] if name in ATTENTION_BACKENDS else get_attention_backend(name)
        call = self.checked_call(
            input_ids,
            inputs_embeds,
            token_type_ids,
            attention_mask,
            position_ids,
            encoder_attention_mask,
            encoder_hidden_states,
            cache,
            kwargs,
        )
        batch, length, ready_mask, padding, past, key_length, inputs_embeds, paged = call
        checking = not torch.compiler.is_compiling()
        hidden = self.embed(inputs_embeds, token_type_ids)  # (B, T, E)
        documents = self._packed_documents(position_ids, attention_mask, cache, batch, checking)
        position_ids, key_positions = self._positions(padding, position_ids, length, key_length, past)
        if paged and key_positions is not None:
            key_positions = _paged_key_positions(kwargs.get("cu_seq_lens_k"), key_length)
        hidden, rotary, bias = self._apply_positions(hidden, position_ids, key_positions, backend)
        parts = self._self_attention_parts(padding, ready_mask, documents, length, key_length, past, checking)
        layer_inputs = self._layer_inputs(
            parts, rotary, cache, backend, hidden, encoder_attention_mask, encoder_hidden_states, output_attentions
        )
        if self.queries_read_positions:  # (query_key_tuning.py: `llama_4_scaling_beta`)
            layer_inputs["position_ids"] = position_ids
        if not self.layer_plan.uniform:  # per-layer masks and rotations (windows, local bases, NoPE layers)
            layer_inputs["per_layer"] = self._per_layer_inputs(
                layer_inputs, parts, rotary, position_ids, padding, cache, paged, backend, hidden
            )
        # Tensors that may carry gradients go to the layers positionally (see EncoderLayer.forward), the rest by name.
        layer_args = (bias, encoder_hidden_states) if self.is_decoder else (bias,)
        return self._run_layers(
            hidden,
            layer_args,
            {**layer_inputs, **kwargs},
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            has_cross_attention=encoder_hidden_states is not None,
            cache=cache,
        )

    def _layer_inputs(
        self,
        parts: MaskParts,
        rotary: tuple[Tensor, Tensor] | None,
        cache: Cache | None,
        backend: AttentionBackend,
        hidden: Tensor,
        encoder_attention_mask: Tensor | None,
        encoder_hidden_states: Tensor | None,
        output_attentions: bool,
    ) -> dict:
        """What every layer takes by name: the masks in the backend's form, the rotary tables, the cache, and whether
        the attention weights are wanted (the attention modules then run the eager backend, which returns them)."""
        batch, length = hidden.shape[:2]
        layer_inputs = {
            "attention_mask": _render_mask(parts, backend, batch, hidden),
            "position_embeddings": rotary,
            "cache": cache,
            "output_attentions": output_attentions,
        }
        if self.is_decoder:
            layer_inputs["encoder_attention_mask"] = self._cross_attention_mask(
                encoder_attention_mask, encoder_hidden_states, length, backend, hidden
            )
        return layer_inputs

    def _per_layer_inputs(
        self,
        layer_inputs: dict,
        parts: MaskParts,
        rotary: tuple[Tensor, Tensor] | None,
        position_ids: Tensor,
        padding: Tensor | None,
        cache: Cache | None,
        paged: bool,
        backend: AttentionBackend,
        hidden: Tensor,
    ) -> list[tuple]:
        """Each layer's (attention mask, rotary tables): its attention type's mask (a sliding layer's window, over
        the keys a sliding cache keeps) and its rotation (the local base's, or none for a NoPE layer)."""
        masks = {"full_attention": layer_inputs["attention_mask"]}
        if self.layer_plan.first_sliding is not None:
            if paged:
                raise ValueError(
                    "sliding_window layers cannot run in continuous batching's paged cache here; generate() without "
                    "it, or use a model without sliding_window."
                )
            masks["sliding_attention"] = _render_mask(
                self._window_parts(parts, padding, cache), backend, hidden.shape[0], hidden
            )
        if self.layer_plan.first_chunked is not None:
            if paged:
                raise ValueError(
                    "chunked_attention layers cannot run in continuous batching's paged cache here; generate() "
                    "without it, or use a model without attention_chunk_size."
                )
            masks["chunked_attention"] = _render_mask(
                self._chunk_parts(parts, padding, cache, position_ids), backend, hidden.shape[0], hidden
            )
        if any(kind == "padding" for kind, _ in self.layer_plan.layers):  # mixers that attend to nothing
            masks["padding"] = _new_token_padding(parts, padding, paged)
        rotations = {"global": rotary, None: None}
        if self.local_position is not None:
            rotations["local"] = self.local_position.rotary_tables(position_ids, hidden.dtype)
        return [(masks[kind], rotations[rotation]) for kind, rotation in self.layer_plan.layers]

    def _window_parts(self, parts: MaskParts, padding: Tensor | None, cache: Cache | None) -> MaskParts:
        """The sliding layers' mask parts: the full layers' with the window, over the keys a sliding cache returns."""
        if parts.ready is not None:
            return parts  # a caller's own mask is used as it is
        parts = self._cached_key_parts(parts, padding, cache, self.layer_plan.first_sliding)
        return parts._replace(window=self.config.sliding_window)

    @staticmethod
    def _cached_key_parts(parts: MaskParts, padding: Tensor | None, cache: Cache | None, layer: int) -> MaskParts:
        """`parts` over the keys that layer `layer`'s cache returns: a sliding (or chunked) cache keeps only the last
        W − 1 tokens, and `get_mask_sizes` says how many keys it returns and where they start."""
        key_length, key_offset = parts.query_length + parts.past, 0
        if isinstance(cache, EncoderDecoderCache):
            cache = cache.self_attention_cache
        if cache is not None:
            key_length, key_offset = cache.get_mask_sizes(parts.query_length, layer)
        key_padding = parts.key_padding
        if key_padding is not None:
            key_padding = fit_to_length(padding[:, key_offset : key_offset + key_length], key_length)
        return parts._replace(key_length=key_length, key_offset=key_offset, key_padding=key_padding)

    def _chunk_parts(
        self, parts: MaskParts, padding: Tensor | None, cache: Cache | None, position_ids: Tensor
    ) -> MaskParts:
        """The chunked layers' mask parts (Llama 4): the full layers' over the keys their cache returns (a chunk's
        worth: it keeps the last C − 1 tokens, as a sliding cache of window C), each query limited to the keys of
        its own chunk. Chunks are counted as transformers counts them: cache slots from each row's first real token
        (its leading padding left out), or, in packed rows, the positions within each text. A call whose queries and
        keys all lie in one chunk gets the full layers' parts as they are."""
        if parts.ready is not None:
            return parts  # a caller's own mask is used as it is
        parts = self._cached_key_parts(parts, padding, cache, self.layer_plan.first_chunked)
        chunk, device = self.config.attention_chunk_size, position_ids.device
        if parts.documents is not None:  # packed texts: the chunks of each text, from its positions
            chunks = torch.div(position_ids.expand(parts.documents.shape[0], -1), chunk, rounding_mode="floor")
            return parts._replace(query_chunks=chunks, key_chunks=chunks)
        past, length = parts.past, parts.query_length
        if (
            parts.key_padding is None
            and isinstance(past, int)
            and (past + length - 1) // chunk == parts.key_offset // chunk
        ):
            return parts
        origin = None if parts.key_padding is None else left_padding(padding)
        return parts._replace(
            query_chunks=chunk_indices(past, length, origin, chunk, device),
            key_chunks=chunk_indices(parts.key_offset, parts.key_length, origin, chunk, device),
        )

    def _apply_positions(
        self, hidden: Tensor, position_ids: Tensor, key_positions: Tensor | None, backend: AttentionBackend
    ) -> tuple[Tensor, tuple[Tensor, Tensor] | None, Tensor | None]:
        """The layers' input, and what the attention layers receive of the positions; the positional scheme answers
        for itself where positions act: absolute embeddings join the token embeddings (before the embedding norm and
        dropout), rotary (cos, sin) tables rotate queries and keys, a score bias joins the scores ((B|1, H, T, S), or
        for FlexAttention a score modification computing it from the positions)."""
        if self.position is not None:
            hidden = self.position.add_to_embeddings(hidden, position_ids)
        if self.embedding_norm is not None:
            hidden = self.embedding_norm(hidden)
        hidden = self.dropout(hidden)
        if self.position is None:
            return hidden, None, None
        rotary = self.position.rotary_tables(position_ids, hidden.dtype)
        flex = backend.mask_format == "block"
        bias = self.position.score_bias(
            position_ids, key_positions, dtype=hidden.dtype, batch=hidden.shape[0], flex=flex
        )
        return hidden, rotary, bias

    def _cross_attention_mask(
        self,
        encoder_attention_mask: Tensor | None,
        encoder_hidden_states: Tensor | None,
        length: int,
        backend: AttentionBackend,
        hidden: Tensor,
    ):
        """The mask over the encoder output in the backend's form ((B, 1, 1, S) for boolean masks), or None when no
        source token is padding (under compilation, which cannot look, whenever a mask is given)."""
        if encoder_hidden_states is None:
            return None
        checking = not torch.compiler.is_compiling()
        padded = encoder_attention_mask is not None and (not checking or has_padding(encoder_attention_mask))
        parts = MaskParts(
            query_length=length,
            key_length=encoder_hidden_states.shape[1],
            key_padding=encoder_attention_mask if padded else None,
        )
        return _render_mask(parts, backend, hidden.shape[0], hidden)

    def _run_layers(
        self,
        hidden: Tensor,
        layer_args: tuple,
        layer_inputs: dict,
        *,
        output_attentions: bool,
        output_hidden_states: bool,
        has_cross_attention: bool,
        cache: Cache | None,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """The layer loop and the final norm, collecting hidden states and attention weights when asked; the output
        carries the cache the layers wrote to (under this release's field name)."""
        all_hidden, self_weights, cross_weights = [], [], []
        per_layer = layer_inputs.pop("per_layer", None)
        for index, layer in enumerate(self.layers):
            if output_hidden_states:
                all_hidden.append(hidden)
            if per_layer is not None:
                mask, rotation = per_layer[index]
                layer_inputs = {**layer_inputs, "attention_mask": mask, "position_embeddings": rotation}
            outputs = layer(hidden, *layer_args, **layer_inputs)
            hidden = outputs[0]
            # the weights of attention layers only (a linear-attention layer has none), as transformers reports them
            if output_attentions and outputs[1] is not None:
                self_weights.append(outputs[1])
                if self.is_decoder and has_cross_attention:
                    cross_weights.append(outputs[2])
        if self.norm is not None:
            hidden = self.norm(hidden)
        if output_hidden_states:
            all_hidden.append(hidden)
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=hidden,
            hidden_states=tuple(all_hidden) if output_hidden_states else None,
            attentions=tuple(self_weights) if output_attentions else None,
            cross_attentions=tuple(cross_weights) if output_attentions and cross_weights else None,
            **{CACHE_FIELD: cache},
        )

    @staticmethod
    def _packed_documents(
        position_ids: Tensor | None, attention_mask: Tensor | None, cache: Cache | None, batch: int, checking: bool
    ) -> Tensor | None:
        """(B, T) document indices when the rows pack several texts (positions restart), else None.

        As in transformers' masking utilities, this applies to uncached calls with positions and no attention mask
        (padding-free training); under compilation the check cannot run and the document mask is always built.
        """
        if position_ids is None or attention_mask is not None or cache is not None:
            return None
        documents = packed_documents(position_ids.expand(batch, -1))
        if checking and not bool(documents[:, -1].any()):
            return None
        return documents

    def _positions(
        self, attention_mask: Tensor | None, position_ids: Tensor | None, length: int, key_length: int, past
    ) -> tuple[Tensor, Tensor | None]:
        """Query positions (B|1, T), and key positions (B|1, S) when a distance bias needs them (else None).

        With a padding mask a token's position is the number of real tokens before it, so a left-padded row sees the
        same positions as the row alone; without one, positions continue from the cache length. When every key is a
        token of this call (no cached keys), the keys' positions are the queries' own, given or not: distance-based
        biases (ALiBi, T5 buckets) then restart with given positions in packed rows, and a mask that hides nothing
        changes nothing.
        """
        device = self.embed_tokens.weight.device
        needs_keys = self.position is not None and self.position.needs_key_positions
        given = position_ids is not None
        real_before = None
        if attention_mask is not None:
            real_before = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)  # (B, past + T)
        if not given:
            position_ids = (
                torch.arange(length, device=device)[None] + past if real_before is None else real_before[:, -length:]
            )
        if not needs_keys:
            return position_ids, None
        if given and key_length == length:
            return position_ids, position_ids
        if real_before is None:
            return position_ids, torch.arange(key_length, device=device)[None]  # (1, S)
        return position_ids, fit_to_length(real_before, key_length)

    def _self_attention_parts(
        self,
        padding: Tensor | None,
        ready_mask: Tensor | None,
        documents: Tensor | None,
        length: int,
        key_length: int,
        past,
        checking: bool,
    ) -> MaskParts:
        """What limits self-attention: causality (decoders), padding, packed documents, or a caller's ready mask.

        A causal stack without padding needs no mask under SDPA: the kernel's causal flag (T = S) or no mask at all
        (one new token sees the whole past) is exact and faster (`MaskParts.boolean`). Packed texts (`documents`)
        attend within their own text only.
        """
        if ready_mask is not None:
            ready = ready_mask if ready_mask.dtype == torch.bool else ready_mask == 0
            return MaskParts(query_length=length, key_length=key_length, ready=ready)
        padded = padding is not None and (not checking or has_padding(padding))
        return MaskParts(
            query_length=length,
            key_length=key_length,
            past=past,
            causal=self.is_decoder,
            key_padding=fit_to_length(padding, key_length) if padded else None,
            documents=documents,
        )


def _render_mask(parts: MaskParts, backend: AttentionBackend, batch: int, hidden: Tensor):
    """`parts` drawn in the form `backend` takes: a boolean tensor, an additive one, a flex block mask, or None."""
    if backend.mask_format is None:
        return None
    if backend.mask_format == "block":
        return block_mask(parts, batch=batch, device=hidden.device)
    mask = parts.boolean(hidden.device, implicit_causal=backend.implicit_causal)
    if mask is None or backend.mask_format == "bool":
        return mask
    return to_additive(mask, hidden.dtype)


def _new_token_padding(parts: MaskParts, padding: Tensor | None, paged: bool) -> Tensor | None:
    """The (B, T) 0/1 padding mask of this call's tokens, for the mixers that read no attention mask (linear
    attention), as transformers' `create_recurrent_attention_mask` gives it: None when no token is padding, for a
    single new token (a generated token is never padding) and with a caller's ready 4-D mask."""
    if paged:
        raise ValueError(
            "linear_attention layers cannot run in continuous batching's paged cache: it holds keys and values, and "
            "they keep a state per sequence; generate() without it."
        )
    if parts.documents is not None and not torch.compiler.is_compiling():
        raise ValueError(
            "linear_attention layers cannot read packed rows (position_ids that restart, without an attention mask): "
            "their state would carry each text into the next. Pass one text per row, padded, with its attention_mask."
        )
    if parts.key_padding is None or parts.query_length == 1:
        return None
    return padding[:, -parts.query_length :]


def _paged_key_positions(cumulative_key_lengths, key_length: int) -> Tensor:
    """(1, S) position of each key of a paged batch within its own request: continuous batching lays the requests'
    cached and new keys end to end, request r at [cu[r], cu[r + 1])."""
    if isinstance(cumulative_key_lengths, dict):  # one entry per kind of layer; ours are all full attention
        cumulative_key_lengths = next(iter(cumulative_key_lengths.values()))
    bounds = cumulative_key_lengths.long()
    keys = torch.arange(key_length, device=bounds.device)
    request = torch.searchsorted(bounds[1:], keys, right=True).clamp(max=bounds.numel() - 2)
    return (keys - bounds[request])[None]
