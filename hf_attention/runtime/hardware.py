"""What the machine computes fast: used to pick a training precision and to plan the benchmarks.

It is not shipped with checkpoints.
"""

import torch


def cpu_has_fast_bf16() -> bool:
    """Whether this CPU multiplies bf16 matrices natively (AVX512-BF16 / AMX, as oneDNN reports it).

    Elsewhere (e.g. AVX2-only CPUs) PyTorch's bf16 matmul falls back to a scalar path that is tens of times
    slower than the fp32 one, so bf16 autocast makes training many times slower there (see the benchmark's ceiling
    section for the figures of a given machine).
    """
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without oneDNN
        return False
