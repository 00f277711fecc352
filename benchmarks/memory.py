"""Section `memory`: peak memory of one causal-LM training step, ours vs HF, as the vocabulary grows.

The step is the train section's (forward + backward + fused AdamW, fp32) on each of `memory_families` (GPT-2, Llama,
Qwen3 and Gemma 3 in the full run) at the plan's width, depth, batch and length (each family's own shape, where it has
one), at each of `memory_vocabs`. Only the vocabulary changes, so the growth is the cost of the (N, V) logits, where N
= batch × length: HF computes them, and the loss's softmax and gradient, as (N, V) tensors; our models fuse the
vocabulary projection with the loss (`hf_attention.modeling.losses.linear_cross_entropy`, in row chunks) and never
build the (N, V) logits while training, except under a final logit cap (Gemma 3's), which `linear_cross_entropy`
applies to whole logits: that row shows what the cap costs. Each figure is taken in a fresh process
(`benchmarks.peak_memory`) after a first step has allocated the optimizer's state, and parity of the logits and the
loss is asserted first.
"""

import dataclasses
from collections.abc import Callable

from .harness import Session
from .models import assert_parity, make_pair, training_batch
from .peak_memory import isolated_peak_memory, memory_method
from .plan import Plan
from .train import TrainStep


def causal_lm_training_step(plan: Plan, family: str, side: str, device: str) -> Callable[[], None]:
    """One fp32 training step of `side` ("hf" or "ours") of `family` (module level: the child imports it by name)."""
    reference, ours = make_pair(family, plan, device)
    model = (reference if side == "hf" else ours).train()
    del reference, ours
    return TrainStep(model, training_batch(family, plan, plan.batch, plan.seq, device), "fp32", device)


def measure(plan: Plan, session: Session) -> list[dict]:
    device = session.device
    rows = []
    for family in plan.memory_families:
        for vocab in plan.memory_vocabs:
            sized = dataclasses.replace(plan.for_family(family), vocab=vocab, family_shapes={})
            reference, ours = make_pair(family, sized, device)
            assert_parity(family, reference, ours, training_batch(family, sized, plan.batch, plan.seq, device))
            del reference, ours
            peaks = {
                side: isolated_peak_memory(causal_lm_training_step, (sized, family, side, device), device)
                for side in ("hf", "ours")
            }
            # A peak of 0 is a step too small for the RSS counter to see (the heap it needs was already resident,
            # as in the tests' tiny shapes): no ratio then.
            known = None not in peaks.values() and 0 not in peaks.values()
            rows.append(
                {
                    "family": family,
                    "vocab": vocab,
                    "hidden": plan.hidden,
                    "batch": plan.batch,
                    "seq": plan.seq,
                    "hf_peak_bytes": peaks["hf"],
                    "ours_peak_bytes": peaks["ours"],
                    "ratio_hf_to_ours": peaks["hf"] / peaks["ours"] if known else None,
                    "memory_method": memory_method(device),
                }
            )
            if known:
                session.log(
                    f"memory {family:5s} vocab {vocab:6d}: hf {peaks['hf'] / 2**20:.0f} MiB, ours "
                    f"{peaks['ours'] / 2**20:.0f} MiB ({peaks['hf'] / peaks['ours']:.2f}x)"
                )
    return rows
