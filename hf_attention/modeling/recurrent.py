"""The recurrent encoder-decoder, with and without attention, as an hf-attention family: its model classes.

The encoder, the decoder and the decoder's look back at the source (Bahdanau et al. 2015; Luong et al. 2015) are in
recurrent_layers.py. What this file adds is what makes them a family like the Transformer ones: the PreTrainedModel
base (weight init, saving with the package's code, loading), the base model that wires the encoder's annotations and
summary into the decoder, and the seq2seq LM head (labels, `generate()`).

Notation: B batch, S source length, T target length, H hidden size, E embedding size, L stacked layers,
V vocabulary size.

`generate()` carries the decoder's state between tokens in a `RecurrentState`, which beam search reorders like a KV
cache; unlike a KV cache it does not grow with the target, since the decoder's hidden state summarises the history.

This file is part of the remote-code closure: it imports only torch, transformers and its siblings.
"""

import torch
from torch import Tensor, nn
from transformers import GenerationMixin
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput, Seq2SeqModelOutput

from .cache_argument import CACHE_FIELD
from .configuration_recurrent import HFAttentionRecurrentConfig
from .generation_mixin import EncoderDecoderGeneration
from .input_checks import check_token_inputs
from .losses import check_labels, label_shape, repeat_unlikelihood, shift_tokens_right, token_cross_entropy
from .pretrained import HFAttentionPreTrainedModel, SharedEmbeddingModel
from .recurrent_layers import RecurrentDecoder, RecurrentEncoder, check_target_mask, source_lengths


class RecurrentState:
    """The decoder's state between generated tokens: the last hidden state of every layer (and an LSTM's cell).

    What a KV cache is to a Transformer decoder, except that its size does not grow with the target: the whole
    history is summarised in (L, B, H). `generate()` reorders it in beam search (`reorder_cache`) and reads its
    length (`get_seq_length`).
    """

    is_compileable = False

    def __init__(self, hidden: Tensor | tuple[Tensor, Tensor], steps: int, attentional: Tensor | None = None):
        self.hidden = hidden  # (L, B, H), or (h, c) for an LSTM
        self.steps = steps  # target tokens consumed so far
        self.attentional = attentional  # (B, E): the last h̃, fed to the next step (Luong's input feeding), or None

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.steps

    def reorder_cache(self, beam_idx: Tensor) -> None:
        """Keep the rows beam search chose (`beam_idx` indexes the batch)."""
        if isinstance(self.hidden, tuple):
            self.hidden = tuple(part.index_select(1, beam_idx.to(part.device)) for part in self.hidden)
        else:
            self.hidden = self.hidden.index_select(1, beam_idx.to(self.hidden.device))
        if self.attentional is not None:
            self.attentional = self.attentional.index_select(0, beam_idx.to(self.attentional.device))


# PyTorch's CPU allocator starts every tensor on a 64-byte boundary (the width of an AVX-512 register).
CPU_ALIGNMENT = 64


def realign_parameters(model: nn.Module) -> None:
    """Move every CPU parameter and buffer that does not start on a 64-byte boundary into fresh memory, which does.

    Loaded weights are views into the memory-mapped safetensors file, at offsets set by the length of its header (8
    or 32 bytes past a boundary, say), while a freshly built model's weights start on one. Values, shapes and strides
    are the same, but a CPU kernel may choose its code path, and so its order of summation, by the address of its
    operands: PyTorch runs an unpacked LSTM (the decoder's) through oneDNN and hands it the weights by address, and
    on an AMD Zen 4 a loaded LSTM's logits were 8e-9 off those of the model that saved it. Tied weights stay tied:
    a tied Parameter is one object, listed once, whose data is replaced in place for every module.
    """
    for tensor in [*model.parameters(), *model.buffers()]:
        if tensor.device.type == "cpu" and tensor.data_ptr() % CPU_ALIGNMENT != 0:
            tensor.data = tensor.data.clone()  # a new allocation: aligned, same shape and strides


class HFAttentionRecurrentPreTrainedModel(HFAttentionPreTrainedModel):
    """The base of the recurrent family: what every hf-attention model shares (saving with the full `auto_map` and
    the package's code among it), and the start of the recurrent weights. No attention backend to choose: its one
    attention is eager by construction."""

    config_class = HFAttentionRecurrentConfig
    main_input_name = "input_ids"
    _is_stateful = False

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.RNNBase):  # PyTorch's own start for recurrent weights: uniform ±1/√H
            bound = module.hidden_size**-0.5
            for parameter in module.parameters():
                init.uniform_(parameter, -bound, bound)
        else:
            super()._init_weights(module)

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        # generate() must not hand this model a KV cache: the decoder makes its own RecurrentState on the first step.
        return False

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """Load as PreTrainedModel does, then give every parameter the memory alignment a freshly built model has
        (`realign_parameters`), so that a loaded model computes bit for bit what the saved one did."""
        loaded = super().from_pretrained(*args, **kwargs)
        realign_parameters(loaded[0] if isinstance(loaded, tuple) else loaded)  # (model, info) with loading info
        return loaded


class HFAttentionRecurrentModel(SharedEmbeddingModel, HFAttentionRecurrentPreTrainedModel):
    """The encoder and decoder RNNs with one embedding matrix shared by source and target (`SharedEmbeddingModel`)."""

    def __init__(self, config: HFAttentionRecurrentConfig):
        super().__init__(config)
        size = (config.vocab_size, config.word_embedding_size)
        self.shared = nn.Embedding(*size)
        self.encoder = RecurrentEncoder(
            embed_tokens=nn.Embedding(*size),
            hidden_size=config.hidden_size,
            num_layers=config.encoder_layers,
            cell=config.cell,
            bidirectional=config.bidirectional_encoder,
            dropout=config.dropout,
        )
        self.decoder = RecurrentDecoder(
            embed_tokens=nn.Embedding(*size),
            hidden_size=config.hidden_size,
            num_layers=config.decoder_layers,
            cell=config.cell,
            encoder_size=self.encoder.output_size,
            attention_score=config.attention_score if config.has_attention else None,
            dropout=config.dropout,
            # A config saved before these options existed has no such fields: Bahdanau's decoder, as it then was.
            attention_style=getattr(config, "attention_style", "bahdanau"),
            input_feeding=getattr(config, "input_feeding", False),
        )
        self.post_init()

    def get_encoder(self, modality: str | None = None) -> RecurrentEncoder | nn.Module:
        # The text encoder; another modality's ("image", "audio"), which this model has not, is transformers'
        # answer (the model itself), so that exporters do not take the text encoder for an image encoder.
        return self.encoder if modality is None else super().get_encoder(modality)

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        decoder_input_ids: Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: RecurrentState | None = None,
        past_key_values: RecurrentState | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> Seq2SeqModelOutput | tuple:
        """Encode the source (unless `encoder_outputs` are given) and run the decoder over `decoder_input_ids`,
        continuing from `cache` (a RecurrentState) when given: then `decoder_input_ids` are the new tokens only."""
        state = _recurrent_state(cache, past_key_values)
        return_dict = self.config.return_dict if return_dict is None else return_dict
        use_cache = self.config.use_cache if use_cache is None else use_cache
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        if decoder_input_ids is None:
            raise ValueError("decoder_input_ids are required (or labels, from which the LM head builds them).")
        check_token_inputs(decoder_input_ids, None, prefix="decoder_", embedding_size=self.config.word_embedding_size)
        if kwargs.get("decoder_attention_mask") is not None:  # checked, not silently dropped
            # (with a state, the mask covers the steps already taken and the new tokens)
            steps = decoder_input_ids.shape[1] + (0 if state is None else state.steps)
            check_target_mask(kwargs["decoder_attention_mask"], decoder_input_ids.shape[0], steps)
        if encoder_outputs is None:
            if input_ids is None and kwargs.get("inputs_embeds") is None:
                raise ValueError("Pass input_ids (the source) or encoder_outputs.")
            encoder_outputs = self.encoder(
                input_ids,
                attention_mask,
                inputs_embeds=kwargs.get("inputs_embeds"),
                output_hidden_states=output_hidden_states,
            )
        elif isinstance(encoder_outputs, tuple):
            encoder_outputs = BaseModelOutput(last_hidden_state=encoder_outputs[0])
        annotations = encoder_outputs.last_hidden_state
        batch, length = annotations.shape[:2]
        if decoder_input_ids.shape[0] != batch:
            raise ValueError(
                f"decoder_input_ids has shape {tuple(decoder_input_ids.shape)}, expected ({batch}, length): one "
                "target row per source row."
            )
        lengths = source_lengths(attention_mask, batch, length, annotations.device)
        source_mask = (torch.arange(length, device=annotations.device)[None, :] < lengths[:, None])[:, None, None]
        summary = self.encoder.summary(annotations, lengths)
        embedded = self.decoder.embed(decoder_input_ids, first_call=state is None)
        hidden, new_state, weights = self.decoder(
            embedded,
            annotations,
            summary,
            source_mask,
            None if state is None else state.hidden,
            None if state is None else state.attentional,
        )
        if use_cache:
            steps = decoder_input_ids.shape[1] + (0 if state is None else state.steps)
            fed = hidden[:, -1] if self.decoder.input_feeding else None  # h̃ of the last step, the next one's input
            state = RecurrentState(new_state, steps, fed)
        cross_attentions = (weights[:, None],) if output_attentions and weights is not None else None
        output = Seq2SeqModelOutput(
            last_hidden_state=hidden,
            cross_attentions=cross_attentions,
            encoder_last_hidden_state=annotations,
            encoder_hidden_states=encoder_outputs.hidden_states,
            # as the encoder's: what the stacked RNN reads and what the decoder outputs
            decoder_hidden_states=(embedded, hidden) if output_hidden_states else None,
            **{CACHE_FIELD: state if use_cache else None},
        )
        return output if return_dict else output.to_tuple()


def _recurrent_state(cache, past_key_values) -> RecurrentState | None:
    """The decoder state passed under either name of the cache argument; TypeError for anything else."""
    if cache is not None and past_key_values is not None and cache is not past_key_values:
        raise ValueError("Both `cache` and `past_key_values` were passed: pass the decoder state once, as `cache`.")
    state = cache if cache is not None else past_key_values
    if state is not None and not isinstance(state, RecurrentState):
        raise TypeError(
            f"A recurrent model's cache is a RecurrentState (the decoder's hidden state), got {type(state).__name__}; "
            "a Transformer KV cache does not apply."
        )
    return state


class HFAttentionRecurrentForSeq2SeqLM(EncoderDecoderGeneration, HFAttentionRecurrentPreTrainedModel, GenerationMixin):
    """The recurrent encoder-decoder with its vocabulary projection: training with labels, `generate()`."""

    _tied_weights_keys = {"lm_head.weight": "model.shared.weight"}

    def __init__(self, config: HFAttentionRecurrentConfig):
        super().__init__(config)
        self.model = HFAttentionRecurrentModel(config)
        self.lm_head = nn.Linear(config.word_embedding_size, config.vocab_size, bias=False)
        self.post_init()

    def get_encoder(self, modality: str | None = None) -> RecurrentEncoder | nn.Module:
        # The text encoder; another modality's ("image", "audio"), which this model has not, is transformers'
        # answer (the model itself), so that exporters do not take the text encoder for an image encoder.
        return self.model.encoder if modality is None else super().get_encoder(modality)

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    def prepare_decoder_input_ids_from_labels(self, labels: Tensor) -> Tensor:
        """Teacher-forcing inputs for `labels` (used by DataCollatorForSeq2Seq)."""
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    def prepare_inputs_for_generation(
        self,
        decoder_input_ids: Tensor,
        cache: RecurrentState | None = None,
        past_key_values: RecurrentState | None = None,
        attention_mask: Tensor | None = None,
        encoder_outputs: BaseModelOutput | None = None,
        use_cache: bool | None = None,
        **kwargs,
    ) -> dict:
        """The next step's inputs: with a state, only the tokens it has not consumed (one per step). The output
        switches generate() sets (`output_attentions=True` for the per-step cross-attention maps) pass through."""
        state = _recurrent_state(cache, past_key_values)
        if state is not None:
            decoder_input_ids = decoder_input_ids[:, state.steps :]
        return {
            "decoder_input_ids": decoder_input_ids,
            "attention_mask": attention_mask,
            "encoder_outputs": encoder_outputs,
            "use_cache": use_cache,
            "output_attentions": kwargs.get("output_attentions"),
            "output_hidden_states": kwargs.get("output_hidden_states"),
            CACHE_FIELD: state,
        }

    def forward(
        self,
        input_ids: Tensor | None = None,
        attention_mask: Tensor | None = None,
        decoder_input_ids: Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: RecurrentState | None = None,
        past_key_values: RecurrentState | None = None,
        labels: Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> Seq2SeqLMOutput | tuple:
        """As `HFAttentionRecurrentModel.forward`, plus logits (B, T, V) and, with `labels` (B, T), the token
        cross-entropy (decoder inputs default to the labels shifted right behind the start token)."""
        return_dict = self.config.return_dict if return_dict is None else return_dict
        num_items_in_batch = kwargs.pop("num_items_in_batch", None)
        if labels is not None:
            teacher_forced = decoder_input_ids is None
            shape = None if teacher_forced else label_shape(decoder_input_ids, 2)
            check_labels(
                labels, shape, self.config.vocab_size, "vocab_size", per="decoder input token", any_2d=teacher_forced
            )
            if teacher_forced:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
                use_cache = False
        outputs = self.model(
            input_ids,
            attention_mask,
            decoder_input_ids,
            encoder_outputs,
            cache=cache,
            past_key_values=past_key_values,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
            return_dict=True,
            **kwargs,
        )
        logits = self.lm_head(outputs.last_hidden_state)
        loss = None
        if labels is not None:
            loss = token_cross_entropy(logits, labels, num_items_in_batch, self.config.label_smoothing)
            # A config saved before the option existed has no such field.
            unlikelihood_weight = getattr(self.config, "unlikelihood_weight", 0.0)
            if unlikelihood_weight:
                loss = loss + unlikelihood_weight * repeat_unlikelihood(logits, labels, num_items_in_batch)
        output = Seq2SeqLMOutput(
            loss=loss,
            logits=logits,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            decoder_hidden_states=outputs.decoder_hidden_states,
            **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)},
        )
        return output if return_dict else output.to_tuple()
