"""Config fields are type- and range-checked where they are set: in __init__, from a loaded config.json, on assignment.

Every error names the field, the value and what is allowed. Keys the configs do not know are stored, as
PretrainedConfig does.
"""

import json
import math

import pytest
import torch
from conftest import build, tiny_config
from transformers import AutoConfig, AutoModelForCausalLM
from transformers.models.t5.modeling_t5 import T5Attention

from hf_attention import HFAttentionEncoderModel, HFAttentionForCausalLM, HFAttentionForSeq2SeqLM
from hf_attention.modeling.positional import relative_position_bucket

BOOLEAN_FIELDS = (
    "scale_embeddings",
    "attention_bias",
    "mlp_bias",
    "embedding_norm",
    "use_cache",
    "tie_word_embeddings",
    "lm_head_bias",
    "freeze_lm_head_bias",
    "lm_head_transform",
    "scale_lm_head_input",
)


@pytest.mark.parametrize("field", BOOLEAN_FIELDS)
@pytest.mark.parametrize("value", ["false", "False", "no", "true", 0, 1, None])
def test_booleans_must_be_real_booleans(field, value):
    with pytest.raises(ValueError, match=rf"{field}={value!r} must be True or False"):
        tiny_config("decoder", **{field: value})


@pytest.mark.parametrize("value", ["false", "yes", 0])
def test_final_norm_is_a_boolean_or_none(value):
    with pytest.raises(ValueError, match=rf"final_norm={value!r} must be True, False or None"):
        tiny_config("decoder", final_norm=value)
    assert tiny_config("decoder", final_norm=None, norm_position="pre").final_norm is True
    assert tiny_config("decoder", final_norm=None, norm_position="post").final_norm is False


@pytest.mark.parametrize(
    ("family", "overrides", "message"),
    [
        # numbers: real numbers (not strings, not booleans), finite, in range
        ("decoder", {"rope_theta": 0}, r"rope_theta=0 must be a finite number > 0"),
        ("decoder", {"rope_theta": -10000.0}, r"rope_theta=-10000.0 must be a finite number > 0"),
        ("decoder", {"rope_theta": "10000"}, r"rope_theta='10000' must be a finite number > 0"),
        ("decoder", {"rope_theta": "abc"}, r"rope_theta='abc' must be a finite number > 0"),
        ("decoder", {"rope_theta": math.inf}, r"rope_theta=inf must be a finite number > 0"),
        ("decoder", {"layer_norm_eps": -1e-5}, r"layer_norm_eps=-1e-05 must be a finite number > 0"),
        ("decoder", {"layer_norm_eps": 0.0}, r"layer_norm_eps=0.0 must be a finite number > 0"),
        ("decoder", {"layer_norm_eps": math.nan}, r"layer_norm_eps=nan must be a finite number > 0"),
        ("decoder", {"initializer_range": -0.02}, r"initializer_range=-0.02 must be a finite number >= 0"),
        ("decoder", {"initializer_range": True}, r"initializer_range=True must be a finite number >= 0"),
        (
            "decoder",
            {"hidden_dropout_prob": "0.1"},
            r"hidden_dropout_prob='0.1' must be a probability: a number in "
            r"\[0, 1\)",
        ),
        ("decoder", {"hidden_dropout_prob": "abc"}, r"hidden_dropout_prob='abc' must be a probability"),
        ("decoder", {"attention_dropout": -0.1}, r"attention_dropout=-0.1 must be a probability"),
        ("decoder", {"activation_dropout": 1.0}, r"activation_dropout=1.0 must be a probability"),
        ("decoder", {"activation_dropout": None}, r"activation_dropout=None must be a probability"),
        ("encoder", {"classifier_dropout": "0.1"}, r"classifier_dropout='0.1' must be a probability"),
        # integers
        ("encoder", {"type_vocab_size": "2"}, r"type_vocab_size='2' must be an integer >= 0"),
        ("encoder", {"type_vocab_size": -1}, r"type_vocab_size=-1 must be an integer >= 0"),
        ("encoder", {"type_vocab_size": 2.0}, r"type_vocab_size=2.0 must be an integer >= 0"),
        ("decoder", {"position_offset": 1.5}, r"position_offset=1.5 must be an integer >= 0"),
        ("decoder", {"position_offset": -2}, r"position_offset=-2 must be an integer >= 0"),
        ("encoder", {"num_hidden_layers": "2"}, r"num_hidden_layers='2' must be a positive integer"),
        ("decoder", {"num_hidden_layers": 0}, r"num_hidden_layers=0 must be a positive integer"),
        ("seq2seq", {"encoder_layers": 2.0}, r"encoder_layers=2.0 must be a positive integer"),
        ("seq2seq", {"decoder_layers": True}, r"decoder_layers=True must be a positive integer"),
        ("decoder", {"hidden_size": "32"}, r"hidden_size='32' must be a positive integer"),
        ("decoder", {"head_dim": 0}, r"head_dim=0 must be a positive integer"),
        ("decoder", {"max_position_embeddings": -1}, r"max_position_embeddings=-1 must be a positive integer"),
        (
            "decoder",
            {"relative_attention_num_buckets": "32"},
            r"relative_attention_num_buckets='32' must be a positive "
            r"integer",
        ),
        ("encoder", {"classifier_pooling": 1}, r"classifier_pooling=1 is not supported; allowed values are 'mean'"),
        # special token ids: None or an int in [0, vocab_size)
        (
            "decoder",
            {"pad_token_id": 99},
            r"pad_token_id=99 is outside the vocabulary: token ids must be None or in "
            r"\[0, vocab_size=99\)",
        ),
        ("decoder", {"pad_token_id": -1}, r"pad_token_id=-1 is outside the vocabulary"),
        ("decoder", {"bos_token_id": 1.5}, r"bos_token_id=1.5 must be None or an integer token id"),
        ("decoder", {"bos_token_id": "1"}, r"bos_token_id='1' must be None or an integer token id"),
        ("decoder", {"eos_token_id": True}, r"eos_token_id=True must be None, an integer token id or a list of them"),
        (
            "decoder",
            {"eos_token_id": [2, "3"]},
            r"eos_token_id=\[2, '3'\] must be None, an integer token id or a list",
        ),
        ("decoder", {"eos_token_id": [2, 200]}, r"eos_token_id=\[2, 200\] is outside the vocabulary"),
        (
            "seq2seq",
            {"decoder_start_token_id": 200},
            r"decoder_start_token_id=200 is outside the vocabulary: token ids "
            r"must be None or in \[0, vocab_size=99\)",
        ),
        ("seq2seq", {"bos_token_id": 150}, r"bos_token_id=150 is outside the vocabulary"),
    ],
)
def test_invalid_field_types_and_ranges(family, overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(family, **overrides)


@pytest.mark.parametrize(
    ("family", "overrides"),
    [
        ("decoder", {"rope_theta": 10000}),  # an int from JSON
        ("decoder", {"rope_theta": 500000.0, "position_encoding": "rotary"}),
        ("decoder", {"layer_norm_eps": 1e-12}),
        ("decoder", {"initializer_range": 0}),
        ("decoder", {"hidden_dropout_prob": 0, "attention_dropout": 0.999}),
        ("encoder", {"classifier_dropout": None, "type_vocab_size": 0, "position_offset": 0}),
        ("decoder", {"pad_token_id": None, "bos_token_id": None, "eos_token_id": None}),
        ("decoder", {"eos_token_id": [2, 98], "pad_token_id": 98}),
        ("seq2seq", {"bos_token_id": None, "decoder_start_token_id": None}),
        ("seq2seq", {"bos_token_id": 5}),  # decoder_start_token_id defaults to bos
    ],
)
def test_valid_edge_values_are_accepted(family, overrides):
    config = tiny_config(family, **overrides)
    for field, value in overrides.items():
        assert getattr(config, field) == value


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("scale_embeddings", "false", r"scale_embeddings='false' must be True or False"),
        ("rope_theta", -1.0, r"rope_theta=-1.0 must be a finite number > 0"),
        ("hidden_dropout_prob", "0.1", r"hidden_dropout_prob='0.1' must be a probability"),
        ("norm_type", "batchnorm", r"norm_type='batchnorm' is not supported"),
        ("pad_token_id", 1.0, r"pad_token_id=1.0 must be None or an integer token id"),
    ],
)
def test_fields_are_checked_on_assignment_too(field, value, message):
    config = tiny_config("decoder")
    before = getattr(config, field)
    with pytest.raises(ValueError, match=message):
        setattr(config, field, value)
    assert getattr(config, field) == before


def test_unknown_keys_are_stored_as_pretrainedconfig_does(tmp_path):
    config = tiny_config("decoder", my_experiment_note="baseline", scale_embedings=False)  # (sic): a typo is kept
    assert config.my_experiment_note == "baseline" and config.scale_embedings is False
    assert config.scale_embeddings is True
    config.save_pretrained(tmp_path)
    assert AutoConfig.from_pretrained(tmp_path).my_experiment_note == "baseline"


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("scale_embeddings", "false", r"scale_embeddings='false' must be True or False"),
        ("tie_word_embeddings", "false", r"tie_word_embeddings='false' must be True or False"),
        ("hidden_dropout_prob", "0.1", r"hidden_dropout_prob='0.1' must be a probability"),
        ("layer_norm_eps", -1e-5, r"layer_norm_eps=-1e-05 must be a finite number > 0"),
        ("pad_token_id", 500, r"pad_token_id=500 is outside the vocabulary"),
    ],
)
def test_hand_edited_config_json_fails_on_load(tmp_path, field, value, message):
    build(HFAttentionForCausalLM, "decoder").save_pretrained(tmp_path)
    path = tmp_path / "config.json"
    fields = json.loads(path.read_text())
    fields[field] = value
    path.write_text(json.dumps(fields))
    with pytest.raises(ValueError, match=message):
        AutoConfig.from_pretrained(tmp_path)
    with pytest.raises(ValueError, match=message):
        AutoModelForCausalLM.from_pretrained(tmp_path)


# --- T5 relative buckets: the formula needs exact = half the buckets of a direction >= 1, and max_distance > exact


@pytest.mark.parametrize(
    ("family", "buckets", "distance", "message"),
    [
        ("encoder", 1, 128, r"relative_attention_num_buckets=1 is too small for an encoder: it needs at least 4"),
        ("encoder", 2, 128, r"relative_attention_num_buckets=2 is too small for an encoder: it needs at least 4"),
        ("encoder", 3, 128, r"relative_attention_num_buckets=3 is too small for an encoder: it needs at least 4"),
        ("seq2seq", 3, 128, r"relative_attention_num_buckets=3 is too small for an encoder: it needs at least 4"),
        ("decoder", 1, 128, r"relative_attention_num_buckets=1 is too small for a decoder: it needs at least 2"),
        (
            "encoder",
            32,
            8,
            r"relative_attention_max_distance=8 must be greater than 8: in an encoder, "
            r"relative_attention_num_buckets=32 gives distances below 8 a bucket each",
        ),
        ("encoder", 32, 4, r"relative_attention_max_distance=4 must be greater than 8: in an encoder"),
        ("decoder", 32, 16, r"relative_attention_max_distance=16 must be greater than 16: in a decoder"),
        ("seq2seq", 32, 12, r"relative_attention_max_distance=12 must be greater than 16: in a decoder"),
    ],
)
def test_relative_bucket_settings_the_formula_cannot_serve(family, buckets, distance, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(
            family,
            position_encoding="relative",
            relative_attention_num_buckets=buckets,
            relative_attention_max_distance=distance,
        )


def _refused(family: str, buckets: int, distance: int) -> bool:
    try:
        tiny_config(
            family,
            position_encoding="relative",
            relative_attention_num_buckets=buckets,
            relative_attention_max_distance=distance,
        )
    except ValueError:
        return True
    return False


def test_refused_relative_settings_are_exactly_those_where_t5_buckets_leave_the_table():
    """HF's T5 is the oracle: a setting is accepted iff its bucket formula stays in [0, num_buckets) at any
    distance (refused ones divide by zero, or give negative / huge buckets once inputs are long)."""
    distances = torch.cat([torch.arange(-600, 601), torch.tensor([10**4, -(10**4), 10**6, -(10**6)])])
    for family, directions in (("encoder", (True,)), ("decoder", (False,)), ("seq2seq", (True, False))):
        for buckets in range(1, 14):
            for distance in range(1, 16):
                in_table = True
                for bidirectional in directions:
                    try:
                        reference = T5Attention._relative_position_bucket(
                            distances, bidirectional=bidirectional, num_buckets=buckets, max_distance=distance
                        )
                    except ZeroDivisionError:
                        in_table = False
                        continue
                    in_table &= bool((reference >= 0).all() and (reference < buckets).all())
                    if in_table:
                        ours = relative_position_bucket(
                            distances, bidirectional=bidirectional, num_buckets=buckets, max_distance=distance
                        )
                        assert torch.equal(ours, reference)
                assert _refused(family, buckets, distance) == (not in_table), (family, buckets, distance)


@pytest.mark.parametrize(
    ("model_class", "family", "buckets", "distance"),
    [
        (HFAttentionEncoderModel, "encoder", 4, 2),
        (HFAttentionForCausalLM, "decoder", 2, 2),
        (HFAttentionForSeq2SeqLM, "seq2seq", 4, 3),
    ],
)
def test_smallest_relative_settings_run_on_long_inputs(model_class, family, buckets, distance):
    model = build(
        model_class,
        family,
        position_encoding="relative",
        relative_attention_num_buckets=buckets,
        relative_attention_max_distance=distance,
        max_position_embeddings=64,
    )
    ids = torch.randint(3, 99, (1, 200))
    extra = {"decoder_input_ids": ids[:, :150]} if family == "seq2seq" else {}
    with torch.no_grad():
        output = model(ids, **extra)
    assert torch.isfinite(output[0]).all()
