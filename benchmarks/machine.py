"""The machine a run measured: CPU model and matrix extensions, thread count, library versions."""

import contextlib
import datetime
import os
import platform
import re
import subprocess
from pathlib import Path

import torch
import transformers

from hf_attention.runtime.hardware import cpu_has_fast_bf16


def native_bf16(device: str) -> bool:
    """Whether `device` multiplies bf16 matrices natively (CUDA with bf16; a CPU with AVX512-BF16/AMX)."""
    return torch.cuda.is_bf16_supported() if device == "cuda" else cpu_has_fast_bf16()


def machine_info(device: str) -> dict:
    """Date, versions, threads and the CPU (lscpu's model name, CPU count, AVX512-BF16 and AMX flags)."""
    info = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "device": device,
    }
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for key, field in (("cpu_model", "Model name"), ("cpus", r"CPU\(s\)")):
            match = re.search(rf"^{field}:\s+(.+)$", lscpu, re.MULTILINE)
            if match:
                info[key] = match.group(1).strip()
        info["amx"] = "amx_bf16" in lscpu
        info["avx512_bf16"] = "avx512_bf16" in lscpu
    with contextlib.suppress(OSError):
        info["loadavg_start"] = Path("/proc/loadavg").read_text().split()[:3]
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
        info["cuda"] = torch.version.cuda
    return info
