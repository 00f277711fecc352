# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 05 · Positional encodings: telling an order-blind layer where each token is
#
# Self-attention compares every token with every other token and takes a weighted sum. Nothing in that
# computation depends on *where* a token sits: shuffle the input and the outputs are shuffled the same way. "Dog
# bites man" and "man bites dog" would look alike. This tutorial shows that order-blindness numerically, then the
# five ways hf-attention puts position back in (`position_encoding=`):
#
# | scheme | where it acts | paper |
# |---|---|---|
# | `sinusoidal` | a fixed vector added to each token embedding | Vaswani et al. 2017 §3.5 |
# | `learned` | a trained vector per position, added to the embedding | BERT, GPT-2 |
# | `rotary` | rotates queries and keys by an angle proportional to the position | Su et al. 2021 (RoFormer) |
# | `alibi` | a penalty $-m_h\lvert i-j\rvert$ added to the scores | Press et al. 2022 (causal; symmetric: extension) |
# | `relative` | a learned bias per bucket of the distance $j - i$, added to the scores | Raffel et al. 2020 (T5) |

# %%
import torch
from tutorial_support import Report, parse_args, plt, save_figure, table

import hf_attention
from hf_attention.positional import (
    ALiBiBias,
    LearnedPositionalEmbedding,
    RotaryEmbedding,
    SinusoidalPositionalEmbedding,
    alibi_slopes,
    apply_rotary,
    relative_position_bucket,
)

args = parse_args("Positional encodings: sinusoidal, learned, rotary, ALiBi, T5 buckets; order-blindness.")
report = Report(args)
torch.manual_seed(0)
LENGTH = 32 if args.quick else 60  # positions drawn
WIDTH = 32  # embedding width of the sinusoidal table

# %% [markdown]
# ## The sinusoidal table
#
# $$PE(p, 2i) = \sin\left(p / 10000^{2i/d}\right),\qquad PE(p, 2i+1) = \cos\left(p / 10000^{2i/d}\right).$$
#
# Each pair of columns is a sine–cosine pair at one frequency $\omega_i = 10000^{-2i/d}$, $i = 0 \dots d/2 - 1$; the
# frequencies fall geometrically from 1 (a period of $2\pi \approx 6.3$ positions) towards $10^{-4}$. The slowest
# pair, $i = d/2 - 1$, has the frequency $10000^{-(d-2)/d}$ and the period $2\pi \cdot 10000^{(d-2)/d}$: only in
# the limit of large $d$ does that approach $2\pi \cdot 10000 \approx 62\,832$ positions. For the $d = 32$ table
# drawn here it is about 35 000 (and about 61 000 for $d = 512$). The library computes the table on the fly from the
# position ids (in float64), so no table limits the length. The periods below are read off the table itself: row 1
# holds $(\sin \omega_i, \cos \omega_i)$, so $\omega_i = \operatorname{atan2}(PE(1, 2i), PE(1, 2i+1))$.

# %%
positions = torch.arange(LENGTH)
table_pe = SinusoidalPositionalEmbedding(embedding_dim=WIDTH)(positions[None])[0]  # (LENGTH, WIDTH)
figure, axes = plt.subplots(1, 2, figsize=(12, 3.8))
for column in range(6, 10):
    axes[0].plot(positions, table_pe[:, column], label=f"column {column}")
axes[0].set_xlabel("position p")
axes[0].set_title("Columns 6-9 of the table: lower frequency to the right")
axes[0].legend(fontsize=8)
image = axes[1].imshow(table_pe, cmap="RdBu", aspect="auto", vmin=-1, vmax=1)
axes[1].set_xlabel("encoding dimension")
axes[1].set_ylabel("position p")
axes[1].set_title("The whole table")
figure.colorbar(image, ax=axes[1])
save_figure(figure, args.figures, "05_sinusoidal", table=table_pe)

row_one = SinusoidalPositionalEmbedding(embedding_dim=WIDTH)(torch.tensor([[1]]))[0, 0].double()  # (WIDTH,)
frequencies_read = torch.atan2(row_one[0::2], row_one[1::2])  # ω_i, from the library's own table
periods = 2 * torch.pi / frequencies_read
report["sinusoidal_periods"] = periods
report["slowest_period"] = periods[-1].item()
report["slowest_period_formula"] = 2 * torch.pi * 10000 ** ((WIDTH - 2) / WIDTH)
report["large_d_limit_period"] = 2 * torch.pi * 10000
print(
    f"periods of the {WIDTH // 2} column pairs (positions): fastest {periods[0]:.2f}, then "
    + ", ".join(f"{value:.0f}" for value in periods[1:-1].tolist())
    + f", slowest {periods[-1]:.0f} (2π·10000^((d-2)/d) = {report['slowest_period_formula']:.0f}; "
    f"the large-d limit 2π·10000 = {report['large_d_limit_period']:.0f})"
)

# %% [markdown]
# ## The binary-counter analogy
#
# Write the positions 0, 1, 2, … in binary. The lowest bit flips at every step, the next every 2 steps, the next
# every 4: each bit is a square wave, and each higher bit is slower by a factor 2. The sinusoidal table does the
# same with smooth waves: its first columns oscillate fast, its last ones barely move, and a row as a whole is
# different for every position. Smooth values suit a network better than bits (they are bounded and continuous),
# and the slowing factor is $10000^{2/d}$ per column pair instead of 2.

# %%
bits = ((positions[:, None] >> torch.arange(6)[None, :]) & 1).float()  # (LENGTH, 6), lowest bit first
for p in range(8):
    print(
        p,
        "".join(str(int(b)) for b in bits[p].flip(0)),
        "  PE columns 0, 2, 4:",
        " ".join(f"{table_pe[p, c]:+.2f}" for c in (0, 2, 4)),
    )
figure, axes = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [1, 2]})
axes[0].imshow(bits, cmap="Greys", aspect="auto", interpolation="nearest")
axes[0].set_xlabel("bit (lowest first)")
axes[0].set_ylabel("position p")
axes[0].set_title("Binary counter")
axes[1].imshow(table_pe[:, 0::2], cmap="RdBu", aspect="auto", vmin=-1, vmax=1, interpolation="nearest")
axes[1].set_xlabel("sine column (highest frequency first)")
axes[1].set_title("Sinusoidal table, sine columns")
save_figure(figure, args.figures, "05_binary", bits=bits, sines=table_pe[:, 0::2])

# %% [markdown]
# ## Relative positions are a fixed rotation
#
# For any offset $k$, the pair $(PE(p+k, 2i), PE(p+k, 2i+1))$ is the pair at $p$ rotated by the angle $k\omega_i$:
#
# $$\begin{pmatrix}\sin((p+k)\omega)\\ \cos((p+k)\omega)\end{pmatrix} =
#   \begin{pmatrix}\cos k\omega & \sin k\omega\\ -\sin k\omega & \cos k\omega\end{pmatrix}
#   \begin{pmatrix}\sin p\omega\\ \cos p\omega\end{pmatrix}.$$
#
# So $PE(p+k) = M_k\, PE(p)$ with one block-diagonal matrix $M_k$ that depends on $k$ only, not on $p$: a linear
# layer can learn to "look $k$ positions back" the same way at every position. Checked on the library's table for
# positions 0 … 199 and offsets 1, 5, 20:


# %%
def rotation_for_offset(offset: int, width: int) -> torch.Tensor:
    """The block-diagonal M_k built from the table's own frequencies, angles offset · ω_i."""
    frequencies = 10000.0 ** (-torch.arange(0, width, 2, dtype=torch.float64) / width)
    matrix = torch.zeros(width, width, dtype=torch.float64)
    for i, omega in enumerate(frequencies):
        c, s = torch.cos(offset * omega), torch.sin(offset * omega)
        matrix[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.stack([torch.stack([c, s]), torch.stack([-s, c])])
    return matrix


long_table = SinusoidalPositionalEmbedding(embedding_dim=WIDTH)(torch.arange(220)[None])[0].double()
offset_errors = {}
for offset in (1, 5, 20):
    rotated = long_table[:200] @ rotation_for_offset(offset, WIDTH).T  # rows: M_k PE(p)
    offset_errors[offset] = (rotated - long_table[offset : offset + 200]).abs().max().item()
    print(f"offset {offset:2d}: max |M_k PE(p) - PE(p+k)| over p < 200 = {offset_errors[offset]:.1e}")
report["rotation_max_error"] = max(offset_errors.values())

# %% [markdown]
# The error is the table's float32 rounding: the property is exact. A consequence: $PE(p)\cdot PE(q)$ depends only
# on $p - q$ (a rotation keeps dot products), which the first panel below shows as a pattern constant along
# every diagonal.
#
# ## The five schemes side by side
#
# Each panel is a (query position × key position) matrix of what position alone adds to the attention score:
#
# * **sinusoidal**: $PE(i)\cdot PE(j)$, constant along diagonals (it reaches the score through the query and
#   key projections, so this is only the raw material);
# * **learned**: $P_i\cdot P_j$ for a freshly initialised table: each position matches only itself (the
#   diagonal); whatever else there is, training has to put in. The table also ends at `max_position_embeddings`;
# * **rotary**: the score $q^\top k$ of one fixed query vector at position $i$ and one fixed key vector at
#   position $j$ after RoPE's rotations: it depends only on $j - i$;
# * **ALiBi**: the bias $-m\lvert i-j\rvert$ of the first head, a fixed linear penalty on distance. Press et al.
#   (2022) define ALiBi for causal language models, where only keys $j \le i$ exist and the penalty is
#   $-m(i - j)$; the symmetric $-m\lvert i-j\rvert$ that an encoder needs (shown here, and what hf-attention uses in
#   both directions) is an extension of the paper, not part of it;
# * **T5 buckets**: the bucket index of $j - i$: 8 exact small distances per direction, then logarithmically
#   wider buckets up to 128, the same bucket beyond. A learned scalar per (bucket, head) is the bias.

# %%
ids = positions[None]  # (1, LENGTH)
sinusoidal_gram = table_pe @ table_pe.T
learned = LearnedPositionalEmbedding(num_positions=LENGTH, embedding_dim=WIDTH)
torch.nn.init.normal_(learned.weight, std=WIDTH**-0.5)
with torch.no_grad():
    learned_table = learned(ids)[0]
learned_gram = learned_table @ learned_table.T

head_dim = 32
cos, sin = RotaryEmbedding(head_dim=head_dim)(ids)  # (1, LENGTH, head_dim) each
content_q, content_k = torch.randn(head_dim), torch.randn(head_dim)
rotated_q = apply_rotary(content_q.expand(1, 1, LENGTH, head_dim), cos, sin)[0, 0]  # the query at every position
rotated_k = apply_rotary(content_k.expand(1, 1, LENGTH, head_dim), cos, sin)[0, 0]
rotary_scores = rotated_q @ rotated_k.T  # (query position, key position)
shift = 7
shift_error = (rotary_scores[shift:, shift:] - rotary_scores[:-shift, :-shift]).abs().max().item()
report["rotary_shift_relative_error"] = shift_error / rotary_scores.abs().max().item()
print(
    f"rotary: score(i + {shift}, j + {shift}) vs score(i, j): max difference {shift_error:.1e}, "
    f"{report['rotary_shift_relative_error']:.1e} of the largest score"
)

alibi = ALiBiBias(num_heads=4)(ids, ids)[0]  # (heads, LENGTH, LENGTH)
report["alibi_slopes"] = alibi_slopes(4)
key_minus_query = positions[None, :] - positions[:, None]
buckets = relative_position_bucket(key_minus_query, bidirectional=True, num_buckets=32, max_distance=128)

figure, axes = plt.subplots(1, 5, figsize=(19, 3.8))
panels = (
    (sinusoidal_gram, "sinusoidal: PE(i)·PE(j)"),
    (learned_gram, "learned (untrained): P_i·P_j"),
    (rotary_scores, "rotary: q·k of fixed vectors"),
    (alibi[0], f"ALiBi bias, head 0 (m = {alibi_slopes(4)[0]})"),
    (buckets.float(), "T5 bucket of j - i"),
)
for axis, (matrix, title) in zip(axes, panels, strict=True):
    image = axis.imshow(matrix, cmap="viridis", aspect="equal", interpolation="nearest")
    axis.set_title(title, fontsize=9)
    axis.set_xlabel("key position j")
    figure.colorbar(image, ax=axis, shrink=0.75)
axes[0].set_ylabel("query position i")
save_figure(
    figure,
    args.figures,
    "05_schemes",
    sinusoidal=sinusoidal_gram,
    learned=learned_gram,
    rotary=rotary_scores,
    alibi=alibi,
    buckets=buckets,
)

# %% [markdown]
# ### Distance profiles
#
# Cut along one row: how each relative scheme treats a key at distance $j - i$. ALiBi's heads penalise distance
# with geometrically spaced slopes $2^{-8/H}, 2^{-16/H}, \dots$, so some heads look far and others only nearby;
# T5 spends its buckets on small distances, where precise offsets matter, and lumps far ones together.

# %%
distance = torch.arange(-160, 161)
t5_buckets = relative_position_bucket(distance, bidirectional=True, num_buckets=32, max_distance=128)
alibi_profile = ALiBiBias(num_heads=4)(torch.zeros(1, 1, dtype=torch.long), distance[None])[0, :, 0]  # (H, dist)
figure, axes = plt.subplots(1, 2, figsize=(11, 3.6))
for head in range(4):
    axes[0].plot(distance, alibi_profile[head], label=f"head {head}, m = {alibi_slopes(4)[head]:.4g}")
axes[0].set_xlabel("key position - query position")
axes[0].set_title("ALiBi bias")
axes[0].legend(fontsize=8)
axes[1].step(distance, t5_buckets, where="mid")
axes[1].set_xlabel("key position - query position")
axes[1].set_title("T5 bucket (bidirectional, 32 buckets, max distance 128)")
save_figure(
    figure, args.figures, "05_distance_profiles", distance=distance, alibi=alibi_profile, t5_buckets=t5_buckets
)
report["t5_buckets_at"] = {
    str(d): int(t5_buckets[d + 160]) for d in (-160, -128, -20, -8, -7, -1, 0, 1, 7, 8, 20, 128, 160)
}

# %% [markdown]
# The learned table ends where it ends: past `max_position_embeddings` hf-attention refuses the input with an
# error that says so, instead of reading garbage. The others compute any position.

# %%
try:
    learned(torch.tensor([[LENGTH]]))
except ValueError as error:
    print("learned table:", error)
    report["learned_past_table_error"] = str(error)

# %% [markdown]
# ## Order-blindness, measured
#
# Take a small random encoder (2 layers, 4 heads, width 32, no dropout), feed it 12 tokens, then the same tokens
# in a shuffled order. If the encoder has no positional signal, its outputs are the original outputs shuffled the
# same way: it is **permutation-equivariant**, and "which token came first" is simply not in the output. Every
# positional scheme breaks that.
#
# One detail: with the usual initialisation (weights of standard deviation 0.02) a fresh attention layer adds
# almost nothing to the residual stream and attends almost uniformly, so the schemes that act *inside* attention
# (rotary, ALiBi, T5) would change the output only in the 4th decimal. The encoders here are initialised with a
# standard deviation of 0.2, which gives the attention layers a say, as training does.

# %%
tokens = torch.randint(4, 99, (1, 12))
permutation = torch.randperm(12)
rows = []
differences = {}
for scheme in ("none", "sinusoidal", "learned", "rotary", "alibi", "relative"):
    torch.manual_seed(1)
    config = hf_attention.HFAttentionEncoderConfig(
        vocab_size=99,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        position_encoding=scheme,
        hidden_dropout_prob=0.0,
        max_position_embeddings=64,
        initializer_range=0.2,
    )
    model = hf_attention.HFAttentionEncoderModel(config).eval()
    with torch.no_grad():
        original = model(tokens).last_hidden_state[0]
        shuffled = model(tokens[:, permutation]).last_hidden_state[0]
    difference = (shuffled - original[permutation]).abs().max().item()
    differences[scheme] = difference
    rows.append((scheme, f"{difference:.1e}", f"{original.abs().mean().item():.2f}"))
print(table(rows, ("position_encoding", "max |f(shuffled) - shuffle(f(x))|", "mean |output|")))
report["permutation_difference"] = differences

# %% [markdown]
# Without positions the difference is float rounding: the encoder literally cannot tell the two orders apart.
# With any scheme it is of the order of the outputs themselves. (A *decoder* is different: its causal mask
# already breaks the symmetry, since token 5 sees 5 tokens and token 1 sees one, which is why some decoders work
# without any positional encoding; an encoder has no such crutch.)
#
# **Next:** [06 · multi-head, self- and cross-attention, masks](06_multihead_self_cross_masks.py).
#
# ## Exercises
#
# 1. Set `WIDTH = 128`. What is the period of the slowest column pair now, and how far is it from the large-$d$
#    limit $2\pi \cdot 10000$?
# 2. Check on `sinusoidal_gram` that $PE(i)\cdot PE(i+5)$ is the same for $i = 0, 10, 30$. Which closed form does
#    it equal?
# 3. Print `alibi_slopes(8)` and `alibi_slopes(6)`. Why is the second not a geometric sequence?
# 4. With `relative_position_bucket(..., bidirectional=True, num_buckets=32, max_distance=128)`, which buckets do
#    the distances $+9, -9, +50, -50, +100, -100$ fall into?
# 5. Repeat the order-blindness measurement with a *decoder*
#    (`hf_attention.HFAttentionDecoderConfig` / `HFAttentionForCausalLM`, `position_encoding="none"`, the same sizes,
#    the last hidden state from `output_hidden_states=True`). Is it permutation-equivariant? Now keep the last token
#    in place and shuffle only the 11 before it: is the last position's output unchanged with 1 layer? With 2?

# %%
report.save()

# %% [markdown]
# ## Answers
#
# 1. About 54 410 positions ($2\pi \cdot 10000^{126/128}$), 87% of the limit 62 832; the slowest frequency is
#    $10000^{-(d-2)/d}$, which approaches $10^{-4}$ only as $d$ grows.
# 2. All three are 11.777 (to float rounding): $PE(p)\cdot PE(q) = \sum_i (\sin p\omega_i \sin q\omega_i + \cos
#    p\omega_i \cos q\omega_i) = \sum_i \cos((p - q)\omega_i)$, here $\sum_{i=0}^{15} \cos(5\omega_i)$.
# 3. 8 heads: $2^{-1}, 2^{-2}, \dots, 2^{-8}$. 6 heads: 0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125. For a head
#    count that is not a power of two, Press et al. take the four slopes of the nearest lower power of two and fill up
#    with every other slope of the next power (8 heads), so the list is two interleaved geometric sequences.
# 4. $+9 \to 24$, $-9 \to 8$, $+50 \to 29$, $-50 \to 13$, $+100 \to 31$, $-100 \to 15$. Positive distances use
#    buckets 16-31 and negative ones 0-15; beyond the 8 exact distances, the buckets are logarithmic, so 9 and 50 are
#    close in bucket index, and everything past about 128 lands in the last bucket of its direction.
# 5. No: shuffled, the outputs differ by about as much as their own size, because the causal mask gives each position
#    a different set of keys. Keeping the last token and shuffling the rest: with 1 layer the last output is
#    unchanged (to about $10^{-7}$), since its query is the same and it sees the same *set* of keys and values; with 2
#    layers it changes (by about 0.6 in our run), because the first layer's outputs at earlier positions already
#    depend on the order. That order information is what lets some decoders work without positional encodings.
