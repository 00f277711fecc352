"""The hf-attention model families as Hugging Face `PreTrainedModel`s: builders, stacks, base models and heads.

Notation: B batch, T (target) length, S source length, E model dim, V vocabulary.

This file builds the leaf modules (masks, positional encodings, attention, layers) from a config, asking the variant
registries for the score and the positional scheme (whose `from_config` picks the fields it needs), and wires them
into three families:
- encoder (BERT-like): HFAttentionEncoderModel, …ForMaskedLM, …ForSequenceClassification, …ForTokenClassification;
- decoder (GPT-like): HFAttentionDecoderModel, HFAttentionForCausalLM;
- encoder-decoder (Vaswani 2017): HFAttentionSeq2SeqModel, HFAttentionForSeq2SeqLM.
Masks and positional signals are computed once per stack and passed to every layer; caches are HF Cache objects.
"""

import inspect
import math

import torch
from torch import Tensor, nn
from transformers import GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    CausalLMOutputWithCrossAttentions,
    MaskedLMOutput,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
    SequenceClassifierOutput,
    SequenceClassifierOutputWithPast,
    TokenClassifierOutput,
)
from transformers.utils import ModelOutput

from .activations import gate_activation
from .attention import MultiHeadAttention, get_attention_backend
from .cache_argument import cache_from_arguments, cache_of, is_paged, with_cache
from .configuration_hf_attention import (
    HFAttentionConfigBase,
    HFAttentionDecoderConfig,
    HFAttentionEncoderConfig,
    HFAttentionRecurrentConfig,
    HFAttentionSeq2SeqConfig,
)
from .flex import block_mask
from .generation_mixin import _KeepPaddingMaskForGeneration
from .layers import DecoderLayer, EncoderLayer, HeadTransform, make_feed_forward, maybe_dropout
from .losses import check_labels, linear_cross_entropy, shift_tokens_right, token_cross_entropy
from .masks import (
    MaskParts,
    check_attention_mask,
    check_mask_kind,
    fit_to_length,
    has_padding,
    packed_documents,
    to_additive,
)
from .norms import NORMS, make_norm
from .positional import NO_POSITIONAL_ENCODING, POSITIONAL_ENCODINGS, PositionalEncoding
from .recurrent import HFAttentionRecurrentForSeq2SeqLM, HFAttentionRecurrentModel
from .scores import ScoreModule, make_score

# ---------------------------------------------------------------------------------------------------------------------
# Builders: config → leaf modules


def build_positional(config: HFAttentionConfigBase, *, bidirectional: bool) -> PositionalEncoding | None:
    """The positional-encoding module named by `config.position_encoding` (None for "none")."""
    if config.position_encoding == NO_POSITIONAL_ENCODING:
        return None
    return POSITIONAL_ENCODINGS[config.position_encoding].from_config(config, bidirectional=bidirectional)


def build_attention(config: HFAttentionConfigBase, layer_idx: int, *, is_causal: bool, is_cross: bool):
    """A MultiHeadAttention with the configured score, heads and biases."""
    score, scaling = make_score(config.attention_score, num_heads=config.num_attention_heads, head_dim=config.head_dim)
    return MultiHeadAttention(
        hidden_size=config.hidden_size,
        num_heads=config.num_attention_heads,
        num_kv_heads=config.num_key_value_heads,
        head_dim=config.head_dim,
        bias=config.attention_bias,
        dropout=config.attention_dropout,
        is_causal=is_causal,
        is_cross_attention=is_cross,
        layer_idx=layer_idx,
        score=score,
        scaling=scaling,
    )


def build_layer(config: HFAttentionConfigBase, layer_idx: int, *, is_decoder: bool, has_cross_attention: bool):
    """An EncoderLayer, or a DecoderLayer (causal; with cross-attention in the encoder-decoder family)."""

    def norm() -> nn.Module:
        return make_norm(config.norm_type, config.hidden_size, config.layer_norm_eps)

    common = {
        "self_attn": build_attention(config, layer_idx, is_causal=is_decoder, is_cross=False),
        "self_attn_norm": norm(),
        "mlp": make_feed_forward(
            config.hidden_act,
            hidden_size=config.hidden_size,
            intermediate_size=config.intermediate_size,
            bias=config.mlp_bias,
            dropout=config.activation_dropout,
        ),
        "mlp_norm": norm(),
        "norm_position": config.norm_position,
        "dropout": config.hidden_dropout_prob,
    }
    if not is_decoder:
        return EncoderLayer(**common)
    if has_cross_attention:
        common["cross_attn"] = build_attention(config, layer_idx, is_causal=False, is_cross=True)
        common["cross_attn_norm"] = norm()
    return DecoderLayer(**common)


def _label_shape(inputs: Tensor | None, rank: int, logits_to_keep: int | Tensor = 0) -> tuple[int, ...] | None:
    """The (batch, length) a head's labels must have: one per position of `inputs` whose logits are computed.

    None when `inputs` is missing or malformed (2-D ids or 3-D embeddings expected): the stack reports that itself.
    """
    if not isinstance(inputs, Tensor) or inputs.dim() != rank:
        return None
    batch, length = inputs.shape[:2]
    kept = _logit_slice(logits_to_keep)
    if isinstance(kept, slice):
        return (batch, len(range(length)[kept]))
    return (batch, *kept.shape)


# ---------------------------------------------------------------------------------------------------------------------
# Shared base


class HFAttentionPreTrainedModel(PreTrainedModel):
    """Weight initialisation, backend checks and full `auto_map` saving for every hf-attention model."""

    config_class = HFAttentionConfigBase
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["EncoderLayer", "DecoderLayer"]
    _skip_keys_device_placement = ["cache", "past_key_values"]  # the cache's name from transformers 5.24, and before
    _supports_flex_attn = True
    _supports_sdpa = True
    _supports_attention_backend = True
    _can_compile_fullgraph = True

    def _sdpa_can_dispatch(self, is_init_check: bool = False) -> bool:
        # The config's rule (dot-product scores only); HF falls back to eager when sdpa was not asked for explicitly.
        self.config.check_attention_implementation("sdpa")
        return super()._sdpa_can_dispatch(is_init_check)

    def _check_and_adjust_attn_implementation(self, attn_implementation, is_init_check=False, **kwargs):
        if isinstance(attn_implementation, str) and attn_implementation.startswith("flash_attention"):
            raise ValueError(
                f"attn_implementation={attn_implementation!r} is not supported by {type(self).__name__}: flash "
                "kernels "
                "take no additive position bias or custom score; use 'sdpa' or 'eager'."
            )
        return super()._check_and_adjust_attn_implementation(attn_implementation, is_init_check, **kwargs)

    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, tuple(NORMS.values())):  # every registered norm starts as the identity scale
            init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:
                init.zeros_(module.bias)
        elif isinstance(module, (PositionalEncoding, ScoreModule)):  # the variants declare their own start
            module.init_weights(std)

    def sequence_classification_loss(
        self, pooled_logits: Tensor, labels: Tensor, num_items_in_batch: Tensor | int | None
    ) -> Tensor:
        """The loss of (B, num_labels) logits by `config.problem_type`, as transformers' classifiers compute it.

        The Trainer passes `num_items_in_batch` (forward takes **kwargs) and then skips its own division by the
        accumulation steps, so the loss must then be a sum over the global count of labels, not a batch mean.
        """
        loss = self.loss_function(
            labels=labels, pooled_logits=pooled_logits, config=self.config, num_items_in_batch=num_items_in_batch
        )
        if num_items_in_batch is not None and self.config.problem_type != "single_label_classification":
            loss = loss * labels.numel() / num_items_in_batch  # MSE / BCE are means over labels.numel()
        return loss

    def _build_lm_head(self, config: HFAttentionConfigBase) -> None:
        """The vocabulary projection `lm_head` of a language-model head, with the optional bias and transform."""
        self.lm_head_transform = None
        if config.lm_head_transform:
            activation = gate_activation(config.hidden_act)  # a gated FFN names its gate
            self.lm_head_transform = HeadTransform(
                hidden_size=config.hidden_size,
                activation=activation,
                norm=make_norm(config.norm_type, config.hidden_size, config.layer_norm_eps),
            )
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=config.lm_head_bias)
        self._freeze_lm_head_bias()

    def _freeze_lm_head_bias(self) -> None:
        lm_head = getattr(self, "lm_head", None)
        if getattr(self.config, "freeze_lm_head_bias", False) and lm_head is not None and lm_head.bias is not None:
            lm_head.bias.requires_grad_(False)  # BART's final_logits_bias: loaded and used, never trained

    def tie_weights(self, *args, **kwargs):
        """HF's weight tying, then a frozen `lm_head` bias frozen again: `from_pretrained` and
        `resize_token_embeddings` install new Parameters (requires_grad=True) and call this after doing so."""
        super().tie_weights(*args, **kwargs)
        self._freeze_lm_head_bias()

    # While generate() runs: the vocabulary projection computed in blocks (hf_attention.decoding), or None
    vocabulary_projection = None

    def vocabulary_logits(self, hidden: Tensor) -> Tensor:
        """Last hidden states (B, T, E) → logits (B, T, V) through the configured output head."""
        hidden = self._lm_head_input(hidden)
        blocked = self.vocabulary_projection
        return self.lm_head(hidden) if blocked is None else blocked(hidden)

    def vocabulary_logits_and_loss(
        self, hidden: Tensor, labels: Tensor | None, num_items_in_batch: Tensor | int | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """`vocabulary_logits`, and with `labels` (B, T) their token cross-entropy; while training the vocabulary
        projection and the loss run fused (losses.linear_cross_entropy)."""
        if labels is None:
            return self.vocabulary_logits(hidden), None
        return linear_cross_entropy(
            self._lm_head_input(hidden), self.lm_head, labels, num_items_in_batch, self.config.label_smoothing
        )

    def _lm_head_input(self, hidden: Tensor) -> Tensor:
        if self.config.scale_lm_head_input:
            # T5 scales embeddings by 1 on the way in, so a tied output matrix would see √E-sized logits otherwise.
            hidden = hidden * self.config.hidden_size**-0.5
        if self.lm_head_transform is not None:
            hidden = self.lm_head_transform(hidden)
        return hidden

    def save_pretrained(self, save_directory, *args, **kwargs):
        """Save weights (safetensors), config and this package's code, with an `auto_map` naming every Auto class
        of the family, so that `trust_remote_code=True` loads the folder where hf_attention is not installed."""
        auto_map = auto_map_of(self.config.model_type, type(self.config))
        self.config.auto_map = {**auto_map, **(getattr(self.config, "auto_map", None) or {})}
        return super().save_pretrained(save_directory, *args, **kwargs)


# ---------------------------------------------------------------------------------------------------------------------
# The stack: embeddings → layers → final norm, shared by all families


class TransformerStack(nn.Module):
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
        self.embed_scale = math.sqrt(config.hidden_size) if config.scale_embeddings else 1.0
        self.token_type_embeddings = (
            nn.Embedding(config.type_vocab_size, config.hidden_size) if config.type_vocab_size else None
        )
        self.position = build_positional(config, bidirectional=not is_decoder)
        norm = lambda: make_norm(config.norm_type, config.hidden_size, config.layer_norm_eps)  # noqa: E731
        self.embedding_norm = norm() if config.embedding_norm else None
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.layers = nn.ModuleList(
            build_layer(config, i, is_decoder=is_decoder, has_cross_attention=has_cross_attention)
            for i in range(num_layers)
        )
        self.norm = norm() if config.final_norm else None
        self.gradient_checkpointing = False

    def check_inputs(
        self, input_ids: Tensor | None, inputs_embeds: Tensor | None, token_type_ids: Tensor | None
    ) -> tuple[int, int]:
        """Kinds, ranks and widths of the inputs (free: shapes only, no device sync); returns (batch, length)."""
        ids_name, embeds_name = f"{self.input_prefix}input_ids", f"{self.input_prefix}inputs_embeds"
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
            if not _is_integer_tensor(input_ids):
                raise ValueError(f"{ids_name} must hold integer token ids (torch.long), got dtype {input_ids.dtype}.")
        elif inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != self.config.hidden_size:
            raise ValueError(
                f"{embeds_name} has shape {tuple(inputs_embeds.shape)}, expected 3-D (batch, length, hidden_size) = "
                f"(batch, length, {self.config.hidden_size})."
            )
        elif not inputs_embeds.is_floating_point():
            raise ValueError(f"{embeds_name} must be floating point vectors, got dtype {inputs_embeds.dtype}.")
        batch, length = given.shape[:2]
        if token_type_ids is not None:
            if not isinstance(token_type_ids, Tensor) or not _is_integer_tensor(token_type_ids):
                kind = token_type_ids.dtype if isinstance(token_type_ids, Tensor) else type(token_type_ids).__name__
                raise ValueError(f"token_type_ids must be an integer torch.Tensor, got {kind}.")
            if tuple(token_type_ids.shape) != (batch, length):
                raise ValueError(
                    f"token_type_ids has shape {tuple(token_type_ids.shape)}, expected (batch, length) = "
                    f"({batch}, {length}): one segment id per token of {name}."
                )
        return batch, length

    def embed(
        self,
        input_ids: Tensor | None,
        inputs_embeds: Tensor | None,
        token_type_ids: Tensor | None,
        *,
        first_call: bool = True,
    ) -> Tensor:
        """Token embeddings × scale (+ token-type embeddings): (B, T) ids → (B, T, E). Inputs passed `check_inputs`.

        Ids outside the vocabulary get an error that names them. On CPU the lookup itself finds them for free (an
        IndexError, translated); elsewhere an explicit check would cost a device sync, so it runs on the first call
        only (no cache yet), not at every decoding step.
        """
        checking = not torch.compiler.is_compiling()
        if inputs_embeds is None:
            if checking and input_ids.device.type != "cpu" and first_call:
                self._check_token_ids(input_ids)
            try:
                inputs_embeds = self.embed_tokens(input_ids)
            except IndexError:
                if checking:
                    self._check_token_ids(input_ids)
                raise
        if token_type_ids is not None and checking:
            self._check_token_type_ids(token_type_ids)
        # ×1 would still be a pass over (B, T, E), forward and backward
        hidden = inputs_embeds * self.embed_scale if self.embed_scale != 1.0 else inputs_embeds
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros(hidden.shape[:2], dtype=torch.long, device=hidden.device)
            hidden = hidden + self.token_type_embeddings(token_type_ids)
        return hidden

    def _check_token_ids(self, input_ids: Tensor) -> None:
        if not input_ids.numel():
            return
        low, high = int(input_ids.min()), int(input_ids.max())
        if low < 0 or high >= self.config.vocab_size:
            bad = high if high >= self.config.vocab_size else low
            hint = (
                (
                    "check decoder_start_token_id (config or generate()) and that the tokenizer matches the model's "
                    "vocab_size"
                )
                if self.input_prefix
                else "check that the tokenizer matches the model's vocab_size"
            )
            raise ValueError(
                f"{self.input_prefix}input_ids contains token id {bad}, outside the vocabulary "
                f"[0, {self.config.vocab_size}); {hint}."
            )

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
        batch, length = self.check_inputs(input_ids, inputs_embeds, token_type_ids)
        if length == 0:
            # generate() would otherwise fail later with an IndexError on the empty logits.
            raise ValueError("The input is empty (0 tokens); pass at least one token, e.g. the bos token as a prompt.")
        self._check_attention_kwargs(kwargs, cache, encoder_hidden_states)
        check_mask_kind(attention_mask, f"{self.input_prefix}attention_mask")
        check_mask_kind(encoder_attention_mask, "encoder_attention_mask")
        ready_mask = attention_mask if attention_mask is not None and attention_mask.dim() == 4 else None
        padding = None if ready_mask is not None else attention_mask  # (B, past + T) 0/1, or None
        past, key_length = _cache_lengths(cache, length, ready_mask)
        checking = not torch.compiler.is_compiling()
        if checking:
            self._check_position_ids(position_ids, batch, length)
            self._check_masks(
                padding,
                ready_mask,
                encoder_hidden_states,
                encoder_attention_mask,
                batch=batch,
                length=length,
                past=int(past),
                key_length=key_length,
            )
        first_call = cache is None or (isinstance(past, int) and past == 0)
        hidden = self.embed(input_ids, inputs_embeds, token_type_ids, first_call=first_call)  # (B, T, E)
        documents = None
        if position_ids is not None and attention_mask is None and cache is None:
            documents = self._packed_documents(position_ids, batch, checking)
        position_ids, key_positions = self._positions(padding, position_ids, length, key_length, past)
        if is_paged(cache) and key_positions is not None:
            key_positions = _paged_key_positions(kwargs.get("cu_seq_lens_k"), key_length)
        hidden = self._add_positions_and_normalize(hidden, position_ids)
        backend = get_attention_backend("eager" if output_attentions else self.config._attn_implementation)
        parts = self._self_attention_parts(padding, ready_mask, documents, length, key_length, past, checking)
        rotary, bias = self._position_signals(position_ids, key_positions, hidden.dtype, backend, batch)
        # Tensors that may carry gradients go to the layers positionally (see EncoderLayer.forward), the rest by name.
        layer_args = (bias, encoder_hidden_states) if self.is_decoder else (bias,)
        layer_inputs = {
            "attention_mask": _render_mask(parts, backend, batch, hidden),
            "position_embeddings": rotary,
            "cache": cache,
            "attention_function": backend.function,
        }
        if self.is_decoder:
            layer_inputs["encoder_attention_mask"] = self._cross_attention_mask(
                encoder_attention_mask, encoder_hidden_states, length, backend, hidden, checking
            )
        return self._run_layers(
            hidden,
            layer_args,
            {**layer_inputs, **kwargs},
            cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            has_cross_attention=encoder_hidden_states is not None,
        )

    # What the stack itself passes to layers, attention modules and attention functions: not for a caller's kwargs.
    _SET_BY_THE_STACK = frozenset(
        {
            "attention_function",
            "position_embeddings",
            "position_bias",
            "key_value_states",
            "scaling",
            "dropout",
            "encoder_hidden_states",
            "encoder_attention_mask",
        }
    )

    def _check_attention_kwargs(self, kwargs: dict, cache, encoder_hidden_states: Tensor | None) -> None:
        """Extra keyword arguments go to the attention functions; refuse those that would clash with what the stack
        passes itself, and a paged cache where it cannot be used."""
        clashing = sorted(self._SET_BY_THE_STACK & kwargs.keys())
        if clashing:
            raise TypeError(
                f"forward() got {', '.join(clashing)}: {'these are' if len(clashing) > 1 else 'this is'} computed "
                "by the model itself and passed to its attention layers; remove it from the call."
            )
        if is_paged(cache) and (encoder_hidden_states is not None or not self.is_decoder):
            raise ValueError(
                "Continuous batching (generate_batch, transformers serve) holds decoder-only self-attention in its "
                "paged cache; this stack is an encoder or attends to an encoder (the encoder-decoder family). "
                "Use generate() for encoder-decoder models."
            )

    def _check_masks(
        self,
        padding: Tensor | None,
        ready_mask: Tensor | None,
        encoder_hidden_states: Tensor | None,
        encoder_attention_mask: Tensor | None,
        *,
        batch: int,
        length: int,
        past: int,
        key_length: int,
    ) -> None:
        """Shapes of the 2-D padding mask, a ready 4-D mask and the encoder mask (free: no device sync)."""
        mask_name = f"{self.input_prefix}attention_mask"
        check_attention_mask(padding, batch, past + length, mask_name)
        if ready_mask is not None:
            self._check_ready_mask(ready_mask, batch, length, key_length, mask_name)
        if encoder_hidden_states is not None:
            check_attention_mask(
                encoder_attention_mask, batch, encoder_hidden_states.shape[1], "encoder_attention_mask"
            )

    def _check_position_ids(self, position_ids: Tensor | None, batch: int, length: int) -> None:
        """Given positions: an integer tensor of shape (batch or 1, length), one position per new token."""
        if position_ids is None:
            return
        name = f"{self.input_prefix}position_ids"
        if not isinstance(position_ids, Tensor) or not _is_integer_tensor(position_ids):
            kind = position_ids.dtype if isinstance(position_ids, Tensor) else type(position_ids).__name__
            raise ValueError(f"{name} must be an integer torch.Tensor of positions, got {kind}.")
        if position_ids.dim() != 2 or position_ids.shape[0] not in (1, batch) or position_ids.shape[1] != length:
            raise ValueError(
                f"{name} has shape {tuple(position_ids.shape)}, expected (batch, length) = ({batch} or 1, {length}): "
                "one position per new token."
            )

    def _add_positions_and_normalize(self, hidden: Tensor, position_ids: Tensor) -> Tensor:
        """Absolute position embeddings (sinusoidal, learned), the embedding norm and dropout: the layers' input."""
        if self.position is not None:
            hidden = self.position.add_to_embeddings(hidden, position_ids)
        if self.embedding_norm is not None:
            hidden = self.embedding_norm(hidden)
        return maybe_dropout(self.dropout, hidden)

    def _position_signals(
        self, position_ids: Tensor, key_positions: Tensor | None, dtype: torch.dtype, backend, batch: int
    ) -> tuple:
        """What the attention layers receive of the positions: (rotary (cos, sin) tables or None, an additive score
        bias or None): a (B|1, H, T, S) tensor, or for FlexAttention a score modification computing it from the
        positions."""
        if self.position is None:
            return None, None
        rotary = self.position.rotary_tables(position_ids, dtype)
        flex = backend.mask_format == "block"
        bias = self.position.score_bias(position_ids, key_positions, dtype=dtype, batch=batch, flex=flex)
        return rotary, bias

    def _cross_attention_mask(
        self,
        encoder_attention_mask: Tensor | None,
        encoder_hidden_states: Tensor | None,
        length: int,
        backend,
        hidden: Tensor,
        checking: bool,
    ):
        """The mask over the encoder output in the backend's form ((B, 1, 1, S) for boolean masks), or None when no
        source token is padding."""
        if encoder_hidden_states is None:
            return None
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
        cache: Cache | None,
        *,
        output_attentions: bool,
        output_hidden_states: bool,
        has_cross_attention: bool,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        """The layer loop and the final norm, collecting hidden states and attention weights when asked."""
        all_hidden, self_weights, cross_weights = [], [], []
        for layer in self.layers:
            if output_hidden_states:
                all_hidden.append(hidden)
            outputs = layer(hidden, *layer_args, **layer_inputs)
            hidden = outputs[0]
            if output_attentions:
                self_weights.append(outputs[1])
                if self.is_decoder and has_cross_attention:
                    cross_weights.append(outputs[2])
        if self.norm is not None:
            hidden = self.norm(hidden)
        if output_hidden_states:
            all_hidden.append(hidden)
        return with_cache(
            BaseModelOutputWithPastAndCrossAttentions,
            cache,
            last_hidden_state=hidden,
            hidden_states=tuple(all_hidden) if output_hidden_states else None,
            attentions=tuple(self_weights) if output_attentions else None,
            cross_attentions=tuple(cross_weights) if output_attentions and cross_weights else None,
        )

    @staticmethod
    def _packed_documents(position_ids: Tensor, batch: int, checking: bool) -> Tensor | None:
        """(B, T) document indices when the rows pack several texts (positions restart), else None.

        As in transformers' masking utilities, this applies to uncached calls with positions and no attention mask
        (padding-free training); under compilation the check cannot run and the document mask is always built.
        """
        documents = packed_documents(position_ids.expand(batch, -1))
        if checking and not bool(documents[:, -1].any()):
            return None
        return documents

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


def _render_mask(parts: MaskParts, backend, batch: int, hidden: Tensor):
    """`parts` drawn in the form `backend` takes: a boolean tensor, an additive one, a flex block mask, or None."""
    if backend.mask_format is None:
        return None
    if backend.mask_format == "block":
        return block_mask(parts, batch=batch, device=hidden.device)
    mask = parts.boolean(hidden.device, implicit_causal=backend.implicit_causal)
    if mask is None or backend.mask_format == "bool":
        return mask
    return to_additive(mask, hidden.dtype)


def _paged_key_positions(cumulative_key_lengths, key_length: int) -> Tensor:
    """(1, S) position of each key of a paged batch within its own request: continuous batching lays the requests'
    cached and new keys end to end, request r at [cu[r], cu[r + 1])."""
    if isinstance(cumulative_key_lengths, dict):  # one entry per kind of layer; ours are all full attention
        cumulative_key_lengths = next(iter(cumulative_key_lengths.values()))
    bounds = cumulative_key_lengths.long()
    keys = torch.arange(key_length, device=bounds.device)
    request = torch.searchsorted(bounds[1:], keys, right=True).clamp(max=bounds.numel() - 2)
    return (keys - bounds[request])[None]


def _cache_lengths(cache: Cache | None, length: int, ready_mask: Tensor | None) -> tuple:
    """(tokens already in the self-attention cache, key length of this call): (0, T) without a cache. A paged cache
    (continuous batching) holds many requests; its keys are those its ready mask covers."""
    if is_paged(cache):
        return 0, length if ready_mask is None else ready_mask.shape[-1]
    if isinstance(cache, EncoderDecoderCache):
        cache = cache.self_attention_cache
    if cache is None:
        return 0, length
    return cache.get_seq_length(), cache.get_mask_sizes(length, 0)[0]


def _options(config: HFAttentionConfigBase, output_attentions, output_hidden_states, return_dict):
    """Fill per-call output switches from the config, as every HF model does."""
    return (
        config.output_attentions if output_attentions is None else output_attentions,
        config.output_hidden_states if output_hidden_states is None else output_hidden_states,
        config.return_dict if return_dict is None else return_dict,
    )


def _is_integer_tensor(tensor: Tensor) -> bool:
    return not (tensor.is_floating_point() or tensor.is_complex() or tensor.dtype == torch.bool)


def _logit_slice(logits_to_keep: int | Tensor) -> slice | Tensor:
    """Positions whose logits are computed: generation needs only the last one (`logits_to_keep=1`)."""
    return slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep


# ---------------------------------------------------------------------------------------------------------------------
# Base models with one stack (encoder-only, decoder-only)


class _OneStackModel:
    """Mixin of the encoder and decoder base models: a token embedding of their own and one TransformerStack.

    The stack is stored as `self.<stack_name>` ("encoder": bidirectional, or "decoder": causal); that attribute is the
    prefix of its weights in checkpoints (`encoder.layers.0...`, or `model.encoder...` under a head).
    """

    stack_name: str

    def __init__(self, config: HFAttentionConfigBase):
        super().__init__(config)
        embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        stack = TransformerStack(
            config,
            num_layers=config.num_hidden_layers,
            is_decoder=self.stack_name == "decoder",
            embed_tokens=embed_tokens,
        )
        setattr(self, self.stack_name, stack)
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return getattr(self, self.stack_name).embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        getattr(self, self.stack_name).embed_tokens = value


# ---------------------------------------------------------------------------------------------------------------------
# Encoder family (BERT-like)


class HFAttentionEncoderPreTrainedModel(HFAttentionPreTrainedModel):
    """Base of the encoder family."""

    config_class = HFAttentionEncoderConfig


class HFAttentionEncoderModel(_OneStackModel, HFAttentionEncoderPreTrainedModel):
    """Bidirectional Transformer encoder: every token attends to every other real token."""

    stack_name = "encoder"

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> BaseModelOutput | tuple:
        """(B, T) ids → last hidden state (B, T, E), optional per-layer hidden states and attention weights."""
        output_attentions, output_hidden_states, return_dict = _options(
            self.config, output_attentions, output_hidden_states, return_dict
        )
        stack = self.encoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            token_type_ids=token_type_ids,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            **kwargs,
        )
        output = BaseModelOutput(
            last_hidden_state=stack.last_hidden_state, hidden_states=stack.hidden_states, attentions=stack.attentions
        )
        return output if return_dict else output.to_tuple()


class _EncoderHead(HFAttentionEncoderPreTrainedModel):
    """Base of the encoder heads: the encoder as `model`, the forward signature they share and the call to it.

    A head adds its layers after `super().__init__` (then calls `post_init`), turns the encoder's output into its own
    in `_head_output`, and may refuse malformed labels in `_check_labels` before the encoder runs.
    """

    def __init__(self, config: HFAttentionEncoderConfig):
        super().__init__(config)
        self.model = HFAttentionEncoderModel(config)

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        position_ids: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        labels: Tensor | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> ModelOutput | tuple:
        """(B, T) ids → the head's logits, and its loss when `labels` are given (see `_head_output`)."""
        return_dict = self.config.return_dict if return_dict is None else return_dict
        if labels is not None:
            self._check_labels(labels, _label_shape(input_ids, 2) or _label_shape(inputs_embeds, 3))
        encoded = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            **kwargs,
        )
        output = self._head_output(
            encoded, labels=labels, attention_mask=attention_mask, num_items_in_batch=kwargs.get("num_items_in_batch")
        )
        return output if return_dict else output.to_tuple()

    def _check_labels(self, labels: Tensor, shape: tuple[int, ...] | None) -> None:
        """Raise ValueError for labels that do not fit the inputs of `shape` (batch, length); default: no check."""

    def _head_output(
        self,
        encoded: BaseModelOutput,
        *,
        labels: Tensor | None,
        attention_mask: Tensor | None,
        num_items_in_batch: Tensor | int | None,
    ) -> ModelOutput:
        raise NotImplementedError


class HFAttentionForMaskedLM(_EncoderHead):
    """Encoder with a vocabulary projection, trained to recover masked tokens (BERT's MLM objective)."""

    _tied_weights_keys = {"lm_head.weight": "model.encoder.embed_tokens.weight"}

    def __init__(self, config: HFAttentionEncoderConfig):
        super().__init__(config)
        self._build_lm_head(config)
        self.post_init()

    def _check_labels(self, labels: Tensor, shape: tuple[int, ...] | None) -> None:
        check_labels(labels, shape, self.config.vocab_size, "vocab_size", per="input token")

    def _head_output(
        self,
        encoded: BaseModelOutput,
        *,
        labels: Tensor | None,
        attention_mask: Tensor | None,
        num_items_in_batch: Tensor | int | None,
    ) -> MaskedLMOutput:
        """Logits (B, T, V); `labels` (B, T) with -100 on unmasked positions give the token-averaged loss."""
        logits, loss = self.vocabulary_logits_and_loss(encoded.last_hidden_state, labels, num_items_in_batch)
        return MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=encoded.hidden_states, attentions=encoded.attentions
        )


class _EncoderClassifier(_EncoderHead):
    """Base of the classification heads: dropout, then a linear layer from hidden_size to num_labels."""

    def __init__(self, config: HFAttentionEncoderConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()


class HFAttentionForSequenceClassification(_EncoderClassifier):
    """Encoder + pooled representation (mean of real tokens, or the first token) + linear classifier."""

    def pool(self, hidden: Tensor, attention_mask: Tensor | None) -> Tensor:
        """(B, T, E) → (B, E) by `config.classifier_pooling`."""
        if self.config.classifier_pooling == "first":
            return hidden[:, 0]
        if attention_mask is None:
            return hidden.mean(1)
        weights = attention_mask.to(hidden.dtype)[..., None]  # (B, T, 1)
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)

    def _head_output(
        self,
        encoded: BaseModelOutput,
        *,
        labels: Tensor | None,
        attention_mask: Tensor | None,
        num_items_in_batch: Tensor | int | None,
    ) -> SequenceClassifierOutput:
        """Logits (B, num_labels); the loss follows `config.problem_type` as in HF's classifiers."""
        logits = self.classifier(self.dropout(self.pool(encoded.last_hidden_state, attention_mask)))
        loss = None if labels is None else self.sequence_classification_loss(logits, labels, num_items_in_batch)
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=encoded.hidden_states, attentions=encoded.attentions
        )


class HFAttentionForTokenClassification(_EncoderClassifier):
    """Encoder + a linear classifier on every token (tagging, NER)."""

    def _check_labels(self, labels: Tensor, shape: tuple[int, ...] | None) -> None:
        check_labels(labels, shape, self.num_labels, "num_labels", per="input token")

    def _head_output(
        self,
        encoded: BaseModelOutput,
        *,
        labels: Tensor | None,
        attention_mask: Tensor | None,
        num_items_in_batch: Tensor | int | None,
    ) -> TokenClassifierOutput:
        """Logits (B, T, num_labels); labels (B, T) with -100 on ignored tokens."""
        logits = self.classifier(self.dropout(encoded.last_hidden_state))
        loss = (
            None
            if labels is None
            else token_cross_entropy(logits, labels, num_items_in_batch, self.config.label_smoothing)
        )
        return TokenClassifierOutput(
            loss=loss, logits=logits, hidden_states=encoded.hidden_states, attentions=encoded.attentions
        )


# ---------------------------------------------------------------------------------------------------------------------
# Decoder family (GPT-like)


class HFAttentionDecoderPreTrainedModel(HFAttentionPreTrainedModel):
    """Base of the decoder family."""

    config_class = HFAttentionDecoderConfig


class HFAttentionDecoderModel(_OneStackModel, HFAttentionDecoderPreTrainedModel):
    """Causal Transformer decoder: each token attends to itself and the tokens before it."""

    stack_name = "decoder"

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPastAndCrossAttentions | tuple:
        """(B, T) new ids (+ a cache of earlier ones) → (B, T, E); `attention_mask` covers cached + new tokens.

        `cache` is the KV cache, created when `use_cache` and none is given; its name before transformers 5.24,
        `past_key_values=`, is accepted too. Other keyword arguments reach every attention function."""
        output_attentions, output_hidden_states, return_dict = _options(
            self.config, output_attentions, output_hidden_states, return_dict
        )
        cache = cache_from_arguments(cache, kwargs.pop("past_key_values", None))
        if use_cache is None:
            use_cache = self.config.use_cache and not self.training
        if use_cache and cache is None:
            cache = DynamicCache(config=self.config)
        stack = self.decoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            inputs_embeds=inputs_embeds,
            cache=cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            **kwargs,
        )
        output = stack
        if not use_cache:  # a cache was used for this call only (a caller's cache with use_cache=False): not returned
            output = with_cache(
                BaseModelOutputWithPastAndCrossAttentions,
                None,
                last_hidden_state=stack.last_hidden_state,
                hidden_states=stack.hidden_states,
                attentions=stack.attentions,
            )
        return output if return_dict else output.to_tuple()


class HFAttentionForCausalLM(_KeepPaddingMaskForGeneration, HFAttentionDecoderPreTrainedModel, GenerationMixin):
    """Decoder with a vocabulary projection: next-token prediction and `generate()`."""

    _tied_weights_keys = {"lm_head.weight": "model.decoder.embed_tokens.weight"}

    def __init__(self, config: HFAttentionDecoderConfig):
        super().__init__(config)
        self.model = HFAttentionDecoderModel(config)
        self._build_lm_head(config)
        self.post_init()

    def __setattr__(self, name: str, value) -> None:
        """Refuse a replacement `forward` from TRL (its fused LM head computes the loss from the backbone's last
        hidden state and `lm_head.weight`) when this head does more than that: it would train on another loss."""
        if name == "forward":
            # TRL's replacement copies our forward's name and module (functools.wraps); its code is still TRL's.
            code = getattr(getattr(value, "__func__", value), "__code__", None)
            from_trl = code is not None and "/trl/" in code.co_filename.replace("\\", "/")
            problem = self.config.head_options_outside_the_projection()
            if from_trl and problem is not None:
                raise ValueError(
                    f"This model's head uses {problem}. TRL computes the loss from the backbone's last hidden state "
                    "and lm_head.weight (times config.logit_scale), which skips that step, so it would train on a "
                    "loss this model does not compute. Train this configuration with its own loss (transformers' "
                    "Trainer or training.train), or use a config without that option for TRL."
                )
        super().__setattr__(name, value)

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: Tensor | None = None,
        labels: Tensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | Tensor = 0,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> CausalLMOutputWithCrossAttentions | tuple:
        """Logits (B, T, V). `labels` (B, T) are the inputs themselves: the loss predicts token t+1 from ≤ t.

        `shift_labels` (B, T), as transformers' causal-LM loss takes it (context- and sequence-parallel trainers pass
        it), are the targets already shifted: position t's target is shift_labels[t]; given with `labels`, they are
        used instead of shifting `labels`. `cache` (or its name before transformers 5.24, `past_key_values`) as in
        HFAttentionDecoderModel; other keyword arguments reach every attention function."""
        return_dict = self.config.return_dict if return_dict is None else return_dict
        cache = cache_from_arguments(cache, kwargs.pop("past_key_values", None))
        shift_labels = kwargs.pop("shift_labels", None)
        if labels is not None:
            shape = _label_shape(input_ids, 2, logits_to_keep) or _label_shape(inputs_embeds, 3, logits_to_keep)
            check_labels(labels, shape, self.config.vocab_size, "vocab_size", per="input token")
            if shift_labels is not None:
                check_labels(
                    shift_labels, shape, self.config.vocab_size, "vocab_size", per="input token", name="shift_labels"
                )
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=cache,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            **kwargs,
        )
        next_tokens = None
        if labels is not None:
            next_tokens = shift_labels
            if next_tokens is None:
                next_tokens = nn.functional.pad(labels, (0, 1), value=-100)[:, 1:]  # label of position t is token t+1
        hidden = outputs.last_hidden_state[:, _logit_slice(logits_to_keep)]
        logits, loss = self.vocabulary_logits_and_loss(hidden, next_tokens, kwargs.get("num_items_in_batch"))
        output = with_cache(
            CausalLMOutputWithCrossAttentions,
            cache_of(outputs),
            loss=loss,
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )
        return output if return_dict else output.to_tuple()


class HFAttentionDecoderForSequenceClassification(HFAttentionDecoderPreTrainedModel):
    """Decoder + a linear score read at the last real token of each text, as GPT-2's and Llama's classifiers (and
    the reward models of TRL) do: a causal model has seen the whole text only there."""

    def __init__(self, config: HFAttentionDecoderConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.model = HFAttentionDecoderModel(config)
        self.score = nn.Linear(config.hidden_size, config.num_labels, bias=False)
        self.post_init()

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        position_ids: Tensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: Tensor | None = None,
        labels: Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> SequenceClassifierOutputWithPast | tuple:
        """Logits (B, num_labels) at each row's last token that is not `pad_token_id` (left or right padding);
        the loss follows `config.problem_type`. Other arguments as in HFAttentionForCausalLM."""
        return_dict = self.config.return_dict if return_dict is None else return_dict
        cache = cache_from_arguments(cache, kwargs.pop("past_key_values", None))
        num_items_in_batch = kwargs.pop("num_items_in_batch", None)
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=cache,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            **kwargs,
        )
        logits = self.score(outputs.last_hidden_state)  # (B, T, num_labels)
        pooled_logits = logits[torch.arange(logits.shape[0], device=logits.device), self._last_tokens(input_ids)]
        loss = None
        if labels is not None:
            loss = self.sequence_classification_loss(pooled_logits, labels, num_items_in_batch)
        output = with_cache(
            SequenceClassifierOutputWithPast,
            cache_of(outputs),
            loss=loss,
            logits=pooled_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )
        return output if return_dict else output.to_tuple()

    def _last_tokens(self, input_ids: Tensor | None) -> Tensor | int:
        """(B,) index of each row's last token that is not padding: the largest position holding a non-pad id, so
        left and right padding both work (transformers' rule). With embeddings instead of ids, the last position."""
        if input_ids is None:
            return -1
        pad = self.config.pad_token_id
        if pad is None:
            if input_ids.shape[0] != 1:
                raise ValueError(
                    f"A batch of {input_ids.shape[0]} texts needs config.pad_token_id to find each text's last "
                    "token (the classifier reads it there); set it to the tokenizer's padding id."
                )
            return -1
        positions = torch.arange(input_ids.shape[-1], device=input_ids.device)
        return (positions * (input_ids != pad)).argmax(-1)


# ---------------------------------------------------------------------------------------------------------------------
# Encoder-decoder family (the 2017 Transformer)


class HFAttentionSeq2SeqPreTrainedModel(HFAttentionPreTrainedModel):
    """Base of the encoder-decoder family."""

    config_class = HFAttentionSeq2SeqConfig


class HFAttentionSeq2SeqModel(HFAttentionSeq2SeqPreTrainedModel):
    """Encoder reads the source; decoder writes the target, attending to its own past and to the encoder output."""

    _tied_weights_keys = {
        "encoder.embed_tokens.weight": "shared.weight",
        "decoder.embed_tokens.weight": "shared.weight",
    }

    def __init__(self, config: HFAttentionSeq2SeqConfig):
        super().__init__(config)
        self.shared = nn.Embedding(config.vocab_size, config.hidden_size)
        # Each stack has an embedding module of its own whose weight is tied to `shared` (`_tied_weights_keys`), as in
        # BART: transformers' loading then reports a missing `shared.weight` and initialises it, which it cannot do for
        # one module object held under three names.
        self.encoder = TransformerStack(
            config,
            num_layers=config.encoder_layers,
            is_decoder=False,
            embed_tokens=nn.Embedding(config.vocab_size, config.hidden_size),
        )
        self.decoder = TransformerStack(
            config,
            num_layers=config.decoder_layers,
            is_decoder=True,
            has_cross_attention=True,
            embed_tokens=nn.Embedding(config.vocab_size, config.hidden_size),
        )
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.shared

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict:
        # Encoder and decoder always read the one shared embedding (Vaswani 2017 §3.4), so their entries are aliases
        # of `shared` whatever `tie_word_embeddings` says; that flag only ties the output projection (in the LM head).
        if all_submodels:
            return super().get_expanded_tied_weights_keys(all_submodels=True)
        return dict(self._tied_weights_keys)

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.shared = self.encoder.embed_tokens = self.decoder.embed_tokens = value  # as BART does

    def get_encoder(self, modality: str | None = None) -> TransformerStack:
        return self.encoder

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        decoder_input_ids: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: EncoderDecoderCache | None = None,
        inputs_embeds: Tensor | None = None,
        decoder_inputs_embeds: Tensor | None = None,
        decoder_position_ids: Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput | tuple:
        """Source (B, S) and target-so-far (B, T) → decoder states (B, T, E); the encoder runs once per generation.

        `cache` (or its name before transformers 5.24, `past_key_values`) holds the decoder's self-attention keys and
        values and the encoder's projected keys and values; other keyword arguments reach every attention function.
        """
        cache = cache_from_arguments(cache, kwargs.pop("past_key_values", None))
        if decoder_input_ids is None and decoder_inputs_embeds is None:
            raise ValueError(
                "The decoder got no input: pass decoder_input_ids or decoder_inputs_embeds (at least the "
                "decoder_start_token_id), or labels, from which HFAttentionForSeq2SeqLM builds the decoder inputs "
                "(the labels shifted right); generate() starts the decoder itself."
            )
        output_attentions, output_hidden_states, return_dict = _options(
            self.config, output_attentions, output_hidden_states, return_dict
        )
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
                **kwargs,
            )
        elif not isinstance(encoder_outputs, ModelOutput):
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        if use_cache is None:
            use_cache = self.config.use_cache and not self.training
        if use_cache and cache is None:
            cache = EncoderDecoderCache(DynamicCache(config=self.config), DynamicCache(config=self.config))
        decoder = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            position_ids=decoder_position_ids,
            inputs_embeds=decoder_inputs_embeds,
            encoder_hidden_states=encoder_outputs[0],
            encoder_attention_mask=attention_mask,
            cache=cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            **kwargs,
        )
        output = with_cache(
            Seq2SeqModelOutput,
            cache if use_cache else None,
            last_hidden_state=decoder.last_hidden_state,
            decoder_hidden_states=decoder.hidden_states,
            decoder_attentions=decoder.attentions,
            cross_attentions=decoder.cross_attentions,
            encoder_last_hidden_state=encoder_outputs[0],
            encoder_hidden_states=getattr(encoder_outputs, "hidden_states", None),
            encoder_attentions=getattr(encoder_outputs, "attentions", None),
        )
        return output if return_dict else output.to_tuple()


class HFAttentionForSeq2SeqLM(_KeepPaddingMaskForGeneration, HFAttentionSeq2SeqPreTrainedModel, GenerationMixin):
    """Encoder-decoder with a vocabulary projection: translation, summarisation, `generate()`."""

    _tied_weights_keys = {"lm_head.weight": "model.shared.weight"}

    def __init__(self, config: HFAttentionSeq2SeqConfig):
        super().__init__(config)
        self.model = HFAttentionSeq2SeqModel(config)
        self._build_lm_head(config)
        self.post_init()

    def get_encoder(self, modality: str | None = None) -> TransformerStack:
        return self.model.encoder

    def prepare_decoder_input_ids_from_labels(self, labels: Tensor) -> Tensor:
        """Teacher-forcing inputs for `labels` (used by DataCollatorForSeq2Seq)."""
        if self.config.pad_token_id is None or self.config.decoder_start_token_id is None:
            raise ValueError(
                "pad_token_id and decoder_start_token_id must be set to build decoder inputs from labels."
            )
        for field in ("pad_token_id", "decoder_start_token_id"):
            value = getattr(self.config, field)
            if not 0 <= value < self.config.vocab_size:
                raise ValueError(f"config.{field}={value} is outside the vocabulary [0, {self.config.vocab_size}).")
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    def _prepare_decoder_input_ids_for_generation(
        self, batch_size, model_input_name, model_kwargs, decoder_start_token_id, device=None
    ):
        # generate() starts every target with this id: a wrong one would otherwise surface as an input_ids error.
        if decoder_start_token_id is not None and not torch.compiler.is_compiling() and decoder_start_token_id.numel():
            low, high = int(decoder_start_token_id.min()), int(decoder_start_token_id.max())
            if low < 0 or high >= self.config.vocab_size:
                bad = high if high >= self.config.vocab_size else low
                raise ValueError(
                    f"decoder_start_token_id={bad} is outside the vocabulary [0, {self.config.vocab_size}); set it "
                    "(generate() argument, model.generation_config or config) to a token id the model knows."
                )
        return super()._prepare_decoder_input_ids_for_generation(
            batch_size, model_input_name, model_kwargs, decoder_start_token_id, device
        )

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        decoder_input_ids: Tensor | None = None,
        decoder_attention_mask: Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: EncoderDecoderCache | None = None,
        inputs_embeds: Tensor | None = None,
        decoder_inputs_embeds: Tensor | None = None,
        decoder_position_ids: Tensor | None = None,
        labels: Tensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | Tensor = 0,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput | tuple:
        """Logits (B, T, V). With `labels` (B, T) and no decoder inputs, the decoder is teacher-forced on the labels
        shifted right, and the loss predicts label t from labels < t. `cache` as in HFAttentionSeq2SeqModel."""
        return_dict = self.config.return_dict if return_dict is None else return_dict
        cache = cache_from_arguments(cache, kwargs.pop("past_key_values", None))
        if labels is not None:
            teacher_forced = decoder_input_ids is None and decoder_inputs_embeds is None
            shape = (
                None
                if teacher_forced
                else (
                    _label_shape(decoder_input_ids, 2, logits_to_keep)
                    or _label_shape(decoder_inputs_embeds, 3, logits_to_keep)
                )
            )
            check_labels(
                labels, shape, self.config.vocab_size, "vocab_size", per="decoder input token", any_2d=teacher_forced
            )
            if teacher_forced:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            cache=cache,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            decoder_position_ids=decoder_position_ids,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            **kwargs,
        )
        hidden = outputs.last_hidden_state[:, _logit_slice(logits_to_keep)]
        logits, loss = self.vocabulary_logits_and_loss(hidden, labels, kwargs.get("num_items_in_batch"))  # (B, T, V)
        output = with_cache(
            Seq2SeqLMOutput,
            cache_of(outputs),
            loss=loss,
            logits=logits,
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
        )
        return output if return_dict else output.to_tuple()


# model_type → {Auto class name: model class}: what `import hf_attention` registers and what `auto_map` lists.
AUTO_CLASSES = {
    HFAttentionEncoderConfig.model_type: {
        "AutoModel": HFAttentionEncoderModel,
        "AutoModelForMaskedLM": HFAttentionForMaskedLM,
        "AutoModelForSequenceClassification": HFAttentionForSequenceClassification,
        "AutoModelForTokenClassification": HFAttentionForTokenClassification,
    },
    HFAttentionDecoderConfig.model_type: {
        "AutoModel": HFAttentionDecoderModel,
        "AutoModelForCausalLM": HFAttentionForCausalLM,
        "AutoModelForSequenceClassification": HFAttentionDecoderForSequenceClassification,
    },
    HFAttentionSeq2SeqConfig.model_type: {
        "AutoModel": HFAttentionSeq2SeqModel,
        "AutoModelForSeq2SeqLM": HFAttentionForSeq2SeqLM,
    },
    HFAttentionRecurrentConfig.model_type: {
        "AutoModel": HFAttentionRecurrentModel,
        "AutoModelForSeq2SeqLM": HFAttentionRecurrentForSeq2SeqLM,
    },
}


def auto_map_of(model_type: str, config_class: type | None = None) -> dict[str, str]:
    """The `auto_map` of a checkpoint of `model_type`: its config class and every Auto class of its family →
    "file.Class" (`config_class` defaults to the family's)."""
    family = AUTO_CLASSES.get(model_type, {})
    config_class = config_class or next(iter(family.values())).config_class
    auto_map = {"AutoConfig": f"configuration_hf_attention.{config_class.__name__}"}
    auto_map.update({auto: f"modeling_hf_attention.{cls.__name__}" for auto, cls in family.items()})
    return auto_map


# Saving any of these classes copies this package's closure next to the weights (remote code).
for _family in AUTO_CLASSES.values():
    for _auto_name, _model_class in _family.items():
        _model_class.register_for_auto_class(_auto_name)
for _config_class in (
    HFAttentionEncoderConfig,
    HFAttentionDecoderConfig,
    HFAttentionSeq2SeqConfig,
    HFAttentionRecurrentConfig,
):
    _config_class.register_for_auto_class()

# generate() asks at every step whether a remote-code model's forward takes `cache_position` (and registered Auto
# classes count as remote code): a signature computed once makes that question a lookup instead of a parse.
for _family in AUTO_CLASSES.values():
    for _model_class in _family.values():
        _model_class.forward.__signature__ = inspect.signature(_model_class.forward)
