"""Export to the standard architectures: `to_hf(model)` and `hf-attention export`.

The oracle is transformers itself: the exported folder is loaded by a fresh interpreter in which hf_attention cannot
be imported and remote code is off, and its logits and generated tokens must be ours. Round trips go through the
import (`from_hf`) that the parity tests check against the same reference classes.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from conftest import export_candidates, tiny_config
from test_parity_hf import REFERENCES, build_reference
from test_save_load import thread_env
from text_fixtures import KIND_OF_FAMILY, make_tokenizer, pydoc_paragraphs

from hf_attention import (
    HFAttentionDecoderForSequenceClassification,
    HFAttentionEncoderModel,
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionForSequenceClassification,
    HFAttentionRecurrentConfig,
    HFAttentionRecurrentForSeq2SeqLM,
    from_hf,
)
from hf_attention.commands.cli import main as cli
from hf_attention.conversion.to_hf import ARCHITECTURES, export_card, export_checkpoint, exportable_as, to_hf

GPT2 = {"position_encoding": "learned", "norm_position": "pre", "scale_embeddings": False, "hidden_act": "gelu_new"}
GPT2.update(num_key_value_heads=4)
LLAMA = {
    "position_encoding": "rotary",
    "norm_position": "pre",
    "norm_type": "rmsnorm",
    "scale_embeddings": False,
    "hidden_act": "swiglu",
    "attention_bias": False,
    "mlp_bias": False,
    "tie_word_embeddings": False,
}
BERT = {
    "position_encoding": "learned",
    "scale_embeddings": False,
    "embedding_norm": True,
    "hidden_act": "gelu",
    "type_vocab_size": 2,
    "num_key_value_heads": 4,
}
BERT_MLM = {**BERT, "lm_head_transform": True, "lm_head_bias": True}
SEQ2SEQ = {"lm_head_bias": True, "freeze_lm_head_bias": True, "num_key_value_heads": 4}
BART = {**SEQ2SEQ, "position_encoding": "learned", "position_offset": 2, "embedding_norm": True, "hidden_act": "gelu"}
MARIAN = {**SEQ2SEQ, "position_encoding": "sinusoidal", "sinusoidal_layout": "concat", "hidden_act": "silu"}
T5 = {
    "position_encoding": "relative",
    "attention_score": "dot",
    "norm_position": "pre",
    "norm_type": "rmsnorm",
    "scale_embeddings": False,
    "attention_bias": False,
    "mlp_bias": False,
    "final_norm": True,
    "scale_lm_head_input": True,
    "num_key_value_heads": 4,
}
T5_V1_1 = {**T5, "hidden_act": "geglu_new", "scale_lm_head_input": False}

# name → (our class, family, config knobs, the architecture it is)
SHAPES = {
    "gpt2": (HFAttentionForCausalLM, "decoder", GPT2, "gpt2"),
    "gpt2_classifier": (HFAttentionDecoderForSequenceClassification, "decoder", GPT2, "gpt2"),
    "llama": (HFAttentionForCausalLM, "decoder", LLAMA, "llama"),
    "llama_classifier": (HFAttentionDecoderForSequenceClassification, "decoder", LLAMA, "llama"),
    "bert": (HFAttentionEncoderModel, "encoder", BERT, "bert"),
    "bert_mlm": (HFAttentionForMaskedLM, "encoder", BERT_MLM, "bert"),
    # Untied heads: the architecture then holds the output matrix (and BART/Marian each stack's embedding, BERT its
    # two bias names) as tensors of their own.
    "bert_mlm_untied": (HFAttentionForMaskedLM, "encoder", {**BERT_MLM, "tie_word_embeddings": False}, "bert"),
    "bart": (HFAttentionForSeq2SeqLM, "seq2seq", BART, "bart"),
    "bart_untied": (HFAttentionForSeq2SeqLM, "seq2seq", {**BART, "tie_word_embeddings": False}, "bart"),
    "marian": (HFAttentionForSeq2SeqLM, "seq2seq", MARIAN, "marian"),
    "marian_untied": (HFAttentionForSeq2SeqLM, "seq2seq", {**MARIAN, "tie_word_embeddings": False}, "marian"),
    "t5": (HFAttentionForSeq2SeqLM, "seq2seq", T5, "t5"),
    "t5_v1_1": (HFAttentionForSeq2SeqLM, "seq2seq", T5_V1_1, "t5"),
}
LABELS = {0: "negative", 1: "neutral", 2: "positive"}


def _perturbed(model):
    """Biases and norm weights moved off their 0/1 initialisation, so a misplaced one cannot hide."""
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, tensor in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                tensor.add_(0.1 * torch.randn(tensor.shape, generator=generator))
    return model.eval()


def build(name: str, **extra):
    model_class, family, knobs, _ = SHAPES[name]
    labels = {"id2label": LABELS} if "classifier" in name else {}
    return _perturbed(model_class(tiny_config(family, **{**knobs, **labels, **extra})))


def _inputs(family: str, vocab_size: int = 99) -> dict:
    ids = torch.randint(5, vocab_size, (2, 9), generator=torch.Generator().manual_seed(4))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    inputs = {"input_ids": ids * mask, "attention_mask": mask}
    if family == "seq2seq":
        inputs["decoder_input_ids"] = ids[:, :5]
    return inputs


def _prompt(family: str, inputs: dict) -> dict:
    """What generate() is given: the sources of an encoder-decoder; for a decoder, the batch padded on the left."""
    if family == "seq2seq":
        return {key: value for key, value in inputs.items() if not key.startswith("decoder_")}
    mask = inputs["attention_mask"]
    shifts = (mask == 0).sum(1)
    ids = torch.stack([row.roll(int(shift)) for row, shift in zip(inputs["input_ids"], shifts, strict=True)])
    return {"input_ids": ids, "attention_mask": mask.flip(1)}


def _outputs(model, family: str, inputs: dict) -> torch.Tensor:
    """Logits (hidden states for a bare encoder) at the real tokens; a padding position's output is not defined."""
    with torch.no_grad():
        out = model(**inputs)
    values = out.logits if hasattr(out, "logits") else out.last_hidden_state
    if family == "seq2seq" or values.dim() == 2:  # decoder positions are all real; a classifier has one row
        return values
    return values[inputs["attention_mask"].bool()]


def _state(model) -> dict:
    return dict(model.state_dict())


@pytest.mark.parametrize("name", list(SHAPES))
def test_export_computes_what_our_model_computes(name):
    model = build(name)
    family, architecture = SHAPES[name][1], SHAPES[name][3]
    exported = to_hf(model)
    assert exported.config.model_type == architecture
    assert type(exported).__module__.startswith("transformers.models.")
    inputs = _inputs(family)
    torch.testing.assert_close(_outputs(exported, family, inputs), _outputs(model, family, inputs), rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", list(SHAPES))
def test_round_trip_from_ours_is_bit_exact(name):
    model = build(name)
    back = from_hf(to_hf(model, SHAPES[name][3]))
    assert type(back) is type(model)
    ours, theirs = _state(model), _state(back)
    assert ours.keys() == theirs.keys()
    assert all(torch.equal(ours[key], theirs[key]) for key in ours)


REFERENCE_NAMES = ["gpt2", "llama", "gpt2_classifier", "llama_classifier", "bert", "bert_mlm", "bart", "marian", "t5"]


@pytest.mark.parametrize("name", [*REFERENCE_NAMES, "t5_v1_1"])
def test_round_trip_from_the_reference_is_bit_exact(name):
    reference = build_reference(name)
    exported = to_hf(from_hf(reference))
    assert type(exported) is type(reference)
    expected, got = reference.state_dict(), exported.state_dict()
    assert expected.keys() == got.keys()
    # BERT's pooler serves only next-sentence prediction; hf-attention has none, so it comes back as zeros.
    compared = [key for key in expected if not key.startswith("pooler.")]
    assert [key for key in compared if not torch.equal(expected[key], got[key])] == []
    assert all(not got[key].any() for key in expected if key.startswith("pooler."))


def _untied_reference(name: str):
    """A reference of `name` built with tie_word_embeddings=False: every tied name holds a tensor of its own."""
    model_class, make_config = REFERENCES[name]
    config = make_config()
    config.tie_word_embeddings = False
    return model_class._from_config(config).eval()


@pytest.mark.parametrize("name", ["bart", "marian", "bert_mlm"])
def test_untied_references_import_and_export_back_bit_exact(name):
    reference = _untied_reference(name)
    with torch.no_grad():  # one embedding for both stacks, and an untied head of its own
        if name == "bert_mlm":
            reference.cls.predictions.decoder.bias.normal_()
            reference.cls.predictions.bias.copy_(reference.cls.predictions.decoder.bias)
        else:
            for stack in (reference.model.encoder, reference.model.decoder):
                stack.embed_tokens.weight.copy_(reference.model.shared.weight)
    ours = from_hf(reference)
    assert not ours.config.tie_word_embeddings
    family = "encoder" if name == "bert_mlm" else "seq2seq"
    inputs = _inputs(family)
    torch.testing.assert_close(_outputs(ours, family, inputs), _outputs(reference, family, inputs), rtol=0, atol=1e-6)
    expected, got = reference.state_dict(), to_hf(ours).state_dict()
    assert expected.keys() == got.keys()
    assert [key for key in expected if not torch.equal(expected[key], got[key])] == []


def test_untied_references_that_hf_attention_cannot_hold_are_refused_or_dropped(caplog):
    bart = _untied_reference("bart")  # each stack's embedding initialised on its own: two embeddings
    with pytest.raises(ValueError, match=r"model.encoder.embed_tokens.weight differs from model.shared.weight"):
        from_hf(bart)
    # An untied BERT head adds cls.predictions.decoder.bias; cls.predictions.bias is never read, so it may differ.
    bert = _untied_reference("bert_mlm")
    with torch.no_grad():
        bert.cls.predictions.decoder.bias.normal_()
        bert.cls.predictions.bias.fill_(7.0)
    with caplog.at_level("WARNING", logger="hf_attention.conversion.from_hf"):
        ours = from_hf(bert)
    assert "dropping cls.predictions.bias" in caplog.text
    inputs = _inputs("encoder")
    torch.testing.assert_close(_outputs(ours, "encoder", inputs), _outputs(bert, "encoder", inputs), rtol=0, atol=1e-6)


def test_exportable_as_places_every_tensor_as_to_hf_does(monkeypatch):
    """`exportable_as` (what training checks before its first step) settles where each tensor goes, so a model
    that `to_hf` could not write is refused there too, not only at the end."""
    from transformers import BartForConditionalGeneration

    from hf_attention.conversion import to_hf as to_hf_module

    convert = to_hf_module.CONVERTERS[BartForConditionalGeneration]

    def forgetful(reference, weights):  # a converter that lost the place of one of our tensors
        converted = convert(reference, weights)
        del weights.out["lm_head.bias"]
        return converted

    monkeypatch.setitem(to_hf_module.CONVERTERS, BartForConditionalGeneration, forgetful)
    with pytest.raises(RuntimeError, match=r"bart has no place for \['lm_head.bias'\]"):
        exportable_as(build("bart"), "bart")


def test_neutral_differences_are_filled_with_zeros():
    knobs = {**BART, "lm_head_bias": False, "freeze_lm_head_bias": False}
    seq2seq = _perturbed(HFAttentionForSeq2SeqLM(tiny_config("seq2seq", **knobs)))
    bart = to_hf(seq2seq, "bart")
    assert not bart.final_logits_bias.any()
    inputs = _inputs("seq2seq")
    torch.testing.assert_close(
        _outputs(bart, "seq2seq", inputs), _outputs(seq2seq, "seq2seq", inputs), rtol=0, atol=1e-6
    )

    # BERT always adds a vocabulary bias; untied, under two names of its own: both are zeros.
    untied = {**BERT_MLM, "tie_word_embeddings": False, "lm_head_bias": False}
    masked_lm = _perturbed(HFAttentionForMaskedLM(tiny_config("encoder", **untied)))
    bert_mlm = to_hf(masked_lm, "bert")
    assert not bert_mlm.cls.predictions.decoder.bias.any() and not bert_mlm.cls.predictions.bias.any()
    inputs = _inputs("encoder")
    torch.testing.assert_close(
        _outputs(bert_mlm, "encoder", inputs), _outputs(masked_lm, "encoder", inputs), rtol=0, atol=1e-6
    )

    encoder = _perturbed(HFAttentionEncoderModel(tiny_config("encoder", **{**BERT, "type_vocab_size": 0})))
    bert = to_hf(encoder, "bert")
    assert bert.config.type_vocab_size == 1 and not bert.embeddings.token_type_embeddings.weight.any()
    inputs = _inputs("encoder")
    torch.testing.assert_close(
        _outputs(bert, "encoder", inputs), _outputs(encoder, "encoder", inputs), rtol=0, atol=1e-6
    )


def test_training_only_differences_warn_and_export(caplog):
    model = build("llama", hidden_dropout_prob=0.1)  # Llama has no dropout on the residual stream
    with caplog.at_level("WARNING", logger="hf_attention.conversion.to_hf"):
        exported = to_hf(model, "llama")
    assert exported.config.model_type == "llama"
    assert "hidden_dropout_prob=0.1 (llama needs 0.0)" in caplog.text


# How each architecture numbers the positions of a row padded on the left (docs/deploy.md, "Left padding"): ours count
# from the first real token; GPT-2, BERT, BART and Marian from the first column, GPT-2 and BERT taking `position_ids`
# to say otherwise; Llama and T5 see only distances between tokens.
FROM_THE_FIRST_COLUMN = ["gpt2", "gpt2_classifier", "bert", "bert_mlm"]
NO_POSITION_IDS = ["bart", "marian"]
ONLY_DISTANCES = ["llama", "llama_classifier", "t5", "t5_v1_1"]


def _left_padded(family: str) -> dict:
    """Two rows, the second with three padding tokens on the left (sources of an encoder-decoder)."""
    ids = torch.randint(5, 99, (2, 9), generator=torch.Generator().manual_seed(6))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    inputs = {"input_ids": ids * mask, "attention_mask": mask}
    if family == "seq2seq":
        inputs["decoder_input_ids"] = ids[:, :5]
    return inputs


def _max_difference(exported, model, family: str, inputs: dict, **extra) -> float:
    with torch.no_grad():
        theirs, ours = exported(**inputs, **extra), model(**inputs)
    values = [out.logits if hasattr(out, "logits") else out.last_hidden_state for out in (theirs, ours)]
    if family != "seq2seq" and values[0].dim() == 3:  # a padding position's output is not defined
        values = [value[inputs["attention_mask"].bool()] for value in values]
    return (values[0] - values[1]).abs().max().item()


@pytest.mark.parametrize("name", FROM_THE_FIRST_COLUMN + NO_POSITION_IDS + ONLY_DISTANCES)
def test_left_padded_rows_give_our_logits_where_the_docs_say(name):
    model = build(name)
    family = SHAPES[name][1]
    exported = to_hf(model)
    inputs = _left_padded(family)
    plain = _max_difference(exported, model, family, inputs)
    if name in ONLY_DISTANCES:
        assert plain <= 1e-6
    else:
        assert plain > 1e-5  # positions counted from the first column
    if name in FROM_THE_FIRST_COLUMN:
        positions = (inputs["attention_mask"].cumsum(-1) - 1).clamp(min=0)
        assert _max_difference(exported, model, family, inputs, position_ids=positions) <= 1e-6


def test_export_card_says_how_left_padded_rows_are_numbered():
    cards = {name: export_card(to_hf(build(name)), "tiny", "") for name in ("gpt2", "bert", "bart", "llama", "t5")}
    assert "same logits and tokens on rows without padding on the left" in cards["gpt2"]
    assert "pass `position_ids`" in cards["gpt2"] and "`generate()` passes them itself" in cards["gpt2"]
    assert "pass `position_ids`" in cards["bert"] and "generate" not in cards["bert"]
    assert "takes no `position_ids`: pad on the right" in cards["bart"]
    for name in ("llama", "t5"):  # only distances between tokens count: padding changes nothing
        assert "padded" not in cards[name] and "computes the same logits and tokens." in cards[name]


def test_gpt2_generate_numbers_left_padded_prompts_as_ours():
    model = build("gpt2")
    prompt = _prompt("decoder", _inputs("decoder"))
    assert (prompt["attention_mask"][:, 0] == 0).any()  # a row padded on the left
    ours = model.generate(**prompt, max_new_tokens=6, do_sample=False)
    assert torch.equal(to_hf(model).generate(**prompt, max_new_tokens=6, do_sample=False), ours)


def test_a_marian_export_takes_the_positions_of_its_table_and_says_so(caplog):
    """Our sinusoids are computed for any position; Marian looks them up in a table of max_position_embeddings rows,
    computed when the model is built. The export warns of the limit, and raising max_position_embeddings (which
    changes none of our outputs) lengthens the table."""
    model = build("marian", max_position_embeddings=4)
    source = torch.randint(5, 99, (1, 9), generator=torch.Generator().manual_seed(5))
    with caplog.at_level("WARNING", logger="hf_attention.conversion.to_hf"):
        short = to_hf(model, "marian")
    assert "max_position_embeddings=4 rows" in caplog.text and "at most 4 tokens" in caplog.text
    assert short.model.encoder.embed_positions.weight.shape[0] == 4
    with pytest.raises(IndexError):  # a 9-token source is beyond the table
        short.generate(input_ids=source, max_new_tokens=3)
    assert "at most 4 tokens" in export_card(short, "tiny", "")

    ours = model.generate(input_ids=source, max_new_tokens=3)
    model.config.max_position_embeddings = 16
    assert torch.equal(model.generate(input_ids=source, max_new_tokens=3), ours)  # the field is not read by ours
    longer = to_hf(model, "marian")
    assert torch.equal(longer.generate(input_ids=source, max_new_tokens=3), ours)
    inputs = {"input_ids": source, "decoder_input_ids": source[:, :5]}
    torch.testing.assert_close(
        _outputs(longer, "seq2seq", inputs), _outputs(model, "seq2seq", inputs), rtol=0, atol=1e-6
    )


def test_exports_whose_positions_are_as_limited_as_ours_do_not_warn(caplog):
    with caplog.at_level("WARNING", logger="hf_attention.conversion.to_hf"):
        for name in ("gpt2", "bert", "bart", "llama", "t5"):
            to_hf(build(name))
    assert "max_position_embeddings" not in caplog.text


@pytest.mark.parametrize(
    ("name", "dtype"), [("llama", torch.bfloat16), ("marian", torch.bfloat16), ("gpt2", torch.float64)]
)
def test_dtype_and_mode_follow_the_model(name, dtype):
    model = build(name).to(dtype).train()
    exported = to_hf(model)
    assert next(exported.parameters()).dtype == dtype and exported.training
    ours, back = model.state_dict(), from_hf(exported).state_dict()
    assert all(torch.equal(ours[key], back[key]) for key in ours)  # every value carried exactly


# ---------------------------------------------------------------------------------------------------------------------
# Refusals: one per knob that a standard architecture cannot express.

# the architectures a decoder may export as, in the registry's order
DECODERS = export_candidates(HFAttentionForCausalLM)
REFUSALS = [
    # (shape, overrides, target, fragments of the message)
    ("gpt2", {"position_encoding": "alibi"}, "auto", [f"No standard architecture among {DECODERS} has", "'alibi'"]),
    ("gpt2", {"attention_score": "additive"}, "auto", ["attention_score='additive'", DECODERS]),
    ("gpt2", {"attention_score": "gaussian"}, "gpt2", ["attention_score='gaussian' (gpt2 needs 'scaled_dot')"]),
    ("gpt2", {"norm_type": "rmsnorm"}, "gpt2", ["norm_type='rmsnorm' (gpt2 needs 'layernorm')"]),
    ("gpt2", {"hidden_act": "swiglu"}, "gpt2", ["hidden_act='swiglu' (gpt2 needs 'gelu_new')"]),
    ("gpt2", {"head_dim": 16}, "gpt2", ["head_dim=16 (gpt2 needs 8)"]),
    ("gpt2", {"num_key_value_heads": 2}, "gpt2", ["num_key_value_heads=2 (gpt2 needs 4)"]),
    ("gpt2", {"lm_head_bias": True}, "gpt2", ["lm_head_bias=True (gpt2 needs False)"]),
    ("gpt2", {"scale_lm_head_input": True}, "gpt2", ["scale_lm_head_input=True (gpt2 needs False)"]),
    ("gpt2", {"attention_bias": False}, "gpt2", ["attention_bias=False (gpt2 needs True)"]),
    ("gpt2", {"position_encoding": "sinusoidal"}, "gpt2", ["position_encoding='sinusoidal' (gpt2 needs 'learned')"]),
    ("gpt2", {"position_offset": 2}, "gpt2", ["position_offset=2 (gpt2 needs 0)"]),
    ("llama", {"scale_embeddings": True}, "llama", ["scale_embeddings=True (llama needs False)"]),
    ("llama", {"norm_position": "post", "final_norm": True}, "llama", ["norm_position='post' (llama needs 'pre')"]),
    ("llama", {"embedding_norm": True}, "llama", ["embedding_norm=True (llama needs False)"]),
    ("llama", {"final_norm": False}, "llama", ["final_norm=False (llama needs True)"]),
    ("llama", {"hidden_act": "relu"}, "llama", ["hidden_act='relu' (llama needs 'swiglu')"]),
    ("llama", {"position_encoding": "relative"}, "auto", ["position_encoding='relative'", "llama needs 'rotary'"]),
    ("bert", {"norm_position": "pre"}, "bert", ["norm_position='pre' (bert needs 'post')"]),
    ("bert", {"embedding_norm": False}, "bert", ["embedding_norm=False (bert needs True)"]),
    ("bert", {"scale_embeddings": True}, "auto", ["scale_embeddings=True (bert needs False)"]),
    ("bert_mlm", {"lm_head_transform": False}, "bert", ["lm_head_transform=False (bert needs True)"]),
    ("bart", {"position_offset": 0}, "bart", ["position_offset=0 (bart needs 2)"]),
    ("bart", {"layer_norm_eps": 1e-6}, "bart", ["layer_norm_eps=1e-06 (bart needs 1e-05)"]),
    ("bart", {"attention_score": "additive"}, "auto", ["No standard architecture among bart/marian/t5 has"]),
    (
        "marian",
        {"sinusoidal_layout": "interleaved"},
        "marian",
        ["sinusoidal_layout='interleaved' (marian needs 'concat')"],
    ),
    ("marian", {"embedding_norm": True}, "marian", ["embedding_norm=True (marian needs False)"]),
    ("t5", {"scale_embeddings": True}, "t5", ["scale_embeddings=True (t5 needs False)"]),
    ("t5", {"hidden_act": "geglu"}, "t5", ["hidden_act='geglu' (t5 needs 'relu')"]),
    ("t5", {"attention_score": "scaled_dot"}, "t5", ["attention_score='scaled_dot' (t5 needs 'dot')"]),
]


@pytest.mark.parametrize(("name", "overrides", "target", "fragments"), REFUSALS)
def test_refuses_what_the_architecture_cannot_express(name, overrides, target, fragments):
    model = build(name, **overrides)
    with pytest.raises(ValueError) as raised:
        to_hf(model, target)
    message = str(raised.value)
    assert all(fragment in message for fragment in fragments), message
    assert "Nothing was written" in message


def test_every_field_in_the_way_is_named():
    model = build("gpt2", norm_type="rmsnorm", attention_bias=False, position_encoding="alibi")
    with pytest.raises(ValueError, match="gpt2") as raised:
        to_hf(model, "gpt2")
    for fragment in ("norm_type='rmsnorm'", "attention_bias=False", "position_encoding='alibi'"):
        assert fragment in str(raised.value)


def test_refuses_classes_and_names_without_a_counterpart():
    classifier = HFAttentionForSequenceClassification(tiny_config("encoder", **BERT)).eval()
    with pytest.raises(ValueError, match="HFAttentionForSequenceClassification matches none of modernbert"):
        to_hf(classifier)  # a BERT-shaped classifier: only ModernBERT has an encoder classifier
    recurrent = HFAttentionRecurrentForSeq2SeqLM(HFAttentionRecurrentConfig(vocab_size=32, hidden_size=8)).eval()
    with pytest.raises(ValueError, match="HFAttentionRecurrentForSeq2SeqLM has no standard counterpart"):
        to_hf(recurrent)
    with pytest.raises(ValueError, match=r"cannot be written as t5; it has the counterparts gpt2, llama"):
        to_hf(build("gpt2"), "t5")
    with pytest.raises(ValueError, match=r"to='gpt3' is not an architecture; choose one of gpt2, llama"):
        to_hf(build("gpt2"), "gpt3")


# ---------------------------------------------------------------------------------------------------------------------
# The exported folder, loaded where hf_attention cannot be imported

LOADER = textwrap.dedent("""
    import json, sys
    sys.modules["hf_attention"] = None  # transformers alone must load and run the exported folder
    import torch
    from transformers import AutoConfig, AutoTokenizer, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM
    from transformers import AutoModelForSeq2SeqLM, AutoModelForSequenceClassification

    AUTO = {"CausalLM": AutoModelForCausalLM, "SequenceClassification": AutoModelForSequenceClassification,
            "MaskedLM": AutoModelForMaskedLM, "ConditionalGeneration": AutoModelForSeq2SeqLM,
            "MTModel": AutoModelForSeq2SeqLM, "LMHeadModel": AutoModelForCausalLM}
    results = {}
    for name, spec in json.loads(sys.argv[1]).items():
        folder = spec["folder"]
        architecture = AutoConfig.from_pretrained(folder).architectures[0]
        auto = next((cls for suffix, cls in AUTO.items() if architecture.endswith(suffix)), AutoModel)
        model = auto.from_pretrained(folder, trust_remote_code=False).eval()
        inputs = {key: torch.tensor(value) for key, value in spec["inputs"].items()}
        prompt = {key: torch.tensor(value) for key, value in spec["prompt"].items()}
        with torch.no_grad():
            out = model(**inputs)
        logits = out.logits if hasattr(out, "logits") else out.last_hidden_state
        result = {"module": type(model).__module__, "logits": logits.tolist(),
                  "tokens": AutoTokenizer.from_pretrained(folder)(spec["text"])["input_ids"]}
        if spec["generate"]:
            for beams in (1, 4):
                done = model.generate(**prompt, max_new_tokens=8, num_beams=beams, do_sample=False)
                result[f"beams{beams}"] = done.tolist()
        results[name] = result
    print(json.dumps(results))
""")
TEXT = "Attention weighs every value by how well its key matches the query."


@pytest.fixture(scope="module")
def exported_folders(tmp_path_factory):
    """Every shape saved with a trained tokenizer, exported with `export_checkpoint`, then loaded and run by a fresh
    interpreter without hf_attention; returns (our models, their specs, what that interpreter computed)."""
    texts = pydoc_paragraphs(200)
    tokenizers = {family: make_tokenizer(family, texts) for family in KIND_OF_FAMILY}
    models, specs = {}, {}
    for name, (_, family, _, architecture) in SHAPES.items():
        tokenizer = tokenizers[family]
        model = build(name, vocab_size=len(tokenizer))
        source = tmp_path_factory.mktemp(f"{name}-ours")
        model.save_pretrained(source)
        tokenizer.save_pretrained(source)
        destination = tmp_path_factory.mktemp(f"{name}-export") / architecture
        export_checkpoint(str(source), destination, to="auto")
        inputs = _inputs(family, len(tokenizer))
        models[name] = (model, tokenizer)
        specs[name] = {
            "folder": str(destination),
            "inputs": {key: value.tolist() for key, value in inputs.items()},
            "prompt": {key: value.tolist() for key, value in _prompt(family, inputs).items()},
            "text": TEXT,
            "generate": model.can_generate(),
        }
    home = tmp_path_factory.mktemp("home")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "HF_HUB_OFFLINE": "1", **thread_env()}
    done = subprocess.run(
        [sys.executable, "-c", LOADER, json.dumps(specs)],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return models, specs, json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SHAPES))
def test_exported_folder_loads_without_hf_attention(exported_folders, name):
    models, specs, results = exported_folders
    model, tokenizer = models[name]
    result, family = results[name], SHAPES[name][1]
    assert result["module"].startswith("transformers.models." + SHAPES[name][3])
    inputs = {key: torch.tensor(value) for key, value in specs[name]["inputs"].items()}
    theirs = torch.tensor(result["logits"])
    if family != "seq2seq" and theirs.dim() == 3:
        theirs = theirs[inputs["attention_mask"].bool()]
    torch.testing.assert_close(theirs, _outputs(model, family, inputs), rtol=0, atol=1e-6)
    assert result["tokens"] == tokenizer(TEXT)["input_ids"]
    if model.can_generate():
        prompt = _prompt(family, inputs)
        for beams in (1, 4):
            ours = model.generate(**prompt, max_new_tokens=8, num_beams=beams, do_sample=False)
            assert result[f"beams{beams}"] == ours.tolist(), f"{beams} beam(s)"


def test_export_card_says_how_to_load_and_keeps_the_source_card(saved_checkpoint, tmp_path):
    source = saved_checkpoint(HFAttentionForCausalLM, "decoder", **LLAMA)
    (source / "README.md").write_text("---\nlicense: mit\n---\n# My model\n\nTrained on pydoc.\n", encoding="utf-8")
    destination = tmp_path / "llama-export"
    try:
        assert cli(["export", str(source), str(destination), "--to", "llama"]) == 0
    finally:
        (source / "README.md").unlink()
    card = (destination / "README.md").read_text(encoding="utf-8")
    assert "AutoModelForCausalLM.from_pretrained" in card and "library_name: transformers" in card
    assert "### My model" in card and "Trained on pydoc." in card and "license: mit" not in card
    assert {p.name for p in destination.iterdir()} >= {"config.json", "model.safetensors", "tokenizer.json"}
    assert json.loads((destination / "config.json").read_text())["model_type"] == "llama"


def test_cli_refusal_writes_nothing(saved_checkpoint, tmp_path, capsys):
    source = saved_checkpoint(HFAttentionForCausalLM, "decoder", position_encoding="alibi")
    destination = tmp_path / "out"
    assert cli(["export", str(source), str(destination)]) == 1
    error = capsys.readouterr().err
    assert "position_encoding='alibi'" in error and "No standard architecture among gpt2/llama" in error
    assert not destination.exists() and list(tmp_path.iterdir()) == []


def test_cli_refuses_sources_that_are_not_hf_attention(tmp_path, capsys):
    reference = tmp_path / "gpt2"
    build_reference("gpt2").save_pretrained(reference)
    assert cli(["export", str(reference), str(tmp_path / "out")]) == 1
    assert "model_type 'gpt2' is not an hf-attention checkpoint" in capsys.readouterr().err


def test_cli_never_replaces_a_folder_without_overwrite(saved_checkpoint, tmp_path, capsys):
    source = saved_checkpoint(HFAttentionForCausalLM, "decoder", **LLAMA)
    destination = tmp_path / "taken"
    destination.mkdir()
    (destination / "notes.txt").write_text("mine")
    assert cli(["export", str(source), str(destination)]) == 1
    assert "non-empty folder" in capsys.readouterr().err
    assert (destination / "notes.txt").read_text() == "mine"


def test_every_architecture_has_a_shape_here():
    """Each architecture is exported by the tests: the first six here, today's open ones against transformers' own
    classes in test_modern_parity.py."""
    from modern_references import ARCHITECTURE

    assert {shape[3] for shape in SHAPES.values()} | set(ARCHITECTURE.values()) == set(ARCHITECTURES)
