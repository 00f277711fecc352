# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 03 · Attention pooling as kernel regression (Nadaraya–Watson)
#
# Before queries and keys were vectors, attention was a way to *average*. Nadaraya (1964) and Watson (1964)
# estimate an unknown function from noisy samples $(x_i, y_i)$ by a weighted mean of the $y_i$, where the weight
# of each sample depends on how close its $x_i$ is to the point $x$ we ask about:
#
# $$\hat f(x) = \sum_{i=1}^{n} \alpha(x, x_i)\, y_i, \qquad
#   \alpha(x, x_i) = \frac{K(x - x_i)}{\sum_j K(x - x_j)}, \qquad \sum_i \alpha(x, x_i) = 1.$$
#
# In today's words: $x$ is the **query**, the $x_i$ are the **keys**, the $y_i$ the **values**, and $\alpha$ are
# the **attention weights**. With the Gaussian kernel $K(u) = \exp(-u^2/2)$ the weights are exactly a softmax
# over the scores $-(x - x_i)^2/2$. This tutorial fits a 1-D function three ways (the setup of d2l.ai's earlier
# edition, §10.2 "Attention Pooling: Nadaraya-Watson Kernel Regression"; today's §11.2 uses a different function
# and no training), then runs the same regression through hf-attention's own attention layer. On the way: why the
# three roles are called query, key and value (attention is a soft dictionary lookup), why the weights are computed
# from the query and the keys rather than learned one by one, and many regressions in one batched product.
#
# Run it: `python docs/tutorials/03_nadaraya_watson.py` (add `--quick` for a shorter version).

# %%
import torch
from tutorial_support import Report, parse_args, plt, save_figure, table

from hf_attention.modeling.attention import MultiHeadAttention, eager_attention_forward
from hf_attention.modeling.scores import make_score

args = parse_args("Nadaraya–Watson kernel regression: attention pooling by hand and with hf_attention.")
report = Report(args, "03")
EPOCHS = 300 if args.quick else 1000  # full-batch SGD steps for the learned width (under a second each)
torch.manual_seed(0)

# %% [markdown]
# ## The data
#
# $f(x) = 2\sin(x) + x^{0.8}$; 50 training inputs drawn uniformly from $[0, 5)$ and sorted (sorting only makes
# the heatmaps readable), each target with Gaussian noise of standard deviation 0.5. The test inputs are the grid
# $0, 0.1, \dots, 4.9$, where we compare against the noise-free $f$.

# %%
n_train = 50
x_train, _ = torch.sort(torch.rand(n_train) * 5)


def f(x):
    return 2 * torch.sin(x) + x**0.8


y_train = f(x_train) + torch.normal(0.0, 0.5, (n_train,))
x_test = torch.arange(0, 5, 0.1)
y_truth = f(x_test)
n_test = len(x_test)
print(f"{n_train} noisy training pairs, {n_test} test inputs")


def mse(prediction: torch.Tensor) -> float:
    """Mean squared error against the noise-free function on the test grid."""
    return float(((prediction - y_truth) ** 2).mean())


# %% [markdown]
# ## Attention is a soft dictionary lookup
#
# A Python `dict` is a lookup table: a query that equals one of its keys gets that key's value, any other query gets
# nothing. Put the 50 training pairs in one, the inputs $x_i$ as keys and the targets $y_i$ as values. Attention
# pooling is the *soft* version of that lookup: the query is compared with **every** key, the comparisons become
# weights that sum to 1, and the answer is the weighted mean of **all** the values. Hence the three names:
#
# * the **query** is what we look for: the input $x$ at which we want $f(x)$;
# * a **key** is what an entry is found by: the input $x_i$ of a pair, compared with the query;
# * a **value** is what an entry gives back: the target $y_i$, averaged with the weights.
#
# Keys and values come in pairs but need not be alike (here a place on the x axis and a height). In a Transformer
# all three are vectors that three different learned projections compute from tokens (tutorials 06 and 07); in
# self-attention every token is a query, a key and a value at once, in cross-attention the queries come from the
# sentence being written and the keys and values from the one being translated.
#
# The width $\sigma$ of the Gaussian kernel, $\alpha_i \propto \exp(-(x - x_i)^2/2\sigma^2)$, sets how soft the
# lookup is. Very narrow, all the weight goes to the nearest key: a query that *is* a key gets exactly its value, as
# from the `dict`, and any other query gets the value of its nearest key, where the `dict` has nothing. Very wide,
# every key gets the same weight and every query the mean of all values.

# %%
lookup_table = dict(zip(x_train.tolist(), y_train.tolist(), strict=True))  # a hard lookup: key → value
key_query, other_query = x_train[7].item(), 2.5  # one query that is a key, one that is not
nearest = (x_train - other_query).abs().argmin()
print(f"dict[{key_query:.4f}] = {lookup_table[key_query]:.4f}")
try:
    lookup_table[other_query]
except KeyError:
    print(f"dict[{other_query}]: KeyError, no such key (the nearest key is {x_train[nearest]:.4f})")


def soft_lookup(query: float, sigma: float) -> tuple[float, float]:
    """Nadaraya–Watson at one query with width sigma: (the answer, the largest weight)."""
    weights = torch.softmax(-((query - x_train) ** 2) / (2 * sigma**2), dim=0)
    return (weights @ y_train).item(), weights.max().item()


rows, soft = [], {}
for sigma in (0.001, 0.05, 0.25, 1.0, 100.0):
    (at_key, top_at_key), (elsewhere, top_elsewhere) = soft_lookup(key_query, sigma), soft_lookup(other_query, sigma)
    soft[str(sigma)] = {"at_key": at_key, "elsewhere": elsewhere, "top_weight_elsewhere": top_elsewhere}
    rows.append((sigma, f"{at_key:.4f}", f"{top_at_key:.3f}", f"{elsewhere:.4f}", f"{top_elsewhere:.3f}"))
print(table(rows, ("sigma", f"answer at {key_query:.3f}", "largest weight", "answer at 2.5", "largest weight")))
report["soft_lookup"] = soft
report["soft_lookup_narrow_vs_dict"] = abs(soft["0.001"]["at_key"] - lookup_table[key_query])
report["soft_lookup_narrow_vs_nearest_value"] = abs(soft["0.001"]["elsewhere"] - y_train[nearest].item())
report["soft_lookup_wide_vs_mean"] = abs(soft["100.0"]["elsewhere"] - y_train.mean().item())

# %% [markdown]
# At $\sigma = 0.001$ the soft lookup *is* the table (the same value, a largest weight of 1) and answers the query
# 2.5 with the value of its nearest key instead of failing; at $\sigma = 100$ it answers both queries with the mean of
# all 50 values (the largest weight is $1/50$). Everything in between mixes a few neighbours: that is the regression
# below, and choosing $\sigma$ is what section 3 learns.
#
# ### Voluntary and involuntary cues
#
# Psychology's account of attention (William James, 1890; d2l.ai's earlier edition starts from it, §10.1) has two kinds
# of cue. An *involuntary* cue lies in the thing seen: a red cup on a desk of grey papers catches the eye whatever one
# is looking for. A *voluntary* cue lies in the viewer: looking for a book, the eye goes to the books. In attention
# pooling the voluntary cue is the **query**; an involuntary one is a property of a **key** alone. A score can hold
# both, $a(x, x_i) = -(x - x_i)^2/2\sigma^2 + b_i$, with a salience $b_i$ of key $i$ that is the same for every query.
# Without the query term every query gets the same weights, hence the same answer: pooling by salience alone cannot
# follow the query at all (average pooling is the case of equal saliences). With both, the salience only wins near the
# salient key. Give the training point nearest 2.5 a salience $b = 3$ (its kernel weight $\times e^3 \approx 20$), with
# $\sigma = 0.25$:

# %%
salience = torch.zeros(n_train)
salience[nearest] = 3.0
distance = x_test[:, None] - x_train[None, :]  # (test, train)
only_salience = torch.softmax(salience.expand(n_test, n_train), dim=1)  # no query term: (test, train)
query_weights = torch.softmax(-(distance**2) / (2 * 0.25**2), dim=1)
both_weights = torch.softmax(-(distance**2) / (2 * 0.25**2) + salience, dim=1)
near = (x_test - x_train[nearest]).abs() < 0.3
far = (x_test - x_train[nearest]).abs() > 1.0
report["salience_only_rows_differ"] = (only_salience - only_salience[0]).abs().max().item()
report["salient_key_weight_near"] = [
    query_weights[near, nearest].mean().item(),
    both_weights[near, nearest].mean().item(),
]
report["salient_key_weight_far"] = [query_weights[far, nearest].max().item(), both_weights[far, nearest].max().item()]
print(f"salience alone: largest difference between the weights of two queries {report['salience_only_rows_differ']}")
(near_without, near_with), (far_without, far_with) = (
    report["salient_key_weight_near"],
    report["salient_key_weight_far"],
)
print(
    f"weight of the salient key, without / with its salience: queries within 0.3 of it {near_without:.2f} / "
    f"{near_with:.2f}; queries farther than 1.0 at most {far_without:.1e} / {far_with:.1e}"
)

# %% [markdown]
# Near the salient key it takes most of the weight, whatever its neighbours; far away it still gets next to nothing:
# a distance of 1 costs $1/2\sigma^2 = 8$ in the score, more than the salience adds. The models below use the
# voluntary cue only, as Nadaraya and Watson did. A bias that depends on the key alone is rare in Transformers; the
# nearest relatives are the position biases of tutorial 05 (ALiBi, T5's buckets), added to the score like $b_i$ but
# depending on where the query and the key sit, not on what they hold.

# %% [markdown]
# ## 1. Average pooling: every key gets the same weight
#
# The simplest "attention" ignores the query: $\hat f(x) = \frac1n \sum_i y_i$. Every test point gets the same
# answer, a flat line. It is the baseline any query-dependent weighting has to beat.

# %%
y_average = y_train.mean().expand(n_test)
report["mse_average"] = mse(y_average)
# Where f peaks and bottoms out on the test grid (the text says where the fixed width misses them).
trough = torch.where(x_test > 3, y_truth, float("inf")).argmin()  # the minimum past the peak (f(0) = 0 is lower)
report["truth_peak_trough_x"] = [x_test[y_truth.argmax()].item(), x_test[trough].item()]

# %% [markdown]
# ## 2. Nadaraya–Watson with a fixed Gaussian kernel (no parameter)
#
# Score $a(x, x_i) = -(x - x_i)^2 / 2$, weights $\alpha = \mathrm{softmax}_i(a)$. Nearby keys get large weights,
# far ones almost none. The kernel width is fixed at $\sigma = 1$, which is *wide* for a function that turns
# within about one unit of $x$: the estimate is smooth but flattens the peaks and troughs (bias).

# %%
scores_fixed = -((x_test[:, None] - x_train[None, :]) ** 2) / 2  # (test, train): query × key
weights_fixed = torch.softmax(scores_fixed, dim=1)  # every row sums to 1
y_fixed = weights_fixed @ y_train
report["mse_fixed_kernel"] = mse(y_fixed)

# %% [markdown]
# ## 3. A learned kernel width
#
# Put one parameter into the score, $a(x, x_i) = -((x - x_i)\,w)^2/2$, i.e. a kernel of width $\sigma = 1/w$,
# and fit $w$ by gradient descent on the squared error over the training pairs (full-batch SGD with learning rate
# 0.5, as in d2l.ai's earlier edition, §10.2, which trains for only a few epochs; we run until the width stops moving).
#
# **Why leave one out.** If a training input may attend to itself, the loss is minimised by $w \to \infty$:
# each point puts all its weight on its own key and reproduces its own noisy $y_i$ exactly. So while training,
# each training query is barred from its own key, which is a boolean mask that is False on the diagonal. The
# loss then measures how well the *other* points predict each point, which is what a test point needs. We also
# train the naive version (self included) to watch it overfit.

# %%
leave_one_out = ~torch.eye(n_train, dtype=torch.bool)  # True = may attend; False on the diagonal


def nw_learned(queries, keys, values, w, mask=None):
    """Nadaraya–Watson with the learned width, written out (the formula above)."""
    scores = -(((queries[:, None] - keys[None, :]) * w) ** 2) / 2
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=1)
    return weights @ values, weights


def fit_width(mask, epochs: int, targets=None) -> tuple[torch.Tensor, list[float], list[float]]:
    """Gradient descent on the width w; `targets` are the training targets (default: y_train)."""
    targets = y_train if targets is None else targets
    w = torch.ones(1, requires_grad=True)
    optimizer = torch.optim.SGD([w], lr=0.5)
    losses, test_errors = [], []
    for _ in range(epochs):
        prediction, _ = nw_learned(x_train, x_train, targets, w, mask)
        loss = ((prediction - targets) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        with torch.no_grad():
            test_errors.append(mse(nw_learned(x_test, x_train, targets, w)[0]))
    return w.detach(), losses, test_errors


w_learned, losses, test_curve = fit_width(leave_one_out, EPOCHS)
w_naive, losses_naive, test_curve_naive = fit_width(None, EPOCHS)
with torch.no_grad():
    y_learned, weights_learned = nw_learned(x_test, x_train, y_train, w_learned)
report["w_learned"] = w_learned.item()
report["sigma_learned"] = 1 / w_learned.item()
report["mse_learned"] = mse(y_learned)
report["w_naive"] = w_naive.item()
report["mse_naive"] = test_curve_naive[-1]
report["mse_naive_best"] = min(test_curve_naive)  # reached early on, then lost
report["train_loss_first_last"] = [losses[0], losses[-1]]
report["train_loss_naive_last"] = losses_naive[-1]
print(f"learned w = {w_learned.item():.3f}  (kernel width sigma = {1 / w_learned.item():.3f})")
print(f"self included: w = {w_naive.item():.3f} after {EPOCHS} steps and still growing")

# %% [markdown]
# ## How good is each?

# %%
rows = [
    ("average pooling", f"{report['mse_average']:.4f}"),
    ("NW, fixed width sigma = 1", f"{report['mse_fixed_kernel']:.4f}"),
    (f"NW, learned width sigma = {report['sigma_learned']:.3f} (leave-one-out)", f"{report['mse_learned']:.4f}"),
    (f"NW, learned with self included (w = {report['w_naive']:.2f})", f"{report['mse_naive']:.4f}"),
]
print(table(rows, ("estimator", "test MSE")))

# %% [markdown]
# Each step down the table adds one idea. Average pooling cannot follow the curve: it is one constant. The fixed
# Gaussian kernel follows it, but with $\sigma = 1$ it averages over points whose $f$ is quite different, so it misses
# the peak near $x \approx 1.9$ and the trough near 4.4. The learned width is narrower (about a quarter of a unit):
# it averages roughly the handful of neighbours on each side, enough to cancel much of the noise and little
# enough to keep the shape. Learning with the query's own key allowed drives $w$ up for ever; its test error is
# worse and still growing: a model that can memorise its training points will.

# %%
figure, axis = plt.subplots(figsize=(8, 4.5))
axis.plot(x_test, y_truth, "k-", lw=2, label="truth f(x)")
axis.plot(x_train, y_train, "o", color="0.6", ms=4, label="noisy training samples")
axis.plot(x_test, y_average, "--", label=f"average pooling (MSE {report['mse_average']:.3f})")
axis.plot(x_test, y_fixed, label=f"NW, sigma = 1 (MSE {report['mse_fixed_kernel']:.3f})")
axis.plot(
    x_test, y_learned, label=f"NW, learned sigma = {report['sigma_learned']:.2f} (MSE {report['mse_learned']:.3f})"
)
axis.set_xlabel("x")
axis.set_ylabel("y")
axis.set_title("Attention pooling as regression")
axis.legend(fontsize=8)
save_figure(
    figure,
    args.figures,
    "03_fits",
    x_test=x_test,
    y_truth=y_truth,
    x_train=x_train,
    y_train=y_train,
    y_average=y_average,
    y_fixed=y_fixed,
    y_learned=y_learned,
)

# %% [markdown]
# ## The attention weights: a test × train heatmap
#
# Row $i$ is a test input (query), column $j$ a training input (key); the colour is $\alpha(x_i, x_j)$. Because
# both axes are sorted, the weight sits on a diagonal band: each query looks at the keys near it. The learned
# width makes the band narrow.

# %%
figure, axes = plt.subplots(1, 2, figsize=(10, 4.5), sharey=True)
for axis, weights, title in (
    (axes[0], weights_fixed, "fixed width sigma = 1"),
    (axes[1], weights_learned, f"learned width sigma = {report['sigma_learned']:.2f}"),
):
    image = axis.imshow(weights, cmap="Reds", aspect="auto", interpolation="nearest")
    axis.set_xlabel("training inputs (keys), sorted")
    axis.set_title(title)
    figure.colorbar(image, ax=axis, shrink=0.8)
axes[0].set_ylabel("test inputs (queries)")
save_figure(figure, args.figures, "03_heatmaps", weights_fixed=weights_fixed, weights_learned=weights_learned)

# %% [markdown]
# ## Kernel shapes, and what three queries attend to
#
# Left: the kernel $K(u)$ as a function of the distance $u = x - x_i$, normalised to a peak of 1. Right: the
# weights three test queries give the training keys (each curve sums to 1). A narrow kernel concentrates the
# mass on a few close neighbours.

# %%
distance = torch.linspace(-3, 3, 241)
kernel_fixed = torch.exp(-(distance**2) / 2)
kernel_learned = torch.exp(-((distance * w_learned) ** 2) / 2)
probe = torch.tensor([10, 25, 40])  # test inputs x = 1.0, 2.5, 4.0
figure, axes = plt.subplots(1, 2, figsize=(10, 3.8))
axes[0].plot(distance, kernel_fixed, label="sigma = 1")
axes[0].plot(distance, kernel_learned, label=f"learned sigma = {report['sigma_learned']:.2f}")
axes[0].set_xlabel("x - x_i")
axes[0].set_ylabel("K(x - x_i)")
axes[0].set_title("Kernel shapes")
axes[0].legend()
for index in probe.tolist():
    (line,) = axes[1].plot(x_train, weights_learned[index], "o-", ms=3, label=f"x = {x_test[index]:.1f}, learned")
    axes[1].plot(x_train, weights_fixed[index], ":", color=line.get_color(), label=f"x = {x_test[index]:.1f}, sigma 1")
axes[1].set_xlabel("training input x_i (key)")
axes[1].set_ylabel("attention weight")
axes[1].set_title("Weights of three queries")
axes[1].legend(fontsize=7)
save_figure(
    figure,
    args.figures,
    "03_kernels",
    distance=distance,
    kernel_fixed=kernel_fixed,
    kernel_learned=kernel_learned,
    probe=x_test[probe],
    probe_weights_learned=weights_learned[probe],
    probe_weights_fixed=weights_fixed[probe],
)

# %% [markdown]
# ## Training curves
#
# The leave-one-out loss levels off once $w$ has found the width that predicts each point best from its
# neighbours; the test error follows it down. With the query's own key allowed, the training loss keeps falling,
# because the model memorises the noise, while the test error turns back up.

# %%
figure, axes = plt.subplots(1, 2, figsize=(10, 3.8))
axes[0].plot(losses, label="leave-one-out")
axes[0].plot(losses_naive, label="self included")
axes[0].set_xlabel("SGD step")
axes[0].set_ylabel("training MSE")
axes[0].set_title("Training loss")
axes[0].legend()
axes[1].plot(test_curve, label="leave-one-out")
axes[1].plot(test_curve_naive, label="self included")
axes[1].set_xlabel("SGD step")
axes[1].set_ylabel("test MSE vs f")
axes[1].set_title("Test error")
axes[1].legend()
save_figure(
    figure,
    args.figures,
    "03_loss",
    losses=losses,
    losses_naive=losses_naive,
    test_curve=test_curve,
    test_curve_naive=test_curve_naive,
)

# %% [markdown]
# ## One width per training key
#
# A common variant gives every training key its own width: $a(x, x_i) = -((x - x_i)\,w_i)^2/2$, 50 parameters
# instead of one. A key's width is also its reach: a narrow key is heard only by queries right next to it, a wide one
# by queries far away, so the widths also decide which keys count, like the saliences of the cues above. The training
# is the one of section 3 (the same leave-one-out loss, full-batch SGD at learning rate 0.5, the same number of
# steps, every $w_i$ starting at 1), on $\log w_i$ so that no width can turn negative.


# %%
def nw_per_key(queries, log_w, mask=None, targets=None):
    """Nadaraya–Watson with one width per training key: w_i = exp(log_w[i]) scales the distance to key i."""
    return nw_learned(queries, x_train, y_train if targets is None else targets, log_w.exp(), mask)


def fit_widths_per_key(epochs: int, targets=None) -> tuple[torch.Tensor, list[float]]:
    targets = y_train if targets is None else targets
    log_w = torch.zeros(n_train, requires_grad=True)  # every w_i = 1 (sigma_i = 1) at the start
    optimizer = torch.optim.SGD([log_w], lr=0.5)
    losses_per_key = []
    for _ in range(epochs):
        prediction, _ = nw_per_key(x_train, log_w, leave_one_out, targets)
        loss = ((prediction - targets) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses_per_key.append(loss.item())
    return log_w.detach(), losses_per_key


log_w_per_key, losses_per_key = fit_widths_per_key(EPOCHS)
sigma_per_key = torch.exp(-log_w_per_key)  # sigma_i = 1 / w_i
with torch.no_grad():
    y_per_key, weights_per_key = nw_per_key(x_test, log_w_per_key)
noise_size = (y_train - f(x_train)).abs()  # how far each target lies from the noise-free f (known: synthetic data)
by_noise = noise_size.argsort()
widest = sigma_per_key.argsort(descending=True)[:5]
report["per_key_loo_loss"] = losses_per_key[-1]
report["per_key_mse"] = mse(y_per_key)
report["per_key_sigma_min_median_max"] = [
    sigma_per_key.min().item(),
    sigma_per_key.median().item(),
    sigma_per_key.max().item(),
]
report["per_key_narrower_than_single"] = int((sigma_per_key < report["sigma_learned"]).sum())
report["per_key_sigma_quietest_noisiest_10"] = [
    sigma_per_key[by_noise[:10]].mean().item(),
    sigma_per_key[by_noise[-10:]].mean().item(),
]
report["per_key_widest_x"] = sorted(x_train[widest].tolist())
report["per_key_vs_single_fit_max_abs"] = (y_per_key - y_learned).abs().max().item()
print(
    table(
        [
            ("one width", f"{losses[-1]:.4f}", f"{report['mse_learned']:.4f}"),
            (f"one width per key ({n_train})", f"{losses_per_key[-1]:.4f}", f"{report['per_key_mse']:.4f}"),
        ],
        ("kernel", "leave-one-out training loss", "test MSE"),
    )
)
low, middle, high = report["per_key_sigma_min_median_max"]
quiet, noisy = report["per_key_sigma_quietest_noisiest_10"]
print(
    f"sigma_i: smallest {low:.3f}, median {middle:.3f}, largest {high:.3f} (one width: {report['sigma_learned']:.3f})"
)
print(f"mean sigma_i of the 10 keys whose noise is smallest {quiet:.3f}, of the 10 whose noise is largest {noisy:.3f}")
print("the five widest keys sit at x =", ", ".join(f"{x:.2f}" for x in report["per_key_widest_x"]))

# %% [markdown]
# One draw of the noise can flatter either estimator, so both also run on four other draws of the targets (the same
# inputs, a generator of their own):

# %%
other_draws = torch.Generator().manual_seed(5)
draw_rows, draw_mse = [], []
for draw in range(4):
    y_draw = f(x_train) + torch.normal(0.0, 0.5, (n_train,), generator=other_draws)
    w_draw, _, _ = fit_width(leave_one_out, EPOCHS, y_draw)
    log_w_draw, _ = fit_widths_per_key(EPOCHS, y_draw)
    with torch.no_grad():
        errors = [
            mse(nw_learned(x_test, x_train, y_draw, w_draw)[0]),
            mse(nw_per_key(x_test, log_w_draw, None, y_draw)[0]),
        ]
    draw_mse.append(errors)
    draw_rows.append((draw + 1, f"{errors[0]:.4f}", f"{errors[1]:.4f}"))
print(table(draw_rows, ("noise draw", "test MSE, one width", "one width per key")))
report["per_key_other_draws_mse"] = draw_mse

# %%
figure, axes = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
axes[0].plot(x_test, y_truth, "k-", lw=2, label="truth f(x)")
axes[0].plot(x_train, y_train, "o", color="0.6", ms=4, label="training samples")
axes[0].plot(x_test, y_learned, label=f"one width (MSE {report['mse_learned']:.3f})")
axes[0].plot(x_test, y_per_key, "--", label=f"one width per key (MSE {report['per_key_mse']:.3f})")
axes[0].set(xlabel="x", ylabel="y", title="Fits")
axes[0].legend(fontsize=8)
points = axes[1].scatter(x_train, sigma_per_key, c=noise_size, cmap="viridis", s=22)
axes[1].axhline(report["sigma_learned"], color="tab:blue", linestyle=":", label="the one learned width")
axes[1].set(xlabel="training input x_i (key)", ylabel="learned sigma_i", yscale="log", title="Width of each key")
axes[1].legend(fontsize=8)
figure.colorbar(points, ax=axes[1], label="|y_i - f(x_i)|, the noise of the key's target")
save_figure(
    figure,
    args.figures,
    "03_per_key",
    x_test=x_test,
    y_learned=y_learned,
    y_per_key=y_per_key,
    x_train=x_train,
    sigma_per_key=sigma_per_key,
    noise_size=noise_size,
    losses_per_key=losses_per_key,
)

# %% [markdown]
# On the first draw the 50 widths win: the leave-one-out loss falls from 0.360 to 0.328 and the test MSE from 0.049
# to 0.037. The widths spread from $\sigma_i = 0.12$ to 0.95 (median 0.43; only 14 of the 50 are narrower than the
# one learned width, 0.252). They follow the noise: the 10 keys whose targets lie
# closest to $f$ have a mean width of 0.51, the 10 noisiest 0.30. A narrow key is heard by few queries, so the fit
# turns its noisiest points down. The five widest keys sit between $x = 4.48$ and 4.76, at the bottom of the
# trough near the end of the data.
#
# On the four other draws the per-key widths win 3 times, by a little, and lose once, by much (0.046 against
# 0.067): averaged over the four, 0.054 for one width and 0.056 for 50. Widths fitted to 50 noisy points also fit
# some of the noise, which the leave-one-out loss can still reward; one width has no such freedom. A Transformer
# has a second reason to prefer one width per head (the last section): its keys are new in every sequence.

# %% [markdown]
# ## Why not learn the attention weights themselves?
#
# The kernel has one parameter. Why not learn the weights directly: one free score $A_{ij}$ for every pair of a
# training query $i$ and a training key $j$, softmax over each row, with the same leave-one-out mask? That is
# $50 \times 49 = 2450$ numbers instead of one, and on the training pairs it can do far better than any kernel: each
# row may put its weight on whichever other points, near or far, average to that row's own noisy target. But what it
# learns are cells of a table, "training query 17 and training key 30", not a rule for comparing a query with a key. A
# new query has no row, a 51st training pair has no column, and a set of another size has no matrix. The most
# one can do with it at a new query is to borrow the row of the nearest training query. Measured (the free scores
# trained with Adam from zero, the same loss as the width):

# %%
free_scores = torch.zeros(n_train, n_train, requires_grad=True)  # A_ij: a free score for every (query, key) pair
optimizer = torch.optim.Adam([free_scores], lr=0.1)
for _ in range(EPOCHS):
    free_weights = torch.softmax(free_scores.masked_fill(~leave_one_out, float("-inf")), dim=1)
    free_loss = ((free_weights @ y_train - y_train) ** 2).mean()
    optimizer.zero_grad()
    free_loss.backward()
    optimizer.step()
free_weights = free_weights.detach()
nearest_row = (x_test[:, None] - x_train[None, :]).abs().argmin(1)  # each test query borrows its nearest row
y_free = free_weights[nearest_row] @ y_train
with torch.no_grad():
    kernel_weights_train = nw_learned(x_train, x_train, y_train, w_learned, leave_one_out)[1]
far_weight = (free_weights * ((x_train[:, None] - x_train[None, :]).abs() > 1)).sum(1).mean().item()
report["free_scores_parameters"] = n_train * (n_train - 1)
report["free_scores_train_loss"] = free_loss.item()
report["free_scores_test_mse"] = mse(y_free)
report["free_scores_vs_nearest_target_max_abs"] = (y_free - y_train[nearest_row]).abs().max().item()
report["free_scores_weight_beyond_1"] = far_weight
report["kernel_weight_beyond_1"] = (
    (kernel_weights_train * ((x_train[:, None] - x_train[None, :]).abs() > 1)).sum(1).mean().item()
)
print(
    table(
        [
            ("learned width (1 parameter)", f"{losses[-1]:.4f}", f"{report['mse_learned']:.4f}"),
            (
                f"free scores ({report['free_scores_parameters']} parameters), nearest row",
                f"{report['free_scores_train_loss']:.4f}",
                f"{report['free_scores_test_mse']:.4f}",
            ),
        ],
        ("weights", "leave-one-out training loss", "test MSE"),
    )
)
print(
    f"weight on keys farther than 1 from the query: free scores {far_weight:.2f}, "
    f"kernel {report['kernel_weight_beyond_1']:.4f}"
)

# %% [markdown]
# The free scores drive the training loss towards zero, with no query ever seeing its own target: they
# memorise which combination of *other* noisy targets reproduces each target, and on average 0.45 of a row's weight
# sits on points farther than 1 away, which have nothing to say about $f$ there. Borrowed by a new query, a row
# therefore returns the noisy target of the nearest training point: nearest-neighbour regression, noise included (the
# blue zigzag in the figure, whose slope changes sign at 38 of its 48 inner points, the learned width's at 4), with a
# test error 5.2 times that of the one-parameter kernel. The kernel
# generalises because its weights are a *function* of the query and the key, the same function for any query and any
# number of keys. That is also the answer to a common question about Transformers: why compute the scores from the
# tokens ($QK^\top$) instead of learning them? Scores computed from contents work for every sentence; a score matrix
# learned as parameters would belong to one length and one set of positions. (A variant, $A = XW_A$ with a learned
# $W_A$ of shape $D \times T$, is a function of the inputs, but its $W_A$ still has one column per position and so
# belongs to one length $T$.)

# %%
figure, axes = plt.subplots(1, 3, figsize=(15, 4), layout="constrained")
for axis, weights, title in (
    (axes[0], free_weights, f"free scores ({report['free_scores_parameters']} parameters)"),
    (axes[1], kernel_weights_train, f"learned width sigma = {report['sigma_learned']:.2f} (1 parameter)"),
):
    image = axis.imshow(weights, cmap="Reds", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    axis.set_xlabel("training inputs (keys), sorted")
    axis.set_ylabel("training inputs (queries), sorted")
    axis.set_title(f"leave-one-out weights: {title}", fontsize=9)
figure.colorbar(image, ax=axes[:2], shrink=0.8, label="weight (same scale in both)")
axes[2].plot(x_test, y_truth, "k-", lw=2, label="truth f(x)")
axes[2].plot(x_train, y_train, "o", color="0.6", ms=4, label="training samples")
axes[2].plot(x_test, y_free, label=f"free scores, nearest row (MSE {report['free_scores_test_mse']:.3f})")
axes[2].plot(x_test, y_learned, label=f"learned width (MSE {report['mse_learned']:.3f})")
axes[2].set_xlabel("x")
axes[2].set_title("At new queries")
axes[2].legend(fontsize=7)
save_figure(
    figure,
    args.figures,
    "03_free_scores",
    free_weights=free_weights,
    kernel_weights=kernel_weights_train,
    y_free=y_free,
    y_learned=y_learned,
)

# %% [markdown]
# ## The same regression with hf-attention's attention layer
#
# hf-attention's `attention_score="gaussian"` is this kernel: `GaussianScore` computes
# $-\lVert q - k\rVert^2 / (2\sigma_h^2)$ with one learned width per head, stored as $\log \sigma_h^2$. A learned
# $w$ is the width $\sigma = 1/w$, so $\log\sigma^2 = -2\log w$.
#
# A `MultiHeadAttention` with one head of width 1 becomes Nadaraya–Watson when its projections pick the right
# numbers: the queries' stream is $(x, 0)$, the keys'/values' stream is $(x_i, y_i)$; `q_proj` and `k_proj`
# read the first coordinate, `v_proj` the second, and `o_proj` writes the pooled value back to the first. It is a
# **cross-attention** layer (queries from one sequence, keys and values from another) and runs on the **eager**
# backend, `eager_attention_forward`: attention written out as ordinary tensor operations (scores, mask, softmax,
# weighted sum), as opposed to a fused kernel that does all of it in one call; being written out, it can also return
# the weights.

# %%
score, scaling = make_score("gaussian", num_heads=1, head_dim=1)  # what attention_score="gaussian" builds
layer = MultiHeadAttention(
    hidden_size=2,
    num_heads=1,
    num_kv_heads=1,
    head_dim=1,
    bias=False,
    is_cross_attention=True,
    score=score,
    scaling=scaling,
).eval()
with torch.no_grad():
    layer.q_proj.weight.copy_(torch.tensor([[1.0, 0.0]]))  # q = x
    layer.k_proj.weight.copy_(torch.tensor([[1.0, 0.0]]))  # k = x_i
    layer.v_proj.weight.copy_(torch.tensor([[0.0, 1.0]]))  # v = y_i
    layer.o_proj.weight.copy_(torch.tensor([[1.0], [0.0]]))  # output = (pooled value, 0)

queries = torch.stack([x_test, torch.zeros(n_test)], dim=-1)[None]  # (1, test, 2)
keys_values = torch.stack([x_train, y_train], dim=-1)[None]  # (1, train, 2)


def library_regression(log_width: float, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the layer in `dtype`; returns the predictions (test,) and the weights (test, train)."""
    layer.to(dtype)
    with torch.no_grad():
        score.log_width.fill_(log_width)
        output, weights = layer(
            queries.to(dtype), key_value_states=keys_values.to(dtype), attention_function=eager_attention_forward
        )
    layer.float()
    return output[0, :, 0], weights[0, 0]


def largest_difference(dtype) -> float:
    """Library vs the hand-written formula (both in `dtype`), over predictions and weights, both widths."""
    difference = 0.0
    for w in (torch.ones(1), w_learned):
        reference, reference_weights = nw_learned(x_test.to(dtype), x_train.to(dtype), y_train.to(dtype), w.to(dtype))
        prediction, weights = library_regression(-2 * torch.log(w.double()).item(), dtype)
        difference = max(
            difference, (prediction - reference).abs().max().item(), (weights - reference_weights).abs().max().item()
        )
    return difference


report["library_vs_formula_max_abs_float64"] = largest_difference(torch.float64)
report["library_vs_formula_max_abs_float32"] = largest_difference(torch.float32)
print(
    f"largest difference, library vs hand-written formula: "
    f"{report['library_vs_formula_max_abs_float64']:.1e} in float64, "
    f"{report['library_vs_formula_max_abs_float32']:.1e} in float32"
)

# %% [markdown]
# Same numbers, different arithmetic: the library computes a squared distance as a matrix product, which agrees with
# the formula to rounding in float64 but loses digits in float32. The next cell measures how many; why, and why it
# matters little, is in the appendix at the end.

# %%
with torch.no_grad():
    probe_q, probe_k = x_test[None, None, :, None], x_train[None, None, :, None]  # (1, 1, T, 1), (1, 1, S, 1)
    score.log_width.zero_()  # sigma = 1: the score is -distance² / 2
    squared32 = (-2 * score(probe_q, probe_k)).double()[0, 0]
    squared64 = -2 * score(probe_q.double(), probe_k.double())[0, 0]
absolute_error = (squared32 - squared64).abs()
near = (squared64 > 1e-4) & (squared64 < 0.02)  # neighbours: 0.01 < |x - x_i| < 0.14
relative_near = (absolute_error[near] / squared64[near]).median().item()
report["float32_squared_distance_max_abs_error"] = absolute_error.max().item()
report["float32_near_pairs_median_relative_error"] = relative_near
report["float32_near_pairs_significant_digits"] = -torch.log10(torch.tensor(relative_near)).item()
print(
    f"float32 squared distances: largest absolute error {absolute_error.max().item():.1e}; for neighbouring pairs "
    f"(squared distance 1e-4 to 0.02) a median relative error of {relative_near:.1e}, i.e. about "
    f"{report['float32_near_pairs_significant_digits']:.1f} significant digits"
)

# %% [markdown]
# **Learning the width through the library.** The width is an ordinary parameter (`score.log_width`), and the
# leave-one-out rule is an ordinary boolean attention mask (True = may attend), the mask format every
# hf-attention layer takes. Gradient descent on $\log\sigma^2$ takes a different path from gradient descent on
# $w$, but it should reach the same minimum of the same loss.

# %%
training_queries = torch.stack([x_train, torch.zeros(n_train)], dim=-1)[None]
mask = leave_one_out[None, None]  # (1, 1, train, train): broadcast over batch and heads
with torch.no_grad():
    score.log_width.zero_()
optimizer = torch.optim.SGD([score.log_width], lr=0.5)
for _ in range(EPOCHS):
    output, _ = layer(
        training_queries, key_value_states=keys_values, attention_mask=mask, attention_function=eager_attention_forward
    )
    loss = ((output[0, :, 0] - y_train) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
w_library = torch.exp(-score.log_width.detach() / 2).item()
report["w_library_trained"] = w_library
report["loss_library_trained"] = loss.item()
print(
    f"w learned through GaussianScore: {w_library:.3f} (leave-one-out loss {loss.item():.5f}); "
    f"by hand: {w_learned.item():.3f} (loss {losses[-1]:.5f})"
)

# %% [markdown]
# ## Many regressions at once: the batched product `bmm`
#
# Everything above was one data set. To use a GPU (or the vector units of a CPU) well, one runs many at once: a batch
# of $B$ independent problems, each with its own queries, keys and values, stacked along a first axis. The tool is the
# *batched matrix product*: `torch.bmm(X, Y)` takes $X$ of shape $(B, a, b)$ and $Y$ of shape $(B, b, c)$ and returns
# the $B$ products $X_k Y_k$, shape $(B, a, c)$, in one call. For Nadaraya–Watson, $X$ holds the weights
# (batch, queries, keys) and $Y$ the values (batch, keys, 1); the result is (batch, queries, 1). The number of keys
# is the inner dimension, summed away: it can be anything, and each batch element could even have other queries.
#
# Four data sets here: the same $x$ grid, four noise draws of the targets (a generator of its own, so nothing else in
# the tutorial changes), the width learned above. A Python loop over the four, `bmm` once, and the library's layer on
# a batch of four, all in float64:

# %%
B = 4
noise = torch.Generator().manual_seed(4)
y_batch = (f(x_train) + torch.normal(0.0, 0.5, (B, n_train), generator=noise)).double()  # (B, train)
x_test64, x_train64, w64 = x_test.double(), x_train.double(), w_learned.double()
weights_batch = torch.softmax(-(((x_test64[:, None] - x_train64[None, :]) * w64) ** 2) / 2, dim=1).expand(B, -1, -1)
looped = torch.stack([weights_batch[k] @ y_batch[k] for k in range(B)])  # B matrix-vector products, one by one
batched = torch.bmm(weights_batch, y_batch[:, :, None])  # (B, test, train) @ (B, train, 1) → (B, test, 1)
one_query = torch.bmm(weights_batch[:, :1, :], y_batch[:, :, None])  # one query each: (B, 1, train) @ (B, train, 1)
layer.double()
with torch.no_grad():
    score.log_width.fill_(-2 * torch.log(w64).item())
    keys_values_batch = torch.stack([x_train64.expand(B, -1), y_batch], dim=-1)  # (B, train, 2)
    queries_batch = torch.stack([x_test64, torch.zeros_like(x_test64)], dim=-1).expand(B, -1, -1)  # (B, test, 2)
    library_batch = layer(
        queries_batch, key_value_states=keys_values_batch, attention_function=eager_attention_forward
    )[0][..., 0]
layer.float()
report["bmm_shapes"] = {
    "weights": list(weights_batch.shape),
    "values": [B, n_train, 1],
    "output": list(batched.shape),
    "one_query_output": list(one_query.shape),
}
report["bmm_vs_loop_max_abs"] = (batched[..., 0] - looped).abs().max().item()
report["bmm_vs_library_max_abs"] = (batched[..., 0] - library_batch).abs().max().item()
report["bmm_batch_test_mse"] = [float(((p - y_truth.double()) ** 2).mean()) for p in batched[..., 0]]
print(f"weights {tuple(weights_batch.shape)} @ values {(B, n_train, 1)} → {tuple(batched.shape)}")
print(f"one query per data set: {(B, 1, n_train)} @ {(B, n_train, 1)} → {tuple(one_query.shape)}")
print(
    f"bmm vs the loop: {report['bmm_vs_loop_max_abs']:.1e}; bmm vs MultiHeadAttention on the batch: "
    f"{report['bmm_vs_library_max_abs']:.1e}; test MSE of the four: "
    + ", ".join(f"{m:.3f}" for m in report["bmm_batch_test_mse"])
)

# %% [markdown]
# The loop, `bmm` and the library agree to float64 rounding. Inside `MultiHeadAttention` the same product runs with
# two batch axes, (batch, heads, queries, keys) @ (batch, heads, keys, width): `torch.matmul` broadcasts over all the
# leading axes, and `bmm` is its special case with exactly one. The noise draw matters: the same width gives each data
# set its own test error.

# %% [markdown]
# ## Where the library differs from the classic code, on purpose
#
# * **One width per head, not per key.** The variant above learns a separate $w_i$ for each training key. A
#   Transformer head must work for any sequence, whose keys are not known in advance, so hf-attention learns one
#   width per head (`GaussianScore.log_width` has one entry per head).
# * **Masks are boolean.** The leave-one-out rule above is `~torch.eye(n)`, not an additive matrix of $-10^6$ or
#   $-\infty$; the backends turn it into whatever their kernel needs (see tutorial 04).

# %% [markdown]
# ## Self-test
#
# a. In Nadaraya–Watson regression, what are the query, the keys and the values, and what does the kernel width do to
#    the lookup?
#
# b. Why is the width learned with each training query barred from its own key? What happens without that mask?
#
# c. Order average pooling, the fixed width $\sigma = 1$ and the learned width by their test error, and say what each
#    step adds.
#
# d. Why not learn one free score for each (query, key) pair instead of a kernel?
#
# e. What shapes go into `torch.bmm` for the four regressions of the batched section, and what comes out?
#
# f. On the first noise draw, one width per key beats a single width. Why does the tutorial still prefer one width
#    per head?

# %% [markdown]
# ### Self-test answers
#
# a. The query is the input $x$ at which we want $f(x)$, the keys are the training inputs $x_i$, the values their
#    targets $y_i$; the weights are a softmax over the keys of $-(x - x_i)^2/2\sigma^2$. The width sets how soft the
#    lookup is: very narrow, it is the `dict` (at $\sigma = 0.001$ the query 2.5 gets the value of its nearest key,
#    3.70); very wide, it is average pooling (with $\sigma = 100$ every weight is about $1/50$). See the soft
#    dictionary lookup.
#
# b. With its own key allowed, a training query can copy its own noisy target, so the loss keeps rewarding a narrower
#    kernel and drives $w$ up without end: it reached 8.6 in 1000 steps, and its test MSE, 0.085, is worse than the
#    0.049 of leave-one-out ($\sigma = 0.252$) and still growing (section 3 and the training curves).
#
# c. Test MSE 0.905 for average pooling (one constant, whatever the query), 0.428 for the fixed width (it follows the
#    curve but flattens the peak and the trough), 0.049 for the learned width, $\sigma = 0.252$ (a handful of
#    neighbours on each side: enough to cancel much of the noise, few enough to keep the shape); sections 1 to 3.
#
# d. A free score is a cell of a table, "training query $i$ and training key $j$", not a rule that compares a query
#    with a key: a new query has no row. The 2450 free scores drive the leave-one-out loss towards zero, and a new
#    query can only borrow the row of its nearest training query, which returns that point's noisy target: a zigzag
#    with 5.2 times the test error of the one-parameter kernel. Scores computed from the query and the key (the kernel
#    here, $QK^\top$ in a Transformer) work for any query and any number of keys.
#
# e. The weights are `(4, 50, 50)`, (batch, queries, keys), and the values `(4, 50, 1)`; `torch.bmm` returns the four
#    products at once, `(4, 50, 1)`. The keys are the inner dimension, summed away, so one query per data set works as
#    well: `(4, 1, 50) @ (4, 50, 1) → (4, 1, 1)`.
#
# f. Its gain does not hold on average: on four other noise draws the 50 widths average a test MSE of 0.056 against
#    0.054 for a single width (on the first draw 0.037 against 0.049), because 50 widths also fit some of the noise.
#    And a Transformer's keys are new in every sequence, so a width per key has nothing to attach to; hf-attention
#    learns one width per head.

# %% [markdown]
# **Next:** [04 · scoring functions and the masked softmax](04_scoring_and_masked_softmax.py).
#
# ## Exercises
#
# 1. Change the noise of the training targets from 0.5 to 0.1, then to 1.0. Does the learned width grow or shrink,
#    and why?
# 2. Set `n_train = 200`. What width is learned now, and what does that say about how a kernel width should depend on
#    the amount of data?
# 3. Skip the learning: evaluate the fixed-width estimator at $\sigma = 0.05, 0.1, 0.25, 0.5, 1$ on the test grid.
#    Where is the best test error, and how does it compare with the learned width?
# 4. In the cell that trains through the library, pass `attention_mask=None` instead of the leave-one-out mask. What
#    happens to `score.log_width` and to the training loss after 1000 steps? Why does it go faster than the by-hand
#    naive fit?
# 5. The soft lookup at the query 2.5: below which width $\sigma$ does it return the value of the nearest key to within
#    0.001? Predict it from the two nearest keys (0.019 and 0.050 away, values 3.70 and 3.25) before measuring.
# 6. In the section on cues, raise the salience of the key near 2.5 from $b = 3$ to $b = 8$. Up to what distance from
#    that key does it now take more than half of a query's weight (with $\sigma = 0.25$)? Predict it from the scores
#    first.
# 7. Train the free scores *without* the leave-one-out mask (plain `torch.softmax(free_scores, dim=1)`). Does each row
#    copy its own target, as the width did when its own key was allowed? What are the training loss and the test error
#    of the nearest rows?
# 8. Give the four data sets of the `bmm` section different numbers of training points, 50, 40, 30 and 20 (the first
#    $n_k$ points of each). What must be added so that one `bmm` call still does all four, and how does the library's
#    layer take the same thing?

# %%
# The measurements the answers quote.


def refit(noise: float, n: int) -> tuple[float, float]:
    """Exercises 1 and 2: the data cell with another noise or size (drawn from seed 0 as there), the width learned by
    leave-one-out as in section 3; returns (sigma, test MSE)."""
    torch.manual_seed(0)
    x, _ = torch.sort(torch.rand(n) * 5)
    y = f(x) + torch.normal(0.0, noise, (n,))
    w, others = torch.ones(1, requires_grad=True), ~torch.eye(n, dtype=torch.bool)
    optimizer = torch.optim.SGD([w], lr=0.5)
    for _ in range(EPOCHS):
        loss = ((nw_learned(x, x, y, w, others)[0] - y) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return 1 / w.item(), mse(nw_learned(x_test, x, y, w.detach())[0])


answers = {"noise": {str(noise): refit(noise, n_train) for noise in (0.1, 1.0)}, "n_200": refit(0.5, 200)}
answers["fixed_sigma_mse"] = {
    str(sigma): mse(torch.softmax(-((x_test[:, None] - x_train) ** 2) / (2 * sigma**2), dim=1) @ y_train)
    for sigma in (0.05, 0.1, 0.25, 0.5, 1.0)
}
# Exercise 4: the library's layer trained without the leave-one-out mask.
with torch.no_grad():
    score.log_width.zero_()
optimizer = torch.optim.SGD([score.log_width], lr=0.5)
for _ in range(EPOCHS):
    output, _ = layer(training_queries, key_value_states=keys_values, attention_function=eager_attention_forward)
    loss = ((output[0, :, 0] - y_train) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
answers["library_naive"] = {"log_width": score.log_width.item(), "w": torch.exp(-score.log_width / 2).item()}
answers["library_naive"]["loss"] = loss.item()
# Exercise 5: the two keys nearest the query 2.5, and the width below which the answer is within 0.001 of the nearest.
first, second = (x_train - other_query).abs().argsort()[:2]
gap = ((x_train[second] - other_query) ** 2 - (x_train[first] - other_query) ** 2).item() / 2
ratio = 0.001 / (y_train[first] - y_train[second]).abs().item()
answers["lookup"] = {
    "distances": [(x_train[k] - other_query).abs().item() for k in (first, second)],
    "values": [y_train[k].item() for k in (first, second)],
    "ratio": ratio,
    "half_gap": gap,
    "log_ratio": -torch.log(torch.tensor(ratio)).item(),
    "sigma": (gap / -torch.log(torch.tensor(ratio))).sqrt().item(),
}
# Exercise 6: how far from the salient key it takes more than half of a query's weight, for b = 3 and b = 8.
fine = torch.linspace(0, 5, 5001)
fine_scores = -((fine[:, None] - x_train) ** 2) / (2 * 0.25**2)
answers["salience_reach"], answers["salience_others_log_weight"] = {}, {}
others = torch.arange(n_train) != nearest
for b in (3.0, 8.0):
    bonus = torch.zeros(n_train)
    bonus[nearest] = b
    wins = torch.softmax(fine_scores + bonus, dim=1)[:, nearest] > 0.5
    farthest = ((fine - x_train[nearest]).abs() * wins).argmax()  # the farthest query where it still wins
    answers["salience_reach"][str(b)] = (fine[farthest] - x_train[nearest]).abs().item()
    # What the salient key has to beat there: log of the summed kernel weight of all the other keys.
    answers["salience_others_log_weight"][str(b)] = fine_scores[farthest, others].logsumexp(0).item()
# Exercise 7: free scores without the leave-one-out mask.
unmasked_scores = torch.zeros(n_train, n_train, requires_grad=True)  # not free_scores: the figure above shows those
optimizer = torch.optim.Adam([unmasked_scores], lr=0.1)
for _ in range(EPOCHS):
    unmasked_weights = torch.softmax(unmasked_scores, dim=1)
    unmasked_loss = ((unmasked_weights @ y_train - y_train) ** 2).mean()
    optimizer.zero_grad()
    unmasked_loss.backward()
    optimizer.step()
unmasked_weights = unmasked_weights.detach()
answers["free_unmasked"] = {
    "loss": unmasked_loss.item(),
    "own_weight": unmasked_weights.diagonal().mean().item(),
    "test_mse": mse(unmasked_weights[nearest_row] @ y_train),
}
# Exercise 8: data sets of 50, 40, 30 and 20 points (the first n_k of each) in one bmm, the keys past n_k masked out.
sizes = [50, 40, 30, 20]
valid = torch.arange(n_train) < torch.tensor(sizes)[:, None]  # (B, train): True for a data set's own keys
padded_weights = torch.softmax(
    (-(((x_test64[:, None] - x_train64[None, :]) * w64) ** 2) / 2).masked_fill(~valid[:, None, :], float("-inf")), -1
)  # (B, test, train), exactly 0 on the padded keys
padded = torch.bmm(padded_weights, y_batch[:, :, None])[..., 0]
separate = torch.stack(
    [nw_learned(x_test64, x_train64[:k], y_batch[i, :k], w64)[0] for i, k in enumerate(sizes)]
)  # each data set alone, on its own points
answers["padded_bmm"] = {"sizes": sizes, "vs_separate_max_abs": (padded - separate).abs().max().item()}
report["answers"] = answers
print(answers)
report.save()

# %% [markdown]
# ## Answers
#
# 1. With noise 0.1 the learned width shrinks to $\sigma = 0.20$ (test MSE 0.013); with noise 1.0 it grows to 0.31
#    (test MSE 0.13). A wider kernel averages more neighbours, which cancels more noise but blurs the curve: the less
#    noise, the less averaging pays for the blur.
# 2. $\sigma = 0.17$ (test MSE 0.015, from 0.049): with more points, enough neighbours lie within a smaller distance
#    to cancel the noise, so the best width shrinks with more data (the usual bandwidth rule of kernel regression).
# 3. Test MSE 0.15, 0.093, 0.049, 0.12 and 0.43: a U shape with its bottom near $\sigma = 0.25$, where the
#    leave-one-out fit landed ($\sigma = 0.252$, MSE 0.049) without ever seeing the test points. Too narrow follows
#    the noise, too wide flattens the curve.
# 4. `log_width` keeps falling, to $-10.8$ ($w = e^{-\log\sigma^2/2} \approx 220$), and the training loss falls to
#    $6 \cdot 10^{-4}$: each point copies its own noisy target. A step of fixed size in $\log \sigma^2$ is a
#    *multiplicative* step in $w$, so this parametrisation runs away much faster than the additive steps on $w$
#    (which reached 8.6).
# 5. $\sigma = 0.013$. The second nearest key gets the weight ratio $e^{-(0.0495^2 - 0.0187^2)/2\sigma^2}$ against
#    the nearest, and the answer moves by that ratio times the difference of their values (0.45): below 0.001 when the
#    ratio is below 0.0022, i.e. $0.00105/\sigma^2 > 6.1$, $\sigma < 0.013$. A soft lookup turns hard quickly once
#    $\sigma$ is well below the spacing of the keys.
# 6. A query at distance $d$ from the salient key scores it $-d^2/2\sigma^2 + b = b - 8d^2$. It takes half the weight
#    while $e^{b - 8d^2}$ exceeds the summed kernel weight $S$ of the other keys, and $S$ is not the 1 of a single key
#    at the query but that of the several neighbours around it: $\log S = 1.53$ at the farthest query it wins for
#    $b = 3$, 1.59 for $b = 8$. So the reach is $d = \sqrt{(b - \log S)/8}$: measured on a fine grid of queries, 0.43
#    for $b = 3$ and 0.89 for $b = 8$, 2.09 times as far, more than the $\sqrt{8/3} = 1.63$ times of a reach
#    proportional to $\sqrt b$, because the neighbours' $\log S$ is taken from $b$ first. The distance term grows as
#    $d^2$, so the reach follows only the square root of what the salience has left: an involuntary cue wins near, the
#    voluntary one far.
# 7. No: the training loss falls to $4 \cdot 10^{-6}$, but the mean weight of a row on its own key is only 0.12. Any
#    mix of targets that reproduces a row's target is as good as its own, and with 50 free numbers per row the
#    optimiser finds one long before the diagonal takes the weight. At new queries the nearest rows give a test MSE of
#    0.26: nearest-neighbour regression again, whatever the rows look like.
# 8. Pad every data set to 50 keys and keep the padded keys out of the softmax: scores of $-\infty$ where key $j \ge
#    n_k$ (a per-data-set valid length, tutorial 04), then the same `bmm`. Measured, it gives the regressions run
#    separately on their own points to a largest difference of 2.2e-15, float64 rounding. The library's layer takes the
#    same information as a boolean `attention_mask` of shape (batch, 1, 1, keys), True for the real keys, or a
#    tokenizer's 0/1 padding mask through `hf_attention.modeling.masks.padding_mask`.

# %% [markdown]
# ## Appendix: float32 and the squared distance as a matrix product
#
# From the section on hf-attention's attention layer: the library computes the squared distance as
# $\lVert q\rVert^2 + \lVert k\rVert^2 - 2\,q\cdot k$: one matrix product, like the dot-product scores, instead
# of a (queries × keys × width) tensor of differences. In float64 the two agree to rounding (far below $10^{-6}$).
# In float32 (about 7 significant digits, a relative rounding of $6\cdot10^{-8}$) the expanded form adds and subtracts
# numbers as large as $x^2 \approx 25$, so each squared distance carries an *absolute* error of a few $10^{-6}$,
# whatever its size. For a neighbouring pair, whose squared distance is about $0.1^2 = 0.01$, that is a relative
# error of some $10^{-5}$ to $10^{-4}$: cancellation leaves about 4 significant digits of exactly the distances that
# matter most (and fewer for the very closest pairs), not the 7 of a float32 number.
# The cell after that comparison measures it with the library's `GaussianScore` (float32 against float64).
#
# The lost digits matter little, because a score enters the softmax through its *absolute* value: an
# error of a few $10^{-6}$ in $-(x - x_i)^2 w^2/2$ (with $w^2/2 \approx 8$ for the learned width) changes a weight by a
# relative $10^{-5}$ at most. That is why the layer's predictions and weights differ from the formula's by only a few
# $10^{-6}$ in float32, and why the comparison with the formula is made in float64, where nothing is lost. Turning a
# distance into a matrix product is cheap, and this is its price.
