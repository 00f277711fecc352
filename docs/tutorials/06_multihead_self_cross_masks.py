# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 06 · Multi-head attention, self- and cross-attention, and masks
#
# A Transformer layer does not attend once: it runs several small attentions side by side (**heads**), each with
# its own query, key and value projections, and concatenates their outputs (Vaswani et al. 2017 §3.2.2). It uses
# attention in two ways: **self-attention**, where queries, keys and values come from the same sequence, and
# **cross-attention**, where the decoder's queries look at the encoder's output, the link between the sentence
# being written and the sentence being translated. And it hides keys with **masks**: padding that is not text, and
# in the decoder the future, which it must not see while learning to predict it.
#
# This tutorial draws the masks, checks what they do inside a real model, takes a multi-head layer apart, and
# looks at the heads and the cross-attention of an English → German translation model.

# %%
import json
import math
import unicodedata
from pathlib import Path

import torch
import torch.nn.functional as F
from tutorial_support import (
    Report,
    add_model_flags,
    load_translation_model,
    parse_args,
    plt,
    save_figure,
    table,
    translation_test_strings,
)

import hf_attention
from hf_attention.inspection.explorer import explore
from hf_attention.inspection.heatmaps import attention_weights, token_labels
from hf_attention.modeling.attention import MultiHeadAttention, eager_attention_forward
from hf_attention.modeling.masks import causal_mask, combine, padding_mask

args = parse_args("Multi-head, self- and cross-attention and masks, on an English→German model.", add_model_flags)
report = Report(args, "06")
torch.manual_seed(0)


def heatmap(axis, weights, rows, columns, title, vmax=None):
    """One labelled heatmap (rows = queries, columns = keys)."""
    image = axis.imshow(weights, cmap="viridis", vmin=0, vmax=vmax, aspect="auto", interpolation="nearest")
    axis.set_xticks(range(len(columns)), columns, rotation=90, fontsize=7)
    axis.set_yticks(range(len(rows)), rows, fontsize=7)
    axis.set_title(title, fontsize=9)
    return image


# %% [markdown]
# ## Masks are boolean pictures
#
# hf-attention's masks say, for every (query, key) pair, whether the query may attend to the key (True) or not.
#
# * **Causal** (decoder self-attention): query $i$ sees keys $0 \dots i$: a lower triangle.
# * **Padding**: a batch holds sentences of different lengths, filled up with a pad token; the 0/1
#   `attention_mask` a tokenizer returns becomes a mask that hides the pad keys from every query.
# * **Both**, combined with a logical AND, for a padded batch in a decoder. *Decoder-only* models pad on the
#   *left* when they generate, so that every row's last token is a real one and generation can continue all rows at
#   once; that is the case drawn here, and in the third picture the first three rows are empty: pad positions that
#   may see no key. (An encoder-decoder such as this tutorial's model pads on the *right*, both its source
#   and, in training, its targets: the decoder's real tokens come first, the causal mask keeps them from seeing the
#   pads after them, and the loss ignores the padded labels. Its generation starts every row from the same start
#   token, so it needs no left padding.)
# * **Causal with a cache**: during generation only the new tokens are queries, while the keys include the cached
#   past. The mask must be aligned to the *end*: a query at absolute position $p$ sees keys $0 \dots p$.

# %%
T = 8
causal = causal_mask(T, T, 0, torch.device("cpu"))[0, 0]  # (8, 8)
right_padded = padding_mask(torch.tensor([[1, 1, 1, 1, 1, 0, 0, 0]]))[0, 0].expand(T, T)  # 5 real tokens
left_padded_decoder = combine(
    causal_mask(T, T, 0, torch.device("cpu")), padding_mask(torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]]))
)[0, 0]
cached = causal_mask(2, 6, 4, torch.device("cpu"))[0, 0]  # 2 new queries after 4 cached tokens
report["causal_allowed"] = int(causal.sum())
report["cached_keys_seen"] = cached.sum(-1)
print(f"causal {T}×{T}: {int(causal.sum())} allowed pairs = T(T+1)/2 = {T * (T + 1) // 2}")
print(f"cache of 4 + 2 new queries: the new queries see {cached.sum(-1).tolist()} keys")

figure, axes = plt.subplots(1, 4, figsize=(14, 3.4), gridspec_kw={"width_ratios": [1, 1, 1, 0.8]})
for axis, mask, title in (
    (axes[0], causal, "causal"),
    (axes[1], right_padded, "padding (5 real keys of 8)"),
    (axes[2], left_padded_decoder, "causal AND left padding"),
    (axes[3], cached, "causal with a cache (past 4)"),
):
    axis.imshow(mask, cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
    axis.set_title(title, fontsize=9)
    axis.set_xlabel("keys")
axes[0].set_ylabel("queries")
axes[3].set_yticks([0, 1], ["position 4", "position 5"], fontsize=8)
save_figure(
    figure,
    args.figures,
    "06_masks",
    causal=causal,
    padding=right_padded,
    causal_padding=left_padded_decoder,
    cached=cached,
)

# %% [markdown]
# ## The model
#
# An English → German Transformer trained by `training.train` on user-interface strings: the gettext catalogs of
# pinned PyPI wheels, the same data on every machine ([training.md](../training.md#the-main-job)). It is the project's
# recipe with sinusoidal positions (`training/configs/translation_en_de_sinusoidal.yaml`), made small so that it
# trains on a CPU: 2 encoder and 2 decoder layers of width 128 with 4 heads, 2,000 steps. (Where it is trained and
# kept, and how to use another checkpoint: see the appendix.)
#
# It is a small model trained for a few minutes. On 100 strings of its test split (held out from training), with beam
# search as the recipe decodes, it scores BLEU 43.97 and chrF 51.98, on scales where a translation identical to the
# reference scores 100. Of the 4 short strings it translates greedily further down, 1 comes out exactly as a correct
# translation.
#
# The model is *post-norm*: the layer normalisation comes after each residual addition,
# $x \leftarrow \mathrm{LayerNorm}(x + \mathrm{sublayer}(x))$, as in Vaswani et al. (2017). Most models since
# normalise before the sublayer (*pre-norm*, $x \leftarrow x + \mathrm{sublayer}(\mathrm{LayerNorm}(x))$), which trains
# more stably in deep stacks.

# %%
model, tokenizer, origin = load_translation_model(args)
config = model.config
report["model_origin"] = origin
report["model_shape"] = {
    "encoder_layers": config.encoder_layers,
    "decoder_layers": config.decoder_layers,
    "hidden_size": config.hidden_size,
    "heads": config.num_attention_heads,
}
run = Path(model.name_or_path).parent  # training.train writes its settings and metrics beside final/
if (run / "run_config.json").is_file():
    run_config = json.loads((run / "run_config.json").read_text())
    report["training_steps"] = run_config["train"]["max_steps"]
    report["bleu_samples"] = run_config["train"]["bleu_samples"]  # test strings translated for BLEU and chrF
    test = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if "test/bleu" in line][-1]
    report["test_bleu"], report["test_chrf"] = test["test/bleu"], test["test/chrf"]
    print(f"trained {report['training_steps']} steps; test BLEU {test['test/bleu']}, chrF {test['test/chrf']}")
print(
    f"{config.encoder_layers} encoder + {config.decoder_layers} decoder layers, {config.num_attention_heads} heads, "
    f"hidden size {config.hidden_size}, positions: {config.position_encoding}"
)

# %% [markdown]
# ## What the padding mask does inside the model
#
# Encode a short and a long sentence as one padded batch. The short one's weights on its pad keys are exactly 0,
# every real query's row still sums to 1, and its encoder output is the same as when it is encoded alone: padding
# changes nothing but the shapes.

# %%
short, long = "Save as", "Could not open the file for writing"
batch = tokenizer([short, long], return_tensors="pt", padding=True)
alone = tokenizer([short], return_tensors="pt")
with torch.no_grad():
    batched = model.get_encoder()(**batch, output_attentions=True)
    single = model.get_encoder()(**alone, output_attentions=True)
n_real = int(batch["attention_mask"][0].sum())
# How far the encoder's outputs lie from their mean, relative to their length (0: the same vector everywhere).
outputs_long = batched.last_hidden_state[1]
report["encoder_output_spread"] = (
    (outputs_long - outputs_long.mean(0)).norm(dim=-1).max() / outputs_long.norm(dim=-1).max()
).item()
weights_short = torch.stack(batched.attentions)[:, 0]  # (layers, heads, S, S) of the short sentence in the batch
report["pad_key_weight_max"] = weights_short[..., :n_real, n_real:].abs().max().item()
report["real_row_sum_error"] = (weights_short[..., :n_real, :].sum(-1) - 1).abs().max().item()
report["padding_invariance_max_abs"] = (
    (batched.last_hidden_state[0, :n_real] - single.last_hidden_state[0]).abs().max().item()
)
print(
    f"largest weight on a pad key: {report['pad_key_weight_max']}; rows of real queries sum to 1 within "
    f"{report['real_row_sum_error']:.1e}; output alone vs in the batch: {report['padding_invariance_max_abs']:.1e}"
)

# %% [markdown]
# The pad positions of the short sentence still have rows of their own below (as queries they attend to the real
# tokens); nothing downstream reads their outputs. A query that may see no key, such as a pad position at the
# start of a left-padded decoder row under the causal mask, gets a row of zeros rather than a uniform average or
# NaN (tutorial 04). The two panels share one colour scale: the block of the real tokens (top left of the right
# panel) is the left panel, weight for weight, and the pad columns have the colour of 0.

# %%
labels_batch = token_labels(tokenizer, batch["input_ids"][0].tolist())
labels_alone = token_labels(tokenizer, alone["input_ids"][0].tolist())
mean_alone, mean_batched = single.attentions[0][0].mean(0), weights_short[0].mean(0)
# One colour scale for both panels, so that equal weights get equal colours (each panel scaled on its own would
# stretch its own largest weight to the top of the bar and make the same numbers look different).
colour_max = max(mean_alone.max().item(), mean_batched.max().item())
figure, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
image = heatmap(
    axes[0], mean_alone, labels_alone, labels_alone, f"'{short}' alone (layer 0, mean of heads)", vmax=colour_max
)
heatmap(axes[1], mean_batched, labels_batch, labels_batch, f"'{short}' in a padded batch", vmax=colour_max)
figure.colorbar(image, ax=axes, shrink=0.8, label="attention weight (same scale in both panels)")
report["padding_colour_range"] = [0.0, colour_max]
report["padding_real_block_max_abs"] = (mean_batched[:n_real, :n_real] - mean_alone).abs().max().item()
print(
    f"colour scale of both panels: 0 to {colour_max:.3f}; real tokens' weights alone vs in the batch: "
    f"{report['padding_real_block_max_abs']:.1e}"
)
save_figure(
    figure,
    args.figures,
    "06_padding",
    alone=mean_alone,
    batched=mean_batched,
    vmin=0.0,
    vmax=colour_max,
)

# %% [markdown]
# ## Multi-head attention, taken apart
#
# One `MultiHeadAttention` projects its input once to $H \times D$ numbers for queries, keys and values, views them
# as $H$ heads of width $D$, attends in every head independently, concatenates the $H$ outputs and mixes them with
# `o_proj`. The heads are just a batch axis. To check: run the first encoder layer's attention as the model does,
# then again one head at a time through the same eager backend, and glue the pieces together by hand.

# %%
attention = model.get_encoder().layers[0].self_attn
H, D = attention.num_heads, attention.head_dim
with torch.no_grad():
    x = model.get_encoder()(**alone, output_hidden_states=True).hidden_states[0]  # the input of layer 0, (1, S, E)
    layer_output, layer_weights = attention(x, attention_function=eager_attention_forward)
    S = x.shape[1]
    q, k, v = (
        proj(x).view(1, S, H, D).transpose(1, 2) for proj in (attention.q_proj, attention.k_proj, attention.v_proj)
    )  # (1, H, S, D) each
    heads = [
        eager_attention_forward(
            attention, q[:, h : h + 1], k[:, h : h + 1], v[:, h : h + 1], None, scaling=attention.scaling
        )[0]
        for h in range(H)
    ]  # H × (1, S, 1, D)
    glued = attention.o_proj(torch.cat(heads, dim=2).reshape(1, S, H * D))
report["heads_side_by_side_max_abs"] = (glued - layer_output).abs().max().item()
print(
    f"{H} heads of width {D}: layer output vs heads run one by one and concatenated: "
    f"{report['heads_side_by_side_max_abs']:.1e}"
)

# %% [markdown]
# ### The same layer as matrices
#
# Alammar's *The Illustrated Transformer* (2018) draws this layer as a few matrix products, and the figure below draws
# them from the tensors of this very layer on the input of "Save as" (rows are tokens):
#
# * top row: the layer's input $X$ times $W_q$, $W_k$ and $W_v$ (plus a bias each) gives the matrices $Q$, $K$, $V$,
#   one row per token; the dotted lines cut their columns into the heads;
# * middle row: each head $h$ takes its own block of columns $Q_h, K_h, V_h$ and computes
#   $Z_h = \mathrm{softmax}(Q_h K_h^\top / \sqrt{D})\, V_h$ (its weights, then its output);
# * bottom row: the heads' outputs side by side, $Z = [Z_0 \mid Z_1 \mid \dots]$, times $W_o$ (plus a bias), and the
#   module's own output on the same input, to compare.
#
# `nn.Linear` stores a weight as (out, in) and computes $xW^\top + b$, so the $W_q$ of the picture is
# `q_proj.weight` transposed.

# %%
with torch.no_grad():
    X = x[0]  # (S, E): one row per token
    W = {name: getattr(attention, f"{name}_proj") for name in "qkvo"}
    Q, K, V = (X @ W[name].weight.T + W[name].bias for name in "qkv")  # (S, H·D) each
    # Head h owns columns h·D … (h + 1)·D − 1: the view to (S, H, D) that the module does, one head per matrix.
    Q_heads, K_heads, V_heads = (M.view(S, H, D).transpose(0, 1) for M in (Q, K, V))  # (H, S, D)
    A_heads = torch.softmax(Q_heads @ K_heads.transpose(1, 2) * attention.scaling, dim=-1)  # (H, S, S)
    Z_heads = A_heads @ V_heads  # (H, S, D): each head's output
    Z = Z_heads.transpose(0, 1).reshape(S, H * D)  # (S, H·D): the heads side by side
    by_matrices = Z @ W["o"].weight.T + W["o"].bias  # (S, E)
    module_output = attention(x)[0][0]  # the module as the model calls it (its default backend), (S, E)
E = X.shape[1]
report["matrices"] = {"tokens": S, "width": E, "heads": H, "head_width": D}
report["matrices_vs_module_max_abs"] = (by_matrices - module_output).abs().max().item()
print(
    f"X {tuple(X.shape)} → Q, K, V {tuple(Q.shape)} → {H} heads of {tuple(Q_heads.shape[1:])} → Z {tuple(Z.shape)} "
    f"→ output {tuple(by_matrices.shape)}; vs the module's output: {report['matrices_vs_module_max_abs']:.1e}"
)


def matrix_panel(axis, matrix, title, rows=None, head_lines=False):
    """One matrix as a heatmap (blue negative, red positive), its shape in the title, token labels on its rows."""
    matrix = matrix.detach()  # the weights are parameters
    limit = matrix.abs().max().item()
    axis.imshow(matrix, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto", interpolation="nearest")
    axis.set_title(f"{title}\n{' × '.join(str(n) for n in matrix.shape)}", fontsize=8)
    axis.set_xticks([])
    axis.set_yticks(range(len(rows)), rows, fontsize=7) if rows else axis.set_yticks([])
    for column in range(D, matrix.shape[1], D) if head_lines else ():
        axis.axvline(column - 0.5, color="k", ls=":", lw=1)


figure = plt.figure(figsize=(15, 9), layout="constrained")
top, middle, bottom = figure.subfigures(3, 1, height_ratios=[1.2, 1, 1])
axes = top.subplots(1, 7, width_ratios=[1, 1, 1, 1, 1, 1, 1])
matrix_panel(axes[0], X, "X (input)", labels_alone)
for index, (name, M) in enumerate((("q", Q), ("k", K), ("v", V))):
    matrix_panel(axes[1 + 2 * index], W[name].weight.T, f"$W_{name}$")
    matrix_panel(axes[2 + 2 * index], M, f"{name.upper()} = X $W_{name}$ + $b_{name}$", labels_alone, head_lines=True)
top.suptitle("queries, keys and values: one row per token (dotted: the heads' columns)", fontsize=10)
axes = middle.subplots(1, 2 * H, width_ratios=[1, 2] * H)
for head in range(H):
    heatmap(axes[2 * head], A_heads[head], labels_alone, labels_alone, f"head {head}: weights\n{S} × {S}", vmax=1)
    matrix_panel(axes[2 * head + 1], Z_heads[head], f"$Z_{head}$ = weights · $V_{head}$", labels_alone)
middle.suptitle(f"{H} heads, each on its own {D} columns of Q, K and V", fontsize=10)
axes = bottom.subplots(1, 4)
matrix_panel(axes[0], Z, "Z = heads side by side", labels_alone, head_lines=True)
matrix_panel(axes[1], W["o"].weight.T, "$W_o$")
matrix_panel(axes[2], by_matrices, "Z $W_o$ + $b_o$", labels_alone)
matrix_panel(axes[3], module_output, "the module's output", labels_alone)
bottom.suptitle(
    f"concatenate, mix with $W_o$; largest difference to the module: {report['matrices_vs_module_max_abs']:.1e}",
    fontsize=10,
)
save_figure(
    figure,
    args.figures,
    "06_qkv_matrices",
    X=X,
    Q=Q,
    K=K,
    V=V,
    weights=A_heads,
    Z_heads=Z_heads,
    Z=Z,
    output=by_matrices,
    module_output=module_output,
)

# %% [markdown]
# On "Save as" the layer's input $X$ is 3 × 128 (3 tokens, width 128), $Q$, $K$ and $V$ are 3 × 128, each of the
# 4 heads works on 3 × 32 blocks, and $Z$ is 3 × 128 again. The product of the matrices drawn gives the module's
# output to within 1.2e-7, float rounding (the module runs its own kernels).

# %% [markdown]
# Why several small heads instead of one big one? Each head has its own projections, so each can match queries and
# keys on a different relation (the previous token, the same word, the end of the sentence), and a softmax can
# only pick one kind of relation at a time. With the same total width the cost is the same as one head.
# *Grouped-query attention* (Ainslie et al. 2023) goes the other way for keys and values: with
# `num_key_value_heads` < `num_attention_heads`, each group of query heads shares one key/value head, which shrinks
# the keys and values a decoder must cache during generation.
#
# ## The heads of the trained model
#
# Every encoder layer × head for one sentence (self-attention: tokens × tokens), and the decoder's self-attention,
# whose upper triangle is empty: the causal mask at work (its rows and columns are the decoder's *inputs*, `<s>` and
# the tokens written so far, since there a query attends to the inputs before it). All panels share one colour scale
# (the bar on the right), so a head that looks pale spreads its weight, and heads can be compared with each other.

# %%
sentence = "Could not open the file"
encoder_layers, enc_rows, enc_columns = attention_weights(model, tokenizer, sentence, kind="self")
decoder_layers, dec_rows, dec_columns = attention_weights(model, tokenizer, sentence, kind="decoder")
upper = torch.triu(torch.ones(len(dec_rows), len(dec_rows), dtype=torch.bool), diagonal=1)
report["decoder_future_weight_max"] = max(w[:, upper].abs().max().item() for w in decoder_layers)
print(f"largest decoder self-attention weight on a future token: {report['decoder_future_weight_max']}")

figure, axes = plt.subplots(
    len(encoder_layers) + len(decoder_layers),
    H,
    layout="constrained",
    figsize=(2.8 * H, 2.8 * (len(encoder_layers) + len(decoder_layers))),
    squeeze=False,
)
grid = [("encoder", i, w, enc_rows, enc_columns) for i, w in enumerate(encoder_layers)] + [
    ("decoder", i, w, dec_rows, dec_columns) for i, w in enumerate(decoder_layers)
]
shared_max = max(weights.max().item() for _, _, weights, _, _ in grid)  # one colour scale for every panel
for row, (name, index, weights, rows, columns) in enumerate(grid):
    for head in range(H):
        image = heatmap(
            axes[row, head], weights[head], rows, columns, f"{name} layer {index}, head {head}", vmax=shared_max
        )
figure.colorbar(image, ax=axes, shrink=0.6, label="attention weight (same scale in every panel)")
report["heads_colour_scale_max"] = shared_max
save_figure(figure, args.figures, "06_heads", encoder=torch.stack(encoder_layers), decoder=torch.stack(decoder_layers))

# %% [markdown]
# ## What each encoder head attends to, on real text
#
# One sentence is an anecdote. Over the test split of the model's corpus (strings it never trained on), sort each key
# a query looks at into the first of seven places that fits: the same token, the previous one, the next one, the
# first token, the last one (`</s>`, which ends every source), a punctuation token, or elsewhere. A head's *share* of a
# place is the attention mass it puts there, averaged over all queries; a head's seven shares sum to 1. Uniform
# attention (each of the $n$ keys weighted $1/n$) gives the baseline: what a head blind to position would score.

# %%
PLACES = ["same", "previous", "next", "first", "last (</s>)", "punctuation", "elsewhere"]


def is_punctuation(label: str) -> bool:
    return all(unicodedata.category(character).startswith("P") for character in label)


def key_places(labels: list[str]) -> torch.Tensor:
    """(n, n): for query i and key j, the index of the first of PLACES that fits."""
    n = len(labels)
    places = torch.empty(n, n, dtype=torch.long)
    for i in range(n):
        for j in range(n):
            fits = [j == i, j == i - 1, j == i + 1, j == 0, j == n - 1, is_punctuation(labels[j]), True]
            places[i, j] = fits.index(True)
    return places


def place_shares(weights: torch.Tensor, places: torch.Tensor) -> torch.Tensor:
    """(layers, heads, places): each head's attention mass on each place, averaged over the n queries."""
    one_hot = F.one_hot(places, len(PLACES)).to(weights.dtype)  # (n, n, places)
    return torch.einsum("lhij,ijp->lhp", weights, one_hot) / weights.shape[-1]


def encoder_self_attention(text: str) -> tuple[torch.Tensor, list[str]]:
    """(layers, heads, n, n) encoder self-attention of one string, and its token labels."""
    ids = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        weights = torch.stack(model.get_encoder()(**ids, output_attentions=True).attentions)[:, 0]
    return weights, token_labels(tokenizer, ids["input_ids"][0].tolist(), mathtext=False)


test_strings = translation_test_strings(args)
mass, uniform_mass, queries = torch.zeros(len(encoder_layers), H, len(PLACES)), torch.zeros(len(PLACES)), 0
for text in test_strings:
    weights, labels = encoder_self_attention(text)
    places, n = key_places(labels), len(labels)
    mass += place_shares(weights, places) * n  # back to sums over queries, to average over all queries at the end
    uniform_mass += place_shares(torch.full((1, 1, n, n), 1 / n), places)[0, 0] * n
    queries += n
shares, uniform = mass / queries, uniform_mass / queries
head_names = [f"layer {layer}, head {head}" for layer in range(shares.shape[0]) for head in range(H)]
flat_shares = shares.reshape(-1, len(PLACES))  # one row per head, in the order of head_names
# A head's pattern: the place where it puts the most mass beyond what uniform attention puts there.
patterns = {name: PLACES[int((row - uniform).argmax())] for name, row in zip(head_names, flat_shares, strict=True)}
report["test_strings"] = len(test_strings)
report["test_queries"] = queries
report["head_place_shares"] = shares
report["uniform_place_shares"] = uniform
report["head_patterns"] = patterns
report["place_shares_sum_error"] = (shares.sum(-1) - 1).abs().max().item()
print(f"{len(test_strings)} test strings, {queries} queries; mean share of each place:")
print(
    table(
        [(name, *(f"{v:.2f}" for v in row), patterns[name]) for name, row in zip(head_names, flat_shares, strict=True)]
        + [("uniform attention", *(f"{v:.2f}" for v in uniform), "")],
        ("head", *PLACES, "most above uniform"),
    )
)

# %% [markdown]
# The shares are sums of attention weights, so they can be checked against the weights directly: on one test string,
# a head's share of "same" is the mean of its weights' diagonal, of "previous" and "next" the sum of the diagonal
# below and above it, divided by the number of queries.

# %%
weights, labels = encoder_self_attention(test_strings[0])
direct = torch.stack(
    [torch.diagonal(weights, offset, dim1=-2, dim2=-1).sum(-1) / len(labels) for offset in (0, -1, 1)], dim=-1
)  # same, previous, next
report["place_shares_direct_max_abs"] = (
    (place_shares(weights, key_places(labels))[..., :3] - direct).abs().max().item()
)
print(
    f"{test_strings[0]!r}: shares of same/previous/next vs the weights' diagonals: "
    f"{report['place_shares_direct_max_abs']:.1e}"
)

figure, axis = plt.subplots(figsize=(8, 0.45 * (len(patterns) + 1) + 1.5), layout="constrained")
rows = torch.cat([flat_shares, uniform[None]])
title = f"encoder self-attention on {len(test_strings)} test strings"
row_names = [f"{name}: {patterns[name]}" for name in head_names] + ["uniform attention"]
image = heatmap(axis, rows, row_names, PLACES, title, vmax=1)
for row in range(rows.shape[0]):
    for column in range(rows.shape[1]):
        value = rows[row, column].item()
        axis.text(column, row, f"{value:.2f}", ha="center", va="center", fontsize=7, color="w" if value < 0.5 else "k")
axis.set_xticks(range(len(PLACES)), PLACES, rotation=30, fontsize=8)
figure.colorbar(image, ax=axis, shrink=0.8, label="share of the attention mass")
save_figure(figure, args.figures, "06_head_places", shares=shares, uniform=uniform)

# %% [markdown]
# On the 605 test strings (4,384 queries) no head has a strong positional habit: no share lies further than 0.10
# from uniform attention's. The clearest leanings: layer 0's head 0 puts 0.16 on `</s>` (uniform attention: 0.09) and
# only 0.05 on the token itself (uniform: 0.14); three heads favour the first token, layer 1's head 0 with 0.17,
# layer 0's head 2 with 0.15 and layer 1's head 3 with 0.14 (uniform: 0.09); and layer 1's heads 1 and 2 lean
# towards the previous token, 0.15 each (uniform: 0.12). The largest share of every head goes "elsewhere", about as
# much as uniform attention puts there: these heads choose their keys by content, which a table of positions cannot
# show.
#
# ## Cross-attention: where the decoder looks while it writes
#
# For each sentence the model translates greedily, and the decoder is run once more over its own output to read
# the cross-attention. **Row $t$ is decoding step $t$**: its input is the start token `<s>` followed by the first
# $t - 1$ tokens written, and it writes token $t$; the row is labelled "$t$: token $t$", the token that step chose
# (tutorial 09's figure labels its rows the same way). The columns are the source tokens, and each row sums to 1 over
# them.

# %%
# Each sentence with one correct German translation (UI style: infinitive for commands), to judge the model's by.
references = {
    "Could not open file": "Datei konnte nicht geöffnet werden",
    "Show hidden files": "Verborgene Dateien anzeigen",
    "Delete the selected files": "Ausgewählte Dateien löschen",
    "Open the file": "Datei öffnen",
}
sentences = list(references)
if args.quick:
    sentences = sentences[:2]
cross = []
translations = {}
for text in sentences:
    with torch.no_grad():  # greedy, as attention_weights generates it: the rows are steps 1 … T of this output
        generated = model.generate(
            **tokenizer(text, return_tensors="pt"), max_new_tokens=16, do_sample=False, num_beams=1
        )
    layers, inputs, columns = attention_weights(model, tokenizer, text, kind="cross", max_new_tokens=16)
    written = token_labels(tokenizer, generated[0, 1:].tolist())  # token t is written by the step whose input ends
    rows = [f"{t}: {token}" for t, token in enumerate(written, start=1)]  # with token t - 1 (inputs[t - 1])
    assert inputs == token_labels(tokenizer, generated[0, :-1].tolist())  # the same output, one step behind
    translations[text] = tokenizer.decode(generated[0], skip_special_tokens=True)
    cross.append((text, layers, rows, columns))
    print(f"{text!r} → {translations[text]!r}   (a correct translation: {references[text]!r})")
report["translations"] = translations
report["translations_exact"] = sum(translations[text] == references[text] for text in sentences)
report["cross_rows_first_sentence"] = cross[0][2]
report["cross_most_attended"] = {  # per sentence and decoder layer, each step's (token written, source token, weight)
    text: [
        [(row, columns[int(w.argmax())], w.max().item()) for row, w in zip(rows, weights.mean(0), strict=True)]
        for weights in layers
    ]
    for text, layers, rows, columns in cross
}

n_layers = len(cross[0][1])
figure, axes = plt.subplots(
    len(cross), n_layers, figsize=(3.4 * n_layers + 1, 3.0 * len(cross)), squeeze=False, layout="constrained"
)
for row, (text, layers, rows, columns) in enumerate(cross):
    for index, weights in enumerate(layers):
        image = heatmap(
            axes[row, index],
            weights.mean(0),
            rows,
            columns,
            f"decoder layer {index}, mean of heads" if row == 0 else "",
            vmax=1,
        )
    axes[row, 0].set_ylabel(f"{text!r}\nstep: token written", fontsize=9)
figure.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
save_figure(
    figure,
    args.figures,
    "06_cross_attention",
    **{f"sentence{i}_layer{j}": w.mean(0) for i, (_, layers, _, _) in enumerate(cross) for j, w in enumerate(layers)},
)

# %% [markdown]
# Judge the translations before the heatmaps: each printed line puts the model's greedy output next to a correct
# translation. Where the output is wrong, its rows show where the model looked while making the mistake, which is no
# alignment of anything; a row is worth reading as an alignment only for tokens that are right.
#
# Exactly right: 1 of the 4 ("Could not open file"). "Delete the selected files" and "Open the file" get an article
# a German interface leaves out ("Die ausgewählte Dateien löschen", "Die Datei öffnen"), and "Show hidden files" a
# wrong first word ("Her").
#
# Read as an alignment, a row shows which source tokens the decoder weighted while choosing its token. Do not expect a
# diagonal: German does not keep English word order. Its first word can translate the last English one, and a German
# user interface turns an English imperative into an infinitive at the end. The second decoder layer (right column)
# follows both: for "Open the file" it looks most at "file" (0.69) while writing "Datei" and at "Open" (0.56) while
# writing "öffnen"; for "Delete the selected files" at "files" (0.92) for "Dateien" and at "Delete" (0.54) for
# "löschen". Each extra "Die" looks most at "the" (0.55 and 0.56): the model translated the English article.
#
# A row on the right word does not make the right output: "Show hidden files" writes "H" and "er" while its second
# layer looks at "h" (0.90 and 0.82), the first piece of "hidden": the right place, and the wrong word.
#
# Whatever the heatmap shows, attention weights are not an explanation of the output: Jain & Wallace (2019) found
# that quite different weights often give the same predictions, and Wiegreffe & Pinter (2019) that whether weights
# explain anything depends on the model and must be tested, not read off a picture. A layer's output also mixes in
# the values through `o_proj`, the residual stream and later layers, none of which the weights show.
#
# How sharp is that alignment? The entropy of a row, divided by $\ln S$ (S source tokens), is 1 for a uniform
# row and 0 for a row that looks at one token. Compare the trained model with a freshly initialised one of the same
# shape, whose attention is close to uniform (its scores are all near 0).


# %%
def mean_normalised_entropy(layers) -> float:
    weights = torch.stack(layers)  # (L, H, T, S)
    entropy = -(weights * weights.clamp_min(1e-12).log()).sum(-1)
    return (entropy / math.log(weights.shape[-1])).mean().item()


untrained = hf_attention.HFAttentionForSeq2SeqLM(config).eval()
trained_entropy = sum(mean_normalised_entropy(layers) for _, layers, _, _ in cross) / len(cross)
untrained_entropy = sum(
    mean_normalised_entropy(attention_weights(untrained, tokenizer, text, kind="cross", target=translations[text])[0])
    for text, _, _, _ in cross
) / len(cross)
report["cross_row_sum_error"] = max((w.sum(-1) - 1).abs().max().item() for _, layers, _, _ in cross for w in layers)
report["cross_entropy_trained"] = trained_entropy
report["cross_entropy_untrained"] = untrained_entropy
print(
    table(
        [("trained", f"{trained_entropy:.3f}"), ("freshly initialised", f"{untrained_entropy:.3f}")],
        ("cross-attention", "mean entropy / ln S"),
    )
)

# %% [markdown]
# Training has sharpened the rows: the trained model's mean normalised entropy is 0.44, against 1.00 for the fresh
# model, whose rows are near-uniform.
#
# To look at every layer and head interactively, the attention explorer writes them all for one text into one HTML
# page that opens in any browser without a network (a layer × head grid, a large view with token labels, hover
# highlighting):

# %%
page = explore(
    model,
    tokenizer,
    sentences[0],
    path=args.figures / "06_explorer.html",
    title="tutorial 06: the English → German model",
)
report["explorer_page"] = page.path.name
report["explorer_cross_layers_heads"] = list(page.weights["cross"].shape[:2])
print(f"wrote {page.path} ({len(page.html) // 1024} KiB)")

# %% [markdown]
# [The page of the committed figures' model](../figures/06_explorer.html) is committed next to them (download it and
# open it in a browser; a quick run writes its own to `outputs/tutorial_figures/`). For any checkpoint and text:
#
# ```bash
# hf-attention explore --model outputs/tutorial_en_de/final --text "Could not open file" --out attention.html
# ```
#
# **Next:** [07 · a Transformer block by hand](07_transformer_block_by_hand.py).

# %% [markdown]
# ## Self-test
#
# a. Which keys does the causal mask let a query see, and with a cache, which keys does a new query see?
# b. A short sentence is encoded in a padded batch with a longer one. What weight do its pad keys get, and does its
#    encoder output change?
# c. How does a multi-head layer make its output from its heads? Are the heads anything but a batch axis?
# d. Do the trained encoder's heads choose their keys by position?
# e. When can a row of the cross-attention heatmap be read as an alignment, and what did training do to the rows?

# %% [markdown]
# ### Self-test answers
#
# a. Query $i$ sees the keys up to itself, a lower triangle: 36 of the 64 pairs of 8 tokens (*Masks are boolean
#    pictures*). With a cache the triangle is aligned to the end: after 4 cached tokens the 2 new queries see 5 and
#    6 keys.
# b. Weight 0.0 (the largest weight on a pad key in the run), and the encoder output of "Save as" in the batch is
#    that of "Save as" alone to within 7.2e-7, float rounding: padding changes nothing but the shapes (*What the
#    padding mask does inside the model*).
# c. It views its projections as $H$ heads of width $D$ (here 4 heads of width 32), attends in each one on its own,
#    concatenates their outputs and mixes them with `o_proj`. Run one at a time and glued together by hand, the heads
#    give the layer's output with a difference of 0.0: in the computation they are a batch axis (*Multi-head
#    attention, taken apart*). What they add is that each head has its own projections, so each can match queries
#    and keys on a different relation.
# d. Hardly: over the 605 test strings no head's share of any place lies further than 0.10 from uniform attention's,
#    and every head puts its largest share "elsewhere", about as much as uniform attention puts there (*What each
#    encoder head attends to, on real text*). They choose their keys by content.
# e. Only for tokens that are right: a row shows where the decoder looked while choosing its token, also when the
#    choice is wrong. "Show hidden files" writes "H" while its second layer looks at "h" (0.90), the right place
#    for the wrong word (*Cross-attention*); and weights are no explanation of the output in any case (Jain &
#    Wallace). Training sharpened the rows: their mean normalised entropy is 0.44, against 1.00 in a freshly
#    initialised model of the same shape.

# %% [markdown]
# ## Exercises
#
# 1. Build the mask of a *right*-padded target batch in the decoder, as this model trains:
#    `combine(causal_mask(8, 8, 0, torch.device("cpu")), padding_mask(torch.tensor([[1, 1, 1, 1, 1, 0, 0, 0]])))`.
#    How many keys does each query see? Is any row empty, unlike the left-padded picture?
# 2. `causal_mask(3, 10, 7, torch.device("cpu"))`: three new queries after 7 cached tokens. How many keys does each
#    see?
# 3. In the cell that runs the heads one by one, swap the outputs of heads 0 and 1 before the concatenation. Does the
#    layer's output change? What else would you have to permute to get the same output back?
# 4. Count the parameters of `MultiHeadAttention(hidden_size=512, num_heads=8, num_kv_heads=kv, head_dim=64)` for
#    `kv = 8` and `kv = 2` (grouped-query attention), and the numbers a decoder caches per token and layer.
# 5. Translate "Could not open file" with the freshly initialised `untrained` model (`untrained.generate(...)`).
#    What does it write, and why is its cross-attention almost uniform?

# %%
# The exercises, measured (the answers below quote these numbers).
cpu = torch.device("cpu")
right_padded_decoder = combine(causal_mask(8, 8, 0, cpu), padding_mask(torch.tensor([[1, 1, 1, 1, 1, 0, 0, 0]])))
report["exercise_1_keys_seen"] = right_padded_decoder[0, 0].sum(-1)  # exercise 1: keys per query
report["exercise_2_keys_seen"] = causal_mask(3, 10, 7, cpu)[0, 0].sum(-1)  # exercise 2
with torch.no_grad():  # exercise 3: heads 0 and 1 swapped before o_proj, then o_proj's input columns swapped too
    order = [1, 0, *range(2, H)]
    swapped = torch.cat([heads[h] for h in order], dim=2).reshape(1, S, H * D)
    o_columns = torch.cat([torch.arange(h * D, (h + 1) * D) for h in order])  # where o_proj reads each head
    report["exercise_3_swapped_max_abs"] = (attention.o_proj(swapped) - layer_output).abs().max().item()
    restored = F.linear(swapped, attention.o_proj.weight[:, o_columns], attention.o_proj.bias)
    report["exercise_3_restored_max_abs"] = (restored - layer_output).abs().max().item()
    written = untrained.generate(**tokenizer(sentences[0], return_tensors="pt"), max_new_tokens=16, do_sample=False)
report["exercise_5_untrained_tokens"] = token_labels(tokenizer, written[0, 1:].tolist())  # exercise 5
print(
    f"exercise 1: {report['exercise_1_keys_seen']} keys; "
    f"exercise 2: {report['exercise_2_keys_seen']}; "
    f"exercise 3: swapped {report['exercise_3_swapped_max_abs']:.2f}, restored "
    f"{report['exercise_3_restored_max_abs']:.1e}; exercise 5: {report['exercise_5_untrained_tokens']}"
)
for kv_heads in (8, 2):  # exercise 4, counted on the library's module
    grouped = MultiHeadAttention(hidden_size=512, num_heads=8, num_kv_heads=kv_heads, head_dim=64)
    report[f"exercise_4_parameters_kv{kv_heads}"] = sum(p.numel() for p in grouped.parameters())
report.save()

# %% [markdown]
# ## Answers
#
# 1. Queries 0-4 see $1, 2, 3, 4, 5$ keys and the pad queries 5-7 see the 5 real keys: no row is empty, because the
#    real tokens come first and every query has at least key 0 before it. (Their outputs are never used: the loss
#    ignores padded labels.)
# 2. 8, 9 and 10 keys: the query at absolute position $p$ sees keys $0 \dots p$, and the new queries sit at positions
#    7, 8 and 9.
# 3. Yes, by up to 0.56 here: `o_proj` reads the concatenation by position, columns $0 \dots D-1$ as head 0's output
#    and so on. Swapping the two heads' $D$ input columns of `o_proj.weight` as well gives the same output back (to
#    within 6.0e-8, float rounding of sums taken in another order): the heads have no order of their own, only the
#    slots `o_proj` reads them from.
# 4. 1,050,624 parameters with 8 key/value heads and 656,640 with 2: `k_proj` and `v_proj` shrink from $512 \times
#    512$ to $128 \times 512$ (plus biases). The cache holds $2 \cdot$ `num_kv_heads` $\cdot$ `head_dim` numbers per
#    token and layer: 1024 against 256, four times fewer. Each key/value head now serves 4 query heads.
# 5. Nothing meaningful: tokens that its random output layer happens to favour; here the same token 15 times of
#    the 16 that `max_new_tokens` allows. Its projections are initialised with small weights (standard deviation
#    `config.initializer_range`), so every query-key score is close to 0, and a softmax of near-equal scores is
#    near-uniform: the normalised entropy of about 1.0 in the table above.

# %% [markdown]
# ## Appendix: where the model is trained and kept
#
# The first full run of tutorial 02, 06 or 09 trains the translation model into `outputs/tutorial_en_de/`, and later
# runs reuse it (`--quick` trains a smaller one; `--model` takes a checkpoint of your own).
