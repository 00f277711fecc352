"""Causality and padding invariance: the future never leaks into the past, and padding never changes real tokens."""

import pytest
import torch
from conftest import POSITION_ENCODINGS, build, left_pad, right_pad

from hf_attention import HFAttentionEncoderModel, HFAttentionForCausalLM, HFAttentionForSeq2SeqLM

ROWS = [[5, 17, 33, 8, 61, 12, 9], [7, 21, 3, 77], [90, 4, 52, 11, 23]]


@pytest.mark.parametrize("backend", ["sdpa", "eager"])
@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_decoder_future_tokens_never_change_past_outputs(position, backend):
    model = build(HFAttentionForCausalLM, "decoder", position_encoding=position, attn_implementation=backend)
    ids = torch.randint(3, 99, (2, 10))
    changed = ids.clone()
    changed[:, 6:] = torch.randint(3, 99, (2, 4))
    with torch.no_grad():
        a, b = model(ids).logits, model(changed).logits
    torch.testing.assert_close(a[:, :6], b[:, :6], atol=1e-6, rtol=0)
    assert not torch.allclose(a[:, 6:], b[:, 6:])


@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_seq2seq_future_target_tokens_never_change_past_outputs(position):
    model = build(HFAttentionForSeq2SeqLM, "seq2seq", position_encoding=position)
    src, target = torch.randint(3, 99, (2, 7)), torch.randint(3, 99, (2, 8))
    changed = target.clone()
    changed[:, 5:] = torch.randint(3, 99, (2, 3))
    with torch.no_grad():
        a = model(src, decoder_input_ids=target).logits
        b = model(src, decoder_input_ids=changed).logits
    torch.testing.assert_close(a[:, :5], b[:, :5], atol=1e-6, rtol=0)


def rows_alone(model, rows, **kwargs):
    with torch.no_grad():
        return [model(torch.tensor([r]), **kwargs) for r in rows]


@pytest.mark.parametrize("backend", ["sdpa", "eager"])
@pytest.mark.parametrize("position", POSITION_ENCODINGS)
@pytest.mark.parametrize("pad", [left_pad, right_pad])
def test_decoder_padded_batch_equals_rows_alone(position, pad, backend):
    model = build(HFAttentionForCausalLM, "decoder", position_encoding=position, attn_implementation=backend)
    ids, mask = pad(ROWS)
    with torch.no_grad():
        batch = model(ids, attention_mask=mask).logits
    for i, alone in enumerate(rows_alone(model, ROWS)):
        torch.testing.assert_close(batch[i][mask[i].bool()], alone.logits[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("backend", ["sdpa", "eager"])
@pytest.mark.parametrize("position", POSITION_ENCODINGS)
@pytest.mark.parametrize("pad", [left_pad, right_pad])
def test_encoder_padded_batch_equals_rows_alone(position, pad, backend):
    model = build(HFAttentionEncoderModel, "encoder", position_encoding=position, attn_implementation=backend)
    ids, mask = pad(ROWS)
    with torch.no_grad():
        batch = model(ids, attention_mask=mask).last_hidden_state
    for i, alone in enumerate(rows_alone(model, ROWS)):
        torch.testing.assert_close(batch[i][mask[i].bool()], alone.last_hidden_state[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_seq2seq_padded_sources_equal_sources_alone(position):
    model = build(HFAttentionForSeq2SeqLM, "seq2seq", position_encoding=position)
    ids, mask = right_pad(ROWS)
    target = torch.randint(3, 99, (3, 5))
    with torch.no_grad():
        batch = model(ids, attention_mask=mask, decoder_input_ids=target).logits
        for i, row in enumerate(ROWS):
            alone = model(torch.tensor([row]), decoder_input_ids=target[i : i + 1]).logits
            torch.testing.assert_close(batch[i], alone[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("backend", ["sdpa", "eager"])
@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_fully_padded_rows_give_finite_outputs(position, backend):
    ids = torch.randint(3, 99, (2, 6))
    mask = torch.ones_like(ids)
    mask[1] = 0
    for cls, family in ((HFAttentionEncoderModel, "encoder"), (HFAttentionForCausalLM, "decoder")):
        model = build(cls, family, position_encoding=position, attn_implementation=backend)
        out = model(ids, attention_mask=mask, output_hidden_states=True)
        assert all(h.isfinite().all() for h in out.hidden_states)
    model = build(HFAttentionForSeq2SeqLM, "seq2seq", position_encoding=position, attn_implementation=backend)
    logits = model(ids, attention_mask=mask, decoder_input_ids=ids[:, :3]).logits
    assert logits.isfinite().all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fully_padded_rows_finite_in_half_precision(dtype):
    model = build(HFAttentionForCausalLM, "decoder", position_encoding="alibi").to(dtype)
    ids, mask = left_pad(ROWS)
    mask[1] = 0
    for backend in ("sdpa", "eager"):
        model.set_attn_implementation(backend)
        assert model(ids, attention_mask=mask).logits.isfinite().all()


@pytest.mark.parametrize("family", ["encoder", "decoder"])
@pytest.mark.parametrize("position", POSITION_ENCODINGS)
def test_a_mask_that_hides_nothing_changes_nothing_with_given_positions(family, position):
    """Queries and keys take the same given positions whether or not an all-ones mask comes with them (the keys'
    distances of ALiBi and T5 buckets used to be counted from the mask instead)."""
    model_class = HFAttentionEncoderModel if family == "encoder" else HFAttentionForCausalLM
    model = build(model_class, family, position_encoding=position, max_position_embeddings=64)
    ids, positions = torch.randint(3, 99, (2, 8)), torch.arange(4, 12).expand(2, -1)
    with torch.no_grad():
        alone = model(ids, position_ids=positions, use_cache=False if family == "decoder" else None)[0]
        masked = model(
            ids,
            position_ids=positions,
            attention_mask=torch.ones(2, 8, dtype=torch.long),
            use_cache=False if family == "decoder" else None,
        )[0]
    assert torch.equal(masked, alone)
