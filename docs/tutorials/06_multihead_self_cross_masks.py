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
import math

import torch
from tutorial_support import Report, add_model_flags, load_translation_model, parse_args, plt, save_figure, table

import hf_attention
from hf_attention.attention import eager_attention_forward
from hf_attention.masks import causal_mask, combine, padding_mask
from hf_attention.visualize import attention_weights, token_labels

args = parse_args("Multi-head, self- and cross-attention and masks, on an English→German model.", add_model_flags)
report = Report(args)
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
# * **Both**, combined with a logical AND, for a padded batch in a decoder. (Decoders pad on the *left*, so that
#   every row's last token is a real one and generation can continue all rows at once.) In the third picture the
#   first three rows are empty: pad positions that may see no key at all.
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
# An English → German Transformer of the 2017 kind (post-norm, sinusoidal positions), trained on the user-interface
# strings of the machine's gettext catalogs by `training.train`, the main job of this project. If the main job's
# export is not on this machine, a much shorter run is trained here first (a minute or two): its translations are
# poor, but its attention already has structure.

# %%
model, tokenizer, origin = load_translation_model(args)
config = model.config
report["model_origin"] = origin
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
# tokens); nothing downstream reads their outputs. A query that may see no key at all, such as a pad position at the
# start of a left-padded decoder row under the causal mask, gets a row of zeros rather than a uniform average or
# NaN (tutorial 04).

# %%
labels_batch = token_labels(tokenizer, batch["input_ids"][0].tolist())
figure, axes = plt.subplots(1, 2, figsize=(10, 4), layout="constrained")
image = heatmap(
    axes[0],
    single.attentions[0][0].mean(0),
    token_labels(tokenizer, alone["input_ids"][0].tolist()),
    token_labels(tokenizer, alone["input_ids"][0].tolist()),
    f"'{short}' alone (layer 0, mean of heads)",
)
heatmap(axes[1], weights_short[0].mean(0), labels_batch, labels_batch, f"'{short}' in a padded batch")
figure.colorbar(image, ax=axes, shrink=0.8)
save_figure(
    figure, args.figures, "06_padding", alone=single.attentions[0][0].mean(0), batched=weights_short[0].mean(0)
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
# Why several small heads instead of one big one? Each head has its own projections, so each can match queries and
# keys on a different relation (the previous token, the same word, the end of the sentence), and a softmax can
# only pick one kind of relation at a time. With the same total width the cost is the same as one head. (With
# `num_key_value_heads` < `num_attention_heads`, groups of query heads share one key/value head: grouped-query
# attention, which shrinks the decoder's cache.)
#
# ## The heads of the trained model
#
# Every encoder layer × head for one sentence (self-attention: tokens × tokens), and the decoder's self-attention,
# whose upper triangle is empty: the causal mask at work.

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
for row, (name, index, weights, rows, columns) in enumerate(grid):
    for head in range(H):
        heatmap(axes[row, head], weights[head], rows, columns, f"{name} layer {index}, head {head}")
save_figure(figure, args.figures, "06_heads", encoder=torch.stack(encoder_layers), decoder=torch.stack(decoder_layers))

# %% [markdown]
# ## Cross-attention: where the decoder looks while it writes
#
# For each sentence the model translates greedily; row $i$ of the cross-attention is the decoding step that
# writes target token $i$ (its input is the start token `<s>` followed by the target so far), and its columns are
# the source tokens. Averaged over heads, the weight tends to move through the source as the target is written:
# a soft alignment, learned from nothing but pairs of sentences (Bahdanau et al. 2015 made this visible first).

# %%
sentences = ["Could not open file", "Show hidden files", "Delete the selected files", "Save the document"]
if args.quick:
    sentences = sentences[:2]
cross = []
for text in sentences:
    layers, rows, columns = attention_weights(model, tokenizer, text, kind="cross", max_new_tokens=16)
    cross.append((text, layers, rows, columns))
    with torch.no_grad():  # the same greedy translation attention_weights generated, as text
        generated = model.generate(**tokenizer(text, return_tensors="pt"), max_new_tokens=16, do_sample=False)
    print(f"{text!r} → {tokenizer.decode(generated[0], skip_special_tokens=True)!r}")

n_layers = len(cross[0][1])
figure, axes = plt.subplots(
    len(cross), n_layers, figsize=(3.4 * n_layers + 1, 3.0 * len(cross)), squeeze=False, layout="constrained"
)
for row, (text, layers, rows, columns) in enumerate(cross):
    for index, weights in enumerate(layers):
        heatmap(
            axes[row, index],
            weights.mean(0),
            rows,
            columns,
            f"decoder layer {index}, mean of heads" if row == 0 else "",
            vmax=1,
        )
    axes[row, 0].set_ylabel(repr(text), fontsize=9)
save_figure(
    figure,
    args.figures,
    "06_cross_attention",
    **{f"sentence{i}_layer{j}": w.mean(0) for i, (_, layers, _, _) in enumerate(cross) for j, w in enumerate(layers)},
)

# %% [markdown]
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
    mean_normalised_entropy(attention_weights(untrained, tokenizer, text, kind="cross", target=" ".join(rows[1:]))[0])
    for text, _, rows, _ in cross
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
# Training has made the cross-attention markedly sharper than the uniform look of a fresh model; how sharp depends
# on the model and on how long it trained. To look at every layer and head interactively, write the explorer page
# for any checkpoint:
#
# ```bash
# hf-attention explore --model outputs/translation_en_de/final --text "Could not open file" --out attention.html
# ```
#
# **Next:** [08 · why attention: cost and path length](08_why_attention.py).

# %%
report.save()
