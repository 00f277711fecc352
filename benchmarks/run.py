"""hf_attention vs the Hugging Face reference implementations, side by side in one run.

    python -m benchmarks.run [--quick] [--device cpu|cuda] [--out DIR]

Every pair is the reference model (GPT-2, Llama, BERT, BART, T5; random weights, same dimensions) and our model
converted from it with `hf_attention.convert.from_hf`, so weights and maths are identical; logit parity is ASSERTED
before anything is timed. Sections:

- train:     forward + backward + AdamW step, tokens/s, fp32 and bf16 autocast (autocast on both sides);
- forward:   inference latency at batch 1 and 8;
- generate:  greedy decoding tokens/s (prompt 32, 64 new tokens), batch 1 and 8, cache on/off, plus our static-cache
             torch.compile path (`hf_attention.generation.compiled_generate`);
- length:    forward + backward time and peak memory per token at 128 … 4096 tokens per sequence, constant tokens per
             step, our decoder with the eager and sdpa backends (and sdpa + gradient checkpointing);
- ceiling:   large fp32 and bf16 matmuls measured in the same run, the denominator of every MFU figure.

Method: contenders are interleaved (A B, then B A, …) after warm-up; each row reports the median and min–max, and the
speed-up is the median of per-round paired ratios (adjacent runs see the same machine load). FLOPs are counted
analytically (see `model_flops`). Peak memory on CPU: glibc is told to serve every allocation ≥ 64 KiB with mmap
(so freed tensors go back to the OS at once), the kernel's peak-RSS counter is reset (/proc/self/clear_refs), one
step runs, and the peak is VmHWM minus the RSS before the step: the transient memory of the step (activations,
gradients, workspace). Each figure comes from a fresh process (after the timing rounds, which the mmap setting would
slow), so that no earlier step's allocations can shape it.
Results go to DIR/<preset>.json and DIR/<preset>.md.
"""

import os

# Before torch starts its OpenMP pool: spinning workers avoid a sleep/wake per small op (override from the shell).
os.environ.setdefault("OMP_WAIT_POLICY", "ACTIVE")

import argparse  # noqa: E402
import contextlib  # noqa: E402
import copy  # noqa: E402
import ctypes  # noqa: E402
import dataclasses  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402
import transformers  # noqa: E402
from torch import nn  # noqa: E402
from transformers import (  # noqa: E402
    BartConfig,
    BartForConditionalGeneration,
    BertConfig,
    BertForMaskedLM,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    T5Config,
    T5ForConditionalGeneration,
)
from transformers.utils import logging as hf_logging  # noqa: E402

from hf_attention.attention import MultiHeadAttention  # noqa: E402
from hf_attention.convert import from_hf  # noqa: E402
from hf_attention.generation import compiled_generate  # noqa: E402
from hf_attention.hardware import cpu_has_fast_bf16  # noqa: E402

PARITY_TOLERANCE = 1e-4
FAMILY_KIND = {"gpt2": "decoder", "llama": "decoder", "bert": "encoder", "bart": "seq2seq", "t5": "seq2seq"}


@dataclasses.dataclass
class Plan:
    """What to run. `full` is the issue's specification; `quick` and `tiny` shrink it."""

    name: str = "full"
    vocab: int = 8000
    hidden: int = 256
    layers: int = 4
    heads: int = 4
    ffn: int = 1024
    batch: int = 8
    seq: int = 128
    warmup: int = 2
    train_families: tuple = ("gpt2", "llama", "bert", "bart", "t5")
    train_dtypes: tuple = ("fp32", "bf16")
    train_rounds: int = 24
    train_compiled: tuple = ()  # families whose training step is also timed through torch.compile (ours and HF's)
    forward_batches: tuple = (1, 8)
    forward_rounds: int = 10
    gen_families: tuple = ("gpt2", "llama", "bart", "t5")
    gen_batches: tuple = (1, 8)
    gen_prompt: int = 32
    gen_new: int = 64
    gen_rounds: int = 3
    gen_uncached: bool = True
    gen_compiled: tuple = ("llama", "bart")  # our static-cache compiled path (tens of s to compile)
    gen_compiled_batches: tuple = (1,)
    length_seqs: tuple = (128, 512, 1024, 2048, 4096)
    length_tokens: int = 4096
    length_rounds: int = 2
    length_variants: tuple = ("sdpa", "eager", "sdpa+checkpointing")
    ceiling_size: int = 2048
    ceiling_rounds: int = 8
    sections: tuple = ("ceiling", "train", "forward", "generate", "length")


PRESETS = {
    "full": Plan(),
    "quick": Plan(
        name="quick", train_families=("gpt2", "bart"), train_rounds=3, warmup=1, forward_batches=(1,),
        forward_rounds=3, gen_families=("llama",), gen_batches=(1,), gen_rounds=2, gen_uncached=False,
        gen_compiled=(), length_seqs=(128, 512, 1024), length_tokens=1024, length_rounds=2,
        length_variants=("sdpa", "eager"), ceiling_size=1024, ceiling_rounds=4,
    ),
    "tiny": Plan(
        name="tiny", vocab=99, hidden=32, layers=1, heads=4, ffn=64, batch=2, seq=16, warmup=1,
        train_families=("gpt2", "bert", "t5"), train_rounds=1, forward_batches=(1,), forward_rounds=1,
        gen_families=("gpt2", "bart"), gen_batches=(1,), gen_prompt=4, gen_new=3, gen_rounds=1,
        gen_compiled=(), length_seqs=(16, 32), length_tokens=64, length_rounds=1,
        length_variants=("sdpa", "eager"), ceiling_size=128, ceiling_rounds=1,
    ),
}

# ---------------------------------------------------------------------------------------------------------------------
# Models: a reference of each family and our converted twin


def reference_model(family: str, plan: Plan, max_positions: int = 512) -> nn.Module:
    """A randomly initialised HF reference of `family` with the plan's dimensions, sdpa attention, no dropout."""
    p = plan
    if family == "gpt2":
        model_class, config = GPT2LMHeadModel, GPT2Config(
            vocab_size=p.vocab, n_embd=p.hidden, n_layer=p.layers, n_head=p.heads, n_inner=p.ffn,
            n_positions=max_positions, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0,
            eos_token_id=0, pad_token_id=0)
    elif family == "llama":
        model_class, config = LlamaForCausalLM, LlamaConfig(
            vocab_size=p.vocab, hidden_size=p.hidden, intermediate_size=p.ffn, num_hidden_layers=p.layers,
            num_attention_heads=p.heads, num_key_value_heads=p.heads, max_position_embeddings=max_positions,
            bos_token_id=1, eos_token_id=2, pad_token_id=0)
    elif family == "bert":
        model_class, config = BertForMaskedLM, BertConfig(
            vocab_size=p.vocab, hidden_size=p.hidden, num_hidden_layers=p.layers, num_attention_heads=p.heads,
            intermediate_size=p.ffn, max_position_embeddings=max_positions, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0)
    elif family == "bart":
        model_class, config = BartForConditionalGeneration, BartConfig(
            vocab_size=p.vocab, d_model=p.hidden, encoder_layers=p.layers, decoder_layers=p.layers,
            encoder_attention_heads=p.heads, decoder_attention_heads=p.heads, encoder_ffn_dim=p.ffn,
            decoder_ffn_dim=p.ffn, max_position_embeddings=max_positions, dropout=0.0, attention_dropout=0.0,
            activation_dropout=0.0)
    elif family == "t5":
        model_class, config = T5ForConditionalGeneration, T5Config(
            vocab_size=p.vocab, d_model=p.hidden, d_kv=p.hidden // p.heads, d_ff=p.ffn, num_layers=p.layers,
            num_heads=p.heads, dropout_rate=0.0, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    else:
        raise ValueError(f"unknown family {family!r}; known: {', '.join(FAMILY_KIND)}")
    return model_class._from_config(config, attn_implementation="sdpa")


def make_pair(family: str, plan: Plan, device: str, max_positions: int = 512) -> tuple[nn.Module, nn.Module]:
    """(reference, ours) with identical weights, on `device`, in eval mode."""
    torch.manual_seed(0)
    reference = reference_model(family, plan, max_positions).to(device).eval()
    ours = from_hf(reference).to(device).eval()
    return reference, ours


def random_ids(plan: Plan, batch: int, length: int, device: str, seed: int) -> torch.Tensor:
    """Token ids clear of the special tokens (0-3 in every reference config here)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(4, plan.vocab, (batch, length), generator=generator).to(device)


MLM_PROBABILITY = 0.15  # BERT's recipe, and `DataCollatorForLanguageModeling`'s default (our masked_lm config's too)
MASK_ID = 3  # a special id of the reference configs' range, never drawn by `random_ids`


def training_batch(family: str, plan: Plan, batch: int, length: int, device: str) -> dict:
    """Inputs + labels: next-token LM (decoders), teacher forcing (seq2seq), masked LM (encoder).

    The encoder's batch is what `DataCollatorForLanguageModeling` makes for BERT pre-training: 15% of the positions
    carry a label (-100 elsewhere); of those, 80% read [MASK], 10% a random token and 10% stay as they are. Both
    contenders compute the logits of every position; what each does with the unlabelled rows is its own business.
    """
    ids = random_ids(plan, batch, length, device, seed=1)
    if FAMILY_KIND[family] == "seq2seq":
        return {"input_ids": ids, "labels": random_ids(plan, batch, length, device, seed=2)}
    if FAMILY_KIND[family] == "decoder":
        return {"input_ids": ids, "labels": ids}
    generator = torch.Generator().manual_seed(3)
    draw = torch.rand(batch, length, generator=generator).to(device)
    chosen = draw < MLM_PROBABILITY
    masked = chosen & (draw < 0.8 * MLM_PROBABILITY)
    randomised = chosen & (draw >= 0.9 * MLM_PROBABILITY)
    inputs = ids.masked_fill(masked, MASK_ID)
    inputs = torch.where(randomised, random_ids(plan, batch, length, device, seed=4), inputs)
    return {"input_ids": inputs, "labels": ids.masked_fill(~chosen, -100)}


def assert_parity(family: str, reference: nn.Module, ours: nn.Module, inputs: dict) -> float:
    """Max |logit difference| in fp32 eval mode; raises AssertionError above PARITY_TOLERANCE."""
    with torch.no_grad():
        theirs, mine = reference(**inputs), ours(**inputs)
    diff = (theirs.logits.float() - mine.logits.float()).abs().max().item()
    loss_diff = abs(theirs.loss.item() - mine.loss.item()) if theirs.loss is not None else 0.0
    assert diff <= PARITY_TOLERANCE and loss_diff <= PARITY_TOLERANCE, (
        f"{family}: logits differ by {diff:.3g} (loss by {loss_diff:.3g}); refusing to time non-equivalent models")
    return diff


# ---------------------------------------------------------------------------------------------------------------------
# FLOPs (analytic) and the machine's ceiling


def model_flops(model: nn.Module, *, batch: int, source_length: int, target_length: int, training: bool,
                labelled_fraction: float = 1.0) -> float:
    """Matmul FLOPs of one step of one of our models (the same architecture as its reference).

    Formula: every nn.Linear of W = in·out weights costs 2·W FLOPs per token it sees forward (encoder layers see the
    source tokens, decoder layers and the LM head the target tokens; an encoder-only model's are all source tokens),
    and each attention costs 2·2·T_q·T_k·(H·D) forward (QKᵀ and weights·V), halved for causal self-attention (the
    other half is masked out and skipped by the fused kernel). Training = 3 × forward (backward is twice the
    forward); i.e. 6·params·tokens + 12·T_q·T_k·(H·D)·B per attention (÷2 if causal). The LM head's backward needs
    only the rows that carry a label (`labelled_fraction`: 15% under masked LM), so it counts 2·W·tokens forward and
    4·W·tokens·labelled_fraction backward. Embedding lookups, norms, activations and the loss are not counted.
    """
    factor = 3.0 if training else 1.0
    is_seq2seq = getattr(model.config, "is_encoder_decoder", False)
    encoder_only = not is_seq2seq and not getattr(model.config, "is_decoder", False) and hasattr(
        getattr(model, "model", model), "encoder")
    total = head = 0.0
    for name, module in model.named_modules():
        in_encoder = ".encoder." in f".{name}." or encoder_only
        tokens = batch * (source_length if in_encoder else target_length)
        if isinstance(module, nn.Linear) and "score" not in name:
            forward = 2.0 * module.in_features * module.out_features * tokens
            if name == "lm_head" and training:  # forward + backward over the labelled rows
                head += forward * (1.0 + 2.0 * labelled_fraction)
            else:
                total += forward
        elif isinstance(module, MultiHeadAttention):
            queries = source_length if in_encoder else target_length
            keys = source_length if (in_encoder or module.is_cross_attention) else target_length
            attention = 2.0 * 2.0 * batch * queries * keys * module.num_heads * module.head_dim
            total += attention / 2 if module.is_causal else attention
    return factor * total + head


def native_bf16(device: str) -> bool:
    """Whether `device` multiplies bf16 matrices natively (CUDA with bf16; a CPU with AVX512-BF16/AMX)."""
    return torch.cuda.is_bf16_supported() if device == "cuda" else cpu_has_fast_bf16()


# Without native bf16 a CPU's bf16 matmul runs a scalar fallback (0.7 GFLOP/s on an AVX2 EPYC): its ceiling is
# measured on matrices this small, or one round would take minutes.
SLOW_BF16_CEILING_SIZE = 512


def matmul_ceiling(size: int, rounds: int, device: str) -> dict:
    """FLOP/s of size×size matmuls in fp32 and bf16, interleaved; the best round is the ceiling."""
    sizes = {"fp32": size, "bf16": size if native_bf16(device) else min(size, SLOW_BF16_CEILING_SIZE)}
    tensors = {name: (torch.randn(sizes[name], sizes[name], device=device, dtype=dtype),
                      torch.randn(sizes[name], sizes[name], device=device, dtype=dtype))
               for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))}
    calls = {name: (lambda a=a, b=b: torch.mm(a, b)) for name, (a, b) in tensors.items()}
    times = interleave(calls, rounds=rounds, warmup=2, device=device)
    return {name: {"flops_per_s_best": 2.0 * sizes[name]**3 / min(t),
                   "flops_per_s_median": 2.0 * sizes[name]**3 / statistics.median(t),
                   "size": sizes[name], "times_s": t} for name, t in times.items()}


# ---------------------------------------------------------------------------------------------------------------------
# Timing


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
    return {"median_s": median, "min_s": min(times), "max_s": max(times), "rate": work / median,
            "rate_min": work / max(times), "rate_max": work / min(times), "rounds": len(times)}


def paired_speedup(reference: list[float], ours: list[float]) -> float:
    """Median over rounds of reference_time / our_time (adjacent runs share the machine's load)."""
    return statistics.median(r / o for r, o in zip(reference, ours, strict=True))


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


# ---------------------------------------------------------------------------------------------------------------------
# Sections


def run_train(plan: Plan, device: str, log: Callable) -> list[dict]:
    rows = []
    tokens = plan.batch * plan.seq
    for family in plan.train_families:
        reference, ours = make_pair(family, plan, device)
        batch = training_batch(family, plan, plan.batch, plan.seq, device)
        diff = assert_parity(family, reference, ours, batch)
        labelled = (batch["labels"] != -100).float().mean().item()
        flops = model_flops(ours, batch=plan.batch, source_length=plan.seq, target_length=plan.seq, training=True,
                            labelled_fraction=labelled)
        for dtype in plan.train_dtypes:
            calls = {"hf": TrainStep(reference.train(), batch, dtype, device),
                     "ours": TrainStep(ours.train(), batch, dtype, device)}
            if family in plan.train_compiled:
                calls["hf_compiled"] = TrainStep(reference, batch, dtype, device, compiled=True)
                calls["ours_compiled"] = TrainStep(ours, batch, dtype, device, compiled=True)
            times = interleave(calls, rounds=plan.train_rounds, warmup=plan.warmup, device=device)
            row = {"family": family, "dtype": dtype, "tokens_per_step": tokens, "flops_per_step": flops,
                   "parity_max_logit_diff": diff, "speedup": paired_speedup(times["hf"], times["ours"])}
            for name, t in times.items():
                row[name] = summary(t, tokens)
            if "ours_compiled" in times:
                row["speedup_compiled_vs_hf_eager"] = paired_speedup(times["hf"], times["ours_compiled"])
                row["speedup_compiled_vs_hf_compiled"] = paired_speedup(times["hf_compiled"], times["ours_compiled"])
            rows.append(row)
            log(f"train {family:5s} {dtype}: hf {row['hf']['rate']:8.0f} tok/s, ours {row['ours']['rate']:8.0f} "
                f"tok/s, speed-up {row['speedup']:.2f}x (parity {diff:.1e})")
        reference.eval(), ours.eval()
        del reference, ours
    return rows


def run_forward(plan: Plan, device: str, log: Callable) -> list[dict]:
    rows = []
    for family in plan.train_families:
        reference, ours = make_pair(family, plan, device)
        for batch_size in plan.forward_batches:
            ids = random_ids(plan, batch_size, plan.seq, device, seed=3)
            inputs = {"input_ids": ids}
            if FAMILY_KIND[family] == "seq2seq":
                inputs["decoder_input_ids"] = random_ids(plan, batch_size, plan.seq, device, seed=4)

            def call(model, inputs=inputs):
                with torch.inference_mode():
                    return model(**inputs).logits

            with torch.inference_mode():
                diff = (call(reference) - call(ours)).abs().max().item()
            assert diff <= PARITY_TOLERANCE, f"{family}: forward logits differ by {diff:.3g}"
            times = interleave({"hf": lambda m=reference: call(m), "ours": lambda m=ours: call(m)},
                               rounds=plan.forward_rounds, warmup=plan.warmup, device=device)
            row = {"family": family, "batch": batch_size, "seq": plan.seq,
                   "speedup": paired_speedup(times["hf"], times["ours"])}
            for name, t in times.items():
                row[name] = summary(t, batch_size * plan.seq)
            rows.append(row)
            log(f"forward {family:5s} b{batch_size}: hf {row['hf']['median_s'] * 1e3:7.2f} ms, ours "
                f"{row['ours']['median_s'] * 1e3:7.2f} ms, speed-up {row['speedup']:.2f}x")
        del reference, ours
    return rows


def run_generate(plan: Plan, device: str, log: Callable) -> list[dict]:
    rows = []
    options = {"max_new_tokens": plan.gen_new, "min_new_tokens": plan.gen_new, "do_sample": False, "num_beams": 1}
    for family in plan.gen_families:
        reference, ours = make_pair(family, plan, device)
        for model in (reference, ours):  # no forced tokens or n-gram rules: plain greedy on both sides
            config = model.generation_config
            config.forced_bos_token_id = config.forced_eos_token_id = None
            config.no_repeat_ngram_size = 0
        for batch_size in plan.gen_batches:
            prompt = random_ids(plan, batch_size, plan.gen_prompt, device, seed=5)
            inputs = {"input_ids": prompt, "attention_mask": torch.ones_like(prompt)}
            calls, same = {}, {}
            for cache in (True, False) if plan.gen_uncached else (True,):
                tag = "cache" if cache else "no_cache"
                for side, model in (("hf", reference), ("ours", ours)):
                    calls[f"{side}_{tag}"] = lambda c=cache, m=model, x=inputs: m.generate(**x, **options, use_cache=c)
            if family in plan.gen_compiled and batch_size in plan.gen_compiled_batches:
                calls["ours_compiled_static"] = lambda m=ours, x=inputs: compiled_generate(m, **x, **options)
            outputs = {name: call() for name, call in calls.items()}  # also the compile warm-up
            for name, tokens in outputs.items():
                same[name] = bool(torch.equal(tokens, outputs["hf_cache"]))
            times = interleave(calls, rounds=plan.gen_rounds, warmup=plan.warmup, device=device)
            new_tokens = batch_size * plan.gen_new
            row = {"family": family, "batch": batch_size, "prompt": plan.gen_prompt, "new_tokens": plan.gen_new,
                   "same_tokens_as_hf": same}
            for name, t in times.items():
                row[name] = summary(t, new_tokens)
            row["speedup_cache"] = paired_speedup(times["hf_cache"], times["ours_cache"])
            if "ours_compiled_static" in times:
                row["speedup_compiled_static"] = paired_speedup(times["hf_cache"], times["ours_compiled_static"])
            if plan.gen_uncached:
                row["speedup_no_cache"] = paired_speedup(times["hf_no_cache"], times["ours_no_cache"])
            rows.append(row)
            log(f"generate {family:5s} b{batch_size}: " + ", ".join(
                f"{name} {row[name]['rate']:.0f} tok/s" for name in times) + f" (same tokens: {same})")
        del reference, ours
    return rows


def _rss(field: str) -> int:
    match = re.search(field + r":\s+(\d+) kB", Path("/proc/self/status").read_text())
    return int(match.group(1)) * 1024


def peak_step_memory(step: Callable[[], None], device: str) -> int | None:
    """Peak transient bytes of one call of `step` (see the module docstring); None where it cannot be measured."""
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated() - base
    if not Path("/proc/self/clear_refs").exists():
        return None
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM (peak RSS) to the current RSS
    base = _rss("VmRSS")
    step()
    return _rss("VmHWM") - base


def force_mmap_for_large_allocations() -> bool:
    """glibc: serve allocations ≥ 64 KiB by mmap (returned to the OS on free), so that RSS follows live tensors."""
    with contextlib.suppress(OSError, AttributeError):
        return bool(ctypes.CDLL("libc.so.6").mallopt(-3, 64 * 1024))  # -3 = M_MMAP_THRESHOLD
    return False


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


def _peak_memory_in_fresh_process(plan: Plan, device: str, length: int, variant: str, results) -> None:
    """Child-process body of `isolated_peak_memory`: settle one step, then measure the next."""
    force_mmap_for_large_allocations()
    batch = training_batch("llama", plan, max(1, plan.length_tokens // length), length, device)
    step = length_step(length_model(plan, device, variant), batch)
    step()
    results.put(peak_step_memory(step, device))


def isolated_peak_memory(plan: Plan, device: str, length: int, variant: str) -> int | None:
    """Peak transient bytes of one step, measured in a fresh process.

    Measured in the parent, the figure depended on which variants had run before (the allocator keeps freed pages
    of earlier, larger steps: the same sdpa step read 302 MiB first and 555 MiB after the eager ones); a fresh
    process per (length, variant) gives each the same starting state.
    """
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    process = context.Process(target=_peak_memory_in_fresh_process, args=(plan, device, length, variant, results))
    process.start()
    peak = results.get(timeout=600)
    process.join()
    return peak


def run_length(plan: Plan, device: str, log: Callable) -> list[dict]:
    """Our Llama-architecture decoder, forward + backward, `length_tokens` tokens per step at every length."""
    models = {variant: length_model(plan, device, variant) for variant in plan.length_variants}
    rows = []
    for length in plan.length_seqs:
        batch_size = max(1, plan.length_tokens // length)
        batch = training_batch("llama", plan, batch_size, length, device)
        tokens = batch_size * length
        flops = model_flops(models[plan.length_variants[0]], batch=batch_size, source_length=length,
                            target_length=length, training=True)
        calls = {variant: length_step(model, batch) for variant, model in models.items()}
        times = interleave(calls, rounds=plan.length_rounds, warmup=1, device=device)
        for variant, t in times.items():
            rows.append({"variant": variant, "seq": length, "batch": batch_size, "tokens_per_step": tokens,
                         "flops_per_step": flops, **summary(t, tokens),
                         "us_per_token": statistics.median(t) / tokens * 1e6})
        log(f"length {length:5d} x{batch_size}: " + ", ".join(
            f"{v} {statistics.median(t) / tokens * 1e6:.1f} us/token" for v, t in times.items()))
    del models
    method = "cuda max_memory_allocated, fresh process" if device == "cuda" else (
        "peak RSS (VmHWM) minus RSS before the step, glibc mmap threshold 64 KiB, one fresh process per figure")
    for row in rows:
        peak = isolated_peak_memory(plan, device, row["seq"], row["variant"])
        row["peak_bytes"] = peak
        row["peak_bytes_per_token"] = None if peak is None else peak / row["tokens_per_step"]
        row["memory_method"] = method
    for length in plan.length_seqs:
        log(f"memory {length:5d}: " + ", ".join(
            f"{r['variant']} {r['peak_bytes'] / 2**20:.0f} MiB" for r in rows
            if r["seq"] == length and r.get("peak_bytes") is not None))
    return rows


# ---------------------------------------------------------------------------------------------------------------------
# Report


def machine_info(device: str) -> dict:
    info = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "threads": torch.get_num_threads(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "device": device}
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        for key, field in (("cpu_model", "Model name"), ("cpus", r"CPU\(s\)")):
            match = re.search(rf"^{field}:\s+(.+)$", lscpu, re.MULTILINE)
            if match:
                info[key] = match.group(1).strip()
        info["amx"] = "amx_bf16" in lscpu
    with contextlib.suppress(OSError):
        info["loadavg_start"] = Path("/proc/loadavg").read_text().split()[:3]
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name()
    return info


def _range(summary_: dict, scale: float = 1.0, fmt: str = "{:.0f}") -> str:
    return f"{fmt.format(summary_['rate'] * scale)} ({fmt.format(summary_['rate_min'] * scale)}–" \
           f"{fmt.format(summary_['rate_max'] * scale)})"


def markdown(results: dict) -> str:
    m, plan = results["machine"], results["plan"]
    ceiling = results.get("ceiling", {})
    lines = [f"Run `{plan['name']}` on {m.get('cpu_model', m['device'])} ({m.get('cpus', '?')} CPUs, "
             f"{m['threads']} threads, OMP_WAIT_POLICY={m['omp_wait_policy']}), torch {m['torch']}, transformers "
             f"{m['transformers']}, {m['date']}. Median (min–max) over interleaved rounds; speed-up = median of "
             "paired per-round ratios HF time / our time.", ""]
    if ceiling:
        lines += ["**Ceiling** (square matmul, best round): " + ", ".join(
            f"{k} {v['flops_per_s_best'] / 1e9:.1f} GFLOP/s (median {v['flops_per_s_median'] / 1e9:.1f}, "
            f"{v['size']}²)" for k, v in ceiling.items()), ""]
    lines += [f"Note: {note}" for note in results.get("notes", [])] + ([""] if results.get("notes") else [])

    def mfu(rate_tokens: float, flops_per_token: float, dtype: str) -> str:
        if dtype not in ceiling:
            return "–"
        return f"{100 * rate_tokens * flops_per_token / ceiling[dtype]['flops_per_s_best']:.1f}%"

    if results.get("train"):
        lines += [f"**Training step** (forward + backward + AdamW), batch {plan['batch']} × {plan['seq']} tokens, "
                  f"d_model {plan['hidden']}, {plan['layers']} layers, {plan['heads']} heads, ffn {plan['ffn']}, "
                  f"vocab {plan['vocab']}; labels: next token (decoders), teacher forcing (seq2seq), BERT's "
                  f"{MLM_PROBABILITY:.0%} masked positions (encoder); tokens/s:", "",
                  "| family | dtype | HF tokens/s | ours tokens/s | speed-up | MFU HF | MFU ours | extra |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in results["train"]:
            per_token = r["flops_per_step"] / r["tokens_per_step"]
            extra = ""
            if "ours_compiled" in r:
                extra = (f"compiled: ours {r['ours_compiled']['rate']:.0f}, HF {r['hf_compiled']['rate']:.0f} "
                         f"({r['speedup_compiled_vs_hf_compiled']:.2f}×)")
            lines.append(f"| {r['family']} | {r['dtype']} | {_range(r['hf'])} | {_range(r['ours'])} | "
                         f"**{r['speedup']:.2f}×** | {mfu(r['hf']['rate'], per_token, r['dtype'])} | "
                         f"{mfu(r['ours']['rate'], per_token, r['dtype'])} | {extra} |")
        lines.append("")
    if results.get("forward"):
        lines += [f"**Forward latency** (inference, fp32, {plan['seq']} tokens per sequence), ms:", "",
                  "| family | batch | HF ms | ours ms | speed-up |", "|---|---|---|---|---|"]
        for r in results["forward"]:
            lines.append(f"| {r['family']} | {r['batch']} | {r['hf']['median_s'] * 1e3:.2f} "
                         f"({r['hf']['min_s'] * 1e3:.2f}–{r['hf']['max_s'] * 1e3:.2f}) | "
                         f"{r['ours']['median_s'] * 1e3:.2f} ({r['ours']['min_s'] * 1e3:.2f}–"
                         f"{r['ours']['max_s'] * 1e3:.2f}) | **{r['speedup']:.2f}×** |")
        lines.append("")
    if results.get("generate"):
        lines += [f"**Greedy generation**, prompt {plan['gen_prompt']}, {plan['gen_new']} new tokens, new tokens/s "
                  "(fp32):", "",
                  "| family | batch | HF cache | ours cache | speed-up | ours compiled static | speed-up | "
                  "HF no cache | ours no cache | same tokens |", "|---|---|---|---|---|---|---|---|---|---|"]
        for r in results["generate"]:
            def cell(key, r=r):
                return _range(r[key]) if key in r else "–"
            compiled_speedup = f"**{r['speedup_compiled_static']:.2f}×**" if "speedup_compiled_static" in r else "–"
            lines.append(f"| {r['family']} | {r['batch']} | {cell('hf_cache')} | {cell('ours_cache')} | "
                         f"**{r['speedup_cache']:.2f}×** | {cell('ours_compiled_static')} | {compiled_speedup} | "
                         f"{cell('hf_no_cache')} | {cell('ours_no_cache')} | "
                         f"{'yes' if all(r['same_tokens_as_hf'].values()) else r['same_tokens_as_hf']} |")
        lines.append("")
    if results.get("length"):
        lines += [f"**Sequence length** (our Llama-architecture decoder, fp32 forward + backward, "
                  f"{plan['length_tokens']} tokens per step):", "",
                  "| variant | seq × batch | µs/token | MFU | MFU / MFU@first | peak MiB | peak / peak@first |",
                  "|---|---|---|---|---|---|---|"]
        first = {}
        for r in results["length"]:
            per_token = r["flops_per_step"] / r["tokens_per_step"]
            achieved = r["rate"] * per_token / ceiling["fp32"]["flops_per_s_best"] if "fp32" in ceiling else None
            base = first.setdefault(r["variant"], (achieved, r.get("peak_bytes")))
            peak = r.get("peak_bytes")
            lines.append(
                f"| {r['variant']} | {r['seq']} × {r['batch']} | {r['us_per_token']:.1f} "
                f"({r['min_s'] / r['tokens_per_step'] * 1e6:.1f}–{r['max_s'] / r['tokens_per_step'] * 1e6:.1f}) | "
                + (f"{100 * achieved:.1f}% | {achieved / base[0]:.2f} | " if achieved else "– | – | ")
                + (f"{peak / 2**20:.0f} | {peak / base[1]:.2f} |" if peak and base[1] else "– | – |"))
        lines += ["", f"Memory: {results['length'][0].get('memory_method', '–')}.", ""]
    lines += ["FLOPs: " + model_flops.__doc__.split("Formula: ", 1)[1].replace("\n    ", " ").strip(), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a reduced set (about 2-3 minutes)")
    parser.add_argument("--preset", choices=list(PRESETS), help="full, quick or tiny (tests); overrides --quick")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--sections", help="comma-separated subset of ceiling,train,forward,generate,length")
    parser.add_argument("--families", help="comma-separated subset of families for train/forward/generate")
    parser.add_argument("--bf16-anyway", action="store_true", help="time the bf16 training rows also on a CPU "
                        "without native bf16 matmuls (both sides then take minutes per step)")
    parser.add_argument("--train-compiled", help="comma-separated families whose training step is also timed "
                        "through torch.compile, ours and HF's (about a minute of compiling each)")
    args = parser.parse_args(argv)
    plan = copy.deepcopy(PRESETS[args.preset or ("quick" if args.quick else "full")])
    if args.sections:
        plan.sections = tuple(args.sections.split(","))
    if args.families:
        chosen = set(args.families.split(","))
        plan.train_families = tuple(f for f in plan.train_families if f in chosen)
        plan.gen_families = tuple(f for f in plan.gen_families if f in chosen)
    if args.train_compiled is not None:
        plan.train_compiled = tuple(f for f in args.train_compiled.split(",") if f)
    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    started = time.perf_counter()

    def log(message: str) -> None:
        print(f"[{time.perf_counter() - started:6.0f}s] {message}", flush=True)

    notes = []
    if "bf16" in plan.train_dtypes and not native_bf16(args.device) and not args.bf16_anyway:
        plan.train_dtypes = tuple(dtype for dtype in plan.train_dtypes if dtype != "bf16")
        notes.append("bf16 training rows not run: this machine has no native bf16 matmul (no AVX512-BF16/AMX), so "
                     "bf16 autocast runs PyTorch's scalar bf16 fallback on both sides (see the bf16 ceiling) and "
                     "steps take minutes; `--bf16-anyway` runs them.")
    results = {"machine": machine_info(args.device), "plan": dataclasses.asdict(plan), "notes": notes}
    for note in notes:
        log(note)
    log(f"{results['machine'].get('cpu_model', args.device)}, {torch.get_num_threads()} threads, "
        f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, preset {plan.name}")
    runners = {"train": run_train, "forward": run_forward, "generate": run_generate, "length": run_length}
    for section in plan.sections:
        if section == "ceiling":
            results["ceiling"] = matmul_ceiling(plan.ceiling_size, plan.ceiling_rounds, args.device)
            log("ceiling: " + ", ".join(f"{k} {v['flops_per_s_best'] / 1e9:.0f} GFLOP/s"
                                        for k, v in results["ceiling"].items()))
        else:
            results[section] = runners[section](plan, args.device, log)
    results["elapsed_s"] = time.perf_counter() - started
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{plan.name}.json").write_text(json.dumps(results, indent=1))
    (out / f"{plan.name}.md").write_text(markdown(results))
    log(f"wrote {out / plan.name}.json and .md")
    return results


if __name__ == "__main__":
    main()
