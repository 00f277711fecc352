"""The training-time fast paths give the same numbers as the plain ones they replace.

Fused q/k/v (and k/v, gate/up) projections run only while training with gradients on at least
FUSED_PROJECTION_MIN_ROWS rows; the vocabulary projection and the cross-entropy run fused (losses.linear_cross_entropy)
whenever a gradient is needed. Each is compared with the unfused computation on the same weights: outputs and every
gradient.
"""

import copy

import pytest
import torch
from conftest import build
from torch import nn
from transformers.activations import ACT2FN

from hf_attention import HFAttentionForCausalLM, HFAttentionForMaskedLM, HFAttentionForSeq2SeqLM, from_hf
from hf_attention.modeling import losses, speed_paths
from hf_attention.modeling.activations import activation_function
from hf_attention.modeling.attention import MultiHeadAttention
from hf_attention.modeling.layers import GatedFeedForward
from hf_attention.modeling.norms import RMSNorm
from hf_attention.modeling.speed_paths import FUSED_PROJECTION_MIN_ROWS, fused_linear

ROWS = FUSED_PROJECTION_MIN_ROWS  # batch 2 × length ROWS / 2: just enough rows to take the fused path


def _grads(module: nn.Module, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
    return {name: p.grad.clone() for name, p in module.named_parameters()} | {
        f"input{i}": x.grad.clone() for i, x in enumerate(inputs)
    }


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
    monkeypatch.setattr("hf_attention.modeling.speed_paths.FUSED_PROJECTION_MIN_ROWS", 10**9)
    plain_output, plain_grads = _run(module, call, inputs)
    torch.testing.assert_close(fused_output, plain_output, rtol=1e-6, atol=1e-6)
    assert fused_grads.keys() == plain_grads.keys()
    for name in fused_grads:
        torch.testing.assert_close(fused_grads[name], plain_grads[name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("num_kv_heads", [4, 2])
@pytest.mark.parametrize("bias", [True, False])
def test_fused_self_attention_projection_equals_separate(num_kv_heads, bias, monkeypatch):
    torch.manual_seed(0)
    attention = MultiHeadAttention(
        hidden_size=32, num_heads=4, num_kv_heads=num_kv_heads, head_dim=8, bias=bias, is_causal=True
    )
    fused_calls = []
    original = speed_paths.project_fused
    monkeypatch.setattr(
        "hf_attention.modeling.speed_paths.project_fused",
        lambda module, *a: fused_calls.append(len(a[0])) or original(module, *a),
    )
    hidden = torch.randn(2, ROWS // 2, 32)
    _compare_fused_and_plain(attention, lambda m, x: m(x)[0], (hidden,), monkeypatch)
    assert fused_calls == [3], "the training run above did not take the fused q/k/v path"


def test_fused_cross_attention_keys_values_equal_separate(monkeypatch):
    torch.manual_seed(0)
    attention = MultiHeadAttention(hidden_size=32, num_heads=4, num_kv_heads=4, head_dim=8, is_cross_attention=True)
    fused_calls = []
    original = speed_paths.project_fused
    monkeypatch.setattr(
        "hf_attention.modeling.attention.project_fused",
        lambda module, *a: fused_calls.append(len(a[0])) or original(module, *a),
    )
    queries, encoder = torch.randn(2, 5, 32), torch.randn(2, ROWS // 2, 32)
    _compare_fused_and_plain(attention, lambda m, q, kv: m(q, key_value_states=kv)[0], (queries, encoder), monkeypatch)
    assert fused_calls == [2], "the training run above did not take the fused k/v path"


def test_projections_stay_separate_in_eval_and_without_grad(monkeypatch):
    attention = MultiHeadAttention(hidden_size=32, num_heads=4, num_kv_heads=4, head_dim=8)
    for owner in ("attention", "speed_paths"):
        monkeypatch.setattr(f"hf_attention.modeling.{owner}.project_fused", lambda *a: pytest.fail("fused path taken"))
    hidden = torch.randn(2, ROWS, 32)
    attention.eval()(hidden)
    with torch.no_grad():
        attention.train()(hidden)
    attention.train()(hidden[:, :3])  # too few rows


@pytest.mark.parametrize("bias", [True, False])
def test_fused_gate_and_up_projection_equals_separate_under_bf16_autocast(bias, monkeypatch):
    torch.manual_seed(0)
    mlp = GatedFeedForward(hidden_size=32, intermediate_size=64, activation="silu", bias=bias).train()
    hidden = torch.randn(2, ROWS // 2, 32)
    fused_calls = []
    monkeypatch.setattr(
        "hf_attention.modeling.speed_paths.fused_linear",
        lambda projections, x: fused_calls.append(len(projections)) or fused_linear(projections, x),
    )

    def call(module, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return module(x).float()

    fused_output, fused_grads = _run(mlp, call, (hidden,))
    assert fused_calls == [2], "the bf16 training run did not take the fused gate/up path"
    monkeypatch.setattr("hf_attention.modeling.speed_paths.FUSED_PROJECTION_MIN_ROWS", 10**9)
    plain_output, plain_grads = _run(mlp, call, (hidden,))
    assert fused_calls == [2]
    torch.testing.assert_close(fused_output, plain_output, rtol=1e-2, atol=1e-3)  # the same bf16 products
    for name in plain_grads:  # the fused weight gradient is one bf16 product; the plain one two, summed
        torch.testing.assert_close(fused_grads[name], plain_grads[name], rtol=2e-2, atol=1e-3, msg=name)


def test_gate_and_up_projections_stay_separate_in_fp32(monkeypatch):
    mlp = GatedFeedForward(hidden_size=32, intermediate_size=64, activation="silu").train()
    monkeypatch.setattr(
        "hf_attention.modeling.speed_paths.fused_linear", lambda *a: pytest.fail("fused gate/up in fp32")
    )
    mlp(torch.randn(2, ROWS, 32, requires_grad=True)).sum().backward()


def test_gelu_new_runs_the_fused_tanh_kernel_with_the_same_values():
    x = torch.linspace(-12, 12, 100_001, dtype=torch.float32)
    assert isinstance(activation_function("gelu_new"), type(ACT2FN["gelu_pytorch_tanh"]))
    torch.testing.assert_close(activation_function("gelu_new")(x), ACT2FN["gelu_new"](x), rtol=0, atol=1e-6)
    assert isinstance(activation_function("relu"), type(ACT2FN["relu"]))


@pytest.mark.parametrize("frozen_weight", [False, True])
def test_rms_norm_closed_form_gradient_equals_autograd_of_the_composite(frozen_weight, monkeypatch):
    torch.manual_seed(0)
    norm = RMSNorm(64, eps=1e-6)
    norm.weight.data.normal_()
    norm.weight.requires_grad_(not frozen_weight)
    calls = []
    original = speed_paths.RMSNormFunction.apply
    monkeypatch.setattr(speed_paths.RMSNormFunction, "apply", lambda *a: calls.append(1) or original(*a))
    x = (torch.randn(3, 5, 64) * 3).requires_grad_()
    upstream = torch.randn(3, 5, 64)
    ours = norm(x)
    assert calls == [1], "the closed-form path was not taken"
    (ours * upstream).sum().backward()
    reference_x = x.detach().clone().requires_grad_()
    weight = norm.weight.detach().clone().requires_grad_(not frozen_weight)
    reference = weight * nn.functional.rms_norm(reference_x, (64,), eps=1e-6)
    (reference * upstream).sum().backward()
    # The same formula forward, but torch's rms_norm is another code path than the closed form's three ops (equal bits
    # on the CPUs measured, not promised): float32 rounding of outputs of order 1; a missing gain or a wrong mean
    # moves them by far more.
    torch.testing.assert_close(ours, reference, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(x.grad, reference_x.grad, rtol=1e-5, atol=1e-6)
    if frozen_weight:
        assert norm.weight.grad is None
    else:
        torch.testing.assert_close(norm.weight.grad, weight.grad, rtol=1e-5, atol=1e-5)


def test_rms_norm_keeps_the_composite_path_without_grad_and_in_16_bit(monkeypatch):
    monkeypatch.setattr(speed_paths.RMSNormFunction, "apply", lambda *a: pytest.fail("closed-form path taken"))
    norm, x = RMSNorm(8), torch.randn(2, 8, requires_grad=True)
    with torch.no_grad():
        norm(x)
    norm.to(torch.bfloat16)(x.detach().bfloat16().requires_grad_())


def _plain_loss(hidden, head, labels, num_items=None):
    """The reference: the projection, then F.cross_entropy in fp32 over the labelled rows."""
    logits = head(hidden)
    summed = nn.functional.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100, reduction="sum"
    )
    return logits, summed / ((labels != -100).sum() if num_items is None else num_items)


def _labels(pattern: str, shape: tuple[int, int], vocab: int) -> torch.Tensor:
    labels = torch.randint(0, vocab, shape)
    if pattern == "shifted":  # causal LM: the last position of each row has no next token
        labels[:, -1] = -100
    elif pattern == "sparse":  # masked LM: about 15% of the positions carry a label
        labels[torch.rand(shape) > 0.15] = -100
    elif pattern == "none":
        labels[:] = -100
    return labels


def _loss_and_grads(loss_function, hidden, head, labels, extra_use_of_logits: bool):
    head.zero_grad(set_to_none=True)
    hidden = hidden.detach().clone().requires_grad_()
    logits, loss = loss_function(hidden, head, labels)
    total = loss * 3.0
    if extra_use_of_logits:  # e.g. a distillation term on the returned logits
        total = total + (logits.float() * torch.linspace(-1, 1, logits.shape[-1])).sum() * 1e-3
    total.backward()
    grads = {"hidden": hidden.grad, "weight": head.weight.grad}
    if head.bias is not None:
        grads["bias"] = head.bias.grad
    return logits.detach(), loss.detach(), grads


@pytest.mark.parametrize("pattern", ["all", "shifted", "sparse", "none"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("extra_use_of_logits", [False, True])
def test_fused_linear_cross_entropy_equals_projection_then_loss(pattern, bias, extra_use_of_logits, monkeypatch):
    monkeypatch.setattr(losses, "CHUNK_ROWS", 8)  # several chunks, the last one partial
    torch.manual_seed(0)
    head = nn.Linear(16, 50, bias=bias)
    hidden = torch.randn(3, 9, 16) * 2
    labels = _labels(pattern, (3, 9), 50)
    fused_calls = []
    original = losses._LinearCrossEntropy.apply
    monkeypatch.setattr(losses._LinearCrossEntropy, "apply", lambda *a: fused_calls.append(1) or original(*a))
    ours = _loss_and_grads(losses.linear_cross_entropy, hidden, head, labels, extra_use_of_logits)
    assert fused_calls == [1], "the fused path was not taken"
    theirs = _loss_and_grads(_plain_loss, hidden, head, labels, extra_use_of_logits)
    torch.testing.assert_close(ours[0], theirs[0], rtol=1e-6, atol=1e-6)  # logits
    if pattern == "none":  # 0 / 0, as F.cross_entropy gives
        assert ours[1].isnan() and theirs[1].isnan()
        return
    torch.testing.assert_close(ours[1], theirs[1], rtol=1e-6, atol=1e-6)  # loss
    for name in theirs[2]:
        torch.testing.assert_close(ours[2][name], theirs[2][name], rtol=1e-5, atol=1e-7, msg=name)


@pytest.mark.parametrize("bias", [True, False])
def test_fused_linear_cross_entropy_under_bf16_autocast(bias, monkeypatch):
    monkeypatch.setattr(losses, "CHUNK_ROWS", 8)
    torch.manual_seed(0)
    head = nn.Linear(16, 50, bias=bias)
    hidden, labels = torch.randn(2, 9, 16), _labels("shifted", (2, 9), 50)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = _loss_and_grads(losses.linear_cross_entropy, hidden, head, labels, False)
        theirs = _loss_and_grads(_plain_loss, hidden, head, labels, False)
    assert ours[0].dtype == theirs[0].dtype == torch.bfloat16
    assert ours[1].dtype == theirs[1].dtype == torch.float32
    assert all(ours[2][name].dtype == theirs[2][name].dtype for name in theirs[2])  # fp32 parameters, fp32 grads
    torch.testing.assert_close(ours[0], theirs[0])
    torch.testing.assert_close(ours[1], theirs[1], rtol=1e-5, atol=1e-5)
    for name in theirs[2]:  # bf16 resolution (2^-7): the plain path rounds dW once, ours sums chunks' products in fp32
        torch.testing.assert_close(ours[2][name], theirs[2][name], rtol=2e-2, atol=1e-2, msg=name)


@pytest.mark.parametrize("frozen", ["head", "hidden"])
def test_fused_linear_cross_entropy_computes_only_the_gradients_asked_for(frozen, monkeypatch):
    torch.manual_seed(0)
    head, labels = nn.Linear(16, 50), _labels("shifted", (2, 9), 50)
    hidden = torch.randn(2, 9, 16, requires_grad=frozen == "head")
    head.requires_grad_(frozen == "hidden")  # a frozen vocabulary projection, as under LoRA
    matmuls = []

    def counted(function):
        return lambda *args, **kwargs: matmuls.append(1) or function(*args, **kwargs)

    monkeypatch.setattr(torch, "mm", counted(torch.mm))
    monkeypatch.setattr(torch, "addmm", counted(torch.addmm))
    logits, loss = losses.linear_cross_entropy(hidden, head, labels)
    monkeypatch.undo()
    assert len(matmuls) == 2  # the logits and one gradient product, not three
    loss.backward()
    reference_hidden = hidden.detach().requires_grad_(frozen == "head")
    _, expected = _plain_loss(reference_hidden, head, labels)
    if frozen == "head":
        assert head.weight.grad is None and head.bias.grad is None
        (expected_grad,) = torch.autograd.grad(expected, reference_hidden)
        torch.testing.assert_close(hidden.grad, expected_grad, rtol=1e-5, atol=1e-7)
    else:
        grads = torch.autograd.grad(expected, [head.weight, head.bias])
        torch.testing.assert_close(head.weight.grad, grads[0], rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(head.bias.grad, grads[1], rtol=1e-5, atol=1e-7)


def test_fused_linear_cross_entropy_when_the_target_probability_underflows(monkeypatch):
    """Targets far below the best logit: softmax gives p[y] = 0 there, yet the loss must stay finite and exact."""
    monkeypatch.setattr(losses, "CHUNK_ROWS", 4)
    torch.manual_seed(0)
    head = nn.Linear(8, 20)
    hidden = torch.randn(10, 8) * 100
    labels = head(hidden).argmin(-1)  # the least likely token of every row
    labels[3] = -100
    ours = _loss_and_grads(losses.linear_cross_entropy, hidden, head, labels, False)
    theirs = _loss_and_grads(_plain_loss, hidden, head, labels, False)
    assert theirs[1] > 150  # the case is real: exp(-150) is below float32's smallest normal number
    torch.testing.assert_close(ours[1], theirs[1], rtol=1e-6, atol=1e-5)
    for name in theirs[2]:
        # The weight's gradient sums terms of |hidden| ~ 100: its float rounding, in whichever order a CPU's kernels
        # add them (one thread or two), is ~1e-5 absolute, also on entries near 0; tolerances relative to its scale.
        scale = max(1.0, theirs[2][name].abs().max().item())
        torch.testing.assert_close(ours[2][name], theirs[2][name], rtol=1e-5, atol=1e-6 * scale, msg=name)


def test_fused_linear_cross_entropy_with_num_items_in_batch():
    head, hidden, labels = nn.Linear(8, 10), torch.randn(2, 4, 8, requires_grad=True), torch.randint(0, 10, (2, 4))
    _, loss = losses.linear_cross_entropy(hidden, head, labels, torch.tensor(16))
    torch.testing.assert_close(loss, _plain_loss(hidden, head, labels, 16)[1])


def test_fused_linear_cross_entropy_backward_twice_and_refuses_second_order():
    head, hidden, labels = nn.Linear(8, 10), torch.randn(4, 8, requires_grad=True), torch.tensor([1, 2, 3, -100])
    _, loss = losses.linear_cross_entropy(hidden, head, labels)
    loss.backward(retain_graph=True)
    first = head.weight.grad.clone()
    loss.backward()  # the precomputed gradients are kept, not consumed
    torch.testing.assert_close(head.weight.grad, 2 * first)
    _, loss = losses.linear_cross_entropy(hidden, head, labels)
    (grad,) = torch.autograd.grad(loss, hidden, create_graph=True)
    with pytest.raises(RuntimeError, match="does not require grad"):
        grad.sum().backward()


def test_fused_linear_cross_entropy_rejects_labels_outside_the_vocabulary():
    head, hidden = nn.Linear(8, 10), torch.randn(3, 8, requires_grad=True)
    with pytest.raises((RuntimeError, IndexError), match="out of bounds"):
        losses.linear_cross_entropy(hidden, head, torch.tensor([1, 10, 2]))


class _AdaptedLinear(nn.Linear):
    """Stands for an adapter (e.g. LoRA) that changes what the projection computes."""

    def forward(self, x):
        return super().forward(x) + 1.0


@pytest.mark.parametrize("case", ["no_grad", "forward_hook", "subclass", "compiling"])
def test_linear_cross_entropy_runs_the_projection_whenever_something_intercepts_it(case, monkeypatch):
    monkeypatch.setattr(losses._LinearCrossEntropy, "apply", lambda *a: pytest.fail("fused path taken"))
    head = (_AdaptedLinear if case == "subclass" else nn.Linear)(8, 10)
    hidden, labels = torch.randn(2, 3, 8, requires_grad=True), torch.randint(0, 10, (2, 3))
    if case == "forward_hook":
        head.register_forward_hook(lambda module, args, output: output * 2)
    if case == "compiling":
        monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    with torch.set_grad_enabled(case != "no_grad"):
        logits, loss = losses.linear_cross_entropy(hidden, head, labels)
    expected_logits, expected_loss = _plain_loss(hidden, head, labels)
    torch.testing.assert_close(logits, expected_logits)
    torch.testing.assert_close(loss, expected_loss)


def test_token_cross_entropy_of_the_classification_heads():
    logits, labels = torch.randn(2, 4, 10), torch.tensor([[1, 2, -100, 3], [4, -100, -100, 5]])
    expected = nn.functional.cross_entropy(logits.reshape(-1, 10), labels.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(losses.token_cross_entropy(logits, labels), expected)
    torch.testing.assert_close(losses.token_cross_entropy(logits, labels, 10), expected * 5 / 10)


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
    checked = 0
    for name, parameter in ours.named_parameters():
        if family == "bart" and name == "lm_head.bias":  # HF's final_logits_bias is a buffer: never trained
            assert not parameter.requires_grad and parameter.grad is None
        else:
            grad = parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)
            torch.testing.assert_close(grad, expected[name], rtol=1e-4, atol=1e-6, msg=name)
        checked += 1
    assert checked == len(list(ours.parameters()))


@pytest.mark.parametrize("family", ["encoder", "decoder", "seq2seq"])
def test_the_loss_is_fused_in_training_and_a_function_of_the_logits_in_eval(family, monkeypatch):
    """The contract of the language-model heads: in training mode the vocabulary projection and the loss run fused
    (the loss is computed beside the returned logits); in eval mode the loss is computed from the returned logits, so
    its gradient with respect to them is softmax − onehot over the labelled tokens, as for any HF model."""
    head = {"encoder": HFAttentionForMaskedLM, "decoder": HFAttentionForCausalLM, "seq2seq": HFAttentionForSeq2SeqLM}
    fused_calls = []
    original = losses._LinearCrossEntropy.apply
    monkeypatch.setattr(losses._LinearCrossEntropy, "apply", lambda *a: fused_calls.append(1) or original(*a))
    model = build(head[family], family)
    ids = torch.randint(3, 99, (2, ROWS // 2))
    labels = ids.clone()
    labels[:, ::3] = -100
    inputs = {"input_ids": ids, "labels": labels}
    model.train()(**inputs).loss.backward()
    assert fused_calls == [1]
    output = model.eval()(**inputs)
    assert fused_calls == [1]
    (gradient,) = torch.autograd.grad(output.loss, output.logits)
    shift = family == "decoder"  # a causal LM scores position t against token t + 1
    scored_logits = output.logits[:, :-1] if shift else output.logits
    targets = labels[:, 1:] if shift else labels
    expected = torch.softmax(scored_logits.detach(), -1) - nn.functional.one_hot(targets.clamp(min=0), 99)
    expected = expected * (targets != -100)[..., None] / (targets != -100).sum()
    torch.testing.assert_close(gradient[:, :-1] if shift else gradient, expected, rtol=1e-4, atol=1e-6)
