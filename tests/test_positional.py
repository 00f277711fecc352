"""Positional encodings against the naive references of tests/reference (paper formulas, Python loops)."""

import pytest
import torch
from reference import naive

from hf_attention.modeling.attention import apply_rotary, rotate_half
from hf_attention.modeling.positional import (
    POSITIONAL_ENCODINGS,
    ALiBiBias,
    LearnedPositionalEmbedding,
    RelativePositionBias,
    RotaryEmbedding,
    SinusoidalPositionalEmbedding,
    alibi_slopes,
    relative_position_bucket,
)

# --- sinusoidal -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["interleaved", "concat"])
@pytest.mark.parametrize("dim", [4, 16, 30])
def test_sinusoidal_matches_the_paper_table(layout, dim):
    positions = list(range(40))
    encoding = SinusoidalPositionalEmbedding(embedding_dim=dim, layout=layout)
    table = encoding(torch.tensor([positions]))
    assert table.shape == (1, 40, dim) and table.dtype == torch.float32
    torch.testing.assert_close(table[0].double(), naive.sinusoidal_table(positions, dim, layout), atol=1e-6, rtol=0)


@pytest.mark.parametrize("layout", ["interleaved", "concat"])
def test_sinusoidal_large_and_per_row_positions(layout):
    positions = torch.tensor([[1_000, 4_097, 65_535], [123_456, 999_999, 7]])
    table = SinusoidalPositionalEmbedding(embedding_dim=16, layout=layout)(positions)
    for b in range(2):
        expected = naive.sinusoidal_table(positions[b].tolist(), 16, layout)
        torch.testing.assert_close(table[b].double(), expected, atol=1e-6, rtol=0)


# --- learned ----------------------------------------------------------------------------------------------------


def test_learned_looks_up_rows_after_the_offset():
    encoding = LearnedPositionalEmbedding(num_positions=6, embedding_dim=3, offset=2)
    torch.nn.init.normal_(encoding.weight)
    positions = torch.tensor([[0, 1, 5], [3, 3, 4]])
    torch.testing.assert_close(encoding(positions), encoding.weight[positions + 2])


def test_learned_raises_beyond_the_table():
    encoding = LearnedPositionalEmbedding(num_positions=8, embedding_dim=4)
    encoding(torch.tensor([[7]]))  # the last row is fine
    with pytest.raises(ValueError, match=r"position 8 .*max_position_embeddings=8"):
        encoding(torch.tensor([[0, 8]]))


# --- rotary -----------------------------------------------------------------------------------------------------


def _rotate(x: torch.Tensor, positions: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    """(B, H, T, D) rotated by the library at (B, T) positions."""
    cos, sin = RotaryEmbedding(head_dim=x.shape[-1], base=base)(positions, dtype=x.dtype)
    assert cos.shape == sin.shape == (*positions.shape, x.shape[-1])
    return apply_rotary(x, cos, sin)


@pytest.mark.parametrize("base", [10000.0, 500.0])
def test_apply_rotary_matches_complex_rotation(base):
    x = torch.randn(2, 3, 4, 8, dtype=torch.float64)
    positions = torch.tensor([[0, 1, 7, 100], [5, 6, 2, 3]])
    rotated = _rotate(x, positions, base)
    expected = torch.tensor(
        [
            [
                [naive.rotate_complex(x[b, h, t].tolist(), int(positions[b, t]), base) for t in range(4)]
                for h in range(3)
            ]
            for b in range(2)
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(rotated, expected, atol=1e-5, rtol=1e-5)  # tables are float32 by design


def test_rotation_preserves_norms():
    x = torch.randn(1, 2, 5, 16)
    rotated = _rotate(x, torch.tensor([[0, 3, 17, 250, 4096]]))
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    assert not torch.allclose(rotated[..., 1:, :], x[..., 1:, :])  # position 0 is the identity, the rest turn
    torch.testing.assert_close(rotated[..., 0, :], x[..., 0, :])


def test_rotated_dot_product_depends_only_on_the_offset():
    q, k = torch.randn(1, 1, 1, 8, dtype=torch.float64), torch.randn(1, 1, 1, 8, dtype=torch.float64)

    def rotated_dot(query_position: int, key_position: int) -> float:
        rq = _rotate(q, torch.tensor([[query_position]]))
        rk = _rotate(k, torch.tensor([[key_position]]))
        return float((rq * rk).sum())

    for offset in (0, 1, 5, -3):
        dots = [rotated_dot(start + offset, start) for start in (0, 4, 31, 200)]
        assert dots == pytest.approx([dots[0]] * 4, abs=1e-4)
    assert rotated_dot(5, 0) != pytest.approx(rotated_dot(1, 0), abs=1e-3)


def test_rotary_tables_are_the_same_from_the_cache_and_stay_float32():
    """θ is computed once per device and reused; casting the model to bf16 must not touch it (it is no buffer)."""
    rotary = RotaryEmbedding(head_dim=8, base=500.0)
    positions = torch.tensor([[0, 3, 9]])
    first = rotary(positions)
    assert set(rotary._inverse_frequencies) == {torch.device("cpu")} and not list(rotary.state_dict())
    rotary.to(torch.bfloat16)
    again = rotary(positions)
    fresh = RotaryEmbedding(head_dim=8, base=500.0)(positions)
    assert rotary.inverse_frequencies(torch.device("cpu")).dtype == torch.float32
    assert all(torch.equal(a, b) and torch.equal(a, c) for a, b, c in zip(first, again, fresh, strict=True))


def test_apply_rotary_takes_tables_broadcast_over_heads():
    x = torch.randn(2, 3, 4, 8)
    cos, sin = RotaryEmbedding(head_dim=8)(torch.arange(4).expand(2, -1))
    assert torch.equal(apply_rotary(x, cos, sin), apply_rotary(x, cos[:, None], sin[:, None]))


def test_rotate_half_is_a_quarter_turn_of_each_pair():
    x = torch.arange(1.0, 7.0)
    assert rotate_half(x).tolist() == [-4.0, -5.0, -6.0, 1.0, 2.0, 3.0]


# --- ALiBi ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_heads", range(1, 17))
def test_alibi_slopes_match_the_paper(num_heads):
    slopes = alibi_slopes(num_heads)
    assert len(slopes) == num_heads
    assert slopes == pytest.approx(naive.alibi_slopes(num_heads), rel=1e-12)


def test_alibi_bias_is_minus_slope_times_distance():
    num_heads = 6
    query_positions = torch.tensor([[3, 4, 5], [0, 1, 2]])
    key_positions = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 1, 2, 9, 10, 11]])
    bias = ALiBiBias(num_heads=num_heads)(query_positions, key_positions)
    assert bias.shape == (2, num_heads, 3, 6)
    slopes = naive.alibi_slopes(num_heads)
    expected = torch.tensor(
        [
            [
                [
                    [-slopes[h] * abs(int(query_positions[b, i]) - int(key_positions[b, j])) for j in range(6)]
                    for i in range(3)
                ]
                for h in range(num_heads)
            ]
            for b in range(2)
        ]
    )
    torch.testing.assert_close(bias, expected)


# --- T5 relative buckets ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("num_buckets", "max_distance"), [(32, 128), (16, 64), (8, 20), (64, 256), (10, 50)])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_match_the_reference(num_buckets, max_distance, bidirectional):
    distances = torch.arange(-300, 301)
    buckets = relative_position_bucket(
        distances, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance
    )
    expected = [
        naive.t5_bucket(d, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
        for d in range(-300, 301)
    ]
    assert buckets.dtype == torch.long
    assert buckets.tolist() == expected
    assert min(expected) >= 0 and max(expected) < num_buckets


@pytest.mark.parametrize("bidirectional", [True, False])
def test_relative_position_bias_reads_the_bucket_of_each_pair(bidirectional):
    module = RelativePositionBias(num_heads=3, num_buckets=8, max_distance=20, bidirectional=bidirectional)
    torch.nn.init.normal_(module.relative_attention_bias.weight)
    query_positions, key_positions = torch.tensor([[4, 5]]), torch.tensor([[0, 1, 2, 3, 4, 5, 30]])
    bias = module(query_positions, key_positions)
    assert bias.shape == (1, 3, 2, 7)
    table = module.relative_attention_bias.weight
    for i, q in enumerate(query_positions[0].tolist()):
        for j, k in enumerate(key_positions[0].tolist()):
            bucket = naive.t5_bucket(k - q, bidirectional=bidirectional, num_buckets=8, max_distance=20)
            torch.testing.assert_close(bias[0, :, i, j], table[bucket])


def test_registry_and_kinds():
    kinds = {name: cls.kind for name, cls in POSITIONAL_ENCODINGS.items()}
    assert kinds == {
        "sinusoidal": "absolute",
        "learned": "absolute",
        "rotary": "rotary",
        "alibi": "bias",
        "relative": "bias",
    }
