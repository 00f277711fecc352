"""hf_attention vs the Hugging Face reference implementations, side by side in one run.

    python -m benchmarks.run [--preset full|quick|tiny|gpu|gpu-tiny] [--device cpu|cuda] [--sections ...]
                             [--families ...] [--out DIR] [--docs PATH]

Every pair is the reference model (GPT-2, Llama, BERT, BART, T5, Qwen3, Gemma 3, and the mixtures of experts Qwen3-MoE,
GPT-OSS, DeepSeek-V3 and Qwen3-Next; random weights, the same dimensions but where `benchmarks.plan` gives a family its
own) and our model converted from it with `hf_attention.from_hf`, so weights and maths are identical; logit parity
(and, when generating, identical tokens) is ASSERTED before anything is timed. HF's GPT-OSS runs eager attention
(transformers gives it no SDPA), every other side SDPA. Sections, one module each:

- ceiling:        large fp32 and bf16 matmuls measured in the same run, the denominator of every MFU figure;
- train:          forward + backward + AdamW step, tokens/s, fp32 and bf16 autocast (autocast on both sides);
- forward:        inference latency at batch 1 and 8;
- generate:       tokens/s of greedy, 4-beam and sampled decoding (prompt 32, 64 new tokens), batch 1 and 8, plus
                  greedy without a cache and our static-cache torch.compile path;
- decode_profile: one cached decoding step broken into phases (embedding, each layer, norm, LM head, the model's
                  own glue, GenerationMixin's per-step work), aten ops per step, overhead over the FLOP floor;
- length:         forward + backward time and peak memory per token at 128 … 4096 tokens per sequence;
- long_attention: inference at 4k-16k tokens, SDPA against FlexAttention (causal, packed documents, ALiBi);
- memory:         peak memory of a causal-LM training step, ours vs HF, at vocabularies of 8k, 32k and 128k;
- window_cache:   the key/value cache a tiny Mistral with a 256-token window holds while decoding 4096 tokens, ours
                  vs HF, and the same model's unbounded cache without the window (sizes, not timings; ~1 minute);
- state_cache:    what tiny latent-attention (DeepSeek-V3) and Gated DeltaNet (Qwen3-Next) decoders cache per token
                  and layer while decoding 4096 tokens, ours vs HF, against a Llama's per-head keys and values (sizes,
                  not timings; a few minutes on one thread);
- generate_batch: continuous batching (`generate_batch`), requests of many prompt lengths (gpu preset);
- flex_train:     a training step on packed documents, SDPA against FlexAttention, as the packed length changes,
                  with the first call's (compiling) time and the graphs compiled (gpu preset).

The `gpu` preset (`--preset gpu --device cuda`) measures GPT-2 124M and a Llama-shaped 200M decoder at 1024 tokens in
bf16: eager and compiled training (and HF with liger-kernel where it is installed), decoding at batch 1 and 32 with
the dynamic cache, the compiled static cache and CUDA graphs, continuous batching and FlexAttention; `gpu-tiny` is
the same at the tiny preset's size, which the tests run on the CPU.

Method (`benchmarks.harness`): contenders are interleaved (A B, then B A, …) after warm-up; each row reports the
median and min–max, and the speed-up is the median of per-round paired ratios (adjacent runs see the same machine
load). FLOPs are counted analytically (`benchmarks.flops`); peak memory is measured in fresh processes
(`benchmarks.peak_memory`). Results go to DIR/<preset>.json and DIR/<preset>.md (a run of some sections only, to
DIR/<preset>-<sections>.json and .md, so that it never replaces a whole run's file); a full run of every section and
family also renders docs/benchmarks.md (`benchmarks.report`).
"""

import argparse
import copy
import dataclasses
import json
import os
import time
from pathlib import Path

import torch
from transformers.utils import logging as hf_logging

from . import (
    ceiling,
    decode_profile,
    flex_train,
    forward,
    generate,
    generate_batch,
    length,
    long_attention,
    memory,
    state_cache,
    train,
    window_cache,
)
from .harness import Session
from .machine import machine_info, native_bf16
from .models import make_pair, training_batch
from .plan import PRESETS, SECTIONS, Plan
from .report import DOCS_PAGE, GPU_PAGE, markdown, write_docs_page, write_gpu_block

# make_pair, training_batch and Plan stay importable from here for code written against the single-file benchmark.
__all__ = ["PRESETS", "Plan", "main", "make_pair", "training_batch"]

MEASURE = {
    "ceiling": ceiling.measure,
    "train": train.measure,
    "forward": forward.measure,
    "generate": generate.measure,
    "generate_batch": generate_batch.measure,
    "decode_profile": decode_profile.measure,
    "length": length.measure,
    "long_attention": long_attention.measure,
    "flex_train": flex_train.measure,
    "memory": memory.measure,
    "window_cache": window_cache.measure,
    "state_cache": state_cache.measure,
}
NEEDS_CEILING = ("decode_profile",)  # its FLOP floor divides by the fp32 ceiling of the same run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a reduced set (a few minutes)")
    parser.add_argument(
        "--preset",
        choices=list(PRESETS),
        help="full, quick, tiny (tests), gpu (one GPU) or gpu-tiny (tests); overrides --quick",
    )
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--sections", help=f"comma-separated subset of {','.join(SECTIONS)}")
    parser.add_argument(
        "--families", help="comma-separated subset of families for train/forward/generate/decode_profile/memory"
    )
    parser.add_argument(
        "--bf16-anyway",
        action="store_true",
        help="time the bf16 training rows also on a CPU "
        "without native bf16 matmuls (both sides then take minutes per step)",
    )
    parser.add_argument(
        "--train-compiled",
        help="comma-separated families whose training step is also timed "
        "through torch.compile, ours and HF's (about a minute of compiling each)",
    )
    parser.add_argument(
        "--docs",
        type=Path,
        help="also render the documentation page here (default: "
        "docs/benchmarks.md after a full run of every section and family)",
    )
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device cuda: torch {torch.__version__} sees no CUDA device here; use --device cpu")
    unknown = set(args.sections.split(",")) - set(SECTIONS) if args.sections else set()
    if unknown:
        parser.error(f"unknown sections {', '.join(sorted(unknown))}; known: {', '.join(SECTIONS)}")
    return args


def make_plan(args: argparse.Namespace) -> Plan:
    """The chosen preset, narrowed to the requested sections and families."""
    plan = copy.deepcopy(PRESETS[args.preset or ("quick" if args.quick else "full")])
    if args.sections:
        plan.sections = tuple(args.sections.split(","))
        if any(s in plan.sections for s in NEEDS_CEILING) and "ceiling" not in plan.sections:
            plan.sections = ("ceiling", *plan.sections)
    if args.families:
        chosen = set(args.families.split(","))
        plan.train_families = tuple(f for f in plan.train_families if f in chosen)
        plan.gen_families = tuple(f for f in plan.gen_families if f in chosen)
        plan.memory_families = tuple(f for f in plan.memory_families if f in chosen)
    if args.train_compiled is not None:
        plan.train_compiled = tuple(f for f in args.train_compiled.split(",") if f)
    return plan


def skip_slow_bf16(plan: Plan, args: argparse.Namespace) -> list[str]:
    """Drop the bf16 training rows on hardware without native bf16 (unless asked); the note saying so."""
    if "train" not in plan.sections or "bf16" not in plan.train_dtypes or native_bf16(args.device) or args.bf16_anyway:
        return []
    plan.train_dtypes = tuple(dtype for dtype in plan.train_dtypes if dtype != "bf16")
    return [
        "bf16 training rows not run: this machine has no native bf16 matmul (no AVX512-BF16/AMX), so bf16 "
        "autocast runs PyTorch's scalar bf16 fallback on both sides (see the bf16 ceiling) and steps take "
        "minutes; `--bf16-anyway` runs them."
    ]


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    plan = make_plan(args)
    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.0f}s] {message}", flush=True)

    notes = skip_slow_bf16(plan, args)
    results = {"machine": machine_info(args.device), "plan": dataclasses.asdict(plan), "notes": notes}
    for note in notes:
        log(note)
    log(
        f"{results['machine'].get('cpu_model', args.device)}, {torch.get_num_threads()} threads, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, preset {plan.name}"
    )
    session = Session(device=args.device, log=log, results=results)
    for section in plan.sections:
        results[section] = MEASURE[section](plan, session)
    results["elapsed_s"] = time.perf_counter() - started
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = plan.name if not args.sections else f"{plan.name}-{'-'.join(s for s in plan.sections if s != 'ceiling')}"
    (out / f"{stem}.json").write_text(json.dumps(results, indent=1))
    (out / f"{stem}.md").write_text(markdown(results))
    log(f"wrote {out / stem}.json and .md")
    whole = not (args.sections or args.families)
    if plan.name.startswith("gpu"):
        # a whole gpu run on a GPU fills docs/performance.md's GPU tables; --docs PATH writes them into another page
        docs = args.docs or (GPU_PAGE if plan.name == "gpu" and args.device == "cuda" and whole else None)
        if docs:
            write_gpu_block(results, out / f"{stem}.json", docs)
            log(f"wrote the GPU tables of {docs}")
        return results
    docs = args.docs or (DOCS_PAGE if plan.name == "full" and whole else None)
    if docs:
        write_docs_page(results, out / f"{stem}.json", docs)
        log(f"wrote {docs}")
    return results


if __name__ == "__main__":
    main()
