"""Luong et al. (2015)'s recurrent decoder as options of the recurrent family: `attention_style="luong"` (the RNN
steps first and its new state s_t queries the source) and `input_feeding` (h̃_{t−1} joins the next step's input).
Defaults keep Bahdanau's decoder; bad combinations are refused with errors that name the fields; the state that
generate() carries gives what re-reading the whole target gives."""

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

from hf_attention import HFAttentionRecurrentConfig, HFAttentionRecurrentForSeq2SeqLM
from hf_attention.modeling.recurrent import RecurrentState

VOCAB = 40
LUONG = [
    {"cell": "gru", "attention_style": "luong", "input_feeding": False},
    {"cell": "gru", "attention_style": "luong", "input_feeding": True},
    {"cell": "lstm", "attention_style": "luong", "input_feeding": True, "attention_score": "dot"},
    {"cell": "lstm", "attention_style": "luong", "input_feeding": False, "bidirectional_encoder": False},
]


def variant_id(variant: dict) -> str:
    return "-".join(str(value) for value in variant.values())


def tiny(**overrides) -> HFAttentionRecurrentForSeq2SeqLM:
    torch.manual_seed(0)
    fields = {"vocab_size": VOCAB, "hidden_size": 16, "embedding_size": 12, "decoder_layers": 2, "dropout": 0.0}
    return HFAttentionRecurrentForSeq2SeqLM(HFAttentionRecurrentConfig(**{**fields, **overrides})).eval()


def batch():
    """Three right-padded sources (7, 5 and 3 tokens), and decoder inputs: the start token, then 5 tokens."""
    generator = torch.Generator().manual_seed(1)
    source = torch.randint(3, VOCAB, (3, 7), generator=generator)
    mask = torch.ones_like(source)
    mask[1, 5:] = 0
    mask[2, 3:] = 0
    targets = torch.randint(3, VOCAB, (3, 5), generator=generator)
    inputs = torch.cat([torch.ones(3, 1, dtype=torch.long), targets], dim=1)
    return source.masked_fill(mask == 0, 0), mask, inputs


def test_defaults_are_bahdanaus_decoder_and_an_old_config_loads_as_it():
    config = HFAttentionRecurrentConfig(vocab_size=VOCAB)
    assert (config.attention_style, config.input_feeding) == ("bahdanau", False)
    saved = config.to_dict()
    del saved["attention_style"], saved["input_feeding"]  # as written before the options existed
    assert HFAttentionRecurrentConfig.from_dict(saved).attention_style == "bahdanau"
    decoder = tiny().model.decoder
    assert decoder.rnn.input_size == 12 + 16  # token and context c_t, as before


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"attention_style": "luong2015"}, "attention_style='luong2015' is not supported"),
        ({"attention_style": None}, "attention_style=None is not supported"),
        ({"attention_style": "luong", "input_feeding": "yes"}, "input_feeding='yes' must be True or False"),
        ({"attention_style": "luong", "attention_score": "none"}, "attention_style='luong' needs attention"),
        ({"input_feeding": True}, "input_feeding=True feeds Luong's attentional state"),
        ({"attention_style": "bahdanau", "input_feeding": True}, "needs attention_style='luong'"),
    ],
)
def test_config_errors_name_the_fields(fields, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        HFAttentionRecurrentConfig(vocab_size=VOCAB, **fields)


def test_a_field_set_later_is_checked_too():
    config = HFAttentionRecurrentConfig(vocab_size=VOCAB, attention_style="luong")
    with pytest.raises(ValueError, match="attention_style='Luong' is not supported"):
        config.attention_style = "Luong"
    with pytest.raises(ValueError, match="input_feeding=1 must be True or False"):
        config.input_feeding = 1


def test_what_joins_the_token_at_the_rnn_input():
    assert tiny(attention_style="luong").model.decoder.rnn.input_size == 12  # the token alone
    assert tiny(attention_style="luong", input_feeding=True).model.decoder.rnn.input_size == 12 + 12  # and h̃_{t−1}


def test_luongs_query_is_the_state_after_the_step():
    """Without input feeding the decoder RNN reads the tokens alone; its outputs s_t are the queries, and the
    output is h̃_t = tanh(W_c[s_t; c_t]): both by hand against the model's weights and logits."""
    model = tiny(attention_style="luong", bidirectional_encoder=False)
    source, mask, inputs = batch()
    output = model(input_ids=source, attention_mask=mask, decoder_input_ids=inputs, output_attentions=True)
    decoder, score = model.model.decoder, model.model.decoder.attention.score
    annotations = output.encoder_last_hidden_state
    summary = model.model.encoder.summary(annotations, mask.sum(1))
    states, _ = decoder.rnn(decoder.embed_tokens(inputs), decoder.initial_state(summary))  # s_1 … s_T, (B, T, H)
    memory = decoder.memory(annotations)  # (B, S, H)
    energy = score.energy(torch.tanh(score.query_proj(states)[:, :, None] + score.key_proj(memory)[:, None]))
    weights = torch.softmax(energy.squeeze(-1).masked_fill(mask[:, None] == 0, float("-inf")), dim=-1)
    torch.testing.assert_close(output.cross_attentions[0][:, 0], weights, rtol=0, atol=1e-6)
    attentional = torch.tanh(decoder.output(torch.cat([states, weights @ memory], dim=-1)))
    torch.testing.assert_close(output.logits, model.lm_head(attentional), rtol=0, atol=1e-6)


def test_input_feeding_feeds_the_previous_attentional_state():
    """With input feeding, step t's RNN input is [token; h̃_{t−1}] with h̃_0 = 0: a hand-written loop over the
    model's own modules gives its logits."""
    model = tiny(attention_style="luong", input_feeding=True, bidirectional_encoder=False, decoder_layers=1)
    source, mask, inputs = batch()
    output = model(input_ids=source, attention_mask=mask, decoder_input_ids=inputs)
    decoder = model.model.decoder
    annotations = output.encoder_last_hidden_state
    state = decoder.initial_state(model.model.encoder.summary(annotations, mask.sum(1)))
    memory, source_mask = decoder.memory(annotations), mask.bool()[:, None, None]
    fed, written = torch.zeros(3, 12), []
    for token in decoder.embed_tokens(inputs).unbind(1):
        step, state = decoder.rnn(torch.cat([token, fed], dim=-1)[:, None], state)
        context, _ = decoder.attention(step, memory, source_mask)
        fed = torch.tanh(decoder.output(torch.cat([step, context], dim=-1)))[:, 0]
        written.append(fed)
    torch.testing.assert_close(output.logits, model.lm_head(torch.stack(written, dim=1)), rtol=0, atol=1e-6)


@pytest.mark.parametrize("variant", LUONG, ids=variant_id)
def test_cached_steps_equal_the_full_forward(variant):
    model = tiny(**variant)
    source, mask, inputs = batch()
    full = model(input_ids=source, attention_mask=mask, decoder_input_ids=inputs).logits
    pieces, state = [], None
    for start, end in ((0, 2), (2, 3), (3, 6)):  # two tokens, then one, then three
        step = model(
            input_ids=source, attention_mask=mask, decoder_input_ids=inputs[:, start:end], cache=state, use_cache=True
        )
        state = step.cache if hasattr(step, "cache") else step.past_key_values
        assert isinstance(state, RecurrentState) and state.get_seq_length() == end
        assert (state.attentional is not None) == variant["input_feeding"]
        pieces.append(step.logits)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=0, atol=1e-6)


@pytest.mark.parametrize("variant", LUONG, ids=variant_id)
def test_generate_with_the_state_equals_generate_without_it(variant):
    """Greedy and beam search (which reorders the state, h̃_{t−1} included) give the same tokens either way."""
    model = tiny(**variant)
    source, mask, _ = batch()
    for options in ({"do_sample": False}, {"num_beams": 3}, {"num_beams": 2, "num_return_sequences": 2}):
        cached = model.generate(input_ids=source, attention_mask=mask, max_new_tokens=8, **options)
        uncached = model.generate(input_ids=source, attention_mask=mask, max_new_tokens=8, use_cache=False, **options)
        assert torch.equal(cached, uncached), options


def test_beam_search_reorders_the_fed_attentional_state():
    state = RecurrentState(torch.arange(6.0).view(1, 3, 2), steps=1, attentional=torch.arange(9.0).view(3, 3))
    state.reorder_cache(torch.tensor([2, 2, 0]))
    assert torch.equal(state.attentional, torch.tensor([[6.0, 7, 8], [6, 7, 8], [0, 1, 2]]))
    assert torch.equal(state.hidden[0], torch.tensor([[4.0, 5], [4, 5], [0, 1]]))


def test_save_and_load_keep_the_style(tmp_path):
    model = tiny(attention_style="luong", input_feeding=True)
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert (reloaded.config.attention_style, reloaded.config.input_feeding) == ("luong", True)
    source, mask, inputs = batch()
    assert torch.equal(
        model(input_ids=source, attention_mask=mask, decoder_input_ids=inputs).logits,
        reloaded(input_ids=source, attention_mask=mask, decoder_input_ids=inputs).logits,
    )
