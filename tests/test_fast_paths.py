"""The training-time fast paths give the same numbers as the plain ones they replace.

Fused q/k/v (and k/v, gate/up) projections run only while training with gradients on at least
FUSED_PROJECTION_MIN_ROWS rows; the softmax cross-entropy replaces autograd through F.cross_entropy whenever the logits
need a gradient. Each is compared with the unfused computation on the same weights: outputs and every gradient.
"""

import copy

import pytest
import torch
from torch import nn
from transformers.activations import ACT2FN

from hf_attention.attention import FUSED_PROJECTION_MIN_ROWS, MultiHeadAttention
from hf_attention.convert import from_hf
from hf_attention.layers import GatedFeedForward, activation_function
from hf_attention.modeling_hf_attention import token_cross_entropy

ROWS = FUSED_PROJECTION_MIN_ROWS  # batch 2 × length ROWS / 2: just enough rows to take the fused path


def _grads(module: nn.Module, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in module.named_parameters()} | {
        f"input{i}": x.grad.clone() for i, x in enumerate(inputs)}


def _run(module: nn.Module, call, inputs: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, dict]:
    module.zero_grad(set_to_none=True)
    inputs = tuple(x.detach().clone().requires_grad_() for x in inputs)
    output = call(module, *inputs)
    (output * torch.linspace(-1, 1, output.shape[-1], dtype=output.dtype)).sum().backward()
    return output.detach(), _grads(module, *inputs)


def _compare_fused_and_plain(module: nn.Module, call, inputs, monkeypatch) -> None:
    module.train()
    fused_output, fused_grads = _run(module, call, inputs)
    # Raising the row threshold forces the plain path on the same inputs.
    monkeypatch.setattr("hf_attention.attention.FUSED_PROJECTION_MIN_ROWS", 10**9)
    monkeypatch.setattr("hf_attention.layers.FUSED_PROJECTION_MIN_ROWS", 10**9)
    plain_output, plain_grads = _run(module, call, inputs)
    torch.testing.assert_close(fused_output, plain_output, rtol=1e-6, atol=1e-6)
    assert fused_grads.keys() == plain_grads.keys()
    for name in fused_grads:
        torch.testing.assert_close(fused_grads[name], plain_grads[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("num_kv_heads", [4, 2])
@pytest.mark.parametrize("bias", [True, False])
def test_fused_self_attention_projection_equals_separate(num_kv_heads, bias, monkeypatch):
    torch.manual_seed(0)
    attention = MultiHeadAttention(hidden_size=32, num_heads=4, num_kv_heads=num_kv_heads, head_dim=8, bias=bias,
                                   is_causal=True)
    fused_calls = []
    original = MultiHeadAttention._project_fused
    monkeypatch.setattr(MultiHeadAttention, "_project_fused",
                        lambda self, *a: fused_calls.append(len(a[0])) or original(self, *a))
    hidden = torch.randn(2, ROWS // 2, 32)
    _compare_fused_and_plain(attention, lambda m, x: m(x)[0], (hidden,), monkeypatch)
    assert fused_calls == [3], "the training run above did not take the fused q/k/v path"


def test_fused_cross_attention_keys_values_equal_separate(monkeypatch):
    torch.manual_seed(0)
    attention = MultiHeadAttention(hidden_size=32, num_heads=4, num_kv_heads=4, head_dim=8, is_cross_attention=True)
    fused_calls = []
    original = MultiHeadAttention._project_fused
    monkeypatch.setattr(MultiHeadAttention, "_project_fused",
                        lambda self, *a: fused_calls.append(len(a[0])) or original(self, *a))
    queries, encoder = torch.randn(2, 5, 32), torch.randn(2, ROWS // 2, 32)
    _compare_fused_and_plain(attention, lambda m, q, kv: m(q, key_value_states=kv)[0], (queries, encoder),
                             monkeypatch)
    assert fused_calls == [2], "the training run above did not take the fused k/v path"


def test_projections_stay_separate_in_eval_and_without_grad(monkeypatch):
    attention = MultiHeadAttention(hidden_size=32, num_heads=4, num_kv_heads=4, head_dim=8)
    monkeypatch.setattr(MultiHeadAttention, "_project_fused", lambda *a: pytest.fail("fused path taken"))
    hidden = torch.randn(2, ROWS, 32)
    attention.eval()(hidden)
    with torch.no_grad():
        attention.train()(hidden)
    attention.train()(hidden[:, :3])  # too few rows


@pytest.mark.parametrize("bias", [True, False])
def test_fused_gate_and_up_projection_equals_separate(bias, monkeypatch):
    torch.manual_seed(0)
    mlp = GatedFeedForward(hidden_size=32, intermediate_size=64, activation="silu", bias=bias)
    _compare_fused_and_plain(mlp, lambda m, x: m(x), (torch.randn(2, ROWS // 2, 32),), monkeypatch)


def test_gelu_new_runs_the_fused_tanh_kernel_with_the_same_values():
    x = torch.linspace(-12, 12, 100_001, dtype=torch.float32)
    assert isinstance(activation_function("gelu_new"), type(ACT2FN["gelu_pytorch_tanh"]))
    torch.testing.assert_close(activation_function("gelu_new")(x), ACT2FN["gelu_new"](x), rtol=0, atol=1e-6)
    assert isinstance(activation_function("relu"), type(ACT2FN["relu"]))


def _plain_cross_entropy(logits, labels):
    flat = nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                       ignore_index=-100, reduction="sum")
    return flat / (labels != -100).sum()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_cross_entropy_equals_torch_loss_and_gradient(dtype):
    torch.manual_seed(0)
    logits = (torch.randn(3, 7, 50) * 4).to(dtype).requires_grad_()
    labels = torch.randint(0, 50, (3, 7))
    labels[0, :3] = -100
    ours = token_cross_entropy(logits, labels)
    (ours * 3.0).backward()
    our_grad, logits.grad = logits.grad, None
    theirs = _plain_cross_entropy(logits, labels)
    (theirs * 3.0).backward()
    assert our_grad.dtype == dtype and ours.dtype == torch.float32
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(our_grad.float(), logits.grad.float(), rtol=1e-5, atol=1e-7)
    assert torch.all(our_grad[0, :3] == 0)  # ignored rows get no gradient


def test_softmax_cross_entropy_with_num_items_in_batch():
    logits = torch.randn(2, 4, 10, requires_grad=True)
    labels = torch.randint(0, 10, (2, 4))
    loss = token_cross_entropy(logits, labels, torch.tensor(16))
    torch.testing.assert_close(loss, _plain_cross_entropy(logits, labels) * 8 / 16)


def test_softmax_cross_entropy_refuses_a_second_backward_and_second_order_gradients():
    logits = torch.randn(4, 10, requires_grad=True)
    labels = torch.tensor([1, 2, 3, -100])
    loss = token_cross_entropy(logits, labels)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="retain_graph=True"):
        loss.backward()
    (grad,) = torch.autograd.grad(token_cross_entropy(logits, labels), logits, create_graph=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        grad.sum().backward()


def test_softmax_cross_entropy_rejects_labels_outside_the_vocabulary():
    logits = torch.randn(3, 10, requires_grad=True)
    with pytest.raises((RuntimeError, IndexError), match="out of bounds"):
        token_cross_entropy(logits, torch.tensor([1, 10, 2]))


@pytest.mark.parametrize("family", ["gpt2", "llama", "bert", "bart", "t5"])
def test_training_step_gradients_match_the_hf_reference(family):
    """A whole training step on enough rows to take every fast path: loss and all gradients equal HF's."""
    from benchmarks.run import Plan, make_pair, training_batch

    plan = Plan(name="test", vocab=99, hidden=32, layers=2, heads=4, ffn=64)
    reference, ours = make_pair(family, plan, "cpu")
    batch = training_batch(family, plan, 2, ROWS // 2, "cpu")
    their_loss, our_loss = reference.train()(**batch).loss, ours.train()(**batch).loss
    their_loss.backward(), our_loss.backward()
    torch.testing.assert_close(our_loss, their_loss, rtol=1e-5, atol=1e-6)
    # Lay the reference's gradients out as ours: convert a copy of it whose weights are its gradients.
    gradients_as_weights = copy.deepcopy(reference)
    for copied, original in zip(gradients_as_weights.parameters(), reference.parameters(), strict=True):
        copied.data = original.grad.clone() if original.grad is not None else torch.zeros_like(original)
    expected = from_hf(gradients_as_weights).state_dict()
    # BART keeps its final_logits_bias as a buffer, which never trains; ours is a parameter (lm_head.bias).
    frozen_in_reference = {"lm_head.bias"} if family == "bart" else set()
    checked = len(frozen_in_reference)
    for name, parameter in ours.named_parameters():
        if name in frozen_in_reference:
            continue
        grad = parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)
        torch.testing.assert_close(grad, expected[name], rtol=1e-4, atol=1e-6, msg=name)
        checked += 1
    assert checked == len(list(ours.parameters()))
