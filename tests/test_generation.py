"""generate() on the decoder and encoder-decoder families: every strategy, cache equivalence, padding, errors."""

import pytest
import torch
from conftest import POSITION_ENCODINGS, build, left_pad, right_pad

from hf_attention import HFAttentionForCausalLM, HFAttentionForSeq2SeqLM
from hf_attention.runtime.compiled_generation import compiled_generate

FAMILIES = {"decoder": HFAttentionForCausalLM, "seq2seq": HFAttentionForSeq2SeqLM}
ROWS = [[5, 17, 33, 8, 61, 12], [7, 21, 3], [90, 4, 52, 11]]
STRATEGIES = {
    "greedy": {},
    "beam": {"num_beams": 3, "length_penalty": 0.7, "early_stopping": True},
    "beam_never_early": {"num_beams": 2, "early_stopping": "never", "num_return_sequences": 2},
    "sample": {"do_sample": True, "temperature": 0.8, "top_k": 10, "top_p": 0.9},
    "sample_many": {"do_sample": True, "top_k": 0, "num_return_sequences": 3},
    "repetition_penalty": {"repetition_penalty": 1.5},
}
NEW = 6


def model_of(family: str, **overrides):
    return build(FAMILIES[family], family, **overrides)


def prompts(family: str):
    """Left padding for decoder prompts (generation appends on the right); right padding for sources."""
    return left_pad(ROWS) if family == "decoder" else right_pad(ROWS)


def new_tokens(family: str, ids: torch.Tensor, output: torch.Tensor) -> torch.Tensor:
    """Generated part: decoders return prompt + new tokens; encoder-decoders return start token + new tokens."""
    return output[:, ids.shape[1] :] if family == "decoder" else output[:, 1:]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_runs(family, strategy):
    model = model_of(family)
    ids, mask = prompts(family)
    options = STRATEGIES[strategy]
    output = model.generate(ids, attention_mask=mask, max_new_tokens=NEW, eos_token_id=None, **options)
    copies = options.get("num_return_sequences", 1)
    assert output.shape[0] == len(ROWS) * copies
    assert new_tokens(family, ids, output).shape[1] == NEW  # no eos: exactly max_new_tokens
    assert int(output.max()) < model.config.vocab_size


@pytest.mark.parametrize("family", FAMILIES)
def test_generation_stops_at_eos(family):
    model = model_of(family)
    ids = torch.tensor([ROWS[0]])
    first = new_tokens(family, ids, model.generate(ids, max_new_tokens=1, eos_token_id=None))[0, 0]
    output = model.generate(ids, max_new_tokens=NEW, eos_token_id=int(first))
    assert new_tokens(family, ids, output).tolist() == [[int(first)]]


# Greedy under every positional scheme; beam search (which reorders the cache) under one scheme of each kind.
CACHE_CASES = [(position, "greedy") for position in POSITION_ENCODINGS] + [
    (position, "beam") for position in ("learned", "rotary", "relative")
]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(("position", "strategy"), CACHE_CASES)
def test_cache_modes_give_identical_tokens(family, position, strategy):
    model = model_of(family, position_encoding=position)
    ids, mask = prompts(family)
    options = {"attention_mask": mask, "max_new_tokens": NEW, "eos_token_id": None, **STRATEGIES[strategy]}
    dynamic = model.generate(ids, **options)
    assert torch.equal(model.generate(ids, use_cache=False, **options), dynamic)
    assert torch.equal(model.generate(ids, cache_implementation="static", **options), dynamic)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_padded_batch_equals_rows_one_by_one(family, position):
    model = model_of(family, position_encoding=position)
    ids, mask = prompts(family)
    options = {"max_new_tokens": NEW, "eos_token_id": None}
    batched = new_tokens(family, ids, model.generate(ids, attention_mask=mask, **options))
    for row, expected in zip(ROWS, batched, strict=True):
        alone = torch.tensor([row])
        assert torch.equal(new_tokens(family, alone, model.generate(alone, **options))[0], expected)


@pytest.mark.parametrize("family", FAMILIES)
def test_sampling_with_a_fixed_seed_is_reproducible(family):
    model = model_of(family)
    ids, mask = prompts(family)
    options = {"attention_mask": mask, "max_new_tokens": NEW, "do_sample": True, "top_p": 0.95, "eos_token_id": None}
    torch.manual_seed(123)
    first = model.generate(ids, **options)
    torch.manual_seed(123)
    assert torch.equal(model.generate(ids, **options), first)


def test_learned_positions_stop_with_a_clear_error_past_the_table():
    model = model_of("decoder", position_encoding="learned", max_position_embeddings=16)
    ids = torch.tensor([ROWS[0]])
    model.generate(ids, max_new_tokens=16 - ids.shape[1], eos_token_id=None)  # exactly fills the table
    with pytest.raises(ValueError, match="max_position_embeddings=16"):
        model.generate(ids, max_new_tokens=16, eos_token_id=None)


@pytest.mark.parametrize("position", ["sinusoidal", "rotary", "alibi", "relative", "none"])
def test_other_positions_generate_past_max_position_embeddings(position):
    model = model_of("decoder", position_encoding=position, max_position_embeddings=16)
    ids = torch.tensor([ROWS[0]])
    output = model.generate(ids, max_new_tokens=20, eos_token_id=None)
    assert output.shape[1] == ids.shape[1] + 20 > 16


@pytest.mark.parametrize("family", FAMILIES)
def test_prompt_longer_than_learned_table_is_a_clear_error(family):
    model = model_of(family, position_encoding="learned", max_position_embeddings=16)
    with pytest.raises(ValueError, match="beyond max_position_embeddings"):
        model.generate(torch.randint(5, 90, (1, 20)), max_new_tokens=2)


@pytest.mark.parametrize("family", FAMILIES)
def test_empty_prompt_is_a_clear_error(family):
    model = model_of(family)
    with pytest.raises(ValueError, match="empty"):
        model.generate(torch.zeros(1, 0, dtype=torch.long), max_new_tokens=2)


def test_compiled_generate_refuses_a_dynamic_cache():
    with pytest.raises(ValueError, match="static"):
        compiled_generate(model_of("decoder"), torch.tensor([ROWS[0]]), cache_implementation="dynamic")


@pytest.mark.slow
def test_compiled_static_generate_equals_dynamic():
    """torch.compile of the decoding step over a StaticCache (slow: compiling the graphs is most of its time)."""
    model = model_of("decoder", position_encoding="rotary")
    ids, mask = left_pad(ROWS)
    options = {"attention_mask": mask, "max_new_tokens": NEW, "eos_token_id": None}
    expected = model.generate(ids, **options)
    assert torch.equal(compiled_generate(model, ids, **options), expected)
    assert torch.equal(compiled_generate(model, ids, **options), expected)  # second call: compiled graphs reused
    assert hasattr(model, "_compiled_call"), "generate() did not compile the forward"
