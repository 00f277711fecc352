"""KV caching through HF Cache objects: cached == uncached logits and tokens, for every positional scheme."""

import pytest
import torch
from conftest import POSITION_ENCODINGS, build, left_pad
from transformers.cache_utils import DynamicCache, EncoderDecoderCache, StaticCache

from hf_attention import HFAttentionForCausalLM, HFAttentionForSeq2SeqLM

ROWS = [[5, 17, 33, 8, 61, 12, 9, 40], [7, 21, 3, 77, 14], [90, 4, 52, 11, 23, 6]]


def incremental_logits(model, ids, mask, prefill: int, cache):
    """Prefill `prefill` tokens, then feed the rest one at a time through `cache`; concatenated logits."""
    pieces = [model(ids[:, :prefill], attention_mask=mask[:, :prefill], cache=cache, use_cache=True).logits]
    for t in range(prefill, ids.shape[1]):
        pieces.append(model(ids[:, t : t + 1], attention_mask=mask[:, : t + 1], cache=cache, use_cache=True).logits)
    return torch.cat(pieces, dim=1)


@pytest.mark.parametrize("backend", ["sdpa", "eager"])
@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_decoder_cached_logits_equal_uncached_left_padded(position, backend):
    model = build(HFAttentionForCausalLM, "decoder", position_encoding=position, attn_implementation=backend)
    ids, mask = left_pad(ROWS)
    with torch.no_grad():
        full = model(ids, attention_mask=mask, use_cache=False).logits
        cached = incremental_logits(model, ids, mask, 4, DynamicCache(config=model.config))
    real = mask.bool()
    torch.testing.assert_close(cached[real], full[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_decoder_static_cache_logits_equal_uncached(position):
    model = build(HFAttentionForCausalLM, "decoder", position_encoding=position)
    ids, mask = left_pad(ROWS)
    with torch.no_grad():
        full = model(ids, attention_mask=mask, use_cache=False).logits
        cache = StaticCache(config=model.config, max_cache_len=16)
        cached = incremental_logits(model, ids, mask, 3, cache)
    real = mask.bool()
    torch.testing.assert_close(cached[real], full[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_seq2seq_cached_logits_equal_uncached(position):
    model = build(HFAttentionForSeq2SeqLM, "seq2seq", position_encoding=position)
    src, src_mask = left_pad(ROWS)
    target = torch.randint(3, 99, (3, 6))
    with torch.no_grad():
        full = model(src, attention_mask=src_mask, decoder_input_ids=target, use_cache=False).logits
        encoder_outputs = model.get_encoder()(input_ids=src, attention_mask=src_mask)
        cache = EncoderDecoderCache(DynamicCache(config=model.config), DynamicCache(config=model.config))
        pieces = [
            model(
                encoder_outputs=encoder_outputs,
                attention_mask=src_mask,
                decoder_input_ids=target[:, :2],
                cache=cache,
                use_cache=True,
            ).logits
        ]
        for t in range(2, target.shape[1]):
            pieces.append(
                model(
                    encoder_outputs=encoder_outputs,
                    attention_mask=src_mask,
                    decoder_input_ids=target[:, t : t + 1],
                    cache=cache,
                    use_cache=True,
                ).logits
            )
    torch.testing.assert_close(torch.cat(pieces, 1), full, atol=1e-5, rtol=0)
    assert all(cache.is_updated.values())  # cross-attention keys/values were projected once and reused


@pytest.mark.parametrize("position", POSITION_ENCODINGS)
@pytest.mark.parametrize("beams", [1, 3])
def test_decoder_generate_same_tokens_with_and_without_cache(position, beams):
    model = build(HFAttentionForCausalLM, "decoder", position_encoding=position)
    ids, mask = left_pad(ROWS)
    kwargs = {
        "attention_mask": mask,
        "max_new_tokens": 8,
        "num_beams": beams,
        "do_sample": False,
        "pad_token_id": 0,
        "eos_token_id": None,
    }
    with_cache = model.generate(ids, use_cache=True, **kwargs)
    without_cache = model.generate(ids, use_cache=False, **kwargs)
    assert torch.equal(with_cache, without_cache)
    assert with_cache.shape == (3, ids.shape[1] + 8)


@pytest.mark.parametrize("position", POSITION_ENCODINGS)
@pytest.mark.parametrize("beams", [1, 3])
def test_seq2seq_generate_same_tokens_with_and_without_cache(position, beams):
    model = build(HFAttentionForSeq2SeqLM, "seq2seq", position_encoding=position)
    src, mask = left_pad(ROWS)
    kwargs = {
        "attention_mask": mask,
        "max_new_tokens": 8,
        "num_beams": beams,
        "do_sample": False,
        "eos_token_id": None,
    }
    assert torch.equal(model.generate(src, use_cache=True, **kwargs), model.generate(src, use_cache=False, **kwargs))


@pytest.mark.parametrize("family", ["decoder", "seq2seq"])
def test_generate_with_static_cache_equals_dynamic(family):
    cls = HFAttentionForCausalLM if family == "decoder" else HFAttentionForSeq2SeqLM
    model = build(cls, family, position_encoding="rotary")
    ids, mask = left_pad(ROWS)
    kwargs = {"attention_mask": mask, "max_new_tokens": 6, "do_sample": False, "eos_token_id": None}
    dynamic = model.generate(ids, **kwargs)
    static = model.generate(ids, cache_implementation="static", **kwargs)
    assert torch.equal(dynamic, static)
