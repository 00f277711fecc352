"""The decoder family (GPT-like): the causal base model, the head base `DecoderHead`, and the heads.

Notation: B batch, T length, E model dim, V vocabulary.

A head is the decoder as `model` plus its own layers: `DecoderHead` holds the forward signature every decoder head
shares, the cache argument under both its names and the call to the decoder; a new head adds its layers and writes
`_head_output` (and `_check_labels`). The generative head adds transformers' GenerationMixin with our additions
(generation_mixin.py).
"""

import torch
from torch import Tensor, nn
from transformers import GenerationMixin
from transformers.cache_utils import Cache, DynamicCache
from transformers.modeling_outputs import (
    BaseModelOutputWithPastAndCrossAttentions,
    CausalLMOutputWithCrossAttentions,
    MoeCausalLMOutputWithPast,
    MoeModelOutputWithPast,
    SequenceClassifierOutputWithPast,
)
from transformers.utils import ModelOutput

from .cache_argument import CACHE_FIELD, cache_from_arguments
from .configuration_hf_attention import HFAttentionDecoderConfig
from .gated_deltanet import CACHE_RECORDS_PAST_STATES
from .generation_mixin import GenerationOverrides
from .latent_attention import latent_cache
from .losses import check_labels, label_shape, logit_slice, next_token_labels
from .mixture_of_experts import load_balancing_loss, recording_router_logits
from .pretrained import OneStackModel, TransformerPreTrainedModel


class HFAttentionDecoderPreTrainedModel(TransformerPreTrainedModel):
    """Base of the decoder family."""

    config_class = HFAttentionDecoderConfig


class HFAttentionDecoderModel(OneStackModel, HFAttentionDecoderPreTrainedModel):
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
        `past_key_values=`, is accepted too. A mixture of experts returns its routers' scores (transformers'
        `MoeModelOutputWithPast.router_logits`) when `output_router_logits`, or else the config's, asks for them; a
        dense model ignores the argument. Other keyword arguments reach every attention function."""
        records = self._records_router_logits(kwargs.pop("output_router_logits", None))
        output_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        output_hidden_states = (
            self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        )
        return_dict = self.config.return_dict if return_dict is None else return_dict
        past_key_values = kwargs.pop("past_key_values", None)
        if cache is not None or past_key_values is not None:  # a cache of the caller's, under either name
            cache = cache_from_arguments(cache, past_key_values)
        if use_cache is None:
            use_cache = self.config.use_cache and not self.training
        if use_cache and cache is None:  # latent attention layers cache latents (latent_attention.py)
            cache = DynamicCache(config=self.config) if self.config.kv_lora_rank is None else latent_cache(self.config)
        inputs = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "inputs_embeds": inputs_embeds,
            "cache": cache,
            "output_attentions": output_attentions,
            "output_hidden_states": output_hidden_states,
            **kwargs,
        }
        if records:
            with recording_router_logits(self.decoder) as router_logits:
                output = self.decoder(**inputs)
            output = MoeModelOutputWithPast(**output, router_logits=tuple(router_logits))
        else:
            output = self.decoder(**inputs)  # with the cache the layers wrote to
        if cache is not None and not use_cache:  # a cache used for this call only (a caller's): not returned
            output = type(output)(**{key: value for key, value in output.items() if key != CACHE_FIELD})
        return output if return_dict else output.to_tuple()

    def _records_router_logits(self, requested: bool | None) -> bool:
        """Whether this call returns the routers' scores: a mixture of experts asked to by the call (`requested`)
        or else by its config's `output_router_logits`."""
        if getattr(self.config, "num_experts", None) is None:
            return False
        return bool(self.config.output_router_logits if requested is None else requested)


class DecoderHead(HFAttentionDecoderPreTrainedModel):
    """Base of the decoder heads: the decoder as `model`, the forward signature they share and the call to it.

    A head adds its layers after `super().__init__` (then calls `post_init`), turns the decoder's output into its own
    in `_head_output`, and may refuse malformed labels in `_check_labels` before the decoder runs. Keyword arguments
    named in `head_inputs` are the head's own: they are kept from the decoder and given to both hooks.
    """

    head_inputs: tuple[str, ...] = ()

    def __init__(self, config: HFAttentionDecoderConfig):
        super().__init__(config)
        self.model = HFAttentionDecoderModel(config)

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
    ) -> ModelOutput | tuple:
        """(B, T) new ids (+ a cache of earlier ones) → the head's output, and its loss when `labels` are given.

        `logits_to_keep` limits the positions whose outputs are computed (generation needs the last one only).
        `cache` (or its name before transformers 5.24, `past_key_values`) as in HFAttentionDecoderModel; other
        keyword arguments reach every attention function."""
        return_dict = self.config.return_dict if return_dict is None else return_dict
        own = {name: kwargs.pop(name, None) for name in self.head_inputs}
        if labels is not None:
            self._check_labels(labels, input_ids, inputs_embeds, logits_to_keep, **own)
        inputs = {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "cache": cache,
            "inputs_embeds": inputs_embeds,
            "use_cache": use_cache,
            "output_attentions": output_attentions,
            "output_hidden_states": output_hidden_states,
            "return_dict": True,
            **kwargs,
        }
        if "output_router_logits" in own:  # a mixture of experts' head: the scores, and the mask for their loss
            inputs["output_router_logits"] = own["output_router_logits"]
        outputs = self.model(**inputs)
        if "output_router_logits" in own and getattr(outputs, "router_logits", None) is not None:
            own["output_router_logits"] = (outputs.router_logits, attention_mask)
        output = self._head_output(
            outputs,
            labels=labels,
            input_ids=input_ids,
            logits_to_keep=logits_to_keep,
            num_items_in_batch=kwargs.get("num_items_in_batch"),
            **own,
        )
        return output if return_dict else output.to_tuple()

    def _check_labels(
        self,
        labels: Tensor,
        input_ids: Tensor | None,
        inputs_embeds: Tensor | None,
        logits_to_keep: int | Tensor,
        **own,
    ) -> None:
        """Raise ValueError for labels that do not fit the inputs (one per position whose logits are computed,
        `losses.label_shape`); default: no check."""

    def _head_output(
        self,
        outputs: BaseModelOutputWithPastAndCrossAttentions,
        *,
        labels: Tensor | None,
        input_ids: Tensor | None,
        logits_to_keep: int | Tensor,
        num_items_in_batch: Tensor | int | None,
        **own,
    ) -> ModelOutput:
        """The head's output (with the decoder's cache, `outputs[CACHE_FIELD]`) from the decoder's `outputs`."""
        raise NotImplementedError


class HFAttentionForCausalLM(GenerationOverrides, DecoderHead, GenerationMixin):
    """Decoder with a vocabulary projection: next-token prediction and `generate()`.

    `labels` (B, T) are the inputs themselves: the loss predicts token t+1 from ≤ t. `shift_labels` (B, T), as
    transformers' causal-LM loss takes it (context- and sequence-parallel trainers pass it), are the targets already
    shifted: position t's target is shift_labels[t]; given with `labels`, they are used instead of shifting `labels`.
    """

    _tied_weights_keys = {"lm_head.weight": "model.decoder.embed_tokens.weight"}
    head_inputs = ("shift_labels", "output_router_logits")

    def __init__(self, config: HFAttentionDecoderConfig):
        super().__init__(config)
        self._build_lm_head(config)
        self.post_init()

    @property
    def _is_stateful(self) -> bool:
        """Assisted decoding (prompt lookup, a draft model) rolls the cache back over the tokens it rejects: a
        linear-attention layer's state can go back only where transformers' cache records past states (5.24 on).
        Before that, generate() refuses it, as it refuses transformers' own Qwen3-Next, rather than decode on from a
        state that has read the rejected tokens."""
        return "linear_attention" in (self.config.layer_types or []) and not CACHE_RECORDS_PAST_STATES

    def __setattr__(self, name: str, value) -> None:
        """Refuse a replacement `forward` offering TRL's fused LM head when this head does more than what that
        computes (the loss from the backbone's last hidden state and `lm_head.weight`): it would train on another
        loss. TRL's replacement (`add_fused_lm_head`) is known by what it offers, a `fused_lm_head` argument."""
        if name == "forward" and _offers_fused_lm_head(value):
            problem = self.config.head_options_outside_the_projection()
            if problem is not None:
                raise ValueError(
                    f"This model's head uses {problem}. TRL computes the loss from the backbone's last hidden state "
                    "and lm_head.weight (times config.logit_scale), which skips that step, so it would train on a "
                    "loss this model does not compute. Train this configuration with its own loss (transformers' "
                    "Trainer or training.train), or use a config without that option for TRL."
                )
        super().__setattr__(name, value)

    def _check_labels(
        self,
        labels: Tensor,
        input_ids: Tensor | None,
        inputs_embeds: Tensor | None,
        logits_to_keep: int | Tensor,
        *,
        shift_labels: Tensor | None,
        output_router_logits: bool | None,
    ) -> None:
        shape = label_shape(input_ids, 2, logits_to_keep) or label_shape(inputs_embeds, 3, logits_to_keep)
        for name, given in (("labels", labels), ("shift_labels", shift_labels)):
            if given is not None:
                check_labels(given, shape, self.config.vocab_size, "vocab_size", per="input token", name=name)

    def _head_output(
        self,
        outputs: BaseModelOutputWithPastAndCrossAttentions,
        *,
        labels: Tensor | None,
        input_ids: Tensor | None,
        logits_to_keep: int | Tensor,
        num_items_in_batch: Tensor | int | None,
        shift_labels: Tensor | None,
        output_router_logits: tuple[tuple[Tensor, ...], Tensor | None] | bool | None,
    ) -> CausalLMOutputWithCrossAttentions | MoeCausalLMOutputWithPast:
        """Logits (B, T, V), and with `labels` the next-token loss. A mixture of experts returns transformers' MoE
        output; with the routers' scores recorded (`output_router_logits`: the scores of each layer and the
        attention mask), the load-balancing loss as `aux_loss`, and `router_aux_loss_coef` times it added to the
        loss, as transformers' MoE models do."""
        hidden = outputs.last_hidden_state[:, logit_slice(logits_to_keep)]
        next_tokens = None
        if labels is not None:
            next_tokens = shift_labels
            if next_tokens is None:
                next_tokens = next_token_labels(labels)
        logits, loss = self.vocabulary_logits_and_loss(hidden, next_tokens, num_items_in_batch)
        if getattr(self.config, "num_experts", None) is not None:
            return self._experts_output(outputs, logits, loss, output_router_logits)
        return CausalLMOutputWithCrossAttentions(
            loss=loss,
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)},
        )

    def _experts_output(
        self,
        outputs: BaseModelOutputWithPastAndCrossAttentions,
        logits: Tensor,
        loss: Tensor | None,
        recorded: tuple[tuple[Tensor, ...], Tensor | None] | bool | None,
    ) -> MoeCausalLMOutputWithPast:
        router_logits = aux_loss = None
        if isinstance(recorded, tuple):
            router_logits, attention_mask = recorded
            aux_loss = load_balancing_loss(
                router_logits, self.config.num_experts, self.config.num_experts_per_tok, attention_mask
            )
            if loss is not None:
                loss = loss + self.config.router_aux_loss_coef * aux_loss.to(loss.device)
        return MoeCausalLMOutputWithPast(
            loss=loss,
            aux_loss=aux_loss,
            logits=logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            router_logits=router_logits,
            **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)},
        )


def _offers_fused_lm_head(forward) -> bool:
    """Whether `forward` takes a `fused_lm_head` argument: TRL's fused-LM-head forward (`add_fused_lm_head`), which
    copies our forward's name and signature (functools.wraps) but keeps its own parameters in its code."""
    code = getattr(getattr(forward, "__func__", forward), "__code__", None)
    if code is None:
        return False
    parameters = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    return "fused_lm_head" in parameters


class HFAttentionDecoderForSequenceClassification(DecoderHead):
    """Decoder + a linear score read at the last real token of each text, as GPT-2's and Llama's classifiers (and
    the reward models of TRL) do: a causal model has seen the whole text only there."""

    def __init__(self, config: HFAttentionDecoderConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.score = nn.Linear(config.hidden_size, config.num_labels, bias=False)
        self.post_init()

    def _head_output(
        self,
        outputs: BaseModelOutputWithPastAndCrossAttentions,
        *,
        labels: Tensor | None,
        input_ids: Tensor | None,
        logits_to_keep: int | Tensor,
        num_items_in_batch: Tensor | int | None,
    ) -> SequenceClassifierOutputWithPast:
        """Logits (B, num_labels) at each row's last token that is not `pad_token_id` (left or right padding; every
        position is read, whatever `logits_to_keep`); the loss follows `config.problem_type`."""
        logits = self.score(outputs.last_hidden_state)  # (B, T, num_labels)
        pooled_logits = logits[torch.arange(logits.shape[0], device=logits.device), self._last_tokens(input_ids)]
        loss = None
        if labels is not None:
            loss = self.sequence_classification_loss(pooled_logits, labels, num_items_in_batch)
        return SequenceClassifierOutputWithPast(
            loss=loss,
            logits=pooled_logits,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            **{CACHE_FIELD: getattr(outputs, CACHE_FIELD)},
        )

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
