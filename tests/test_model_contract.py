"""The rest of transformers' model contract, checked against what transformers' own models do in each place:
pre-shifted `shift_labels`, weights missing from a checkpoint (tied or not) initialised and reported, reentrant
activation checkpointing, and the decoder family's sequence classifier (GPT-2's and Llama's last-token pooling)."""

import copy

import pytest
import torch
from conftest import POSITION_ENCODINGS, build, tiny_config
from safetensors.torch import load_file, save_file
from transformers import (
    AutoModelForSequenceClassification,
    BartConfig,
    BartModel,
    GPT2Config,
    GPT2ForSequenceClassification,
    LlamaConfig,
    LlamaForCausalLM,
    LlamaForSequenceClassification,
)

from hf_attention import (
    HFAttentionDecoderForSequenceClassification,
    HFAttentionDecoderModel,
    HFAttentionEncoderModel,
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionForSequenceClassification,
    HFAttentionForTokenClassification,
    HFAttentionSeq2SeqModel,
    from_hf,
)

LLAMA = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 37,
    "pad_token_id": 0,
}


# ---------------------------------------------------------------------------------------------------------------------
# shift_labels


def _shifted(labels: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.pad(labels, (0, 1), value=-100)[:, 1:].contiguous()  # as collators make them


def test_shift_labels_replace_the_shift_of_labels_as_in_llama():
    reference = LlamaForCausalLM(LlamaConfig(**LLAMA)).eval()
    ours = from_hf(reference).eval()
    ids = torch.randint(3, 99, (2, 7))
    with torch.no_grad():
        plain = ours(ids, labels=ids).loss
        # `labels` switch the loss on; the targets are the shift_labels (zeros as targets would give another loss)
        given = ours(ids, labels=torch.zeros_like(ids), shift_labels=_shifted(ids)).loss
        theirs = reference(ids, labels=torch.zeros_like(ids), shift_labels=_shifted(ids)).loss
        masked = _shifted(ids).masked_fill(torch.tensor([[False] * 3 + [True] * 4] * 2), -100)
        partial = ours(ids, labels=ids, shift_labels=masked).loss
        partial_theirs = reference(ids, labels=ids, shift_labels=masked).loss
    assert torch.equal(given, plain)
    torch.testing.assert_close(given, theirs, rtol=0, atol=1e-6)
    torch.testing.assert_close(partial, partial_theirs, rtol=0, atol=1e-6)
    assert not torch.allclose(partial, plain)
    with torch.no_grad():
        assert ours(ids, shift_labels=_shifted(ids)).loss is None  # no labels, no loss (as in Llama)
    with pytest.raises(ValueError, match=r"shift_labels has shape \(2, 6\), expected \(2, 7\)"):
        ours(ids, labels=ids, shift_labels=ids[:, 1:])


# ---------------------------------------------------------------------------------------------------------------------
# Weights missing from a checkpoint

# (class, family, overrides, {source: tied targets}) for every head with an embedding, tied and untied.
TIED = [
    (HFAttentionForCausalLM, "decoder", {}, {"model.decoder.embed_tokens.weight": ["lm_head.weight"]}),
    (HFAttentionForCausalLM, "decoder", {"tie_word_embeddings": False}, {"model.decoder.embed_tokens.weight": []}),
    (HFAttentionDecoderModel, "decoder", {}, {"decoder.embed_tokens.weight": []}),
    (HFAttentionForMaskedLM, "encoder", {}, {"model.encoder.embed_tokens.weight": ["lm_head.weight"]}),
    (HFAttentionEncoderModel, "encoder", {}, {"encoder.embed_tokens.weight": []}),
    (HFAttentionForSequenceClassification, "encoder", {}, {"model.encoder.embed_tokens.weight": []}),
    (HFAttentionForTokenClassification, "encoder", {}, {"model.encoder.embed_tokens.weight": []}),
    (HFAttentionDecoderForSequenceClassification, "decoder", {}, {"model.decoder.embed_tokens.weight": []}),
    (
        HFAttentionSeq2SeqModel,
        "seq2seq",
        {},
        {"shared.weight": ["encoder.embed_tokens.weight", "decoder.embed_tokens.weight"]},
    ),
    (
        HFAttentionForSeq2SeqLM,
        "seq2seq",
        {},
        {
            "model.shared.weight": [
                "model.encoder.embed_tokens.weight",
                "model.decoder.embed_tokens.weight",
                "lm_head.weight",
            ]
        },
    ),
    (
        HFAttentionForSeq2SeqLM,
        "seq2seq",
        {"tie_word_embeddings": False},
        {"model.shared.weight": ["model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"]},
    ),
]


def _save_without(model, folder, key: str) -> None:
    model.save_pretrained(folder)
    weights = load_file(folder / "model.safetensors")
    assert key in weights, sorted(weights)  # the checkpoint holds the source once (its tied copies are not saved)
    del weights[key]
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})


@pytest.mark.parametrize(("model_class", "family", "overrides", "tied"), TIED)
def test_a_missing_embedding_is_initialised_and_reported_with_what_is_tied_to_it(
    tmp_path, model_class, family, overrides, tied
):
    ((source, targets),) = tied.items()
    model = build(model_class, family, **overrides)
    _save_without(model, tmp_path, source)
    loaded, info = model_class.from_pretrained(tmp_path, output_loading_info=True)
    assert not [name for name, p in loaded.named_parameters() if p.is_meta]
    assert set(info["missing_keys"]) == {source, *targets}
    weight = loaded.get_parameter(source)
    assert torch.isfinite(weight).all() and 0.5 * 0.02 < weight.std() < 2 * 0.02  # initializer_range's normal
    assert all(loaded.get_parameter(target) is weight for target in targets)
    # every other weight is the checkpoint's
    expected = {k: v for k, v in model.state_dict().items() if k != source and k not in targets}
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in expected.items())


@pytest.mark.parametrize(("model_class", "reference_class"), [(HFAttentionSeq2SeqModel, BartModel)])
def test_a_missing_shared_embedding_is_reported_as_bart_reports_it(tmp_path, model_class, reference_class):
    reference = reference_class(BartConfig(vocab_size=99, d_model=32, encoder_layers=1, decoder_layers=1))
    _save_without(reference, tmp_path / "bart", "shared.weight")
    _, theirs = reference_class.from_pretrained(tmp_path / "bart", output_loading_info=True)
    _save_without(build(model_class, "seq2seq"), tmp_path / "ours", "shared.weight")
    _, ours = model_class.from_pretrained(tmp_path / "ours", output_loading_info=True)
    assert set(ours["missing_keys"]) == set(theirs["missing_keys"])


# ---------------------------------------------------------------------------------------------------------------------
# Activation checkpointing, reentrant and not

CHECKPOINTED = [
    (HFAttentionForCausalLM, "decoder"),
    (HFAttentionForMaskedLM, "encoder"),
    (HFAttentionForSeq2SeqLM, "seq2seq"),
]


def _gradients(model, ids: torch.Tensor) -> dict[str, torch.Tensor]:
    model.zero_grad(set_to_none=True)
    labels = ids.clone()
    labels[:, ::2] = -100
    model(input_ids=ids, labels=labels).loss.backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("reentrant", [True, False], ids=["reentrant", "non-reentrant"])
@pytest.mark.parametrize(("model_class", "family"), CHECKPOINTED)
@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_activation_checkpointing_gives_the_gradients_of_a_plain_step(model_class, family, position, reentrant):
    model = build(model_class, family, position_encoding=position, attention_dropout=0.0).train()
    ids = torch.randint(3, 99, (2, 6))
    expected = _gradients(model, ids)
    checkpointed = copy.deepcopy(model)
    checkpointed.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    got = _gradients(checkpointed, ids)
    assert got.keys() == expected.keys()
    for name, gradient in expected.items():
        torch.testing.assert_close(got[name], gradient, rtol=1e-5, atol=1e-7, msg=name)


# ---------------------------------------------------------------------------------------------------------------------
# The decoder's sequence classifier

REFERENCE_CLASSIFIERS = {
    "llama": lambda num_labels: LlamaForSequenceClassification(LlamaConfig(**LLAMA, num_labels=num_labels)),
    "gpt2": lambda num_labels: GPT2ForSequenceClassification(
        GPT2Config(
            vocab_size=99,
            n_embd=32,
            n_layer=2,
            n_head=4,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
            num_labels=num_labels,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
        )
    ),
}
PADDINGS = {
    "left": torch.tensor([[5, 6, 7, 8, 9], [0, 0, 9, 10, 11]]),
    "right": torch.tensor([[5, 6, 7, 8, 9], [9, 10, 11, 0, 0]]),
}
PROBLEMS = {
    "single_label_classification": (3, torch.tensor([1, 2])),
    "multi_label_classification": (3, torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])),
    "regression": (1, torch.tensor([[0.5], [1.5]])),
}


@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("name", REFERENCE_CLASSIFIERS)
def test_decoder_classifier_equals_llama_and_gpt2_classifiers(name, problem, padding):
    num_labels, labels = PROBLEMS[problem]
    reference = REFERENCE_CLASSIFIERS[name](num_labels).eval()
    reference.config.problem_type = problem
    ours = from_hf(reference).eval()
    assert type(ours) is HFAttentionDecoderForSequenceClassification and ours.config.problem_type == problem
    ids = PADDINGS[padding]
    mask = (ids != 0).long()
    # GPT-2 numbers positions from the first column unless told otherwise: each real token's position, for both
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    inputs = {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "labels": labels}
    with torch.no_grad():
        theirs, mine = reference(**inputs), ours(**inputs)
    torch.testing.assert_close(mine.logits, theirs.logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(mine.loss, theirs.loss, rtol=0, atol=1e-6)


def test_decoder_classifier_through_the_auto_class_and_its_errors(tmp_path):
    config = tiny_config("decoder", num_labels=2)
    model = AutoModelForSequenceClassification.from_config(config)
    assert type(model) is HFAttentionDecoderForSequenceClassification
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model.eval()(ids).logits)
        assert loaded(ids).logits.shape == (1, 2)
    model.config.pad_token_id = None
    with pytest.raises(ValueError, match="needs config.pad_token_id to find each text's last token"):
        model(torch.tensor([[5, 6, 7], [8, 9, 10]]))
