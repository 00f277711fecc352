"""Section `long_attention`: inference on long inputs, SDPA against FlexAttention (`attn_implementation=
"flex_attention"`), at `long_lengths` tokens (4k-16k in the full run).

Three inputs where the two differ in the work they do, on our Llama-architecture decoder (batch 1, no gradients):
- `causal`: one text. SDPA runs its causal kernel; FlexAttention skips the blocks above the diagonal.
- `documents`: `long_documents` texts packed into one row (positions restart, no mask). SDPA needs an explicit
  (T × T) mask and computes every score; FlexAttention's block mask skips the blocks between documents.
- `alibi`: one text with ALiBi biases. SDPA adds a stored (H × T × T) bias; FlexAttention computes the bias from
  the positions inside the kernel (a score modification), so nothing of size T² is stored.
The two backends' logits are compared before timing. FlexAttention's first call compiles its kernel; that time is
reported separately (`compile_s`) and not in the timed rounds. Peak memory: one fresh process per figure.
"""

import time
from collections.abc import Callable

import torch
from torch import nn

from hf_attention import HFAttentionDecoderConfig, HFAttentionForCausalLM

from .harness import Session, interleave, paired_speedup, summary
from .peak_memory import isolated_peak_memory, memory_method
from .plan import Plan

BACKENDS = ("sdpa", "flex_attention")
PARITY_TOLERANCE = 1e-4


def long_model(plan: Plan, case: str, backend: str, length: int) -> nn.Module:
    """Our pre-norm RMSNorm SwiGLU decoder (Llama's architecture) with rotary positions, or ALiBi for `alibi`."""
    torch.manual_seed(0)
    config = HFAttentionDecoderConfig(
        vocab_size=plan.vocab,
        hidden_size=plan.hidden,
        num_hidden_layers=plan.long_layers,
        num_attention_heads=plan.heads,
        intermediate_size=plan.ffn,
        hidden_act="swiglu",
        norm_type="rmsnorm",
        norm_position="pre",
        attention_bias=False,
        mlp_bias=False,
        position_encoding="alibi" if case == "alibi" else "rotary",
        max_position_embeddings=length,
        hidden_dropout_prob=0.0,
        use_cache=False,
    )
    model = HFAttentionForCausalLM(config).eval()
    model.set_attn_implementation(backend)
    return model


def long_inputs(plan: Plan, case: str, length: int) -> dict:
    generator = torch.Generator().manual_seed(1)
    inputs = {"input_ids": torch.randint(3, plan.vocab, (1, length), generator=generator)}
    if case == "documents":
        document = length // plan.long_documents
        inputs["position_ids"] = (torch.arange(length) % document)[None]  # positions restart: packed texts
    return inputs


def long_forward(plan: Plan, case: str, backend: str, length: int) -> Callable[[], torch.Tensor]:
    """One forward pass without gradients (module level: the peak-memory child builds it by name)."""
    model, inputs = long_model(plan, case, backend, length), long_inputs(plan, case, length)

    def forward() -> torch.Tensor:
        with torch.no_grad():
            return model(**inputs, logits_to_keep=1).logits

    return forward


def measure(plan: Plan, session: Session) -> list[dict]:
    rows = []
    for case in plan.long_cases:
        # Each input kind starts from no compiled kernel, as in a process serving one model: the kernels of the other
        # kinds would otherwise count towards torch.compile's limit of recompilations per function.
        torch._dynamo.reset()
        for length in plan.long_lengths:
            calls = {backend: long_forward(plan, case, backend, length) for backend in BACKENDS}
            started = time.perf_counter()
            flexed = calls["flex_attention"]()  # compiles the kernel for this shape
            compile_s = time.perf_counter() - started
            difference = (flexed - calls["sdpa"]()).abs().max().item()
            if difference > PARITY_TOLERANCE:
                raise AssertionError(f"long_attention {case} {length}: logits differ by {difference:.2e}")
            times = interleave(calls, rounds=plan.long_rounds, warmup=1, device=session.device)
            row = {
                "case": case,
                "length": length,
                "parity_max_logit_diff": difference,
                "compile_s": compile_s,
                "speedup_flex": paired_speedup(times["sdpa"], times["flex_attention"]),
                **{backend: summary(times[backend], length) for backend in BACKENDS},
            }
            rows.append(row)
            session.log(
                f"long {case:9s} {length:6d}: sdpa {row['sdpa']['median_s'] * 1e3:.0f} ms, flex "
                f"{row['flex_attention']['median_s'] * 1e3:.0f} ms ({row['speedup_flex']:.2f}x; compile "
                f"{compile_s:.0f} s)"
            )
    for row in rows if plan.long_memory else []:
        for backend in BACKENDS:
            peak = isolated_peak_memory(long_forward, (plan, row["case"], backend, row["length"]), session.device)
            row[backend]["peak_bytes"] = peak
        row["memory_method"] = memory_method(session.device)
        session.log(
            f"long {row['case']:9s} {row['length']:6d}: peak "
            + ", ".join(
                f"{backend} {row[backend]['peak_bytes'] / 2**20:.0f} MiB"
                for backend in BACKENDS
                if row[backend]["peak_bytes"] is not None
            )
        )
    return rows
