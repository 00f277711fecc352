"""Section `flex_train`: a training step on packed documents, SDPA against FlexAttention, as the packed length changes.

One row of `flex_documents` texts packed together (positions restart at each text, so attention stays inside a text)
through our Llama-architecture decoder (`flex_layers` layers of the plan's width), forward + backward. SDPA gets an
explicit (T × T) mask and computes every score; FlexAttention's block mask skips the blocks between texts. Packed
batches change length from step to step, so the section runs each of `flex_lengths` in turn and reports, for each,
the first call (compiling, when the kernel compiles again for that length) and the median of `flex_rounds` further
steps, and how many graphs Dynamo compiled in all. torch has no FlexAttention backward on the CPU: there the step
runs without gradients (the gpu-tiny preset keeps the code alive; the figures come from a GPU).
"""

import contextlib
import dataclasses
import time
from collections.abc import Callable

import torch

from .harness import Session, interleave, paired_speedup, summary
from .long_attention import long_model
from .plan import Plan

BACKENDS = ("sdpa", "flex_attention")
PARITY_TOLERANCE = 1e-3


def packed_batch(plan: Plan, length: int) -> dict:
    """One row of `flex_documents` texts of (nearly) equal length, positions restarting at each, next-token labels."""
    generator = torch.Generator().manual_seed(length)
    ids = torch.randint(3, plan.vocab, (1, length), generator=generator)
    document = -(-length // plan.flex_documents)
    return {"input_ids": ids, "position_ids": (torch.arange(length) % document)[None], "labels": ids}


def training_step(model, batch: dict, with_grad: bool) -> Callable[[], torch.Tensor]:
    def step() -> torch.Tensor:
        with contextlib.nullcontext() if with_grad else torch.no_grad():
            loss = model(**batch).loss
        if with_grad:
            loss.backward()
            model.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def measure(plan: Plan, session: Session) -> list[dict]:
    device = session.device
    with_grad = device != "cpu"
    if not with_grad:
        session.note("flex_train: on the CPU torch has no FlexAttention backward; steps run without gradients.")
    sized = dataclasses.replace(plan, long_layers=plan.flex_layers)
    # long_model seeds the generator: both backends get the same weights
    models = {backend: long_model(sized, "documents", backend, max(plan.flex_lengths)) for backend in BACKENDS}
    for model in models.values():
        model.to(device).train(with_grad)
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    rows = []
    for length in plan.flex_lengths:
        batch = {name: tensor.to(device) for name, tensor in packed_batch(plan, length).items()}
        calls = {backend: training_step(model, batch, with_grad) for backend, model in models.items()}
        graphs_before = counters["stats"]["unique_graphs"]
        started = time.perf_counter()
        flex_loss = calls["flex_attention"]()
        if device == "cuda":
            torch.cuda.synchronize()
        first_call_s = time.perf_counter() - started
        compiled_graphs = counters["stats"]["unique_graphs"] - graphs_before
        difference = abs(flex_loss.item() - calls["sdpa"]().item())
        if difference > PARITY_TOLERANCE:
            raise AssertionError(f"flex_train {length}: losses differ by {difference:.2e}")
        times = interleave(calls, rounds=plan.flex_rounds, warmup=1, device=device)
        row = {
            "length": length,
            "documents": plan.flex_documents,
            "with_grad": with_grad,
            "loss_difference": difference,
            "first_call_s": first_call_s,
            "graphs_compiled": compiled_graphs,
            "speedup_flex": paired_speedup(times["sdpa"], times["flex_attention"]),
            **{backend: summary(times[backend], length) for backend in BACKENDS},
        }
        rows.append(row)
        session.log(
            f"flex_train {length:6d} tokens: sdpa {row['sdpa']['median_s'] * 1e3:.1f} ms, flex "
            f"{row['flex_attention']['median_s'] * 1e3:.1f} ms ({row['speedup_flex']:.2f}x); first flex call "
            f"{first_call_s:.1f} s, {compiled_graphs} graphs compiled"
        )
    return rows
