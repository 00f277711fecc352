"""Bad model inputs get a ValueError naming the argument, what was given and what is allowed, before any work."""

import contextlib

import pytest
import torch
from conftest import build
from transformers import pipeline

from hf_attention import (
    HFAttentionEncoderModel,
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionForTokenClassification,
    HFAttentionRecurrentForSeq2SeqLM,
    HFAttentionSeq2SeqModel,
)
from hf_attention.modeling.losses import linear_cross_entropy, token_cross_entropy
from hf_attention.modeling.pipelines import TASK

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
@pytest.mark.parametrize(
    ("head", "labels", "message"),
    [
        ("causal_lm", torch.randint(3, 99, (2, 7)), r"labels has shape \(2, 7\), expected \(2, 6\)"),
        ("causal_lm", torch.randint(3, 99, (2, 5)), r"labels has shape \(2, 5\), expected \(2, 6\)"),
        ("causal_lm", torch.randint(3, 99, (12,)), r"labels has shape \(12,\), expected \(2, 6\)"),
        ("masked_lm", torch.randint(3, 99, (2, 7)), r"labels has shape \(2, 7\), expected \(2, 6\)"),
        ("masked_lm", torch.randint(3, 99, (1, 6)), r"labels has shape \(1, 6\), expected \(2, 6\)"),
        ("token_classification", torch.randint(0, 2, (2, 7)), r"labels has shape \(2, 7\), expected \(2, 6\)"),
        (
            "seq2seq",
            torch.randint(3, 99, (2, 4)),
            r"labels has shape \(2, 4\), expected \(2, 6\): one label per decoder "
            r"input token",
        ),
        ("seq2seq", torch.randint(3, 99, (6,)), r"labels has shape \(6,\), expected \(2, 6\)"),
        ("causal_lm", torch.full((2, 6), 99), r"labels contains 99, outside \[0, vocab_size=99\); use -100"),
        ("causal_lm", torch.full((2, 6), -1), r"labels contains -1, outside \[0, vocab_size=99\)"),
        (
            "causal_lm",
            torch.full((2, 6), 5.0),
            r"labels must hold integer class ids \(torch.long\), got dtype "
            r"torch.float32",
        ),
        ("masked_lm", torch.tensor([[-100] * 5 + [500]] * 2), r"labels contains 500, outside \[0, vocab_size=99\)"),
        ("masked_lm", torch.full((2, 6), -7), r"labels contains -7"),
        ("token_classification", torch.full((2, 6), 2), r"labels contains 2, outside \[0, num_labels=2\)"),
        ("token_classification", torch.full((2, 6), 1.0), r"labels must hold integer class ids"),
        ("seq2seq", torch.full((2, 6), 99), r"labels contains 99, outside \[0, vocab_size=99\)"),
        ("seq2seq", torch.ones(2, 6, dtype=torch.bool), r"labels must hold integer class ids .* got dtype torch.bool"),
    ],
)
def test_bad_labels(head, labels, message, training):
    with pytest.raises(ValueError, match=message):
        _call(head, training, labels=labels)


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (torch.randint(3, 99, (10,)), r"labels has shape \(10,\), expected 2-D \(batch, length\)"),
        (torch.full((2, 5), -1), r"labels contains -1, outside \[0, vocab_size=99\)"),
        (torch.rand(2, 5), r"labels must hold integer class ids"),
    ],
)
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


# --- input ids, embeddings, masks, token types


@pytest.mark.parametrize(
    ("model_class", "family", "inputs", "message"),
    [
        (
            HFAttentionForCausalLM,
            "decoder",
            {"input_ids": torch.randint(3, 99, (6,))},
            r"input_ids has shape \(6,\), expected 2-D \(batch, length\)",
        ),
        (
            HFAttentionForCausalLM,
            "decoder",
            {"input_ids": torch.randint(3, 99, (1, 2, 6))},
            r"input_ids has shape \(1, 2, 6\), expected 2-D \(batch, length\)",
        ),
        (
            HFAttentionEncoderModel,
            "encoder",
            {"input_ids": torch.rand(2, 6)},
            r"input_ids must hold integer token ids \(torch.long\), got dtype torch.float32",
        ),
        (
            HFAttentionForCausalLM,
            "decoder",
            {"inputs_embeds": torch.randn(2, 6, 16)},
            r"inputs_embeds has shape \(2, 6, 16\), expected 3-D \(batch, length, hidden_size\) = "
            r"\(batch, length, 32\)",
        ),
        (
            HFAttentionEncoderModel,
            "encoder",
            {"inputs_embeds": torch.randn(2, 32)},
            r"inputs_embeds has shape \(2, 32\), expected 3-D",
        ),
        (
            HFAttentionForSeq2SeqLM,
            "seq2seq",
            {"input_ids": torch.randint(3, 99, (2, 6)), "decoder_input_ids": torch.randint(3, 99, (4,))},
            r"decoder_input_ids has shape \(4,\), expected 2-D \(batch, length\)",
        ),
        (
            HFAttentionForSeq2SeqLM,
            "seq2seq",
            {"input_ids": torch.randint(3, 99, (2, 6)), "decoder_inputs_embeds": torch.randn(2, 3, 8)},
            r"decoder_inputs_embeds has shape \(2, 3, 8\), expected 3-D",
        ),
        (
            HFAttentionForSeq2SeqLM,
            "seq2seq",
            {"input_ids": torch.randint(3, 99, (2, 6)), "decoder_input_ids": torch.full((2, 3), 150)},
            r"decoder_input_ids contains token id 150, outside the vocabulary \[0, 99\); check decoder_start_token_id",
        ),
    ],
)
def test_bad_input_shapes_and_kinds(model_class, family, inputs, message):
    model = build(model_class, family)
    with pytest.raises(ValueError, match=message):
        model(**inputs)


def test_input_ids_must_be_a_tensor():
    with pytest.raises(TypeError, match=r"input_ids must be a torch.Tensor, got list"):
        build(HFAttentionForCausalLM, "decoder")(input_ids=[[5, 6, 7]])


@pytest.mark.parametrize("shape", [(2, 1, 6, 5), (2, 1, 5, 6), (3, 1, 6, 6), (2, 3, 6, 6)])
def test_four_dimensional_attention_mask_must_fit(shape):
    model = build(HFAttentionForCausalLM, "decoder")
    with pytest.raises(
        ValueError,
        match=r"attention_mask is 4-D with shape .*, expected \(batch, heads, query "
        r"length, key length\) = \(2 or 1, 1 or 4, 6, 6\)",
    ):
        model(torch.randint(3, 99, (2, 6)), attention_mask=torch.ones(shape, dtype=torch.bool))


def test_four_dimensional_mask_that_fits_is_used_as_given():
    model = build(HFAttentionForCausalLM, "decoder")
    ids = torch.randint(3, 99, (2, 6))
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    expected = model(ids).logits
    for mask in (causal[None, None].expand(2, 1, 6, 6), causal[None, None], causal[None, None].expand(1, 4, 6, 6)):
        torch.testing.assert_close(model(ids, attention_mask=mask).logits, expected)


def test_decoder_mask_of_encoder_decoder_is_named_decoder_attention_mask():
    model = build(HFAttentionForSeq2SeqLM, "seq2seq")
    with pytest.raises(ValueError, match=r"decoder_attention_mask has shape \(2, 2\), expected"):
        model(
            torch.randint(3, 99, (2, 6)),
            decoder_input_ids=torch.ones(2, 3).long(),
            decoder_attention_mask=torch.ones(2, 2),
        )


@pytest.mark.parametrize(
    ("type_vocab_size", "token_type_ids", "message"),
    [
        (2, torch.full((2, 6), 2), r"token_type_ids contains segment id 2, outside \[0, type_vocab_size=2\)"),
        (2, torch.full((2, 6), -1), r"token_type_ids contains segment id -1, outside \[0, type_vocab_size=2\)"),
        (
            0,
            torch.ones(2, 6, dtype=torch.long),
            r"token_type_ids contains segment id 1, but the model has no token-type "
            r"embeddings \(type_vocab_size=0\): only 0",
        ),
        (
            2,
            torch.zeros(2, 5, dtype=torch.long),
            r"token_type_ids has shape \(2, 5\), expected \(batch, length\) = "
            r"\(2, 6\)",
        ),
        (2, torch.zeros(2, 6), r"token_type_ids must be an integer torch.Tensor, got torch.float32"),
    ],
)
def test_bad_token_type_ids(type_vocab_size, token_type_ids, message):
    model = build(HFAttentionEncoderModel, "encoder", type_vocab_size=type_vocab_size)
    with pytest.raises(ValueError, match=message):
        model(torch.randint(3, 99, (2, 6)), token_type_ids=token_type_ids)


def test_zero_token_types_are_accepted_without_type_embeddings():
    """Tokenizers return all-zero token_type_ids for single texts; a model without segments takes them."""
    model = build(HFAttentionEncoderModel, "encoder", type_vocab_size=0)
    ids = torch.randint(3, 99, (2, 6))
    torch.testing.assert_close(
        model(ids, token_type_ids=torch.zeros_like(ids)).last_hidden_state,
        model(ids).last_hidden_state,
        rtol=0,
        atol=0,
    )


# --- encoder-decoder: the decoder's input and its start token


@pytest.mark.parametrize("model_class", [HFAttentionSeq2SeqModel, HFAttentionForSeq2SeqLM])
def test_seq2seq_called_with_only_input_ids_asks_for_decoder_inputs(model_class):
    model = build(model_class, "seq2seq")
    with pytest.raises(
        ValueError,
        match=r"The decoder got no input: pass decoder_input_ids or decoder_inputs_embeds "
        r".*or labels",
    ):
        model(torch.randint(3, 99, (2, 6)))


ENCODER_DECODERS = [(HFAttentionForSeq2SeqLM, "seq2seq"), (HFAttentionRecurrentForSeq2SeqLM, "recurrent")]


@pytest.mark.parametrize(("source_rows", "target_rows"), [(1, 2), (2, 1)])
@pytest.mark.parametrize("given", ["input_ids", "encoder_outputs"])
@pytest.mark.parametrize(("model_class", "family"), ENCODER_DECODERS)
def test_encoder_decoders_refuse_a_source_broadcast_over_target_rows(
    model_class, family, given, source_rows, target_rows
):
    """Every encoder-decoder refuses, with one message naming both row counts, a source of one row and targets of
    two (or the reverse), which cross-attention would otherwise broadcast without a word."""
    model = build(model_class, family)
    source = torch.randint(3, 99, (source_rows, 5))
    inputs = {"encoder_outputs": model.get_encoder()(source)} if given == "encoder_outputs" else {"input_ids": source}
    message = (
        rf"decoder_input_ids has shape \({target_rows}, 3\), expected \({source_rows}, length\): one target row per "
        r"source row"
    )
    with pytest.raises(ValueError, match=message):
        model(**inputs, decoder_input_ids=torch.randint(3, 99, (target_rows, 3)))


def test_transformer_decoder_inputs_embeds_must_match_the_source_rows():
    model = build(HFAttentionForSeq2SeqLM, "seq2seq")
    with pytest.raises(ValueError, match=r"decoder_inputs_embeds has shape \(2, 3, 32\), expected \(1, length, E\)"):
        model(torch.randint(3, 99, (1, 5)), decoder_inputs_embeds=torch.randn(2, 3, 32))


@pytest.mark.parametrize(("model_class", "family"), ENCODER_DECODERS)
def test_generate_expands_the_source_itself_for_beams_and_returned_sequences(model_class, family):
    """The row check leaves generate() alone: it repeats each source row for its beams and returned sequences."""
    model = build(model_class, family)
    source = torch.randint(3, 99, (2, 5))
    for options in (
        {"num_beams": 3},
        {"num_beams": 2, "num_return_sequences": 2},
        {"do_sample": True, "num_return_sequences": 3},
    ):
        rows = 2 * options.get("num_return_sequences", 1)
        assert model.generate(source, max_new_tokens=3, **options).shape[0] == rows, options


@pytest.mark.parametrize("where", ["argument", "generation_config"])
@pytest.mark.parametrize("start", [150, -3])
def test_generate_with_decoder_start_token_outside_the_vocabulary(where, start):
    model = build(HFAttentionForSeq2SeqLM, "seq2seq")
    options = {"decoder_start_token_id": start} if where == "argument" else {}
    if where == "generation_config":
        model.generation_config.decoder_start_token_id = start
    with pytest.raises(ValueError, match=rf"decoder_start_token_id={start} is outside the vocabulary \[0, 99\)"):
        model.generate(torch.randint(3, 99, (2, 6)), max_new_tokens=2, **options)


@pytest.mark.parametrize("field", ["decoder_start_token_id", "pad_token_id"])
def test_teacher_forcing_with_special_token_outside_the_vocabulary(field):
    model = build(HFAttentionForSeq2SeqLM, "seq2seq")
    setattr(model.config, field, 150)  # assignment checks the kind; the vocabulary is checked where the id is used
    with pytest.raises(ValueError, match=rf"config.{field}=150 is outside the vocabulary \[0, 99\)"):
        model(torch.randint(3, 99, (2, 6)), labels=torch.randint(3, 99, (2, 4)))


# --- generation and pipelines


@pytest.mark.parametrize(
    ("model_class", "family"), [(HFAttentionForCausalLM, "decoder"), (HFAttentionForSeq2SeqLM, "seq2seq")]
)
def test_generate_with_an_empty_batch(model_class, family):
    model = build(model_class, family)
    with pytest.raises(ValueError, match=r"generate\(\) got input_ids with shape \(0, 3\): a batch of 0 rows"):
        model.generate(torch.zeros(0, 3, dtype=torch.long), max_new_tokens=2)


def test_seq2seq_pipeline_with_an_empty_list(saved_checkpoint):
    translate = pipeline(TASK, model=str(saved_checkpoint(HFAttentionForSeq2SeqLM, "seq2seq")))
    with pytest.raises(
        ValueError,
        match=r"Seq2SeqGenerationPipeline got an empty list: pass a source text or a "
        r"non-empty list",
    ):
        translate([], max_new_tokens=2)


@pytest.mark.parametrize(
    ("overrides", "positions", "message"),
    [
        ({}, [[-3, 0, 1, 2]], "position_ids contains -3: positions in the learned table start at 0"),
        ({"position_offset": 2}, [[-2, -1, 0, 1]], "position_ids contains -2"),  # would read BART's reserved rows
        ({}, [[0, 1, 2, 64]], "position 64 is beyond max_position_embeddings=64"),
    ],
)
def test_learned_positions_outside_the_table_are_refused(overrides, positions, message):
    model = build(HFAttentionEncoderModel, "encoder", position_encoding="learned", **overrides)
    with pytest.raises(ValueError, match=message):
        model(torch.randint(3, 99, (1, 4)), position_ids=torch.tensor(positions))


@pytest.mark.parametrize(
    ("positions", "message"),
    [
        (torch.arange(4.0)[None], r"position_ids must be an integer torch.Tensor of positions, got torch.float32"),
        ([[0, 1, 2, 3]], "position_ids must be an integer torch.Tensor of positions, got list"),
        (torch.arange(5)[None], r"position_ids has shape \(1, 5\), expected \(batch, length\) = \(2 or 1, 4\)"),
        (torch.arange(4), r"position_ids has shape \(4,\)"),
    ],
)
def test_position_ids_of_the_wrong_kind_or_shape_are_refused(positions, message):
    model = build(HFAttentionForCausalLM, "decoder", position_encoding="rotary")
    with pytest.raises(ValueError, match=message):
        model(torch.randint(3, 99, (2, 4)), position_ids=positions)


# Found by tests/test_fuzz.py (shrunk examples): a mask given as a list, and a 0/1 integer 4-D mask, which reads the
# other way round under the additive convention of 4-D masks.
@pytest.mark.parametrize(
    ("mask", "error", "message"),
    [
        ([[1, 1, 1]], TypeError, "attention_mask must be a torch.Tensor, got list"),
        (torch.ones(1, 1, 3, 3, dtype=torch.long), ValueError, "attention_mask is a 4-D mask of torch.int64"),
    ],
)
def test_masks_of_the_wrong_kind_are_refused(mask, error, message):
    model = build(HFAttentionForCausalLM, "decoder")
    with pytest.raises(error, match=message):
        model(torch.tensor([[5, 6, 7]]), attention_mask=mask)


@pytest.mark.parametrize("name", ["cache", "past_key_values"])
def test_a_cache_that_is_not_a_cache_object_is_refused(name):
    """Found by tests/test_fuzz.py: transformers 4's tuples of past keys and values failed with an AttributeError."""
    model = build(HFAttentionForCausalLM, "decoder")
    legacy = ((torch.zeros(1, 2, 3, 8), torch.zeros(1, 2, 3, 8)),)
    with pytest.raises(TypeError, match=f"{name} must be a transformers Cache .* got tuple .*not supported since"):
        model(torch.tensor([[5]]), **{name: legacy}, use_cache=True)


@pytest.mark.parametrize(
    "model_class", [HFAttentionEncoderModel, HFAttentionForMaskedLM, HFAttentionForTokenClassification]
)
@pytest.mark.parametrize("name", ["cache", "past_key_values"])
@pytest.mark.parametrize("value", ["cache object", "junk"])
def test_an_encoder_refuses_a_cache(model_class, name, value):
    """An encoder has no KV cache: one given was written to and read back as earlier keys on the next call (the
    outputs then differed from a plain call by up to 3.6), and a string gave an AttributeError."""
    from transformers.cache_utils import DynamicCache

    model = build(model_class, "encoder")
    ids = torch.tensor([[5, 6, 7]])
    cache = DynamicCache() if value == "cache object" else value
    with pytest.raises(TypeError, match=f"got {name}=.*an encoder takes no KV cache"):
        model(ids, **{name: cache})
    model(ids, past_key_values=None)  # what clients pass when they have no cache: accepted
