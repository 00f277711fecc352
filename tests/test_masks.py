"""Boolean masks (True = attend): padding, offset-aware causal, fitting, combining, additive form; the masks' shape
checks (input_checks.py)."""

import pytest
import torch

from hf_attention.modeling.input_checks import check_attention_mask
from hf_attention.modeling.masks import (
    causal_mask,
    combine,
    fit_to_length,
    has_padding,
    padding_mask,
    to_additive,
)


def test_padding_mask_shape_and_values():
    attention_mask = torch.tensor([[1, 1, 0], [0, 1, 1]])
    mask = padding_mask(attention_mask)
    assert mask.shape == (2, 1, 1, 3) and mask.dtype == torch.bool
    assert mask[:, 0, 0].tolist() == [[True, True, False], [False, True, True]]


@pytest.mark.parametrize(("query_length", "key_length", "past_length"), [(4, 4, 0), (1, 6, 5), (3, 7, 4), (2, 9, 3)])
def test_causal_mask_is_offset_aware(query_length, key_length, past_length):
    for past in (past_length, torch.tensor(past_length)):
        mask = causal_mask(query_length, key_length, past, torch.device("cpu"))
        assert mask.shape == (1, 1, query_length, key_length) and mask.dtype == torch.bool
        for i in range(query_length):
            for j in range(key_length):
                # query i sits at absolute position past + i; keys after it (incl. an unfilled cache tail) are hidden
                assert bool(mask[0, 0, i, j]) == (j <= past_length + i), (i, j)


def test_causal_mask_without_cache_is_lower_triangular():
    mask = causal_mask(5, 5, 0, torch.device("cpu"))[0, 0]
    assert torch.equal(mask, torch.ones(5, 5, dtype=torch.bool).tril())


def test_fit_to_length():
    attention_mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    assert fit_to_length(attention_mask, 3) is attention_mask
    assert fit_to_length(attention_mask, 5).tolist() == [[1, 1, 0, 0, 0], [1, 1, 1, 0, 0]]
    assert fit_to_length(attention_mask, 2).tolist() == [[1, 1], [1, 1]]


def test_combine_is_a_broadcasting_and_that_ignores_none():
    assert combine() is None and combine(None, None) is None
    keys = padding_mask(torch.tensor([[1, 1, 0], [0, 1, 1]]))  # (2, 1, 1, 3)
    causal = causal_mask(3, 3, 0, torch.device("cpu"))  # (1, 1, 3, 3)
    assert combine(None, keys, None) is keys
    combined = combine(keys, None, causal)
    assert combined.shape == (2, 1, 3, 3)
    for b in range(2):
        for i in range(3):
            for j in range(3):
                assert bool(combined[b, 0, i, j]) == (bool(keys[b, 0, 0, j]) and j <= i)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64])
def test_to_additive_uses_the_dtype_minimum(dtype):
    mask = torch.tensor([[True, False], [False, False]])
    additive = to_additive(mask, dtype)
    assert additive.dtype == dtype
    minimum = torch.finfo(dtype).min
    assert additive.tolist() == [[0.0, minimum], [minimum, minimum]]
    assert torch.isfinite(additive).all()  # not -inf, and not a literal -1e9 (which is -inf in fp16)
    assert minimum != -1e9
    # small scores plus a fully masked row stay finite (-1e9 would be -inf in fp16): softmax is uniform, not NaN
    scores = torch.rand(2, 2).to(dtype) * 2 - 1
    probabilities = torch.softmax((scores + additive).to(torch.promote_types(dtype, torch.float32)), dim=-1)
    assert not torch.isnan(probabilities).any()


def test_has_padding():
    assert not has_padding(None)
    assert not has_padding(torch.ones(2, 3, dtype=torch.long))
    assert has_padding(torch.tensor([[1, 1, 0]]))


def test_check_attention_mask_names_the_shapes():
    check_attention_mask(None, 2, 5, "attention_mask")
    check_attention_mask(torch.ones(2, 5), 2, 5, "attention_mask")
    with pytest.raises(ValueError, match=r"decoder_attention_mask has shape \(2, 4\).*\(2, 5\)"):
        check_attention_mask(torch.ones(2, 4), 2, 5, "decoder_attention_mask")
    with pytest.raises(ValueError, match=r"\(1, 2, 5\)"):
        check_attention_mask(torch.ones(1, 2, 5), 2, 5, "attention_mask")
