"""Section `generate_batch`: continuous batching (`model.generate_batch`, what `transformers serve` runs), ours vs HF.

`batch_requests` greedy requests whose prompt lengths are spread evenly over `batch_prompts` (random ids, a fixed
seed), `batch_new` new tokens each (no end-of-sequence token, so every request writes exactly that many), handed to
`generate_batch` in one call with transformers' default scheduler (`batch_scheduler` sets its fields). Every
request's tokens must equal HF's before anything is timed; the rate is new tokens per second over the whole call.
"""

import torch
from transformers import ContinuousBatchingConfig, GenerationConfig

from .harness import Session, interleave, paired_speedup, summary
from .models import make_generation_pair
from .plan import Plan


def requests(plan: Plan) -> list[list[int]]:
    """The prompts: `batch_requests` rows of random ids, lengths evenly from the shortest to the longest."""
    shortest, longest = plan.batch_prompts
    steps = max(plan.batch_requests - 1, 1)
    lengths = [shortest + (longest - shortest) * i // steps for i in range(plan.batch_requests)]
    generator = torch.Generator().manual_seed(7)
    return [torch.randint(4, plan.vocab, (length,), generator=generator).tolist() for length in lengths]


def batch_call(model, prompts: list[list[int]], plan: Plan):
    config = GenerationConfig(max_new_tokens=plan.batch_new, do_sample=False, eos_token_id=None, pad_token_id=0)

    scheduler = ContinuousBatchingConfig(**plan.batch_scheduler) if plan.batch_scheduler else None

    def call() -> list[list[int]]:
        results = model.generate_batch(
            inputs=prompts, generation_config=config, continuous_batching_config=scheduler, progress_bar=False
        )
        order = sorted(results, key=lambda request: int(request.rsplit("_", 1)[-1]))
        return [results[request].generated_tokens for request in order]

    return call


def measure(plan: Plan, session: Session) -> list[dict]:
    rows = []
    prompts = requests(plan)
    for family in ("llama",):
        plan_f = plan.for_family(family)
        reference, ours = make_generation_pair(family, plan_f, session.device)
        calls = {"hf": batch_call(reference, prompts, plan_f), "ours": batch_call(ours, prompts, plan_f)}
        outputs = {name: call() for name, call in calls.items()}  # also the warm-up of the scheduler's first call
        same = outputs["ours"] == outputs["hf"]
        row = {
            "family": family,
            "requests": len(prompts),
            "prompt_lengths": list(plan.batch_prompts),
            "new_tokens": plan.batch_new,
            "same_tokens_as_hf": same,
        }
        if not same:
            differing = sum(a != b for a, b in zip(outputs["ours"], outputs["hf"], strict=True))
            session.note(f"generate_batch {family}: {differing} requests' tokens differ from HF's; not timed.")
        else:
            times = interleave(calls, rounds=plan.batch_rounds, warmup=0, device=session.device)
            work = len(prompts) * plan.batch_new
            row.update({name: summary(t, work) for name, t in times.items()})
            row["speedup"] = paired_speedup(times["hf"], times["ours"])
            session.log(
                f"generate_batch {family}: {len(prompts)} requests, hf {row['hf']['rate']:.0f} tok/s, ours "
                f"{row['ours']['rate']:.0f} tok/s ({row['speedup']:.2f}x)"
            )
        rows.append(row)
        del reference, ours
    return rows
