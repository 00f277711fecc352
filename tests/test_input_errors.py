"""Bad model inputs get a ValueError naming the argument, what was given and what is allowed, before any work."""

import contextlib

import pytest
import torch
from conftest import build

from hf_attention import (
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionForTokenClassification,
)
from hf_attention.losses import linear_cross_entropy, token_cross_entropy

HEADS = {  # name → (model class, family, extra inputs)
    "causal_lm": (HFAttentionForCausalLM, "decoder", {}),
    "masked_lm": (HFAttentionForMaskedLM, "encoder", {}),
    "token_classification": (HFAttentionForTokenClassification, "encoder", {}),
    "seq2seq": (HFAttentionForSeq2SeqLM, "seq2seq", {"decoder_input_ids": torch.randint(3, 99, (2, 6))}),
}


def _call(head: str, training: bool, **inputs):
    model_class, family, extra = HEADS[head]
    model = build(model_class, family)
    if training:
        model.train()  # gradients on: the vocabulary projection and the loss run fused
    with contextlib.nullcontext() if training else torch.no_grad():
        return model(torch.randint(3, 99, (2, 6)), **{**extra, **inputs})


# --- labels: shape, kind and values, on the training (fused) path and without gradients alike

@pytest.mark.parametrize("training", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize(("head", "labels", "message"), [
    ("causal_lm", torch.randint(3, 99, (2, 7)), r"labels has shape \(2, 7\), expected \(2, 6\)"),
    ("causal_lm", torch.randint(3, 99, (2, 5)), r"labels has shape \(2, 5\), expected \(2, 6\)"),
    ("causal_lm", torch.randint(3, 99, (12,)), r"labels has shape \(12,\), expected \(2, 6\)"),
    ("masked_lm", torch.randint(3, 99, (2, 7)), r"labels has shape \(2, 7\), expected \(2, 6\)"),
    ("masked_lm", torch.randint(3, 99, (1, 6)), r"labels has shape \(1, 6\), expected \(2, 6\)"),
    ("token_classification", torch.randint(0, 2, (2, 7)), r"labels has shape \(2, 7\), expected \(2, 6\)"),
    ("seq2seq", torch.randint(3, 99, (2, 4)), r"labels has shape \(2, 4\), expected \(2, 6\): one label per decoder "
                                              r"input token"),
    ("seq2seq", torch.randint(3, 99, (6,)), r"labels has shape \(6,\), expected \(2, 6\)"),
    ("causal_lm", torch.full((2, 6), 99), r"labels contains 99, outside \[0, vocab_size=99\); use -100"),
    ("causal_lm", torch.full((2, 6), -1), r"labels contains -1, outside \[0, vocab_size=99\)"),
    ("causal_lm", torch.full((2, 6), 5.0), r"labels must hold integer class ids \(torch.long\), got dtype "
                                           r"torch.float32"),
    ("masked_lm", torch.tensor([[-100] * 5 + [500]] * 2), r"labels contains 500, outside \[0, vocab_size=99\)"),
    ("masked_lm", torch.full((2, 6), -7), r"labels contains -7"),
    ("token_classification", torch.full((2, 6), 2), r"labels contains 2, outside \[0, num_labels=2\)"),
    ("token_classification", torch.full((2, 6), 1.0), r"labels must hold integer class ids"),
    ("seq2seq", torch.full((2, 6), 99), r"labels contains 99, outside \[0, vocab_size=99\)"),
    ("seq2seq", torch.ones(2, 6, dtype=torch.bool), r"labels must hold integer class ids .* got dtype torch.bool"),
])
def test_bad_labels(head, labels, message, training):
    with pytest.raises(ValueError, match=message):
        _call(head, training, labels=labels)


@pytest.mark.parametrize(("labels", "message"), [
    (torch.randint(3, 99, (10,)), r"labels has shape \(10,\), expected 2-D \(batch, length\)"),
    (torch.full((2, 5), -1), r"labels contains -1, outside \[0, vocab_size=99\)"),
    (torch.rand(2, 5), r"labels must hold integer class ids"),
])
def test_seq2seq_labels_without_decoder_inputs_are_checked_before_shifting(labels, message):
    model = build(HFAttentionForSeq2SeqLM, "seq2seq")
    with pytest.raises(ValueError, match=message):
        model(torch.randint(3, 99, (2, 6)), labels=labels)


def test_labels_follow_logits_to_keep():
    model = build(HFAttentionForCausalLM, "decoder")
    ids = torch.randint(3, 99, (2, 6))
    assert model(ids, labels=ids[:, -2:], logits_to_keep=2).loss is not None
    with pytest.raises(ValueError, match=r"labels has shape \(2, 6\), expected \(2, 2\)"):
        model(ids, labels=ids, logits_to_keep=2)


@pytest.mark.parametrize("fused", [True, False])
def test_loss_functions_refuse_labels_of_another_shape(fused):
    hidden = torch.randn(2, 6, 8, requires_grad=fused)
    projection = torch.nn.Linear(8, 11)
    labels = torch.randint(0, 11, (2, 7))
    with pytest.raises(ValueError, match=r"labels has shape \(2, 7\), expected \(2, 6\)"):
        linear_cross_entropy(hidden, projection, labels)
    with pytest.raises(ValueError, match=r"labels has shape \(2, 7\), expected \(2, 6\)"):
        token_cross_entropy(projection(hidden), labels)
