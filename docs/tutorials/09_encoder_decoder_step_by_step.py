# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 09 · The encoder-decoder, step by step: teacher forcing and greedy decoding
#
# The 2017 Transformer translates in two phases. The **encoder** reads the whole source sentence once and turns
# each source token into a vector that knows its context. The **decoder** writes the target one token at a time:
# at each step it looks at what it has written so far (masked self-attention) and at the source (cross-attention),
# and outputs a probability for every word of the vocabulary.
#
# Training and generation use the decoder differently:
#
# * **training, teacher forcing**: the decoder is given the *correct* previous tokens (the reference shifted one
#   position to the right behind a start token) and predicts every position in one parallel pass; the causal mask
#   keeps each position from seeing the token it must predict;
# * **generation**: there is no reference; the decoder starts from the start token `<s>` (BOS), picks a token,
#   appends it to its input, and repeats until it writes the end token `</s>` (EOS).
#
# This tutorial does both by hand with the English → German model of tutorial 06 and checks them against the
# library: the loss of `model(..., labels=...)` and the output of `model.generate()`.

# %%
import torch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from tutorial_support import Report, add_model_flags, load_translation_model, parse_args, plt, save_figure, table

from hf_attention.modeling_hf_attention import shift_tokens_right
from hf_attention.visualize import token_labels

args = parse_args(
    "Teacher forcing and greedy decoding, token by token, with the cross-attention of each step.", add_model_flags
)
report = Report(args)
torch.manual_seed(0)
model, tokenizer, origin = load_translation_model(args)
report["model_origin"] = origin
config = model.config
print(
    f"start token {tokenizer.convert_ids_to_tokens(config.decoder_start_token_id)!r} "
    f"(id {config.decoder_start_token_id}), end token {tokenizer.eos_token!r} (id {tokenizer.eos_token_id}), "
    f"pad {tokenizer.pad_token!r} (id {tokenizer.pad_token_id})"
)

# %% [markdown]
# ## Teacher forcing: shift right
#
# The labels are the target's tokens followed by `</s>`. The decoder's input is the same sequence moved one step to
# the right, with `<s>` in front: `shift_tokens_right(labels, pad, start)`. Position $t$ of the input holds the
# token *before* label $t$, so the decoder predicts label $t$ from labels $< t$, which is exactly what it will have
# to do at generation time.

# %%
source, target = "Could not open file", "Datei konnte nicht geöffnet werden"
encoded = tokenizer(source, return_tensors="pt")
labels = tokenizer(text_target=target, return_tensors="pt")["input_ids"]  # (1, T), ends with </s>
decoder_inputs = shift_tokens_right(labels, config.pad_token_id, config.decoder_start_token_id)
with torch.no_grad():
    outputs = model(**encoded, decoder_input_ids=decoder_inputs, output_attentions=True)
    loss_library = model(**encoded, labels=labels).loss  # the model shifts the labels itself
log_probs = outputs.logits.log_softmax(-1)[0]  # (T, vocabulary)
label_log_probs = log_probs.gather(-1, labels[0][:, None])[:, 0]
predicted = log_probs.argmax(-1)
input_tokens = token_labels(tokenizer, decoder_inputs[0].tolist(), mathtext=False)
label_tokens = token_labels(tokenizer, labels[0].tolist(), mathtext=False)
predicted_tokens = token_labels(tokenizer, predicted.tolist(), mathtext=False)
print(
    table(
        [
            (t, input_tokens[t], label_tokens[t], f"{label_log_probs[t].exp():.3f}", predicted_tokens[t])
            for t in range(labels.shape[1])
        ],
        ("t", "decoder input", "label (to predict)", "p(label)", "model's top guess"),
    )
)
# The model's training loss may be label-smoothed (config.label_smoothing = ε, 0.1 in the main job): each label keeps
# 1 − ε of the target and ε is spread evenly over the vocabulary, so the loss adds ε · mean_v(−log p[v]).
smoothing = getattr(config, "label_smoothing", 0.0)
loss_by_hand = (1 - smoothing) * -label_log_probs.mean() + smoothing * -log_probs.mean(-1).mean()
# It may also carry the unlikelihood of repeating (config.unlikelihood_weight = α, 2.0 in the main job): at each
# position, for each of the one or two previous labels that differs from the label, α · −log(1 − p[that token]). It
# trains the decoder not to give the token it has just written again ("noch noch noch").
alpha = getattr(config, "unlikelihood_weight", 0.0)
label_ids = labels[0].tolist()
unlikelihood = torch.zeros(())
for t, label in enumerate(label_ids):
    for previous in {label_ids[t - k] for k in (1, 2) if t - k >= 0} - {label}:
        unlikelihood -= torch.log1p(-log_probs[t, previous].exp())
loss_by_hand = loss_by_hand + alpha * unlikelihood / len(label_ids)
report["teacher_forcing_loss_by_hand"] = loss_by_hand.item()
report["teacher_forcing_loss_library"] = loss_library.item()
report["decoder_inputs_are_shifted_labels"] = bool(
    (decoder_inputs[0, 1:] == labels[0, :-1]).all() and decoder_inputs[0, 0] == config.decoder_start_token_id
)
print(
    f"cross-entropy by hand (label smoothing {smoothing}, unlikelihood weight {alpha}) {loss_by_hand.item():.5f}, "
    f"model(..., labels=labels).loss {loss_library.item():.5f}"
)

# %% [markdown]
# One forward pass scores every position at once: that is why Transformers train fast. Where the model's top guess
# differs from the label, the next position is still fed the *correct* token; the model never sees its own
# mistakes during training (the mismatch with generation is called exposure bias).
#
# ## Greedy decoding, token by token
#
# Now without the reference. Start from `<s>`, run the decoder on everything written so far, take the most
# probable next token, append it, and stop at `</s>` (or after a length limit). At each step we also keep the
# cross-attention row of the new position in every decoder layer (mean over heads): which source tokens the decoder
# looked at while choosing that token. For clarity the loop recomputes the whole prefix at every step; `generate()`
# keeps the keys and values of earlier steps in a cache instead, which gives the same tokens.

# %%
max_new_tokens = 10 if args.quick else 24
prefix = torch.tensor([[config.decoder_start_token_id]])
steps = []
with torch.no_grad():
    encoder_outputs = model.get_encoder()(**encoded)  # the encoder runs once
    for _ in range(max_new_tokens):
        step = model(
            encoder_outputs=encoder_outputs,
            attention_mask=encoded["attention_mask"],
            decoder_input_ids=prefix,
            output_attentions=True,
            use_cache=False,
        )
        probabilities = step.logits[0, -1].softmax(-1)
        top = probabilities.topk(3)
        chosen = int(top.indices[0])
        steps.append(
            {
                "token": chosen,
                "probability": top.values[0].item(),
                "alternatives": [(int(i), p.item()) for i, p in zip(top.indices[1:], top.values[1:], strict=True)],
                "cross_attention": torch.stack([w[0, :, -1].mean(0) for w in step.cross_attentions]),
            }
        )  # (L, S)
        prefix = torch.cat([prefix, torch.tensor([[chosen]])], dim=1)
        if chosen == tokenizer.eos_token_id:
            break
source_tokens = token_labels(tokenizer, encoded["input_ids"][0].tolist(), mathtext=False)
rows = []
for t, s in enumerate(steps):
    looked_at = " / ".join(source_tokens[int(i)] for i in s["cross_attention"].argmax(-1))
    others = ", ".join(f"{token_labels(tokenizer, [i], mathtext=False)[0]} {p:.2f}" for i, p in s["alternatives"])
    rows.append(
        (t + 1, token_labels(tokenizer, [s["token"]], mathtext=False)[0], f"{s['probability']:.2f}", others, looked_at)
    )
print(table(rows, ("step", "writes", "p", "next best", "most attended source token, layer 0 / 1 / ...")))
translation = tokenizer.decode(prefix[0], skip_special_tokens=True)
print(f"{source!r} → {translation!r} (reference: {target!r}; identical: {translation == target})")
report["translation_equals_reference"] = translation == target

# %% [markdown]
# Each row is one full run of the decoder: step $t$ takes `<s>` and the $t - 1$ tokens written so far and writes
# token $t$. The last column is the argmax of that step's cross-attention row in each decoder layer. Do not expect it
# to walk through the source from left to right: German reorders English (the verb of "Could not open file" ends up
# last in "Datei konnte nicht geöffnet werden", whose first word translates the last English one), and attention
# weights are not an explanation of the choice anyway (Jain & Wallace 2019; Wiegreffe & Pinter 2019): they show where
# a layer took its values from, not why the model wrote what it wrote.
#
# The last printed line compares the greedy output with the reference used for teacher forcing above; a model can
# produce a correct translation that differs from the reference, and a wrong one, so read both. The main job's model
# (720 steps) writes "Konnte Datei nicht öffnen": not the reference "Datei konnte nicht geöffnet werden", but a
# correct translation in the other usual wording of German interfaces. Teacher-forced, the same model gives the
# reference's first token "Datei" only 0.08 and prefers "Konnte"; once given "Datei", it follows the reference with
# high confidence. Its argmax column shows the reordering: "Konnte" looks at "Could", "Datei" jumps to "file" (in
# layers 1 and 2), "öffnen" back to "open".
#
# **Check 1: this loop is what `generate()` does.** Greedy search in 🤗 `generate()` (with the KV cache) must
# produce the same tokens.

# %%
with torch.no_grad():
    generated = model.generate(**encoded, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1)
report["loop_tokens"] = prefix[0].tolist()
report["generate_tokens"] = generated[0].tolist()
print("by hand:   ", prefix[0].tolist())
print("generate():", generated[0].tolist())

# %% [markdown]
# **Check 2: a step sees only its past.** Run the decoder once, teacher-forced, on the finished output. Because of
# the causal mask, row $t$ of that pass is computed from the same inputs as step $t$ of the loop, so its
# cross-attention row must be the same numbers, however many tokens came after it.

# %%
with torch.no_grad():
    full = model(
        encoder_outputs=encoder_outputs,
        attention_mask=encoded["attention_mask"],
        decoder_input_ids=prefix[:, :-1],
        output_attentions=True,
        use_cache=False,
    )
rows_full = torch.stack([w[0].mean(0) for w in full.cross_attentions])  # (layers, steps, source)
rows_loop = torch.stack([s["cross_attention"] for s in steps], dim=1)  # (layers, steps, source)
report["step_vs_parallel_cross_attention_max_abs"] = (rows_full - rows_loop).abs().max().item()
print(
    f"cross-attention rows, loop vs one parallel pass: max difference "
    f"{report['step_vs_parallel_cross_attention_max_abs']:.1e}"
)

# %% [markdown]
# The figure draws those rows. Row $t$, labelled "$t$: token", is step $t$, which *writes* that token (tutorial 06's
# cross-attention figure labels its rows the same way); the bars on the right are the probability the step gave it.

# %%
written_tokens = [token_labels(tokenizer, [s["token"]], mathtext=False)[0] for s in steps]
n_layers = rows_loop.shape[0]
figure, axes = plt.subplots(
    1,
    n_layers + 1,
    figsize=(4.2 * n_layers + 3, 0.35 * len(steps) + 2.5),
    gridspec_kw={"width_ratios": [3] * n_layers + [2]},
    layout="constrained",
)
for layer in range(n_layers):
    image = axes[layer].imshow(
        rows_loop[layer], cmap="viridis", vmin=0, vmax=1, aspect="auto", interpolation="nearest"
    )
    axes[layer].set_xticks(range(len(source_tokens)), source_tokens, rotation=90)
    axes[layer].set_yticks(range(len(steps)), [f"{t + 1}: {w}" for t, w in enumerate(written_tokens)])
    axes[layer].set_xlabel("source tokens")
    axes[layer].set_title(f"cross-attention, decoder layer {layer} (mean of heads)", fontsize=9)
axes[0].set_ylabel("step: token written")
figure.colorbar(image, ax=axes[n_layers - 1], shrink=0.8)
axes[-1].barh(range(len(steps)), [s["probability"] for s in steps])
axes[-1].set_yticks(range(len(steps)), written_tokens)
axes[-1].invert_yaxis()
axes[-1].set_xlim(0, 1)
axes[-1].set_xlabel("probability of the chosen token")
axes[-1].set_title("Confidence", fontsize=9)
save_figure(
    figure,
    args.figures,
    "09_greedy_steps",
    cross_attention=rows_loop,
    probabilities=[s["probability"] for s in steps],
    tokens=[s["token"] for s in steps],
)

# %% [markdown]
# ## What changes with a cache
#
# Recomputing the prefix runs the decoder over all $t$ positions at step $t$: about $T^2/2$ token positions for a
# $T$-token output where $T$ would do. `generate()` instead keeps each layer's keys and values and feeds only the
# newest token. For an encoder-decoder the container is transformers' `EncoderDecoderCache`: a pair of caches, one for
# the decoder's self-attention, whose keys and values grow by one position per step, and one for cross-attention, whose
# keys and values are projected from the encoder output once, at the first step, and then reused. The causal mask of a
# cached step is the offset-aware one of tutorial 06. The cache is an object that every step fills in place (the
# `cache` argument of `forward`, called `past_key_values` before transformers 5.24). The logits are the same up to
# float rounding:

# %%
cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
logits_cached = []
with torch.no_grad():
    for t in range(prefix.shape[1] - 1):
        cached = model(
            encoder_outputs=encoder_outputs,
            attention_mask=encoded["attention_mask"],
            decoder_input_ids=prefix[:, t : t + 1],
            cache=cache,
            use_cache=True,
        )
        logits_cached.append(cached.logits[0, -1])
    logits_parallel = model(
        encoder_outputs=encoder_outputs,
        attention_mask=encoded["attention_mask"],
        decoder_input_ids=prefix[:, :-1],
        use_cache=False,
    ).logits[0]
report["cached_vs_parallel_logits_max_abs"] = (torch.stack(logits_cached) - logits_parallel).abs().max().item()
print(
    f"logits, one token at a time with a cache vs one parallel pass: max difference "
    f"{report['cached_vs_parallel_logits_max_abs']:.1e}"
)
report["cache_self_attention_length"] = cache.self_attention_cache.get_seq_length()
report["cache_cross_attention_length"] = cache.cross_attention_cache.get_seq_length()
report["source_length"] = encoded["input_ids"].shape[1]
print(
    f"after {prefix.shape[1] - 1} steps the cache holds {report['cache_self_attention_length']} self-attention "
    f"positions and {report['cache_cross_attention_length']} cross-attention positions (the source has "
    f"{report['source_length']} tokens)"
)
report["translation"] = translation
report["steps"] = len(steps)
report["ended_with_eos"] = bool(steps and steps[-1]["token"] == tokenizer.eos_token_id)

# %% [markdown]
# ## Summary
#
# * Training: labels shifted right behind `<s>`, one parallel pass, causal mask; the loss is the mean negative
#   log-probability of the labels.
# * Generation: `<s>`, then one token per decoder run until `</s>`; greedy takes the argmax, beam search keeps the
#   best few prefixes, sampling draws from the distribution (all available through `generate()`).
# * Cross-attention is the decoder's look at the source at every step; the explorer shows it for every layer and
#   head: `hf-attention explore --model DIR --text "Could not open file" --out attention.html`.
#
# Back to the [list of tutorials](../README.md).
#
# ## Exercises
#
# 1. Call `model.generate(**encoded, max_new_tokens=3, do_sample=False, num_beams=1)`. How does its output relate to
#    the loop's `prefix`, and why must it?
# 2. How many decoder positions does the loop without a cache compute in total for an output of $T$ steps, and how
#    many does the cached loop compute? Evaluate both for this run's `len(steps)`.
# 3. Teacher-force the model on its own greedy output (`labels = prefix[:, 1:]`). Show that the loss times the number
#    of labels equals $-\sum_t \log p_t$ over the probabilities `steps[t]["probability"]` of the loop.
# 4. After the cached loop, feed one more token with the same `cache`. Which of
#    `cache.self_attention_cache.get_seq_length()` and `cache.cross_attention_cache.get_seq_length()` changes?
# 5. Encode `[source, "Save"]` as one padded batch and run the greedy loop on row 1, the padded one (its
#    `input_ids` and `attention_mask`). Are the tokens the same as for "Save" alone?

# %%
report.save()

# %% [markdown]
# ## Answers
#
# 1. It is the first 4 ids of `prefix` (the start token and 3 tokens), unless `</s>` came earlier: greedy decoding
#    chooses each token from the prefix before it only, so stopping early cannot change the tokens already chosen.
# 2. Without a cache, step $t$ runs the decoder over $t$ positions: $1 + 2 + \dots + T = T(T+1)/2$ in total. With a
#    cache each step runs one new position: $T$. For the 5 steps of the main job's model (4 tokens and `</s>`), 15
#    against 5.
# 3. They are equal up to float rounding: step $t$ of the loop computes $p(y_t \mid \texttt{<s>}, y_{<t})$, and the
#    causal mask makes the teacher-forced pass compute the same conditional at position $t$, so the mean negative
#    log-probability times the number of labels is $-\sum_t \log p_t$.
# 4. Only the self-attention length grows (by one): the cross-attention cache still holds the source's keys and
#    values, projected once, with as many positions as source tokens.
# 5. Yes, up to float rounding: the padding mask gives the pad keys of row 1 zero weight in the encoder and in the
#    cross-attention, so the logits differ by about $10^{-6}$ at most, which changes no argmax unless two tokens are
#    tied that closely.
