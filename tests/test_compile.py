"""torch.compile with fullgraph=True over every family: the training step and the decoding step compile into one
graph each (no graph break from our code) on every torch of the declared range, and give the eager results.

CI runs this file on the newest torch and on the floor (`.ci/lowest-releases`): Dynamo's coverage of Python differs
between releases (torch 2.11 cannot trace a set operation on `dict.keys()`, for one), so code that compiles on one
release can break on another.
"""

import pytest
import torch
from conftest import build, left_pad, right_pad

from hf_attention import HFAttentionForCausalLM, HFAttentionForMaskedLM, HFAttentionForSeq2SeqLM
from hf_attention.runtime.compiled_generation import compiled_generate

pytestmark = pytest.mark.slow  # compiling takes most of these tests' time

ROWS = [[5, 17, 33, 8, 61, 12], [7, 21, 3], [90, 4, 52, 11]]
# The two decoder shapes users train most: GPT-2's and Llama's.
DECODERS = {
    "gpt2": {"position_encoding": "learned", "norm_position": "pre", "hidden_act": "gelu_new"},
    "llama": {
        "position_encoding": "rotary",
        "norm_position": "pre",
        "norm_type": "rmsnorm",
        "hidden_act": "swiglu",
        "attention_bias": False,
        "mlp_bias": False,
    },
}


def eager_and_compiled_step(model, batch):
    """Loss and gradients of one forward + backward, eager and through torch.compile(fullgraph=True)."""

    def step(forward):
        model.zero_grad(set_to_none=True)
        loss = forward(**batch).loss
        loss.backward()
        return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    torch._dynamo.reset()
    eager = step(model)
    compiled = step(torch.compile(model, fullgraph=True, backend="aot_eager"))
    return eager, compiled


def assert_same_step(eager, compiled):
    (eager_loss, eager_grads), (compiled_loss, compiled_grads) = eager, compiled
    torch.testing.assert_close(compiled_loss, eager_loss, rtol=1e-5, atol=1e-6)
    assert compiled_grads.keys() == eager_grads.keys()
    for name, grad in eager_grads.items():
        torch.testing.assert_close(compiled_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("shape", DECODERS)
def test_decoder_training_step_compiles_fullgraph(shape):
    model = build(HFAttentionForCausalLM, "decoder", **DECODERS[shape]).train()
    ids, mask = right_pad(ROWS)
    labels = ids.masked_fill(mask == 0, -100)
    assert_same_step(*eager_and_compiled_step(model, {"input_ids": ids, "attention_mask": mask, "labels": labels}))


def test_encoder_training_step_compiles_fullgraph():
    model = build(HFAttentionForMaskedLM, "encoder").train()
    ids, mask = right_pad(ROWS)
    labels = torch.full_like(ids, -100)
    labels[:, 1] = ids[:, 1]
    assert_same_step(*eager_and_compiled_step(model, {"input_ids": ids, "attention_mask": mask, "labels": labels}))


def test_seq2seq_training_step_compiles_fullgraph():
    model = build(HFAttentionForSeq2SeqLM, "seq2seq").train()
    ids, mask = right_pad(ROWS)
    labels = torch.tensor([[4, 9, 2], [6, 2, -100], [8, 8, 2]])
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    assert_same_step(*eager_and_compiled_step(model, batch))


@pytest.mark.parametrize("family", ["decoder", "seq2seq"])
def test_compiled_generate_fullgraph_equals_eager(family):
    """The static-cache decoding step compiles with fullgraph=True (compiled_generate's default) and gives generate()'s
    tokens. (transformers' beam search calls the model uncompiled, so greedy search is what compiles.)"""
    torch._dynamo.reset()
    if family == "decoder":
        model = build(HFAttentionForCausalLM, "decoder", **DECODERS["llama"])
        ids, mask = left_pad(ROWS)
    else:
        model = build(HFAttentionForSeq2SeqLM, "seq2seq")
        ids, mask = right_pad(ROWS)
    options = {"attention_mask": mask, "max_new_tokens": 5, "eos_token_id": None}
    expected = model.generate(ids, **options)
    assert torch.equal(compiled_generate(model, ids, **options), expected)
    assert hasattr(model, "_compiled_call"), "generate() did not compile the decoding step"
