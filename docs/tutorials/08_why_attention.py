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
# * **cost per layer**: the multiply-adds of one layer over the whole sequence;
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
import time
from types import SimpleNamespace

import matplotlib.ticker
import torch
from torch.profiler import ProfilerActivity, profile
from tutorial_support import ROOT, Report, parse_args, plt, save_figure, table

from hf_attention.modeling.attention import MultiHeadAttention, eager_attention_forward, sdpa_attention_forward

args = parse_args("Cost per layer, path length, and measured time and memory of eager vs SDPA attention.")
report = Report(args, "08")
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
# The $O(\cdot)$ hides constants, and the constants decide where the curves cross. Counted exactly, in
# **multiply-adds** (one multiply-add = 2 FLOPs), for one forward pass of one layer over $n$ tokens of width $d$,
# biases and nonlinearities left out:
#
# * **self-attention**: the projections to queries, keys and values ($3nd^2$) and the output projection $W_O$
#   ($nd^2$), plus the pairwise part: the scores $QK^\top$ ($n^2 d$) and the weighted sum of the values ($n^2 d$).
#   Total $4nd^2 + 2n^2d$.
# * **vanilla (Elman) RNN**, $h_t = \tanh(W_x x_t + W_h h_{t-1})$: two $d \times d$ products per step, $2nd^2$. It has
#   no query, key or value projections.
# * **LSTM**: four gates, each with its own $W_x$ and $W_h$: $8nd^2$.
# * **convolution** of kernel $k$ from $d$ to $d$ channels: $knd^2$.
#
# So the crossover is not one number. Against an LSTM, $4nd^2 + 2n^2d = 8nd^2$ at $n = 2d$; against a vanilla RNN
# the attention layer is dearer at *every* length, since its projections alone ($4nd^2$) already cost twice the whole
# RNN; against a $k = 3$ convolution, likewise ($4nd^2 > 3nd^2$). The paper's "cheaper while $n < d$" compares only
# the pairwise part with a recurrent layer's $nd^2$ with both constants dropped. What stays true is the shape: the
# pairwise part grows as $n^2$, everything else as $n$, so for long enough inputs attention is the dearest.
# With $d = 512$, the width of the 2017 base model:

# %%
d = 512
# Multiply-adds per layer, per token and per d² (constant) and per n·d (the pairwise part): cost = n·d·(a·d + b·n).
COSTS = {
    "self_attention": (4, 2),  # q, k, v, o projections 4nd²; scores n²d + weighted sum n²d
    "rnn": (2, 0),  # W_x x_t + W_h h_{t-1}: 2d² per step
    "lstm": (8, 0),  # 4 gates × (W_x, W_h): 8d² per step
    "convolution_k3": (3, 0),  # k·d² per position
}


def multiply_adds(layer: str, n: int, d: int) -> int:
    a, b = COSTS[layer]
    return n * d * (a * d + b * n)


def crossover(layer: str, d: int) -> float | None:
    """The length n at which self-attention costs as much as `layer` (None: attention is dearer at every n).

    4nd² + 2n²d = a·nd²  ⇔  n = (a - 4) d / 2."""
    a_attention, b_attention = COSTS["self_attention"]
    a, _ = COSTS[layer]
    n = (a - a_attention) * d / b_attention
    return n if n > 0 else None


lengths_table = [16, 64, 256, 512, 1024, 2048, 4096]
costs = [{"n": n, **{layer: multiply_adds(layer, n, d) for layer in COSTS}} for n in lengths_table]
print(
    table(
        [
            (
                c["n"],
                f"{c['self_attention']:.2e}",
                f"{c['rnn']:.2e}",
                f"{c['lstm']:.2e}",
                f"{c['convolution_k3']:.2e}",
                f"{c['self_attention'] / c['lstm']:.2f}",
                f"{2 * c['n'] * c['n'] * d / c['rnn']:.2f}",
            )
            for c in costs
        ],
        (
            "n",
            "attention 4nd²+2n²d",
            "RNN 2nd²",
            "LSTM 8nd²",
            "conv 3nd²",
            "attention / LSTM",
            "pairwise 2n²d / RNN",
        ),
    )
)
crossovers = {layer: crossover(layer, d) for layer in ("rnn", "lstm", "convolution_k3")}
crossovers["pairwise_part_vs_rnn"] = d  # 2n²d = 2nd² at n = d: the paper's comparison, with both constants kept
for layer, value in crossovers.items():
    print(f"self-attention costs as much as {layer} at n = {value if value is not None else 'never (always dearer)'}")
report["multiply_add_constants"] = COSTS
report["cost_ratio_attention_over_lstm"] = {str(c["n"]): c["self_attention"] / c["lstm"] for c in costs}
report["crossover_n"] = crossovers
report["d_for_costs"] = d

# %% [markdown]
# At $d = 512$ the attention layer costs as much as an LSTM at $n = 1024$ and half as much at $n = 16$; it costs
# more than a vanilla RNN or a 3-wide convolution of the same width at every length of the table, and its pairwise
# part alone matches a vanilla RNN at $n = d = 512$. The count leaves out what happens on real hardware, and that
# favours attention: its work is a few large matrix products that run in parallel over the positions, while an
# RNN's $n$ small products must run one after the other (next section). And a Transformer layer also has a
# feed-forward block ($8nd^2$ for the usual inner width $4d$, an LSTM's count), which costs more than its attention
# at every length below $n = 1024$.
#
# ## Path length, measured with gradients
#
# Which inputs can change output position $n-1$? Exactly those with a non-zero gradient $\partial y_{n-1} /
# \partial x_i$. Stack layers until position 0 reaches position $n-1$:
#
# * contiguous convolutions. A *centred* kernel of width $k$ (output $i$ reads inputs $i - \frac{k-1}2 \dots i +
#   \frac{k-1}2$, the usual choice in an encoder) moves information $(k-1)/2$ positions per layer, so crossing
#   $n - 1$ positions takes $\lceil (n-1) / \frac{k-1}{2} \rceil$ layers; a *causal* kernel (output $i$ reads
#   $i-k+1 \dots i$, as in a decoder) moves it $k - 1$ positions per layer, $\lceil (n-1)/(k-1) \rceil$ layers.
#   Both are the table's $O(n/k)$, with constants 2 and 1;
# * dilated centred convolutions of kernel 3 with dilations 1, 2, 4, … (WaveNet-style: after $L$ layers the reach is
#   $1 + 2 + \dots + 2^{L-1} = 2^L - 1$ positions, which doubles per layer: the $O(\log_k n)$ of the table);
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
    """A width-8 convolution of kernel k that keeps the length: centred (padding on both sides) or causal (k-1
    positions of padding on the left only, so output i never reads an input after i)."""

    def __init__(self, kernel: int, dilation: int = 1, causal: bool = False):
        super().__init__()
        reach = (kernel - 1) * dilation
        self.padding = (reach, 0) if causal else (reach // 2, reach // 2)
        self.conv = torch.nn.Conv1d(8, 8, kernel_size=kernel, dilation=dilation)

    def forward(self, h):  # (1, n, 8) → (1, n, 8)
        padded = torch.nn.functional.pad(h.transpose(1, 2), self.padding)
        return torch.tanh(self.conv(padded)).transpose(1, 2)


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
    "convolution_k3": layers_needed(lambda i: Convolution(3)),
    "convolution_k5": layers_needed(lambda i: Convolution(5)),
    "causal_convolution_k3": layers_needed(lambda i: Convolution(3, causal=True)),
    "dilated_convolution_k3": layers_needed(lambda i: Convolution(3, dilation=2**i)),
    "self_attention": layers_needed(lambda i: SelfAttention()),
}


def recurrent_path(length: int) -> tuple[int, float]:
    """A GRU layer over `length` tokens, measured as tutorial 01 does: its sequential steps (the profiler records
    one `tanh` per step, its candidate state) and |∂h_last/∂x_first| / |∂h_last/∂x_last| at initialisation, how
    much of a signal from the first token survives the steps between (averaged over 64 random sequences)."""
    torch.manual_seed(0)
    gru = torch.nn.GRU(8, 8, batch_first=True)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as profiler:
        gru(torch.randn(1, length, 8))
    steps = sum(1 for event in profiler.events() if event.name == "aten::tanh_")
    tokens = torch.randn(64, length, 8, requires_grad=True)
    gru(tokens)[1][-1].sum().backward()
    reach = tokens.grad.norm(dim=-1).mean(dim=0)
    return steps, float(reach[0] / reach[-1])


path["recurrent_steps"], recurrent_gradient_ratio = recurrent_path(n)
report["recurrent_gradient_first_over_last"] = recurrent_gradient_ratio
expected = {
    "convolution_k3": math.ceil((n - 1) / ((3 - 1) / 2)),
    "convolution_k5": math.ceil((n - 1) / ((5 - 1) / 2)),
    "causal_convolution_k3": math.ceil((n - 1) / (3 - 1)),
    "dilated_convolution_k3": next(L for L in range(1, n) if n - 1 <= 2**L - 1),
    "self_attention": 1,
}
print(
    table(
        [
            (
                "convolution, centred, k = 3",
                path["convolution_k3"],
                f"ceil({n - 1} / 1) = {expected['convolution_k3']}",
            ),
            (
                "convolution, centred, k = 5",
                path["convolution_k5"],
                f"ceil({n - 1} / 2) = {expected['convolution_k5']}",
            ),
            (
                "convolution, causal, k = 3",
                path["causal_convolution_k3"],
                f"ceil({n - 1} / 2) = {expected['causal_convolution_k3']}",
            ),
            (
                "dilated convolution, centred, k = 3",
                path["dilated_convolution_k3"],
                f"smallest L with 2^L - 1 >= {n - 1}: {expected['dilated_convolution_k3']}",
            ),
            ("self-attention", path["self_attention"], "1"),
            (
                "RNN (GRU), measured",
                f"1 layer, {path['recurrent_steps']} sequential steps",
                f"n = {n} steps; first token's gradient {recurrent_gradient_ratio:.1e} of the last's",
            ),
        ],
        ("layer", f"layers for position 0 to reach position {n - 1}", "expected"),
    )
)
report["path_length"] = path
report["path_length_expected"] = expected

# %% [markdown]
# One self-attention layer connects the first token with the last. Contiguous convolutions need a number of layers
# proportional to $n/k$: for 33 tokens, 32 centred 3-wide layers (each moves information one position to either
# side), 16 centred 5-wide or causal 3-wide ones (two positions per layer). Dilated ones need 6, the logarithmic
# path of the table. An RNN connects the first token with the last in one layer, but through a step per token, one
# after the other
# (measured as in tutorial 01: the profiler records 33 steps of the GRU cell for 33 tokens): that path is long, the
# gradient from the last state to the first token is a product of 32 Jacobians and arrives orders of magnitude
# weaker than to the last token (the table's last column; tutorial 01 shows what that does to training), and it
# cannot be parallelised over positions in training. A Transformer processes all positions of a layer at once.
#
# ## The price: time and memory that grow with $n^2$
#
# The score matrix has $n \times n$ entries per head. hf-attention has two backends for the same maths:
#
# * **eager** (`eager_attention_forward`) writes the computation out: it materialises the scores and the weights,
#   $n^2$ numbers per head each, which is also how it can return the weights for heatmaps;
# * **SDPA**, short for *scaled dot-product attention* (`sdpa_attention_forward`), calls PyTorch's fused
#   `torch.nn.functional.scaled_dot_product_attention`: one kernel for scores, softmax and weighted sum, which on a
#   CPU processes the keys block by block (the "flash attention" idea) and never stores the $n \times n$ matrix.
#
# Both are measured here on one attention call (batch 1, 4 heads of width 64, forward only): the wall time (the
# fastest of 5 runs, since other work on the machine only ever adds time) and the peak memory the call adds (how it
# is read: see the appendix). They compute the same result, which is checked too.


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
            row[f"{name}_ms"] = 1000 * min(times)  # other work on the machine only ever adds time
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
report["timing_setup"] = {"heads": heads, "width": width, "lengths": lengths, "repeats": repeats}


def growth_exponent(field: str) -> float:
    """The slope of log(field) against log(n) over the three longest lengths (least squares): 2 for n², 1 for n."""
    points = [(math.log(r["n"]), math.log(r[field])) for r in measured[-3:]]
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)


# Timings on a busy machine are noisy: what the text states from them is derived and rounded (an exponent to one
# decimal, a ratio to a whole number). The memory does not depend on the machine's load.
report["time_exponent"] = {name: growth_exponent(f"{name}_ms") for name in ("eager", "sdpa")}
report["eager_over_sdpa_time_at_longest"] = measured[-1]["eager_ms"] / measured[-1]["sdpa_ms"]
if memory is not None:
    report["memory_exponent"] = {name: growth_exponent(f"{name}_MiB") for name in ("eager", "sdpa")}
    report["memory_per_doubling_at_longest"] = {
        name: measured[-1][f"{name}_MiB"] / measured[-2][f"{name}_MiB"] for name in ("eager", "sdpa")
    }
    report["eager_memory_over_weights_at_longest"] = measured[-1]["eager_MiB"] / measured[-1]["weights_MiB"]
    report["eager_over_sdpa_memory_at_longest"] = measured[-1]["eager_MiB"] / measured[-1]["sdpa_MiB"]
print(
    "fitted over the three longest lengths: time ∝ n^"
    + ", n^".join(f"{value:.1f} ({name})" for name, value in report["time_exponent"].items())
    + f"; at n = {lengths[-1]} eager takes {report['eager_over_sdpa_time_at_longest']:.1f}× SDPA's time"
)

# %% [markdown]
# Read the memory columns first: they do not depend on what else the machine is doing. Eager's extra memory is 2 times
# the size of one $n \times n$ weight tensor (the scores and the weights exist at the same time) and grows 4× per
# doubling of $n$: fitted over the three longest lengths, as $n^{2.0}$, quadratic. SDPA's grows 2× per doubling, as
# $n^{1.0}$, like its output ($n \times d$ per head): linear.
#
# Timings depend on the machine's load, so only rounded, derived numbers are stated here (the plot shows this run's
# times). Fitted over $n = 1024 \dots 4096$, eager's time grows as $n^{2.0}$ and SDPA's as $n^{1.9}$, and at
# $n = 4096$ eager takes about 4 times as long. Both do the same $n^2 d$ multiply-adds; eager also writes and reads
# the $n^2$ matrices, which makes it the slower one.

# %%
figure, axes = plt.subplots(1, 2, figsize=(11, 4))
n_values = [r["n"] for r in measured]
for name in ("eager", "sdpa"):
    axes[0].loglog(n_values, [r[f"{name}_ms"] for r in measured], "o-", label=name)
    if memory is not None:
        axes[1].loglog(n_values, [r[f"{name}_MiB"] for r in measured], "o-", label=name)
# anchored at the longest length, whose time is the least disturbed by other work on a shared machine
reference = [measured[-1]["eager_ms"] * (x / n_values[-1]) ** 2 for x in n_values]
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
for axis in axes:  # one plain label per measured length (log-scale defaults print 2×10³-style labels that overlap)
    axis.set_xticks(n_values, [str(value) for value in n_values])
    axis.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
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
plan = benchmark["plan"]
report["benchmark_setup"] = {
    "hidden": plan["hidden"],
    "layers": plan["layers"],
    "heads": plan["heads"],
    "tokens_per_step": plan["length_tokens"],
    "shortest": min(r["seq"] for r in rows),
}
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
# At 4096 tokens per sequence the eager model needs 4.7 times the memory of the SDPA one and takes 7.9 times as
# long per token. From 128 to 4096 tokens per sequence the eager model's time per token grows tenfold, the SDPA
# model's by a factor of 1.5, and SDPA's peak memory stays flat: with the tokens per step fixed, its attention
# memory is linear in the tokens. Gradient checkpointing (recomputing activations in the backward pass) cuts the
# memory to about a third (0.32) for about 30% more time per token.
#
# **The trade.** Attention buys a path of length 1 between any two tokens and full parallelism over positions, and
# pays $n^2$ in compute; fused kernels remove the $n^2$ *memory*, not the compute. For sentences this is a bargain;
# for very long inputs it is why restricted, sparse and linear-time variants exist.
#
# **Next:** [09 · the encoder-decoder step by step](09_encoder_decoder_step_by_step.py).
#
# ## Exercises
#
# 1. Set `d = 1024` in the cost cell. At which length does the attention layer cost as much as an LSTM now, and
#    why does the crossover scale with $d$?
# 2. A GRU has three gates, each with its own $W_x$ and $W_h$. Add it to `COSTS` and find its crossover with
#    self-attention at $d = 512$.
# 3. Check the count of the attention layer against PyTorch's own counter: run one
#    `MultiHeadAttention(hidden_size=64, num_heads=4, num_kv_heads=4, head_dim=16, bias=False)` on 64 tokens with the
#    eager backend inside `torch.utils.flop_counter.FlopCounterMode` and compare `get_total_flops()` with
#    $2(4nd^2 + 2n^2d)$.
# 4. Predict, then measure with `layers_needed`, how many layers of a causal convolution of kernel 7 and of a centred
#    one of kernel 7 it takes to connect position 0 with position 32.
# 5. Self-attention restricted to a window of $r$ keys per query (the table's last row) pays $2nrd$ for its pairwise
#    part instead of $2n^2d$. Add it to `COSTS` for $r = 128$, $d = 512$: for which lengths is it cheaper than an
#    LSTM?

# %% [markdown]
# ## Answers
#
# The cell after these answers measures each of them.
#
# 1. At $n = 2d = 2048$ (`crossover("lstm", 1024)`). Per token, the LSTM pays $8d^2$ and the attention layer $4d^2$
#    for matrices, plus $2nd$ for its pairs; the two are equal when $2nd = 4d^2$, i.e. $n = 2d$. The wider the model,
#    the longer the inputs before the pairwise part dominates.
# 2. A GRU does $6d^2$ multiply-adds per step; `COSTS["gru"] = (6, 0)` and `crossover("gru", 512)` give
#    $n = (6 - 4)\cdot 512 / 2 = 512$.
# 3. The counter gives 3,145,728 FLOPs, the same as $2\,(4 \cdot 64 \cdot 64^2 + 2 \cdot 64^2 \cdot 64)$: 2,097,152 in
#    `aten.mm` (the four projections) and 1,048,576 in `aten.bmm` (the scores and the weighted sum of the eager
#    backend). The softmax is not a matrix product, and the counter leaves it out.
# 4. Causal, kernel 7: six positions per layer, $\lceil 32/6 \rceil = 6$ layers. Centred, kernel 7: three positions
#    to each side per layer, $\lceil 32/3 \rceil = 11$ layers. `layers_needed` finds 6 and 11.
# 5. At every length of the table: its cost $4nd^2 + 2nrd = nd^2(4 + 2r/d)$ is linear in $n$, so
#    `COSTS["window_128"] = (4 + 2 * 128 / 512, 0)` and the ratio to an LSTM is $(4 + 0.5)/8 = 0.5625$ whatever $n$; a
#    window is cheaper than an LSTM whenever $r < 2d$. The price is the path length: $n/r$ layers between the ends
#    instead of 1.

# %%
# The answers, measured: exercises 1, 2 and 5 with the cost cell's own functions, exercise 3 with PyTorch's FLOP
# counter on the library's attention layer, exercise 4 with `layers_needed`.
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

COSTS["gru"] = (6, 0)  # three gates × (W_x, W_h)
COSTS["window_128"] = (4 + 2 * 128 / 512, 0)  # 4nd² + 2nrd with r = 128, d = 512: cost = n·d·(a·d) with a = 4 + 2r/d
layer_64 = MultiHeadAttention(hidden_size=64, num_heads=4, num_kv_heads=4, head_dim=16, bias=False)
with torch.no_grad(), FlopCounterMode(display=False) as counter:
    layer_64(torch.randn(1, 64, 64), attention_function=eager_attention_forward)
answers = {
    "lstm_crossover_at_d_1024": crossover("lstm", 1024),
    "gru_crossover_at_d_512": crossover("gru", 512),
    "flop_counter_total": counter.get_total_flops(),
    "flop_counter_by_operation": {str(op): count for op, count in counter.get_flop_counts()["Global"].items()},
    "flops_formula": 2 * multiply_adds("self_attention", 64, 64),
    "layers_kernel_7": {
        "causal": layers_needed(lambda i: Convolution(7, causal=True)),
        "centred": layers_needed(lambda i: Convolution(7)),
    },
    "window_128_over_lstm": {
        str(length): multiply_adds("window_128", length, d) / multiply_adds("lstm", length, d)
        for length in lengths_table
    },
}
for key, value in answers.items():
    print(f"{key}: {value}")
report["answers"] = answers
report.save()

# %% [markdown]
# ## Self-test
#
# 1. Why is an attention layer dearer than a vanilla RNN at every length, when the paper's table suggests it is
#    cheaper while $n < d$?
# 2. How many layers of centred 3-wide convolutions connect the first and the last of 33 tokens, and how many
#    self-attention layers?
# 3. An RNN also connects the first token with the last in one layer. What makes its path long nonetheless?
# 4. Which of the two backends stores the $n \times n$ weights, and how does its extra memory grow when $n$ doubles?
# 5. What does a fused kernel such as SDPA remove of attention's quadratic bill, and what does it leave?

# %% [markdown]
# <details><summary>Answers</summary>
#
# 1. The attention layer's projections alone cost $4nd^2$, twice a vanilla RNN's $2nd^2$; the paper's comparison
#    drops the constants and counts only the pairwise part.
# 2. 32 centred 3-wide layers (one position per layer to either side), and a single self-attention layer.
# 3. The path runs through a step per token, one after the other: the gradient from the last state to the first
#    token is a product of 32 Jacobians, and the steps cannot run in parallel in training.
# 4. Eager: it materialises the scores and the weights, and its extra memory grows 4× per doubling of $n$.
# 5. The $n^2$ memory: it processes the keys block by block. The $n^2 d$ compute stays.
#
# </details>

# %% [markdown]
# ## Appendix: how the memory of one call is read
#
# The peak memory a call adds is the process's peak resident memory, reset before the call through
# `/proc/self/clear_refs`, minus its resident memory at the reset. glibc is told to return large blocks to the system
# at once: memory that an earlier call freed but the allocator kept would otherwise be reused without showing in the
# peak.
