"""The encoder family (BERT-like): the bidirectional base model, the head base `EncoderHead`, and the heads.

Notation: B batch, T length, E model dim, V vocabulary.

A head is the encoder as `model` plus its own layers: `EncoderHead` holds the forward signature every encoder head
shares and the call to the encoder; a new head adds its layers and writes `_head_output` (and `_check_labels`).
"""

from torch import Tensor, nn
from transformers.modeling_outputs import (
    BaseModelOutput,
    MaskedLMOutput,
    SequenceClassifierOutput,
    TokenClassifierOutput,
)
from transformers.utils import ModelOutput

from .configuration_hf_attention import HFAttentionEncoderConfig
from .losses import check_labels, label_shape, token_cross_entropy
from .pretrained import OneStackModel, TransformerPreTrainedModel, build_head_transform


class HFAttentionEncoderPreTrainedModel(TransformerPreTrainedModel):
    """Base of the encoder family."""

    config_class = HFAttentionEncoderConfig


class HFAttentionEncoderModel(OneStackModel, HFAttentionEncoderPreTrainedModel):
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
        output_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        output_hidden_states = (
            self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        )
        return_dict = self.config.return_dict if return_dict is None else return_dict
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


class EncoderHead(HFAttentionEncoderPreTrainedModel):
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
            self._check_labels(labels, label_shape(input_ids, 2) or label_shape(inputs_embeds, 3))
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


class HFAttentionForMaskedLM(EncoderHead):
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
        logits, loss = self.vocabulary_logits_and_loss(
            encoded.last_hidden_state, labels, num_items_in_batch, generative=False
        )
        return MaskedLMOutput(
            loss=loss, logits=logits, hidden_states=encoded.hidden_states, attentions=encoded.attentions
        )


class EncoderClassifier(EncoderHead):
    """Base of the classification heads: (a dense → activation → norm transform, ModernBERT's,) dropout, then a
    linear layer from hidden_size to num_labels."""

    def __init__(self, config: HFAttentionEncoderConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        dropout = config.classifier_dropout if config.classifier_dropout is not None else config.hidden_dropout_prob
        self.classifier_transform = build_head_transform(config) if config.classifier_transform else None
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)
        self.post_init()

    def classify(self, hidden: Tensor) -> Tensor:
        """(…, E) → (…, num_labels): the transform if configured, dropout, the linear layer."""
        if self.classifier_transform is not None:
            hidden = self.classifier_transform(hidden)
        return self.classifier(self.dropout(hidden))


class HFAttentionForSequenceClassification(EncoderClassifier):
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
        logits = self.classify(self.pool(encoded.last_hidden_state, attention_mask))
        loss = None if labels is None else self.sequence_classification_loss(logits, labels, num_items_in_batch)
        return SequenceClassifierOutput(
            loss=loss, logits=logits, hidden_states=encoded.hidden_states, attentions=encoded.attentions
        )


class HFAttentionForTokenClassification(EncoderClassifier):
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
        logits = self.classify(encoded.last_hidden_state)
        loss = (
            None
            if labels is None
            else token_cross_entropy(logits, labels, num_items_in_batch, self.config.label_smoothing)
        )
        return TokenClassifierOutput(
            loss=loss, logits=logits, hidden_states=encoded.hidden_states, attentions=encoded.attentions
        )
