"""The references themselves, checked against values worked out by hand from the papers (an oracle must be right)."""

import math

import pytest
import torch

from reference import naive


def test_softmax_by_hand():
    assert naive.masked_softmax([0.0, 0.0], [True, True]) == [0.5, 0.5]
    assert naive.masked_softmax([1.0, 5.0, 2.0], [True, False, True]) == pytest.approx(
        [math.e / (math.e + math.e**2), 0.0, math.e**2 / (math.e + math.e**2)]
    )
    assert naive.masked_softmax([1.0, 2.0], [False, False]) == [0.0, 0.0]


def test_attention_one_key_copies_its_value():
    query, key = torch.randn(1, 1, 2, 4), torch.randn(1, 1, 1, 4)
    value = torch.tensor([[[[3.0, -1.0]]]])
    out, weights = naive.attention(query, key, value, naive.scaled_dot_score)
    torch.testing.assert_close(weights, torch.ones(1, 1, 2, 1, dtype=torch.float64))
    torch.testing.assert_close(out, value.double().expand(1, 1, 2, 2))


def test_scores_by_hand():
    assert naive.scaled_dot_score(0, [1.0, 2.0, 3.0, 4.0], [1.0, 1.0, 1.0, 1.0]) == 5.0
    assert naive.dot_score(0, [1.0, 2.0], [3.0, 4.0]) == 11.0
    assert naive.gaussian_score([2.0])(0, [1.0, 2.0], [3.0, 2.0]) == -1.0
    score = naive.additive_score(torch.eye(2), torch.eye(2), torch.tensor([[1.0, 2.0]]))
    assert score(0, [0.5, 0.0], [0.0, 0.25]) == pytest.approx(math.tanh(0.5) + 2 * math.tanh(0.25))


def test_sinusoidal_by_hand():
    table = naive.sinusoidal_table([0, 1], 4)
    torch.testing.assert_close(table[0], torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=torch.float64))
    expected = [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)]  # 10000^(2/4) = 100
    torch.testing.assert_close(table[1], torch.tensor(expected, dtype=torch.float64))
    concat = naive.sinusoidal_table([1], 4, "concat")[0]
    torch.testing.assert_close(concat, torch.tensor(expected, dtype=torch.float64)[[0, 2, 1, 3]])


def test_alibi_slopes_of_the_paper():
    # Press et al. 2022 §3: "For models with 8 heads, the slopes are 1/2, 1/4, …, 1/256".
    assert naive.alibi_slopes(8) == [2.0**-i for i in range(1, 9)]
    # 16 heads: 1/√2, 1/2, …, 1/256.
    assert naive.alibi_slopes(16) == pytest.approx([2.0 ** (-i / 2) for i in range(1, 17)])
    # 6 heads: the 4 slopes of 4 heads (1/4, …, 1/256), then the 1st and 3rd of 8 heads (1/2, 1/8).
    assert naive.alibi_slopes(6) == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]


def test_t5_buckets_by_hand():
    kwargs = {"bidirectional": True, "num_buckets": 32, "max_distance": 128}
    assert [naive.t5_bucket(r, **kwargs) for r in (0, -1, -7, 1, 7)] == [0, 1, 7, 17, 23]
    assert naive.t5_bucket(-8, **kwargs) == 8  # first log bucket
    assert naive.t5_bucket(-127, **kwargs) == 15 and naive.t5_bucket(-10_000, **kwargs) == 15
    assert naive.t5_bucket(10_000, **kwargs) == 31
    causal = {"bidirectional": False, "num_buckets": 32, "max_distance": 128}
    assert [naive.t5_bucket(r, **causal) for r in (5, 1, 0, -1, -15, -16, -10_000)] == [0, 0, 0, 1, 15, 16, 31]


def test_rotation_by_hand():
    rotated = naive.rotate_complex([1.0, 0.0], position=math.pi / 2)  # θ_0 = 1: a quarter turn
    assert rotated == pytest.approx([0.0, 1.0])


def test_norms_by_hand():
    x = torch.tensor([[3.0, 4.0]])
    torch.testing.assert_close(
        naive.rms_norm(x, torch.ones(2), 0.0), torch.tensor([[3.0, 4.0]], dtype=torch.float64) / math.sqrt(12.5)
    )
    torch.testing.assert_close(
        naive.layer_norm(x, torch.ones(2), torch.zeros(2), 0.0), torch.tensor([[-1.0, 1.0]], dtype=torch.float64)
    )
