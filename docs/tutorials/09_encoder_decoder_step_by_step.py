# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 09 · The encoder-decoder, step by step: teacher forcing, greedy decoding and beam search
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
# library: the loss of `model(..., labels=...)` and the output of `model.generate()`; then it compares greedy
# decoding with beam search.

# %%
import math

import torch
import torch.nn.functional as F
from transformers.cache_utils import DynamicCache, EncoderDecoderCache
from tutorial_support import Report, add_model_flags, load_translation_model, parse_args, plt, save_figure, table

from hf_attention.inspection.heatmaps import token_labels
from hf_attention.modeling.modeling_hf_attention import shift_tokens_right

args = parse_args(
    "Teacher forcing and greedy decoding, token by token, with the cross-attention of each step.", add_model_flags
)
report = Report(args, "09")
torch.manual_seed(0)
model, tokenizer, origin = load_translation_model(args)
report["model_origin"] = origin
config = model.config
report["vocab_size"] = config.vocab_size
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
# The model's training loss may be label-smoothed (config.label_smoothing = ε, 0.1 here): each label keeps
# 1 − ε of the target and ε is spread evenly over the vocabulary, so the loss adds ε · mean_v(−log p[v]).
smoothing = getattr(config, "label_smoothing", 0.0)
loss_by_hand = (1 - smoothing) * -label_log_probs.mean() + smoothing * -log_probs.mean(-1).mean()
# It may also carry the unlikelihood of repeating (config.unlikelihood_weight = α, 2.0 here): at each
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
report["step_tokens"] = [token_labels(tokenizer, [s["token"]], mathtext=False)[0] for s in steps]
report["step_probabilities"] = [s["probability"] for s in steps]
report["step_alternatives"] = [  # each step's next two candidates: (token, probability)
    [(token_labels(tokenizer, [i], mathtext=False)[0], p) for i, p in s["alternatives"]] for s in steps
]
report["most_attended_source_token"] = [  # [layer][step]
    [source_tokens[int(s["cross_attention"][layer].argmax())] for s in steps]
    for layer in range(len(model.get_decoder().layers))
]

# %% [markdown]
# Each row is one full run of the decoder: step $t$ takes `<s>` and the $t - 1$ tokens written so far and writes
# token $t$. The last column is the argmax of that step's cross-attention row in each decoder layer. Do not expect it
# to walk through the source from left to right: German reorders English (the verb of "Could not open file" ends up
# last in "Datei konnte nicht geöffnet werden", whose first word translates the last English one), and attention
# weights are not an explanation of the choice anyway (Jain & Wallace 2019; Wiegreffe & Pinter 2019): they show where
# a layer took its values from, not why the model wrote what it wrote.
#
# The last printed line compares the greedy output with the reference used for teacher forcing above; a model can
# produce a correct translation that differs from the reference, and a wrong one, so read both.
#
# This tutorial's model (tutorial 06 describes it) writes the reference exactly, in 11 steps. It is sure of some
# tokens ("Datei" 0.69, `</s>` 0.93) and least sure at step 6 ("ge", 0.19). At step 7 it decides the verb: "öff"
# (0.51) against "ändert" (0.10) and "laden" (0.10), that is "geöffnet", "geändert" or "geladen" (opened, changed,
# loaded), and both layers look at "pen", the second piece of "open".
#
# The reordering shows in layer 1: while writing "Datei", the first German word, it looks at "file", the last English
# one; "onn" and "te", pieces of "konnte", look at "ou" and "ld", pieces of "Could"; "nicht" looks at "not". Not
# every row is that clean ("werden" looks at "not" too), so read the column as a rough alignment, not a dictionary.
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
# cached step is the offset-aware one of tutorial 06. (How the cell hands the cache to the model: see the appendix.)
# The logits are the same up to float rounding:

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
# ## Greedy or beam search
#
# Greedy decoding commits to the most probable token at every step. But the probability of a whole output is the
# product of its tokens' probabilities, and a token that looks best now can leave only poor continuations. **Beam
# search** keeps the $k$ best prefixes (the beam) instead of one: at every step it extends each of them by every
# token and keeps the $k$ best of all those extensions; finished hypotheses (ending in `</s>`) are set aside, and
# the best of them is the output. `generate()` ranks them by their summed log-probability divided by their length
# to the power `length_penalty`: with 1.0 (the project's recipe, which this model keeps) that is the mean
# log-probability per token; with 0 it is the plain sum, which favours short outputs. The recipe translates with 4
# beams.
#
# Our sentence and eleven more UI strings, each decoded both ways and each output scored by one teacher-forced pass
# over it:


# %%
def token_log_probs(encoding, tokens: torch.Tensor) -> torch.Tensor:
    """log p of each token of an output after its start token, teacher-forced in one pass."""
    with torch.no_grad():
        logits = model(**encoding, decoder_input_ids=tokens[:, :-1], use_cache=False).logits
    return logits[0].log_softmax(-1).gather(-1, tokens[0, 1:, None])[:, 0]


def decode(text: str, beams: int, length_penalty: float = 1.0) -> dict:
    """The output of `generate()` with `beams` beams (1: greedy), its length in tokens and its log-probability."""
    encoding = tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        tokens = model.generate(
            **encoding,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            num_beams=beams,
            length_penalty=length_penalty,
        )
    log_p = token_log_probs(encoding, tokens)
    return {
        "output": tokenizer.decode(tokens[0], skip_special_tokens=True),
        "tokens": len(log_p),
        "sum_log_p": log_p.sum().item(),
        "mean_log_p": log_p.mean().item(),
    }


BEAMS = 4
STRINGS = [
    source,
    "Save changes before closing?",
    "The file could not be found",
    "Delete the selected items",
    "Show hidden files",
    "Open recent project",
    "Select a folder",
    "Connection to the server failed",
    "Do you want to overwrite the existing file?",
    "Print the current page",
    "Check for updates",
    "Close all windows",
]
decodings = []
for text in STRINGS:
    row = {"source": text}
    for name, beams in (("greedy", 1), ("beam", BEAMS)):
        decoded = decode(text, beams)
        row[name] = decoded.pop("output")
        row.update({f"{name}_{key}": value for key, value in decoded.items()})
    decodings.append(row)
print(
    table(
        [
            (
                r["source"],
                r["greedy"],
                f"{r['greedy_mean_log_p']:.3f}",
                "(same)" if r["beam"] == r["greedy"] else r["beam"],
                f"{r['beam_mean_log_p']:.3f}",
            )
            for r in decodings
        ],
        ("source", "greedy", "mean log p", f"{BEAMS} beams", "mean log p"),
    )
)
differ = [r for r in decodings if r["beam"] != r["greedy"]]
report["beams"] = BEAMS
report["strings"] = len(STRINGS)
report["greedy_vs_beam"] = decodings
report["beam_differs"] = len(differ)
report["beam_scores_higher_where_different"] = sum(r["beam_mean_log_p"] > r["greedy_mean_log_p"] for r in differ)
print(
    f"beam search differs from greedy on {len(differ)} of {len(STRINGS)} strings, and scores higher (mean log p) on "
    f"{report['beam_scores_higher_where_different']} of those"
)

# %% [markdown]
# Where the two outputs are the same, greedy was already what a beam of 4 finds best. Where they differ, the beam's
# output normally has the better score, the mean log-probability, though beam search does not promise it: it prunes
# to 4 prefixes at every step and can drop the prefix that greedy would have completed. Neither finds the most
# probable output of all (that would take a search over every sequence), and the most probable output is not always
# the best translation: the project's recipe chose its length penalty by the BLEU of the validation split (1.0 out
# of 0.6, 1.0 and 1.4), not by probability, and 4 beams added 1.6 BLEU to it against greedy (docs/training.md, "The
# translation recipe").
#
# With this model, 4 beams change 9 of the 12 outputs and score higher on 8 of the 9. Some translations get better
# ("Select a folder": "Wähle einfügen" → "Eine Ordner auswählen", mean log p −1.27 → −0.83). On "Do you want to
# overwrite the existing file?" the beam's output scores lower (−1.69 → −1.79): the prefix that greedy completed was
# pruned. And a better score is not a better translation: exercise 6 finds a wrong output that outscores a right
# one.
#
# ## Summary
#
# * Training: labels shifted right behind `<s>`, one parallel pass, causal mask. The cross-entropy is the mean
#   negative log-probability of the labels; this model trains on more than that (label smoothing 0.1, which adds
#   0.1 × the mean of −log p over the whole vocabulary, and the unlikelihood of repeating a token, weight 2.0), so
#   its `loss` is not the mean −log p: the first section computes all of it by hand.
# * Generation: `<s>`, then one token per decoder run until `</s>`; greedy takes the argmax, beam search keeps the
#   best few prefixes, sampling draws from the distribution (all available through `generate()`).
# * Cross-attention is the decoder's look at the source at every step; the explorer shows it for every layer and
#   head: [tutorial 06's page](../figures/06_explorer.html) is this model on this sentence, and
#   `hf-attention explore --model DIR --text "Could not open file" --out attention.html` writes one for any model.
#
# **Next:** [10 · a decoder-only language model](10_decoder_only_language_model.py), or back to the
# [list of tutorials](../README.md).
#
# ## Exercises
#
# 1. Call `model.generate(**encoded, max_new_tokens=3, do_sample=False, num_beams=1)`. How does its output relate to
#    the loop's `prefix`, and why must it?
# 2. How many decoder positions does the loop without a cache compute in total for an output of $T$ steps, and how
#    many does the cached loop compute? Evaluate both for this run's `len(steps)`.
# 3. Teacher-force the model on its own greedy output (`labels = prefix[:, 1:]`) and compare the loss times the
#    number of labels with $-\sum_t \log p_t$ over the probabilities `steps[t]["probability"]` of the loop. Are they
#    equal for this model? Which quantity computed from the same logits is?
# 4. After the cached loop, feed one more token with the same `cache`. Which of
#    `cache.self_attention_cache.get_seq_length()` and `cache.cross_attention_cache.get_seq_length()` changes?
# 5. Encode `[source, "Save"]` as one padded batch and run the greedy loop on row 1, the padded one (its
#    `input_ids` and `attention_mask`). Are the tokens the same as for "Save" alone?
# 6. Rerun the greedy/beam comparison with `length_penalty=0.0`, so that beam search ranks by the summed
#    log-probability, and with 8 beams instead of 4. Which outputs change, and in which direction?

# %% [markdown]
# ## Answers
#
# 1. It is the first 4 ids of `prefix` (the start token and 3 tokens), unless `</s>` came earlier: greedy decoding
#    chooses each token from the prefix before it only, so stopping early cannot change the tokens already chosen.
#    The cell below runs it: the same ids as the loop's first 4.
# 2. Without a cache, step $t$ runs the decoder over $t$ positions: $1 + 2 + \dots + T = T(T+1)/2$ in total. With a
#    cache each step runs one new position: $T$. For this run's 11 steps (10 tokens and `</s>`), 66 against 11.
# 3. No: this model's loss is not the plain cross-entropy. It adds label smoothing
#    ($\varepsilon = 0.1$: the loss is $(1 - \varepsilon)$ × the cross-entropy + $\varepsilon$ × the mean of
#    $-\log p$ over the whole vocabulary, which is large because most tokens are improbable) and the unlikelihood of
#    repeating one of the two previous tokens (weight 2.0), as the first section computes. The cell below prints all
#    of it. For this model, on its 11 labels, the loss times the labels is 17.14 against $-\sum_t \log p_t = 6.21$;
#    per label, the smoothing term is 1.04 (the cross-entropy term 0.51, unlikelihood 0.014).
#    What does equal $-\sum_t \log p_t$, up to float rounding, is the plain cross-entropy of
#    the same logits, summed (`F.cross_entropy(logits, labels, reduction="sum")`): step $t$ of the loop computes
#    $p(y_t \mid \texttt{<s>}, y_{<t})$, and the causal mask makes the teacher-forced pass compute the same
#    conditional at position $t$. The first section's formula (smoothing and unlikelihood added by hand) gives the
#    model's loss on these labels too; for a model trained without either, all three numbers agree.
# 4. Only the self-attention length grows (by one): the cross-attention cache still holds the source's keys and
#    values, projected once, with as many positions as source tokens. Measured in the cell below: self-attention
#    11 → 12 positions, cross-attention 8 → 8, the source's 8 tokens.
# 5. Yes, up to float rounding: the padding mask gives the pad keys of row 1 zero weight in the encoder and in the
#    cross-attention, so the logits differ only by rounding, which changes no argmax unless two tokens are tied that
#    closely. Measured in the cell below: "Save", padded with 6 pad tokens, writes the same 3 tokens (`</s>`
#    included) as alone ("Speichern"), and its logits differ by at most 1.3e-6.
# 6. With this model, 8 beams change 3 of the 12 outputs, for instance "The file could not be found": "Die Datei
#    koppelte nicht gespeichert werden" → "Die-Datei konnte nicht gespeichert werden", mean log p −0.95 against
#    −0.98 with 4 beams, a higher score for "could not be saved". With `length_penalty=0.0` 3 change, each to a
#    shorter output, among them "Close all windows": "Alle schließen schließen", 4 tokens with `</s>` and a summed
#    log-probability of −4.66, against −6.71 for the 6 of the right "Alle Fenster schließen" (mean −1.16 against
#    −1.12). Every token adds a negative
#    log-probability, so ranking by the sum favours short outputs; dividing by the length (1.0) removes that bias,
#    and the recipe chose 1.0 on its validation split.

# %% [markdown]
# The numbers of these answers come from the cell below.

# %%
own_labels = prefix[:, 1:]  # the greedy output, </s> included, as labels
with torch.no_grad():
    own = model(**encoded, labels=own_labels)
own_log_probs = own.logits[0].log_softmax(-1)
minus_sum_log_p = -sum(math.log(s["probability"]) for s in steps)
plain_cross_entropy = F.cross_entropy(own.logits[0], own_labels[0], reduction="sum").item()
own_ids = own_labels[0].tolist()
own_unlikelihood = sum(
    -math.log1p(-own_log_probs[t, previous].exp().item())
    for t, label in enumerate(own_ids)
    for previous in {own_ids[t - k] for k in (1, 2) if t - k >= 0} - {label}
)
terms = {  # per label: the three parts of the model's loss
    "cross_entropy": (1 - smoothing) * plain_cross_entropy / len(own_ids),
    "smoothing": smoothing * -own_log_probs.mean(-1).mean().item(),
    "unlikelihood": alpha * own_unlikelihood / len(own_ids),
}
own_by_hand = sum(terms.values())
exercise_3 = {
    "labels": len(own_ids),
    "loss_times_labels": own.loss.item() * len(own_ids),
    "minus_sum_log_p": minus_sum_log_p,
    "plain_cross_entropy_sum": plain_cross_entropy,
    "loss_by_hand": own_by_hand,
    "loss_library": own.loss.item(),
    "label_smoothing": smoothing,
    "unlikelihood_weight": alpha,
    "terms_per_label": terms,
}
report["exercise_3"] = exercise_3
# Exercise 6: the 4-beam outputs against 8 beams, and against 4 beams ranked by the summed log-probability.
exercise_6 = {}
for name, beams, length_penalty in (("8_beams", 2 * BEAMS, 1.0), ("length_penalty_0", BEAMS, 0.0)):
    exercise_6[name] = []
    for row in decodings:
        other = decode(row["source"], beams, length_penalty)
        if other["output"] != row["beam"]:
            exercise_6[name].append(
                {"source": row["source"], "beam": row["beam"], **other}
                | {f"beam_{key}": row[f"beam_{key}"] for key in ("tokens", "sum_log_p", "mean_log_p")}
            )
    changes = "; ".join(f"{c['source']!r}: {c['beam']!r} → {c['output']!r}" for c in exercise_6[name])
    print(f"{name}: {len(exercise_6[name])} of {len(decodings)} outputs change. {changes}")
report["exercise_6"] = exercise_6
report["exercise_6_settings"] = {"beams": 2 * BEAMS, "length_penalty": 0.0}
# Exercise 1: generate() stopped after 3 new tokens is the start of the loop's output.
with torch.no_grad():
    short = model.generate(**encoded, max_new_tokens=3, do_sample=False, num_beams=1)
report["exercise_1"] = {"tokens": short[0].tolist(), "prefix_start": prefix[0, : short.shape[1]].tolist()}
# Exercise 4: one more token through the cache of the cached loop.
lengths_before = [cache.self_attention_cache.get_seq_length(), cache.cross_attention_cache.get_seq_length()]
with torch.no_grad():
    model(
        encoder_outputs=encoder_outputs,
        attention_mask=encoded["attention_mask"],
        decoder_input_ids=prefix[:, -1:],
        cache=cache,
        use_cache=True,
    )
lengths_after = [cache.self_attention_cache.get_seq_length(), cache.cross_attention_cache.get_seq_length()]
report["exercise_4"] = {"self_attention": [lengths_before[0], lengths_after[0]]}
report["exercise_4"]["cross_attention"] = [lengths_before[1], lengths_after[1]]


# Exercise 5: the greedy loop on a padded row of a batch, against the same string alone.
def greedy_loop(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[list[int], list[torch.Tensor]]:
    """The loop of the greedy section without its bookkeeping: the tokens and each step's next-token logits."""
    tokens, logits = [config.decoder_start_token_id], []
    with torch.no_grad():
        memory = model.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)
        for _ in range(max_new_tokens):
            step_logits = model(
                encoder_outputs=memory,
                attention_mask=attention_mask,
                decoder_input_ids=torch.tensor([tokens]),
                use_cache=False,
            ).logits[0, -1]
            logits.append(step_logits)
            tokens.append(int(step_logits.argmax()))
            if tokens[-1] == tokenizer.eos_token_id:
                break
    return tokens, logits


batch = tokenizer([source, "Save"], return_tensors="pt", padding=True)
alone = tokenizer("Save", return_tensors="pt")
padded_tokens, padded_logits = greedy_loop(batch["input_ids"][1:], batch["attention_mask"][1:])
alone_tokens, alone_logits = greedy_loop(alone["input_ids"], alone["attention_mask"])
report["exercise_5"] = {
    "pad_positions": int((batch["attention_mask"][1] == 0).sum()),
    "same_tokens": padded_tokens == alone_tokens,
    "tokens": len(alone_tokens) - 1,
    "output": tokenizer.decode(alone_tokens, skip_special_tokens=True),
    "logits_max_abs": max((a - b).abs().max().item() for a, b in zip(padded_logits, alone_logits, strict=False)),
}
print(
    f"exercise 1: generate(max_new_tokens=3) {short[0].tolist()}, the loop's prefix {prefix[0, :4].tolist()}; "
    f"exercise 4: self-attention cache {lengths_before[0]} → {lengths_after[0]}, cross-attention "
    f"{lengths_before[1]} → {lengths_after[1]}; exercise 5: 'Save' padded by {report['exercise_5']['pad_positions']} "
    f"in a batch, the same tokens: {report['exercise_5']['same_tokens']}, logits differ by at most "
    f"{report['exercise_5']['logits_max_abs']:.1e}"
)
print(
    f"{len(own_ids)} labels: loss × labels {exercise_3['loss_times_labels']:.2f}; −Σ log p_t {minus_sum_log_p:.2f}; "
    f"plain cross-entropy, summed {plain_cross_entropy:.2f}; the model's loss {own.loss.item():.4f}, by hand with "
    f"smoothing {smoothing} and unlikelihood weight {alpha} {own_by_hand:.4f} = "
    + " + ".join(f"{v:.4f} ({k})" for k, v in terms.items())
)

# %% [markdown]
# ## Self-test
#
# 1. During training, what is the decoder's input for the labels "Datei konnte nicht geöffnet werden `</s>`", and
#    which function makes it?
# 2. Why can one teacher-forced pass score the whole target at once, while generation needs one decoder run per
#    token?
# 3. In an `EncoderDecoderCache`, which part grows with each generated token, and which is computed once?
# 4. What does beam search keep that greedy decoding does not, and does a higher mean log-probability make a better
#    translation?
# 5. Why does ranking finished beams by the summed log-probability favour short outputs?

# %% [markdown]
# ## Answers to the self-test
#
# 1. The labels moved one position to the right behind the start token `<s>` (the last label, `</s>`, is left out):
#    `shift_tokens_right(labels, pad, start)`.
# 2. The causal mask: position $t$ sees only the correct tokens before it, which teacher forcing has for the whole
#    target. Generation has no target; each token must be chosen before it can be fed back.
# 3. The self-attention cache gains the new token's keys and values at each step; the cross-attention cache holds
#    the source's keys and values, projected from the encoder output at the first step and reused.
# 4. It keeps the $k$ best prefixes instead of one. A higher score is not a better translation: summed, the
#    log-probability of the wrong "Alle schließen schließen" beats that of the right "Alle Fenster schließen"
#    (exercise 6).
# 5. Each token adds a log-probability below 0, so a longer output sums lower; dividing by the length
#    (`length_penalty=1.0`) removes that.

# %% [markdown]
# ## Appendix: how the cache is handed to the model
#
# The cache is an object that every step fills in place (the `cache` argument of `forward`, called `past_key_values`
# before transformers 5.24). The cell of *What changes with a cache* makes an empty
# `EncoderDecoderCache(DynamicCache(), DynamicCache())`, passes it to each step with `use_cache=True`, and afterwards
# reads the length of its self-attention cache and of its cross-attention cache.

# %%
report.save()
