"""Bad input gets a ValueError that names the field, the value and what is allowed, before any work is done."""

import pytest
import torch
from conftest import build, tiny_config
from transformers import AutoModelForCausalLM

from hf_attention import HFAttentionEncoderModel, HFAttentionForCausalLM, HFAttentionForSeq2SeqLM
from hf_attention.modeling.cache_argument import cache_of


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"hidden_size": 30, "num_attention_heads": 4}, r"hidden_size=30 is not divisible by num_attention_heads=4"),
        (
            {"num_attention_heads": 4, "num_key_value_heads": 3},
            r"num_attention_heads=4 is not divisible by "
            r"num_key_value_heads=3",
        ),
        ({"attention_score": "cosine"}, r"attention_score='cosine' is not supported; allowed values are 'scaled_dot'"),
        ({"position_encoding": "xpos"}, r"position_encoding='xpos' is not supported"),
        ({"norm_position": "middle"}, r"norm_position='middle'"),
        ({"norm_type": "batchnorm"}, r"norm_type='batchnorm'"),
        ({"hidden_act": "tanh"}, r"hidden_act='tanh'.*'swiglu'"),
        ({"sinusoidal_layout": "random"}, r"sinusoidal_layout='random'"),
        ({"classifier_pooling": "max"}, r"classifier_pooling='max'"),
        ({"hidden_dropout_prob": 1.5}, r"hidden_dropout_prob=1.5 must be a probability"),
        ({"vocab_size": 0}, r"vocab_size=0 must be a positive integer"),
        ({"head_dim": 7, "position_encoding": "rotary"}, r"rotary.*even head_dim, got 7"),
        (
            {"attention_score": "additive", "attn_implementation": "sdpa"},
            r"attention_score='additive' needs "
            r"attn_implementation='eager'",
        ),
    ],
)
def test_invalid_config_values(overrides, message):
    with pytest.raises(ValueError, match=message):
        tiny_config("encoder", **overrides)


def test_kernel_score_with_sdpa_rejected_at_model_load_time():
    config = tiny_config("decoder", attention_score="gaussian")
    with pytest.raises(ValueError, match="needs attn_implementation='eager'"):
        AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    model = AutoModelForCausalLM.from_config(tiny_config("decoder", attention_score="gaussian"))
    assert model.config._attn_implementation == "eager"
    with pytest.raises(ValueError, match="needs attn_implementation='eager'"):
        model.set_attn_implementation("sdpa")
    # flex_attention's score_mod changes a dot product, so it is refused when set, as sdpa is (it was accepted)
    with pytest.raises(ValueError, match="attention_score='gaussian' needs attn_implementation='eager'"):
        model.set_attn_implementation("flex_attention")
    assert model.config._attn_implementation == "eager"  # unchanged by the refused switch


def test_flash_attention_rejected_with_reason():
    with pytest.raises(ValueError, match="flash"):
        AutoModelForCausalLM.from_config(tiny_config("decoder"), attn_implementation="flash_attention_2")


@pytest.mark.parametrize("bad_id", [99, 500, -1])
def test_token_ids_outside_vocabulary(bad_id):
    model = build(HFAttentionForCausalLM, "decoder")
    ids = torch.tensor([[5, 6, bad_id]])
    with pytest.raises(ValueError, match=rf"token id {bad_id}, outside the vocabulary \[0, 99\)"):
        model(ids)


@pytest.mark.parametrize("bad_id", [99, -1])
def test_token_ids_outside_vocabulary_in_a_cached_step(bad_id):
    """A decoding step (cache given) is not re-checked up front on CPU; the lookup's own failure is translated."""
    model = build(HFAttentionForCausalLM, "decoder").eval()
    with torch.no_grad():
        cache = cache_of(model(torch.tensor([[5, 6, 7]]), use_cache=True))
        with pytest.raises(ValueError, match=rf"token id {bad_id}, outside the vocabulary \[0, 99\)"):
            model(torch.tensor([[bad_id]]), cache=cache, use_cache=True)


def test_sequence_longer_than_learned_positions():
    model = build(HFAttentionEncoderModel, "encoder", position_encoding="learned", max_position_embeddings=8)
    model(torch.randint(3, 99, (1, 8)))  # exactly the table: fine
    with pytest.raises(ValueError, match=r"position 8 is beyond max_position_embeddings=8"):
        model(torch.randint(3, 99, (1, 9)))


def test_generation_past_learned_positions_stops_with_clear_error():
    model = build(HFAttentionForCausalLM, "decoder", position_encoding="learned", max_position_embeddings=10)
    with pytest.raises(ValueError, match="max_position_embeddings=10"):
        model.generate(torch.randint(3, 99, (1, 6)), max_new_tokens=8, do_sample=False, eos_token_id=None)


@pytest.mark.parametrize("shape", [(2, 6), (1, 7), (6,)])
def test_attention_mask_shape_must_match_inputs(shape):
    model = build(HFAttentionEncoderModel, "encoder")
    with pytest.raises(ValueError, match=r"attention_mask has shape .* expected \(batch, length\) = \(1, 6\)"):
        model(torch.randint(3, 99, (1, 6)), attention_mask=torch.ones(shape, dtype=torch.long))


def test_seq2seq_source_mask_shape_must_match_source():
    model = build(HFAttentionForSeq2SeqLM, "seq2seq")
    with pytest.raises(ValueError, match=r"attention_mask has shape \(2, 4\), expected .* = \(2, 6\)"):
        model(torch.randint(3, 99, (2, 6)), attention_mask=torch.ones(2, 4), decoder_input_ids=torch.ones(2, 3).long())
    encoder_outputs = model.get_encoder()(input_ids=torch.randint(3, 99, (2, 6)))
    with pytest.raises(ValueError, match="encoder_attention_mask has shape"):
        model(
            encoder_outputs=encoder_outputs, attention_mask=torch.ones(2, 4), decoder_input_ids=torch.ones(2, 3).long()
        )


def test_inputs_must_be_ids_or_embeddings_not_both():
    model = build(HFAttentionEncoderModel, "encoder")
    ids = torch.randint(3, 99, (1, 4))
    with pytest.raises(ValueError, match="exactly one of input_ids and inputs_embeds"):
        model(ids, inputs_embeds=model.get_input_embeddings()(ids))
