# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 07 · A Transformer block by hand
#
# Tutorials 03 to 06 took attention apart one idea at a time. This one puts a whole encoder layer of the 2017
# Transformer (Vaswani et al. 2017 §3) back together from a handful of matrix products written in plain torch:
# single-head attention on a $T \times D$ matrix, multi-head attention, the position-wise feed-forward network,
# residual connections and LayerNorm. Each piece is checked against hf-attention's own modules with the same
# weights, down to the last bit where that is possible. Then it asks *why* each piece is there, and answers by
# measurement: how far multi-head attention is a convolution, why LayerNorm normalises a token and not a sentence,
# what tying $W_q = W_k$ does to the scores, what dropout does to the attention weights, what happens to a deep stack
# without residuals or norms, and which pieces a small encoder cannot do without when it learns to reverse a sequence
# of digits.
#
# Three terms first.
#
# * The **eager backend** is hf-attention's attention written out op by op (`eager_attention_forward`): scores
#   $QK^\top$, times the scale, mask, softmax, weighted sum of the values. It returns the attention weights, and it
#   runs exactly the operations a reader would write, in the same order.
# * **SDPA** is PyTorch's `torch.nn.functional.scaled_dot_product_attention` (the library's default backend,
#   `sdpa_attention_forward`), a *fused* kernel: one routine that does those steps in a single pass, block by
#   block with a running softmax, and never stores the $T \times T$ weights. Faster and lighter, but it adds its sums
#   in another order.
# * **Post-norm** and **pre-norm** are the two places for LayerNorm (LN, which rescales each token's vector to mean 0
#   and variance 1; details below) around a sublayer $F$ (attention or the feed-forward network). Post-norm, the
#   paper's "Add & Norm": $x \leftarrow \mathrm{LN}(x + F(x))$. Pre-norm (GPT-2, Llama):
#   $x \leftarrow x + F(\mathrm{LN}(x))$, with one more LN at the very end of the stack.
#
# Where the hand-written code and the library do not give the same bits, they differ by float rounding; why, and
# when to expect the same bits, is in the appendix at the end (*Float rounding and the same bits*).

# %%
import math

import matplotlib.patches as mpatches
import torch
from torch import nn
from tutorial_support import Report, parse_args, plt, save_figure, table

from hf_attention.modeling.attention import MultiHeadAttention, eager_attention_forward, sdpa_attention_forward
from hf_attention.modeling.layers import EncoderLayer, FeedForward
from hf_attention.modeling.norms import make_norm
from hf_attention.modeling.positional import SinusoidalPositionalEmbedding

args = parse_args("A Transformer encoder layer written by hand, checked against hf-attention, and its ablations.")
report = Report(args, "07")
# The models here are tiny: one thread runs them as fast as several, and leaves the machine's other cores alone.
torch.set_num_threads(1)
torch.manual_seed(0)


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest |a - b|: 0.0 means the two computations produced the very same bits."""
    return (a - b).abs().max().item()


# %% [markdown]
# ## The block, in a picture
#
# The figure below is the map of this tutorial. Left, the 2017 encoder layer (post-norm): self-attention, then
# "Add & Norm" (the residual sum, then LayerNorm), then the feed-forward network and another Add & Norm. Middle, the
# same layer in pre-norm: the norm moves in front of each sublayer, and the stack ends with one more LN. Right, a
# decoder layer: its self-attention is masked (no looking ahead), and a **cross-attention** block sits between it and
# the feed-forward network, with queries from the decoder and keys and values from the encoder's output. The grey
# frame is what is repeated $N$ times; the green lines are the residual connections.

# %%
BLOCKS = {  # each layer from bottom (input) to top (output), in the order the data goes through it
    "post-norm encoder layer (2017)": [
        "embeddings + positions",
        "self-attention",
        "Add & Norm",
        "feed-forward",
        "Add & Norm",
    ],
    "pre-norm encoder layer (GPT-2, Llama)": [
        "embeddings + positions",
        "LayerNorm",
        "self-attention",
        "Add",
        "LayerNorm",
        "feed-forward",
        "Add",
        "final LayerNorm",
    ],
    "post-norm decoder layer": [
        "embeddings + positions",
        "masked self-attention",
        "Add & Norm",
        "cross-attention",
        "Add & Norm",
        "feed-forward",
        "Add & Norm",
    ],
}
COLOURS = {"attention": "#f6b26b", "feed-forward": "#9fc5e8", "Add": "#ffe599", "LayerNorm": "#ffe599"}


def colour_of(label: str) -> str:
    kind = next((k for k in COLOURS if k in label), None)
    return COLOURS[kind] if kind else "#d9d9d9"


def draw_block(axis, title: str, labels: list[str], top: float) -> dict:
    """Draw one layer as a column of boxes joined by arrows, with its residual connections on the left; returns
    what was drawn (box heights, residual connections, the repeated span, where the encoder's output goes in)."""
    heights = [1.2 * i for i in range(len(labels))]
    width, tall = 2.4, 0.6
    for label, y in zip(labels, heights, strict=True):
        box = mpatches.FancyBboxPatch(
            (-width / 2, y - tall / 2), width, tall, boxstyle="round,pad=0.05", facecolor=colour_of(label)
        )
        axis.add_patch(box)
        axis.text(0, y, label, ha="center", va="center", fontsize=9)
    for below, above in zip(heights[:-1], heights[1:], strict=True):
        axis.annotate(
            "", xy=(0, above - tall / 2 - 0.05), xytext=(0, below + tall / 2), arrowprops={"arrowstyle": "->"}
        )
    # A residual connection runs from a block's input (the embeddings or the previous Add) around it to its Add.
    sums = [i for i, label in enumerate(labels) if label.startswith("Add")]
    starts = [0] + sums[:-1]
    for start, end in zip(starts, sums, strict=True):
        x, fork = -width / 2 - 0.35, heights[start] + 0.6
        axis.plot([0, x, x, -width / 2 - 0.1], [fork, fork, heights[end], heights[end]], color="tab:green", lw=1.5)
        axis.plot(-width / 2 - 0.1, heights[end], ">", color="tab:green")
    first, last = 1, sums[-1]  # the repeated part: from the first sublayer to the last Add
    frame = (-width / 2 - 0.6, heights[first] - 0.5), width + 0.9, heights[last] - heights[first] + 1.0
    axis.add_patch(mpatches.Rectangle(*frame, facecolor="none", edgecolor="grey", linestyle="--"))
    axis.text(width / 2 + 0.4, heights[last], "× N", fontsize=11, color="grey", va="center")
    encoder_into = labels.index("cross-attention") if "cross-attention" in labels else -1
    if encoder_into >= 0:  # the encoder's output comes in from the side: keys and values of cross-attention
        y = heights[encoder_into]
        axis.text(
            width / 2 + 1.9,
            y,
            "encoder\noutput",
            ha="center",
            va="center",
            fontsize=9,
            bbox={"boxstyle": "round", "facecolor": "#d9d9d9"},
        )
        arrow = {"arrowstyle": "->", "color": "tab:red"}
        axis.annotate("", xy=(width / 2 + 0.1, y), xytext=(width / 2 + 1.35, y), arrowprops=arrow)
        axis.text(width / 2 + 0.7, y + 0.1, "keys, values", ha="center", va="bottom", fontsize=7, color="tab:red")
    axis.set_xlim(-width / 2 - 0.8, width / 2 + 2.5)
    axis.set_ylim(-0.6, top + 0.6)
    axis.set_title(title, fontsize=10)
    axis.axis("off")
    return {
        "heights": heights,
        "residual_from": starts,
        "residual_to": sums,
        "repeated": [first, last],
        "encoder_into": encoder_into,
    }


figure, axes = plt.subplots(1, 3, figsize=(15, 6.5), layout="constrained")
drawn = {}
for i, (axis, (title, labels)) in enumerate(zip(axes, BLOCKS.items(), strict=True)):
    for key, value in draw_block(axis, title, labels, top=1.2 * (max(map(len, BLOCKS.values())) - 1)).items():
        drawn[f"{key}_{i}"] = value
    drawn[f"labels_{i}"], drawn[f"title_{i}"] = labels, title
save_figure(figure, args.figures, "07_block_diagram", **drawn)


# %% [markdown]
# ## Single-head attention on a $T \times D$ matrix
#
# The input is a matrix $X$ with one row per token: $T$ rows, $D$ columns. Three learned matrices of shape
# $D \times d$ turn it into queries, keys and values, $Q = XW_q$, $K = XW_k$, $V = XW_v$, each $T \times d$. Then
#
# $$A = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt d}\right),\qquad \mathrm{output} = AV.$$
#
# $QK^\top$ is the $T \times T$ table of dot products between every query and every key, the softmax runs along each
# row (row $i$: how much token $i$ takes from every token), and row $i$ of $AV$ is the weighted average of the value
# rows. Division by $\sqrt d$ keeps the scores at unit variance (tutorial 04). That is the whole of it, in a few lines:


# %%
def scaled_dot_product(Q, K, V):
    """softmax(Q Kᵀ / √d) V for (…, T, d) matrices; returns the output and the weights A (…, T, T)."""
    A = torch.softmax(Q @ K.transpose(-1, -2) / math.sqrt(K.shape[-1]), dim=-1)
    return A @ V, A


def attention_by_hand(X, W_q, W_k, W_v):
    """Single-head self-attention on X (T, D): queries, keys and values are three projections of the same rows."""
    return scaled_dot_product(X @ W_q, X @ W_k, X @ W_v)


# %% [markdown]
# ### One query, in numbers
#
# Before matrices, one query by hand: width $d = 4$ (so $\sqrt d = 2$), three keys, and values of width 2 (a value
# need not be as wide as a key). Every number below is computed by the next cell.
#
# | | vector | $q \cdot k$ | $/\sqrt d$ | $e^{(\cdot)}$ | weight | value |
# |---|---|---|---|---|---|---|
# | $q$ | (1, 1, 0, 1) | | | | | |
# | $k_1$ | (2, 1, 0, 1) | 4 | 2 | 7.389 | 0.547 | (1, 0) |
# | $k_2$ | (0, 1, 1, 0) | 1 | 0.5 | 1.649 | 0.122 | (0, 1) |
# | $k_3$ | (1, 0, 2, 2) | 3 | 1.5 | 4.482 | 0.331 | (1, 1) |
#
# The softmax divides each exponential by their sum, 13.519. The output is the weighted sum of the values:
# $0.547 \cdot (1, 0) + 0.122 \cdot (0, 1) + 0.331 \cdot (1, 1) = (0.878, 0.453)$. The first key, the most aligned
# with $q$, takes more than half the weight; dividing by $\sqrt d$ softened the scores 4 : 1 : 3 into
# 2 : 0.5 : 1.5 before the exponential. The cell also hands the same $q$, $K$ and $V$ (one head of one sequence) to
# the library's two attention functions, `eager_attention_forward` and `sdpa_attention_forward`: their weights and
# output agree with the hand computation to float rounding (the library's softmax subtracts the largest score
# before the exponential, which changes the last bits).

# %%
query = torch.tensor([1.0, 1.0, 0.0, 1.0])
keys = torch.tensor([[2.0, 1.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 2.0, 2.0]])
values = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
dots = keys @ query  # q · k for each key
scaled = dots / math.sqrt(len(query))
exponentials = torch.exp(scaled)
weights = exponentials / exponentials.sum()  # the softmax, written out
weighted_sum = weights @ values
report["example"] = {
    "query": query,
    "keys": keys,
    "values": values,
    "dots": dots,
    "scaled": scaled,
    "exponentials": exponentials,
    "exponential_sum": exponentials.sum(),
    "weights": weights,
    "output": weighted_sum,
}
# The library's attention functions take (batch, heads, length, width): one sequence, one head, one query. They read
# their settings (scale, causal or not, training or not) from the module that calls them: a one-head module of width
# 4, built with its own random numbers so that the rest of the tutorial draws the same ones as before.
with torch.random.fork_rng():
    caller = MultiHeadAttention(hidden_size=4, num_heads=1, num_kv_heads=1, head_dim=4).eval()
as_one_head = (query[None, None, None], keys[None, None], values[None, None])
with torch.no_grad():
    for name, function in (("eager", eager_attention_forward), ("sdpa", sdpa_attention_forward)):
        library_output, library_weights = function(caller, *as_one_head, None, scaling=caller.scaling)
        report[f"example_{name}_output_max_abs"] = max_abs(library_output[0, 0, 0], weighted_sum)
        if library_weights is not None:
            report["example_eager_weights_max_abs"] = max_abs(library_weights[0, 0, 0], weights)
print(
    table(
        [
            (f"k{i + 1}", f"{dots[i]:g}", f"{scaled[i]:g}", f"{exponentials[i]:.3f}", f"{weights[i]:.3f}")
            for i in range(3)
        ],
        ("key", "q·k", "/√d", "exp", "weight"),
    )
)
print(f"sum of the exponentials {exponentials.sum():.3f}; output {[round(v, 3) for v in weighted_sum.tolist()]}")
print(
    f"library vs by hand: eager output {report['example_eager_output_max_abs']:.1e}, weights "
    f"{report['example_eager_weights_max_abs']:.1e}; SDPA output {report['example_sdpa_output_max_abs']:.1e}"
)

# %% [markdown]
# The library's `MultiHeadAttention` with one head does the same, plus an output projection $W_o$ that every
# multi-head layer has (here it is $d \times D$ with $d = D$). `nn.Linear` stores its weight as (out, in) and
# computes $x W^\top$, so the library's `q_proj.weight` *transposed* is our $W_q$.

# %%
T, D = 6, 16
report["single_head_size"] = {"T": T, "D": D}
X = torch.randn(T, D)
single = MultiHeadAttention(hidden_size=D, num_heads=1, num_kv_heads=1, head_dim=D, bias=False)
W_q, W_k, W_v, W_o = (proj.weight.detach().T for proj in (single.q_proj, single.k_proj, single.v_proj, single.o_proj))
with torch.no_grad():
    by_hand, A_by_hand = attention_by_hand(X, W_q, W_k, W_v)
    by_hand = by_hand @ W_o
    eager, eager_weights = single(X[None], attention_function=eager_attention_forward)  # batch of one
    sdpa, _ = single(X[None], attention_function=sdpa_attention_forward)
report["single_head_eager_max_abs"] = max_abs(by_hand, eager[0])
report["single_head_weights_max_abs"] = max_abs(A_by_hand, eager_weights[0, 0])
report["single_head_sdpa_max_abs"] = max_abs(by_hand, sdpa[0])
print(
    f"by hand vs library, eager backend: output {report['single_head_eager_max_abs']}, "
    f"weights {report['single_head_weights_max_abs']}"
)
print(f"by hand vs library, SDPA backend:  output {report['single_head_sdpa_max_abs']:.1e}")

# %% [markdown]
# The hand version gives the library's numbers: the eager backend's to the last bit on this run's CPU, SDPA's to
# float rounding (why: the appendix).
#
# ## Multi-head attention: split, attend, concatenate, $W_o$
#
# With $H$ heads, the $D$ columns of $Q$, $K$ and $V$ are cut into $H$ groups of $d = D/H$ columns; each group is a
# small attention of its own, with its own scores and weights; the $H$ outputs are put side by side again
# ($T \times D$) and mixed by $W_o$. Projecting once to $D$ columns and splitting costs the same as $H$ separate
# $D \times d$ projections, and the heads run as one batched product. Here $D = 16$, $H = 4$, $d = 4$, with biases
# as in the 2017 model.


# %%
def multi_head_by_hand(X, attention: MultiHeadAttention):
    """Multi-head self-attention on X (T, D) with the weights of a library module, written out."""
    heads, d = attention.num_heads, attention.head_dim
    Q, K, V = (X @ p.weight.T + p.bias for p in (attention.q_proj, attention.k_proj, attention.v_proj))
    Q, K, V = (M.view(len(X), heads, d).transpose(0, 1) for M in (Q, K, V))  # (H, T, d): one matrix per head
    output, _ = scaled_dot_product(Q, K, V)  # (H, T, d): every head attends on its own
    concatenated = output.transpose(0, 1).reshape(len(X), heads * d)  # (T, H·d): the heads side by side
    return concatenated @ attention.o_proj.weight.T + attention.o_proj.bias


H = 4
report["heads"] = H
mha = MultiHeadAttention(hidden_size=D, num_heads=H, num_kv_heads=H, head_dim=D // H)
with torch.no_grad():
    by_hand = multi_head_by_hand(X, mha)
    eager, _ = mha(X[None], attention_function=eager_attention_forward)
    sdpa, _ = mha(X[None], attention_function=sdpa_attention_forward)
    # The same split as column slices, one head after the other: the same numbers, read with a stride in memory.
    d = D // H
    Q, K, V = (X @ p.weight.T + p.bias for p in (mha.q_proj, mha.k_proj, mha.v_proj))
    columns = [slice(h * d, (h + 1) * d) for h in range(H)]
    heads_one_by_one = [scaled_dot_product(Q[:, c], K[:, c], V[:, c])[0] for c in columns]
    sliced = torch.cat(heads_one_by_one, dim=-1) @ mha.o_proj.weight.T + mha.o_proj.bias
report["multi_head_eager_max_abs"] = max_abs(by_hand, eager[0])
report["multi_head_sdpa_max_abs"] = max_abs(by_hand, sdpa[0])
report["multi_head_strided_slices_max_abs"] = max_abs(sliced, eager[0])
print(
    f"{H} heads by hand vs library: eager {report['multi_head_eager_max_abs']}, "
    f"SDPA {report['multi_head_sdpa_max_abs']:.1e}; heads cut as strided column slices: "
    f"{report['multi_head_strided_slices_max_abs']:.1e}"
)

# %% [markdown]
# Batched over heads (a view and a transpose, then one product for all heads), the hand version again gives the
# numbers of the eager backend, which does the same (to the last bit on this run's CPU; one head at a time it
# need not: the appendix).
#
# ## Is multi-head attention a convolution with channels?
#
# An analogy one meets often: multi-head attention is "a convolutional network, only stronger": the $D$ features of a
# token are the channels of a convolution over the sequence, the heads are its kernels, and $W_o$ is a $1 \times 1$
# convolution that mixes the channels. Part of it is exact, part of it is not. Measured, with $D = 16$ channels and
# $T = 10$ positions (the cell keeps its random numbers to itself, so nothing after it changes):
#
# 1. Every projection of the layer (`q_proj`, `k_proj`, `v_proj`, `o_proj`, and the FFN's two) is a **$1 \times 1$
#    convolution**: the same linear map at every position. `nn.Conv1d(D, D, kernel_size=1)` with `o_proj`'s weights.
# 2. A convolution with a kernel of $k$ taps **is** a multi-head attention with $k$ heads whose masks let head $h$
#    see one key only, the one at offset $h - (k - 1)/2$: with a single allowed key its weight is 1, and a query
#    whose key lies beyond the edge gets a row of zeros from the library (tutorial 04), which is exactly the
#    convolution's zero padding. `v_proj` copies the token into every head, `o_proj` holds the three taps side by side.
#    (Cordonnier, Loukas & Jaggi 2020 show the general case: with $k^2$ heads and relative positions, self-attention
#    can express any $k \times k$ convolution of an image.)
# 3. Where the analogy breaks: a convolution mixes the positions with the same weights for every input, and only
#    nearby; attention computes its mixing from the input, over the whole sequence. Different inputs give different
#    weight matrices; a convolution's mixing over positions is fixed by its weights alone (shifting its input shifts
#    its output, away from the edges), and it is not blind to order, where attention without positions is (tutorial
#    05): permute the input, and an attention layer's output is permuted the same way, a convolution's is not.

# %%
with torch.random.fork_rng():  # this cell's random numbers leave the rest of the tutorial unchanged
    torch.manual_seed(3)
    T_conv = 10
    report["conv_positions"] = T_conv
    X_conv = torch.randn(T_conv, D)
    # 1. A projection is a 1 × 1 convolution over the positions (Conv1d wants (batch, channels, length)).
    projection = mha.o_proj
    one_by_one = nn.Conv1d(D, D, kernel_size=1)
    with torch.no_grad():
        one_by_one.weight.copy_(projection.weight[:, :, None])
        one_by_one.bias.copy_(projection.bias)
        report["conv_1x1_vs_projection_max_abs"] = max_abs(one_by_one(X_conv.T[None])[0].T, projection(X_conv))
    # 2. A 3-tap convolution as a 3-head attention whose head h sees only the key at offset h - 1.
    convolution = nn.Conv1d(D, D, kernel_size=3, padding=1)
    offsets = (-1, 0, 1)
    as_attention = MultiHeadAttention(hidden_size=D, num_heads=3, num_kv_heads=3, head_dim=D)
    query_position, key_position = torch.arange(T_conv)[:, None], torch.arange(T_conv)[None, :]
    one_key_per_head = torch.stack([key_position == query_position + o for o in offsets])[None]  # (1, 3, T, T)
    with torch.no_grad():
        as_attention.v_proj.weight.copy_(torch.eye(D).repeat(3, 1))  # every head's value is the token itself
        as_attention.v_proj.bias.zero_()
        taps = [convolution.weight[:, :, tap] for tap in range(3)]  # tap t multiplies the token at offset t - 1
        as_attention.o_proj.weight.copy_(torch.cat(taps, dim=1))
        as_attention.o_proj.bias.copy_(convolution.bias)
        convolved = convolution(X_conv.T[None])[0].T
        attended, conv_weights = as_attention(
            X_conv[None], attention_mask=one_key_per_head, attention_function=eager_attention_forward
        )
    report["conv_3_vs_three_head_attention_max_abs"] = max_abs(attended[0], convolved)
    report["conv_edge_rows_are_zero"] = bool(conv_weights[0, 0, 0].eq(0).all() and conv_weights[0, 2, -1].eq(0).all())
    # 3. Attention's mixing depends on the input; a convolution's does not. Order: permute the input.
    free_attention = MultiHeadAttention(hidden_size=D, num_heads=4, num_kv_heads=4, head_dim=D // 4)
    other = torch.randn(T_conv, D)
    permutation = torch.randperm(T_conv)
    with torch.no_grad():
        weights_one = free_attention(X_conv[None], attention_function=eager_attention_forward)[1]
        weights_two = free_attention(other[None], attention_function=eager_attention_forward)[1]
        attention_out = free_attention(X_conv[None], attention_function=eager_attention_forward)[0][0]
        attention_permuted = free_attention(X_conv[permutation][None], attention_function=eager_attention_forward)[0][
            0
        ]
        conv_permuted = convolution(X_conv[permutation].T[None])[0].T
    report["attention_weights_two_inputs_max_abs"] = max_abs(weights_one, weights_two)
    report["attention_permuted_max_abs"] = max_abs(attention_permuted, attention_out[permutation])
    report["convolution_permuted_max_abs"] = max_abs(conv_permuted, convolved[permutation])
print(f"1 × 1 convolution vs o_proj: {report['conv_1x1_vs_projection_max_abs']:.1e}")
print(
    "3-tap convolution vs 3-head attention with one key per head: "
    f"{report['conv_3_vs_three_head_attention_max_abs']:.1e} (edge rows of zeros: {report['conv_edge_rows_are_zero']})"
)
print(
    f"attention weights of two different inputs differ by up to {report['attention_weights_two_inputs_max_abs']:.2f}"
)
print(
    f"permuted input: attention output permuted the same way within {report['attention_permuted_max_abs']:.1e}; "
    f"convolution output off by up to {report['convolution_permuted_max_abs']:.2f}"
)

# %% [markdown]
# So the analogy holds for the parts that act on each position alone, and for a convolution seen as a special case of
# attention with fixed, one-key-per-head masks; it does not hold the other way. What attention adds is exactly what a
# convolution lacks: where to look is computed from the tokens, anywhere in the sequence. Two more differences the
# picture of "heads as kernels" hides. A convolution's tap has its own weight for every pair of input and output
# channels; a head mixes the positions with *one* weight per (query, key) pair, shared by all $d$ channels of its
# value (the mixing and the channel map are separate steps, $A$ then $V$ and $W_o$). And the head count is not the
# channel count: the heads split the $D$ channels into $H$ groups (like a *grouped* convolution's groups), where the
# "kernels" of the analogy would be the output channels.
#
# ## Why two matrices, $W_q \ne W_k$?
#
# The score of token $i$ for token $j$ is $x_i W_q W_k^\top x_j^\top$: a bilinear form with the $D \times D$ matrix
# $W_q W_k^\top$, which can be any matrix of rank $\le d$, in particular an unsymmetric one: "$i$ looks for $j$"
# need not mean "$j$ looks for $i$". Tie the two, $W_k = W_q = W$, and with $a_i = x_i W$ the score matrix becomes
# $S = (XW)(XW)^\top$, the table of dot products of the rows $a_i$ (a Gram matrix; a bias $b$, tied as well, only
# turns $a_i$ into $x_i W + b$). Then, in every head,
#
# * $S$ is **symmetric**, $s_{ij} = s_{ji}$, and positive semidefinite (no negative eigenvalues);
# * its diagonal $s_{ii} = \lVert a_i\rVert^2 \ge 0$, and by Cauchy–Schwarz $s_{ij} \le \lVert a_i\rVert
#   \lVert a_j\rVert$: a token scores another one above itself only if that one has the longer vector, so most
#   tokens attend most to **themselves**;
# * two tokens can never *both* prefer each other to themselves: $s_{ij} > s_{ii}$ needs
#   $\lVert a_j\rVert > \lVert a_i\rVert$, and $s_{ji} > s_{jj}$ the opposite.
#
# Measured with the library's layer, tied by sharing the parameter (`k_proj.weight = q_proj.weight`, the biases
# too, so that keys equal queries), against an untied layer, on random inputs ($T = 10$ tokens, $D = 32$, 4 heads):

# %%
T_tied, D_tied, heads_tied, n_sequences = 10, 32, 4, 200 if args.quick else 1000
untied = MultiHeadAttention(hidden_size=D_tied, num_heads=heads_tied, num_kv_heads=heads_tied, head_dim=8)
tied = MultiHeadAttention(hidden_size=D_tied, num_heads=heads_tied, num_kv_heads=heads_tied, head_dim=8)
tied.k_proj.weight, tied.k_proj.bias = tied.q_proj.weight, tied.q_proj.bias  # one parameter, used twice
sequences = torch.randn(n_sequences, T_tied, D_tied)
report["tied_size"] = {"T": T_tied, "D": D_tied, "heads": heads_tied}


def scores_and_weights(attention: MultiHeadAttention, X: torch.Tensor):
    """Scores Q Kᵀ/√d per head (B, H, T, T), written out, and the weights of the library's eager backend."""
    B, T_, _ = X.shape
    Q, K = (p(X).view(B, T_, attention.num_heads, -1).transpose(1, 2) for p in (attention.q_proj, attention.k_proj))
    _, weights = attention(X, attention_function=eager_attention_forward)
    return Q @ K.transpose(-1, -2) * attention.scaling, weights


def self_and_mutual(weights: torch.Tensor) -> tuple[float, float, float]:
    """Share of rows whose largest weight is on the token itself; mean weight on itself; share of pairs i ≠ j
    that are each other's favourite (each one's largest weight on the other)."""
    favourite = weights.argmax(-1)  # (B, H, T)
    positions = torch.arange(weights.shape[-1])
    on_self = (favourite == positions).float().mean().item()
    self_weight = weights.diagonal(dim1=-2, dim2=-1).mean().item()
    partner_of_favourite = favourite.gather(-1, favourite)  # the favourite of my favourite
    mutual = ((partner_of_favourite == positions) & (favourite != positions)).float().sum().item()
    pairs = weights.shape[0] * weights.shape[1] * weights.shape[-1] * (weights.shape[-1] - 1)
    return on_self, self_weight, mutual / pairs


with torch.no_grad():
    untied_scores, untied_weights = scores_and_weights(untied, sequences)
    tied_scores, tied_weights = scores_and_weights(tied, sequences)
rows = []
for name, scores, weights in (("untied", untied_scores, untied_weights), ("tied", tied_scores, tied_weights)):
    on_self, self_weight, mutual = self_and_mutual(weights)
    symmetry = max_abs(scores, scores.transpose(-1, -2))
    # u S uᵀ only sees the symmetric part of S: its eigenvalues say whether the form can go negative
    smallest_eigenvalue = torch.linalg.eigvalsh((scores + scores.transpose(-1, -2)).double() / 2).min().item()
    report[f"{name}_symmetry_max_abs"] = symmetry
    report[f"{name}_smallest_eigenvalue"] = smallest_eigenvalue
    report[f"{name}_argmax_on_self"] = on_self
    report[f"{name}_mean_self_weight"] = self_weight
    report[f"{name}_mutual_favourites"] = mutual
    rows.append(
        (
            name,
            f"{symmetry:.2g}",
            f"{smallest_eigenvalue:.3g}",
            f"{on_self:.3f}",
            f"{self_weight:.3f}",
            f"{mutual:.4f}",
        )
    )
report["uniform_weight"] = 1 / T_tied
print(table(rows, ("W_k", "max|S - Sᵀ|", "min eigenvalue", "favourite = self", "weight on self", "mutual pairs")))

# %% [markdown]
# Tied, the scores are symmetric (at most up to float rounding: a product kernel need not add the terms of entries
# $(i, j)$ and $(j, i)$ in the same order), no eigenvalue is negative beyond rounding (untied, the quadratic form
# $u^\top S u$ goes well below zero), most rows put their largest weight on the token itself, and there is not a
# single pair of mutual favourites, as the algebra says. Untied, the favourite is on the diagonal about as often as
# chance ($1/T = 0.1$) would have it.
#
# So a model that must send token $i$ to token $j$ and $j$ to $i$ (swap two words, or reverse a sequence) cannot
# do it in one tied head; it has to spread the job over several heads or layers. The pictures: one random
# sequence, first head, untied and tied.

# %%
figure, axes = plt.subplots(1, 4, figsize=(15, 3.4), layout="constrained")
example = [untied_scores[0, 0], tied_scores[0, 0], untied_weights[0, 0], tied_weights[0, 0]]
titles = ["scores, untied", "scores, tied (symmetric)", "weights, untied", "weights, tied (diagonal)"]
for axis, matrix, title in zip(axes, example, titles, strict=True):
    limit = matrix.abs().max().item()
    is_scores = title.startswith("scores")
    image = axis.imshow(
        matrix,
        cmap="RdBu_r" if is_scores else "viridis",
        vmin=-limit if is_scores else 0,
        vmax=limit,
        interpolation="nearest",
    )
    axis.set_title(title, fontsize=9)
    axis.set_xlabel("key")
    figure.colorbar(image, ax=axis, shrink=0.8)
axes[0].set_ylabel("query")
save_figure(
    figure,
    args.figures,
    "07_tied",
    untied_scores=untied_scores[0, 0],
    tied_scores=tied_scores[0, 0],
    untied_weights=untied_weights[0, 0],
    tied_weights=tied_weights[0, 0],
)

# %% [markdown]
# ## Why a feed-forward network after attention?
#
# Every row of $A$ is non-negative and sums to 1, so every output row of $AV$ is a **convex combination** (a weighted
# average) of the value rows: coordinate by coordinate it lies between the smallest and the largest value. Check on
# the single-head example above:

# %%
with torch.no_grad():
    output, A = attention_by_hand(X, W_q, W_k, W_v)
    V = X @ W_v
below = (output < V.min(0).values - 1e-6).sum().item()
above = (output > V.max(0).values + 1e-6).sum().item()
report["weights_row_sum_error"] = (A.sum(-1) - 1).abs().max().item()
report["weights_negative"] = int((A < 0).sum())
report["outside_value_range"] = int(below + above)
print(
    f"rows of A sum to 1 within {report['weights_row_sum_error']:.1e}; negative weights: {report['weights_negative']}"
)
print(f"output coordinates outside [min V, max V]: {report['outside_value_range']} of {output.numel()}")

# %% [markdown]
# Attention moves information *between* positions, but what it delivers to a position is an average of linear maps
# of the inputs: for fixed weights it is linear in $V$, and it cannot compute, say, a product or a threshold of the
# features it gathered. The **position-wise feed-forward network** (Vaswani et al. 2017 §3.3) supplies that:
# $\mathrm{FFN}(x) = \max(0, xW_1 + b_1)W_2 + b_2$, a two-layer MLP (usually $4D$ wide inside) applied to every
# row separately with the same weights. Attention mixes the rows, the FFN transforms each row; the pair is repeated
# $N$ times. By hand against the library's `FeedForward`, and row by row against the whole matrix at once:


# %%
def feed_forward_by_hand(x, mlp: FeedForward):
    """max(0, x W₁ + b₁) W₂ + b₂ with the weights of a library FeedForward."""
    return torch.relu(x @ mlp.fc1.weight.T + mlp.fc1.bias) @ mlp.fc2.weight.T + mlp.fc2.bias


ffn = FeedForward(hidden_size=D, intermediate_size=4 * D, activation="relu")
with torch.no_grad():
    ffn_by_hand = feed_forward_by_hand(X, ffn)
    ffn_library = ffn(X)
    ffn_row_by_row = torch.stack([ffn(row) for row in X])
report["ffn_max_abs"] = max_abs(ffn_by_hand, ffn_library)
report["ffn_row_by_row_max_abs"] = max_abs(ffn_row_by_row, ffn_library)
print(
    f"FFN by hand vs library: {report['ffn_max_abs']}; one row at a time vs all rows: "
    f"{report['ffn_row_by_row_max_abs']:.1e}"
)

# %% [markdown]
# By hand: the same numbers, and one row at a time the same function of each row, hence "position-wise" (the bits
# can differ: the appendix).
#
# ## Dropout on the attention weights
#
# Training recipes often add dropout to the attention weights (the 2017 paper drops sublayer outputs; BERT and
# GPT-2 drop attention weights too, hf-attention's `attention_dropout`, passed to `MultiHeadAttention(dropout=p)`).
# In training mode, every weight is set to 0 with probability $p$ and the kept ones are divided by $1 - p$; in eval
# mode nothing happens. Measured with the library's 4-head layer from above, given $p = 0.1$, on many copies of the
# same input $X$ (each copy draws its own dropout mask):

# %%
P_DROP, COPIES = 0.1, 500 if args.quick else 2000
with torch.random.fork_rng():  # this cell's random numbers leave the rest of the tutorial unchanged
    torch.manual_seed(5)
    dropping = MultiHeadAttention(hidden_size=D, num_heads=H, num_kv_heads=H, head_dim=D // H, dropout=P_DROP)
    dropping.load_state_dict(mha.state_dict())  # the same weights as `mha`, plus dropout
    copies = X.expand(COPIES, T, D)
    with torch.no_grad():
        clean, clean_weights = mha(copies, attention_function=eager_attention_forward)
        evaluated, evaluated_weights = dropping.eval()(copies, attention_function=eager_attention_forward)
        trained, trained_weights = dropping.train()(copies, attention_function=eager_attention_forward)
kept = trained_weights != 0  # a softmax weight is never exactly 0 here: a 0 is a dropped weight
row_sums = trained_weights.sum(-1)  # (COPIES, H, T): one sum per row of every head of every copy
report["dropout"] = {
    "p": P_DROP,
    "copies": COPIES,
    "eval_output_max_abs": max_abs(evaluated, clean),
    "eval_weights_max_abs": max_abs(evaluated_weights, clean_weights),
    "dropped_share": 1 - kept.float().mean().item(),
    "kept_rescaled_max_abs": max_abs(trained_weights[kept], clean_weights[kept] / (1 - P_DROP)),
    "row_sum_mean": row_sums.mean().item(),
    "row_sum_std": row_sums.std().item(),
    "row_sum_min": row_sums.min().item(),
    "row_sum_max": row_sums.max().item(),
    "rows_without_drop": kept.all(-1).float().mean().item(),
    "output_mean_max_abs": max_abs(trained.mean(0), clean[0]),
    "output_one_copy_mean_abs": (trained - clean).abs().mean().item(),
    "output_scale_mean_abs": clean.abs().mean().item(),
}
dropout = report["dropout"]
print(f"eval mode vs no dropout: output {dropout['eval_output_max_abs']}, weights {dropout['eval_weights_max_abs']}")
print(
    f"train mode: {dropout['dropped_share']:.3f} of the weights dropped, the kept ones × 1/(1 - p) within "
    f"{dropout['kept_rescaled_max_abs']:.1e}; row sums: mean {dropout['row_sum_mean']:.4f}, std "
    f"{dropout['row_sum_std']:.3f}, from {dropout['row_sum_min']:.3f} to {dropout['row_sum_max']:.3f}"
)
print(
    f"output, one copy: off by {dropout['output_one_copy_mean_abs']:.3f} on average (its entries average "
    f"{dropout['output_scale_mean_abs']:.3f}); mean over {COPIES} copies: off by at most "
    f"{dropout['output_mean_max_abs']:.3f}"
)
figure, axes = plt.subplots(1, 2, figsize=(12, 3.5), layout="constrained")
with_a_drop = (~kept.all(-1)).flatten().nonzero()[0].item()  # the first row that lost a weight, to draw
eval_row, train_row = clean_weights.flatten(0, 2)[with_a_drop], trained_weights.flatten(0, 2)[with_a_drop]
axes[0].hist(row_sums.flatten(), bins=40, color="tab:blue")
for at, style, label in ((1.0, "--", "1 (eval mode)"), (1 / (1 - P_DROP), ":", "1/(1 - p): nothing dropped")):
    axes[0].axvline(at, color="k", ls=style, label=label)
axes[0].set_title(f"row sums of the weights in training mode, p = {P_DROP}")
axes[0].legend(fontsize=8)
positions = torch.arange(T).float()
axes[1].bar(positions - 0.2, eval_row, width=0.4, label="eval mode")
axes[1].bar(positions + 0.2, train_row, width=0.4, label="training mode, one mask")
axes[1].set_xlabel("key")
axes[1].set_title(f"one row of weights that lost a weight: sum {train_row.sum():.3f}")
axes[1].legend(fontsize=8)
save_figure(
    figure,
    args.figures,
    "07_dropout",
    row_sums=row_sums.flatten(),
    eval_row=eval_row,
    train_row=train_row,
)

# %% [markdown]
# In eval mode the layer with dropout gives the very same bits as the layer without. In training mode a share
# 0.100 of the weights is dropped ($p = 0.1$), and each kept weight is the eval weight divided by $1 - p$, to float
# rounding. So a row no longer sums to 1: a row that lost nothing sums to $1/(1 - p) = 1.11$, one that lost a large
# weight much less (down to 0.176 here); the row sums have a standard deviation of 0.145.
# The figure shows their spread (left) and one row that lost a weight (right).
#
# Their mean is 1.000: dividing by $1 - p$ keeps every weight, hence the output, right *on average*. One copy's
# output is off by 0.036 on average (its entries average 0.187 in size); the mean over the 2000 copies is off by at
# most 0.004. Dropout is noise in which keys a token gets to read, so a model cannot rely on any single one; eval
# mode switches it off.
#
# ## Residual connections and LayerNorm, post-norm and pre-norm
#
# A **residual connection** adds a sublayer's input to its output, $x + F(x)$: the sublayer only has to learn a
# correction, the identity is free, and the gradient has a path that goes through no weight
# ($\partial(x + F(x))/\partial x = I + \partial F/\partial x$). **LayerNorm** (Ba et al. 2016) rescales each
# token's vector to mean 0 and variance 1 over its $D$ features, then applies a learned gain $\gamma$ and bias
# $\beta$: $\mathrm{LN}(x) = \gamma \odot (x - \mu)/\sqrt{\sigma^2 + \varepsilon} + \beta$, with $\mu$ and
# $\sigma^2$ the mean and (biased) variance of that one row. It works on each token on its own, whatever the length
# of the sentence or the size of the batch: it keeps the scale of the activations in check as layers are stacked.


# %%
def layer_norm_by_hand(x, norm: nn.LayerNorm):
    """(x - mean) / sqrt(var + eps) · gain + bias over the last axis, with the biased variance."""
    mean = x.mean(-1, keepdim=True)
    variance = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(variance + norm.eps) * norm.weight + norm.bias


def encoder_layer_by_hand(X, layer: EncoderLayer, layer_norm=layer_norm_by_hand):
    """One encoder layer with the weights of a library layer: attention and FFN, each with a residual and a norm,
    post-norm (the 2017 paper's Add & Norm) or pre-norm (GPT-2, Llama)."""
    blocks = (
        (lambda x: multi_head_by_hand(x, layer.self_attn), layer.self_attn_norm),
        (lambda x: feed_forward_by_hand(x, layer.mlp), layer.mlp_norm),
    )
    for sublayer, norm in blocks:
        # pre-norm: x + F(LN(x)); post-norm: LN(x + F(x))
        X = X + sublayer(layer_norm(X, norm)) if layer.pre_norm else layer_norm(X + sublayer(X), norm)
    return X


def library_layer(norm_position: str, width: int = D, heads: int = H) -> EncoderLayer:
    """hf-attention's encoder layer, assembled from its parts as the models do (they never see a config)."""
    return EncoderLayer(
        self_attn=MultiHeadAttention(hidden_size=width, num_heads=heads, num_kv_heads=heads, head_dim=width // heads),
        mlp=FeedForward(hidden_size=width, intermediate_size=4 * width, activation="relu"),
        self_attn_norm=make_norm("layernorm", width, 1e-5),
        mlp_norm=make_norm("layernorm", width, 1e-5),
        norm_position=norm_position,
    )


def torch_layer_norm(x, norm: nn.LayerNorm):
    """torch's own LayerNorm function (the kernel nn.LayerNorm runs), to put in place of the hand-written one."""
    return nn.functional.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


rows = []
with torch.no_grad():
    norm = make_norm("layernorm", D, 1e-5)
    nn.init.normal_(norm.weight), nn.init.normal_(norm.bias)  # not the identity, so the gain and bias count
    report["layer_norm_max_abs"] = max_abs(layer_norm_by_hand(3 * X + 1, norm), norm(3 * X + 1))
    for norm_position in ("post", "pre"):
        layer = library_layer(norm_position).eval()
        library_output, _ = layer(X[None], attention_function=eager_attention_forward)
        by_hand = encoder_layer_by_hand(X, layer)
        with_torch_norm = encoder_layer_by_hand(X, layer, layer_norm=torch_layer_norm)
        report[f"{norm_position}_norm_layer_max_abs"] = max_abs(by_hand, library_output[0])
        report[f"{norm_position}_norm_layer_torch_norm_max_abs"] = max_abs(with_torch_norm, library_output[0])
        rows.append(
            (
                f"{norm_position}-norm layer",
                f"{report[f'{norm_position}_norm_layer_max_abs']:.1e}",
                report[f"{norm_position}_norm_layer_torch_norm_max_abs"],
            )
        )
print(f"LayerNorm by hand vs nn.LayerNorm: {report['layer_norm_max_abs']:.1e}")
print(table(rows, ("vs library EncoderLayer (eager)", "all by hand", "by hand, torch's layer_norm")))

# %% [markdown]
# The hand-written post-norm and pre-norm layers give the library's `EncoderLayer` to float rounding, and that
# rounding comes from the hand-written LayerNorm alone (how, and when the bits are the same: the appendix).
#
# ### LayerNorm over a token, not over a sentence
#
# LayerNorm takes its mean and variance over the $D$ features of **one token**. One also reads that it normalises a
# whole sentence, all its $T \times D$ numbers together, however many rows it has (that is what
# `nn.LayerNorm((T, D))` would compute). That is not what a Transformer does, and three measurements show why it
# could not (random sentences of width $D = 16$, the layer norm's gain and bias at 1 and 0; a masked mean over the
# real tokens would repair the first problem, not the second):
#
# * **padding**: the same 5-token sentence alone and padded to 8 rows with zeros, its real tokens compared;
# * **causality**: in a decoder, position 0 must not depend on later tokens: change the last token, compare position 0;
# * **the rest of the sentence, or of the batch**: append a token, compare the first ones; and, for BatchNorm
#   (statistics over the batch, per feature, as in convolutional networks), change the *other* sentence of a batch
#   of two and compare the first.

# %%
with torch.random.fork_rng():  # this cell's random numbers leave the rest of the tutorial unchanged
    torch.manual_seed(4)

    def per_token(x):
        """LayerNorm as Transformers use it: statistics over the features of each token (the last axis)."""
        return nn.functional.layer_norm(x, x.shape[-1:])

    def per_sentence(x):
        """Statistics over all T × D numbers of each sentence (the last two axes)."""
        return nn.functional.layer_norm(x, x.shape[-2:])

    sentence = torch.randn(1, 5, D)
    padded = torch.cat([sentence, torch.zeros(1, 3, D)], dim=1)  # 3 pad rows of zeros
    report["norm_sentence"] = {"tokens": sentence.shape[1], "padded": padded.shape[1], "D": D}
    changed_last = sentence.clone()
    changed_last[:, -1] = torch.randn(D)
    longer = torch.cat([sentence, torch.randn(1, 1, D)], dim=1)
    norm_effects = {}
    for name, normalise in (("per token", per_token), ("per sentence", per_sentence)):
        norm_effects[name] = {
            "padding": max_abs(normalise(padded)[:, :5], normalise(sentence)),
            "future_token": max_abs(normalise(changed_last)[:, 0], normalise(sentence)[:, 0]),
            "appended_token": max_abs(normalise(longer)[:, :5], normalise(sentence)),
        }
    batch_norm = nn.BatchNorm1d(D).train()  # statistics over the batch (and positions), per feature
    pair, other_pair = torch.randn(2, 5, D), torch.randn(2, 5, D)
    other_pair[0] = pair[0]  # the same first sentence, another second one
    with torch.no_grad():
        in_batch = batch_norm(pair.transpose(1, 2)).transpose(1, 2)[0]
        in_other_batch = batch_norm(other_pair.transpose(1, 2)).transpose(1, 2)[0]
    norm_effects["BatchNorm (training)"] = {"other_sentence": max_abs(in_batch, in_other_batch)}
    norm_effects["per token"]["other_sentence"] = max_abs(per_token(pair)[0], per_token(other_pair)[0])
report["norm_dependence"] = norm_effects
print(
    table(
        [
            (
                name,
                *(
                    f"{effects[k]:.2g}" if k in effects else "-"
                    for k in ("padding", "future_token", "appended_token", "other_sentence")
                ),
            )
            for name, effects in norm_effects.items()
        ],
        ("normalised over", "padding", "a later token", "an appended token", "another sentence in the batch"),
    )
)

# %% [markdown]
# Per token, none of the four changes a single bit of the outputs compared: a token's normalised vector is a function
# of that token alone. Per sentence, all three that apply to it move the outputs compared (by up to 0.71, 0.11 and
# 0.11): the pad rows of zeros change the mean and the variance, a later token leaks into position 0 (a decoder
# trained that way could read the future through the norm), and a token's value depends on the length of its
# sentence. BatchNorm makes a sentence's output depend on which other sentences share its batch, and needs running
# averages at inference. LayerNorm per token is what makes a layer position-wise, and position-wise is what padding,
# causal masks and caching rely on.
#
# ## Why residuals and norms: a deep stack at initialisation
#
# Stack 24 such layers ($D = 32$, 4 heads, random weights, random inputs of 10 tokens) and look at what reaches the
# top, layer by layer, for five variants: post-norm and pre-norm as above, each of them without the residual
# connections (the layer returns $\mathrm{LN}(F(x))$ or $F(\mathrm{LN}(x))$), and residuals without any norm. The
# layers without a residual are the library's `EncoderLayer` with its two blocks (`attend_to_self`, `feed_forward`)
# replaced by ones that drop the `x +`, the only change. Three measurements per layer:
#
# * how alike the positions have become: the mean cosine similarity between the vectors of two different tokens of
#   a sequence (0 for unrelated random vectors, 1 when every position holds the same vector);
# * the scale of the hidden states (their standard deviation);
# * the size of the gradient that reaches each layer's weights from a loss at the top.


# %%
class WithoutResidual(EncoderLayer):
    """The library's layer without its residual connections: Norm(F(x)) (post) or F(Norm(x)) (pre)."""

    def attend_to_self(self, x, position_bias=None, **kwargs):
        output, weights = self.self_attn(
            self.self_attn_norm(x) if self.pre_norm else x, position_bias=position_bias, **kwargs
        )
        return (output if self.pre_norm else self.self_attn_norm(output)), weights

    def feed_forward(self, x):
        output = self.mlp(self.mlp_norm(x) if self.pre_norm else x)
        return output if self.pre_norm else self.mlp_norm(output)


class WithoutFeedForward(EncoderLayer):
    """The library's layer with attention only: the feed-forward block (and its norm) is skipped."""

    def feed_forward(self, hidden_states):
        return hidden_states


def make_layer(
    width, heads, *, norm_position="post", residual=True, feed_forward=True, norm=True, tied=False, dropout=0.0
):
    """An encoder layer of library parts, with one piece removed or changed for an ablation."""
    attention = MultiHeadAttention(
        hidden_size=width, num_heads=heads, num_kv_heads=heads, head_dim=width // heads, dropout=dropout
    )
    if tied:
        attention.k_proj.weight, attention.k_proj.bias = attention.q_proj.weight, attention.q_proj.bias
    kind = EncoderLayer if residual else WithoutResidual
    kind = kind if feed_forward else WithoutFeedForward
    make = (lambda: make_norm("layernorm", width, 1e-5)) if norm else nn.Identity
    return kind(
        self_attn=attention,
        mlp=FeedForward(hidden_size=width, intermediate_size=4 * width, activation="relu"),
        self_attn_norm=make(),
        mlp_norm=make(),
        norm_position=norm_position,
    )


def position_similarity(h: torch.Tensor) -> float:
    """Mean cosine similarity between the vectors of two different positions of a sequence (B, T, E)."""
    unit = nn.functional.normalize(h, dim=-1)
    cosines = unit @ unit.transpose(-1, -2)  # (B, T, T)
    length = h.shape[1]
    return ((cosines.sum((-1, -2)) - length) / (length * (length - 1))).mean().item()


DEPTH, DEPTH_WIDTH = 24, 32
stacks = {
    "post-norm": {},
    "pre-norm": {"norm_position": "pre"},
    "post-norm, no residual": {"residual": False},
    "pre-norm, no residual": {"residual": False, "norm_position": "pre"},
    "residual, no norm": {"norm": False},
}
depth = {}
for name, options in stacks.items():
    torch.manual_seed(1)
    layers = nn.ModuleList(make_layer(DEPTH_WIDTH, 4, **options) for _ in range(DEPTH))
    final_norm = make_norm("layernorm", DEPTH_WIDTH, 1e-5) if options.get("norm_position") == "pre" else nn.Identity()
    h = torch.randn(16, 10, DEPTH_WIDTH)
    states = [h]
    for layer in layers:
        h, _ = layer(h)
        states.append(h)
    target = torch.randn_like(h)
    nn.functional.mse_loss(final_norm(h), target).backward()
    depth[name] = {
        "similarity": [position_similarity(s.detach()) for s in states],
        "std": [s.detach().std().item() for s in states],
        "gradient": [
            torch.stack([p.grad.norm() for p in layer.parameters() if p.grad is not None]).norm().item()
            for layer in layers
        ],
    }
    depth[name]["gradient_first_over_last"] = depth[name]["gradient"][0] / depth[name]["gradient"][-1]
report["depth"] = depth
report["depth_size"] = {"layers": DEPTH, "D": DEPTH_WIDTH, "heads": 4, "tokens": h.shape[1]}
unnormalised = depth["residual, no norm"]["gradient"]
over_normalised = [
    a / b for name in ("post-norm", "pre-norm") for a, b in zip(unnormalised, depth[name]["gradient"], strict=True)
]  # layer by layer: the gradient without norms over the same layer's in a normalised stack
report["no_norm_gradient_ratio"] = [min(over_normalised), max(over_normalised)]
print(
    table(
        [
            (
                name,
                f"{d['similarity'][-1]:.3f}",
                f"{d['std'][-1]:.2f}",
                f"{d['gradient'][0]:.3f}",
                f"{d['gradient'][-1]:.3f}",
                f"{d['gradient_first_over_last']:.3f}",
            )
            for name, d in depth.items()
        ],
        ("stack of 24", "similarity at the top", "std at the top", "|grad| layer 1", "|grad| layer 24", "ratio"),
    )
)

# %% [markdown]
# Without residuals, both stacks end with their 10 positions holding the *same* vector (similarity 1.000), reached
# within two layers: at initialisation attention spreads its weight almost evenly, so each layer replaces every
# token by nearly the same average (Dong et al. 2021 call this rank collapse).
#
# With residuals each token keeps its own input in the sum, and the collapse is slowed, not stopped: the mean cosine
# between positions, 0.00 at the input, reaches 0.91 at layer 24 in post-norm, 0.90 with residuals and no norm, and
# 0.66 in pre-norm. The gradients tell the same story from the other end (last column: the first layer's gradient
# over the last layer's). Without residuals the first layer gets a small fraction of what the last one gets, since
# the signal has to pass back through every layer; with residuals part of it comes down the identity paths.
#
# The norms. Post-norm ends every layer with a LayerNorm, so the hidden states keep a standard deviation of 1 at
# every depth. Pre-norm never normalises the main stream, only what enters each sublayer: every layer *adds* to it,
# so it grows with depth (hence the extra LN at the end of the stack). Its gradients are not equal across depth
# either (the first layer's is 1.63 times the last layer's), but they vary less than post-norm's: a factor of 1.68
# from the smallest to the largest of its 24 layers, against 5.36 in post-norm, whose gradients are largest at the top
# (the first layer gets 0.19 of what the last one gets). That imbalance is why the 2017 recipe needs a learning-rate
# warm-up, and why deep models moved to pre-norm (Xiong et al. 2020). Without any norm the stream grows fastest,
# and each layer's gradient is 98 to 941 times that of the same layer in the normalised stacks: a learning rate
# that suits one does not suit the other.

# %%
figure, axes = plt.subplots(1, 3, figsize=(15, 3.8), layout="constrained")
for name, d in depth.items():
    style = "--" if "no residual" in name else (":" if "no norm" in name else "-")
    axes[0].plot(d["similarity"], style, label=name)
    axes[1].plot(d["std"], style, label=name)
    axes[2].semilogy(range(1, DEPTH + 1), d["gradient"], style, label=name)
axes[0].set_title("similarity between positions (cosine)")
axes[1].set_title("std of the hidden states")
axes[2].set_title("|gradient| of each layer's weights")
for axis in axes:
    axis.set_xlabel("layer")
axes[0].legend(fontsize=8)
save_figure(
    figure,
    args.figures,
    "07_depth",
    **{f"{key}_{i}": d[key] for i, d in enumerate(depth.values()) for key in ("similarity", "std", "gradient")},
)

# %% [markdown]
# ## A task to learn: reversing a sequence of digits
#
# Now train. The task: read 10 random digits and output them in reverse order, one prediction per position:
# position $i$ must output the digit at position $9 - i$. It is pure routing, which is what attention does: each
# position has to find its mirror position and copy its token. The model is the smallest encoder that can do it:
# token embeddings plus the library's sinusoidal positions, 2 post-norm encoder layers ($D = 32$, 4 heads, FFN
# width 128) of library parts, run with the library's default SDPA backend, and a linear layer to 10 digit logits,
# trained with AdamW and cross-entropy on fresh random batches. Then the same model with one piece taken away or
# changed:
#
# | variant | what changes |
# |---|---|
# | full | nothing |
# | no positions | the positional encodings are not added |
# | no feed-forward | each layer is attention (with its residual and norm) only |
# | no residuals | each block is $\mathrm{LN}(F(x))$ instead of $\mathrm{LN}(x + F(x))$ |
# | no LayerNorm | each block is $x + F(x)$ |
# | $W_q = W_k$ | every layer's key projection is its query projection |
# | attention dropout | dropout with $p = 0.1$ on the attention weights, in training |
#
# Two yardsticks. Guessing a digit at random is right 10% of the time. And a model that knows *which* digits are in
# the sequence but not *where* can do better than chance: it knows the digit at its own position and the bag of its
# 10 digits, so its best guess is the most frequent digit among the other 9. That **bag-of-tokens ceiling** is computed
# exactly on the test sequences below.

# %%
LENGTH, WIDTH, HEADS, FFN_WIDTH, LAYERS, BATCH = 10, 32, 4, 128, 2, 64
STEPS = 200 if args.quick else 400
SEEDS = [0] if args.quick else [0, 1, 2]
VARIANTS = {
    "full": {},
    "no positions": {"positions": False},
    "no feed-forward": {"feed_forward": False},
    "no residuals": {"residual": False},
    "no LayerNorm": {"norm": False},
    "W_q = W_k": {"tied": True},
    "attention dropout": {"dropout": P_DROP},
}


class DigitEncoder(nn.Module):
    """Embeddings + sinusoidal positions → encoder layers → a digit classifier at every position."""

    def __init__(self, *, positions=True, **layer_options):
        super().__init__()
        self.embed_tokens = nn.Embedding(10, WIDTH)
        self.positions = SinusoidalPositionalEmbedding(embedding_dim=WIDTH) if positions else None
        self.layers = nn.ModuleList(make_layer(WIDTH, HEADS, **layer_options) for _ in range(LAYERS))
        self.classifier = nn.Linear(WIDTH, 10)

    def forward(self, digits: torch.Tensor) -> torch.Tensor:
        """(B, T) digits → (B, T, 10) logits."""
        hidden = self.embed_tokens(digits)
        if self.positions is not None:
            hidden = hidden + self.positions(torch.arange(digits.shape[1])[None])
        for layer in self.layers:
            hidden, _ = layer(hidden)
        return self.classifier(hidden)


def task_batch(size: int, task: str, generator: torch.Generator):
    """Random digits and their targets: the reversed sequence, or (task "mirror sum") digit + mirror digit mod 10."""
    digits = torch.randint(0, 10, (size, LENGTH), generator=generator)
    mirror = digits.flip(1)
    return digits, mirror if task == "reverse" else (digits + mirror) % 10


def train(options: dict, seed: int, task: str = "reverse", steps: int = STEPS) -> dict:
    """Train one variant from scratch; returns its loss curve and its accuracies on fixed test sequences."""
    torch.manual_seed(seed)
    model = DigitEncoder(**options)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=steps, pct_start=0.1)
    generator = torch.Generator().manual_seed(1000 + seed)
    losses = []
    for _ in range(steps):
        digits, targets = task_batch(BATCH, task, generator)
        loss = nn.functional.cross_entropy(model(digits).flatten(0, 1), targets.flatten())
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    digits, targets = task_batch(2000, task, torch.Generator().manual_seed(12345))  # the same test set for all
    with torch.no_grad():
        correct = model.eval()(digits).argmax(-1) == targets
    return {"losses": losses, "token": correct.float().mean().item(), "sequence": correct.all(1).float().mean().item()}


test_digits, _ = task_batch(2000, "reverse", torch.Generator().manual_seed(12345))
counts = nn.functional.one_hot(test_digits, 10).sum(1)  # (2000, 10): how often each digit occurs
others = counts[:, None, :] - nn.functional.one_hot(test_digits, 10)  # the other nine, seen from each position
report["bag_of_tokens_ceiling"] = (others.max(-1).values / (LENGTH - 1)).float().mean().item()
report["chance"] = 0.1
print(f"chance 0.100, bag-of-tokens ceiling {report['bag_of_tokens_ceiling']:.3f}")

# %%
runs = {name: [train(options, seed) for seed in SEEDS] for name, options in VARIANTS.items()}
reverse = {
    name: {
        "token": [run["token"] for run in seeded],
        "sequence": [run["sequence"] for run in seeded],
        "final_loss": [sum(run["losses"][-20:]) / 20 for run in seeded],
    }
    for name, seeded in runs.items()
}
report["reverse"] = reverse
report["steps"], report["seeds"] = STEPS, SEEDS
report["model"] = {
    "length": LENGTH,
    "width": WIDTH,
    "heads": HEADS,
    "ffn_width": FFN_WIDTH,
    "layers": LAYERS,
    "batch": BATCH,
}
mean = lambda values: sum(values) / len(values)  # noqa: E731
print(f"reverse 10 digits, {STEPS} steps of {BATCH} sequences, seeds {SEEDS} (token / whole-sequence accuracy):")
print(
    table(
        [
            (
                name,
                " ".join(f"{v:.3f}" for v in r["token"]),
                " ".join(f"{v:.3f}" for v in r["sequence"]),
                f"{mean(r['final_loss']):.3f}",
            )
            for name, r in reverse.items()
        ],
        ("variant", "token accuracy", "sequence accuracy", "final loss"),
    )
)

# %% [markdown]
# What the full run (400 steps, three seeds) measures, also drawn in the figures below:
#
# * The **full** model reverses every test sequence, with every seed.
# * **Without positions** it lands on the bag-of-tokens ceiling (about 0.28 of the digits) and never gets a whole
#   sequence right. It knows which digits there are, not where they are: nothing in attention, the FFN or the norms
#   depends on the order of the rows (tutorial 05), so "the digit at the mirror position" is not even defined for it.
# * **Without residuals** it fails as well: the token accuracy varies from seed to seed (0.36 to 0.64), but at most
#   0.05% of the whole sequences are right. The collapse measured above is the likely reason: the layers start out
#   erasing what distinguishes the positions, the very information the task needs.
# * **Without feed-forward networks** it gets there, only more slowly: its loss is 1.18 at step 100, where the full
#   model's is 0.17 (the loss curves). Reversing is pure routing, which attention does by itself.
# * **Without LayerNorm** it learns just as well: the 24-layer stack above needed its norms, and a stack of 2 layers
#   has little depth over which the scale of its activations could build up. Its loss even ends lower, most likely
#   because nothing caps the size of its logits, where post-norm hands the classifier a normalised vector. The norm
#   matters in deep stacks, as measured above, not in this shallow one.
# * **With $W_q = W_k$** it learns too. The tied algebra forbids two positions that favour each other *within one
#   head*; the model has 4 heads in each of 2 layers to share out the pairs $(i, 9-i)$.
# * **With attention dropout** ($p = 0.1$) its lowest test accuracy over the seeds is 1.000 on digits and 1.000 on
#   whole sequences, and its training loss, measured with the dropout on, ends at 0.003 like the full model's
#   (0.003). Here it neither hurts nor helps: with fresh random batches at every step there is no overfitting for
#   it to prevent.
#
# ## A task that needs the feed-forward network: the mirror sum
#
# Reversing is routing, and attention routes. To see what the FFN adds, change the target: position $i$ must now
# output $(x_i + x_{9-i}) \bmod 10$, the sum of its own digit and its mirror's. The routing is the same, but now two
# digits gathered in one vector have to be *combined* by a table of 100 entries that no weighted average followed by
# a linear classifier can express (exercise 3). The full model against the model without feed-forward networks,
# trained longer:

# %%
SUM_STEPS = 400 if args.quick else 800
sum_runs = {
    name: [train(VARIANTS[name], seed, task="mirror sum", steps=SUM_STEPS) for seed in SEEDS]
    for name in ("full", "no feed-forward")
}
mirror_sum = {
    name: {"token": [run["token"] for run in seeded], "sequence": [run["sequence"] for run in seeded]}
    for name, seeded in sum_runs.items()
}
report["mirror_sum"] = mirror_sum
report["mirror_sum_steps"] = SUM_STEPS
print(f"mirror sum, {SUM_STEPS} steps, seeds {SEEDS} (token / whole-sequence accuracy):")
print(
    table(
        [
            (name, " ".join(f"{v:.3f}" for v in r["token"]), " ".join(f"{v:.3f}" for v in r["sequence"]))
            for name, r in mirror_sum.items()
        ],
        ("variant", "token accuracy", "sequence accuracy"),
    )
)

# %% [markdown]
# In the full run (800 steps, three seeds) the full model gets at least 99.98% of the digits and 99.8% of the
# whole sequences right. Without feed-forward networks it ends with 22% to 34% of the digits wrong and at most 8.2%
# of the sequences right, although its routing, the part it shares with the reverse task, is the same. It is not at
# chance: LayerNorm and the softmax are nonlinear too, but they are not made to compute a table.
#
# Whether it would get there with more training, these runs cannot say. Its loss (mean over seeds) was 1.56 at
# step 400, 0.90 at step 600 and 0.78 at step 800, where the full model's was already 0.02 at step 400. It slows
# down in the last 200 steps, but that is where the one-cycle schedule takes the learning rate towards 0: the
# slowdown and the schedule are confounded. What the runs do show: attention gathers, the FFN computes, and without
# it the same table takes far longer to learn, if it can be learned.

# %%
figure, axes = plt.subplots(1, 2, figsize=(14, 4), gridspec_kw={"width_ratios": [3, 1]}, layout="constrained")
for axis, results, title in ((axes[0], reverse, "reverse"), (axes[1], mirror_sum, "mirror sum")):
    names = list(results)
    x = torch.arange(len(names)).float()
    for offset, key, label in ((-0.2, "token", "token accuracy"), (0.2, "sequence", "whole-sequence accuracy")):
        axis.bar(x + offset, [mean(results[n][key]) for n in names], width=0.4, label=label)
        for i, n in enumerate(names):  # one dot per seed
            axis.plot([i + offset] * len(results[n][key]), results[n][key], "k.", markersize=4)
    axis.axhline(0.1, color="grey", ls=":", label="chance (0.1)")
    if title == "reverse":
        axis.axhline(report["bag_of_tokens_ceiling"], color="k", ls="--", label="bag-of-tokens ceiling")
    axis.set_xticks(x, names, rotation=20, fontsize=8)
    axis.set_ylim(0, 1.05)
    axis.set_title(f"{title}: test accuracy")
axes[0].legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4)
save_figure(
    figure,
    args.figures,
    "07_ablations",
    **{f"reverse_{key}_{i}": r[key] for i, r in enumerate(reverse.values()) for key in ("token", "sequence")},
    **{f"sum_{key}_{i}": r[key] for i, r in enumerate(mirror_sum.values()) for key in ("token", "sequence")},
    bag_of_tokens_ceiling=report["bag_of_tokens_ceiling"],
)


def smoothed(losses: list[float], window: int = 10) -> list[float]:
    """Running mean over the last `window` steps."""
    return [mean(losses[max(0, i - window + 1) : i + 1]) for i in range(len(losses))]


figure, axes = plt.subplots(1, 2, figsize=(14, 4), layout="constrained")
curves = {}
for axis, all_runs, title in ((axes[0], runs, "reverse"), (axes[1], sum_runs, "mirror sum")):
    for name, seeded in all_runs.items():
        curve = smoothed([mean(step) for step in zip(*(run["losses"] for run in seeded), strict=True)])
        curves[f"{title}: {name}"] = curve
        axis.semilogy(curve, label=name)
    axis.axhline(math.log(10), color="grey", ls=":", label="uniform guess (ln 10)")
    axis.set_xlabel("training step")
    axis.set_title(f"{title}: training loss (mean over seeds)")
    axis.legend(fontsize=8)
# The smoothed curves at a few steps, for the text: how fast each variant learns.
report["smoothed_loss"] = {
    name: {str(step): curve[step - 1] for step in (100, 400, 600, 800) if step <= len(curve)}
    for name, curve in curves.items()
}
save_figure(figure, args.figures, "07_loss", **{f"curve_{i}": c for i, c in enumerate(curves.values())})

# %% [markdown]
# ## Summary
#
# * Attention is a few lines of torch: $Q, K, V = XW_q, XW_k, XW_v$; $\mathrm{softmax}(QK^\top/\sqrt d)\,V$.
#   Multi-head attention cuts the columns into $H$ groups, attends in each, puts the outputs side by side and mixes
#   them with $W_o$. Written that way, with the library's weights, it gives hf-attention's eager backend (to the last
#   bit where the same kernels run, as on this run's CPU); SDPA and LayerNorm's fused kernel agree to float rounding,
#   because they add in another order.
# * $W_q \ne W_k$ lets "$i$ looks for $j$" differ from "$j$ looks for $i$". Tied, the scores are a symmetric Gram
#   matrix: tokens favour themselves, and no two tokens can favour each other.
# * Dropout on the attention weights is training-time noise: a row keeps its sum only on average, and eval mode is
#   untouched, bit for bit.
# * Attention outputs are weighted averages of value vectors; the position-wise FFN is the per-token nonlinearity.
#   Reversing (routing) can do without it; the mirror sum (combining) is learned far more slowly, if ever.
# * Residuals keep each token's identity and give the gradient a path through depth; without them the positions
#   collapse onto one vector and the reverse task is not learned. LayerNorm keeps the scale of the activations in
#   check: post-norm at every layer's output, pre-norm at every sublayer's input (plus once at the end), with
#   gradients that vary less across depth than post-norm's. It normalises each token on its own, not a sentence: per
#   sentence, padding, a later token and the length of the sentence each moved the outputs measured above.
# * The projections are $1 \times 1$ convolutions and a $k$-tap convolution is a $k$-head attention with fixed masks;
#   attention goes beyond a convolution because it computes where to look from the tokens.
# * Positions are what make order learnable: without them an encoder is blind to order and tops out at the
#   bag-of-tokens ceiling.
#
# **Next:** [08 · why attention](08_why_attention.py): what a layer costs, and how far information travels, compared
# with recurrent and convolutional layers.

# %% [markdown]
# ## Self-test
#
# a. Why does an attention layer's output lie, coordinate by coordinate, between the smallest and the largest value,
#    and what does the feed-forward network add?
# b. Tie $W_k = W_q$. What becomes of the score matrix, and which key does a query then tend to favour?
# c. LayerNorm takes its mean and variance over the features of one token. What would go wrong with statistics over
#    the whole sentence?
# d. In a deep stack at initialisation, what happens to the positions without residual connections, and which of
#    post-norm and pre-norm spreads the gradient more evenly over the layers?
# e. Which pieces can the small encoder of the reverse task not do without, and which can it?

# %% [markdown]
# ### Self-test answers
#
# a. A row of $A$ is non-negative and sums to 1, so an output row is a weighted average of the value rows, and for
#    fixed weights it is linear in $V$ (*Why a feed-forward network after attention?*). The FFN is the nonlinearity
#    applied to each token: on the mirror sum the full model gets at least 99.8% of the whole sequences right, the
#    model without FFN at most 8.2% after 800 steps (*A task that needs the feed-forward network*).
# b. The scores become a Gram matrix $S = (XW)(XW)^\top$: symmetric and positive semidefinite, and a token scores
#    another above itself only if that one's vector is longer (*Why two matrices, $W_q \ne W_k$?*). So queries favour
#    themselves: tied, 0.87 of the rows put their largest weight on the token itself, against 0.10 untied; and no two
#    tokens favour each other, which is why a swap cannot be done in one tied head.
# c. A token's output would depend on the rest of the sentence (*LayerNorm over a token, not over a sentence*). Per
#    sentence, padding moved the real tokens by up to 0.71, a changed last token moved position 0 by 0.11 (a decoder
#    could read the future through the norm), and an appended token moved the first ones by 0.11; per token, none of
#    these changed a bit.
# d. Without residuals the positions collapse onto one vector, similarity 1.000 within two layers: at initialisation
#    each layer replaces the tokens by nearly the same average (*Why residuals and norms*). Pre-norm spreads the
#    gradient more evenly: its layers' gradients differ by a factor of 1.68 at most, post-norm's by 5.36.
# e. Positions and residuals (*A task to learn: reversing a sequence of digits*). Without positions it stays at the
#    bag-of-tokens ceiling, about 0.28 of the digits, and never gets a sequence right; without residuals at most
#    0.05% of the sequences come out right. Without the FFN, without LayerNorm or with $W_q = W_k$ it still learns
#    the task, the FFN-less model more slowly.

# %% [markdown]
# ## Exercises
#
# 1. Give every head the width $d = 8$ ($D = 32$, $H = 4$) and compare `multi_head_by_hand` with the eager backend
#    again. What difference do you expect, and what small change to `scaled_dot_product` removes it?
# 2. Show that with $W_k = W_q$ the score matrix is positive semidefinite: $u^\top S u \ge 0$ for every vector $u$.
#    Does it stay so with biases on the projections (tied too)?
# 3. Why can no model of the form "one weighted average of the two digits' vectors (with weights that do not depend
#    on which digits they are), then a linear classifier" compute the mirror sum? Hint: look at the four digit pairs
#    $(0, 0)$, $(5, 5)$, $(0, 5)$, $(5, 0)$.
# 4. Without positions the reverse model is stuck at the bag-of-tokens ceiling. What would it score on the *copy*
#    task (output the digit at one's own position)? And why exactly can't any amount of training lift it above the
#    ceiling on reverse?
# 5. In the 24-layer stack, the pre-norm hidden states grow with depth (std about 2 at the top). Where in a pre-norm
#    model does that growth stop mattering for the output, and what would happen to the classifier if that piece were
#    missing?
# 6. Normalise per sentence, but with the mean and variance of the *real* tokens only (a masked mean). Which of the
#    three problems of the per-sentence norm does that repair?
# 7. Write a 5-tap convolution (`nn.Conv1d(D, D, kernel_size=5, padding=2)`) as a multi-head attention, and a 3-tap
#    convolution with dilation 2. How many heads, which masks?
#
# ## Answers
#
# 1. $1/\sqrt 8$ is not a power of two: the hand version divides by the rounded $\sqrt 8$, the library multiplies by
#    the rounded $8^{-1/2}$, and the two differ in the last bit of some scores; the outputs then differ by float
#    rounding. Writing `* K.shape[-1] ** -0.5` instead of `/ math.sqrt(K.shape[-1])` runs the library's very
#    operation: the scores agree again, and the outputs are as close as they were above.
# 2. $S = AA^\top$ with $A = XW + \mathbf 1 b^\top$ (queries and keys are the same rows $a_i$), so
#    $u^\top S u = u^\top A A^\top u = \lVert A^\top u\rVert^2 \ge 0$. Biases change $A$ but not the form $AA^\top$:
#    still positive semidefinite, and still symmetric.
# 3. A linear classifier on $\alpha e(a) + (1 - \alpha) e(b)$ (plus, through the residual, $e(a)$ again) gives each
#    class a logit of the form $f_c(a) + g_c(b)$. To answer $(0,0) \mapsto 0$ and $(5,5) \mapsto 0$ the sum
#    $f_0(0) + g_0(0) + f_0(5) + g_0(5)$ must exceed the same sum for class 5; to answer $(0,5) \mapsto 5$ and
#    $(5,0) \mapsto 5$ it must be smaller, and the two four-term sums are made of the same terms. Impossible: the
#    mirror sum is an XOR in disguise. The model without FFN still gets part of the way because LayerNorm and the
#    softmax are nonlinear, just not made for this.
# 4. Copying needs no positions: the digit at position $i$ is in the residual stream at position $i$, so the model
#    can reach 100%. On reverse, without positions, every operation of the encoder is either applied to each
#    position alone or a sum over all positions, so the output at position $i$ is a function of $x_i$ and of the
#    *multiset* of the digits only (the model is permutation-equivariant, tutorial 05). Every position with the same
#    digit gets the same prediction, and the best such prediction is the ceiling computed above.
# 5. In the final LayerNorm at the end of the stack: it brings the stream back to unit scale before the classifier.
#    Without it the classifier's logits would scale with the depth of the model, and their size (how sure the model
#    is) would depend on how many layers it has, not on what it has learned.
# 6. Only padding: with statistics over the 5 real tokens, the padded sentence gives its real tokens the outputs
#    they get alone, to float rounding (its sums also run over the rows of zeros, which may group the additions
#    differently). A later token still moves position 0 (by 0.11, as before), and so does an appended one: the
#    statistics still mix the positions. A causal version would need statistics over each prefix, a different
#    normaliser for every position; per token there is nothing to repair.
# 7. Five heads whose masks allow the offsets $-2, -1, 0, 1, 2$ (head $h$: key $j = i + h - 2$), `v_proj` five stacked
#    identities, `o_proj` the five taps side by side: it equals the convolution to float rounding. Dilation 2 with
#    3 taps: three heads with offsets $-2, 0, 2$. The mask says where a head looks, the head count is the number of
#    taps, and the channels are untouched by it.

# %% [markdown]
# ## Appendix: float rounding and the same bits
#
# The main text says "to the last bit" in some places and "to float rounding" in others. Why, section by section.
#
# Floating-point addition is not associative: $(a + b) + c$ and $a + (b + c)$ can differ in the last bit. Two
# programs that compute the same formula therefore agree *exactly* only when they run the same operations in the
# same order; otherwise they agree to float rounding, a few units of $10^{-7}$ in float32 for values near 1.
#
# **Single-head attention.** The hand version divides by $\sqrt d$, the library multiplies by `scaling`. With
# $D = d = 16$, $\sqrt d = 4$ and dividing by 4 is the same operation as the library's multiplication by `scaling`
# $= 1/4$ (both exact in binary); with $d = 8$ the two would round differently (exercise 1). Against the eager backend
# the difference is **0.0** on the CPU of this run: the library runs the same products, the same scale, the same
# softmax and the same weighted sum in the same order. That is not a promise for every CPU: the matrix library may
# pick other kernels for the library's layout of the same products (a batch of one, the bias added inside the
# product), and the two then differ by float32 rounding, as the tutorial's other paths do. Against SDPA it is float
# rounding, a few times $10^{-8}$: the fused kernel computes the softmax its own way (over blocks of keys, with a
# running maximum and a running sum, and vectorised exponentials), so its additions and roundings come out
# differently.
#
# **Multi-head attention.** Batched over heads, the hand version gives the eager backend's bits on this run's CPU.
# Cut into strided column slices and run one head at a time it need not, although it is the same arithmetic on the
# same numbers: a matrix product picks its kernel and the order of its sums by the shapes and the memory layout it is
# given, so a strided slice may be summed in another order than a contiguous block. Bit-exactness is a property of
# the whole sequence of operations and of the kernels the CPU runs for them, not of the formula.
#
# **The feed-forward network.** By hand: the same numbers (`nn.Linear` is the same product plus bias; to the last bit
# on this run's CPU, to float rounding where the matrix library adds the bias inside the product). One row at a time
# gives the same function of each row, hence "position-wise", but not always the same bits: a $1 \times D$ product
# and a $T \times D$ product go through different kernels (a matrix-vector and a matrix-matrix routine), which add in
# different orders.
#
# **LayerNorm.** The hand-written LayerNorm differs from `nn.LayerNorm` by float rounding: torch's kernel computes the
# mean and the variance in one fused pass over the row (Welford's running update) and multiplies by a reciprocal
# square root, where the hand version makes two passes and divides by a square root. That is the *only* source of
# difference in the whole layer: with torch's own `layer_norm` function in place of the hand-written one, the
# hand-written post-norm and pre-norm layers give the library's `EncoderLayer`: to the last bit on this run's CPU, to
# float rounding on one whose matrix library picks other kernels for the library's layout.

# %%
report.save()
