"""Label smoothing as a loss option of the models (`config.label_smoothing`).

The token losses, plain and fused with the vocabulary projection, give exactly
`F.cross_entropy(label_smoothing=ε, ignore_index=-100, reduction="sum")` divided by the labelled tokens (or by
`num_items_in_batch`), values and gradients; ε = 0 is bit-identical to the loss without the option. Every model with a
token loss reads ε from its config, so our training loop and the HF Trainer both get it from there.
"""

import pytest
import torch
from conftest import tiny_config
from datasets import Dataset
from torch import nn
from transformers import AutoConfig, Trainer, TrainingArguments

from hf_attention import (
    HFAttentionForCausalLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionForTokenClassification,
    HFAttentionRecurrentConfig,
    HFAttentionRecurrentForSeq2SeqLM,
    losses,
)

F = nn.functional


def _labels(shape: tuple[int, ...], vocab: int, pattern: str) -> torch.Tensor:
    labels = torch.randint(0, vocab, shape)
    if pattern == "shifted":  # some positions unlabelled (a causal LM's last one, padding)
        labels[..., -1] = -100
        labels.view(-1)[::5] = -100
    elif pattern == "sparse":  # masked LM: few labelled rows (the fused path's gather-the-rows branch)
        labels[torch.rand(shape) > 0.15] = -100
    return labels


def _expected(logits: torch.Tensor, labels: torch.Tensor, eps: float, num_items=None) -> torch.Tensor:
    """PyTorch's label-smoothed cross-entropy summed over labelled rows, over their count or `num_items`."""
    summed = F.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]),
        labels.reshape(-1),
        ignore_index=-100,
        reduction="sum",
        label_smoothing=eps,
    )
    return summed / ((labels != -100).sum() if num_items is None else num_items)


def _plain(hidden, head, labels, eps, num_items=None):
    logits = head(hidden)
    return logits, _expected(logits, labels, eps, num_items)


def _loss_and_grads(loss_function, hidden, head, labels, extra_use_of_logits=False):
    head.zero_grad(set_to_none=True)
    hidden = hidden.detach().clone().requires_grad_()
    logits, loss = loss_function(hidden, head, labels)
    total = loss * 3.0
    if extra_use_of_logits:  # the returned logits also feed another term
        total = total + (logits.float() * torch.linspace(-1, 1, logits.shape[-1])).sum() * 1e-3
    total.backward()
    grads = {"hidden": hidden.grad, "weight": head.weight.grad}
    if head.bias is not None:
        grads["bias"] = head.bias.grad
    return logits.detach(), loss.detach(), grads


def _count_fused_calls(monkeypatch) -> list:
    calls = []
    original = losses._LinearCrossEntropy.apply
    monkeypatch.setattr(losses._LinearCrossEntropy, "apply", lambda *a: calls.append(1) or original(*a))
    return calls


# ---------------------------------------------------------------------------------------------------------------------
# The loss functions


@pytest.mark.parametrize("eps", [0.1, 0.5])
def test_token_cross_entropy_is_pytorchs_label_smoothed_loss(eps):
    logits, labels = torch.randn(3, 5, 11), _labels((3, 5), 11, "shifted")
    torch.testing.assert_close(
        losses.token_cross_entropy(logits, labels, label_smoothing=eps), _expected(logits, labels, eps)
    )
    torch.testing.assert_close(
        losses.token_cross_entropy(logits, labels, torch.tensor(40), label_smoothing=eps),
        _expected(logits, labels, eps, 40),
    )
    assert not torch.allclose(
        losses.token_cross_entropy(logits, labels, label_smoothing=eps), _expected(logits, labels, 0)
    )


@pytest.mark.parametrize("eps", [0.1, 0.4])
@pytest.mark.parametrize("pattern", ["shifted", "sparse", "all"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("extra_use_of_logits", [False, True])
def test_fused_linear_cross_entropy_with_label_smoothing_equals_projection_then_loss(
    eps, pattern, bias, extra_use_of_logits, monkeypatch
):
    monkeypatch.setattr(losses, "CHUNK_ROWS", 8)  # several chunks, the last one partial
    torch.manual_seed(0)
    head = nn.Linear(16, 50, bias=bias)
    hidden, labels = torch.randn(3, 9, 16) * 2, _labels((3, 9), 50, pattern)
    fused_calls = _count_fused_calls(monkeypatch)
    ours = _loss_and_grads(
        lambda h, w, y: losses.linear_cross_entropy(h, w, y, label_smoothing=eps),
        hidden,
        head,
        labels,
        extra_use_of_logits,
    )
    assert fused_calls == [1], "the fused path was not taken"
    theirs = _loss_and_grads(lambda h, w, y: _plain(h, w, y, eps), hidden, head, labels, extra_use_of_logits)
    torch.testing.assert_close(ours[0], theirs[0], rtol=1e-6, atol=1e-6)  # logits
    torch.testing.assert_close(ours[1], theirs[1], rtol=1e-5, atol=1e-5)  # loss
    assert ours[2].keys() == theirs[2].keys()
    for name in theirs[2]:
        torch.testing.assert_close(ours[2][name], theirs[2][name], rtol=1e-5, atol=1e-6, msg=name)


def test_fused_linear_cross_entropy_with_label_smoothing_when_the_target_probability_underflows(monkeypatch):
    """p[y] = 0 in fp32 for every row: the smoothed loss stays finite and exact."""
    monkeypatch.setattr(losses, "CHUNK_ROWS", 4)
    torch.manual_seed(0)
    head = nn.Linear(8, 20)
    hidden = torch.randn(10, 8) * 100
    labels = head(hidden).argmin(-1)
    labels[3] = -100
    ours = _loss_and_grads(
        lambda h, w, y: losses.linear_cross_entropy(h, w, y, label_smoothing=0.2), hidden, head, labels
    )
    theirs = _loss_and_grads(lambda h, w, y: _plain(h, w, y, 0.2), hidden, head, labels)
    assert theirs[1] > 100
    torch.testing.assert_close(ours[1], theirs[1], rtol=1e-6, atol=1e-5)
    for name in theirs[2]:
        torch.testing.assert_close(ours[2][name], theirs[2][name], rtol=1e-5, atol=1e-6, msg=name)


@pytest.mark.parametrize("bias", [True, False])
def test_fused_linear_cross_entropy_with_label_smoothing_under_bf16_autocast(bias, monkeypatch):
    monkeypatch.setattr(losses, "CHUNK_ROWS", 8)
    torch.manual_seed(0)
    head = nn.Linear(16, 50, bias=bias)
    hidden, labels = torch.randn(2, 9, 16), _labels((2, 9), 50, "shifted")
    fused_calls = _count_fused_calls(monkeypatch)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = _loss_and_grads(
            lambda h, w, y: losses.linear_cross_entropy(h, w, y, label_smoothing=0.1), hidden, head, labels
        )
        theirs = _loss_and_grads(lambda h, w, y: _plain(h, w, y, 0.1), hidden, head, labels)
    assert fused_calls == [1]
    assert ours[0].dtype == theirs[0].dtype == torch.bfloat16 and ours[1].dtype == torch.float32
    torch.testing.assert_close(ours[0], theirs[0])
    torch.testing.assert_close(ours[1], theirs[1], rtol=1e-5, atol=1e-5)
    for name in theirs[2]:  # bf16 resolution (2^-7), as in test_fast_paths
        torch.testing.assert_close(ours[2][name], theirs[2][name], rtol=2e-2, atol=1e-2, msg=name)


def test_fused_linear_cross_entropy_with_label_smoothing_and_num_items_in_batch(monkeypatch):
    torch.manual_seed(0)
    head, hidden, labels = nn.Linear(8, 10), torch.randn(2, 4, 8, requires_grad=True), _labels((2, 4), 10, "shifted")
    fused_calls = _count_fused_calls(monkeypatch)
    _, loss = losses.linear_cross_entropy(hidden, head, labels, torch.tensor(16), label_smoothing=0.1)
    assert fused_calls == [1]
    torch.testing.assert_close(loss, _plain(hidden, head, labels, 0.1, 16)[1])
    # Without a gradient the projection and token_cross_entropy run: the same number.
    with torch.no_grad():
        _, unfused = losses.linear_cross_entropy(hidden, head, labels, 16, label_smoothing=0.1)
    assert fused_calls == [1]
    torch.testing.assert_close(unfused, loss)


@pytest.mark.parametrize("pattern", ["shifted", "sparse"])
@pytest.mark.parametrize("bias", [True, False])
def test_zero_label_smoothing_is_bit_identical_to_the_loss_without_it(pattern, bias, monkeypatch):
    monkeypatch.setattr(losses, "CHUNK_ROWS", 8)
    torch.manual_seed(0)
    logits, labels = torch.randn(3, 9, 50), _labels((3, 9), 50, pattern)
    assert torch.equal(
        losses.token_cross_entropy(logits, labels, label_smoothing=0.0), losses.token_cross_entropy(logits, labels)
    )
    assert torch.equal(
        losses.token_cross_entropy(logits, labels, 7, 0.0), losses.token_cross_entropy(logits, labels, 7)
    )
    head, hidden = nn.Linear(16, 50, bias=bias), torch.randn(3, 9, 16)
    fused_calls = _count_fused_calls(monkeypatch)
    before = _loss_and_grads(losses.linear_cross_entropy, hidden, head, labels)
    after = _loss_and_grads(
        lambda h, w, y: losses.linear_cross_entropy(h, w, y, label_smoothing=0.0), hidden, head, labels
    )
    assert fused_calls == [1, 1]
    assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1])
    assert all(torch.equal(before[2][name], after[2][name]) for name in before[2])


# ---------------------------------------------------------------------------------------------------------------------
# The models read ε from their config

EPS = 0.1
VOCAB = 99  # conftest's tiny configs


def _recurrent(**overrides) -> HFAttentionRecurrentForSeq2SeqLM:
    fields = {"vocab_size": VOCAB, "hidden_size": 16, "encoder_layers": 1, "decoder_layers": 1, "dropout": 0.0}
    return HFAttentionRecurrentForSeq2SeqLM(HFAttentionRecurrentConfig(**{**fields, **overrides}))


def _model(kind: str, eps: float = EPS):
    # Initialised wider than the default 0.02, so that the predictions are not near-uniform, where smoothing would
    # change the loss by little more than float rounding.
    fields = {"label_smoothing": eps, "initializer_range": 0.2}
    if kind == "seq2seq":
        return HFAttentionForSeq2SeqLM(tiny_config("seq2seq", **fields))
    if kind == "decoder":
        return HFAttentionForCausalLM(tiny_config("decoder", **fields))
    if kind == "token_classification":
        return HFAttentionForTokenClassification(tiny_config("encoder", num_labels=5, **fields))
    return _recurrent(label_smoothing=eps, initializer_range=0.5)


def _inputs(kind: str) -> tuple[dict, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    source = torch.randint(3, VOCAB, (2, 7), generator=generator)
    mask = torch.ones_like(source)
    mask[1, 5:] = 0
    vocab = 5 if kind == "token_classification" else VOCAB
    labels = torch.randint(3, vocab, (2, 7 if kind in ("decoder", "token_classification") else 6), generator=generator)
    labels[1, -2:] = -100
    return {"input_ids": source, "attention_mask": mask}, labels


def _expected_model_loss(kind: str, logits: torch.Tensor, labels: torch.Tensor, eps: float) -> torch.Tensor:
    if kind == "decoder":  # the logits at position t predict token t+1
        return _expected(logits[:, :-1], labels[:, 1:], eps)
    return _expected(logits, labels, eps)


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("kind", ["seq2seq", "decoder", "recurrent", "token_classification"])
def test_model_loss_is_the_label_smoothed_cross_entropy_of_its_logits(kind, mode, monkeypatch):
    torch.manual_seed(0)
    model = _model(kind).train(mode == "train")
    inputs, labels = _inputs(kind)
    fused_calls = _count_fused_calls(monkeypatch)
    with torch.set_grad_enabled(mode == "train"):  # eval as evaluation runs it: no gradient, no fused path
        output = model(**inputs, labels=labels)
    uses_lm_head = kind in ("seq2seq", "decoder")
    assert fused_calls == ([1] if uses_lm_head and mode == "train" else [])
    expected = _expected_model_loss(kind, output.logits, labels, EPS)
    torch.testing.assert_close(output.loss, expected, rtol=1e-5, atol=1e-6)
    assert (output.loss - _expected_model_loss(kind, output.logits, labels, 0.0)).abs() > 5e-3  # smoothing shows
    if mode == "train":  # the gradients too: those of F.cross_entropy(label_smoothing) on logits computed unlabelled
        parameters = [p for p in model.parameters() if p.requires_grad]
        ours = torch.autograd.grad(output.loss, parameters, allow_unused=True)
        if kind in ("seq2seq", "recurrent"):  # the encoder-decoders build their decoder inputs from the labels
            inputs = {**inputs, "decoder_input_ids": model.prepare_decoder_input_ids_from_labels(labels)}
        logits = model(**inputs).logits
        theirs = torch.autograd.grad(_expected_model_loss(kind, logits, labels, EPS), parameters, allow_unused=True)
        for p, a, b in zip(parameters, ours, theirs, strict=True):
            if a is None or b is None:
                assert a is None and b is None
                continue
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=lambda m, p=p: f"{tuple(p.shape)}: {m}")


@pytest.mark.parametrize("kind", ["seq2seq", "decoder", "recurrent"])
def test_model_with_zero_label_smoothing_gives_the_plain_loss(kind):
    model = _model(kind, 0.0).eval()
    inputs, labels = _inputs(kind)
    output = model(**inputs, labels=labels)
    torch.testing.assert_close(output.loss, _expected_model_loss(kind, output.logits, labels, 0.0))


def test_trainer_gets_the_label_smoothed_loss_from_the_config(tmp_path):
    """Trainer (label_smoothing_factor 0) computes the model's own loss: the smoothed one. It equals what the
    Trainer's own smoother gives on a model without the option, so setting both would smooth twice."""
    torch.manual_seed(0)
    model = _model("seq2seq")
    inputs, labels = _inputs("seq2seq")
    batch = {**inputs, "labels": labels}
    common = {"output_dir": str(tmp_path), "use_cpu": True, "report_to": "none", "save_strategy": "no"}
    trainer = Trainer(model=model, args=TrainingArguments(**common))
    assert trainer.label_smoother is None
    model.train()
    loss = trainer.compute_loss(model, dict(batch))
    logits = model(**inputs, decoder_input_ids=model.prepare_decoder_input_ids_from_labels(labels)).logits
    torch.testing.assert_close(loss, _expected(logits, labels, EPS), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(
        trainer.compute_loss(model, dict(batch), num_items_in_batch=torch.tensor(20)),
        _expected(logits, labels, EPS, 20),
        rtol=1e-5,
        atol=1e-6,
    )
    # The same number from the Trainer's label_smoothing_factor on the same weights without the config option (the
    # Trainer then calls the model without labels: the decoder inputs come from the collator, as DataCollatorForSeq2Seq
    # makes them).
    model.config.label_smoothing = 0.0
    args = TrainingArguments(**common, label_smoothing_factor=EPS)
    decoder_inputs = model.prepare_decoder_input_ids_from_labels(labels)
    smoothed_by_trainer = Trainer(model=model, args=args).compute_loss(
        model, {**batch, "decoder_input_ids": decoder_inputs}
    )
    torch.testing.assert_close(smoothed_by_trainer, loss, rtol=1e-5, atol=1e-6)


def test_one_trainer_step_logs_the_label_smoothed_loss(tmp_path):
    torch.manual_seed(0)
    model = _model("seq2seq")
    inputs, labels = _inputs("seq2seq")
    with torch.no_grad():  # the weights before the step
        output = model(**inputs, labels=labels)
    expected, plain = output.loss.item(), _expected(output.logits, labels, 0.0).item()
    assert abs(expected - plain) > 5e-3
    rows = Dataset.from_dict({**{k: v.tolist() for k, v in inputs.items()}, "labels": labels.tolist()})
    args = TrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=2,
        max_steps=1,
        logging_steps=1,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=rows)
    trainer.train()
    logged = next(row["loss"] for row in trainer.state.log_history if "loss" in row)
    assert logged == pytest.approx(expected, rel=1e-6, abs=1e-6)


# ---------------------------------------------------------------------------------------------------------------------
# The config field

CONFIGS = {
    "encoder": lambda **fields: tiny_config("encoder", **fields),
    "decoder": lambda **fields: tiny_config("decoder", **fields),
    "seq2seq": lambda **fields: tiny_config("seq2seq", **fields),
    "recurrent": lambda **fields: HFAttentionRecurrentConfig(vocab_size=VOCAB, hidden_size=16, **fields),
}


@pytest.mark.parametrize("family", CONFIGS)
def test_every_config_has_label_smoothing_defaulting_to_zero(family):
    assert CONFIGS[family]().label_smoothing == 0.0
    assert CONFIGS[family](label_smoothing=0.2).label_smoothing == 0.2


@pytest.mark.parametrize("family", CONFIGS)
@pytest.mark.parametrize("value", [-0.1, 1.0, 1.5, "0.1", True, None, float("nan")])
def test_label_smoothing_outside_zero_to_one_is_refused(family, value):
    message = rf"label_smoothing={value!r} must be a probability: a number in \[0, 1\)"
    with pytest.raises(ValueError, match=message):
        CONFIGS[family](label_smoothing=value)
    config = CONFIGS[family]()
    with pytest.raises(ValueError, match=message):  # on assignment too
        config.label_smoothing = value
    assert config.label_smoothing == 0.0


@pytest.mark.parametrize("kind", ["seq2seq", "recurrent"])
def test_label_smoothing_survives_save_and_load(kind, tmp_path):
    model = _model(kind, 0.25).eval()
    model.save_pretrained(tmp_path)
    assert AutoConfig.from_pretrained(tmp_path).label_smoothing == 0.25
    loaded = type(model).from_pretrained(tmp_path).eval()
    assert loaded.config.label_smoothing == 0.25
    inputs, labels = _inputs(kind)
    torch.testing.assert_close(loaded(**inputs, labels=labels).loss, model(**inputs, labels=labels).loss)
