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
# Gaussian kernel of tutorial 03. This tutorial runs two of them on the toy tensors of d2l.ai §11.3, shows how
# padding is hidden from the softmax, and measures why the dot product is divided by $\sqrt d$.

# %%
import math
from types import SimpleNamespace

import torch
from tutorial_support import Report, parse_args, plt, save_figure, table

from hf_attention.modeling.attention import eager_attention_forward
from hf_attention.modeling.masks import padding_mask
from hf_attention.modeling.scores import AdditiveScore, make_score

args = parse_args("Additive vs scaled dot-product scores, masked softmax, and the 1/sqrt(d) scaling.")
report = Report(args, "04")
torch.manual_seed(0)

# %% [markdown]
# ## Calling the eager backend directly
#
# Every hf-attention layer ends in a *backend*: `eager_attention_forward(module, q, k, v, mask, scaling=...)`
# computes scores, masks them, takes the softmax and the weighted sum, and returns the output and the weights.
# Shapes are (batch, heads, length, width). The backend reads three things from the layer that calls it: its
# `score` module (None means "dot product times `scaling`"), whether it `is_causal`, and whether it is
# `training` (for dropout). Here a plain namespace stands in for that layer.


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
# hf-attention's `AdditiveScore` sizes both projections from one head width, since inside a multi-head layer the
# queries and keys have already been projected to that width by `q_proj` and `k_proj` (and a
# `MultiHeadAttention(hidden_size=20, kv_input_size=2, ...)` is how a layer takes streams of different widths).
# To run the toy unchanged we give the score a 20 → 8 query projection; its `forward` is the library's.

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
# Where some key is valid, the two agree to float rounding. They differ, on purpose, where **no key is valid**:
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
figure, axes = plt.subplots(1, 4, figsize=(13, 2.8))
sequences = ["sequence 0", "sequence 1"]
panels = (
    (weights_additive[:, 0, 0], "additive, valid lengths [2, 6]", sequences),
    (weights_dot[:, 0, 0], "scaled dot, valid lengths [2, 6]", sequences),
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
# weight of the key at $+s$. Only differences of scores matter: add the same vector to every key and each score moves
# by the same amount, the weights not at all. Measured with the backend on one query of width $d = 16$ and 8 keys:
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
# The orthogonal keys are now below uniform too (0.110): above or below uniform is always relative to the other keys
# of the row. Shift every score down by $s$, so that the best key scores 0 and all others are negative, and the
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
# Unscaled, the scores spread out as $\sqrt d$; the softmax of widely spread scores puts almost all weight on the
# largest one (it *saturates*), and a saturated softmax passes almost no gradient: its Jacobian
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
# near $\ln 32 - \tfrac12$ and the Jacobian near 0.24 for every width. Unscaled, the entropy falls steadily, but the
# Jacobian does *not* simply shrink: at $d = 4$ and $16$ it is 0.30, larger than the scaled 0.24, and only from
# $d = 64$ on does it fall (0.20, 0.11, 0.07 at $d = 64, 256, 1024$). The reason is that the size of
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
# towards 0 as one key takes all the weight. Unscaled scores at $d = 4$ and $16$ ($\sigma = 2, 4$) land near the peak,
# which is why their Jacobian beats the scaled one there; from $d = 64$ ($\sigma = 8$) they are on the falling side,
# and each quadrupling of $d$ (doubling of $\sigma$) takes them further down, so the query and key projections get less
# and less learning signal just where real models live (64 or 128 per head). The argument for $1/\sqrt d$ is therefore
# not that unscaled gradients are always smaller, but that without it the spread, the entropy and the gradient all
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
# ## Summary
#
# * The score is the only part that differs between classic attention variants; masking, softmax and the weighted
#   sum are shared (in hf-attention: one backend, a pluggable `score` module).
# * Masks are boolean, True = may attend. Valid lengths become a mask through a comparison with `arange` and
#   `hf_attention.modeling.masks.padding_mask`; a row with no valid key gives zeros, never a uniform row or NaN.
# * Unscaled dot products grow with the width and saturate the softmax; dividing by $\sqrt d$ keeps the scores at
#   unit variance. T5 (`attention_score="dot"`) drops the factor and relies on its initialisation instead.
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
#    a smaller spread already puts most of the weight on two or three of them, where the norm $\sqrt{m-1}/m$ of
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
