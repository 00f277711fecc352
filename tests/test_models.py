"""Every knob builds, runs forward and backward with finite gradients; heads, losses and outputs behave like HF's."""

import itertools

import pytest
import torch
from conftest import POSITION_ENCODINGS, build, tiny_config
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
)

from hf_attention import (
    HFAttentionDecoderModel,
    HFAttentionEncoderModel,
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionForSequenceClassification,
    HFAttentionForTokenClassification,
    HFAttentionSeq2SeqModel,
)
from hf_attention.modeling.configuration_hf_attention import ATTENTION_SCORES, HIDDEN_ACTS, NORM_POSITIONS, NORM_TYPES

LM_CLASSES = {"encoder": HFAttentionForMaskedLM, "decoder": HFAttentionForCausalLM, "seq2seq": HFAttentionForSeq2SeqLM}


def forward_backward(family: str, **overrides) -> None:
    model = build(LM_CLASSES[family], family, **overrides).train()
    ids = torch.randint(3, 99, (2, 9))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    inputs = {"input_ids": ids, "attention_mask": mask, "labels": ids}
    if family == "seq2seq":
        inputs["labels"] = torch.randint(3, 99, (2, 5))
    out = model(**inputs)
    assert out.logits.isfinite().all() and out.loss.isfinite()
    out.loss.backward()
    grads = {name: p.grad for name, p in model.named_parameters()}
    missing = [name for name, g in grads.items() if g is None]
    assert not missing, f"parameters without gradient: {missing}"
    assert all(g.isfinite().all() for g in grads.values())


@pytest.mark.parametrize("family", ["encoder", "decoder", "seq2seq"])
@pytest.mark.parametrize(
    ("position", "score", "norm_position"),
    list(itertools.product(POSITION_ENCODINGS, ATTENTION_SCORES, NORM_POSITIONS)),
)
def test_attention_knob_combinations_train(family, position, score, norm_position):
    forward_backward(family, position_encoding=position, attention_score=score, norm_position=norm_position)


@pytest.mark.parametrize("family", ["encoder", "decoder", "seq2seq"])
@pytest.mark.parametrize(
    ("act", "norm_type", "scale"), list(itertools.product(HIDDEN_ACTS, NORM_TYPES, [True, False]))
)
def test_layer_knob_combinations_train(family, act, norm_type, scale):
    forward_backward(family, hidden_act=act, norm_type=norm_type, scale_embeddings=scale)


@pytest.mark.parametrize("family", ["encoder", "decoder", "seq2seq"])
@pytest.mark.parametrize(
    "overrides",
    [
        {"num_key_value_heads": 1},
        {"num_key_value_heads": 4},
        {"head_dim": 16},
        {"attention_bias": False, "mlp_bias": False},
        {"embedding_norm": True, "final_norm": True},
        {"type_vocab_size": 2},
        {"position_encoding": "learned", "position_offset": 2},
        {"sinusoidal_layout": "concat"},
        {"tie_word_embeddings": False},
        {"attention_dropout": 0.1, "hidden_dropout_prob": 0.1, "activation_dropout": 0.1},
    ],
)
def test_structural_knobs_train(family, overrides):
    forward_backward(family, **overrides)


AUTO_HEADS = [
    ("encoder", AutoModel, HFAttentionEncoderModel),
    ("encoder", AutoModelForMaskedLM, HFAttentionForMaskedLM),
    ("encoder", AutoModelForSequenceClassification, HFAttentionForSequenceClassification),
    ("encoder", AutoModelForTokenClassification, HFAttentionForTokenClassification),
    ("decoder", AutoModel, HFAttentionDecoderModel),
    ("decoder", AutoModelForCausalLM, HFAttentionForCausalLM),
    ("seq2seq", AutoModel, HFAttentionSeq2SeqModel),
    ("seq2seq", AutoModelForSeq2SeqLM, HFAttentionForSeq2SeqLM),
]


@pytest.mark.parametrize(("family", "auto", "expected"), AUTO_HEADS)
def test_auto_classes_resolve(family, auto, expected):
    assert type(auto.from_config(tiny_config(family))) is expected


def test_default_backend_is_sdpa_and_kernel_scores_fall_back_to_eager():
    assert build(HFAttentionForCausalLM, "decoder").config._attn_implementation == "sdpa"
    assert build(HFAttentionForCausalLM, "decoder", attention_score="additive").config._attn_implementation == "eager"


def test_classification_heads_and_losses():
    ids = torch.randint(3, 99, (3, 7))
    mask = torch.ones_like(ids)
    mask[0, 5:] = 0
    for pooling in ("mean", "first"):
        model = build(HFAttentionForSequenceClassification, "encoder", num_labels=3, classifier_pooling=pooling)
        out = model(ids, attention_mask=mask, labels=torch.tensor([0, 2, 1]))
        assert out.logits.shape == (3, 3)
        torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(out.logits, torch.tensor([0, 2, 1])))
    model = build(HFAttentionForTokenClassification, "encoder", num_labels=5)
    labels = torch.randint(0, 5, (3, 7)).masked_fill(mask == 0, -100)
    out = model(ids, attention_mask=mask, labels=labels)
    assert out.logits.shape == (3, 7, 5)
    expected = torch.nn.functional.cross_entropy(out.logits.reshape(-1, 5), labels.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(out.loss, expected)


def test_causal_lm_loss_shifts_ignores_minus_100_and_honours_num_items():
    model = build(HFAttentionForCausalLM, "decoder")
    ids = torch.randint(3, 99, (2, 8))
    labels = ids.clone()
    labels[0, :3] = -100
    out = model(ids, labels=labels)
    expected = torch.nn.functional.cross_entropy(out.logits[:, :-1].reshape(-1, 99), labels[:, 1:].reshape(-1))
    torch.testing.assert_close(out.loss, expected)
    counted = int((labels[:, 1:] != -100).sum())
    scaled = model(ids, labels=labels, num_items_in_batch=torch.tensor(4 * counted)).loss
    torch.testing.assert_close(scaled * 4, expected)


def test_seq2seq_labels_are_teacher_forced_shifted_right():
    model = build(HFAttentionForSeq2SeqLM, "seq2seq")
    src, labels = torch.randint(3, 99, (2, 6)), torch.randint(3, 99, (2, 5))
    labels[1, 3:] = -100
    out = model(src, labels=labels)
    decoder_inputs = model.prepare_decoder_input_ids_from_labels(labels)
    assert decoder_inputs[:, 0].eq(model.config.decoder_start_token_id).all()
    assert decoder_inputs[1, 4] == model.config.pad_token_id  # -100 becomes pad
    explicit = model(src, decoder_input_ids=decoder_inputs).logits
    torch.testing.assert_close(out.logits, explicit)
    expected = torch.nn.functional.cross_entropy(explicit.reshape(-1, 99), labels.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(out.loss, expected)


@pytest.mark.parametrize("backend", ["eager", "sdpa"])
def test_hidden_states_and_attentions_like_hf(backend):
    ids = torch.randint(3, 99, (2, 6))
    enc = build(HFAttentionEncoderModel, "encoder", attn_implementation=backend)
    out = enc(ids, output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == 3 and len(out.attentions) == 2
    assert out.attentions[0].shape == (2, 4, 6, 6)
    torch.testing.assert_close(out.attentions[0].sum(-1), torch.ones(2, 4, 6))
    dec = build(HFAttentionForCausalLM, "decoder", attn_implementation=backend)
    weights = dec(ids, output_attentions=True).attentions[0]
    assert torch.equal(weights.triu(1), torch.zeros_like(weights))  # causal: no weight on the future
    s2s = build(HFAttentionForSeq2SeqLM, "seq2seq", attn_implementation=backend)
    out = s2s(ids, decoder_input_ids=ids[:, :4], output_attentions=True, output_hidden_states=True)
    assert out.encoder_attentions[0].shape == (2, 4, 6, 6)
    assert out.decoder_attentions[0].shape == (2, 4, 4, 4)
    assert out.cross_attentions[0].shape == (2, 4, 4, 6)
    assert len(out.encoder_hidden_states) == 3 and len(out.decoder_hidden_states) == 3


def test_return_dict_false_gives_tuples():
    model = build(HFAttentionForCausalLM, "decoder")
    ids = torch.randint(3, 99, (1, 5))
    as_tuple = model(ids, return_dict=False, use_cache=False)
    assert isinstance(as_tuple, tuple)
    torch.testing.assert_close(as_tuple[0], model(ids).logits)


def test_inputs_embeds_equal_input_ids():
    for family, cls in (("decoder", HFAttentionForCausalLM), ("encoder", HFAttentionForMaskedLM)):
        model = build(cls, family)
        ids = torch.randint(3, 99, (2, 5))
        embeds = model.get_input_embeddings()(ids)
        torch.testing.assert_close(model(inputs_embeds=embeds).logits, model(ids).logits)


@pytest.mark.parametrize("api", ["activation_checkpointing", "gradient_checkpointing"])  # v5 name, deprecated name
@pytest.mark.parametrize("family", ["encoder", "decoder", "seq2seq"])
def test_gradient_checkpointing_gives_identical_gradients(family, api):
    model = build(LM_CLASSES[family], family).train()
    ids = torch.randint(3, 99, (2, 7))
    labels = ids if family != "seq2seq" else ids[:, :5]
    model(ids, labels=labels).loss.backward()
    reference = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    getattr(model, f"{api}_enable")(**{f"{api}_kwargs": {"use_reentrant": False}})
    assert any(getattr(layer, "gradient_checkpointing", False) for layer in model.modules())
    model(ids, labels=labels).loss.backward()
    for name, param in model.named_parameters():
        torch.testing.assert_close(param.grad, reference[name], msg=name)


def test_tied_embeddings_share_storage_and_untied_do_not():
    tied = build(HFAttentionForSeq2SeqLM, "seq2seq")
    assert tied.lm_head.weight.data_ptr() == tied.model.shared.weight.data_ptr()
    # the encoder and the decoder read the one shared embedding matrix (tied parameters, as in BART)
    assert tied.model.encoder.embed_tokens.weight is tied.model.decoder.embed_tokens.weight is tied.model.shared.weight
    untied_head = build(HFAttentionForSeq2SeqLM, "seq2seq", tie_word_embeddings=False)
    assert untied_head.model.encoder.embed_tokens.weight is untied_head.model.shared.weight
    assert untied_head.lm_head.weight is not untied_head.model.shared.weight
    untied = build(HFAttentionForCausalLM, "decoder", tie_word_embeddings=False)
    assert untied.lm_head.weight.data_ptr() != untied.get_input_embeddings().weight.data_ptr()
