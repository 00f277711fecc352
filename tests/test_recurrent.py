"""The recurrent encoder-decoder family (hf_attention_rnn): an HF seq2seq model like the others (Auto classes,
generate with and without its state, beam search, save/load, remote code, pipelines, heatmaps), whose attention is
the library's additive score, and whose bad inputs are refused with errors that name them."""

import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import tiny_config
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from hf_attention import (
    HFAttentionForSeq2SeqLM,
    HFAttentionRecurrentConfig,
    HFAttentionRecurrentForSeq2SeqLM,
    HFAttentionRecurrentModel,
    HFAttentionSeq2SeqConfig,
)
from hf_attention.modeling.recurrent import RecurrentState
from hf_attention.modeling.recurrent_layers import SourceAttention
from hf_attention.modeling.scores import AdditiveScore

VOCAB = 40
VARIANTS = [
    {"cell": "gru", "attention_score": "additive", "bidirectional_encoder": True},
    {"cell": "lstm", "attention_score": "additive", "bidirectional_encoder": False},
    {"cell": "gru", "attention_score": "none", "bidirectional_encoder": False},
    {"cell": "lstm", "attention_score": "none", "bidirectional_encoder": True},
    {"cell": "gru", "attention_score": "scaled_dot", "bidirectional_encoder": True},
]


def tiny(**overrides) -> HFAttentionRecurrentForSeq2SeqLM:
    torch.manual_seed(0)
    fields = {"vocab_size": VOCAB, "hidden_size": 16, "encoder_layers": 2, "decoder_layers": 2, "dropout": 0.0}
    return HFAttentionRecurrentForSeq2SeqLM(HFAttentionRecurrentConfig(**{**fields, **overrides})).eval()


def batch():
    """Three right-padded sources (7, 5 and 3 tokens) and targets."""
    generator = torch.Generator().manual_seed(1)
    source = torch.randint(3, VOCAB, (3, 7), generator=generator)
    mask = torch.ones_like(source)
    mask[1, 5:] = 0
    mask[2, 3:] = 0
    labels = torch.randint(3, VOCAB, (3, 6), generator=generator)
    return source.masked_fill(mask == 0, 0), mask, labels


def decoder_inputs(labels):
    return torch.cat([torch.ones(labels.shape[0], 1, dtype=torch.long), labels[:, :-1]], dim=1)


def test_registered_with_the_auto_classes():
    config = AutoConfig.for_model("hf_attention_rnn", vocab_size=VOCAB, hidden_size=16)
    assert type(config) is HFAttentionRecurrentConfig and config.is_encoder_decoder
    assert type(AutoModelForSeq2SeqLM.from_config(config)) is HFAttentionRecurrentForSeq2SeqLM
    assert type(AutoModel.from_config(config)) is HFAttentionRecurrentModel


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(str(x) for x in v.values()))
def test_state_carried_between_steps_equals_rereading_the_target(variant):
    model = tiny(**variant)
    source, mask, labels = batch()
    inputs = decoder_inputs(labels)
    full = model(input_ids=source, attention_mask=mask, decoder_input_ids=inputs).logits
    first = model(input_ids=source, attention_mask=mask, decoder_input_ids=inputs[:, :2], use_cache=True)
    state = first.cache if hasattr(first, "cache") else first.past_key_values
    assert isinstance(state, RecurrentState) and state.get_seq_length() == 2
    rest = model(input_ids=source, attention_mask=mask, decoder_input_ids=inputs[:, 2:], cache=state)
    torch.testing.assert_close(torch.cat([first.logits, rest.logits], dim=1), full, rtol=0, atol=1e-6)


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: "-".join(str(x) for x in v.values()))
def test_generate_with_and_without_the_state(variant):
    model = tiny(**variant)
    source, mask, _ = batch()
    for options in ({"do_sample": False}, {"num_beams": 3}, {"num_beams": 2, "num_return_sequences": 2}):
        cached = model.generate(input_ids=source, attention_mask=mask, max_new_tokens=8, **options)
        uncached = model.generate(input_ids=source, attention_mask=mask, max_new_tokens=8, use_cache=False, **options)
        assert torch.equal(cached, uncached), options
    torch.manual_seed(3)
    sampled = model.generate(input_ids=source, attention_mask=mask, max_new_tokens=8, do_sample=True)
    torch.manual_seed(3)
    again = model.generate(input_ids=source, attention_mask=mask, max_new_tokens=8, do_sample=True, use_cache=False)
    assert torch.equal(sampled, again)


def test_padded_batch_equals_rows_alone_and_future_tokens_never_change_the_past():
    model = tiny()
    source, mask, labels = batch()
    inputs = decoder_inputs(labels)
    together = model(input_ids=source, attention_mask=mask, decoder_input_ids=inputs).logits
    for row, length in enumerate((7, 5, 3)):
        alone = model(input_ids=source[row : row + 1, :length], decoder_input_ids=inputs[row : row + 1]).logits
        torch.testing.assert_close(alone, together[row : row + 1], rtol=0, atol=1e-6)
    changed = inputs.clone()
    changed[:, 4] = 5
    later = model(input_ids=source, attention_mask=mask, decoder_input_ids=changed).logits
    assert torch.equal(later[:, :4], together[:, :4]) and not torch.equal(later[:, 4:], together[:, 4:])


def test_loss_is_the_token_cross_entropy_of_the_shifted_labels_and_every_parameter_learns():
    model = tiny().train()
    source, mask, labels = batch()
    labels[2, 4:] = -100
    output = model(input_ids=source, attention_mask=mask, labels=labels)
    logits = model(input_ids=source, attention_mask=mask, decoder_input_ids=decoder_inputs(labels).clamp(min=0)).logits
    expected = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(output.loss, expected)
    output.loss.backward()
    assert all(p.grad is not None and p.grad.isfinite().all() for p in model.parameters())
    assert model.lm_head.weight is model.model.shared.weight  # tied to the shared embedding


def test_the_attention_is_bahdanaus_additive_score_through_the_library():
    """The decoder's weights at each step are softmax_j(wᵀ tanh(W_q s + W_k h_j)) over the real source tokens."""
    model = tiny(bidirectional_encoder=False)
    attention = model.model.decoder.attention
    assert isinstance(attention, SourceAttention) and isinstance(attention.score, AdditiveScore)
    source, mask, labels = batch()
    output = model(
        input_ids=source, attention_mask=mask, decoder_input_ids=decoder_inputs(labels), output_attentions=True
    )
    (weights,) = output.cross_attentions
    assert weights.shape == (3, 1, 6, 7)
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 1, 6))
    assert torch.equal(weights[1, :, :, 5:], torch.zeros(1, 6, 2)) and torch.equal(
        weights[2, :, :, 3:], torch.zeros(1, 6, 4)
    )
    # The first step by hand: its query is the initial state s_0 = tanh(W_init · summary).
    decoder, score = model.model.decoder, attention.score
    memory = decoder.memory(output.encoder_last_hidden_state)  # (B, S, H)
    summary = model.model.encoder.summary(output.encoder_last_hidden_state, mask.sum(1))
    query = decoder.initial_state(summary)[-1]  # top layer, (B, H)
    energy = score.energy(torch.tanh(score.query_proj(query)[:, None] + score.key_proj(memory))).squeeze(-1)
    expected = torch.softmax(energy.masked_fill(mask == 0, float("-inf")), dim=-1)
    torch.testing.assert_close(weights[:, 0, 0], expected, rtol=0, atol=1e-6)


def test_without_attention_there_are_no_weights_and_no_memory_of_positions():
    model = tiny(attention_score="none")
    source, mask, labels = batch()
    output = model(
        input_ids=source, attention_mask=mask, decoder_input_ids=decoder_inputs(labels), output_attentions=True
    )
    assert output.cross_attentions is None and model.model.decoder.attention is None
    assert model.config.attention_kinds == ()


def step_shapes(generated) -> list[list[tuple]]:
    """The shape of each layer's cross-attention map at each generated step."""
    return [[tuple(layer.shape) for layer in step] for step in generated.cross_attentions]


@pytest.mark.parametrize("use_cache", [True, False])
def test_generate_returns_each_steps_cross_attention_as_the_transformer_does(use_cache):
    """generate(output_attentions=True, return_dict_in_generate=True) gives one tuple per generated token, holding
    one (B, heads, new tokens, S) map per layer, as the Transformer encoder-decoder does (the recurrent decoder has
    one attention, one head wide); each step's map is the one forward() computes for that token."""
    source, mask, _ = batch()
    options = {"max_new_tokens": 4, "min_new_tokens": 4, "output_attentions": True, "return_dict_in_generate": True}
    config = HFAttentionSeq2SeqConfig(
        vocab_size=VOCAB, hidden_size=16, num_attention_heads=2, encoder_layers=2, decoder_layers=2
    )
    transformer = HFAttentionForSeq2SeqLM(config).eval()
    model = tiny()
    generated = model.generate(input_ids=source, attention_mask=mask, use_cache=use_cache, **options)
    reference = transformer.generate(input_ids=source, attention_mask=mask, use_cache=use_cache, **options)
    new_tokens = [1] * 4 if use_cache else [1, 2, 3, 4]  # without a cache each step re-reads the whole target
    assert step_shapes(reference) == [[(3, 2, t, 7)] * 2 for t in new_tokens]
    assert step_shapes(generated) == [[(3, 1, t, 7)] for t in new_tokens]
    (weights,) = model(
        input_ids=source, attention_mask=mask, decoder_input_ids=generated.sequences[:, :-1], output_attentions=True
    ).cross_attentions  # (B, 1, 4, S)
    for step, (step_weights,) in enumerate(generated.cross_attentions):
        torch.testing.assert_close(step_weights[:, :, -1], weights[:, :, step], rtol=0, atol=1e-6)


def test_save_load_bit_exact_and_remote_code_without_hf_attention(tmp_path):
    model = tiny()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "recurrent.py").is_file()  # shipped with the closure
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, reloaded.state_dict()[name]), name
    source, mask, _ = batch()
    tokens = model.generate(input_ids=source, attention_mask=mask, max_new_tokens=6, num_beams=2)
    script = f"""
        import sys, torch
        sys.modules["hf_attention"] = None  # the installed package is not importable
        from transformers import AutoModelForSeq2SeqLM
        model = AutoModelForSeq2SeqLM.from_pretrained({str(tmp_path)!r}, trust_remote_code=True).eval()
        source = torch.tensor({source.tolist()}); mask = torch.tensor({mask.tolist()})
        print(type(model).__module__, model.generate(input_ids=source, attention_mask=mask, max_new_tokens=6,
              num_beams=2).tolist())
    """
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    module, generated = completed.stdout.strip().splitlines()[-1].split(" ", 1)
    assert not module.startswith("hf_attention") and generated == str(tokens.tolist())


def test_pipeline_and_heatmaps(trained_tokenizer, tmp_path):
    from hf_attention.inspection.heatmaps import attention_weights
    from hf_attention.modeling.pipelines import save_translation_pipeline

    tokenizer = trained_tokenizer("seq2seq")
    model = HFAttentionRecurrentForSeq2SeqLM(
        HFAttentionRecurrentConfig(vocab_size=len(tokenizer), hidden_size=16)
    ).eval()
    layers, rows, columns = attention_weights(model, tokenizer, "Open the file", kind="cross", max_new_tokens=5)
    assert len(layers) == 1 and layers[0].shape == (1, len(rows), len(columns))
    with pytest.raises(ValueError, match="has no such attention; it has 'cross'"):
        attention_weights(model, tokenizer, "Open the file", kind="self")
    plain = HFAttentionRecurrentForSeq2SeqLM(
        HFAttentionRecurrentConfig(vocab_size=len(tokenizer), hidden_size=16, attention_score="none")
    )
    with pytest.raises(ValueError, match="computes no attention weights"):
        attention_weights(plain.eval(), tokenizer, "Open the file", kind="cross")
    from hf_attention.inspection.explorer import explore

    page = explore(model, tokenizer, "Open the file", path=tmp_path / "page.html", max_new_tokens=5)
    assert page.kind == "cross" and set(page.weights) == {"cross"} and page.weights["cross"].shape[:2] == (1, 1)
    assert (tmp_path / "page.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    with pytest.raises(ValueError, match="computes no attention weights"):
        explore(plain.eval(), tokenizer, "Open the file")
    save_translation_pipeline(model, tokenizer, tmp_path / "pipeline")
    from transformers import pipeline

    translate = pipeline("translation", model=str(tmp_path / "pipeline"), trust_remote_code=True)
    expected = tokenizer.decode(
        model.generate(**tokenizer("Open the file", return_tensors="pt"), max_new_tokens=5)[0],
        skip_special_tokens=True,
    )
    assert translate("Open the file", max_new_tokens=5)[0]["translation_text"].strip() == expected.strip()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cell", "rnn", "cell='rnn' is not supported; allowed values are 'gru', 'lstm'"),
        ("attention_score", "luong", "attention_score='luong' is not supported"),
        ("dropout", 1.0, "dropout=1.0 must be a probability"),
        ("bidirectional_encoder", "yes", "bidirectional_encoder='yes' must be True or False"),
        ("hidden_size", 0, "hidden_size=0 must be a positive integer"),
        ("pad_token_id", 99, "pad_token_id=99 is outside the vocabulary"),
    ],
)
def test_config_errors_name_the_field(field, value, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        HFAttentionRecurrentConfig(vocab_size=VOCAB, **{field: value})


def test_input_errors_name_the_problem():
    model = tiny()
    source, mask, labels = batch()
    left_padded = mask.flip(1)
    with pytest.raises(ValueError, match="must be right-padded"):
        model(input_ids=source, attention_mask=left_padded, labels=labels)
    empty = mask.clone()
    empty[2] = 0
    with pytest.raises(ValueError, match="has no tokens"):
        model(input_ids=source, attention_mask=empty, labels=labels)
    from transformers import DynamicCache

    with pytest.raises(TypeError, match="RecurrentState"):
        model(input_ids=source, attention_mask=mask, decoder_input_ids=labels, cache=DynamicCache())
    with pytest.raises(ValueError, match="outside \\[0, vocab_size=40\\)"):
        model(input_ids=source, attention_mask=mask, labels=labels + VOCAB)


def _source():
    source, mask, labels = batch()
    return source, mask, decoder_inputs(labels)


# What the Transformer families refuse with an error naming the argument (input_checks.py), the recurrent family
# refuses with the same error: (inputs made from the source, its mask and the decoder inputs, error, message).
BAD_INPUTS = {
    "ids outside the vocabulary": (
        lambda s, m, d: {"input_ids": s + VOCAB, "decoder_input_ids": d},
        ValueError,
        r"input_ids contains token id \d+, outside the vocabulary \[0, 40\)",
    ),
    "negative ids": (
        lambda s, m, d: {"input_ids": -s, "decoder_input_ids": d},
        ValueError,
        r"input_ids contains token id -\d+, outside the vocabulary",
    ),
    "an empty source": (
        lambda s, m, d: {"input_ids": s[:1, :0], "decoder_input_ids": d[:1]},
        ValueError,
        r"input_ids is empty \(0 tokens\)",
    ),
    "no source rows": (lambda s, m, d: {"input_ids": s[:0], "decoder_input_ids": d[:0]}, ValueError, "0 rows"),
    "1-D ids": (
        lambda s, m, d: {"input_ids": s[0], "decoder_input_ids": d},
        ValueError,
        r"input_ids has shape \(7,\), expected 2-D",
    ),
    "float ids": (
        lambda s, m, d: {"input_ids": s.float(), "decoder_input_ids": d},
        ValueError,
        "input_ids must hold integer token ids",
    ),
    "ids as a list": (
        lambda s, m, d: {"input_ids": s.tolist(), "decoder_input_ids": d},
        TypeError,
        "input_ids must be a torch.Tensor",
    ),
    "embeddings of another width": (
        lambda s, m, d: {"inputs_embeds": torch.zeros(3, 7, 5), "decoder_input_ids": d},
        ValueError,
        r"inputs_embeds has shape \(3, 7, 5\), expected 3-D",
    ),
    "a mask as a list": (
        lambda s, m, d: {"input_ids": s, "attention_mask": m.tolist(), "decoder_input_ids": d},
        TypeError,
        "attention_mask must be a torch.Tensor",
    ),
    "a 4-D mask": (
        lambda s, m, d: {
            "input_ids": s,
            "attention_mask": m.bool()[:, None, None].expand(-1, 1, 7, -1),
            "decoder_input_ids": d,
        },
        ValueError,
        r"attention_mask has shape \(3, 1, 7, 7\), expected \(batch, length\)",
    ),
    "a mask of another length": (
        lambda s, m, d: {"input_ids": s, "attention_mask": m[:, 1:], "decoder_input_ids": d},
        ValueError,
        r"attention_mask has shape \(3, 6\), expected \(batch, length\) = \(3, 7\)",
    ),
    "decoder ids outside the vocabulary": (
        lambda s, m, d: {"input_ids": s, "decoder_input_ids": d + VOCAB},
        ValueError,
        "decoder_input_ids contains token id .* check decoder_start_token_id",
    ),
    "empty decoder ids": (
        lambda s, m, d: {"input_ids": s, "decoder_input_ids": d[:, :0]},
        ValueError,
        r"decoder_input_ids is empty \(0 tokens\)",
    ),
    "1-D decoder ids": (
        lambda s, m, d: {"input_ids": s, "decoder_input_ids": d[0]},
        ValueError,
        r"decoder_input_ids has shape \(6,\), expected 2-D",
    ),
    "float decoder ids": (
        lambda s, m, d: {"input_ids": s, "decoder_input_ids": d.float()},
        ValueError,
        "decoder_input_ids must hold integer token ids",
    ),
    "decoder ids of another batch": (
        lambda s, m, d: {"input_ids": s, "decoder_input_ids": d[:1]},
        ValueError,
        r"decoder_input_ids has shape \(1, 6\), expected \(3, length\)",
    ),
    "labels of another length": (
        lambda s, m, d: {"input_ids": s, "decoder_input_ids": d, "labels": d[:, 1:]},
        ValueError,
        r"labels has shape \(3, 5\), expected \(3, 6\)",
    ),
    "float labels": (
        lambda s, m, d: {"input_ids": s, "labels": d.float()},
        ValueError,
        "labels must hold integer class ids",
    ),
}


@pytest.mark.parametrize(
    ("case", "model_class"),
    [
        (case, model_class)
        for case in BAD_INPUTS
        for model_class in (HFAttentionRecurrentForSeq2SeqLM, HFAttentionRecurrentModel)
        if "labels" not in case or model_class is HFAttentionRecurrentForSeq2SeqLM  # the base model takes no labels
    ],
)
def test_bad_inputs_get_the_errors_of_the_transformer_families(case, model_class):
    make, error, message = BAD_INPUTS[case]
    inputs = make(*_source())
    model = model_class(tiny().config).eval()
    with pytest.raises(error, match=message), torch.no_grad():
        model(**inputs)


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        ({"input_ids": torch.tensor([[5, 6, 45]])}, r"input_ids contains token id 45, outside the vocabulary"),
        ({"input_ids": torch.tensor([[5, -6, 7]])}, r"input_ids contains token id -6, outside the vocabulary"),
        ({"input_ids": torch.zeros(1, 0, dtype=torch.long)}, r"input_ids is empty \(0 tokens\)"),
        ({"input_ids": torch.tensor([5, 6, 7])}, r"input_ids has shape \(3,\), expected 2-D"),
        ({"input_ids": torch.tensor([[5.0, 6.0]])}, "input_ids must hold integer token ids"),
        ({"input_ids": torch.zeros(0, 3, dtype=torch.long)}, r"generate\(\) got input_ids with shape \(0, 3\)"),
        (
            {"input_ids": torch.tensor([[5, 6]]), "decoder_start_token_id": 99},
            r"decoder_start_token_id=99 is outside the vocabulary \[0, 40\)",
        ),
    ],
)
def test_generate_refuses_bad_inputs_with_the_same_errors(inputs, message):
    with pytest.raises(ValueError, match=message):
        tiny().generate(**inputs, max_new_tokens=3)


def test_the_training_loss_takes_its_own_loss_and_accumulation_gives_one_batch():
    """training.run.losses treats the family as ours, as the Transformer families: its own loss divides by the
    `num_items_in_batch` it is given (the window's target count), so the micro-batches of an accumulation window
    add up to the loss and the gradients of one batch, however their target counts differ."""
    from training.objectives import OBJECTIVES
    from training.run.losses import count_targets, loss_takes_num_items, own_loss_is_the_training_loss, token_loss

    objective = OBJECTIVES["translation"]
    model = tiny().train()
    source, mask, labels = batch()
    labels[0, 2:] = -100  # rows with different target counts: a mean per micro-batch would weigh them wrongly
    whole = {"input_ids": source, "attention_mask": mask, "labels": labels}
    assert loss_takes_num_items(model) and own_loss_is_the_training_loss(objective, model)
    count = torch.tensor(float(count_targets(objective, whole)))
    halved = model(**whole, num_items_in_batch=2 * count).loss
    torch.testing.assert_close(halved, model(**whole).loss / 2)

    one_batch = token_loss(objective, model, whole, count)
    one_batch.backward()
    expected = [parameter.grad.clone() for parameter in model.parameters()]
    model.zero_grad()
    micro_batches = [{key: value[rows] for key, value in whole.items()} for rows in (slice(0, 1), slice(1, 3))]
    accumulated = sum(token_loss(objective, model, micro_batch, count) for micro_batch in micro_batches)
    accumulated.backward()
    torch.testing.assert_close(accumulated, one_batch)
    for parameter, gradient in zip(model.parameters(), expected, strict=True):
        torch.testing.assert_close(parameter.grad, gradient)


def test_a_right_padded_decoder_mask_changes_nothing_and_another_is_refused():
    model = HFAttentionRecurrentForSeq2SeqLM(tiny_config("recurrent")).eval()
    source, target = torch.tensor([[5, 6, 7, 8]]), torch.tensor([[1, 9, 10, 11]])
    with torch.no_grad():
        plain = model(source, decoder_input_ids=target).logits
        padded = model(source, decoder_input_ids=target, decoder_attention_mask=torch.tensor([[1, 1, 1, 0]])).logits
    torch.testing.assert_close(padded, plain, rtol=0, atol=0)  # the same computation: the mask is only checked
    with pytest.raises(ValueError, match="decoder_attention_mask must be right-padded for a recurrent decoder"):
        model(source, decoder_input_ids=target, decoder_attention_mask=torch.tensor([[0, 1, 1, 1]]))
    with pytest.raises(ValueError, match="decoder_attention_mask"):
        model(source, decoder_input_ids=target, decoder_attention_mask=torch.ones(1, 3, dtype=torch.long))


@pytest.mark.parametrize("head", [HFAttentionRecurrentForSeq2SeqLM, HFAttentionForSeq2SeqLM])
def test_get_encoder_gives_the_text_encoder_and_no_other_modality(head):
    family = "recurrent" if head is HFAttentionRecurrentForSeq2SeqLM else "seq2seq"
    model = head(tiny_config(family))
    assert model.get_encoder() is model.model.encoder
    for modality in ("image", "audio"):  # as transformers answers for a model without one: the model itself
        assert model.get_encoder(modality) is model
