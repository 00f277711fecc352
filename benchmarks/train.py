"""Section `train`: forward + backward + AdamW step, tokens/s, fp32 and bf16 autocast (autocast on both sides).

Contenders: HF and ours, eager; through `torch.compile` for the families in `train_compiled`; and with `train_liger`,
on CUDA where liger-kernel is installed, HF's Llama with liger-kernel's Triton kernels (RMSNorm, SwiGLU, the fused
linear cross-entropy; not its rotary kernel, which liger patches module-wide, so that the plain HF contender in the
same process would run it too). On CUDA every contender's peak memory above what is resident between steps (weights,
optimizer state) is measured after the timed rounds.
"""

import contextlib
import copy
import importlib.util

import torch
from torch import nn

from .flops import model_flops
from .harness import Session, interleave, paired_speedup, summary
from .models import assert_parity, make_pair, training_batch
from .plan import Plan


def autocast(dtype: str, device: str):
    if dtype == "bf16":
        return torch.autocast(device_type=device, dtype=torch.bfloat16)
    return contextlib.nullcontext()


class TrainStep:
    """One optimiser step: forward (under autocast if asked) + backward + AdamW.

    AdamW is torch's fused kernel on both sides, the optimiser HF's Trainer uses by default (`adamw_torch_fused`) and
    our training script's: the for-each implementation spent 27 ms of a ~330 ms fp32 step on this model's 5M
    parameters, the fused one 6 ms, the same for both contenders.
    """

    def __init__(self, model: nn.Module, batch: dict, dtype: str, device: str, compiled: bool = False):
        self.model, self.batch, self.dtype, self.device = model, batch, dtype, device
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
        self.forward = torch.compile(model) if compiled else model

    def __call__(self) -> None:
        with autocast(self.dtype, self.device):
            loss = self.forward(**self.batch).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


# What apply_liger_kernel_to_llama replaces in transformers' modeling_llama module.
LIGER_PATCHED_NAMES = ("LlamaRMSNorm", "LlamaMLP", "apply_rotary_pos_emb")


def liger_model(reference: nn.Module, family: str, device: str) -> nn.Module | None:
    """A copy of HF's Llama with liger-kernel's kernels, or None where they cannot run (no CUDA, no liger-kernel,
    a family liger-kernel does not cover)."""
    if device != "cuda" or family != "llama" or importlib.util.find_spec("liger_kernel") is None:
        return None
    from liger_kernel.transformers import apply_liger_kernel_to_llama
    from transformers.models.llama import modeling_llama

    model = copy.deepcopy(reference)
    # Given a model, liger-kernel patches its modules, and also transformers' Llama classes for models built later:
    # those are put back, so that the HF models of the other contenders and sections stay plain.
    module_level = {name: getattr(modeling_llama, name) for name in LIGER_PATCHED_NAMES}
    try:
        apply_liger_kernel_to_llama(rope=False, model=model)
    finally:
        for name, value in module_level.items():
            setattr(modeling_llama, name, value)
    return model


def peak_memory_above_resident(call, device: str) -> int | None:
    """Bytes allocated at the peak of one call beyond what was allocated before it (CUDA only)."""
    if device != "cuda":
        return None
    torch.cuda.synchronize()
    resident = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    call()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - resident


def measure(plan: Plan, session: Session) -> list[dict]:
    device = session.device
    rows = []
    for family in plan.train_families:
        plan_f = plan.for_family(family)
        tokens = plan_f.batch * plan_f.seq
        reference, ours = make_pair(family, plan_f, device)
        batch = training_batch(family, plan_f, plan_f.batch, plan_f.seq, device)
        diff = assert_parity(family, reference, ours, batch)
        labelled = (batch["labels"] != -100).float().mean().item()
        flops = model_flops(
            ours,
            batch=plan_f.batch,
            source_length=plan_f.seq,
            target_length=plan_f.seq,
            training=True,
            labelled_fraction=labelled,
        )
        calls = {}
        for dtype in plan.train_dtypes:
            calls = {
                "hf": TrainStep(reference.train(), batch, dtype, device),
                "ours": TrainStep(ours.train(), batch, dtype, device),
            }
            if family in plan.train_compiled:
                calls["hf_compiled"] = TrainStep(reference, batch, dtype, device, compiled=True)
                calls["ours_compiled"] = TrainStep(ours, batch, dtype, device, compiled=True)
            liger = liger_model(reference, family, device) if plan.train_liger else None
            if liger is not None:
                calls["hf_liger"] = TrainStep(liger.train(), batch, dtype, device)
            elif plan.train_liger and dtype == plan.train_dtypes[0]:
                session.note(f"train {family}: no liger-kernel contender (needs CUDA, liger-kernel and a Llama).")
            times = interleave(calls, rounds=plan.train_rounds, warmup=plan.warmup, device=device)
            row = {
                "family": family,
                "dtype": dtype,
                "shape": {k: getattr(plan_f, k) for k in ("vocab", "hidden", "layers", "heads", "kv_heads", "ffn")},
                "parameters": sum(p.numel() for p in ours.parameters()),
                "tokens_per_step": tokens,
                "flops_per_step": flops,
                "parity_max_logit_diff": diff,
                "speedup": paired_speedup(times["hf"], times["ours"]),
            }
            for name, t in times.items():
                row[name] = summary(t, tokens)
                peak = peak_memory_above_resident(calls[name], device)
                if peak is not None:
                    row[name]["peak_above_resident_bytes"] = peak
            if "hf_liger" in times:
                row["speedup_vs_hf_liger"] = paired_speedup(times["hf_liger"], times["ours"])
            if "ours_compiled" in times:
                row["speedup_compiled_vs_hf_eager"] = paired_speedup(times["hf"], times["ours_compiled"])
                row["speedup_compiled_vs_hf_compiled"] = paired_speedup(times["hf_compiled"], times["ours_compiled"])
            rows.append(row)
            session.log(
                f"train {family:5s} {dtype}: hf {row['hf']['rate']:8.0f} tok/s, ours "
                f"{row['ours']['rate']:8.0f} tok/s, speed-up {row['speedup']:.2f}x (parity {diff:.1e})"
            )
        reference.eval(), ours.eval()
        del reference, ours, calls
    return rows
