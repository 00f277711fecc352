"""Continuous batching (`model.generate_batch`, what `transformers serve` runs): every request gets the tokens that
`generate()` gives it alone. The scheduler packs all requests' new tokens into one row, keeps their keys and values
in a paged cache and hands the model a 4-D mask over them; the model must read all three."""

import pytest
import torch
from conftest import build
from transformers import ContinuousBatchingConfig, GenerationConfig

from hf_attention import HFAttentionForCausalLM, HFAttentionForSeq2SeqLM, HFAttentionRecurrentForSeq2SeqLM

# Requests of different lengths, one longer than a prefill chunk of the small scheduler below, so that batches mix
# prefills (several tokens per request), chunked prefills (cached keys + several new ones) and decoding steps.
REQUESTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25], [20, 21], [40, 41, 42]]
NEW_TOKENS = 8
SMALL_SCHEDULER = {"num_blocks": 16, "page_size": 16, "max_batch_tokens": 16, "max_requests_per_batch": 4}


def _model(**overrides):
    # Larger initial weights than the default: a random tiny model then writes varied tokens, not one repeated id.
    return build(HFAttentionForCausalLM, "decoder", initializer_range=0.3, pad_token_id=0, **overrides)


def _one_by_one(model) -> list[list[int]]:
    return [
        model.generate(torch.tensor([r]), max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None)[
            0, len(r) :
        ].tolist()
        for r in REQUESTS
    ]


def _batched(model) -> list[list[int]]:
    config = GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None, pad_token_id=0)
    results = model.generate_batch(
        inputs=REQUESTS,
        generation_config=config,
        continuous_batching_config=ContinuousBatchingConfig(**SMALL_SCHEDULER),
        warmup=False,
    )
    return [results[request].generated_tokens for request in sorted(results, key=lambda r: int(r.split("_")[-1]))]


CASES = {
    "rotary": {"position_encoding": "rotary"},
    "learned": {"position_encoding": "learned"},
    "sinusoidal": {"position_encoding": "sinusoidal"},
    "alibi": {"position_encoding": "alibi"},
    "t5-buckets": {"position_encoding": "relative"},
    "rotary-eager": {"position_encoding": "rotary", "attn_implementation": "eager"},  # run as "paged|eager"
    "additive-score": {"position_encoding": "alibi", "attention_score": "additive", "attn_implementation": "eager"},
}


@pytest.mark.parametrize("case", CASES)
def test_generate_batch_gives_each_request_its_generate_tokens(case):
    model = _model(**CASES[case])
    expected = _one_by_one(model)
    assert len({tuple(tokens) for tokens in expected}) == len(REQUESTS)  # distinct outputs: a real comparison
    assert _batched(model) == expected
    assert model.config._attn_implementation == CASES[case].get("attn_implementation", "sdpa")  # restored


def test_the_encoder_decoder_family_refuses_the_paged_cache():
    from hf_attention.modeling.cache_argument import PagedAttentionCache

    model = build(HFAttentionForSeq2SeqLM, "seq2seq")
    paged = PagedAttentionCache.__new__(PagedAttentionCache)  # the type is what the model checks
    with pytest.raises(ValueError, match="Continuous batching .* decoder-only self-attention"):
        model(torch.tensor([[5, 6]]), decoder_input_ids=torch.tensor([[1]]), cache=paged)


# Every way into continuous batching; each goes through init_continuous_batching.
ENTRY_POINTS = ("generate_batch", "init_continuous_batching", "continuous_batching_context_manager")


def _start(model, entry: str, config: GenerationConfig) -> None:
    if entry == "generate_batch":
        model.generate_batch(inputs=REQUESTS, generation_config=config, warmup=False)
    elif entry == "init_continuous_batching":
        model.init_continuous_batching(generation_config=config)
    else:
        with model.continuous_batching_context_manager(config, warmup=False):
            pass


@pytest.mark.parametrize("entry", ENTRY_POINTS)
@pytest.mark.parametrize(
    ("model_class", "family"), [(HFAttentionForSeq2SeqLM, "seq2seq"), (HFAttentionRecurrentForSeq2SeqLM, "recurrent")]
)
def test_the_encoder_decoder_families_refuse_continuous_batching_before_it_is_set_up(model_class, family, entry):
    """Refused with an error that names the model and generate(), not transformers' AttributeError on the config
    field its setup reads (decoder-only models have `num_hidden_layers`, the encoder-decoders do not)."""
    model = build(model_class, family)
    config = GenerationConfig(max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None, pad_token_id=0)
    expected = rf"Continuous batching .* {model_class.__name__} is an encoder-decoder model .* generate\(\)"
    with pytest.raises(ValueError, match=expected):
        _start(model, entry, config)
    assert getattr(model, "_cached_continuous_batching_manager", None) is None
