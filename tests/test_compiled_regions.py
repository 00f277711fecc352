"""The elementwise regions compiled while training on a GPU (RMSNorm, the gated product, the rotary rotation) give
the plain path's outputs and gradients. The tests compile them on the CPU (inductor's C++ kernels; on a GPU the same
graphs become Triton kernels), and run a whole training step with the regions switched on for the CPU."""

import warnings

import pytest
import torch
from conftest import build, right_pad
from torch import nn

from hf_attention import HFAttentionForCausalLM, attention, compiled_regions, layers, norms

pytestmark = pytest.mark.slow  # compiling: a few seconds per region

REGIONS = {
    "rms_norm": (
        norms.rms_norm_region,
        lambda dtype, length: (torch.randn(2, length, 16, dtype=dtype), torch.rand(16) + 0.5, 1e-6),
    ),
    "gated_product": (
        layers.gated_product_region,
        lambda dtype, length: (
            torch.randn(2, length, 24, dtype=dtype),
            torch.randn(2, length, 24, dtype=dtype),
            nn.SiLU(),
        ),
    ),
    "rotary": (
        attention.rotary_region,
        lambda dtype, length: (
            torch.randn(2, 4, length, 8, dtype=dtype),
            torch.randn(2, 2, length, 8, dtype=dtype),
            torch.randn(2, 1, length, 8).cos(),
            torch.randn(2, 1, length, 8).sin(),
        ),
    ),
}


def outputs_and_grads(function, args):
    args = tuple(a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args)
    out = function(*args)
    outs = out if isinstance(out, tuple) else (out,)
    sum(o.float().sin().sum() for o in outs).backward()
    return [o.detach() for o in outs], [a.grad for a in args if isinstance(a, torch.Tensor) and a.grad is not None]


@pytest.mark.parametrize("name", REGIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_region_equals_its_plain_function_at_every_length(name, dtype):
    region, make_args = REGIONS[name]
    torch._dynamo.reset()
    region._compiled = None
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    for length in (5, 11, 7):  # compiled once with a symbolic length, not once per length
        args = make_args(dtype, length)
        compiled, plain = outputs_and_grads(region, args), outputs_and_grads(region.plain, args)
        exact = outputs_and_grads(region.plain, tuple(a.float() if isinstance(a, torch.Tensor) else a for a in args))
        for got, expected, truth in zip(*(c[0] + c[1] for c in (compiled, plain, exact)), strict=True):
            assert got.dtype == expected.dtype
            if dtype == torch.float32:
                torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
            else:  # bf16: the fused kernel rounds once where eager rounds after every op; no less accurate
                error, plain_error = ((t.float() - truth).abs().max() for t in (got, expected))
                assert error <= 2 * plain_error + 1e-3, (error, plain_error)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] - graphs == 1  # compiled once, for every length


def test_regions_apply_only_while_training_on_their_devices(monkeypatch):
    x = torch.randn(2, 3, requires_grad=True)
    region = norms.rms_norm_region
    assert {"cuda"} == compiled_regions.ElementwiseRegion.device_types and not region.applies(
        x
    )  # the CPU runs the plain path
    monkeypatch.setattr(compiled_regions.ElementwiseRegion, "device_types", frozenset({"cpu"}))
    assert region.applies(x)
    assert not region.applies(x.detach())  # no gradient needed: inference
    with torch.no_grad():
        assert not region.applies(x)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert not region.applies(x)  # inside torch.compile of the whole model: the plain path is traced instead


def test_training_step_with_the_regions_equals_the_plain_step(monkeypatch):
    """A Llama-shaped decoder (RMSNorm, SwiGLU, rotary): loss and every gradient with the regions on, as without."""
    model = build(
        HFAttentionForCausalLM,
        "decoder",
        position_encoding="rotary",
        norm_position="pre",
        norm_type="rmsnorm",
        hidden_act="swiglu",
        attention_bias=False,
        mlp_bias=False,
    ).train()
    ids, mask = right_pad([[5, 17, 33, 8, 61, 12], [7, 21, 3], [90, 4, 52, 11]])
    batch = {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}

    def step():
        model.zero_grad(set_to_none=True)
        loss = model(**batch).loss
        loss.backward()
        return loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}

    plain_loss, plain_grads = step()
    calls = []
    monkeypatch.setattr(compiled_regions.ElementwiseRegion, "device_types", frozenset({"cpu"}))
    for region in (norms.rms_norm_region, layers.gated_product_region, attention.rotary_region):
        applies = region.applies

        def counting(*tensors, applies=applies, name=region.__name__):
            used = applies(*tensors)
            if used:
                calls.append(name)
            return used

        monkeypatch.setattr(region, "applies", counting)
    region_loss, region_grads = step()
    assert {"_rms_norm", "_gated_product", "rotate_query_and_key"} <= set(calls)
    torch.testing.assert_close(region_loss, plain_loss, rtol=1e-5, atol=1e-6)
    for name, grad in plain_grads.items():
        torch.testing.assert_close(region_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_a_region_that_fails_to_compile_warns_once_and_runs_plain(monkeypatch):
    def broken_compile(function, **options):
        def compiled(*args):
            raise RuntimeError("no Triton for this device")

        return compiled

    monkeypatch.setattr(torch, "compile", broken_compile)
    region = compiled_regions.ElementwiseRegion(lambda x: x * 2)
    x = torch.arange(3.0)
    with pytest.warns(UserWarning, match="no Triton for this device"):
        assert torch.equal(region(x), x * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(region(x), x * 2)  # no second warning, no second try
