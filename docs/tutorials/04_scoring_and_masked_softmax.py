# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 04 · Scoring functions and the masked softmax
#
# Tutorial 03 used one fixed way to compare a query with a key: the negative squared distance. Attention in
# general is
#
# $$\mathrm{attention}(q, (k_1, v_1), \dots, (k_m, v_m)) = \sum_{i=1}^m \alpha(q, k_i)\, v_i,\qquad
#   \alpha(q, k_i) = \mathrm{softmax}_i\, a(q, k_i),$$
#
# and the **scoring function** $a$ is where the classic variants differ. hf-attention implements four
# (`attention_score=`): the scaled dot product $q^\top k/\sqrt d$ (Vaswani et al. 2017), the plain dot product
# (T5, Raffel et al. 2020), the additive score $w^\top \tanh(W_q q + W_k k)$ (Bahdanau et al. 2015) and the
# Gaussian kernel of tutorial 03. This tutorial runs two of them on the toy tensors of d2l.ai §11.3 and on distinct
# keys, shows how padding is hidden from the softmax, measures why the dot product is divided by $\sqrt d$, and
# measures what a bilinear score $q^\top k = x_i^\top W_q W_k^\top x_j$ of head width $d_k$ can express.

# %%
import math
from types import SimpleNamespace

import torch
from tutorial_support import Report, parse_args, plt, save_figure, table

from hf_attention.modeling.attention import MultiHeadAttention, eager_attention_forward
from hf_attention.modeling.masks import padding_mask
from hf_attention.modeling.scores import AdditiveScore, make_score

args = parse_args("Additive vs scaled dot-product scores, masked softmax, and the 1/sqrt(d) scaling.")
report = Report(args, "04")
torch.manual_seed(0)

# %% [markdown]
# ## Calling the eager backend directly
#
# Every hf-attention layer ends in a *backend*: `eager_attention_forward(module, q, k, v, mask, scaling=...)` computes
# scores, masks them, takes the softmax and the weighted sum, and returns the output and the weights. Shapes are
# (batch, heads, length, width). Here a plain namespace stands in for the layer that calls it (what the backend reads
# from that layer: see the appendix).


# %%
def attend(score, query, key, value, mask=None, scaling=1.0):
    """hf-attention's eager backend on (B, H, T, D) tensors; returns output (B, T, H, Dv) and weights (B, H, T, S)."""
    caller = SimpleNamespace(score=score, is_causal=False, training=False)
    return eager_attention_forward(caller, query, key, value, mask, scaling=scaling)


# %% [markdown]
# ## The toy example: two sequences, ten keys, different valid lengths
#
# A batch of 2; each has one query and 10 key–value pairs. Only the first 2 keys of sequence 0 and the first 6 of
# sequence 1 are real (the rest is padding). All keys are equal (ones), so every real key scores the same and
# the answer is the *mean of the valid values*: $(2, 3, 4, 5)$ and $(10, 11, 12, 13)$, whatever the weights of
# the scoring function are. That makes it a good test of the masking.
#
# **Valid lengths → a boolean mask.** The classic code passes `valid_lens = [2, 6]` to a `masked_softmax`.
# hf-attention takes masks instead: True where a query may attend. From valid lengths, build the 0/1 padding row
# a tokenizer would return and let `hf_attention.modeling.masks.padding_mask` shape it for every head and query.

# %%
keys = torch.ones(2, 10, 2)
values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)
valid_lens = torch.tensor([2, 6])
token_mask = (torch.arange(10)[None, :] < valid_lens[:, None]).long()  # (2, 10): 1 = real token, 0 = padding
mask = padding_mask(token_mask)  # (2, 1, 1, 10) bool, broadcast over heads and queries
print(token_mask)

# %% [markdown]
# ### Additive attention: queries and keys of different widths
#
# Bahdanau's score maps the query and the key into a common space of width $h$ and adds them:
# $a(q, k) = w_v^\top \tanh(W_q q + W_k k)$, with $W_q \in \mathbb R^{h\times 20}$ and
# $W_k \in \mathbb R^{h\times 2}$ here. Because of the two projections, $q$ and $k$ need not have the same width.
# To run the toy unchanged we give hf-attention's `AdditiveScore` a 20 → 8 query projection; its `forward` is the
# library's (why the library's score needs one: see the appendix).

# %%
additive = AdditiveScore(head_dim=2, attention_dim=8)  # key 2 → 8, energy 8 → 1
additive.query_proj = torch.nn.Linear(20, 8, bias=False)  # query 20 → 8
queries_20 = torch.normal(0, 1, (2, 1, 20))
with torch.no_grad():
    out_additive, weights_additive = attend(additive, queries_20[:, None], keys[:, None], values[:, None], mask)
print(out_additive[:, :, 0])

# %% [markdown]
# ### Scaled dot product: queries and keys of the same width
#
# $a(q, k) = q^\top k / \sqrt d$ has no parameters and needs $q$ and $k$ of the same width $d$.
# `make_score("scaled_dot", ...)` returns no module, only the factor $1/\sqrt d$: the backend does the product.

# %%
no_module, scaling = make_score("scaled_dot", num_heads=1, head_dim=2)
queries_2 = torch.normal(0, 1, (2, 1, 2))
out_dot, weights_dot = attend(no_module, queries_2[:, None], keys[:, None], values[:, None], mask, scaling)
print(out_dot[:, :, 0])
report["additive_output"] = out_additive[:, 0, 0]
report["dot_output"] = out_dot[:, 0, 0]
report["toy_weights_row_sums"] = weights_dot.sum(-1).flatten()
report["toy_weights_additive"] = weights_additive[:, 0, 0]  # (sequence, key)
report["toy_weights_dot"] = weights_dot[:, 0, 0]

# %% [markdown]
# Both give the means of the valid values, and both put weight $1/2$ on each of the two real keys of sequence 0
# and $1/6$ on the six of sequence 1: the padded keys get exactly 0.
#
# ### Where the two scores differ: distinct keys of different norms
#
# Equal keys hide the differences between the scores: both panels of the toy would be the same. Give one query of
# width 8 ten distinct random keys (of norms 2.0 to 3.4), score them with an `AdditiveScore` (random weights, as at
# initialisation) and with the scaled dot product, and multiply the query and the keys by a common factor $c$ to
# change their norms.

# %%
distinct_width, distinct_keys = 8, 10
norm_scales = [0.25, 0.5, 1, 2, 4, 8, 16, 32, 64]
with torch.random.fork_rng():  # its own random numbers: the sections after it draw what they drew before
    torch.manual_seed(5)
    additive_8 = AdditiveScore(head_dim=distinct_width)  # query and key 8 → 8, energy 8 → 1
    query_8, keys_8 = torch.randn(distinct_width), torch.randn(distinct_keys, distinct_width)
_, scaling_8 = make_score("scaled_dot", num_heads=1, head_dim=distinct_width)
by_scale = []
for factor in norm_scales:
    query_c, keys_c = (factor * query_8)[None, None, None], (factor * keys_8)[None, None]
    with torch.no_grad():
        _, w_additive = attend(additive_8, query_c, keys_c, keys_c)
    _, w_dot = attend(None, query_c, keys_c, keys_c, scaling=scaling_8)
    by_scale.append({"scale": factor, "additive": w_additive[0, 0, 0].tolist(), "dot": w_dot[0, 0, 0].tolist()})
# |wᵀ tanh(·)| ≤ ‖w‖₁ whatever q and k: no key can score more than ‖w‖₁ above -‖w‖₁ of the nine others
energy_l1 = additive_8.energy.weight.abs().sum().item()
report["distinct_keys"] = {
    "width": distinct_width,
    "keys": distinct_keys,
    "key_norms": keys_8.norm(dim=-1).tolist(),
    "by_scale": by_scale,
    "additive_energy_l1": energy_l1,
    "additive_largest_weight_possible": math.exp(energy_l1)
    / (math.exp(energy_l1) + (distinct_keys - 1) * math.exp(-energy_l1)),
}
print(
    table(
        [
            (
                r["scale"],
                f"{max(r['additive']):.3f}",
                max(range(distinct_keys), key=r["additive"].__getitem__),
                f"{max(r['dot']):.3f}",
                max(range(distinct_keys), key=r["dot"].__getitem__),
            )
            for r in by_scale
        ],
        ("c", "additive: largest weight", "on key", "scaled dot: largest weight", "on key"),
    )
)
ceiling = report["distinct_keys"]["additive_largest_weight_possible"]
print(f"additive scores stay within ±‖w‖₁ = ±{energy_l1:.2f}: no weight above {ceiling:.2f}")

figure, axes = plt.subplots(1, 2, figsize=(11, 3.4))
at_one = next(r for r in by_scale if r["scale"] == 1)
positions_8 = torch.arange(distinct_keys)
axes[0].bar(positions_8 - 0.2, at_one["additive"], width=0.4, label="additive")
axes[0].bar(positions_8 + 0.2, at_one["dot"], width=0.4, label="scaled dot")
axes[0].set_xlabel("key")
axes[0].set_ylabel("weight")
axes[0].set_title("One query, ten distinct keys (c = 1)", fontsize=10)
axes[0].legend(fontsize=8)
for name in ("additive", "dot"):
    axes[1].semilogx(
        norm_scales, [max(r[name]) for r in by_scale], "o-", label="scaled dot" if name == "dot" else name
    )
axes[1].axhline(
    report["distinct_keys"]["additive_largest_weight_possible"], color="k", ls=":", label="additive's ceiling"
)
axes[1].axhline(1 / distinct_keys, color="0.6", ls="--", label="uniform")
axes[1].set_xlabel("common factor c on the query and the keys")
axes[1].set_ylabel("largest weight")
axes[1].set_title("Norms up: the dot product sharpens, the additive score saturates", fontsize=10)
axes[1].legend(fontsize=8)
save_figure(
    figure,
    args.figures,
    "04_additive_vs_dot",
    scales=norm_scales,
    additive=[r["additive"] for r in by_scale],
    dot=[r["dot"] for r in by_scale],
)

# %% [markdown]
# The two rows differ already at $c = 1$: the scaled dot product puts 0.353 of the weight on key 4, the additive
# score 0.160. Norms act on them differently. Multiplying $q$ and the keys by $c$ multiplies each dot product by
# $c^2$: the keys keep their order (key 4 first at each of the 9 factors) and the weights sharpen without limit, from
# 0.110 at $c = 0.25$ to 1.000 from $c = 4$ on. The additive score passes $W_q q + W_k k$ through a tanh, so its
# scores stay within $\pm\lVert w\rVert_1 = \pm 1.59$ whatever the norms: no weight can exceed 0.73 among ten keys,
# the largest is 0.210 at $c = 64$, and the top key changes (key 4 up to $c = 2$, key 2 from $c = 4$ on) as the tanh
# saturates for each key in turn. The dot product's sharpness is set by the norms of the query and the keys; the
# additive score's is capped by its own weights $w$, which training can make larger.
#
# ## Masked softmax: the library's way and the classic way, side by side
#
# The classic `masked_softmax(X, valid_lens)` (d2l.ai §11.3) writes $-10^6$ into the masked scores and takes a
# softmax. hf-attention's eager backend fills masked scores with the dtype's most negative finite number, takes
# the softmax in at least float32, and then sets masked weights to exactly 0. On random scores with valid
# lengths $[2, 3]$ (one per sequence), and with per-query valid lengths $[[1, 3], [2, 4]]$:

# %%
scores = torch.rand(2, 2, 4)


def d2l_masked_softmax(x, valid_lens):
    """The classic version (d2l.ai §11.3), for comparison: valid lengths per sequence (B,) or per query (B, T);
    -1e6 is written into the scores past the valid length, then a plain softmax. The fill value is cast to the scores'
    dtype first, as older torch releases did when writing it: torch 2.15 refuses to write -1e6 into float16 at all."""
    if valid_lens.dim() == 1:
        valid_lens = valid_lens[:, None].expand(x.shape[:2])
    past_valid = torch.arange(x.shape[-1])[None, None, :] >= valid_lens[:, :, None]
    return torch.softmax(x.masked_fill(past_valid, torch.tensor(-1e6).to(x.dtype)), dim=-1)


def library_masked_softmax(x, mask):
    """The eager backend's masking and softmax applied to the given scores x (B, T, S): its score module returns x."""
    batch, queries, keys_ = x.shape
    empty = x.new_zeros(batch, 1, max(queries, keys_), 1)
    _, weights = attend(
        lambda query, key: x[:, None], empty[:, :, :queries], empty[:, :, :keys_], empty[:, :, :keys_], mask
    )
    return weights[:, 0]


per_sequence = torch.tensor([2, 3])
mask_sequence = padding_mask((torch.arange(4)[None] < per_sequence[:, None]).long())  # (2, 1, 1, 4)
per_query = torch.tensor([[1, 3], [2, 4]])
mask_query = (torch.arange(4)[None, None, :] < per_query[:, :, None])[:, None]  # (2, 1, 2, 4): one row per query

library_1 = library_masked_softmax(scores, mask_sequence)
library_2 = library_masked_softmax(scores, mask_query)
print("valid lengths [2, 3]:\n", library_1)
print("valid lengths [[1, 3], [2, 4]]:\n", library_2)
report["masked_softmax_max_abs_vs_classic"] = max(
    (library_1 - d2l_masked_softmax(scores, per_sequence)).abs().max().item(),
    (library_2 - d2l_masked_softmax(scores, per_query)).abs().max().item(),
)

# %% [markdown]
# Where some key is valid, they agree to float rounding. They differ, on purpose, where **no key is valid**:
# a padded query in a left-padded batch, or an empty source. With valid length 0 the classic softmax sees equal
# scores ($-10^6$ everywhere) and returns a *uniform* row: the padding is averaged in as if it were real.
# hf-attention returns a row of zeros, so such a query contributes nothing. And in float16, $-10^6$ is not
# representable: cast to float16 it becomes $-\infty$, and a softmax over a row of $-\infty$ is NaN (torch 2.15 goes
# further and refuses to write the number $-10^6$ into a float16 tensor: an error instead of a silent NaN).

# %%
zero_valid = torch.tensor([0, 3])
mask_zero = padding_mask((torch.arange(4)[None] < zero_valid[:, None]).long())
classic_zero = d2l_masked_softmax(scores, zero_valid)
library_zero = library_masked_softmax(scores, mask_zero)
classic_half = d2l_masked_softmax(scores.half(), zero_valid)
library_half = library_masked_softmax(scores.half(), mask_zero)
print("classic, valid length 0:", classic_zero[0, 0])
print("library, valid length 0:", library_zero[0, 0])
print("classic in float16:     ", classic_half[0, 0])
print("library in float16:     ", library_half[0, 0])
report["classic_empty_row"] = classic_zero[0, 0]
report["library_empty_row"] = library_zero[0, 0]
report["classic_float16_empty_row_is_nan"] = bool(classic_half[0, 0].isnan().all())
report["library_float16_empty_row"] = library_half[0, 0].float()

# %%
figure, axes = plt.subplots(1, 3, figsize=(11, 2.8))
sequences = ["sequence 0", "sequence 1"]
panels = (
    (weights_dot[:, 0, 0], "additive = scaled dot (equal keys), lengths [2, 6]", sequences),
    (library_2.reshape(4, 4), "library, lengths [[1, 3], [2, 4]]", ["s0 q0", "s0 q1", "s1 q0", "s1 q1"]),
    (torch.stack([classic_zero[0, 0], library_zero[0, 0]]), "valid length 0", ["classic", "library"]),
)
for axis, (weights, title, rows) in zip(axes, panels, strict=True):
    image = axis.imshow(weights.detach(), cmap="Blues", vmin=0, vmax=1, aspect="auto")
    axis.set_title(title, fontsize=9)
    axis.set_xlabel("keys")
    axis.set_xticks(range(weights.shape[1]))
    axis.set_yticks(range(len(rows)), rows, fontsize=8)
figure.colorbar(image, ax=axes, shrink=0.8)
save_figure(
    figure,
    args.figures,
    "04_masked_softmax",
    additive=weights_additive[:, 0, 0].detach(),
    dot=weights_dot[:, 0, 0],
    per_query=library_2,
    classic_empty=classic_zero[0, 0],
    library_empty=library_zero[0, 0],
)

# %% [markdown]
# ## The sign of $q^\top k$: towards, orthogonal, away
#
# A positive $q^\top k$ says the key points the query's way, 0 that it is orthogonal, a negative one that it points
# away. The softmax turns that into weights: a key at score $+s$ gets $e^{s/\sqrt d}$ times the weight of an
# orthogonal key, one at $-s$ gets $e^{-s/\sqrt d}$ times it, so the key at $-s$ gets $e^{-2s/\sqrt d}$ times the
# weight of the key at $+s$. Only differences of scores matter: add the same vector to each key and each score moves
# by the same amount, and the weights do not move. Measured with the backend on one query of width $d = 16$ and 8 keys:
# orthogonal ones, plus one at $q^\top k = -4$, one at $+4$, or both ($\pm 1$ after the scaling).

# %%
sign_width, sign_keys, sign_dot = 16, 8, 4.0
draw = torch.Generator().manual_seed(4)  # its own random numbers: the sections after it draw what they drew before
sign_query = torch.randn(sign_width, dtype=torch.float64, generator=draw)
direction = sign_query / sign_query.norm()
along = direction * sign_dot / sign_query.norm()  # sign_query · along = sign_dot
orthogonal_keys = torch.randn(sign_keys, sign_width, dtype=torch.float64, generator=draw)
orthogonal_keys -= (orthogonal_keys @ direction)[:, None] * direction  # every score 0
_, sign_scaling = make_score("scaled_dot", num_heads=1, head_dim=sign_width)


def sign_weights(keys_):
    """The backend's weights of sign_query over these keys (values do not matter for the weights)."""
    _, weights = attend(None, sign_query[None, None, None], keys_[None, None], keys_[None, None], scaling=sign_scaling)
    return weights[0, 0, 0]


away, towards, both = orthogonal_keys.clone(), orthogonal_keys.clone(), orthogonal_keys.clone()
away[0] -= along  # score -s, the other seven 0
towards[0] += along  # score +s
both[0] += along
both[1] -= along  # +s, -s and six orthogonal keys
w_away, w_towards, w_both = sign_weights(away), sign_weights(towards), sign_weights(both)
w_shifted = sign_weights(both - along)  # every score moved down by s: now 0, -2s and six at -s
report["sign_settings"] = {"width": sign_width, "keys": sign_keys, "dot": sign_dot}
report["sign_uniform"] = 1 / sign_keys
report["sign_scaled_score"] = sign_dot * sign_scaling
report["sign_away"] = {"key": w_away[0].item(), "orthogonal": w_away[1].item()}
report["sign_towards"] = {"key": w_towards[0].item(), "orthogonal": w_towards[1].item()}
report["sign_both"] = {"towards": w_both[0].item(), "away": w_both[1].item(), "orthogonal": w_both[2].item()}
report["sign_away_over_towards"] = (w_both[1] / w_both[0]).item()
report["sign_away_over_towards_formula"] = math.exp(-2 * sign_dot * sign_scaling)
report["sign_towards_over_orthogonal"] = (w_both[0] / w_both[2]).item()
report["sign_shifted_max_difference"] = (w_shifted - w_both).abs().max().item()
print(
    table(
        [
            ("one key at -s, 7 orthogonal", f"{w_away[0]:.4f}", f"{w_away[1]:.4f}", ""),
            ("one key at +s, 7 orthogonal", f"{w_towards[0]:.4f}", f"{w_towards[1]:.4f}", ""),
            ("+s, -s and 6 orthogonal", f"{w_both[0]:.4f}", f"{w_both[2]:.4f}", f"{w_both[1]:.4f}"),
        ],
        ("keys", "weight of the key at ±s (+s in the last row)", "orthogonal key", "key at -s"),
    )
)
print(
    f"away / towards = {report['sign_away_over_towards']:.6f}, e^(-2s/sqrt d) = "
    f"{report['sign_away_over_towards_formula']:.6f}; all scores shifted by -s: weights change by "
    f"{report['sign_shifted_max_difference']:.1e}"
)

# %% [markdown]
# With uniform weights at 1/8 = 0.125, the key pointing away gets 0.050 (the orthogonal ones 0.136 each) and the key
# pointing towards the query 0.280 (the orthogonal ones 0.103). With both in one row, the key away gets 0.135 of the
# weight of the key towards ($e^{-2} = 0.135$), and the key towards 2.718 times the weight of an orthogonal key
# ($e^1$).
#
# The orthogonal keys are now below uniform too (0.110): above or below uniform is relative to the other keys
# of the row. Shift each score down by $s$, so that the best key scores 0 and the others are negative, and the
# weights move by less than $10^{-16}$ (float64 rounding). A negative score is not a small weight; a score *lower than
# the others* is.
#
# ## Why divide by $\sqrt d$?
#
# If the entries of $q$ and $k$ are independent with mean 0 and variance 1, each product $q_j k_j$ has mean 0 and
# variance $E[q_j^2]E[k_j^2] = 1$, and the $d$ products are independent, so
#
# $$\mathrm{Var}(q^\top k) = d, \qquad \mathrm{Var}\!\left(q^\top k/\sqrt d\right) = 1.$$
#
# Unscaled, the scores spread out as $\sqrt d$; the softmax of widely spread scores puts almost the whole weight on
# the largest one (it *saturates*), and a saturated softmax passes almost no gradient: its Jacobian
# $\mathrm{diag}(p) - pp^\top$ is 0 when $p$ is one-hot. Measured: sample many $q, k$ and look at the variance of
# the scores, then run the backend with `scaling=1` ("dot") and `scaling=1/sqrt(d)` ("scaled_dot") over 32 keys
# and look at the entropy of the weights (uniform: $\ln 32 = 3.47$ nats; one-hot: 0) and at the size of the
# softmax Jacobian.

# %%
widths = [4, 16, 64, 256, 1024]
samples = 4000 if args.quick else 20000
n_keys = 32
measured = []
for d in widths:
    q, k = torch.randn(samples, d), torch.randn(samples, d)
    dots = (q * k).sum(-1)
    _, scale = make_score("scaled_dot", num_heads=1, head_dim=d)
    row = {"d": d, "var_unscaled": dots.var().item(), "var_scaled": (dots * scale).var().item()}
    query, key = torch.randn(1, 1, 256, d), torch.randn(1, 1, n_keys, d)
    for name in ("dot", "scaled_dot"):
        _, factor = make_score(name, num_heads=1, head_dim=d)
        _, p = attend(None, query, key, key, scaling=factor)  # (1, 1, 256 queries, 32 keys)
        entropy = -(p * p.clamp_min(1e-30).log()).sum(-1).mean().item()
        jacobian = torch.diag_embed(p) - p[..., :, None] * p[..., None, :]  # d softmax / d scores, per query
        row[f"entropy_{name}"] = entropy
        row[f"max_weight_{name}"] = p.max(-1).values.mean().item()
        row[f"jacobian_{name}"] = jacobian.flatten(-2).norm(dim=-1).mean().item()
    measured.append(row)

print(
    table(
        [
            (
                r["d"],
                f"{r['var_unscaled']:.1f}",
                f"{r['var_scaled']:.3f}",
                f"{r['entropy_dot']:.2f}",
                f"{r['entropy_scaled_dot']:.2f}",
                f"{r['jacobian_dot']:.3f}",
                f"{r['jacobian_scaled_dot']:.3f}",
            )
            for r in measured
        ],
        ("d", "Var(q.k)", "Var(q.k/sqrt d)", "entropy dot", "entropy scaled", "|J| dot", "|J| scaled"),
    )
)
report["variance"] = measured
report["ln_keys"] = math.log(n_keys)

# %% [markdown]
# The variance grows in step with $d$ unscaled and stays at 1 scaled, as the argument says. Scaled, the entropy stays
# near $\ln 32 - \tfrac12$ and the Jacobian near 0.24 for every width. Unscaled, the entropy and the Jacobian both
# fall steadily, but the Jacobian does *not* start below the scaled one: at $d = 4$ and $16$ it is 0.30, larger than
# the scaled 0.24, and only from $d = 64$ on is it below it (0.20, 0.11, 0.07 at $d = 64, 256, 1024$). The reason is
# that the size of
# $\mathrm{diag}(p) - pp^\top$ is not monotone in the spread of the scores. Its squared Frobenius norm is
# $\sum_i p_i^2 - 2\sum_i p_i^3 + (\sum_i p_i^2)^2$: for equal weights on $m$ keys that is $(m-1)/m^2$, so the norm
# itself (what the table and the figure show) is $\sqrt{m-1}/m$: $\sqrt{31}/32 \approx 0.17$ for all 32 keys, larger
# as the weight concentrates on fewer keys (0.5 for two, whose squared norm is 0.25), and 0 only at one key. So the
# Jacobian is largest at a *moderate* spread and vanishes only when the softmax saturates. Measured on the Jacobian
# itself, for equal weights on $m$ of the 32 keys:

# %%
equal_weights = []
for m in range(1, n_keys + 1):
    p = torch.zeros(n_keys, dtype=torch.float64)
    p[:m] = 1 / m  # equal weights on m keys, none on the others
    jacobian = torch.diag_embed(p) - p[:, None] * p[None, :]
    norm = jacobian.norm().item()
    equal_weights.append({"m": m, "squared_norm": norm**2, "norm": norm, "formula": math.sqrt(m - 1) / m})
report["jacobian_equal_weights"] = equal_weights
shown = (1, 2, 3, 4, 8, 32)
print(
    table(
        [(r["m"], f"{r['squared_norm']:.4f}", f"{r['norm']:.4f}") for r in equal_weights if r["m"] in shown],
        ("m keys", "squared norm (m-1)/m²", "norm sqrt(m-1)/m"),
    )
)

# %% [markdown]
# The norm peaks at two keys and falls slowly after them (0.47 at three, 0.43 at four, 0.33 at eight). To see the whole
# curve of the Jacobian against the spread, keep $d = 64$ and vary the scores' standard deviation $\sigma$ through the
# backend's `scaling` ($\sigma = $ `scaling` $\cdot \sqrt d$); the widths of the table sit on it at $\sigma = \sqrt d$
# (unscaled) and $\sigma = 1$ (scaled).

# %%
sweep_d = 64
spreads = torch.logspace(-1, math.log10(64), 25).tolist()  # σ from 0.1 to 64
query, key = torch.randn(1, 1, 256, sweep_d), torch.randn(1, 1, n_keys, sweep_d)
jacobian_by_spread = []
for sigma in spreads:
    _, p = attend(None, query, key, key, scaling=sigma / math.sqrt(sweep_d))
    jacobian = torch.diag_embed(p) - p[..., :, None] * p[..., None, :]
    jacobian_by_spread.append(jacobian.flatten(-2).norm(dim=-1).mean().item())
peak = max(range(len(spreads)), key=jacobian_by_spread.__getitem__)
report["jacobian_sweep_sigma"] = spreads
report["jacobian_sweep"] = jacobian_by_spread
report["jacobian_peak_sigma"] = spreads[peak]
report["jacobian_uniform_limit"] = math.sqrt(n_keys - 1) / n_keys
print(
    f"softmax Jacobian over {n_keys} keys: {jacobian_by_spread[0]:.3f} at sigma = {spreads[0]:.1f} (uniform limit "
    f"sqrt({n_keys - 1})/{n_keys} = {report['jacobian_uniform_limit']:.3f}), largest {max(jacobian_by_spread):.3f} "
    f"at sigma = {spreads[peak]:.1f}, {jacobian_by_spread[-1]:.3f} at sigma = {spreads[-1]:.0f}"
)

# %% [markdown]
# The curve rises from the uniform value, peaks at a spread of about 2.5 (most of the weight on a few keys), and falls
# towards 0 as one key takes the whole weight. Unscaled scores at $d = 4$ and $16$ ($\sigma = 2, 4$) land near the
# peak, which is why their Jacobian beats the scaled one there; from $d = 64$ ($\sigma = 8$) they are on the falling
# side, and each quadrupling of $d$ (doubling of $\sigma$) takes them further down, so the query and key projections
# get less and less learning signal just where real models live (64 or 128 per head). The argument for $1/\sqrt d$ is
# therefore not that unscaled gradients are smaller, but that without it the spread, the entropy and the gradient each
# depend on the head width and, at practical widths, the softmax is on its way to saturation; scaled, $\sigma = 1$ at
# every width, on the rising side of the peak with well-spread weights. (Trained weights are not independent unit
# Gaussians, so real scores are not exactly unit-variance; the scaling keeps them in the right range at initialisation,
# which is what lets training start.)

# %%
figure, axes = plt.subplots(1, 4, figsize=(17, 3.6))
d_values = [r["d"] for r in measured]
axes[0].loglog(d_values, [r["var_unscaled"] for r in measured], "o-", label="q.k")
axes[0].loglog(d_values, [r["var_scaled"] for r in measured], "o-", label="q.k / sqrt(d)")
axes[0].loglog(d_values, d_values, "k:", label="d")
axes[0].set_xlabel("width d")
axes[0].set_title("Variance of the scores")
axes[0].legend()
for name, label in (("dot", "dot (unscaled)"), ("scaled_dot", "scaled dot")):
    axes[1].semilogx(d_values, [r[f"entropy_{name}"] for r in measured], "o-", label=label)
    axes[2].semilogx(d_values, [r[f"jacobian_{name}"] for r in measured], "o-", label=label)
axes[1].axhline(math.log(n_keys), color="k", ls=":", label="uniform, ln 32")
axes[1].set_xlabel("width d")
axes[1].set_title("Entropy of the weights (nats)")
axes[1].legend()
axes[2].set_xlabel("width d")
axes[2].set_title("Size of the softmax Jacobian")
axes[2].legend()
axes[3].semilogx(spreads, jacobian_by_spread, "k-", label=f"d = {sweep_d}, scores of std sigma")
axes[3].semilogx(
    [math.sqrt(d) for d in d_values], [r["jacobian_dot"] for r in measured], "o", label="unscaled, sigma = sqrt d"
)
axes[3].semilogx([1.0], [measured[0]["jacobian_scaled_dot"]], "o", label="scaled, sigma = 1")
for r in measured:
    axes[3].annotate(
        f"d={r['d']}", (math.sqrt(r["d"]), r["jacobian_dot"]), fontsize=7, xytext=(4, 4), textcoords="offset points"
    )
axes[3].axhline(report["jacobian_uniform_limit"], color="k", ls=":", lw=0.8, label="uniform weights")
axes[3].set_xlabel("standard deviation sigma of the scores")
axes[3].set_title("Jacobian size against the spread")
axes[3].legend(fontsize=7)
save_figure(
    figure,
    args.figures,
    "04_scaling",
    d=d_values,
    var_unscaled=[r["var_unscaled"] for r in measured],
    var_scaled=[r["var_scaled"] for r in measured],
    entropy_dot=[r["entropy_dot"] for r in measured],
    entropy_scaled=[r["entropy_scaled_dot"] for r in measured],
    jacobian_dot=[r["jacobian_dot"] for r in measured],
    jacobian_scaled=[r["jacobian_scaled_dot"] for r in measured],
    sweep_sigma=spreads,
    sweep_jacobian=jacobian_by_spread,
)

# %% [markdown]
# ## What a bilinear score can express: the rank bound
#
# With learned projections, the scaled dot product of a layer scores the tokens $X$ ($n \times D$) against themselves
# as $X W_q W_k^\top X^\top/\sqrt{d_k}$: an $n \times n$ matrix of rank at most the head width $d_k$, whatever $X$.
# When $d_k < n$, some attention patterns are out of its reach (Bhojanapalli et al. 2020, *Low-rank bottleneck in
# multi-head attention models*). A score matrix learned directly, $A = X W_A$ with $W_A$ of size $D \times n$ (the
# dense Synthesizer of Tay et al. 2021), has no such bound, at the price of one output per key position: it cannot
# take another length, and what it scores is a position, not a key's content.
#
# Measured: $n = 32$ tokens of width $D = 64$ (random, fixed), and a target pattern whose every row is a softmax of 32
# random logits (their matrix has full rank). A one-head `MultiHeadAttention` with head width $d_k$ fits its
# $W_q, W_k$ to it, and so does the free score $X W_A$ through the same eager backend, each by minimising the mean
# Kullback–Leibler divergence from the target rows.

# %%
rank_tokens, rank_width = 32, 64
head_widths = [1, 2, 4, 8, 16, 32]
rank_steps = 150 if args.quick else 400
torch.manual_seed(2)
tokens_x = torch.randn(1, rank_tokens, rank_width)
target = torch.softmax(2 * torch.randn(rank_tokens, rank_tokens), dim=-1)  # rows of (query, key) weights to fit


def divergence_from_target(weights: torch.Tensor) -> torch.Tensor:
    """Mean over the queries of KL(target row ‖ fitted row)."""
    return (target * (target.log() - weights.clamp_min(1e-30).log())).sum(-1).mean()


def fit(parameters: list[torch.Tensor], weights_of) -> tuple[float, torch.Tensor]:
    """Adam on `parameters` for rank_steps steps; the final divergence and the fitted weights."""
    optimizer = torch.optim.Adam(parameters, lr=0.05)
    for _ in range(rank_steps):
        loss = divergence_from_target(weights_of())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        weights = weights_of()
    return divergence_from_target(weights).item(), weights


bilinear, fitted = [], {}
for head_width in head_widths:
    torch.manual_seed(3)
    layer = MultiHeadAttention(hidden_size=rank_width, num_heads=1, num_kv_heads=1, head_dim=head_width, bias=False)
    divergence, fitted[head_width] = fit(
        [layer.q_proj.weight, layer.k_proj.weight],
        lambda layer=layer: layer(tokens_x, output_attentions=True)[1][0, 0],
    )
    with torch.no_grad():  # the fitted scores X W_q W_kᵀ Xᵀ, in float64 so that their rank is read without doubt
        x64 = tokens_x[0].double()
        scores_64 = (x64 @ layer.q_proj.weight.double().T) @ (x64 @ layer.k_proj.weight.double().T).T
    bilinear.append(
        {
            "head_width": head_width,
            "parameters": layer.q_proj.weight.numel() + layer.k_proj.weight.numel(),
            "divergence": divergence,
            "score_rank": torch.linalg.matrix_rank(scores_64).item(),
        }
    )
torch.manual_seed(3)
free_score = torch.nn.Linear(rank_width, rank_tokens, bias=False)  # A = X W_A: one output per key position
no_width = torch.zeros(1, 1, rank_tokens, 1)  # queries, keys and values the score module ignores
free_divergence, fitted["free"] = fit(
    list(free_score.parameters()),
    lambda: attend(lambda query, key: free_score(tokens_x)[:, None], no_width, no_width, no_width)[1][0, 0],
)
report["rank_setup"] = {"tokens": rank_tokens, "width": rank_width, "steps": rank_steps}
report["rank_target_logit_rank"] = torch.linalg.matrix_rank(target.double().log()).item()
report["rank_bilinear"] = bilinear
report["rank_free"] = {"parameters": free_score.weight.numel(), "divergence": free_divergence}
report["rank_uniform_divergence"] = divergence_from_target(torch.full_like(target, 1 / rank_tokens)).item()
print(
    table(
        [(r["head_width"], r["parameters"], r["score_rank"], f"{r['divergence']:.3f}") for r in bilinear]
        + [("free A = X W_A", free_score.weight.numel(), "", f"{free_divergence:.4f}")],
        ("d_k", "parameters", "rank of the scores", "KL(target ‖ fit)"),
    )
)
print(f"uniform weights: KL {report['rank_uniform_divergence']:.3f}")

figure, axes = plt.subplots(1, 4, figsize=(16, 3.4))
axes[0].semilogx(head_widths, [r["divergence"] for r in bilinear], "o-", base=2, label="bilinear X W_q W_kᵀ Xᵀ")
axes[0].axhline(free_divergence, color="C1", label="free A = X W_A")
axes[0].axhline(report["rank_uniform_divergence"], color="k", ls=":", label="uniform weights")
axes[0].set_xlabel("head width d_k (rank bound of the scores)")
axes[0].set_ylabel("KL(target ‖ fit), nats")
axes[0].set_title("Fitting a 32 × 32 pattern", fontsize=10)
axes[0].legend(fontsize=8)
for axis, (name, weights) in zip(
    axes[1:], [("target", target), ("bilinear, d_k = 4", fitted[4]), ("bilinear, d_k = 16", fitted[16])], strict=True
):
    axis.imshow(weights.detach(), cmap="Blues", vmin=0, vmax=target.max().item(), interpolation="nearest")
    axis.set_title(name, fontsize=10)
    axis.set_xlabel("key")
axes[1].set_ylabel("query")
save_figure(
    figure,
    args.figures,
    "04_rank",
    head_widths=head_widths,
    divergence=[r["divergence"] for r in bilinear],
    free_divergence=free_divergence,
    target=target,
    fit_4=fitted[4].detach(),
    fit_16=fitted[16].detach(),
)

# %% [markdown]
# The fitted bilinear scores have rank $d_k$ exactly at each of the 6 widths (read off in float64), and the
# divergence falls at each step up in $d_k$: 1.045 nats at $d_k = 1$ (uniform weights: 1.411), 0.359 at $d_k = 4$,
# 0.020 at $d_k = 16$ and 0.002 at $d_k = n = 32$, where the bound no longer binds. The free score reaches 2.8e-5
# with 2,048 parameters, as many as the bilinear score has at $d_k = 16$ ($2 \cdot 64 \cdot 16$). In real models
# $d_k$ is 64 or 128 and a sequence has thousands of tokens, so the bound holds for every head; Bhojanapalli et al.
# propose to set the head width from the sequence length rather than by dividing the model width among the heads.
#
# ## Summary
#
# * The score is the only part that differs between classic attention variants; masking, softmax and the weighted
#   sum are shared (in hf-attention: one backend, a pluggable `score` module).
# * Masks are boolean, True = may attend. Valid lengths become a mask through a comparison with `arange` and
#   `hf_attention.modeling.masks.padding_mask`; a row with no valid key gives zeros, never a uniform row or NaN.
# * Unscaled dot products grow with the width and saturate the softmax; dividing by $\sqrt d$ keeps the scores at
#   unit variance. T5 (`attention_score="dot"`) omits the factor and relies on its initialisation instead.
# * A dot product sharpens when its query and keys are scaled up; an additive score is bounded by its weights.
# * With learned projections, a head's scores over $n$ tokens have rank at most $d_k$: below $n$, some patterns are
#   out of reach (measured on a dense one), whereas a free score matrix $X W_A$ fits it but is tied to one length.
#
# **Next:** [05 · positional encodings](05_positional_encodings.py).
#
# ## Exercises
#
# 1. In the toy example, replace the equal keys by random ones (`keys = torch.randn(2, 10, 2)`). Are the outputs still
#    the means of the valid values? What still holds, whatever the keys?
# 2. Run the classic `d2l_masked_softmax` on a row with valid length 0 in `torch.bfloat16` instead of float16. NaN or
#    not, and why does it differ from float16?
# 3. Build the mask "query $i$ may see keys $0 \dots i$" for 4 queries and 4 keys with the same `arange` comparison
#    used for valid lengths, and compare it with `hf_attention.modeling.masks.causal_mask(4, 4, 0,
#    torch.device("cpu"))`.
# 4. The scaled entropy sits near $\ln 32 - \tfrac12$. Set `n_keys` to 8 and to 128 and look at the gap
#    $\ln n - H$ of the scaled rows. What does it tend to, and why?
# 5. In the sweep, where is the peak of the Jacobian for `n_keys = 8`? Predict first from the formula for $m$ equal
#    weights.

# %% [markdown]
# ## Answers
#
# 1. No: with different keys the real keys get different weights, so the output is a weighted mean of the valid
#    values rather than their plain mean. What still holds is the masking: the padded keys get weight exactly 0, each
#    row sums to 1, and every output is a convex combination of the *valid* values only.
# 2. A uniform row (0.25 each), not NaN: bfloat16 has float32's exponent range, so $-10^6$ is representable (rounded
#    to $-999424$) and the softmax sees four equal scores. float16's largest magnitude is 65504, so there $-10^6$
#    becomes $-\infty$ and $\infty - \infty$ makes NaN. Either way the classic version averages padding in; the
#    library returns zeros.
# 3. `torch.arange(4)[None, :] <= torch.arange(4)[:, None]` is the lower triangle, identical to `causal_mask(...)[0,
#    0]`: a causal mask is a per-query valid length of $i + 1$.
# 4. The gap, averaged over the five widths, is about 0.33 for 8 keys, 0.46 for 32 and 0.48 for 128 (measured in the
#    last cell; it moves a little with the random draw): it tends to $\sigma^2/2 = 1/2$ from below. For scores
#    $s_i \sim N(0, \sigma^2)$ and many keys, $\sum_i e^{s_i} \approx n\,e^{\sigma^2/2}$ and the softmax-weighted
#    mean score is $\sigma^2$, so $H = \ln \sum_i e^{s_i} - \sum_i p_i s_i \approx \ln n - \sigma^2/2$.
# 5. At a smaller spread, about $\sigma \approx 1.1$ (instead of 2.5), with a larger peak, about 0.36: with 8 keys
#    a smaller spread already puts most of the weight on a few of them, where the norm $\sqrt{m-1}/m$ of
#    equal weights is largest (0.5 at $m = 2$, 0.47 at $m = 3$). The uniform starting value is higher too,
#    $\sqrt 7/8 \approx 0.33$: with few keys even uniform weights pass a sizeable gradient, and the scaled scores
#    ($\sigma = 1$) sit almost at the peak.


# %%
# The numbers answers 4 and 5 quote, measured as the exercises ask (the cells above use 32 keys).
def scaled_entropy_gap(count: int) -> float:
    """ln(count) - the mean entropy of scaled rows over `count` keys, averaged over the widths of the table."""
    gaps = []
    for width in widths:
        query, key = torch.randn(1, 1, 256, width), torch.randn(1, 1, count, width)
        _, p = attend(None, query, key, key, scaling=width**-0.5)
        gaps.append(math.log(count) + (p * p.clamp_min(1e-30).log()).sum(-1).mean().item())
    return sum(gaps) / len(gaps)


def jacobian_peak(count: int) -> tuple[float, float]:
    """(σ, size) of the largest mean softmax Jacobian over `count` keys in the sweep of σ at d = sweep_d."""
    query, key = torch.randn(1, 1, 256, sweep_d), torch.randn(1, 1, count, sweep_d)
    sizes = []
    for sigma in spreads:
        _, p = attend(None, query, key, key, scaling=sigma / math.sqrt(sweep_d))
        jacobian = torch.diag_embed(p) - p[..., :, None] * p[..., None, :]
        sizes.append(jacobian.flatten(-2).norm(dim=-1).mean().item())
    best = max(range(len(spreads)), key=sizes.__getitem__)
    return spreads[best], sizes[best]


torch.manual_seed(1)
report["answer_entropy_gap"] = {str(count): scaled_entropy_gap(count) for count in (8, 32, 128)}
report["answer_jacobian_peak_8_keys"] = jacobian_peak(8)
report["answer_uniform_limit_8_keys"] = math.sqrt(8 - 1) / 8
print("ln n - H of scaled rows:", {c: f"{g:.2f}" for c, g in report["answer_entropy_gap"].items()})
print("8 keys: Jacobian peak at sigma = {:.1f}, size {:.2f}".format(*report["answer_jacobian_peak_8_keys"]))
report.save()

# %% [markdown]
# ## Self-test
#
# a. In hf-attention, what weight does a padded key get, and what does a query with no valid key get back?
# b. Multiply a query and its keys by a common factor. What happens to the weights of the scaled dot product, and to
#    those of the additive score?
# c. Why is the dot product divided by $\sqrt d$, in one sentence?
# d. What limits the attention patterns a single head can produce, and what would lift the limit?

# %% [markdown]
# ### Self-test answers
#
# a. Exactly zero: the backend fills masked scores with the most negative finite number, takes the softmax and then
#    zeroes the masked weights. A query with no valid key gets a row of zeros (the classic $-10^6$ version returns a
#    uniform row, or NaN in float16).
# b. The dot products are multiplied by the factor squared: the keys keep their order and the weights sharpen towards
#    one-hot. The additive scores stay within $\pm\lVert w\rVert_1$, so the weights stop sharpening below a ceiling,
#    and the top key can change as the tanh saturates.
# c. So that the scores have unit variance at initialisation whatever the head width, instead of a spread of $\sqrt d$
#    that saturates the softmax and leaves it little gradient at practical widths.
# d. The scores $X W_q W_k^\top X^\top$ of a head have rank at most $d_k$; a free score matrix $X W_A$ has no such
#    bound but is tied to one length, and a head width of at least the sequence length lifts it too.

# %% [markdown]
# ## Appendix: what the backend reads from its layer, and how `AdditiveScore` is sized
#
# **The backend's caller.** The backend reads three things from the layer that calls it: its `score` module (`None`
# means "dot product times `scaling`"), whether it `is_causal`, and whether it is `training` (for dropout). A plain
# namespace with those attributes can therefore stand in for a layer, as in the cells above.
#
# **`AdditiveScore`'s projections.** hf-attention's `AdditiveScore` sizes both projections from one head width, since
# inside a multi-head layer the queries and keys have already been projected to that width by `q_proj` and `k_proj`
# (and a `MultiHeadAttention(hidden_size=20, kv_input_size=2, ...)` is how a layer takes streams of different widths).
# The toy's queries and keys have not been projected, hence the query projection the tutorial gives the score.
