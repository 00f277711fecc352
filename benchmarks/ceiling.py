"""Section `ceiling`: large fp32 and bf16 matmuls measured in the same run, the denominator of every MFU figure."""

import statistics

import torch

from .harness import Session, interleave
from .machine import native_bf16
from .plan import Plan

# Without native bf16 a CPU's bf16 matmul runs a scalar fallback (0.7 GFLOP/s on an AVX2 EPYC): its ceiling is
# measured on matrices this small, or one round would take minutes.
SLOW_BF16_CEILING_SIZE = 512


def matmul_ceiling(size: int, rounds: int, device: str) -> dict:
    """FLOP/s of size×size matmuls in fp32 and bf16, interleaved; the best round is the ceiling."""
    sizes = {"fp32": size, "bf16": size if native_bf16(device) else min(size, SLOW_BF16_CEILING_SIZE)}
    tensors = {
        name: (
            torch.randn(sizes[name], sizes[name], device=device, dtype=dtype),
            torch.randn(sizes[name], sizes[name], device=device, dtype=dtype),
        )
        for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
    }
    calls = {name: (lambda a=a, b=b: torch.mm(a, b)) for name, (a, b) in tensors.items()}
    times = interleave(calls, rounds=rounds, warmup=2, device=device)
    return {
        name: {
            "flops_per_s_best": 2.0 * sizes[name] ** 3 / min(t),
            "flops_per_s_median": 2.0 * sizes[name] ** 3 / statistics.median(t),
            "size": sizes[name],
            "times_s": t,
        }
        for name, t in times.items()
    }


def measure(plan: Plan, session: Session) -> dict:
    ceiling = matmul_ceiling(plan.ceiling_size, plan.ceiling_rounds, session.device)
    session.log("ceiling: " + ", ".join(f"{k} {v['flops_per_s_best'] / 1e9:.0f} GFLOP/s" for k, v in ceiling.items()))
    return ceiling
