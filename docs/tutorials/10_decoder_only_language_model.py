# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 10 · A decoder-only language model, built up step by step
#
# Tutorials 06 and 09 ran an encoder-decoder, the 2017 Transformer that translates. Most language models today keep
# only its decoder: GPT, Llama and their kin read a text and write its continuation one token at a time, with nothing
# but causal self-attention. This tutorial builds a decoder-only language model from nothing, one idea at a time, in
# the order of Karpathy's "Let's build GPT" lecture: a bigram table, an average over the past made with a triangular
# matrix, one head of self-attention, and Transformer blocks with multi-head attention, a feed-forward network,
# residual connections and LayerNorm. Each step is trained on the same small text, made by this script (the same on
# every machine, nothing downloaded), and measured. Then the model writes text from a fixed seed, one forward pass is
# traced with the shape of every tensor, and the weights are loaded into the library's decoder family
# (`AutoModelForCausalLM` from an hf-attention config), which computes the same logits. It ends with the three
# families, encoder-only, decoder-only and encoder-decoder, side by side, and with the model in the attention explorer.
#
# Run it: `python docs/tutorials/10_decoder_only_language_model.py` (add `--quick` for a shorter version).

# %%
import math
import random
import re
import tempfile

import numpy as np
import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from torch import nn
from tutorial_support import Report, parse_args, plt, save_figure, table

import hf_attention
from hf_attention.inspection.explorer import explore

args = parse_args("A decoder-only language model built step by step, checked against hf-attention's decoder family.")
report = Report(args, "10")
torch.set_num_threads(1)  # tiny models: one thread is as fast, and leaves the machine's other cores alone
torch.manual_seed(0)

# %% [markdown]
# ## The text: a small language with long-range agreement
#
# The model learns from text that this cell writes: 2000 sentences of one pattern, each naming a person, a colour and
# a thing, then saying the same again the other way round:
#
# ```text
# eve has a pink jar. the jar of eve is pink.
# ```
#
# The first half is a free choice (8 names, 6 colours, 6 things: 288 sentences, equally likely); the second half is
# fixed by the first. A second set of 200 sentences, from another seed, is held out for validation.
#
# A model that looks only at the last character or two can learn the spelling and the fixed words, but not which
# thing, name and colour come back. Measured on the held-out sentences (the cell below prints it), the thing was
# written 9-10 characters earlier, the colour 26-31 and the name 29-34, counted from the first letter of a word's
# first mention to the first letter of its second. Reaching that far back is the job attention was made for.
#
# The characters are the tokens (27 of them). Since the generator is known, so is the best loss any model can reach:
# the 5.66 nats of the choice ($\ln 288$), spread over the characters of a sentence.

# %%
NAMES = ["ada", "bob", "cy", "dot", "eve", "flo", "gus", "hal"]
COLOURS = ["red", "blue", "green", "pink", "black", "white"]
THINGS = ["box", "cup", "hat", "jar", "kite", "mug"]
PATTERN = re.compile(r"(\w+) has a (\w+) (\w+)\. the (\w+) of (\w+) is (\w+)\.")


def make_text(sentences: int, seed: int) -> str:
    """`sentences` lines of "NAME has a COLOUR THING. the THING of NAME is COLOUR.", from random.Random(seed)."""
    generator = random.Random(seed)
    lines = []
    for _ in range(sentences):
        name, colour, thing = generator.choice(NAMES), generator.choice(COLOURS), generator.choice(THINGS)
        lines.append(f"{name} has a {colour} {thing}. the {thing} of {name} is {colour}.\n")
    return "".join(lines)


train_text, validation_text = make_text(2000, seed=0), make_text(200, seed=1)
characters = sorted(set(train_text))
vocab_size = len(characters)
stoi = {c: i for i, c in enumerate(characters)}


def encode(text: str) -> torch.Tensor:
    return torch.tensor([stoi[c] for c in text])


def decode(ids) -> str:
    return "".join(characters[int(i)] for i in ids)


train_data, validation_data = encode(train_text), encode(validation_text)
choices = len(NAMES) * len(COLOURS) * len(THINGS)
# How far back each word of the second half was first written: from the first letter of its first mention to the
# first letter of its second, over the held-out sentences.
distances = {"thing": [], "colour": [], "name": []}
for line in validation_text.splitlines():
    match = PATTERN.match(line)
    for word, (first, second) in zip(distances, ((3, 4), (2, 6), (1, 5)), strict=True):
        distances[word].append(match.start(second) - match.start(first))
report["text"] = {
    "train_sentences": len(train_text.splitlines()),
    "validation_sentences": len(validation_text.splitlines()),
    "names_colours_things": [len(NAMES), len(COLOURS), len(THINGS)],
    "choices": choices,
    "nats_per_sentence": math.log(choices),
    "characters": len(train_text),
    "validation_characters": len(validation_text),
    "vocab_size": vocab_size,
    "first_line": train_text.splitlines()[0],
    "copy_distance_range": {word: [min(d), max(d)] for word, d in distances.items()},
}
print(f"{len(train_text)} training characters, {len(validation_text)} for validation, {vocab_size} distinct:")
print(repr("".join(characters)))
print(train_text[:135])
print("characters back to the first mention:", report["text"]["copy_distance_range"])

# %% [markdown]
# Training reads random windows of `CONTEXT` = 64 characters (1.4 sentences of the text) and learns to predict
# each next character: the input is a window, the target the same window shifted by one. A batch is a
# (batch, 64) tensor of token ids and its (batch, 64) targets.

# %%
CONTEXT = 64  # the longest input, T
WIDTH = 32  # the model width, E (C in the lecture)
HEADS = 4
LAYERS = 2
BATCH = 16 if args.quick else 32
# The same budget for every step of the build-up, so that what one model gains over another is the model's doing,
# not more training: the same steps of the same batch, the same windows in the same order.
BUDGET = 400 if args.quick else 2500
STEPS = dict.fromkeys(("bigram", "averaging", "single head", "blocks"), BUDGET)
EVAL_EVERY = 50 if args.quick else 100
report["settings"] = {
    "context": CONTEXT,
    "width": WIDTH,
    "heads": HEADS,
    "head_width": WIDTH // HEADS,
    "layers": LAYERS,
    "batch": BATCH,
    "budget_steps": BUDGET,
    "eval_every": EVAL_EVERY,
}


def get_batch(data: torch.Tensor, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """BATCH random windows of the text (B, T) and the next character at every position (B, T)."""
    starts = torch.randint(len(data) - CONTEXT - 1, (BATCH,), generator=generator)
    inputs = torch.stack([data[s : s + CONTEXT] for s in starts.tolist()])
    targets = torch.stack([data[s + 1 : s + CONTEXT + 1] for s in starts.tolist()])
    return inputs, targets


inputs, targets = get_batch(train_data, torch.Generator().manual_seed(0))
print(f"inputs {tuple(inputs.shape)}, targets {tuple(targets.shape)}")
print(repr(decode(inputs[0][:24])), "→", repr(decode(targets[0][:24])))

# %% [markdown]
# Three measurements for every model below, on the 200 held-out sentences, each fed from its start (after a newline)
# so that the model sees everything the sentence has said so far: the **validation loss** (mean cross-entropy per
# character, the final newline included), against the floor of $\ln 288$ per sentence; the **copy accuracy**, the
# share of the second half's three words (the thing, the name, the colour: what must be copied from the first half)
# whose first letter gets the model's highest probability; and, further below, the text it writes.

# %%
validation_sentences = validation_text.splitlines()
longest = max(len(line) for line in validation_sentences) + 1
validation_inputs = torch.full((len(validation_sentences), longest), stoi["\n"])
validation_targets = torch.full((len(validation_sentences), longest), -100)  # -100: not scored (past the end)
copy_positions = []  # (sentence, the input position that predicts a first letter of the second half, its source)
for row, line in enumerate(validation_sentences):
    ids = encode("\n" + line + "\n")
    validation_inputs[row, : len(ids) - 1] = ids[:-1]  # the causal mask keeps the padding after a sentence unseen
    validation_targets[row, : len(ids) - 1] = ids[1:]
    match = PATTERN.match(line)
    for group, source_group in ((4, 3), (5, 1), (6, 2)):  # the thing, the name, the colour, and where they were
        # input position p predicts the character at line index p (the newline is position 0); the source word's
        # letters are at input positions start + 1 … end
        copy_positions.append((row, match.start(group), match.start(source_group) + 1, match.end(source_group) + 1))
copy_rows, copy_columns, source_starts, source_ends = torch.tensor(copy_positions).T
loss_floor = len(validation_sentences) * math.log(choices) / int((validation_targets != -100).sum())
report["loss_floor"] = loss_floor
print(f"the best possible validation loss: ln {choices} per sentence = {loss_floor:.3f} nats per character")


def evaluate(model: nn.Module) -> tuple[float, float]:
    """(validation loss, copy accuracy) on the held-out sentences."""
    with torch.no_grad():
        logits = model(validation_inputs)
    loss = nn.functional.cross_entropy(logits.flatten(0, 1), validation_targets.flatten(), ignore_index=-100)
    right = logits[copy_rows, copy_columns].argmax(-1) == validation_targets[copy_rows, copy_columns]
    return loss.item(), right.float().mean().item()


def train(model: nn.Module, name: str, learning_rate: float = 1e-2) -> dict:
    """AdamW on random windows; the validation loss every EVAL_EVERY steps; returns the curves and the scores."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    generator = torch.Generator().manual_seed(1)
    curve = []
    for step in range(STEPS[name] + 1):
        if step % EVAL_EVERY == 0 or step == STEPS[name]:
            curve.append((step, *evaluate(model)))
        if step == STEPS[name]:
            break
        x, y = get_batch(train_data, generator)
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    # At a constant learning rate the scores wobble from one evaluation to the next: the last fifth of training's
    # evaluations, their mean and their range, make a score that one lucky or unlucky evaluation does not decide.
    last = [(loss, copy) for step, loss, copy in curve if step >= 0.8 * STEPS[name]]
    losses, copies = zip(*last, strict=True)
    result = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": STEPS[name],
        "validation_loss": curve[-1][1],
        "copy_accuracy": curve[-1][2],
        "last_fifth": {
            "evaluations": len(last),
            "from_step": next(step for step, *_ in curve if step >= 0.8 * STEPS[name]),
            "loss": [sum(losses) / len(losses), min(losses), max(losses)],
            "copy": [sum(copies) / len(copies), min(copies), max(copies)],
        },
        "curve": curve,
    }
    print(
        f"{name}: {result['parameters']} parameters, {result['steps']} steps, validation loss "
        f"{result['validation_loss']:.3f} (floor {loss_floor:.3f}), copy accuracy {result['copy_accuracy']:.3f}"
    )
    return result


results = {}

# %% [markdown]
# ## Step 1: the bigram model
#
# The simplest language model is a table: row $i$ holds the logits of the character that follows character $i$. An
# `nn.Embedding(V, V)` is exactly that. It sees one character of context, so it can learn that "h" is followed by "a"
# or "e" and that "jar" ends in "r", but the choice of the next word's first letter is a guess from the letter before
# it.


# %%
class Bigram(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """(B, T) ids → (B, T, V) logits of the next character."""
        return self.table(idx)


torch.manual_seed(0)
bigram = Bigram()
results["bigram"] = train(bigram, "bigram", learning_rate=1e-1)

# %% [markdown]
# ## Step 2: averaging the past, with a triangular matrix
#
# To use more context, the simplest thing is to average it: let position $t$ see the mean of the vectors at positions
# $0 \dots t$, nothing after $t$ (the future is what it must predict). A loop does that, and so does one matrix
# product: multiply the (T, E) matrix of vectors by the lower-triangular (T, T) matrix whose row $t$ holds $1/(t+1)$
# in its first $t + 1$ places. The same matrix comes out of a softmax over scores of 0, with $-\infty$ above the
# diagonal: a causal mask over equal scores. That third form is the one to keep, since attention will replace the
# equal scores by learned ones. The three, on a random (B, T, E) = (4, 8, 32) tensor:

# %%
x = torch.randn(4, 8, WIDTH)
T = x.shape[1]
averaged_loop = torch.stack([x[:, : t + 1].mean(1) for t in range(T)], dim=1)  # one position at a time
tril = torch.tril(torch.ones(T, T))
averaged_matrix = (tril / tril.sum(1, keepdim=True)) @ x  # (T, T) @ (B, T, E) → (B, T, E)
scores = torch.zeros(T, T).masked_fill(tril == 0, float("-inf"))
causal_average = torch.softmax(scores, dim=-1)
averaged_softmax = causal_average @ x
report["averaging_input_shape"] = list(x.shape)
report["averaging_matrix_vs_loop"] = (averaged_matrix - averaged_loop).abs().max().item()
report["averaging_softmax_vs_loop"] = (averaged_softmax - averaged_loop).abs().max().item()
print(causal_average[:4, :4])
print(
    f"matrix vs loop: {report['averaging_matrix_vs_loop']:.1e}; "
    f"masked softmax vs loop: {report['averaging_softmax_vs_loop']:.1e}"
)

# %% [markdown]
# The model of this step embeds each character (token embedding) and its position (a learned position embedding, one
# row per position up to `CONTEXT`), averages the past of every position that way, adds the position's own vector
# back and maps the result to logits. Every position now sees all of its context, but as a bag: the average weighs a
# letter at the start of the window as much as the letter just before.


# %%
def causal_mask(length: int) -> torch.Tensor:
    """(T, T) True on and below the diagonal: position t may look at positions 0 … t."""
    return torch.ones(length, length, dtype=torch.bool).tril()


class Averaging(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, WIDTH)
        self.pos = nn.Embedding(CONTEXT, WIDTH)
        self.head = nn.Linear(WIDTH, vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T))  # (B, T, E)
        weights = torch.softmax(torch.zeros(T, T).masked_fill(~causal_mask(T), float("-inf")), dim=-1)
        return self.head(x + weights @ x)  # (B, T, V)


torch.manual_seed(0)
averaging = Averaging()
results["averaging"] = train(averaging, "averaging")

# %% [markdown]
# ## Step 3: one head of self-attention
#
# Replace the equal scores by scores the data chooses. Every position emits three vectors through three learned
# maps: a **query** ("what am I looking for?"), a **key** ("what do I contain?") and a **value** ("what I pass on if
# chosen"). The score of position $t$ for position $s$ is the dot product of $t$'s query with $s$'s key, divided by
# $\sqrt{d}$ (tutorial 04); the causal mask puts $-\infty$ above the diagonal, the softmax turns each row into weights
# and the output is the weighted sum of the values. Nothing else changes from step 2: only the weights, which now
# differ from position to position and from text to text.


# %%
class Head(nn.Module):
    """One head of causal self-attention: softmax(QKᵀ/√d + mask) V."""

    def __init__(self, width: int, head_width: int):
        super().__init__()
        self.query = nn.Linear(width, head_width, bias=False)
        self.key = nn.Linear(width, head_width, bias=False)
        self.value = nn.Linear(width, head_width, bias=False)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, E) → (B, T, d) and the weights (B, T, T)."""
        q, k, v = self.query(x), self.key(x), self.value(x)  # (B, T, d) each
        scores = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B, T, T)
        weights = torch.softmax(scores.masked_fill(~causal_mask(x.shape[1]), float("-inf")), dim=-1)
        return weights @ v, weights


class SingleHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, WIDTH)
        self.pos = nn.Embedding(CONTEXT, WIDTH)
        self.attention = Head(WIDTH, WIDTH)
        self.head = nn.Linear(WIDTH, vocab_size)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        attended, self.last_weights = self.attention(x)
        return self.head(x + attended)


torch.manual_seed(0)
single_head = SingleHead()
results["single head"] = train(single_head, "single head")

# %% [markdown]
# ## Step 4: Transformer blocks
#
# The last step adds what tutorial 07 took apart, in the pre-norm order of GPT-2 and Llama:
#
# * **multi-head attention**: `HEADS` = 4 heads of width $32/4 = 8$, computed as one batched product (the heads are
#   a batch axis), their outputs put side by side and mixed by an output projection $W_o$;
# * a **feed-forward network** $\max(0, xW_1 + b_1)W_2 + b_2$, four times as wide inside, at every position: the
#   per-token computation that averaging cannot do;
# * **residual connections** around both, $x \leftarrow x + F(\mathrm{LN}(x))$, and **LayerNorm** before each, plus
#   one after the last block.
#
# Two such blocks, and one final LayerNorm; exercise 2 trains one block, to measure what the second adds.


# %%
class MultiHead(nn.Module):
    """Causal multi-head self-attention: H heads of width E/H as one batched product, then W_o."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(width, width, bias=False)
        self.k_proj = nn.Linear(width, width, bias=False)
        self.v_proj = nn.Linear(width, width, bias=False)
        self.o_proj = nn.Linear(width, width, bias=False)

    def forward(self, x: torch.Tensor, trace=None) -> torch.Tensor:
        B, T, E = x.shape
        d = E // self.heads
        q, k, v = (p(x).view(B, T, self.heads, d).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        scores = q @ k.transpose(-2, -1) * d**-0.5  # (B, H, T, T)
        masked = scores.masked_fill(~causal_mask(T), float("-inf"))
        self.last_weights = torch.softmax(masked, dim=-1)
        heads = self.last_weights @ v  # (B, H, T, d)
        joined = heads.transpose(1, 2).reshape(B, T, E)  # the heads side by side
        output = self.o_proj(joined)
        if trace is not None:
            trace += [
                ("q, k, v: x W_q, x W_k, x W_v, split into heads", q),
                ("scores q kᵀ / √d", scores),
                ("masked: -inf above the diagonal", masked),
                ("weights: softmax over the keys", self.last_weights),
                ("weights @ v", heads),
                ("heads side by side", joined),
                ("W_o", output),
            ]
        return output


class Block(nn.Module):
    """x + attention(LN(x)), then x + FFN(LN(x))."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attention = MultiHead(width, heads)
        self.ln2 = nn.LayerNorm(width)
        self.ffn = nn.Sequential(nn.Linear(width, 4 * width), nn.ReLU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor, trace=None) -> torch.Tensor:
        normed = self.ln1(x)
        if trace is not None:
            trace.append(("LayerNorm", normed))
        x = x + self.attention(normed, trace)
        normed_2 = self.ln2(x)
        hidden = self.ffn[1](self.ffn[0](normed_2))
        output = x + self.ffn[2](hidden)
        if trace is not None:
            trace += [
                ("x + attention", x),
                ("LayerNorm", normed_2),
                ("FFN inside: relu(x W_1 + b_1)", hidden),
                ("x + FFN", output),
            ]
        return output


class GPT(nn.Module):
    """Token and position embeddings → LAYERS blocks → LayerNorm → logits."""

    def __init__(self, layers: int = LAYERS):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, WIDTH)
        self.pos = nn.Embedding(CONTEXT, WIDTH)
        self.blocks = nn.ModuleList(Block(WIDTH, HEADS) for _ in range(layers))
        self.ln = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, vocab_size, bias=False)

    def forward(self, idx: torch.Tensor, trace=None) -> torch.Tensor:
        tokens, positions = self.tok(idx), self.pos(torch.arange(idx.shape[1]))
        x = tokens + positions
        if trace is not None:
            trace += [("input ids", idx), ("token embeddings", tokens), ("position embeddings", positions)]
            trace += [("x = tokens + positions", x)]
        for index, block in enumerate(self.blocks):
            start = len(trace) if trace is not None else 0
            x = block(x, trace)
            if trace is not None:
                trace[start:] = [(f"block {index}: {name}", tensor) for name, tensor in trace[start:]]
        normed = self.ln(x)
        logits = self.head(normed)
        if trace is not None:
            trace += [("final LayerNorm", normed), ("logits", logits)]
        return logits


torch.manual_seed(0)
gpt = GPT()
results["blocks"] = train(gpt, "blocks")

# %% [markdown]
# ## What each step bought
#
# The four models had the same budget: 2500 steps, each on a batch of 32 windows of 64 characters (80,000 windows),
# drawn in the same order. The learning rate is the one thing tuned per model: the bigram table learns at 0.1, the
# others at 0.01. Each model is scored by its last fifth of training: the mean of those evaluations and their range
# (lowest to highest). A step counts as a **clear gain** when the new model's worst evaluation there beats the previous
# model's best, so that no wobble of the curves could reverse the order.

# %%
print(
    table(
        [
            (
                name,
                r["parameters"],
                f"{r['steps']} × {BATCH}",
                "{:.3f} ({:.3f}-{:.3f})".format(*r["last_fifth"]["loss"]),
                "{:.3f} ({:.3f}-{:.3f})".format(*r["last_fifth"]["copy"]),
            )
            for name, r in results.items()
        ],
        ("model", "parameters", "steps × windows", "validation loss (range)", "copy accuracy (range)"),
    )
)
first_letters = [len({word[0] for word in words}) for words in (THINGS, NAMES, COLOURS)]
report["copy_chance"] = sum(1 / n for n in first_letters) / 3  # a uniform guess among each word's first letters
print(f"floor: {loss_floor:.3f} nats per character; copy accuracy of a guess: {report['copy_chance']:.3f}")
report["models"] = {name: {k: v for k, v in r.items() if k != "curve"} for name, r in results.items()}
gains = {}
for before, after in zip(list(results), list(results)[1:], strict=False):  # consecutive pairs
    old, new = results[before]["last_fifth"], results[after]["last_fifth"]
    gain = {
        "loss_drop": old["loss"][0] - new["loss"][0],
        "loss_clear": new["loss"][2] < old["loss"][1],  # the new model's worst loss below the old one's best
        "copy_gain": new["copy"][0] - old["copy"][0],
        "copy_clear": new["copy"][1] > old["copy"][2],
    }
    gains[f"{before} → {after}"] = gain
    clear = {True: "clear", False: "not clear"}
    print(
        f"{before} → {after}: loss {gain['loss_drop']:+.3f} lower ({clear[gain['loss_clear']]}), "
        f"copy accuracy {gain['copy_gain']:+.3f} ({clear[gain['copy_clear']]})"
    )
report["gains"] = gains

figure, axes = plt.subplots(1, 2, figsize=(13, 4), gridspec_kw={"width_ratios": [2, 1]}, layout="constrained")
for name, r in results.items():
    steps, losses, _ = zip(*r["curve"], strict=True)
    axes[0].plot(steps, losses, "o-", ms=3, label=name)
axes[0].axvspan(0.8 * BUDGET, BUDGET, color="0.9", zorder=0, label="last fifth: the score")
axes[0].axhline(loss_floor, color="k", ls=":", label=f"floor, ln {choices} per sentence")
axes[0].set_yscale("log")
axes[0].set_xlim(0, max(r["steps"] for r in results.values()))
axes[0].set_xlabel("training step")
axes[0].set_ylabel("validation loss (nats per character)")
axes[0].set_title("Four steps from a table to a Transformer")
axes[0].legend()
names = list(results)
copy_last_fifth = np.array([results[n]["last_fifth"]["copy"] for n in names])  # (models, [mean, lowest, highest])
axes[1].bar(
    names,
    copy_last_fifth[:, 0],
    yerr=[copy_last_fifth[:, 0] - copy_last_fifth[:, 1], copy_last_fifth[:, 2] - copy_last_fifth[:, 0]],
    capsize=4,
    color=[f"C{i}" for i in range(len(names))],
)
axes[1].axhline(report["copy_chance"], color="k", ls=":", label="a uniform guess")
axes[1].legend(fontsize=8)
axes[1].set_ylim(0, 1.05)
axes[1].set_title("Copy accuracy, the last fifth (mean and range)")
axes[1].tick_params(axis="x", rotation=20)
save_figure(
    figure,
    args.figures,
    "10_training",
    **{f"curve_{i}": np.array(r["curve"]) for i, r in enumerate(results.values())},
    copy_accuracy=[r["copy_accuracy"] for r in results.values()],
    copy_last_fifth=copy_last_fifth,
    loss_floor=loss_floor,
)

# %% [markdown]
# With the same budget, each step lowers the validation loss, and all three drops are clear: the new model's worst
# evaluation of the last fifth is below the previous model's best. The copy accuracy is another matter at step 2. The
# numbers are the means of the last fifth (full run; the quick run's 400 steps keep the order of the losses, and its
# numbers are what your run prints):
#
# * the **bigram** table learns the spelling and the fixed words (1.43 nats per character), and it copies almost
#   nothing: 0.09 of the first letters, below a uniform guess among the possible first letters (0.16), because after
#   "the " or " of " it bets on the most frequent letter;
# * **averaging** the past brings the loss to 1.14, a clear gain: a bag of the earlier characters says a little about
#   what comes (which words have been used), nothing about where. Its copy accuracy is not a clear gain: 0.11 against
#   the bigram's 0.09, and it wobbles between 0.07 and 0.20 from one evaluation to the next;
# * **one head of attention** is the largest drop, to 0.25: the weights now depend on the characters, so a position
#   can look at the letters that matter, and it copies 0.50 of the words;
# * **two blocks** (multi-head attention, FFN, residuals, LayerNorm) reach 0.134, within 0.008 of the floor of
#   0.126, and copy 0.998 of the words: nearly everything that can be predicted is.
#
# Where do they look? The weights of one held-out sentence: the fixed average of step 2, the single head of step 3,
# and one head of each block of step 4 (rows: the position predicting the next character; columns: the positions it
# reads).

# %%
with torch.no_grad():
    gpt(validation_inputs)  # every block keeps its weights (sentences, heads, T, T)
real = validation_targets != -100  # the positions inside a sentence
in_source_word = torch.zeros(len(copy_rows), validation_inputs.shape[1], dtype=torch.bool)  # (copy rows, keys)
for i, (first, last) in enumerate(zip(source_starts.tolist(), source_ends.tolist(), strict=True)):
    in_source_word[i, first:last] = True
# The landmarks of the pattern: the full stops and the letters of "the", "of" and "is" (input position p holds
# character p of "\n" + the sentence).
on_landmark = torch.zeros_like(in_source_word)
for i, row in enumerate(copy_rows.tolist()):
    for landmark in re.finditer(r"\.|\b(the|of|is)\b", "\n" + validation_sentences[row]):
        on_landmark[i, landmark.start() : landmark.end()] = True
heads_table, sharpness, on_source_word, on_landmarks = [], [], [], []
for index, block in enumerate(gpt.blocks):
    weights = block.attention.last_weights  # (sentences, H, T, T)
    # how peaked each head is (its largest weight in a row, averaged over the real rows), and, at the rows that
    # predict a first letter of the second half, the weight on the letters of the same word in the first half
    largest = weights.max(-1).values  # (sentences, H, T)
    sharpness.append((largest * real[:, None]).sum((0, 2)) / real.sum())
    rows = weights[copy_rows, :, copy_columns]  # (copy rows, H, keys)
    on_source_word.append((rows * in_source_word[:, None]).sum(-1).mean(0))
    on_landmarks.append((rows * on_landmark[:, None]).sum(-1).mean(0))
    for head in range(HEADS):
        heads_table.append(
            (
                f"block {index}, head {head}",
                f"{sharpness[-1][head]:.2f}",
                f"{on_source_word[-1][head]:.2f}",
                f"{on_landmarks[-1][head]:.2f}",
            )
        )
header = ("head", "largest weight of a row (mean)", "weight on the word to copy", "on the landmarks")
print(table(heads_table, header))
report["weight_on_landmarks"] = torch.stack(on_landmarks)
report["head_sharpness"] = torch.stack(sharpness)
report["weight_on_word_to_copy"] = torch.stack(on_source_word)
shown = [int(on_source_word[0].argmax()), int(sharpness[1].argmax())]  # block 0's copier, block 1's sharpest head
report["heads_shown"] = shown

example = validation_sentences[0]
example_ids = encode(example)[None]
with torch.no_grad():
    single_head(example_ids)
    gpt(example_ids)
T = example_ids.shape[1]
panels = [
    ("step 2: equal weights", torch.softmax(torch.zeros(T, T).masked_fill(~causal_mask(T), float("-inf")), -1)),
    ("step 3: the single head", single_head.last_weights[0]),
    (f"step 4: block 0, head {shown[0]}", gpt.blocks[0].attention.last_weights[0, shown[0]]),
    (f"step 4: block 1, head {shown[1]}", gpt.blocks[1].attention.last_weights[0, shown[1]]),
]
labels = list(example)
figure, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 5.2), layout="constrained")
for axis, (title, weights) in zip(axes, panels, strict=True):
    axis.imshow(weights, cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
    axis.set_title(title, fontsize=10)
    axis.set_xticks(range(T), labels, fontsize=6)
    axis.set_yticks(range(T), labels, fontsize=6)
axes[0].set_ylabel(f"{example!r}", fontsize=8)
save_figure(
    figure,
    args.figures,
    "10_weights",
    **{f"panel_{i}": w for i, (_, w) in enumerate(panels)},
    heads_shown=shown,
)

# %% [markdown]
# Equal weights are a smooth triangle; the single head already has a structure of its own (a diagonal band of recent
# characters, and single bright cells far back).
#
# Which head does the copying? Measured over all held-out sentences (the table above the figure, full run), at the
# rows that predict a first letter of the second half: one head of **block 0** puts 0.39 of its weight on the letters
# of the very word to copy, the heads of block 1 at most 0.17. Block 1's heads are the sharper ones: their largest
# weight in a row is 0.54 to 0.62 on average, against at most 0.35 in block 0.
#
# At the rows that copy, block 1 looks at the landmarks of the sentence, the full stops and the letters of "the", "of"
# and "is", which say where in the pattern the position is: its heads put 0.47 to 0.98 of their weight there (0.77
# for the head drawn), the heads of block 0 at most 0.20. So the first layer fetches the words and the second finds
# where in the sentence it is; the exercise with one block shows what is lost without the second.
#
# ## Writing text: sampling with a fixed seed
#
# To write, a language model predicts the next character, draws one from that distribution, appends it and repeats,
# feeding back at most the last `CONTEXT` characters. A `torch.Generator` with a fixed seed makes the draws, so the
# same model writes the same text on every run. Each model starts from a newline and writes its characters; a sentence
# counts as **consistent** when it has the pattern and its second half repeats the thing, the name and the colour of
# its first half. (400 characters with `--quick`, 1200 in the full run.)


# %%
def sample(model: nn.Module, length: int, seed: int, start: str = "\n", temperature: float = 1.0) -> str:
    generator = torch.Generator().manual_seed(seed)
    ids = encode(start)[None]
    with torch.no_grad():
        for _ in range(length):
            logits = model(ids[:, -CONTEXT:])[:, -1]  # (1, V): the last position's prediction
            next_id = torch.multinomial(torch.softmax(logits / temperature, dim=-1), 1, generator=generator)
            ids = torch.cat([ids, next_id], dim=1)
    return decode(ids[0, len(start) :])


def consistency(text: str) -> tuple[int, int, int]:
    """(complete sentences, of them with the pattern, of them consistent)."""
    lines = text.split("\n")[:-1]  # the last line may be cut off
    matches = [PATTERN.fullmatch(line) for line in lines]
    pattern = [m for m in matches if m]
    consistent = [m for m in pattern if m.group(4, 5, 6) == (m.group(3), m.group(1), m.group(2))]
    return len(lines), len(pattern), len(consistent)


SAMPLE_LENGTH, SAMPLE_SEED = (400 if args.quick else 1200), 1
report["sample_length"], report["sample_seed"] = SAMPLE_LENGTH, SAMPLE_SEED
samples = {}
for name, model in (("bigram", bigram), ("averaging", averaging), ("single head", single_head), ("blocks", gpt)):
    text = sample(model, SAMPLE_LENGTH, seed=SAMPLE_SEED)
    lines, pattern, consistent = consistency(text)
    samples[name] = {"text": text, "sentences": lines, "pattern": pattern, "consistent": consistent}
    print(f"--- {name}: {consistent} consistent of {lines} sentences ({pattern} with the pattern)")
    print(text[:170])
report["samples"] = samples

# %% [markdown]
# The bigram and averaging models write letters in plausible places and no sentence. The single head writes the pattern
# (21 of its 27 sentences in the full run), but none of them is consistent: it mixes the words of its two halves. The
# blocks write consistent sentences, 25 of 27: with a seed, the text is the same on every run, and a draw of an
# unlikely character, which sampling allows by design, breaks a sentence now and then (exercise 3 changes the
# temperature).
#
# ## One forward pass, every shape
#
# The trained model's forward pass on one held-out sentence of 43 characters, batch 1, with the shape of every tensor
# it makes (B batch, T positions, E = 32 width, H = 4 heads, d = 8 head width, V = 27 characters), printed as a table
# and drawn as a chain from the ids to the logits:

# %%
trace = []
with torch.no_grad():
    gpt(example_ids, trace)
shapes = [(name, tuple(tensor.shape)) for name, tensor in trace]
print(table([(name, str(shape)) for name, shape in shapes], ("tensor", "shape")))
report["trace"] = [[name, list(shape)] for name, shape in shapes]
report["trace_length"] = example_ids.shape[1]


def trace_colour(name: str) -> str:
    """The colour of a traced tensor's box: what made it."""
    for words, colour in (
        (("ids",), "#dddddd"),
        (("embeddings", "tokens + positions"), "#e8e8f4"),
        (("LayerNorm",), "#f2e6a7"),
        (("x + ",), "#d9c3e6"),
        (("FFN",), "#a9cbe8"),
        (("logits",), "#b9e0a5"),
    ):
        if any(word in name for word in words):
            return colour
    return "#f4c08a"  # inside attention


# Two columns: the embeddings and block 0, then block 1 and the output.
split = next(i for i, (name, _) in enumerate(shapes) if name.startswith("block 1"))
columns = [shapes[:split], shapes[split:]]
ROW, BOX_WIDTH = 0.5, 5.6
figure = plt.figure(figsize=(2 * BOX_WIDTH + 1.6, ROW * len(columns[0]) + 1.0))
canvas = figure.add_axes([0, 0, 1, 1])
canvas.set_xlim(0, 2 * BOX_WIDTH + 1.6)
canvas.set_ylim(-0.2, ROW * len(columns[0]) + 0.8)
canvas.axis("off")
drawn = {"names": [], "shapes": [], "x": [], "y": []}
for column, entries in enumerate(columns):
    x = 0.4 + column * (BOX_WIDTH + 0.8)
    for row, (name, size) in enumerate(entries):
        y = ROW * (len(columns[0]) - row) - 0.1
        canvas.add_patch(
            FancyBboxPatch(
                (x, y - 0.17),
                BOX_WIDTH,
                0.34,
                boxstyle="round,pad=0.01,rounding_size=0.08",
                facecolor=trace_colour(name),
                edgecolor="0.3",
            )
        )
        canvas.text(x + 0.1, y, name, va="center", fontsize=8.5)
        canvas.text(x + BOX_WIDTH - 0.1, y, str(size), va="center", ha="right", fontsize=8.5, family="monospace")
        if row > 0:
            canvas.add_patch(
                FancyArrowPatch(
                    (x + BOX_WIDTH / 2, y + ROW - 0.17),
                    (x + BOX_WIDTH / 2, y + 0.17),
                    arrowstyle="-|>",
                    mutation_scale=8,
                )
            )
        for key, value in zip(drawn, (name, str(size), x + BOX_WIDTH / 2, y), strict=True):
            drawn[key].append(value)
canvas.add_patch(
    FancyArrowPatch(
        (drawn["x"][split - 1] + BOX_WIDTH / 2, drawn["y"][split - 1]),
        (drawn["x"][split] - BOX_WIDTH / 2, drawn["y"][split]),
        arrowstyle="-|>",
        mutation_scale=10,
        connectionstyle="arc,angleA=0,angleB=180,armA=20,armB=20,rad=8",
    )
)
canvas.text(
    0.4,
    ROW * len(columns[0]) + 0.45,
    f"One forward pass of the trained model on {example_ids.shape[1]} characters: every tensor and its shape "
    "(B, T) · (B, T, E) · (B, H, T, d) · (B, H, T, T)",
    fontsize=10,
    weight="bold",
)
save_figure(figure, args.figures, "10_trace", **{key: np.array(value) for key, value in drawn.items()})

# %% [markdown]
# Every tensor has an axis of the 43 positions. The ids, the token embeddings, the residual stream and its
# LayerNorms, the FFN's inside and the logits are (1, 43) or (1, 43, ·), batch and positions in front. The position
# embeddings are (43, 32), with no batch axis: the same vectors are added to every sentence of a batch. Inside
# attention the head axis sits between them: (1, 4, 43, 8) for q, k, v and each head's output.
#
# Attention is the one place where positions meet positions, in the (1, 4, 43, 43) scores and weights: a T × T table
# per head, the cost that grows with the square of the length (tutorial 08). Everything else acts on each position
# alone, so it is the same computation for any T.
#
# ## The same model in hf-attention's decoder family
#
# The hand-built model is a pre-norm decoder with learned positions, no biases in attention, biases in the FFN, a
# final LayerNorm and an untied output layer. An `HFAttentionDecoderConfig` says exactly that, and
# `AutoModelForCausalLM` builds the library's `HFAttentionForCausalLM` from it. Its parameters have other names, the
# same shapes and the same layout (`nn.Linear` stores (out, in) in both), so loading the weights is a renaming:

# %%
from transformers import AutoModelForCausalLM  # noqa: E402

config = hf_attention.HFAttentionDecoderConfig(
    vocab_size=vocab_size,
    hidden_size=WIDTH,
    num_hidden_layers=LAYERS,
    num_attention_heads=HEADS,
    intermediate_size=4 * WIDTH,
    hidden_act="relu",
    max_position_embeddings=CONTEXT,
    position_encoding="learned",
    norm_position="pre",
    final_norm=True,
    scale_embeddings=False,  # the hand-built model adds the embeddings as they are
    attention_bias=False,
    mlp_bias=True,
    tie_word_embeddings=False,
    hidden_dropout_prob=0.0,
    layer_norm_eps=1e-5,  # nn.LayerNorm's default
    bos_token_id=None,
    eos_token_id=stoi["\n"],  # a sentence ends with a newline
    pad_token_id=stoi["\n"],
)
library = AutoModelForCausalLM.from_config(config).eval()


def library_name(name: str) -> str:
    """The library's name of a parameter of the hand-built GPT."""
    for mine, theirs in (
        (r"^tok\.", "model.decoder.embed_tokens."),
        (r"^pos\.", "model.decoder.position."),
        (r"^blocks\.(\d+)\.ln1\.", r"model.decoder.layers.\1.self_attn_norm."),
        (r"^blocks\.(\d+)\.attention\.", r"model.decoder.layers.\1.self_attn."),
        (r"^blocks\.(\d+)\.ln2\.", r"model.decoder.layers.\1.mlp_norm."),
        (r"^blocks\.(\d+)\.ffn\.0\.", r"model.decoder.layers.\1.mlp.fc1."),
        (r"^blocks\.(\d+)\.ffn\.2\.", r"model.decoder.layers.\1.mlp.fc2."),
        (r"^ln\.", "model.decoder.norm."),
        (r"^head\.", "lm_head."),
    ):
        if re.match(mine, name):
            return re.sub(mine, theirs, name)
    raise KeyError(name)


renamed = {library_name(name): tensor for name, tensor in gpt.state_dict().items()}
missing, unexpected = library.load_state_dict(renamed, strict=True)
print(type(library).__name__, f"{sum(p.numel() for p in library.parameters())} parameters")
for name in list(gpt.state_dict())[:6]:
    print(f"  {name:28s} → {library_name(name)}")
with torch.no_grad():
    logits_by_hand = gpt(example_ids)
    logits_library = library(example_ids).logits  # the default backend, SDPA
    logits_eager = library(example_ids, output_attentions=True).logits  # the eager backend (it returns weights)
report["library_class"] = type(library).__name__
report["library_vs_hand_logits_max_abs"] = (logits_library - logits_by_hand).abs().max().item()
report["library_eager_vs_hand_logits_max_abs"] = (logits_eager - logits_by_hand).abs().max().item()
with tempfile.TemporaryDirectory() as folder:
    library.save_pretrained(folder)
    reloaded = AutoModelForCausalLM.from_pretrained(folder).eval()
    with torch.no_grad():
        report["reloaded_vs_hand_logits_max_abs"] = (reloaded(example_ids).logits - logits_by_hand).abs().max().item()
print(
    f"logits, library vs by hand: {report['library_vs_hand_logits_max_abs']:.1e} (SDPA), "
    f"{report['library_eager_vs_hand_logits_max_abs']:.1e} (eager); saved and reloaded: "
    f"{report['reloaded_vs_hand_logits_max_abs']:.1e}"
)

# %% [markdown]
# The same logits, with the eager backend and with the library's default, the fused SDPA kernel (the last bits of
# this check: see the appendix). And being the library's model, it has everything a `transformers` model has:
# `save_pretrained`, `from_pretrained`, and `generate()`, with its key-value cache. Greedy decoding of the second half
# of a sentence, by hand (the whole context again at every step) and with `generate()` (the cache, one new token per
# step):

# %%
prompt = "gus has a white kite. the"
prompt_ids = encode(prompt)[None]
ids = prompt_ids
with torch.no_grad():
    while decode(ids[0, -1:]) != "\n" and ids.shape[1] < CONTEXT:
        ids = torch.cat([ids, gpt(ids)[:, -1:].argmax(-1)], dim=1)
    generated = library.generate(prompt_ids, max_new_tokens=CONTEXT - prompt_ids.shape[1], do_sample=False)
report["greedy_by_hand"] = decode(ids[0])
report["greedy_generate"] = decode(generated[0])
print(f"by hand:    {report['greedy_by_hand']!r}")
print(f"generate(): {report['greedy_generate']!r}")
torch.manual_seed(7)
with torch.no_grad():
    drawn = library.generate(encode("\n")[None], max_new_tokens=90, do_sample=True)
report["generate_sample"] = decode(drawn[0])
print(f"generate(do_sample=True), seed 7: {report['generate_sample']!r}")

# %% [markdown]
# ## Three families side by side
#
# The model above is the **decoder-only** family: causal self-attention, a next-token head, and text written by
# appending. The two others use the same layers differently:
#
# * **encoder-only** (BERT): self-attention without the causal mask, so every position sees the whole input, and a
#   head per token or per text (a masked-token guess, a label). It reads; it does not write left to right.
# * **encoder-decoder** (the 2017 Transformer, T5, BART, Marian, and this project's translation model): an encoder
#   reads the source in both directions; a causal decoder writes the target, and in every layer a cross-attention
#   lets its positions look at the encoder's output.
#
# Which input positions does each output depend on? Change one token and see which outputs move. Three library models
# of the sizes above (random weights; the decoder-only one is the trained model):

# %%
encoder_only = hf_attention.HFAttentionForMaskedLM(
    hf_attention.HFAttentionEncoderConfig(
        vocab_size=vocab_size,
        hidden_size=WIDTH,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=4 * WIDTH,
        max_position_embeddings=CONTEXT,
        position_encoding="learned",
        norm_position="pre",
        hidden_dropout_prob=0.0,
        pad_token_id=None,
        bos_token_id=None,
        eos_token_id=None,
    )
).eval()
encoder_decoder = hf_attention.HFAttentionForSeq2SeqLM(
    hf_attention.HFAttentionSeq2SeqConfig(
        vocab_size=vocab_size,
        hidden_size=WIDTH,
        encoder_layers=LAYERS,
        decoder_layers=LAYERS,
        num_attention_heads=HEADS,
        intermediate_size=4 * WIDTH,
        max_position_embeddings=CONTEXT,
        position_encoding="learned",
        norm_position="pre",
        hidden_dropout_prob=0.0,
        pad_token_id=None,
        bos_token_id=None,
        eos_token_id=None,
        decoder_start_token_id=stoi["\n"],
    )
).eval()
source, target = encode("ada has a red box."), encode("\nthe box of ada")  # 18 source, 15 target tokens
changed_source, changed_target = source.clone(), target.clone()
changed_source[-2] = stoi["m"]  # "box" → "bom" at the end of the source
changed_target[7] = stoi["i"]  # "box" → "boi" in the middle of the target


def moved(before: torch.Tensor, after: torch.Tensor) -> list[int]:
    """Positions whose output vector changed at all."""
    return [int(i) for i in torch.nonzero((after - before).abs().amax(-1)[0] > 0).flatten()]


with torch.no_grad():
    dependence = {
        "encoder-only, source token 16 changed": moved(
            encoder_only(source[None]).logits, encoder_only(changed_source[None]).logits
        ),
        "decoder-only, token 16 changed": moved(library(source[None]).logits, library(changed_source[None]).logits),
        "encoder-decoder, source token 16 changed": moved(
            encoder_decoder(source[None], decoder_input_ids=target[None]).logits,
            encoder_decoder(changed_source[None], decoder_input_ids=target[None]).logits,
        ),
        "encoder-decoder, target token 7 changed": moved(
            encoder_decoder(source[None], decoder_input_ids=target[None]).logits,
            encoder_decoder(source[None], decoder_input_ids=changed_target[None]).logits,
        ),
    }
report["dependence"] = dependence
print(
    table(
        [(case, len(positions), f"{positions[0]}-{positions[-1]}") for case, positions in dependence.items()],
        ("change", "outputs that moved", "which"),
    )
)

# %% [markdown]
# The encoder's 18 outputs all move when its token 16 changes: each position sees the whole input. The decoder-only
# model's outputs 0-15 do not move by a single bit; only 16 and 17, the changed position and the one after it, see
# the change. Causal attention is what lets a decoder be trained on all positions at once (each position predicts the
# next token without seeing it) and what makes the key-value cache possible (the past never changes).
#
# In the encoder-decoder, a change in the source reaches every target position through cross-attention, while a
# change of target token 7 reaches only target positions 7-14.
#
# The picture below draws the three families as the library builds them for these configs, with the shapes of a real
# forward pass of each: the encoder-only and encoder-decoder models just above, on the 18 source characters and 15
# target characters, and the trained decoder-only model on the same 18 characters. Every layer is pre-norm: each
# sublayer reads a LayerNorm of the residual stream and adds its output back (the circled + and the line that
# bypasses the sublayer), and a final LayerNorm closes each stack. In the decoder of the encoder-decoder,
# cross-attention sits between the causal self-attention and the feed-forward network, with the encoder's output as
# its keys and values. The small squares are the attention masks (white: may attend).


# %%
def output_shapes(model: nn.Module, run) -> dict:
    """Run `run()` with a hook on every submodule; the shape of each one's first output, by module name."""
    shapes, hooks = {}, []
    for name, module in model.named_modules():

        def record(module, inputs, output, name=name):
            tensor = output[0] if isinstance(output, tuple) else output
            if isinstance(tensor, torch.Tensor):
                shapes.setdefault(name, tuple(tensor.shape))

        hooks.append(module.register_forward_hook(record))
    with torch.no_grad():
        outputs = run()
    for hook in hooks:
        hook.remove()
    return shapes, outputs


def shape(size) -> str:
    return "(" + ", ".join(str(n) for n in size) + ")"


def stack_rows(model: nn.Module, stack: str, shapes: dict, inputs: tuple, attentions: list, head: str | None) -> list:
    """The boxes of one stack (encoder or decoder) as the library builds it, top to bottom: (label, shape, kind,
    mask). Each sublayer of layer 0 is drawn with its norm and its residual add, as the layer's norm_position places
    them. `inputs`: (the label of the ids, their tensor, the embeddings that enter layer 0)."""
    layer = model.get_submodule(f"{stack}.layers.0")
    assert layer.norm_position == "pre" and isinstance(model.get_submodule(f"{stack}.norm"), nn.LayerNorm)
    prefix = f"{stack}.layers.0"
    ids_label, ids, embeddings = inputs
    rows = [(ids_label, shape(ids.shape), "ids", None)]
    rows.append(("token + position embeddings", shape(embeddings.shape), "embedding", None))
    sublayers = [*attentions, ("mlp", "feed-forward", shape(shapes[f"{prefix}.mlp"]), None)]
    for module, label, size, mask in sublayers:
        norm = {"self_attn": "self_attn_norm", "cross_attn": "cross_attn_norm", "mlp": "mlp_norm"}[module]
        rows.append(("LayerNorm", shape(shapes[f"{prefix}.{norm}"]), "norm", None))
        rows.append((label, size, "attention" if mask else "feed-forward", mask))
        rows.append(("+", shape(shapes[f"{prefix}.{module}"]), "add", None))  # x + sublayer(LayerNorm(x))
    rows.append(("final LayerNorm", shape(shapes[f"{stack}.norm"]), "norm", None))
    if head is not None:
        rows.append((head, shape(shapes["lm_head"]), "head", None))
    return rows


with torch.no_grad():
    every_output = {"output_attentions": True, "output_hidden_states": True}
    encoder_shapes, run_encoder = output_shapes(encoder_only, lambda: encoder_only(source[None], **every_output))
    decoder_shapes, run_decoder = output_shapes(library, lambda: library(source[None], **every_output))
    seq2seq_shapes, run_seq2seq = output_shapes(
        encoder_decoder, lambda: encoder_decoder(source[None], decoder_input_ids=target[None], **every_output)
    )
S, T = len(source), len(target)
families = {
    "encoder-only (BERT)": stack_rows(
        encoder_only,
        "model.encoder",
        encoder_shapes,
        ("input ids", source[None], run_encoder.hidden_states[0]),
        [("self_attn", "self-attention: weights", shape(run_encoder.attentions[0].shape), "full")],
        "per-token head (masked LM)",
    ),
    "decoder-only (GPT)": stack_rows(
        library,
        "model.decoder",
        decoder_shapes,
        ("input ids", source[None], run_decoder.hidden_states[0]),
        [("self_attn", "causal self-attention: weights", shape(run_decoder.attentions[0].shape), "causal")],
        "next-token logits",
    ),
    "encoder-decoder: encoder": stack_rows(
        encoder_decoder,
        "model.encoder",
        seq2seq_shapes,
        ("source ids", source[None], run_seq2seq.encoder_hidden_states[0]),
        [("self_attn", "self-attention: weights", shape(run_seq2seq.encoder_attentions[0].shape), "full")],
        None,
    ),
    "encoder-decoder: decoder": stack_rows(
        encoder_decoder,
        "model.decoder",
        seq2seq_shapes,
        ("target ids (shifted right)", target[None], run_seq2seq.decoder_hidden_states[0]),
        [
            ("self_attn", "causal self-attention: weights", shape(run_seq2seq.decoder_attentions[0].shape), "causal"),
            ("cross_attn", "cross-attention: weights", shape(run_seq2seq.cross_attentions[0].shape), "cross"),
        ],
        "next-token logits",
    ),
}
masks = {
    "encoder-only (BERT)": {"full": np.ones((S, S))},
    "decoder-only (GPT)": {"causal": np.tril(np.ones((S, S)))},
    "encoder-decoder: encoder": {"full": np.ones((S, S))},
    "encoder-decoder: decoder": {"causal": np.tril(np.ones((T, T))), "cross": np.ones((T, S))},
}
report["families"] = {family: [[label, size] for label, size, _, _ in rows] for family, rows in families.items()}

WIDE, HIGH, STEP = 18.4, 10.2, 0.64
figure = plt.figure(figsize=(WIDE, HIGH))
canvas = figure.add_axes([0, 0, 1, 1])
canvas.set_xlim(0, WIDE)
canvas.set_ylim(0, HIGH)
canvas.axis("off")
fill = {
    "ids": "#dddddd",
    "embedding": "#e8e8f4",
    "norm": "#f2e6a7",
    "attention": "#f4c08a",
    "feed-forward": "#a9cbe8",
    "head": "#b9e0a5",
}


def draw_stack(x: float, family: str, width: float = 2.9) -> list:
    """Boxes centred on x from the top down; a residual line on the left from before each norm to its add; the
    attention masks on the right; returns each row's (x, y)."""
    places = []
    for row, (label, size, kind, mask) in enumerate(families[family]):
        y = HIGH - 1.3 - STEP * row
        if kind == "add":
            canvas.add_patch(plt.Circle((x, y), 0.15, facecolor="#d9c3e6", edgecolor="0.3"))
            canvas.text(x, y, "+", ha="center", va="center", fontsize=11)
            branch = places[row - 2][1] + STEP / 2  # between the norm and the box above it
            side = x - width / 2 - 0.25
            canvas.plot([x, side, side], [branch, branch, y], color="0.35", lw=1)
            canvas.add_patch(FancyArrowPatch((side, y), (x - 0.15, y), arrowstyle="-|>", mutation_scale=9))
            top = 0.15
        else:
            canvas.add_patch(
                FancyBboxPatch(
                    (x - width / 2, y - 0.24),
                    width,
                    0.48,
                    boxstyle="round,pad=0.02,rounding_size=0.1",
                    facecolor=fill[kind],
                    edgecolor="0.3",
                )
            )
            canvas.text(x, y + 0.09, label, ha="center", va="center", fontsize=8.5)
            canvas.text(x, y - 0.12, size, ha="center", va="center", fontsize=8, family="monospace")
            top = 0.24
        if row > 0:
            previous_kind = families[family][row - 1][2]
            start = places[-1][1] - (0.15 if previous_kind == "add" else 0.24)
            canvas.add_patch(FancyArrowPatch((x, start), (x, y + top), arrowstyle="-|>", mutation_scale=9))
        if mask is not None:
            left = x + width / 2 + 0.12
            inset = figure.add_axes([left / WIDE, (y - 0.26) / HIGH, 0.52 / WIDE, 0.52 / HIGH])
            inset.imshow(masks[family][mask], cmap="gray", vmin=0, vmax=1, interpolation="nearest", aspect="auto")
            inset.set_xticks([])
            inset.set_yticks([])
        places.append((x, y))
    kinds = [kind for _, _, kind, _ in families[family]]
    first, last = kinds.index("norm"), len(kinds) - 1 - kinds[::-1].index("add")
    edge, top, bottom = x - width / 2 - 0.5, places[first][1] + 0.3, places[last][1] - 0.3
    canvas.plot([edge + 0.1, edge, edge, edge + 0.1], [top, top, bottom, bottom], color="0.3", lw=1)
    canvas.text(edge + 0.05, top + 0.08, f"× {LAYERS}", ha="center", va="bottom", fontsize=10)
    return places


columns = {"encoder-only (BERT)": 2.1, "decoder-only (GPT)": 6.6, "encoder-decoder: encoder": 11.1}
columns["encoder-decoder: decoder"] = 16.0
places = {family: draw_stack(x, family) for family, x in columns.items()}
canvas.text(2.1, HIGH - 0.55, "encoder-only (BERT)", ha="center", fontsize=12, weight="bold")
canvas.text(6.6, HIGH - 0.55, "decoder-only (GPT)", ha="center", fontsize=12, weight="bold")
canvas.text(
    13.55, HIGH - 0.55, "encoder-decoder (2017 Transformer, T5, BART)", ha="center", fontsize=12, weight="bold"
)
# The encoder's output (after its final LayerNorm) is the keys and values of every decoder layer's cross-attention.
encoder_out = places["encoder-decoder: encoder"][-1]
cross_row = [label for label, _, _, _ in families["encoder-decoder: decoder"]].index("cross-attention: weights")
cross = places["encoder-decoder: decoder"][cross_row]
between = (encoder_out[0] + cross[0]) / 2 + 0.05  # the gap between the encoder's masks and the decoder's bracket
canvas.plot([encoder_out[0] + 1.45, between, between], [encoder_out[1], encoder_out[1], cross[1]], color="C3", lw=1.5)
canvas.add_patch(
    FancyArrowPatch((between, cross[1]), (cross[0] - 1.45, cross[1]), arrowstyle="-|>", mutation_scale=12, color="C3")
)
canvas.text(
    encoder_out[0] + 1.55,
    encoder_out[1] - 0.15,
    "keys and values of\nevery cross-attention",
    fontsize=8,
    color="C3",
    va="top",
)
canvas.text(
    WIDE / 2,
    0.35,
    "Pre-norm layers, as the library builds them for these configs: x + sublayer(LayerNorm(x)) around each sublayer, "
    f"and a final LayerNorm.\nShapes of one forward pass: batch 1, {S} input (source) tokens, {T} target tokens, "
    f"width {WIDTH}, {HEADS} heads, {vocab_size} characters; weights are (batch, heads, queries, keys). "
    "Masks: white = may attend.",
    ha="center",
    fontsize=9,
)
save_figure(
    figure,
    args.figures,
    "10_families",
    families=np.array(list(families)),
    **{f"labels_{i}": np.array([row[0] for row in rows]) for i, rows in enumerate(families.values())},
    **{f"shapes_{i}": np.array([row[1] for row in rows]) for i, rows in enumerate(families.values())},
    **{f"kinds_{i}": np.array([row[2] for row in rows]) for i, rows in enumerate(families.values())},
    **{f"positions_{i}": np.array(place) for i, place in enumerate(places.values())},
    mask_encoder=masks["encoder-only (BERT)"]["full"],
    mask_decoder_only=masks["decoder-only (GPT)"]["causal"],
    mask_decoder=masks["encoder-decoder: decoder"]["causal"],
    mask_cross=masks["encoder-decoder: decoder"]["cross"],
)


# %% [markdown]
# ## Looking inside with the attention explorer
#
# hf-attention's attention explorer (`hf_attention.inspection.explorer.explore`, see [the
# documentation](../README.md#the-attention-explorer)) writes every layer and head of a model's attention for one text
# into one HTML page that opens in any browser without a network. The library model of this tutorial on one held-out
# sentence, with a character tokenizer built from the same 27 characters (a `transformers` fast tokenizer around a
# `tokenizers` word-level model that splits every character):

# %%
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402

character_model = Tokenizer(models.WordLevel(vocab=stoi, unk_token=None))
character_model.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # one token a character
character_model.decoder = decoders.Fuse()  # decoding joins the characters without spaces
tokenizer = PreTrainedTokenizerFast(tokenizer_object=character_model)
assert tokenizer(example)["input_ids"] == encode(example).tolist()
page = explore(
    library,
    tokenizer,
    example,
    layer=-1,
    head=shown[-1],
    path=args.figures / "10_explorer.html",
    title="tutorial 10: the decoder-only language model",
)
report["explorer_page"] = page.path.name
report["explorer_layers_heads"] = list(page.weights["self"].shape[:2])
with torch.no_grad():
    gpt(example_ids)  # the hand-built model's weights for the same sentence
report["explorer_vs_hand_weights_max_abs"] = float(
    np.abs(page.weights["self"][-1] - gpt.blocks[-1].attention.last_weights[0].numpy()).max()
)
print(f"wrote {page.path} ({len(page.html) // 1024} KiB)")

# %% [markdown]
# [The explorer page of a full run](../figures/10_explorer.html) is committed next to the figures (download it and open
# it in a browser; a quick run writes its own to `outputs/tutorial_figures/`). Its weights are the model's: the
# last layer's equal those the hand-built model computed for the same sentence, to float rounding.
#
# ## Summary
#
# * Encoder-only, decoder-only and encoder-decoder models are built from the same layers; the masks decide what each
#   position sees (measured: a decoder's earlier outputs do not move by one bit when a later token changes).
# * A language model predicts the next token. A bigram table sees one token back; averaging the past with a
#   lower-triangular matrix (a softmax over equal scores under a causal mask) sees everything as a bag; self-attention
#   makes the weights depend on the text; blocks of multi-head attention, a feed-forward network, residuals and
#   LayerNorm copy the words that agree across a sentence.
# * The hand-built model is the library's `HFAttentionForCausalLM` with another name for each parameter: same logits,
#   and then `generate()`, `save_pretrained` and the explorer for free.
#
# **Next:** [11 · an encoder-decoder built by hand](11_encoder_decoder_by_hand.py): this tutorial's decoder block and
# tutorial 07's encoder block, joined by cross-attention, trained by hand and loaded into the library. Or back to the
# [list of tutorials](../README.md#learn-attention-with-hf-attention).

# %% [markdown]
# ## Self-test
#
# a. What is the lowest validation loss any model can reach on this text, and why is it not 0?
# b. Step 2 and step 3 both weigh the past with a softmax under a causal mask. What differs between them, and what did
#    that change in the measurements?
# c. In the trained blocks, at the positions that must copy a word, what does block 0 do and what does block 1 do?
# d. The blocks give the right first letter the highest probability for 0.998 of the copied words, yet 2 of the 27
#    sentences they wrote with seed 1 are not consistent. How can that be?
# e. How does the hand-built model become the library's `HFAttentionForCausalLM`, and how does the tutorial know that
#    it is the same model?

# %% [markdown]
# ### Self-test answers
#
# The numbers are those of the full run.
#
# a. $\ln 288 = 5.66$ nats per sentence, 0.126 nats per character on the held-out sentences ("The text"). The name,
#    the colour and the thing a sentence opens with are a free choice of the generator that no model can foresee;
#    the other characters follow from them. The blocks come within 0.008 of that floor.
# b. Only the scores. In step 2 each visible position gets the same score, 0, so the weights are a fixed average; in
#    step 3 a score is one position's query times another's key over $\sqrt{d}$, so the weights depend on the
#    characters ("Step 2", "Step 3"). The loss went from 1.14 to 0.25, the largest drop of the build-up, and the copy
#    accuracy from 0.11 to 0.50: a bag of the past says which characters came but not where, and a head can look at
#    the word to copy ("What each step bought").
# c. Block 0 fetches the word: one of its heads puts 0.39 of its weight on the letters of the word to copy. Block 1
#    finds where in the sentence the position is: its heads put 0.47 to 0.98 of their weight on the landmarks (the
#    full stops, "the", "of", "is"), block 0's at most 0.20 ("What each step bought", the table of the heads).
# d. The copy accuracy scores only the first letter of each copied word, and only whether it gets the highest
#    probability. Sampling draws each character from the model's distribution, so now and then an unlikely one comes
#    out, and one such draw breaks a sentence: "cy has a red hat. the har of cy is red." went wrong in the thing,
#    "eve has a green cup. the cup of eis green." in the name ("Writing text: sampling with a fixed seed"; exercise 3
#    shows what the temperature trades).
# e. A config that says what the hand-built model is (pre-norm, learned positions, no biases in attention, biases in
#    the FFN, a final LayerNorm, an untied output layer), `AutoModelForCausalLM.from_config`, and a renaming of the
#    parameters, which have the same shapes under other names. Then it compares: the logits differ by 0.0 with the
#    eager backend and by 6.2e-6 with SDPA (float rounding), and `generate()` writes the greedy continuation of the
#    loop by hand, "gus has a white kite. the kite of gus is white." ("The same model in hf-attention's decoder
#    family").

# %% [markdown]
# ## Exercises
#
# 1. The floor is $\ln 288 = 5.66$ nats per sentence. Which characters of a sentence carry them, and how much each?
#    What does the floor mean for the second half?
# 2. Train the last model with one block instead of two (`GPT(layers=1)`, the full run's 2500 steps). What happens
#    to the validation loss and to the copy accuracy?
# 3. Sample the trained blocks at temperature 0.5 and 2 (divide the logits by it before the softmax), 1200
#    characters with seed 1 as above. How many sentences are consistent, and what does the temperature trade?
# 4. Train the blocks without position embeddings (`x = tokens` in `GPT.forward`). Does the model still copy the
#    right words? Why could it?
# 5. In the section on the three families, the decoder-only model's outputs at positions 0-15 did not move by a single
#    bit when token 16 changed. Why exactly 0, and not merely small? Would a LayerNorm over the whole sentence
#    (tutorial 07) keep that?
#
# ## Answers
#
# 1. Only the first letters of the first half: the name's (8 equally likely letters, $\ln 8 = 2.08$ nats), the
#    colour's ($\ln 6 = 1.79$, shared by its first letter and, after "b", the third letter of "blue" or "black") and
#    the thing's ($\ln 6 = 1.79$). Every other character, and the whole second half, is determined by what came before:
#    a perfect model predicts it with probability 1, so the floor of the second half is 0, and the loss a model has
#    there is exactly what it fails to copy.
# 2. Validation loss 0.215 instead of 0.134 and copy accuracy 0.49 instead of 0.998 (the means of the last fifth, full
#    run, one seed): one layer copies half of the words. The weights of the two-block model suggest why: its block 0
#    finds the candidate words, its block 1 looks at the landmarks ("the", "of", "is", the full stop) that say which
#    word is due. In one layer a query knows only its own character and position, and in a window that starts anywhere,
#    a position says little about where in a sentence it is; a second layer can combine what the first found with where
#    it is.
# 3. Temperature 0.5: 26 of 27 sentences consistent (23 of them different); temperature 1: 25 of 27; temperature 2: 2
#    of 27, most of them broken ("cy has a k ree. thwhmug of cy is black."). A low temperature sharpens the
#    distribution towards the model's favourites (more correct, less varied; at 0 it is greedy decoding), a high one
#    flattens it towards uniform (more varied, more mistakes).
# 4. Yes, nearly as well in this run: validation loss 0.140 and copy accuracy 0.979 (the means of the last fifth),
#    against 0.134 and 0.998 with positions; the losses of the last fifth overlap (0.135 to 0.148 against 0.131 to
#    0.143), so one seed cannot tell them apart. A decoder knows order without positions: the causal mask lets position
#    $t$ see $t + 1$ tokens, so the first layer can work out where a position is from what it sees (tutorial 05,
#    exercise 5), and the task needs the order of the words, not their absolute place. Absolute positions of random
#    training windows carry no meaning here at all: the model has to learn to ignore them.
# 5. A changed token 16 enters the computation of an earlier position only through its key and value, and the causal
#    mask gives it a weight of exactly 0 there (a softmax of $-\infty$ is 0, and the library also sets masked weights
#    to 0); everything else acts on each position alone. So positions 0-15 run the very same operations on the very
#    same numbers, and the bits are the same. A LayerNorm over the sentence would mix the later token into the mean
#    and variance of every position (tutorial 07 measured how far a later token then moves position 0): the earlier
#    outputs would move, and a decoder trained that way would read the future through its norm.

# %% [markdown]
# The numbers of these answers come from the cell below: it trains the two variants and samples at the two
# temperatures (the full run's 2500 steps; a quick run trains them much shorter).


# %%
class NoPositions(GPT):
    """The blocks with x = tokens: the position table stays at zero and out of training."""

    def __init__(self):
        super().__init__()
        nn.init.zeros_(self.pos.weight)
        self.pos.weight.requires_grad_(False)


def distinct_consistent(text: str) -> int:
    """How many different consistent sentences a text holds."""
    found = [PATTERN.fullmatch(line) for line in text.split("\n")[:-1]]
    return len({m.group(0) for m in found if m and m.group(4, 5, 6) == (m.group(3), m.group(1), m.group(2))})


STEPS["one block"] = STEPS["no positions"] = 200 if args.quick else STEPS["blocks"]  # quick: only that it runs
answers = {
    "choice_nats": {"name": math.log(len(NAMES)), "colour": math.log(len(COLOURS)), "thing": math.log(len(THINGS))}
}
torch.manual_seed(0)
answers["one block"] = train(GPT(layers=1), "one block")
torch.manual_seed(0)
answers["no positions"] = train(NoPositions(), "no positions")
report["temperatures"] = [0.5, 2.0]
for temperature in report["temperatures"]:
    text = sample(gpt, SAMPLE_LENGTH, seed=SAMPLE_SEED, temperature=temperature)
    lines, pattern, consistent = consistency(text)
    answers[f"temperature {temperature}"] = {
        "sentences": lines,
        "consistent": consistent,
        "different_consistent": distinct_consistent(text),
        "text": text,
    }
    print(f"temperature {temperature}: {consistent} consistent of {lines} sentences; {text[:90]!r}")
report["answers"] = {name: {k: v for k, v in a.items() if k != "curve"} for name, a in answers.items()}

# %% [markdown]
# ## Appendix: the last bits of the library's logits
#
# *The same model in hf-attention's decoder family* compares the library's logits with the hand-built model's. With
# the eager backend, which runs the hand-written operations in the same order, they are the same bits on this run's
# CPU (a difference of 0.0), and float32 rounding, within 1e-5, on a CPU whose matrix library picks other kernels for
# the library's layout of the same products. With the library's default, the fused SDPA kernel, they agree to float
# rounding, since it adds its sums in another order (tutorial 07).

# %%
report.save()
