"""Section `length`: forward + backward time and peak memory per token at 128 … 4096 tokens per sequence.

Constant tokens per step (`length_tokens`), our Llama-architecture decoder with the eager and sdpa backends (and
sdpa + gradient checkpointing). Peak memory: `benchmarks.peak_memory`, one fresh process per figure.
"""

import statistics
from collections.abc import Callable

from torch import nn

from .flops import model_flops
from .harness import Session, interleave, summary
from .models import make_pair, training_batch
from .peak_memory import isolated_peak_memory, memory_method
from .plan import Plan


def length_model(plan: Plan, device: str, variant: str) -> nn.Module:
    """Our Llama-architecture decoder in train mode with the attention backend (and checkpointing) of `variant`."""
    _, model = make_pair("llama", plan, device, max_positions=max(plan.length_seqs))
    model.train().set_attn_implementation(variant.split("+")[0])
    if variant.endswith("+checkpointing"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    return model


def length_step(model: nn.Module, batch: dict) -> Callable[[], None]:
    def step():
        model(**batch).loss.backward()
        model.zero_grad(set_to_none=True)

    return step


def length_training_step(plan: Plan, device: str, length: int, variant: str) -> Callable[[], None]:
    """The step whose peak memory a fresh process measures (module level: the child imports it by name)."""
    batch = training_batch("llama", plan, max(1, plan.length_tokens // length), length, device)
    return length_step(length_model(plan, device, variant), batch)


def measure(plan: Plan, session: Session) -> list[dict]:
    """Our Llama-architecture decoder, forward + backward, `length_tokens` tokens per step at every length."""
    device = session.device
    models = {variant: length_model(plan, device, variant) for variant in plan.length_variants}
    rows = []
    for length in plan.length_seqs:
        batch_size = max(1, plan.length_tokens // length)
        batch = training_batch("llama", plan, batch_size, length, device)
        tokens = batch_size * length
        flops = model_flops(
            models[plan.length_variants[0]],
            batch=batch_size,
            source_length=length,
            target_length=length,
            training=True,
        )
        calls = {variant: length_step(model, batch) for variant, model in models.items()}
        times = interleave(calls, rounds=plan.length_rounds, warmup=1, device=device)
        for variant, t in times.items():
            rows.append(
                {
                    "variant": variant,
                    "seq": length,
                    "batch": batch_size,
                    "tokens_per_step": tokens,
                    "flops_per_step": flops,
                    **summary(t, tokens),
                    "us_per_token": statistics.median(t) / tokens * 1e6,
                }
            )
        session.log(
            f"length {length:5d} x{batch_size}: "
            + ", ".join(f"{v} {statistics.median(t) / tokens * 1e6:.1f} us/token" for v, t in times.items())
        )
    del models
    for row in rows:
        peak = isolated_peak_memory(length_training_step, (plan, device, row["seq"], row["variant"]), device)
        row["peak_bytes"] = peak
        row["peak_bytes_per_token"] = None if peak is None else peak / row["tokens_per_step"]
        row["memory_method"] = memory_method(device)
    for length in plan.length_seqs:
        session.log(
            f"memory {length:5d}: "
            + ", ".join(
                f"{r['variant']} {r['peak_bytes'] / 2**20:.0f} MiB"
                for r in rows
                if r["seq"] == length and r.get("peak_bytes") is not None
            )
        )
    return rows
