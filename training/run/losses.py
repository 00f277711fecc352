"""The training loss: the summed cross-entropy of the target tokens divided by `num_items_in_batch`, the count of
target tokens in the whole accumulation window on every process, so that every token weighs the same however the
batch is split. Our models take that count (`num_items_in_batch`); Hugging Face models that only return a mean loss
(BART, BERT) get the same token-normalised loss from their logits here, and so do those whose config asks for label
smoothing or the unlikelihood term, which no Hugging Face loss computes (GPT-2 and Llama included).
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

import hf_attention
from hf_attention.modeling.losses import next_token_labels, repeat_unlikelihood
from training.objective import Objective


def target_labels(objective: Objective, labels: torch.Tensor) -> torch.Tensor:
    """The labels the loss is taken against: for a causal LM, position t predicts token t+1."""
    if objective.evaluation.predicts_next_token:
        return next_token_labels(labels)
    return labels


def count_targets(objective: Objective, batch: dict) -> int:
    """Number of tokens that enter the loss in `batch`."""
    return int((target_labels(objective, batch["labels"]) != -100).sum())


def token_loss(objective: Objective, model, batch: dict, num_items_in_batch: torch.Tensor) -> torch.Tensor:
    """Summed cross-entropy of `batch` divided by `num_items_in_batch` (the count over the accumulation window and
    all processes), with the loss options of the model's config (`loss_options`): the model's own loss where it
    computes exactly that, else from its logits."""
    if own_loss_is_the_training_loss(objective, _unwrap(model)):
        return model(**batch, num_items_in_batch=num_items_in_batch).loss
    inputs = {k: v for k, v in batch.items() if k != "labels"}
    logits = model(**inputs).logits
    smoothing, unlikelihood = loss_options(objective, _unwrap(model).config)
    loss = per_token_sum(objective, logits, batch["labels"], label_smoothing=smoothing).sum() / num_items_in_batch
    if unlikelihood:
        targets = target_labels(objective, batch["labels"])
        loss = loss + unlikelihood * repeat_unlikelihood(logits, targets, num_items_in_batch)
    return loss


def loss_options(objective: Objective, config) -> tuple[float, float]:
    """(label_smoothing, unlikelihood_weight) of the training loss, as our models' own losses read them from their
    config; a Hugging Face config carries them as extra fields (set through model_config). The unlikelihood term is
    for models that write their labels left to right: a masked LM never gets it."""
    smoothing = getattr(config, "label_smoothing", 0.0)
    unlikelihood = getattr(config, "unlikelihood_weight", 0.0) if objective.writes_left_to_right else 0.0
    return smoothing, unlikelihood


def own_loss_is_the_training_loss(objective: Objective, model) -> bool:
    """Whether the model's own loss is the training loss: ours read both options from their config; a Hugging Face
    model's loss knows neither, so it serves only when it takes the count and the config asks for no option."""
    if isinstance(model, hf_attention.HFAttentionPreTrainedModel):
        return True
    return loss_takes_num_items(model) and loss_options(objective, model.config) == (0.0, 0.0)


def loss_takes_num_items(model) -> bool:
    """Whether the model's own loss divides its summed cross-entropy by the `num_items_in_batch` it is given.

    Ours do. A Hugging Face model does when its forward computes the loss with transformers' `loss_function` (GPT-2,
    Llama and most causal LMs); BART, Marian and BERT take the mean with a `CrossEntropyLoss` of their own and would
    ignore the count. Their signatures cannot tell the two kinds apart: every forward takes **kwargs.
    """
    if isinstance(model, hf_attention.HFAttentionPreTrainedModel):
        return True
    code = getattr(inspect.unwrap(type(model).forward), "__code__", None)
    return code is not None and "loss_function" in code.co_names


def per_token_sum(
    objective: Objective, logits: torch.Tensor, labels: torch.Tensor, *, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Summed cross-entropy per row (B,), over the tokens whose target is not -100 (label-smoothed if asked)."""
    targets = target_labels(objective, labels).to(logits.device)
    losses = nn.functional.cross_entropy(
        logits.float().transpose(1, 2), targets, ignore_index=-100, reduction="none", label_smoothing=label_smoothing
    )  # (B, T)
    return losses.sum(dim=1)


def _unwrap(model):
    return getattr(model, "module", model)
