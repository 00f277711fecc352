"""Attention core, backends and multi-head attention against naive loops, torch's SDPA and torch's MultiheadAttention.

Notation: B batch, H query heads, K key/value heads, T queries, S keys, D head dim.
"""

import math

import pytest
import torch
from reference import naive
from torch import nn
from transformers.cache_utils import DynamicCache

from hf_attention.modeling import scores
from hf_attention.modeling.attention import (
    MultiHeadAttention,
    eager_attention_forward,
    repeat_kv,
    sdpa_attention_forward,
)
from hf_attention.modeling.attention_backends import get_attention_function
from hf_attention.modeling.masks import causal_mask
from hf_attention.modeling.scores import AdditiveScore, GaussianScore, make_score

BACKENDS = {"eager": eager_attention_forward, "sdpa": sdpa_attention_forward}
SCORES = list(scores.SCORES)  # every registered score; each needs a naive reference in _REFERENCE_SCORES


class Core(nn.Module):
    """The minimum a backend reads from its calling module: `score`, `is_causal` and `training`."""

    def __init__(self, score: nn.Module | None = None, is_causal: bool = False):
        super().__init__()
        self.score = score
        self.is_causal = is_causal


def _core(name: str, heads: int, head_dim: int, dtype=torch.float64) -> tuple[Core, float]:
    score, scaling = make_score(name, num_heads=heads, head_dim=head_dim)
    if isinstance(score, GaussianScore):
        with torch.no_grad():
            score.log_width.uniform_(0.0, 2.0)  # distinct widths per head
    core = Core(score).to(dtype).eval()
    return core, scaling


# score name → the naive reference (tests/reference) for a built core of that score
_REFERENCE_SCORES = {
    "scaled_dot": lambda score: naive.scaled_dot_score,
    "dot": lambda score: naive.dot_score,
    "additive": lambda score: naive.additive_score(
        score.query_proj.weight, score.key_proj.weight, score.energy.weight
    ),
    "gaussian": lambda score: naive.gaussian_score(score.log_width.exp().tolist()),
}


def _reference_score(name: str, core: Core) -> naive.ScoreFn:
    return _REFERENCE_SCORES[name](core.score)


def test_every_registered_score_has_a_naive_reference():
    assert set(_REFERENCE_SCORES) == set(scores.SCORES)


def _qkv(batch=2, heads=4, kv_heads=2, queries=3, keys=5, dim=8, dtype=torch.float64, requires_grad=False):
    shapes = [(batch, heads, queries, dim), (batch, kv_heads, keys, dim), (batch, kv_heads, keys, dim)]
    return [torch.randn(shape, dtype=dtype, requires_grad=requires_grad) for shape in shapes]


def _padding(batch=2, queries=3, keys=5, empty_row=False) -> torch.Tensor:
    mask = torch.ones(batch, 1, queries, keys, dtype=torch.bool)
    mask[1, :, :, -2:] = False  # the second sequence has two padded keys
    if empty_row:
        mask[0, :, 1] = False  # query 1 of the first sequence may attend to nothing
    return mask


# --- every score function against the naive loops ---------------------------------------------------------------


@pytest.mark.parametrize("score_name", SCORES)
@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_eager_matches_naive_reference(score_name, with_mask, with_bias):
    core, scaling = _core(score_name, heads=4, head_dim=8)
    query, key, value = _qkv()  # grouped-query: 4 query heads share 2 key/value heads
    mask = _padding(empty_row=True) if with_mask else None
    bias = torch.randn(1, 4, 3, 5, dtype=torch.float64) if with_bias else None
    output, weights = eager_attention_forward(core, query, key, value, mask, scaling=scaling, position_bias=bias)
    expected_output, expected_weights = naive.attention(
        query, key, value, _reference_score(score_name, core), mask, bias
    )
    assert output.shape == (2, 3, 4, 8) and weights.shape == (2, 4, 3, 5)
    torch.testing.assert_close(weights, expected_weights, atol=1e-10, rtol=1e-10)
    torch.testing.assert_close(output, expected_output.transpose(1, 2), atol=1e-10, rtol=1e-10)


def test_additive_and_gaussian_scores_match_the_formulas_directly():
    query, key = torch.randn(1, 2, 3, 4, dtype=torch.float64), torch.randn(1, 2, 5, 4, dtype=torch.float64)
    additive = AdditiveScore(head_dim=4, attention_dim=6).double()
    gaussian = GaussianScore(num_heads=2, head_dim=4).double()
    with torch.no_grad():
        gaussian.log_width.copy_(torch.tensor([0.3, -0.4]))
    references = {
        "additive": naive.additive_score(additive.query_proj.weight, additive.key_proj.weight, additive.energy.weight),
        "gaussian": naive.gaussian_score(gaussian.log_width.exp().tolist()),
    }
    for name, module in (("additive", additive), ("gaussian", gaussian)):
        with torch.no_grad():
            scores = module(query, key)
        assert scores.shape == (1, 2, 3, 5)
        for h in range(2):
            for t in range(3):
                for s in range(5):
                    expected = references[name](h, query[0, h, t].tolist(), key[0, h, s].tolist())
                    assert float(scores[0, h, t, s]) == pytest.approx(expected, abs=1e-10), (name, h, t, s)


def test_gaussian_initial_width_is_sqrt_head_dim():
    score = GaussianScore(num_heads=3, head_dim=16)
    torch.testing.assert_close(score.log_width.exp(), torch.full((3,), 4.0))


def test_make_score_rejects_unknown_names():
    assert make_score("scaled_dot", num_heads=2, head_dim=16) == (None, 0.25)
    assert make_score("dot", num_heads=2, head_dim=16) == (None, 1.0)
    with pytest.raises(ValueError, match="'cosine'.*allowed"):
        make_score("cosine", num_heads=2, head_dim=16)


# --- dot-product backends against torch's own SDPA ---------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_matches_torch_sdpa(backend, causal):
    query, key, value = _qkv(heads=2, kv_heads=2, queries=5, keys=5, dtype=torch.float32)
    scaling = 8**-0.5
    if causal:
        output, _ = BACKENDS[backend](Core(is_causal=True), query, key, value, None, scaling=scaling)
        expected = nn.functional.scaled_dot_product_attention(query, key, value, is_causal=True)
    else:
        mask = _padding(queries=5, keys=5)
        output, _ = BACKENDS[backend](Core(), query, key, value, mask, scaling=scaling)
        expected = nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=mask)
    torch.testing.assert_close(output, expected.transpose(1, 2))


# --- eager == sdpa ------------------------------------------------------------------------------------------------


def _cases():
    past = causal_mask(2, 6, 4, torch.device("cpu"))
    padded = torch.ones(2, 1, 1, 6, dtype=torch.bool)
    padded[0, ..., :2] = False  # left padding of the first sequence
    return {
        "no_mask": {"queries": 6, "mask": None, "causal": False, "bias": False},
        "padding": {"queries": 6, "mask": padded, "causal": False, "bias": False},
        "causal_flag": {"queries": 6, "mask": None, "causal": True, "bias": False},
        "causal_mask_and_padding": {
            "queries": 6,
            "mask": padded & causal_mask(6, 6, 0, torch.device("cpu")),
            "causal": True,
            "bias": False,
        },
        "offset_causal_mask": {"queries": 2, "mask": past, "causal": True, "bias": False},
        "offset_causal_flag": {"queries": 2, "mask": None, "causal": True, "bias": False},
        "offset_causal_padding": {"queries": 2, "mask": past & padded, "causal": True, "bias": False},
        "bias": {"queries": 6, "mask": None, "causal": False, "bias": True},
        "bias_padding": {"queries": 6, "mask": padded, "causal": False, "bias": True},
        "bias_causal_flag": {"queries": 6, "mask": None, "causal": True, "bias": True},
        "bias_offset_causal_flag": {"queries": 2, "mask": None, "causal": True, "bias": True},
        "bias_offset_causal_padding": {"queries": 2, "mask": past & padded, "causal": True, "bias": True},
    }


@pytest.mark.parametrize("score_name", ["scaled_dot", "dot"])
@pytest.mark.parametrize("kv_heads", [4, 2, 1])
@pytest.mark.parametrize("case", list(_cases()))
def test_eager_equals_sdpa(case, kv_heads, score_name):
    spec = _cases()[case]
    core, scaling = _core(score_name, heads=4, head_dim=8, dtype=torch.float32)
    core.is_causal = spec["causal"]
    query, key, value = _qkv(heads=4, kv_heads=kv_heads, queries=spec["queries"], keys=6, dtype=torch.float32)
    bias = torch.randn(2, 4, spec["queries"], 6) if spec["bias"] else None
    eager, weights = eager_attention_forward(
        core, query, key, value, spec["mask"], scaling=scaling, position_bias=bias
    )
    sdpa, no_weights = sdpa_attention_forward(
        core, query, key, value, spec["mask"], scaling=scaling, position_bias=bias
    )
    assert no_weights is None
    torch.testing.assert_close(sdpa, eager, atol=1e-5, rtol=1e-5)
    if spec["causal"]:  # the offset-aware rule: query i (absolute past + i) never sees a later key
        past = 6 - spec["queries"]
        future = torch.arange(6)[None, :] > past + torch.arange(spec["queries"])[:, None]  # (T, S)
        assert torch.equal(weights[..., future], torch.zeros_like(weights[..., future]))


def test_is_causal_argument_overrides_the_module():
    query, key, value = _qkv(queries=4, keys=4, dtype=torch.float32)
    for backend in BACKENDS.values():
        forced, _ = backend(Core(is_causal=False), query, key, value, None, scaling=1.0, is_causal=True)
        module_causal, _ = backend(Core(is_causal=True), query, key, value, None, scaling=1.0)
        bidirectional, _ = backend(Core(is_causal=True), query, key, value, None, scaling=1.0, is_causal=False)
        torch.testing.assert_close(forced, module_causal)
        assert not torch.allclose(bidirectional, module_causal)


# --- grouped-query attention --------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kv_heads", [1, 2])
def test_gqa_equals_explicitly_repeated_heads(backend, kv_heads):
    query, key, value = _qkv(heads=4, kv_heads=kv_heads, dtype=torch.float32)
    mask = _padding()
    grouped, _ = BACKENDS[backend](Core(), query, key, value, mask, scaling=0.3)
    groups = 4 // kv_heads
    repeated, _ = BACKENDS[backend](
        Core(), query, key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1), mask, scaling=0.3
    )
    torch.testing.assert_close(grouped, repeated)


def test_repeat_kv_order():
    x = torch.randn(2, 3, 4, 5)
    torch.testing.assert_close(repeat_kv(x, 2), x.repeat_interleave(2, dim=1))
    assert repeat_kv(x, 1) is x


def test_multi_head_gqa_equals_multi_head_with_repeated_projections():
    grouped = MultiHeadAttention(hidden_size=16, num_heads=4, num_kv_heads=2, head_dim=4).eval()
    full = MultiHeadAttention(hidden_size=16, num_heads=4, num_kv_heads=4, head_dim=4).eval()
    with torch.no_grad():
        for name in ("q_proj", "o_proj"):
            getattr(full, name).load_state_dict(getattr(grouped, name).state_dict())
        for name in ("k_proj", "v_proj"):  # kv head g serves query heads 2g and 2g + 1
            source = getattr(grouped, name)
            getattr(full, name).weight.copy_(source.weight.view(2, 4, 16).repeat_interleave(2, dim=0).reshape(16, 16))
            getattr(full, name).bias.copy_(source.bias.view(2, 4).repeat_interleave(2, dim=0).reshape(16))
    x = torch.randn(2, 5, 16)
    for backend in BACKENDS.values():
        torch.testing.assert_close(grouped(x, attention_function=backend)[0], full(x, attention_function=backend)[0])


def test_multi_head_rejects_indivisible_heads():
    with pytest.raises(ValueError, match="num_heads=4 is not divisible by num_kv_heads=3"):
        MultiHeadAttention(hidden_size=16, num_heads=4, num_kv_heads=3, head_dim=4)


# --- gradients ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("score_name", SCORES)
def test_gradcheck(score_name):
    core, scaling = _core(score_name, heads=2, head_dim=3)
    query, key, value = _qkv(batch=1, heads=2, kv_heads=1, queries=3, keys=4, dim=3, requires_grad=True)
    bias = torch.randn(1, 2, 3, 4, dtype=torch.float64, requires_grad=True)
    mask = torch.ones(1, 1, 3, 4, dtype=torch.bool)
    mask[0, 0, 0, 1:] = False
    mask[0, 0, 2] = False  # a row with no allowed key: gradient zero, not NaN
    score = core.score
    named = list(score.named_parameters()) if score is not None else []
    params = [p.detach().clone().requires_grad_(True) for _, p in named]  # W_q, W_k, w / log σ² are checked too
    assert len(params) == {"scaled_dot": 0, "dot": 0, "additive": 3, "gaussian": 1}[score_name]

    def attend(q, k, v, b, *score_params):
        substituted = dict(zip([name for name, _ in named], score_params, strict=True))
        module = Core(_Functional(score, substituted) if score is not None else None).eval()
        return eager_attention_forward(module, q, k, v, mask, scaling=scaling, position_bias=b)

    assert torch.autograd.gradcheck(attend, (query, key, value, bias, *params))


class _Functional(nn.Module):
    """Calls `module` with `params` substituted, so gradcheck can differentiate through the score's weights."""

    def __init__(self, module: nn.Module, params: dict):
        super().__init__()
        self.module, self.params = module, params

    def forward(self, query, key):
        return torch.func.functional_call(self.module, self.params, (query, key))


# --- rows with no allowed key -------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("with_bias", [False, True])
def test_fully_masked_rows_give_zeros_not_nan(backend, dtype, with_bias):
    query, key, value = _qkv(dtype=dtype, requires_grad=True)
    mask = _padding(empty_row=True)
    mask[1, :, 2] = False  # and the last query of the second sequence
    bias = torch.randn(1, 4, 3, 5, dtype=dtype) * 4 if with_bias else None
    output, weights = BACKENDS[backend](Core(), query, key, value, mask, scaling=8**-0.5, position_bias=bias)
    assert not torch.isnan(output).any()
    assert torch.equal(output[0, 1], torch.zeros_like(output[0, 1]))  # (B, T, H, D): exact zeros
    assert torch.equal(output[1, 2], torch.zeros_like(output[1, 2]))
    assert output[0, 0].abs().sum() > 0
    if weights is not None:
        assert torch.equal(weights[0, :, 1], torch.zeros_like(weights[0, :, 1]))
        assert torch.equal(weights[1, :, :, -2:], torch.zeros_like(weights[1, :, :, -2:]))
        torch.testing.assert_close(weights[0, :, 0].float().sum(-1), torch.ones(4), atol=1e-2, rtol=0)
    output.float().square().sum().backward()
    for tensor in (query, key, value):
        assert torch.isfinite(tensor.grad).all()
    assert torch.equal(query.grad[0, :, 1], torch.zeros_like(query.grad[0, :, 1]))


# --- dropout ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_dropout_only_in_training(backend):
    query, key, value = _qkv(queries=6, keys=6, dtype=torch.float32)
    core = Core().eval()
    no_dropout, _ = BACKENDS[backend](core, query, key, value, None, scaling=0.3, dropout=0.0)
    for _ in range(2):
        evaluated, _ = BACKENDS[backend](core, query, key, value, None, scaling=0.3, dropout=0.5)
        torch.testing.assert_close(evaluated, no_dropout)
    core.train()
    trained, _ = BACKENDS[backend](core, query, key, value, None, scaling=0.3, dropout=0.5)
    assert not torch.allclose(trained, no_dropout)


@pytest.mark.parametrize("backend", BACKENDS)
def test_multi_head_dropout_only_in_training(backend):
    attention = MultiHeadAttention(hidden_size=16, num_heads=4, num_kv_heads=4, head_dim=4, dropout=0.5)
    reference = MultiHeadAttention(hidden_size=16, num_heads=4, num_kv_heads=4, head_dim=4, dropout=0.0)
    reference.load_state_dict(attention.state_dict())
    x = torch.randn(2, 6, 16)
    attention.eval()
    expected = reference.eval()(x, attention_function=BACKENDS[backend])[0]
    for _ in range(2):
        torch.testing.assert_close(attention(x, attention_function=BACKENDS[backend])[0], expected)
    attention.train()
    assert not torch.allclose(attention(x, attention_function=BACKENDS[backend])[0], expected)


# --- multi-head attention -----------------------------------------------------------------------------------------


def test_multi_head_matches_torch_multihead_attention():
    ours = MultiHeadAttention(hidden_size=16, num_heads=4, num_kv_heads=4, head_dim=4).eval()
    theirs = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.q_proj.weight, ours.k_proj.weight, ours.v_proj.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q_proj.bias, ours.k_proj.bias, ours.v_proj.bias]))
        theirs.out_proj.weight.copy_(ours.o_proj.weight)
        theirs.out_proj.bias.copy_(ours.o_proj.bias)
    x = torch.randn(2, 5, 16)
    keep = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=torch.bool)
    expected, expected_weights = theirs(x, x, x, key_padding_mask=~keep, average_attn_weights=False)
    for name, backend in BACKENDS.items():
        output, weights = ours(x, attention_mask=keep[:, None, None, :], attention_function=backend)
        torch.testing.assert_close(output, expected, msg=name)
        if weights is not None:
            torch.testing.assert_close(weights, expected_weights)


def test_cross_attention_reads_the_encoder_states():
    attention = MultiHeadAttention(
        hidden_size=16, num_heads=4, num_kv_heads=2, head_dim=4, is_cross_attention=True, kv_input_size=12
    ).eval()
    x, memory = torch.randn(2, 3, 16), torch.randn(2, 7, 12)
    mask = torch.ones(2, 1, 1, 7, dtype=torch.bool)
    mask[1, ..., 5:] = False
    output, weights = attention(
        x, key_value_states=memory, attention_mask=mask, attention_function=eager_attention_forward
    )
    assert output.shape == (2, 3, 16) and weights.shape == (2, 4, 3, 7)
    sdpa, _ = attention(x, key_value_states=memory, attention_mask=mask, attention_function=sdpa_attention_forward)
    torch.testing.assert_close(sdpa, output, atol=1e-5, rtol=1e-5)
    # by hand: project, split heads, attend over the memory, merge, project out
    query = attention.q_proj(x).view(2, 3, 4, 4).transpose(1, 2)
    key = attention.k_proj(memory).view(2, 7, 2, 4).transpose(1, 2)
    value = attention.v_proj(memory).view(2, 7, 2, 4).transpose(1, 2)
    heads, _ = naive.attention(query.detach(), key.detach(), value.detach(), naive.scaled_dot_score, mask)
    expected = attention.o_proj(heads.float().transpose(1, 2).reshape(2, 3, 16))
    torch.testing.assert_close(output, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_multi_head_cache_equals_full_sequence(backend):
    attention = MultiHeadAttention(
        hidden_size=16, num_heads=4, num_kv_heads=2, head_dim=4, is_causal=True, layer_idx=0
    ).eval()
    x = torch.randn(2, 6, 16)
    full, _ = attention(x, attention_function=BACKENDS[backend])
    cache = DynamicCache()
    first, _ = attention(x[:, :4], cache=cache, attention_function=BACKENDS[backend])
    rest, _ = attention(x[:, 4:], cache=cache, attention_function=BACKENDS[backend])  # 2 queries, 6 keys
    torch.testing.assert_close(torch.cat([first, rest], dim=1), full, atol=1e-5, rtol=1e-5)


def test_multi_head_defaults_to_sdpa_when_no_backend_is_given():
    attention = MultiHeadAttention(hidden_size=16, num_heads=4, num_kv_heads=4, head_dim=4).eval()
    x = torch.randn(1, 3, 16)
    expected = attention(x, attention_function=sdpa_attention_forward)
    torch.testing.assert_close(attention(x)[0], expected[0])
    torch.testing.assert_close(attention(x, attention_function=None)[0], expected[0])


def test_get_attention_function():
    assert get_attention_function("eager") is eager_attention_forward
    assert get_attention_function("sdpa") is sdpa_attention_forward
    with pytest.raises(ValueError, match="'nonexistent' is not available"):
        get_attention_function("nonexistent")


def test_scaling_is_applied_to_dot_products():
    query, key, value = _qkv(dtype=torch.float64)
    for backend in BACKENDS.values():
        scaled, _ = backend(Core(), query * 0.5, key, value, None, scaling=1.0)
        unscaled, _ = backend(Core(), query, key, value, None, scaling=0.5)
        torch.testing.assert_close(scaled, unscaled)
    assert math.isclose(make_score("scaled_dot", num_heads=1, head_dim=64)[1], 0.125)
