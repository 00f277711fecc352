# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 08 · Why attention: path length, parallelism, and the quadratic bill
#
# An RNN reads a sentence one token at a time and carries everything it knows in one hidden state; a
# convolutional network sees a window of $k$ tokens per layer. Self-attention connects every token with every other
# token in one layer. Vaswani et al. (2017, §4 and Table 1) compare the three on three counts, for a sequence of
# $n$ tokens of width $d$:
#
# * **cost per layer**: the multiply-adds of mixing information across positions;
# * **sequential operations**: steps that must wait for the previous one, which no number of cores can run at once;
# * **maximum path length**: how many layers or steps a signal crosses between the two most distant positions. The
#   shorter, the easier to learn long-range dependencies: a gradient that must cross $n$ steps tends to vanish or
#   explode on the way.
#
# This tutorial prints that table with concrete numbers, measures the path lengths, and measures what
# self-attention pays for them: time and memory that grow with $n^2$.

# %%
import ctypes
import json
import math
import statistics
import time
from types import SimpleNamespace

import torch
from tutorial_support import ROOT, Report, parse_args, plt, save_figure, table

from hf_attention.attention import MultiHeadAttention, eager_attention_forward, sdpa_attention_forward

args = parse_args("Cost per layer, path length, and measured time and memory of eager vs SDPA attention.")
report = Report(args)
torch.manual_seed(0)

# %% [markdown]
# ## The table of Vaswani et al. (2017), with numbers
#
# | layer | cost per layer | sequential operations | maximum path length |
# |---|---|---|---|
# | self-attention | $O(n^2 d)$ | $O(1)$ | $O(1)$ |
# | recurrent | $O(n d^2)$ | $O(n)$ | $O(n)$ |
# | convolutional (kernel $k$) | $O(k\, n\, d^2)$ | $O(1)$ | $O(\log_k n)$ dilated, $O(n/k)$ contiguous |
# | self-attention restricted to a window $r$ | $O(r\, n\, d)$ | $O(1)$ | $O(n/r)$ |
#
# Self-attention costs $n^2 d$ (every pair of positions, a dot product of width $d$, then the weighted sum); a
# recurrent layer $n d^2$ (one $d \times d$ matrix product per step). So self-attention is the cheaper of the two
# while $n < d$, which is the usual case for sentences ($n$ of tens, $d$ of hundreds), and the dearer for long
# documents. With $d = 512$, the width of the 2017 base model:

# %%
d = 512
lengths_table = [16, 64, 256, 512, 1024, 4096]
costs = []
for n in lengths_table:
    costs.append({"n": n, "self_attention": 2 * n * n * d, "recurrent": n * d * d, "convolution_k3": 3 * n * d * d})
print(
    table(
        [
            (
                c["n"],
                f"{c['self_attention']:.2e}",
                f"{c['recurrent']:.2e}",
                f"{c['convolution_k3']:.2e}",
                f"{c['self_attention'] / c['recurrent']:.2f}",
            )
            for c in costs
        ],
        ("n", "self-attention 2n²d", "recurrent n d²", "convolution 3n d²", "attention / recurrent"),
    )
)
report["cost_ratio_attention_over_recurrent"] = {str(c["n"]): c["self_attention"] / c["recurrent"] for c in costs}

# %% [markdown]
# (Counting the score product and the weighted sum gives $2n^2d$; the table's $O(\cdot)$ drops the 2, so the
# crossover is at $n = d/2$ here and at $n = d$ in the paper's accounting. The projections to queries, keys and
# values, $3nd^2$, are paid by every kind of layer and left out.)
#
# ## Path length, measured with gradients
#
# Which inputs can change output position $n-1$? Exactly those with a non-zero gradient $\partial y_{n-1} /
# \partial x_i$. Stack layers until position 0 reaches position $n-1$:
#
# * convolutions of kernel 3 (each layer lets information move one position further);
# * dilated convolutions of kernel 3 with dilations 1, 2, 4, … (WaveNet-style: the reach doubles per layer);
# * one self-attention layer (hf-attention's `MultiHeadAttention`).

# %%
n = 33


def reaches(layers: list[torch.nn.Module]) -> bool:
    """True when output position n-1 depends on input position 0 after these layers."""
    x = torch.randn(1, n, 8, requires_grad=True)
    h = x
    for layer in layers:
        h = layer(h)
    h[0, -1].sum().backward()
    return bool(x.grad[0, 0].abs().sum() > 0)


class Convolution(torch.nn.Module):
    def __init__(self, dilation: int):
        super().__init__()
        self.conv = torch.nn.Conv1d(8, 8, kernel_size=3, padding=dilation, dilation=dilation)

    def forward(self, h):  # (1, n, 8) → (1, n, 8)
        return torch.tanh(self.conv(h.transpose(1, 2))).transpose(1, 2)


def layers_needed(make) -> int:
    stack = []
    while not reaches(stack):
        stack.append(make(len(stack)))
    return len(stack)


class SelfAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = MultiHeadAttention(hidden_size=8, num_heads=2, num_kv_heads=2, head_dim=4)

    def forward(self, h):
        return self.attention(h, attention_function=eager_attention_forward)[0]


path = {
    "convolution_k3": layers_needed(lambda i: Convolution(1)),
    "dilated_convolution_k3": layers_needed(lambda i: Convolution(2**i)),
    "self_attention": layers_needed(lambda i: SelfAttention()),
    "recurrent_steps": n - 1,
}
print(
    table(
        [
            ("convolution, k = 3", path["convolution_k3"], f"n-1 = {n - 1} (one position further per layer)"),
            (
                "dilated convolution, k = 3",
                path["dilated_convolution_k3"],
                f"smallest L with 2^L - 1 >= n-1: {math.ceil(math.log2(n))}",
            ),
            ("self-attention", path["self_attention"], "1"),
            ("RNN", f"1 layer, {path['recurrent_steps']} steps", "n-1 sequential steps"),
        ],
        ("layer", f"layers for position 0 to reach position {n - 1}", "expected"),
    )
)
report["path_length"] = path

# %% [markdown]
# One self-attention layer connects the first token with the last; a stack of ordinary 3-wide convolutions needs 32
# layers for 33 tokens, dilated ones 6 (the logarithmic path of the table). An RNN connects them in one layer, but
# through 32 applications of the same cell, one after the other: that path is long (the gradient is a product of
# 32 Jacobians) and it cannot be parallelised over positions in training. A Transformer processes all positions of
# a layer at once.
#
# ## The price: time and memory that grow with $n^2$
#
# The score matrix has $n \times n$ entries per head. hf-attention has two backends for the same maths:
#
# * **eager** (`eager_attention_forward`) writes the computation out: it materialises the scores and the weights,
#   $n^2$ numbers per head each, which is also how it can return the weights for heatmaps;
# * **sdpa** (`sdpa_attention_forward`) calls PyTorch's fused `scaled_dot_product_attention`, which on a CPU
#   processes the keys block by block (the "flash attention" idea) and never stores the $n \times n$ matrix.
#
# Both are measured here on one attention call (batch 1, 4 heads of width 64, forward only): the wall time (median
# of several runs) and the peak memory the call adds (the process's peak resident memory, reset before the call
# through `/proc/self/clear_refs`, with glibc told to return large blocks to the system at once). They compute the
# same result, which is checked too.


# %%
def peak_memory_tools():
    """(reset, read): reset the process's peak RSS and read the peak minus the RSS at reset, in bytes (Linux)."""
    try:
        ctypes.CDLL("libc.so.6").mallopt(-3, 65536)  # M_MMAP_THRESHOLD: big blocks come and go with mmap
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None

    def status(field: str) -> int:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field))

    baseline = {}

    def reset():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        baseline["rss"] = status("VmRSS:")

    def read() -> int:
        return status("VmHWM:") - baseline["rss"]

    return reset, read


memory = peak_memory_tools()
caller = SimpleNamespace(score=None, is_causal=False, training=False)
heads, width = 4, 64
lengths = [128, 256, 512, 1024] if args.quick else [128, 256, 512, 1024, 2048, 4096]
repeats = 3 if args.quick else 5
measured = []
for length in lengths:
    q, k, v = (torch.randn(1, heads, length, width) for _ in range(3))
    row = {"n": length}
    outputs = {}
    for name, backend in (("eager", eager_attention_forward), ("sdpa", sdpa_attention_forward)):
        with torch.no_grad():
            outputs[name] = backend(caller, q, k, v, None, scaling=width**-0.5)[0]  # warm-up
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                backend(caller, q, k, v, None, scaling=width**-0.5)
                times.append(time.perf_counter() - started)
            row[f"{name}_ms"] = 1000 * statistics.median(times)
            if memory is not None:
                reset, read = memory
                reset()
                result = backend(caller, q, k, v, None, scaling=width**-0.5)
                row[f"{name}_MiB"] = read() / 2**20
                del result
    row["max_abs_difference"] = (outputs["eager"] - outputs["sdpa"]).abs().max().item()
    row["weights_MiB"] = heads * length * length * 4 / 2**20  # one float32 (heads, n, n) tensor
    measured.append(row)
print(
    table(
        [
            (
                r["n"],
                f"{r['eager_ms']:.1f}",
                f"{r['sdpa_ms']:.1f}",
                f"{r.get('eager_MiB', float('nan')):.1f}",
                f"{r.get('sdpa_MiB', float('nan')):.1f}",
                f"{r['weights_MiB']:.1f}",
                f"{r['max_abs_difference']:.1e}",
            )
            for r in measured
        ],
        ("n", "eager ms", "sdpa ms", "eager MiB", "sdpa MiB", "n×n weights MiB", "max |eager - sdpa|"),
    )
)
report["measured"] = measured
report["memory_measured"] = memory is not None

# %% [markdown]
# Read the memory columns first. Eager's extra memory is about twice the size of one $n \times n$ weight tensor
# (the scores and the weights exist at the same time) and grows about 4× per doubling of $n$: quadratic. SDPA's grows
# about 2× per doubling, like its output ($n \times d$ per head): linear. Both do the same $n^2 d$ multiply-adds, so
# both times grow faster than $n$; eager also writes and reads the $n^2$ matrices and is the slower one at long
# lengths. Timings on a shared 2-core machine are noisy (the plot shows this run's); the memory figures are not.

# %%
figure, axes = plt.subplots(1, 2, figsize=(11, 4))
n_values = [r["n"] for r in measured]
for name in ("eager", "sdpa"):
    axes[0].loglog(n_values, [r[f"{name}_ms"] for r in measured], "o-", label=name)
    if memory is not None:
        axes[1].loglog(n_values, [r[f"{name}_MiB"] for r in measured], "o-", label=name)
reference = [measured[0]["eager_ms"] * (x / n_values[0]) ** 2 for x in n_values]
axes[0].loglog(n_values, reference, "k:", label="∝ n²")
axes[0].set_xlabel("sequence length n")
axes[0].set_ylabel("ms per call")
axes[0].set_title("Time of one attention call (4 heads × 64)")
axes[0].legend()
axes[1].loglog(n_values, [r["weights_MiB"] for r in measured], "k:", label="one n×n weight tensor")
axes[1].set_xlabel("sequence length n")
axes[1].set_ylabel("MiB added at the peak")
axes[1].set_title("Memory of one attention call")
axes[1].legend()
save_figure(
    figure,
    args.figures,
    "08_attention_cost",
    n=n_values,
    eager_ms=[r["eager_ms"] for r in measured],
    sdpa_ms=[r["sdpa_ms"] for r in measured],
    eager_MiB=[r.get("eager_MiB", float("nan")) for r in measured],
    sdpa_MiB=[r.get("sdpa_MiB", float("nan")) for r in measured],
)

# %% [markdown]
# ## The same effect in a whole model
#
# The project's benchmark (`python -m benchmarks.run`, section "length") trains a Llama-shaped hf-attention decoder
# (hidden 256, 4 layers, 4 heads) on 4096 tokens per step, cut into sequences of 128 … 4096 tokens, forward and
# backward, and records the time per token and the peak memory of a step. With the tokens per step fixed, a
# linear-cost model would be flat; the attention's $n^2$ shows as growth. Those are the committed results, not a
# measurement of this run:

# %%
results_file = ROOT / "benchmarks" / "results" / "full.json"
benchmark = json.loads(results_file.read_text())
machine = benchmark["machine"]
where = f"{machine['cpu_model']}, {machine['cpus']} CPUs, torch {machine['torch']}, {machine['date'][:10]}"
rows = benchmark["length"]
variants = sorted({r["variant"] for r in rows}, key=["sdpa", "eager", "sdpa+checkpointing"].index)
print(f"benchmarks/results/full.json: {where}")
print(
    table(
        [(r["variant"], r["seq"], f"{r['us_per_token']:.0f}", f"{r['peak_bytes'] / 2**20:.0f}") for r in rows],
        ("variant", "sequence length", "µs per token", "peak MiB"),
    )
)
figure, axes = plt.subplots(1, 2, figsize=(11, 4))
series = {}
for variant in variants:
    points = sorted((r["seq"], r["us_per_token"], r["peak_bytes"] / 2**20) for r in rows if r["variant"] == variant)
    series[variant] = points
    axes[0].semilogx([p[0] for p in points], [p[1] for p in points], "o-", label=variant, base=2)
    axes[1].semilogx([p[0] for p in points], [p[2] for p in points], "o-", label=variant, base=2)
axes[0].set_ylabel("µs per token (forward + backward)")
axes[1].set_ylabel("peak MiB of a training step")
for axis in axes:
    axis.set_xlabel("sequence length (4096 tokens per step)")
    axis.legend()
figure.suptitle(f"Benchmark of the whole model, from benchmarks/results/full.json ({where})", fontsize=9)
save_figure(
    figure,
    args.figures,
    "08_benchmark_length",
    **{
        f"{variant}_{field}": [p[i] for p in points]
        for variant, points in series.items()
        for i, field in enumerate(("seq", "us_per_token", "peak_MiB"))
    },
)
by_length = {(r["variant"], r["seq"]): r for r in rows}
longest = max(r["seq"] for r in rows)
report["benchmark_machine"] = where
report["benchmark_longest"] = longest
report["benchmark_eager_over_sdpa_memory_at_longest"] = (
    by_length[("eager", longest)]["peak_bytes"] / by_length[("sdpa", longest)]["peak_bytes"]
)
report["benchmark_eager_over_sdpa_time_at_longest"] = (
    by_length[("eager", longest)]["us_per_token"] / by_length[("sdpa", longest)]["us_per_token"]
)
report["benchmark_sdpa_time_growth"] = (
    by_length[("sdpa", longest)]["us_per_token"] / by_length[("sdpa", min(r["seq"] for r in rows))]["us_per_token"]
)
report["benchmark_eager_time_growth"] = (
    by_length[("eager", longest)]["us_per_token"] / by_length[("eager", min(r["seq"] for r in rows))]["us_per_token"]
)
checkpointed, plain = by_length[("sdpa+checkpointing", longest)], by_length[("sdpa", longest)]
report["benchmark_checkpointing"] = {
    "memory_ratio": checkpointed["peak_bytes"] / plain["peak_bytes"],
    "time_ratio": checkpointed["us_per_token"] / plain["us_per_token"],
}
report["benchmark_sdpa_memory_growth"] = (
    plain["peak_bytes"] / by_length[("sdpa", min(r["seq"] for r in rows))]["peak_bytes"]
)
print(
    f"at {longest} tokens per sequence, eager / sdpa: memory "
    f"{report['benchmark_eager_over_sdpa_memory_at_longest']:.1f}×, time per token "
    f"{report['benchmark_eager_over_sdpa_time_at_longest']:.1f}×"
)

# %% [markdown]
# At 4096 tokens per sequence the eager model needs several times the memory of the SDPA one and takes several
# times as long per token. From 128 to 4096 tokens per sequence the eager model's time per token grows several-fold,
# the SDPA model's by less than a factor of 2, and SDPA's peak memory stays flat: with the tokens per step fixed,
# its attention memory is linear in the tokens. Gradient checkpointing (recomputing activations in the backward
# pass) cuts the memory to about a third for some extra time.
#
# **The trade.** Attention buys a path of length 1 between any two tokens and full parallelism over positions, and
# pays $n^2$ in compute; fused kernels remove the $n^2$ *memory*, not the compute. For sentences this is a bargain;
# for very long inputs it is why restricted, sparse and linear-time variants exist.
#
# **Next:** [09 · the encoder-decoder step by step](09_encoder_decoder_step_by_step.py).

# %%
report.save()
