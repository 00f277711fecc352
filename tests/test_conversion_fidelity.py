"""What `from_hf` keeps of a source's config and what `to_hf` writes back, where the two once lost or refused what
transformers runs: every special id of an encoder (ModernBERT's cls/sep, BERT's), ModernBERT's sparse prediction
(refused in the source's words: its logits have another shape), RoPE scaling options that transformers reads as 0
or None (YaRN's `mscale_all_dim: 0` as in DeepSeek-style configs, ...), special ids outside the vocabulary, sliding
layers without a window, and ModernBERT head activations that compute the gate's function under another name.

Each case builds a tiny HF model from its config (random weights, moved from their initial values) and checks the
converted model's logits (or loss) against it, then the export's config and logits against the source's.
"""

import logging

import pytest
import torch
import transformers
from modern_references import DECODER, ORIGINAL_LENGTH, perturb
from transformers import (
    BertConfig,
    BertForMaskedLM,
    GPT2Config,
    GPT2ForSequenceClassification,
    GPT2LMHeadModel,
    ModernBertConfig,
    ModernBertForMaskedLM,
    ModernBertForSequenceClassification,
    Phi3Config,
    Phi3ForCausalLM,
)
from transformers.activations import ACT2FN

from hf_attention import from_hf
from hf_attention.architectures.llama import longrope_factors
from hf_attention.conversion.to_hf import to_hf

TOLERANCE = 1e-5
SMALL_VOCAB = 96
LENGTH = 24  # past ORIGINAL_LENGTH (16): every RoPE scaling acts
MODERNBERT = {
    "vocab_size": SMALL_VOCAB,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
    "local_attention": 8,
    "global_attn_every_n_layers": 3,
}
# Distinct ids, none of them HF's default, so that a lost or swapped id shows.
MODERNBERT_IDS = {"pad_token_id": 0, "bos_token_id": 3, "eos_token_id": 4, "cls_token_id": 5, "sep_token_id": 6}


def build(model_class, config, seed: int = 0):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = model_class(config)
    return perturb(model.float().eval(), seed)


def tokens(vocab_size: int = SMALL_VOCAB, rows: int = 2, length: int = LENGTH, seed: int = 0) -> torch.Tensor:
    return torch.randint(7, vocab_size, (rows, length), generator=torch.Generator().manual_seed(seed))


def logits(model, ids: torch.Tensor, **extra) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids, **extra).logits


def assert_same_logits(theirs, ours, ids: torch.Tensor) -> None:
    torch.testing.assert_close(logits(ours, ids), logits(theirs, ids), atol=TOLERANCE, rtol=TOLERANCE)


# ---------------------------------------------------------------------------------------------------------------------
# Special ids of encoders


@pytest.mark.parametrize("model_class", [ModernBertForMaskedLM, ModernBertForSequenceClassification])
def test_modernbert_keeps_every_special_id_both_ways(model_class):
    source = build(model_class, ModernBertConfig(**MODERNBERT, **MODERNBERT_IDS, num_labels=3))
    converted = from_hf(source)
    assert {name: getattr(converted.config, name) for name in MODERNBERT_IDS} == MODERNBERT_IDS
    ids = tokens()
    assert_same_logits(source, converted, ids)
    exported = to_hf(converted)
    # HF's defaults (50281, 50282) would lie outside the 96-token vocabulary: the source's ids come back
    assert {name: getattr(exported.config, name) for name in MODERNBERT_IDS} == MODERNBERT_IDS
    assert_same_logits(source, exported, ids)


def test_modernbert_export_of_a_model_without_markers_writes_none():
    converted = from_hf(build(ModernBertForMaskedLM, ModernBertConfig(**MODERNBERT, **MODERNBERT_IDS)))
    converted.config.cls_token_id = converted.config.sep_token_id = None
    exported = to_hf(converted)
    assert (exported.config.cls_token_id, exported.config.sep_token_id) == (None, None)


@pytest.mark.parametrize(
    "ids",
    [
        {"pad_token_id": 5, "bos_token_id": 3, "eos_token_id": 4, "cls_token_id": 6, "sep_token_id": 7},
        {},  # BertConfig's own: pad 0, no bos/eos, no cls/sep fields at all
    ],
)
def test_bert_keeps_every_special_id_both_ways(ids):
    config = BertConfig(
        vocab_size=SMALL_VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37, **ids
    )
    source = build(BertForMaskedLM, config)
    names = ("pad_token_id", "bos_token_id", "eos_token_id", "cls_token_id", "sep_token_id")
    expected = {name: getattr(source.config, name, None) for name in names}
    converted = from_hf(source)
    assert {name: getattr(converted.config, name) for name in names} == expected
    exported = to_hf(converted)
    assert {name: getattr(exported.config, name, None) for name in names} == expected
    # BertConfig has no cls/sep fields: they are written (as extra fields) only where the source had them
    assert ("cls_token_id" in exported.config.to_dict()) == ("cls_token_id" in ids)
    assert_same_logits(source, exported, tokens())


# ---------------------------------------------------------------------------------------------------------------------
# ModernBERT's sparse prediction


def test_modernbert_sparse_prediction_is_refused_in_the_sources_words():
    ignore = 5
    source = build(
        ModernBertForMaskedLM,
        ModernBertConfig(**MODERNBERT, **MODERNBERT_IDS, sparse_prediction=True, sparse_pred_ignore_index=ignore),
    )
    ids = tokens()
    labels = ids.clone()
    labels[:, ::3] = ignore  # a real token id, which sparse prediction leaves out of the loss
    with torch.no_grad():
        sparse = source(input_ids=ids, labels=labels)
    kept = int((labels != ignore).sum())
    # Why it cannot be expressed: the logits of the kept positions only, flattened (not (batch, length, vocab))
    assert sparse.logits.shape == (kept, SMALL_VOCAB)
    with pytest.raises(ValueError) as refusal:
        from_hf(source)
    message = str(refusal.value)
    for part in ("ModernBertConfig.sparse_prediction=True", f"sparse_pred_ignore_index={ignore}", "= False"):
        assert part in message, message

    # What the message says to do: the same weights convert, and labels -100 where the source's were `ignore` give
    # the sparse loss and, at the kept positions, its logits.
    source.sparse_prediction = source.config.sparse_prediction = False
    converted = from_hf(source)
    with torch.no_grad():
        dense = converted(input_ids=ids, labels=labels.masked_fill(labels == ignore, -100))
    torch.testing.assert_close(dense.loss, sparse.loss, atol=TOLERANCE, rtol=TOLERANCE)
    torch.testing.assert_close(dense.logits[labels != ignore], sparse.logits, atol=TOLERANCE, rtol=TOLERANCE)
    assert to_hf(converted).config.sparse_prediction is False


# ---------------------------------------------------------------------------------------------------------------------
# RoPE scaling options that transformers reads as 0 or None

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIGINAL_LENGTH}
ZERO_OPTIONS = {
    # DeepSeek-style configs write 0 for "no mscale"; transformers reads `if mscale and mscale_all_dim`
    "yarn_mscale_all_dim_0": {**YARN, "mscale": 1.0, "mscale_all_dim": 0.0},
    "yarn_mscale_0": {**YARN, "mscale": 0.0, "mscale_all_dim": 1.0},
    "yarn_betas_0": {**YARN, "beta_fast": 0, "beta_slow": 0},  # read with `or`: 32 and 1
    "yarn_attention_factor_0": {**YARN, "attention_factor": 0.0},  # read with `is None`: a factor of 0
    "yarn_truncate_none": {**YARN, "truncate": None},  # read with `if truncate:`: no rounding
    "dynamic_factor_0": {"rope_type": "dynamic", "factor": 0.0},  # base·(0 + 1)^…: the plain frequencies
    # a LongRoPE factor only picks the attention factor: <= 1 (0 too) means none, where "unset" would mean 64/16
    "longrope_factor_0": {
        "rope_type": "longrope",
        "factor": 0.0,
        "original_max_position_embeddings": ORIGINAL_LENGTH,
        **longrope_factors(8),
    },
}
# The Llama-shaped architectures (transformers' class names) that take any rope_parameters
DECODERS = ["Llama", "Qwen3", "Mistral", "Olmo2", "SmolLM3", "Qwen2"]


def _decoder(stem: str, rope: dict, **extra):
    config_class = getattr(transformers, f"{stem}Config")
    head_dim = {"head_dim": 16} if stem == "Qwen3" else {}  # 8 rotated pairs, as the LongRoPE factors above
    config = config_class(**{**DECODER, **extra}, **head_dim, rope_parameters={"rope_theta": 10000.0, **rope})
    return build(getattr(transformers, f"{stem}ForCausalLM"), config)


def _check_rope_round_trip(source) -> None:
    converted = from_hf(source)
    ids = tokens(DECODER["vocab_size"])
    assert_same_logits(source, converted, ids)
    exported = to_hf(converted)
    theirs, back = source.config.rope_parameters, exported.config.rope_parameters
    assert {key: back.get(key) for key in theirs} == theirs
    assert_same_logits(source, exported, ids)


@pytest.mark.parametrize("case", ZERO_OPTIONS)
def test_rope_options_read_as_transformers_reads_0_and_none(case):
    _check_rope_round_trip(_decoder("Llama", ZERO_OPTIONS[case]))


@pytest.mark.parametrize("stem", DECODERS)
def test_yarn_with_mscale_all_dim_0_converts_on_every_llama_shaped_decoder(stem):
    _check_rope_round_trip(_decoder(stem, ZERO_OPTIONS["yarn_mscale_all_dim_0"]))


@pytest.mark.parametrize("option", ["factor", "attention_factor"])
def test_phi3_longrope_options_of_0_convert(option):
    rope = {
        "rope_type": "longrope",
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
        option: 0.0,
        **longrope_factors(4),
    }
    config = Phi3Config(**DECODER, original_max_position_embeddings=ORIGINAL_LENGTH, rope_parameters=rope)
    _check_rope_round_trip(build(Phi3ForCausalLM, config))


def test_a_rope_option_refused_is_named_as_the_source_names_it():
    source = _decoder("Llama", {"rope_type": "linear", "factor": 0.0})  # transformers: infinite frequencies
    with pytest.raises(ValueError, match=r"LlamaConfig\.rope_parameters\['factor'\]=0\.0 must be a number > 0"):
        from_hf(source)


# ---------------------------------------------------------------------------------------------------------------------
# Special ids outside the vocabulary; sliding layers without a window


def test_marker_ids_outside_the_vocabulary_convert_as_none(caplog):
    source = _decoder("Llama", {"rope_type": "default"}, bos_token_id=500, eos_token_id=[2, 600])
    with caplog.at_level(logging.WARNING, logger="hf_attention.architectures.base"):
        converted = from_hf(source)
    assert "LlamaConfig.bos_token_id=500 is outside the vocabulary" in caplog.text
    assert "LlamaConfig.eos_token_id=[2, 600] holds 600" in caplog.text
    assert (converted.config.bos_token_id, converted.config.eos_token_id) == (None, [2])
    ids = tokens(DECODER["vocab_size"])
    assert_same_logits(source, converted, ids)
    # generate() reads the generation config, copied whole: the same tokens
    options = {"max_new_tokens": 6, "do_sample": False}
    assert torch.equal(converted.generate(ids, **options), source.generate(ids, **options))
    assert_same_logits(source, to_hf(converted), ids)


def test_modernbert_cls_and_sep_outside_the_vocabulary_convert_as_none(caplog):
    ids = {**MODERNBERT_IDS, "cls_token_id": 50281, "sep_token_id": 50282}  # HF's defaults, in a 96-token vocabulary
    source = build(ModernBertForMaskedLM, ModernBertConfig(**MODERNBERT, **ids))
    with caplog.at_level(logging.WARNING, logger="hf_attention.architectures.base"):
        converted = from_hf(source)
    assert "ModernBertConfig.cls_token_id=50281 is outside the vocabulary" in caplog.text
    assert (converted.config.cls_token_id, converted.config.sep_token_id) == (None, None)
    assert_same_logits(source, converted, tokens())


def test_pad_id_outside_the_vocabulary():
    """A causal LM never reads it (converted as None); a classifier pools each row at its last token before the pad
    id, so there it is refused, in the source's words."""
    config = {"vocab_size": SMALL_VOCAB, "n_embd": 32, "n_layer": 2, "n_head": 4, "pad_token_id": 500}
    source = build(GPT2LMHeadModel, GPT2Config(**config, bos_token_id=1, eos_token_id=2))
    converted = from_hf(source)
    assert converted.config.pad_token_id is None
    assert_same_logits(source, converted, tokens())
    classifier = build(GPT2ForSequenceClassification, GPT2Config(**config, bos_token_id=1, eos_token_id=2))
    with pytest.raises(
        ValueError, match=r"GPT2Config\.pad_token_id=500 is outside the vocabulary \[0, vocab_size=96\)"
    ):
        from_hf(classifier)


@pytest.mark.parametrize(("stem", "flag"), [("Qwen3", True), ("Qwen3", False), ("SmolLM3", True), ("Qwen2", True)])
def test_sliding_layers_without_a_window_are_refused_in_the_sources_words(stem, flag):
    config_class = getattr(transformers, f"{stem}Config")
    config = config_class(
        **DECODER,
        layer_types=["sliding_attention", "full_attention"],
        sliding_window=None,
        use_sliding_window=flag,
    )
    source = build(getattr(transformers, f"{stem}ForCausalLM"), config)
    with pytest.raises((TypeError, ValueError)):  # transformers' own forward pass has no window either
        source(input_ids=tokens(DECODER["vocab_size"]))
    name = f"{stem}Config"
    with pytest.raises(ValueError, match=rf"{name}\.layer_types makes layers \[0\] 'sliding_attention' but "):
        from_hf(source)
    with pytest.raises(ValueError, match=rf"{name}\.sliding_window=None") as refusal:
        from_hf(source)
    message = str(refusal.value)
    assert ("use_sliding_window=True" in message) == (not flag)
    assert "set it." not in message  # our config's own words ("... but sliding_window is None: set it.")


# ---------------------------------------------------------------------------------------------------------------------
# ModernBERT's head activation

# (hidden_activation, classifier_activation): names of one function, as transformers' ACT2FN computes them
SAME_FUNCTION = [
    ("gelu_pytorch_tanh", "gelu_pytorch_tanh"),
    ("gelu_pytorch_tanh", "gelu_new"),
    ("gelu_new", "gelu_pytorch_tanh"),
    ("silu", "swish"),
    ("swish", "silu"),
]


@pytest.mark.parametrize(("hidden", "head"), SAME_FUNCTION)
def test_act2fn_computes_these_names_alike(hidden, head):
    x = torch.linspace(-8, 8, 4001)
    torch.testing.assert_close(ACT2FN[head](x), ACT2FN[hidden](x), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("model_class", [ModernBertForMaskedLM, ModernBertForSequenceClassification])
@pytest.mark.parametrize(("hidden", "head"), SAME_FUNCTION)
def test_modernbert_head_activation_named_otherwise_converts(model_class, hidden, head):
    config = ModernBertConfig(
        **MODERNBERT, **MODERNBERT_IDS, hidden_activation=hidden, classifier_activation=head, num_labels=3
    )
    source = build(model_class, config)
    converted = from_hf(source)
    ids = tokens()
    assert_same_logits(source, converted, ids)
    exported = to_hf(converted)
    # the export names the kernel our layers run, for the gate and the head alike: a source's gelu_pytorch_tanh
    # comes back by its name
    kernel = "gelu_pytorch_tanh" if "gelu" in hidden else "silu"
    assert (exported.config.hidden_activation, exported.config.classifier_activation) == (kernel, kernel)
    assert_same_logits(source, exported, ids)


def test_modernbert_head_activation_of_another_function_is_refused():
    config = ModernBertConfig(**MODERNBERT, **MODERNBERT_IDS, hidden_activation="gelu", classifier_activation="silu")
    with pytest.raises(ValueError, match=r"classifier_activation='silu' with hidden_activation='gelu'"):
        from_hf(build(ModernBertForMaskedLM, config))
