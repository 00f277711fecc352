"""Token-level unlikelihood of repeating as a loss option of the models (`config.unlikelihood_weight`).

`losses.repeat_unlikelihood` is checked against a loop written from its definition (Welleck et al. 2020, candidates
the one or two previous targets that differ from the target); the language-model heads add α times it to their
cross-entropy, in training (fused projection) and evaluation alike, with the gradients of the same sum computed by
autograd; training.train's loss gives a Hugging Face model (BART; GPT-2, whose own loss ignores it) the same term,
never a masked LM; 0 leaves the loss bit-identical.
"""

import math

import pytest
import torch
from conftest import tiny_config
from transformers import AutoConfig, AutoModelForSeq2SeqLM

from hf_attention import HFAttentionForCausalLM, HFAttentionForSeq2SeqLM, losses

VOCAB = 40


def _reference(logits: torch.Tensor, labels: torch.Tensor, window: int = 2) -> torch.Tensor:
    """Σ −log(1 − p[c]) over each labelled position's distinct earlier targets c (≤ window back) other than y_t."""
    probabilities = logits.double().softmax(-1)
    total = torch.zeros((), dtype=torch.float64)
    for row in range(labels.shape[0]):
        for t in range(labels.shape[1]):
            target = int(labels[row, t])
            if target == -100:
                continue
            candidates = {int(labels[row, t - k]) for k in range(1, window + 1) if t - k >= 0}
            for candidate in candidates - {-100, target}:
                total = total - math.log1p(-float(probabilities[row, t, candidate]))
    return total / (labels != -100).sum()


def test_repeat_unlikelihood_is_its_definition():
    torch.manual_seed(0)
    logits = torch.randn(3, 6, VOCAB) * 3
    labels = torch.tensor(
        [
            [5, 5, 7, 5, 7, -100],  # a repeat in the reference is not penalised; 7 two back is
            [1, 2, 3, 4, 5, 6],
            [-100, 9, 9, 9, 8, -100],  # unlabelled positions are neither scored nor candidates
        ]
    )
    value = losses.repeat_unlikelihood(logits, labels)
    torch.testing.assert_close(value.double(), _reference(logits, labels), rtol=1e-5, atol=1e-7)
    assert losses.repeat_unlikelihood(logits, labels, window=1) < value  # fewer candidates, smaller sum
    # Divided like the cross-entropy: by the labelled count, or by num_items_in_batch when given.
    torch.testing.assert_close(
        losses.repeat_unlikelihood(logits, labels, torch.tensor(30)) * 30, value * (labels != -100).sum()
    )


def test_a_token_the_model_is_sure_to_repeat_costs_a_finite_large_amount():
    logits = torch.full((1, 2, 5), -1e4)
    logits[0, :, 3] = 1e4  # p[3] = 1 at both positions
    value = losses.repeat_unlikelihood(logits, torch.tensor([[3, 2]]))
    assert torch.isfinite(value) and value > 5  # −log(1e-6) / 2 labelled tokens ≈ 6.9


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("pattern", ["dense", "sparse"])
@pytest.mark.parametrize("bias", [False, True])
def test_fused_projection_and_loss_equal_projection_then_loss(bias, pattern, smoothing, monkeypatch):
    """The fused kernel folds the term's gradient into the cross-entropy's: same values and gradients as autograd
    through the projection, chunk boundaries inside rows (3 rows per chunk), with few labelled rows (the kernel's
    gather-the-rows branch) and with label smoothing."""
    monkeypatch.setattr(losses, "CHUNK_ROWS", 3)
    torch.manual_seed(0)
    head = torch.nn.Linear(8, VOCAB, bias=bias)
    hidden = torch.randn(2, 9, 8)
    labels = torch.randint(3, 7, (2, 9))
    if pattern == "sparse":
        labels[torch.rand(labels.shape) > 0.3] = -100

    def run(fused: bool):
        head.zero_grad(set_to_none=True)
        h = hidden.clone().requires_grad_()
        if fused:
            logits, loss = losses.linear_cross_entropy(h, head, labels, None, smoothing, 0.8)
        else:
            logits = head(h)
            loss = losses.token_cross_entropy(logits, labels, None, smoothing)
            loss = loss + 0.8 * losses.repeat_unlikelihood(logits, labels)
        loss.backward()
        return loss, h.grad, head.weight.grad, None if head.bias is None else head.bias.grad

    fused, plain = run(True), run(False)
    for ours, theirs in zip(fused, plain, strict=True):
        if theirs is None:
            assert ours is None
            continue
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-6)


def _model(kind: str, weight: float):
    config = tiny_config(kind, vocab_size=VOCAB, hidden_dropout_prob=0.0, unlikelihood_weight=weight)
    return (HFAttentionForCausalLM if kind == "decoder" else HFAttentionForSeq2SeqLM)(config)


def _batch(kind: str):
    generator = torch.Generator().manual_seed(1)
    source = torch.randint(3, VOCAB, (2, 7), generator=generator)
    labels = torch.randint(3, 8, (2, 7 if kind == "decoder" else 6), generator=generator)  # 5 ids: repeats likely
    labels[1, -2:] = -100
    return {"input_ids": source}, labels


def _expected(kind, logits, labels, weight):
    if kind == "decoder":  # the logits at position t predict token t+1
        logits, labels = logits[:, :-1], labels[:, 1:]
    return losses.token_cross_entropy(logits, labels) + weight * losses.repeat_unlikelihood(logits, labels)


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("kind", ["seq2seq", "decoder"])
def test_model_loss_adds_the_weighted_unlikelihood_with_its_gradients(kind, mode):
    torch.manual_seed(0)
    model = _model(kind, 0.7).train(mode == "train")
    inputs, labels = _batch(kind)
    with torch.set_grad_enabled(mode == "train"):
        output = model(**inputs, labels=labels)
    torch.testing.assert_close(output.loss, _expected(kind, output.logits, labels, 0.7), rtol=1e-5, atol=1e-6)
    assert output.loss - _expected(kind, output.logits, labels, 0.0) > 1e-3  # the term shows
    if mode == "train":
        parameters = [p for p in model.parameters() if p.requires_grad]
        ours = torch.autograd.grad(output.loss, parameters, allow_unused=True)
        if kind == "seq2seq":
            inputs = {**inputs, "decoder_input_ids": model.prepare_decoder_input_ids_from_labels(labels)}
        logits = model(**inputs).logits  # unfused: autograd through the projection and both terms
        theirs = torch.autograd.grad(_expected(kind, logits, labels, 0.7), parameters, allow_unused=True)
        for p, a, b in zip(parameters, ours, theirs, strict=True):
            if a is None or b is None:
                assert a is None and b is None
                continue
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=lambda m, p=p: f"{tuple(p.shape)}: {m}")


def test_the_masked_lm_loss_never_gets_the_term():
    """A masked LM's labels are scattered masked positions, not a sequence the model writes: no repeat to avoid."""
    from hf_attention import HFAttentionForMaskedLM

    torch.manual_seed(0)
    with_term = HFAttentionForMaskedLM(tiny_config("encoder", vocab_size=VOCAB, unlikelihood_weight=5.0)).train()
    plain = HFAttentionForMaskedLM(tiny_config("encoder", vocab_size=VOCAB, unlikelihood_weight=0.0)).train()
    plain.load_state_dict(with_term.state_dict())
    inputs = {"input_ids": torch.randint(3, VOCAB, (2, 8), generator=torch.Generator().manual_seed(2))}
    labels = torch.tensor([[5, 5, 6, -100, 7, 7, -100, 5]] * 2)
    assert torch.equal(with_term(**inputs, labels=labels).loss, plain(**inputs, labels=labels).loss)


@pytest.mark.parametrize("kind", ["seq2seq", "decoder"])
def test_zero_weight_is_bit_identical_to_the_loss_without_the_option(kind):
    torch.manual_seed(0)
    with_zero = _model(kind, 0.0).train()
    inputs, labels = _batch(kind)
    plain = _model(kind, 0.0)
    plain.load_state_dict(with_zero.state_dict())
    del plain.config.unlikelihood_weight  # a config saved before the option existed
    assert torch.equal(with_zero(**inputs, labels=labels).loss, plain.train()(**inputs, labels=labels).loss)


@pytest.mark.parametrize("value", [-0.5, float("nan")])
def test_a_negative_weight_is_refused_with_its_name(value):
    with pytest.raises(ValueError, match="unlikelihood_weight"):
        tiny_config("seq2seq", unlikelihood_weight=value)


def test_the_weight_survives_save_and_load(tmp_path):
    model = _model("seq2seq", 0.5)
    model.save_pretrained(tmp_path)
    assert HFAttentionForSeq2SeqLM.from_pretrained(tmp_path).config.unlikelihood_weight == 0.5


def test_training_loss_gives_a_hugging_face_model_the_same_term():
    """BART computes a mean loss of its own; training.train's loss takes its logits and adds the term the model
    config's unlikelihood_weight asks for, as our models do."""
    from training.objectives import objective_for
    from training.run.losses import token_loss
    from training.run.models import check_model_config

    fields = {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2}
    fields |= {"decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "vocab_size": VOCAB}
    check_model_config("bart", {**fields, "unlikelihood_weight": 1.0})
    with pytest.raises(ValueError, match=r"unlikelihood_weight=-1 must be a finite number ≥ 0"):
        check_model_config("bart", {**fields, "unlikelihood_weight": -1})
    torch.manual_seed(0)
    model = AutoModelForSeq2SeqLM.from_config(AutoConfig.for_model("bart", **fields, unlikelihood_weight=1.0)).eval()
    inputs, labels = _batch("seq2seq")
    batch = {**inputs, "labels": labels, "decoder_input_ids": model.prepare_decoder_input_ids_from_labels(labels)}
    loss = token_loss(objective_for("translation"), model, batch, torch.tensor(10.0))
    logits = model(input_ids=batch["input_ids"], decoder_input_ids=batch["decoder_input_ids"]).logits
    expected = losses.token_cross_entropy(logits, labels, 10.0) + losses.repeat_unlikelihood(logits, labels, 10.0)
    torch.testing.assert_close(loss, expected)


def test_training_loss_never_gives_a_hugging_face_masked_lm_the_term():
    """As our masked LM's own loss: BERT's labels are masked positions it fills in place, not a sequence it writes."""
    from transformers import AutoModelForMaskedLM

    from training.objectives import objective_for
    from training.run.losses import per_token_sum, token_loss

    fields = {"hidden_size": 16, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 32}
    torch.manual_seed(0)
    model = AutoModelForMaskedLM.from_config(AutoConfig.for_model("bert", **fields, vocab_size=VOCAB)).eval()
    model.config.unlikelihood_weight = 50.0
    objective = objective_for("masked_lm")
    inputs = {"input_ids": torch.randint(3, VOCAB, (2, 8), generator=torch.Generator().manual_seed(2))}
    labels = torch.tensor([[5, 5, 6, -100, 7, 7, -100, 5]] * 2)
    loss = token_loss(objective, model, {**inputs, "labels": labels}, torch.tensor(12.0))
    torch.testing.assert_close(loss, per_token_sum(objective, model(**inputs).logits, labels).sum() / 12.0)


@pytest.mark.parametrize("option", ["unlikelihood_weight", "label_smoothing"])
def test_training_loss_gives_gpt2_the_options_its_own_loss_ignores(option):
    """GPT-2's own loss takes the count of target tokens but knows neither option: with one set, training.train's
    loss is computed from the logits, as for BART, instead of silently leaving the option out."""
    from transformers import AutoModelForCausalLM

    from training.objectives import objective_for
    from training.run.losses import per_token_sum, target_labels, token_loss

    fields = {"n_embd": 16, "n_layer": 1, "n_head": 2, "vocab_size": VOCAB, "bos_token_id": 1, "eos_token_id": 2}
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.for_model("gpt2", **fields)).eval()
    objective = objective_for("causal_lm")
    ids = torch.randint(3, VOCAB, (2, 8), generator=torch.Generator().manual_seed(2))
    ids[:, 4] = ids[:, 3]  # a repeat for the unlikelihood term to see
    batch = {"input_ids": ids, "labels": ids.clone()}
    plain = token_loss(objective, model, batch, torch.tensor(14.0))
    setattr(model.config, option, 0.3)
    logits = model(input_ids=ids).logits
    smoothing = 0.3 if option == "label_smoothing" else 0.0
    expected = per_token_sum(objective, logits, ids, label_smoothing=smoothing).sum() / 14.0
    if option == "unlikelihood_weight":
        expected = expected + 0.3 * losses.repeat_unlikelihood(logits, target_labels(objective, ids), 14.0)
    loss = token_loss(objective, model, batch, torch.tensor(14.0))
    torch.testing.assert_close(loss, expected)
    assert not torch.allclose(loss, plain)


def test_the_recurrent_model_loss_adds_the_weighted_unlikelihood(tmp_path):
    """The recurrent config takes the option too, and its own loss (what 🤗 Trainer reads) adds the term, as
    training.train's loss does from its logits; a config saved without the field means no term."""
    from hf_attention import HFAttentionRecurrentConfig, HFAttentionRecurrentForSeq2SeqLM
    from training.objectives import objective_for
    from training.run.losses import token_loss

    torch.manual_seed(0)
    config = HFAttentionRecurrentConfig(vocab_size=VOCAB, hidden_size=16, dropout=0.0, unlikelihood_weight=0.7)
    model = HFAttentionRecurrentForSeq2SeqLM(config).eval()
    inputs, labels = _batch("seq2seq")
    output = model(**inputs, labels=labels)
    torch.testing.assert_close(output.loss, _expected("seq2seq", output.logits, labels, 0.7))
    assert output.loss - _expected("seq2seq", output.logits, labels, 0.0) > 1e-3  # the term shows
    batch = {**inputs, "labels": labels, "decoder_input_ids": model.prepare_decoder_input_ids_from_labels(labels)}
    count = (labels != -100).sum()
    torch.testing.assert_close(
        token_loss(objective_for("translation"), model, batch, count), model(**batch, num_items_in_batch=count).loss
    )
    model.save_pretrained(tmp_path)
    assert HFAttentionRecurrentForSeq2SeqLM.from_pretrained(tmp_path).config.unlikelihood_weight == 0.7
    del model.config.unlikelihood_weight  # a config saved before the option existed
    torch.testing.assert_close(model(**inputs, labels=labels).loss, _expected("seq2seq", output.logits, labels, 0.0))
    with pytest.raises(ValueError, match="unlikelihood_weight"):
        HFAttentionRecurrentConfig(unlikelihood_weight=float("inf"))
