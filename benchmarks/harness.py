"""How contenders are timed and compared: interleaved rounds, per-round summaries and paired ratios.

Contenders run alternately (A B, then B A, …) after warm-up, so that load from other processes hits both alike;
a row reports the median and min–max of its rounds, and a speed-up is the median of per-round paired ratios
(adjacent runs see the same machine load), with the spread of those ratios.
"""

import dataclasses
import random
import statistics
import time
from collections.abc import Callable

import torch

BOOTSTRAP_SAMPLES = 2000


@dataclasses.dataclass
class Session:
    """What every section gets besides the plan: the device, a logger and the results gathered so far."""

    device: str
    log: Callable[[str], None]
    results: dict

    def note(self, message: str) -> None:
        """A caveat that belongs in the report (kept in results["notes"]) and in the log."""
        self.results.setdefault("notes", []).append(message)
        self.log(message)


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def interleave(calls: dict[str, Callable[[], object]], *, rounds: int, warmup: int, device: str) -> dict[str, list]:
    """Run every contender `warmup` times, then `rounds` timed rounds, alternating the order (A B, B A, …)."""
    names = list(calls)
    for _ in range(warmup):
        for name in names:
            calls[name]()
    times = {name: [] for name in names}
    for index in range(rounds):
        for name in names if index % 2 == 0 else reversed(names):
            synchronize(device)
            start = time.perf_counter()
            calls[name]()
            synchronize(device)
            times[name].append(time.perf_counter() - start)
    return times


def summary(times: list[float], work: float) -> dict:
    """Median and range of a list of per-round times, and `work`/s (e.g. tokens/s) at the median and extremes."""
    median = statistics.median(times)
    return {
        "median_s": median,
        "min_s": min(times),
        "max_s": max(times),
        "rate": work / median,
        "rate_min": work / max(times),
        "rate_max": work / min(times),
        "rounds": len(times),
    }


def paired_speedup(reference: list[float], ours: list[float]) -> float:
    """Median over rounds of reference_time / our_time (adjacent runs share the machine's load)."""
    return statistics.median(r / o for r, o in zip(reference, ours, strict=True))


def paired_ratio_spread(reference: list[float], ours: list[float]) -> dict:
    """The per-round ratios reference_time / our_time: median, interquartile range and a 95% interval of the median.

    The interval is a percentile bootstrap of the median (2000 resamples, fixed seed, so a results file re-renders
    the same). A difference is resolved when the interval excludes 1.
    """
    ratios = [r / o for r, o in zip(reference, ours, strict=True)]
    median = statistics.median(ratios)
    q1, _, q3 = statistics.quantiles(ratios, n=4, method="inclusive") if len(ratios) > 1 else (median,) * 3
    generator = random.Random(0)
    medians = sorted(statistics.median(generator.choices(ratios, k=len(ratios))) for _ in range(BOOTSTRAP_SAMPLES))
    low, high = medians[int(0.025 * BOOTSTRAP_SAMPLES)], medians[int(0.975 * BOOTSTRAP_SAMPLES) - 1]
    return {"median": median, "q1": q1, "q3": q3, "ci95_low": low, "ci95_high": high, "rounds": len(ratios)}
