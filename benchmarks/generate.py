"""Section `generate`: decoding tokens/s, ours vs HF, per family, batch size and decoding mode.

Modes (`gen_modes`), all `gen_new` new tokens exactly (`min_new_tokens` = `max_new_tokens`), default dynamic cache:
greedy; 4-beam search (`num_beams=4`, `early_stopping=False`, length penalty 1); sampling (`do_sample=True`,
top-k 50, `torch.manual_seed` reset identically before every call on both sides). Greedy rows also time both sides
without a cache (`gen_uncached`: what the KV cache buys each side) and our static-cache `torch.compile` path
(`hf_attention.runtime.compiled_generation.compiled_generate`, against HF's dynamic cache).

With `gen_cuda_graphs` (the gpu preset), greedy rows of `gen_compiled` families also time our step compiled with
`mode="reduce-overhead"` (replayed as a CUDA graph on a GPU; on a CPU inductor skips the graphs and it runs as a plain
compiled step) and HF's own static cache (`cache_implementation="static"`, which transformers compiles by itself on
a GPU, with CUDA graphs, and runs uncompiled on a CPU). Each compiled contender gets its own copy of the model:
transformers keeps one compiled call per model, and two compile configurations taking turns on one model would
compile again at every call.

Every contender's tokens are compared with HF's (dynamic cache) before timing; one that differs is not timed and
the run's notes say so (for sampling that would mean the same seed drew other tokens).

Rounds: a row reports the median per-round paired ratio HF time / our time, its interquartile range and a bootstrap
95% interval of the median (`harness.paired_ratio_spread`). A 5% difference is resolved when that interval's half
width is below 5%. The median of n ratios of spread σ has a standard error of about 1.25·σ/√n, so the half width is
about 2.45·σ/√n: the full run's 24 rounds resolve 5% while the per-round ratios spread by σ ≤ 10% (single rounds of a
shared 2-core machine vary by up to ±25%; a paired ratio cancels the load both sides of a round share). The report
prints each interval, so a noisier machine shows itself: raise `gen_rounds` then. Uncached batch-8 calls are the
slowest (about 3 s each in benchmarks/results/full-xeon-amx-2026-11-22.json).
"""

import copy
import functools
from collections.abc import Callable

import torch

from hf_attention.runtime.compiled_generation import CPU_INDUCTOR_OPTIONS, compiled_generate, make_compile_config

from .harness import Session, interleave, paired_ratio_spread, summary
from .models import make_generation_pair, prompt_inputs
from .plan import Plan

MODES = {
    "greedy": {"do_sample": False, "num_beams": 1},
    "beam4": {"do_sample": False, "num_beams": 4, "early_stopping": False, "length_penalty": 1.0},
    "sample": {"do_sample": True, "num_beams": 1, "top_k": 50, "top_p": 1.0, "temperature": 1.0},
}
SAMPLING_SEED = 0
# speed-up name: (reference contender, our contender); each ratio is reference time / our time per round.
SPEEDUPS = {
    "cache": ("hf_cache", "ours_cache"),
    "no_cache": ("hf_no_cache", "ours_no_cache"),
    "compiled_static": ("hf_cache", "ours_compiled_static"),
    "cuda_graphs": ("hf_cache", "ours_cuda_graphs"),
    "cuda_graphs_vs_hf_static": ("hf_compiled_static", "ours_cuda_graphs"),
}


def generate_call(generate: Callable, inputs: dict, options: dict) -> Callable[[], torch.Tensor]:
    """`generate(**inputs, **options)`, seeding torch's generator first when sampling (the same seed each call)."""

    def call():
        if options.get("do_sample"):
            torch.manual_seed(SAMPLING_SEED)
        return generate(**inputs, **options)

    return call


def contenders(plan: Plan, family: str, mode: str, pair: dict, inputs: dict) -> dict[str, Callable]:
    """The calls compared in one row: both sides with the cache, and for greedy without it and our compiled path."""
    options = {"max_new_tokens": plan.gen_new, "min_new_tokens": plan.gen_new, **MODES[mode]}
    greedy = mode == "greedy"
    calls = {}
    for cache in (True, False) if greedy and plan.gen_uncached else (True,):
        tag = "cache" if cache else "no_cache"
        for side in ("hf", "ours"):
            calls[f"{side}_{tag}"] = generate_call(pair[side].generate, inputs, {**options, "use_cache": cache})
    batch = inputs["input_ids"].shape[0]
    if greedy and family in plan.gen_compiled and batch in plan.gen_compiled_batches:
        on_cpu = inputs["input_ids"].device.type == "cpu"
        plain = make_compile_config(options=dict(CPU_INDUCTOR_OPTIONS) if on_cpu else None)  # no CUDA graphs
        calls["ours_compiled_static"] = generate_call(
            functools.partial(compiled_generate, pair["ours"], compile_config=plain), inputs, options
        )
        if plan.gen_cuda_graphs:
            graphs = make_compile_config(mode="reduce-overhead")
            calls["ours_cuda_graphs"] = generate_call(
                functools.partial(compiled_generate, pair["ours_graphs"], compile_config=graphs), inputs, options
            )
            static = functools.partial(pair["hf_static"].generate, cache_implementation="static")
            calls["hf_compiled_static"] = generate_call(static, inputs, options)
    return calls


def first_difference(tokens: torch.Tensor, expected: torch.Tensor) -> str:
    if tokens.shape != expected.shape:
        return f"shape {tuple(tokens.shape)} instead of {tuple(expected.shape)}"
    row, column = (tokens != expected).nonzero()[0].tolist()
    return f"first at sequence {row}, position {column}"


def speedups(times: dict[str, list]) -> dict:
    """Paired ratios of the row: speed-ups over HF and, without a cache, what the cache buys each side."""
    row = {}
    spread = {
        name: paired_ratio_spread(times[hf], times[ours])
        for name, (hf, ours) in SPEEDUPS.items()
        if hf in times and ours in times
    }
    for name, stats in spread.items():
        row[f"speedup_{name}"] = stats["median"]
    row["speedup_spread"] = spread
    gains = {
        side: paired_ratio_spread(times[f"{side}_no_cache"], times[f"{side}_cache"])
        for side in ("hf", "ours")
        if f"{side}_no_cache" in times and f"{side}_cache" in times
    }
    if gains:
        row["cache_gain"] = gains
    return row


def measure_row(plan: Plan, session: Session, family: str, mode: str, pair: dict, batch: int) -> dict:
    inputs = prompt_inputs(plan, batch, session.device)
    calls = contenders(plan, family, mode, pair, inputs)
    outputs = {name: call() for name, call in calls.items()}  # also the compile warm-up
    same = {name: bool(torch.equal(tokens, outputs["hf_cache"])) for name, tokens in outputs.items()}
    row = {
        "family": family,
        "batch": batch,
        "mode": mode,
        "prompt": plan.gen_prompt,
        "new_tokens": plan.gen_new,
        "same_tokens_as_hf": same,
    }
    for name in (name for name, equal in same.items() if not equal):
        session.note(
            f"generate {family} batch {batch} {mode}: {name} tokens differ from HF's "
            f"({first_difference(outputs[name], outputs['hf_cache'])}); not timed."
        )
    if not same["ours_cache"]:
        return row
    timed = {name: call for name, call in calls.items() if same[name]}
    times = interleave(timed, rounds=plan.gen_rounds, warmup=plan.warmup, device=session.device)
    for name, t in times.items():
        row[name] = summary(t, batch * plan.gen_new)
    row.update(speedups(times))
    return row


def measure(plan: Plan, session: Session) -> list[dict]:
    rows = []
    for family in plan.gen_families:
        plan_f = plan.for_family(family)
        pair = dict(zip(("hf", "ours"), make_generation_pair(family, plan_f, session.device), strict=True))
        if plan.gen_cuda_graphs and family in plan.gen_compiled:
            pair["ours_graphs"], pair["hf_static"] = copy.deepcopy(pair["ours"]), copy.deepcopy(pair["hf"])
        for batch in plan.gen_batches:
            for mode in plan.gen_modes:
                row = measure_row(plan_f, session, family, mode, pair, batch)
                rows.append(row)
                session.log(
                    f"generate {family:5s} b{batch} {mode:6s}: "
                    + ", ".join(
                        f"{name} {row[name]['rate']:.0f} tok/s" for name in row["same_tokens_as_hf"] if name in row
                    )
                    + f" (same tokens: {row['same_tokens_as_hf']})"
                )
        del pair
    return rows
