"""Per-head q/k norms (`qk_norm="per_head"`, per_head_norm.py): each head's D values normalised with a gain of that
head's own, weights (H, D) and (K, D) (Cohere's `use_qk_norm`).

Against transformers' own `CohereLayerNorm((heads, head_dim))`, its gain moved head by head, in float32 and bf16; the
RMS forms against their formulas; in an attention layer, the gains reach the heads they belong to, and the training
step's fused q/k/v product gives the plain path's queries and keys; the checks when the config is built; the
defaults leave QK-norm as it was; a model with the knob (each norm type) starts from the identity gain, trains a step,
saves and loads bit for bit, and its cached generation gives its uncached logits.
"""

import pytest
import torch
from conftest import tiny_config
from transformers.models.cohere.modeling_cohere import CohereLayerNorm

from hf_attention import HFAttentionForCausalLM
from hf_attention.modeling.builders import build_attention
from hf_attention.modeling.per_head_norm import INITIAL_GAINS, PerHeadNorm

TOLERANCE = 1e-5
HEADS, KV_HEADS, HEAD_DIM = 4, 2, 8
DECODER = {"position_encoding": "rotary", "norm_position": "pre", "hidden_act": "swiglu", "qk_norm": "per_head"}


def gains(heads: int, dim: int, seed: int) -> torch.Tensor:
    """A gain per head, each far from the others' (1 ± 0.5)."""
    return 1.0 + 0.5 * torch.randn(heads, dim, generator=torch.Generator().manual_seed(seed))


def projection(heads: int, seed: int = 0) -> torch.Tensor:
    """(B, T, heads·D) values with an offset and a spread of their own per head, so that the mean matters."""
    generator = torch.Generator().manual_seed(seed)
    values = 3.0 * torch.randn(2, 5, heads, HEAD_DIM, generator=generator)
    return (values + torch.randn(heads, 1, generator=generator)).flatten(-2)


# ---------------------------------------------------------------------------------------------------------------------
# The norm against transformers' and against its formulas


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_layernorm_form_computes_coheres_q_k_norm(dtype):
    reference = CohereLayerNorm((HEADS, HEAD_DIM), eps=1e-5)
    ours = PerHeadNorm("layernorm", HEADS, HEAD_DIM, 1e-5)
    with torch.no_grad():
        reference.weight.copy_(gains(HEADS, HEAD_DIM, seed=1))
    ours.load_state_dict(reference.state_dict())  # the same name and shape: weight (H, D), no bias
    x = projection(HEADS).to(dtype)
    reference, ours = reference.to(dtype), ours.to(dtype)
    with torch.no_grad():
        expected = reference(x.unflatten(-1, (HEADS, HEAD_DIM))).flatten(-2)  # Cohere views the heads first
        got = ours(x)
    assert got.dtype == dtype
    if dtype == torch.float32:
        assert (got - expected).abs().max() <= TOLERANCE
    else:  # float32 inside, one rounding at the end, as Cohere's
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("norm_type", ["layernorm", "rmsnorm", "offset_rmsnorm"])
def test_each_form_normalises_each_head_with_its_own_gain(norm_type):
    norm = PerHeadNorm(norm_type, HEADS, HEAD_DIM, 1e-6, bias=True)
    with torch.no_grad():
        norm.weight.copy_(gains(HEADS, HEAD_DIM, seed=2))
        if norm.bias is not None:
            norm.bias.copy_(0.3 * torch.randn(HEADS, HEAD_DIM))
    x = projection(HEADS, seed=3)
    heads = x.unflatten(-1, (HEADS, HEAD_DIM))
    if norm_type == "layernorm":
        centred = heads - heads.mean(-1, keepdim=True)
        expected = centred / torch.sqrt(centred.pow(2).mean(-1, keepdim=True) + 1e-6) * norm.weight + norm.bias
    else:
        gain = norm.weight + (1.0 if norm_type == "offset_rmsnorm" else 0.0)
        expected = heads / torch.sqrt(heads.pow(2).mean(-1, keepdim=True) + 1e-6) * gain
    assert (norm.bias is not None) == (norm_type == "layernorm")  # only LayerNorm has a bias
    with torch.no_grad():
        assert (norm(x) - expected.flatten(-2)).abs().max() <= TOLERANCE


def test_an_unknown_norm_type_is_refused_by_name():
    with pytest.raises(ValueError, match="norm_type='l2' has no per-head form; allowed values are 'layernorm'"):
        PerHeadNorm("l2", HEADS, HEAD_DIM, 1e-6)


# ---------------------------------------------------------------------------------------------------------------------
# In an attention layer


def attention(**knobs):
    config = tiny_config("decoder", **{**DECODER, **knobs})
    return build_attention(config, 0, is_causal=True, is_cross=False)


def test_each_head_reads_its_own_gain():
    module = attention(norm_type="layernorm", norm_bias=False)
    assert isinstance(module.q_norm, PerHeadNorm) and isinstance(module.k_norm, PerHeadNorm)
    assert module.q_norm.weight.shape == (HEADS, HEAD_DIM) and module.k_norm.weight.shape == (KV_HEADS, HEAD_DIM)
    hidden = torch.randn(2, 5, 32)
    with torch.no_grad():
        module.k_norm.weight[1].mul_(3.0)  # key head 1's gain only
        query, key, _ = module.project_qkv(hidden, None)  # (B, H, T, D), (B, K, T, D)
        plain = module.k_proj(hidden).unflatten(-1, (KV_HEADS, HEAD_DIM)).transpose(1, 2)
        normed = torch.nn.functional.layer_norm(plain, (HEAD_DIM,), eps=module.k_norm.eps)
    assert torch.allclose(key[:, 0], normed[:, 0], atol=1e-6)
    assert torch.allclose(key[:, 1], 3.0 * normed[:, 1], atol=1e-5)


def test_the_training_steps_fused_product_gives_the_plain_paths_queries_and_keys():
    module = attention(norm_type="layernorm")
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(0.2 * torch.randn(parameter.shape))
    hidden = torch.randn(4, 70, 32, requires_grad=True)  # 280 rows: the fused q/k/v product
    plain = module.eval().project_qkv(hidden, None)
    fused = module.train().project_qkv(hidden, None)
    for a, b in zip(plain, fused, strict=True):
        assert (a - b).abs().max() <= TOLERANCE


# ---------------------------------------------------------------------------------------------------------------------
# The checks, when the config is built; the defaults


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"qk_norm": "per-head"}, "qk_norm='per-head' is not supported; allowed values are .*'per_head'"),
        ({"qk_norm_after_rotation": True}, "qk_norm_after_rotation=True moves the qk_norm='head' norms"),
        (
            {"kv_lora_rank": 8, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "num_key_value_heads": 4},
            "qk_norm='per_head' is not available with kv_lora_rank=8",
        ),
    ],
)
def test_the_knob_is_checked_when_the_config_is_built(knobs, message):
    with pytest.raises(ValueError, match=message):
        tiny_config("decoder", **{**DECODER, **knobs})


@pytest.mark.parametrize(("qk_norm", "shapes"), [("none", None), ("head", (HEAD_DIM,)), ("projection", (32,))])
def test_the_other_values_build_what_they_built(qk_norm, shapes):
    module = attention(qk_norm=qk_norm, norm_type="rmsnorm")
    if shapes is None:
        assert module.q_norm is None and module.k_norm is None
    else:
        assert not isinstance(module.q_norm, PerHeadNorm) and module.q_norm.weight.shape == shapes


# ---------------------------------------------------------------------------------------------------------------------
# From scratch: starts at the identity gain, trains, saves and loads exactly, decodes with its cache


@pytest.mark.parametrize("norm_type", sorted(INITIAL_GAINS))
def test_a_model_with_per_head_norms_trains_and_saves_exactly(norm_type, tmp_path):
    model = HFAttentionForCausalLM(tiny_config("decoder", **DECODER, norm_type=norm_type))
    norms = [module for module in model.modules() if isinstance(module, PerHeadNorm)]
    assert len(norms) == 4 and all(torch.all(n.weight == INITIAL_GAINS[norm_type]) for n in norms)
    ids = torch.randint(3, 99, (4, 70))  # 280 rows: the training step's fused projections and loss
    with torch.no_grad():
        eval_loss = model.eval()(input_ids=ids, labels=ids).loss
    model.train()
    loss = model(input_ids=ids, labels=ids).loss
    assert torch.allclose(loss, eval_loss, atol=1e-5)
    loss.backward()
    assert all(n.weight.grad is not None and n.weight.grad.abs().max() > 0 for n in norms)
    before = [n.weight.detach().clone() for n in norms]
    torch.optim.SGD(model.parameters(), lr=0.5).step()
    assert all(not torch.equal(n.weight, old) for n, old in zip(norms, before, strict=True))
    model.eval().save_pretrained(tmp_path)
    loaded = HFAttentionForCausalLM.from_pretrained(tmp_path).eval()
    assert loaded.config.qk_norm == "per_head"
    for (name, mine), (_, theirs) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(mine, theirs), name
    with torch.no_grad():
        logits = model(input_ids=ids[:, :12]).logits
        assert torch.equal(logits, loaded(input_ids=ids[:, :12]).logits)
        # a one-token step with the cache (generate()'s path) gives the uncached logits of the last token
        prefix = model(input_ids=ids[:, :11], use_cache=True)
        step = model(input_ids=ids[:, 11:12], past_key_values=prefix.past_key_values).logits
    assert (step[:, -1] - logits[:, -1]).abs().max() <= TOLERANCE
