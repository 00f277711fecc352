"""Peak transient memory of one step, each figure measured in a fresh process.

On CPU: glibc is told to serve every allocation ≥ 64 KiB with mmap (so freed tensors go back to the OS at once), the
kernel's peak-RSS counter is reset (/proc/self/clear_refs), one step runs, and the peak is VmHWM minus the RSS
before the step: the transient memory of the step (activations, gradients, workspace). On CUDA: the allocator's
peak minus what was allocated before the step.

Why a fresh process per figure: measured in the parent, the figure depended on what had run before (the allocator
keeps freed pages of earlier, larger steps: the same sdpa step read 302 MiB first and 555 MiB after the eager ones).
The mmap setting would slow the timing rounds, so figures are taken after them, in children.
"""

import contextlib
import ctypes
import multiprocessing
import re
from collections.abc import Callable
from pathlib import Path

import torch

FRESH_PROCESS_TIMEOUT_S = 600


def memory_method(device: str) -> str:
    """One line for the report: how the peak figures were taken."""
    if device == "cuda":
        return "cuda max_memory_allocated, fresh process"
    return "peak RSS (VmHWM) minus RSS before the step, glibc mmap threshold 64 KiB, one fresh process per figure"


def _rss(field: str) -> int:
    match = re.search(field + r":\s+(\d+) kB", Path("/proc/self/status").read_text())
    return int(match.group(1)) * 1024


def peak_step_memory(step: Callable[[], None], device: str) -> int | None:
    """Peak transient bytes of one call of `step` (see the module docstring); None where it cannot be measured."""
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    if not Path("/proc/self/clear_refs").exists():
        return None
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM (peak RSS) to the current RSS
    base = _rss("VmRSS")
    step()
    return _rss("VmHWM") - base


def force_mmap_for_large_allocations() -> bool:
    """glibc: serve allocations ≥ 64 KiB by mmap (returned to the OS on free), so that RSS follows live tensors."""
    with contextlib.suppress(OSError, AttributeError):
        return bool(ctypes.CDLL("libc.so.6").mallopt(-3, 64 * 1024))  # -3 = M_MMAP_THRESHOLD
    return False


def _measure_in_child(make_step: Callable[..., Callable[[], None]], args: tuple, device: str, results) -> None:
    """Child-process body of `isolated_peak_memory`: settle one step, then measure the next."""
    force_mmap_for_large_allocations()
    step = make_step(*args)
    step()  # first-call allocations (optimizer state, workspaces) are not part of a step's transient memory
    results.put(peak_step_memory(step, device))


def isolated_peak_memory(make_step: Callable[..., Callable[[], None]], args: tuple, device: str) -> int | None:
    """Peak transient bytes of the step `make_step(*args)` builds, in a fresh (spawned) process.

    `make_step` must be a module-level function (the child imports it by name) and `args` picklable.
    """
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=_measure_in_child, args=(make_step, args, device, results))
    process.start()
    peak = results.get(timeout=FRESH_PROCESS_TIMEOUT_S)
    process.join()
    return peak
