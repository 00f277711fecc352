"""The encoder-decoder family (the 2017 Transformer): the base model, the head base `Seq2SeqHead`, and the heads.

Notation: B batch, S source length, T target length, E model dim, V vocabulary.

A head is the encoder-decoder as `model` plus its own layers: `Seq2SeqHead` holds the forward signature every
encoder-decoder head shares, the cache argument under both its names and the call to the model; a new head adds its
layers and writes `_head_output` (and `_decoder_inputs_for_labels`, to check labels and derive decoder inputs).
"""

from torch import Tensor, nn
from transformers import GenerationMixin
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
)
from transformers.utils import ModelOutput

from .cache_argument import CACHE_FIELD, cache_from_arguments
from .configuration_hf_attention import HFAttentionSeq2SeqConfig
from .field_checks import id_outside_vocabulary
from .generation_mixin import EncoderDecoderGeneration, GenerationOverrides
from .losses import check_labels, label_shape, logit_slice, shift_tokens_right
from .pretrained import SharedEmbeddingModel, TransformerPreTrainedModel
from .stack import TransformerStack


class HFAttentionSeq2SeqPreTrainedModel(TransformerPreTrainedModel):
    """Base of the encoder-decoder family."""

    config_class = HFAttentionSeq2SeqConfig


class HFAttentionSeq2SeqModel(SharedEmbeddingModel, HFAttentionSeq2SeqPreTrainedModel):
    """Encoder reads the source; decoder writes the target, attending to its own past and to the encoder output. Both
    read one shared embedding (`SharedEmbeddingModel`)."""

    def __init__(self, config: HFAttentionSeq2SeqConfig):
        super().__init__(config)
        self.shared = nn.Embedding(config.vocab_size, config.hidden_size)
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

    def get_encoder(self, modality: str | None = None) -> TransformerStack | nn.Module:
        # The text encoder; another modality's ("image", "audio"), which this model has not, is transformers'
        # answer (the model itself), so that exporters do not take the text encoder for an image encoder.
        return self.encoder if modality is None else super().get_encoder(modality)

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
        output_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        output_hidden_states = (
            self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        )
        return_dict = self.config.return_dict if return_dict is None else return_dict
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
                **kwargs,
            )
        elif not isinstance(encoder_outputs, ModelOutput):  # a tuple, as a caller may hold it from return_dict=False
            encoder_outputs = BaseModelOutput(*encoder_outputs)
        check_one_target_row_per_source_row(encoder_outputs[0], decoder_input_ids, decoder_inputs_embeds)
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
        output = _model_output(decoder, encoder_outputs, cache if use_cache else None)
        return output if return_dict else output.to_tuple()


class Seq2SeqHead(HFAttentionSeq2SeqPreTrainedModel):
    """Base of the encoder-decoder heads: the model as `model`, the forward signature they share and the call to it.

    A head adds its layers after `super().__init__` (then calls `post_init`), turns the model's output into its own in
    `_head_output`, and may check labels (and derive the decoder's inputs from them) in `_decoder_inputs_for_labels`
    before the model runs.
    """

    def __init__(self, config: HFAttentionSeq2SeqConfig):
        super().__init__(config)
        self.model = HFAttentionSeq2SeqModel(config)

    def get_encoder(self, modality: str | None = None) -> TransformerStack | nn.Module:
        # The text encoder; another modality's ("image", "audio"), which this model has not, is transformers'
        # answer (the model itself), so that exporters do not take the text encoder for an image encoder.
        return self.model.encoder if modality is None else super().get_encoder(modality)

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
    ) -> ModelOutput | tuple:
        """Source (B, S) and target-so-far (B, T) → the head's output, and its loss when `labels` are given.

        `logits_to_keep` limits the target positions whose outputs are computed; `cache` as in
        HFAttentionSeq2SeqModel; other keyword arguments reach every attention function."""
        return_dict = self.config.return_dict if return_dict is None else return_dict
        if labels is not None:
            decoder_input_ids = self._decoder_inputs_for_labels(
                labels, decoder_input_ids, decoder_inputs_embeds, logits_to_keep
            )
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
        output = self._head_output(
            outputs, labels=labels, logits_to_keep=logits_to_keep, num_items_in_batch=kwargs.get("num_items_in_batch")
        )
        return output if return_dict else output.to_tuple()

    def _decoder_inputs_for_labels(
        self,
        labels: Tensor,
        decoder_input_ids: Tensor | None,
        decoder_inputs_embeds: Tensor | None,
        logits_to_keep: int | Tensor,
    ) -> Tensor | None:
        """Raise ValueError for malformed labels; return the decoder input ids to use. Default: no check, the ids
        given."""
        return decoder_input_ids

    def _head_output(
        self,
        outputs: Seq2SeqModelOutput,
        *,
        labels: Tensor | None,
        logits_to_keep: int | Tensor,
        num_items_in_batch: Tensor | int | None,
    ) -> ModelOutput:
        """The head's output (with the model's cache, `outputs[CACHE_FIELD]`) from the model's `outputs`."""
        raise NotImplementedError


class HFAttentionForSeq2SeqLM(GenerationOverrides, EncoderDecoderGeneration, Seq2SeqHead, GenerationMixin):
    """Encoder-decoder with a vocabulary projection: translation, summarisation, `generate()`.

    With `labels` (B, T) and no decoder inputs, the decoder is teacher-forced on the labels shifted right, and the
    loss predicts label t from labels < t."""

    _tied_weights_keys = {"lm_head.weight": "model.shared.weight"}

    def __init__(self, config: HFAttentionSeq2SeqConfig):
        super().__init__(config)
        self._build_lm_head(config)
        self.post_init()

    def prepare_decoder_input_ids_from_labels(self, labels: Tensor) -> Tensor:
        """Teacher-forcing inputs for `labels` (used by DataCollatorForSeq2Seq)."""
        if self.config.pad_token_id is None or self.config.decoder_start_token_id is None:
            raise ValueError(
                "pad_token_id and decoder_start_token_id must be set to build decoder inputs from labels."
            )
        for field in ("pad_token_id", "decoder_start_token_id"):
            value = getattr(self.config, field)
            if id_outside_vocabulary([value], self.config.vocab_size) is not None:
                raise ValueError(f"config.{field}={value} is outside the vocabulary [0, {self.config.vocab_size}).")
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    def _decoder_inputs_for_labels(
        self,
        labels: Tensor,
        decoder_input_ids: Tensor | None,
        decoder_inputs_embeds: Tensor | None,
        logits_to_keep: int | Tensor,
    ) -> Tensor | None:
        """Labels must fit the decoder inputs (one per kept position); without decoder inputs, the labels shifted
        right become them (teacher forcing)."""
        teacher_forced = decoder_input_ids is None and decoder_inputs_embeds is None
        shape = (
            None
            if teacher_forced
            else (
                label_shape(decoder_input_ids, 2, logits_to_keep)
                or label_shape(decoder_inputs_embeds, 3, logits_to_keep)
            )
        )
        check_labels(
            labels, shape, self.config.vocab_size, "vocab_size", per="decoder input token", any_2d=teacher_forced
        )
        return self.prepare_decoder_input_ids_from_labels(labels) if teacher_forced else decoder_input_ids

    def _head_output(
        self,
        outputs: Seq2SeqModelOutput,
        *,
        labels: Tensor | None,
        logits_to_keep: int | Tensor,
        num_items_in_batch: Tensor | int | None,
    ) -> Seq2SeqLMOutput:
        """Logits (B, T, V), and with `labels` the token cross-entropy."""
        hidden = outputs.last_hidden_state[:, logit_slice(logits_to_keep)]
        logits, loss = self.vocabulary_logits_and_loss(hidden, labels, num_items_in_batch)  # (B, T, V)
        return Seq2SeqLMOutput(
            loss=loss,
            logits=logits,
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
            **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)},
        )


def check_one_target_row_per_source_row(
    encoder_hidden_states: Tensor, decoder_input_ids: Tensor | None, decoder_inputs_embeds: Tensor | None
) -> None:
    """ValueError unless the decoder inputs have as many rows as the encoder output (the recurrent family's check).

    Cross-attention would otherwise broadcast a one-row source over every target row (or the reverse) without a
    word. generate() expands the encoder output itself for beams and returned sequences, so its rows always match.
    Decoder inputs of the wrong kind or number of dimensions are left to the decoder's own checks, which name them.
    """
    ids = decoder_input_ids is not None
    decoder_inputs, dimensions = (decoder_input_ids, 2) if ids else (decoder_inputs_embeds, 3)
    if not isinstance(decoder_inputs, Tensor) or decoder_inputs.dim() != dimensions:
        return
    batch = encoder_hidden_states.shape[0]
    if decoder_inputs.shape[0] != batch:
        name, rest = ("decoder_input_ids", "") if ids else ("decoder_inputs_embeds", ", E")
        raise ValueError(
            f"{name} has shape {tuple(decoder_inputs.shape)}, expected ({batch}, length{rest}): one target row per "
            "source row."
        )


def _model_output(
    decoder: BaseModelOutputWithPastAndCrossAttentions, encoder_outputs: ModelOutput, cache: EncoderDecoderCache | None
) -> Seq2SeqModelOutput:
    """The decoder's output and the encoder's side by side, with the cache under this release's field name."""
    return Seq2SeqModelOutput(
        last_hidden_state=decoder.last_hidden_state,
        decoder_hidden_states=decoder.hidden_states,
        decoder_attentions=decoder.attentions,
        cross_attentions=decoder.cross_attentions,
        encoder_last_hidden_state=encoder_outputs[0],
        encoder_hidden_states=getattr(encoder_outputs, "hidden_states", None),
        encoder_attentions=getattr(encoder_outputs, "attentions", None),
        **{CACHE_FIELD: cache},
    )
