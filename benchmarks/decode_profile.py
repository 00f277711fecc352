"""Section `decode_profile`: one cached greedy decoding step, ours and HF's, broken into phases (ms per step).

For each generative family and batch size, both sides decode the generate section's prompt greedily with the default
dynamic cache (tokens asserted identical first), interleaved for `decode_rounds` rounds, while `PhaseClock` hooks
time every forward call of the model and, inside it, the embedding, each decoder layer, the final norm and the LM
head. A timed decoding step is every forward call but the first (the prefill, or the seq2seq decoder's first token,
which also builds the cross-attention cache) and the last; each phase is the median over all of them. Derived:

- outside parts: the model's forward minus its timed parts (masks, positions, input checks, output wrapping);
- generate step: from the start of one forward call to the start of the next, i.e. one whole step of generate();
- GenerationMixin: the generate step minus the model forward (logits processors, stopping criteria,
  `prepare_inputs_for_generation`, cache and kwargs bookkeeping);
- aten ops per step: torch.profiler's count of aten calls (nested ones included) in generate() of `gen_new` tokens
  minus that of `gen_new // 2` tokens, over the difference, so that the once-per-call work cancels;
- overhead over the FLOP floor: generate step minus the matmul FLOPs of a step (`flops.decode_step_flops`) at the
  fp32 ceiling of this run's `ceiling` section (which `benchmarks.run` runs first when this section is asked for).
"""

import statistics
from collections.abc import Callable

import torch
from torch import nn

from .flops import decode_step_flops
from .generate import MODES
from .harness import Session, interleave
from .models import FAMILY_KIND, make_generation_pair, prompt_inputs
from .phase_clock import PhaseClock, decoder_parts
from .plan import Plan

SIDES = ("hf", "ours")


def greedy(model: nn.Module, inputs: dict, new_tokens: int) -> Callable[[], torch.Tensor]:
    options = {"max_new_tokens": new_tokens, "min_new_tokens": new_tokens, **MODES["greedy"]}
    return lambda: model.generate(**inputs, **options)


def aten_ops(call: Callable[[], object]) -> int:
    """How many aten operator calls `call` dispatches (nested calls included), counted by torch.profiler."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        call()
    return sum(event.name.startswith("aten::") for event in profile.events())


def recorded(call: Callable[[], object], clock: PhaseClock, runs: list) -> Callable[[], object]:
    """`call`, keeping the clock's steps of each run as one entry of `runs`: (phase dicts, start times)."""

    def run():
        clock.clear()
        output = call()
        runs.append((list(clock.steps), list(clock.starts)))
        return output

    return run


def decoding_steps(runs: list, skip: int) -> list[dict[str, float]]:
    """The timed steps of `runs` after the first `skip` runs, each with its "generate" time (start to next start)."""
    steps = []
    for phases, starts in runs[skip:]:
        steps += [{**phases[k], "generate": starts[k + 1] - starts[k]} for k in range(1, len(phases) - 1)]
    return steps


def phase_medians(steps: list[dict[str, float]], layers: int) -> dict:
    """Median ms per step of each phase, the layers' total, the forward outside its timed parts, GenerationMixin's
    share and the whole generate step."""

    def median_ms(values) -> float:
        return statistics.median(values) * 1e3

    timed = ("embedding", "final_norm", "lm_head", *(f"layer {index}" for index in range(layers)))
    return {
        "embedding_ms": median_ms(step.get("embedding", 0.0) for step in steps),
        "other_ms": median_ms(step["forward"] - sum(step.get(name, 0.0) for name in timed) for step in steps),
        "layers_ms": [median_ms(step[f"layer {index}"] for step in steps) for index in range(layers)],
        "layers_total_ms": median_ms(sum(step[f"layer {index}"] for index in range(layers)) for step in steps),
        "final_norm_ms": median_ms(step.get("final_norm", 0.0) for step in steps),
        "lm_head_ms": median_ms(step.get("lm_head", 0.0) for step in steps),
        "forward_ms": median_ms(step["forward"] for step in steps),
        "generation_ms": median_ms(step["generate"] - step["forward"] for step in steps),
        "generate_step_ms": median_ms(step["generate"] for step in steps),
        "decode_steps_timed": len(steps),
    }


def time_phases(plan: Plan, session: Session, family: str, pair: dict, inputs: dict) -> dict[str, dict]:
    """Per side: the phase medians of interleaved, hooked generate() runs."""
    parts = {side: decoder_parts(family, model, ours=side == "ours") for side, model in pair.items()}
    clocks = {side: PhaseClock(parts[side], session.device) for side in SIDES}
    runs = {side: [] for side in SIDES}
    calls = {
        side: recorded(greedy(model, inputs, plan.gen_new), clocks[side], runs[side]) for side, model in pair.items()
    }
    try:
        interleave(calls, rounds=plan.decode_rounds, warmup=plan.warmup, device=session.device)
    finally:
        for clock in clocks.values():
            clock.remove()
    # interleave() calls each contender `warmup` times first: those runs are not measurements.
    return {side: phase_medians(decoding_steps(runs[side], plan.warmup), len(parts[side].layers)) for side in SIDES}


def count_ops(plan: Plan, pair: dict, inputs: dict) -> dict[str, float]:
    """Aten ops per generate step of each side: (ops of `gen_new` tokens − ops of `gen_new // 2`) / the difference."""
    long, short = plan.gen_new, plan.gen_new // 2
    return {
        side: (aten_ops(greedy(model, inputs, long)) - aten_ops(greedy(model, inputs, short))) / (long - short)
        for side, model in pair.items()
    }


def flop_floor(plan: Plan, session: Session, family: str, ours: nn.Module, batch: int) -> tuple[float, float | None]:
    """Matmul FLOPs of a decoding step and their time at this run's fp32 ceiling (None without a ceiling)."""
    seq2seq = FAMILY_KIND[family] == "seq2seq"
    # Keys seen by the timed steps k = 1 … gen_new - 2, on average: the prompt (decoder) or the start token (seq2seq)
    # plus k new tokens.
    context = (1 if seq2seq else plan.gen_prompt) + (plan.gen_new - 1) / 2
    flops = decode_step_flops(ours, batch=batch, context=context, source_length=plan.gen_prompt if seq2seq else 0)
    ceiling = session.results.get("ceiling", {}).get("fp32")
    return flops, (flops / ceiling["flops_per_s_best"] * 1e3 if ceiling else None)


def profile_pair(plan: Plan, session: Session, family: str, pair: dict, batch: int) -> dict:
    """One row: both sides' phases, op counts and overhead over the FLOP floor at one batch size."""
    inputs = prompt_inputs(plan, batch, session.device)
    tokens = {side: greedy(model, inputs, plan.gen_new)() for side, model in pair.items()}
    row = {
        "family": family,
        "batch": batch,
        "prompt": plan.gen_prompt,
        "new_tokens": plan.gen_new,
        "rounds": plan.decode_rounds,
        "same_tokens_as_hf": bool(torch.equal(tokens["hf"], tokens["ours"])),
    }
    if not row["same_tokens_as_hf"]:
        session.note(f"decode_profile {family} batch {batch}: our greedy tokens differ from HF's; not profiled.")
        return row
    row.update(time_phases(plan, session, family, pair, inputs))
    for side, ops in count_ops(plan, pair, inputs).items():
        row[side]["aten_ops_per_step"] = ops
    row["flops_per_step"], row["floor_ms"] = flop_floor(plan, session, family, pair["ours"], batch)
    for side in SIDES:
        floor = row["floor_ms"]
        row[side]["overhead_over_floor_ms"] = None if floor is None else row[side]["generate_step_ms"] - floor
    row["overhead_ours_minus_hf_ms"] = row["ours"]["generate_step_ms"] - row["hf"]["generate_step_ms"]
    return row


def measure(plan: Plan, session: Session) -> list[dict]:
    if plan.gen_new < 3:
        raise ValueError(
            f"decode_profile needs gen_new >= 3 (a decoding step between the first and the last), got {plan.gen_new}"
        )
    rows = []
    for family in plan.gen_families:
        pair = dict(zip(SIDES, make_generation_pair(family, plan, session.device), strict=True))
        for batch in plan.gen_batches:
            row = profile_pair(plan, session, family, pair, batch)
            rows.append(row)
            if "ours" in row:
                hf, ours = row["hf"], row["ours"]
                session.log(
                    f"decode {family:5s} b{batch}: step hf {hf['generate_step_ms']:.2f} ms, ours "
                    f"{ours['generate_step_ms']:.2f} ms; aten ops hf {hf['aten_ops_per_step']:.0f}, ours "
                    f"{ours['aten_ops_per_step']:.0f}"
                )
        del pair
    return rows
