# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 02 · Embeddings and word2vec
#
# A Transformer computes with vectors, but it reads text. Between them sit the steps that each model in this
# project takes before any attention happens:
#
# 1. a **tokenizer** cuts the text into pieces (tokens) and gives each piece an integer id;
# 2. an **embedding** turns each id into a vector of real numbers, the row of a matrix $W$.
#
# The ids alone are a poor code (id 431 is not "closer" to id 432 than to id 7000), and a one-hot vector per id is
# a wasteful one in which every token is equally far from every other. An embedding is the middle way: a space of tens
# or hundreds of dimensions in which tokens that are used alike can lie close together. Where such vectors come from is
# the subject of **word2vec** (Mikolov et al. 2013): train a tiny model to predict a word from its neighbours (or the
# neighbours from the word), keep its first matrix, throw the rest away.
#
# This tutorial runs the project's own byte-level BPE tokenizer on the main job's English → German UI strings,
# shows that an embedding lookup is a one-hot vector times a matrix, trains word2vec (CBOW and skip-gram with
# negative sampling) in a few lines of torch, compares its vectors with the token embeddings of a trained
# English → German Transformer, and ends with what word2vec cannot do: an encoder trained to fill masked tokens, whose
# vectors change with the context.

# %%
import json
import re
from collections import Counter
from itertools import chain, pairwise

import numpy as np
import torch
import torch.nn.functional as F
import yaml
from tutorial_support import (
    MAIN_JOB_CONFIG,
    Report,
    add_model_flags,
    load_translation_model,
    parse_args,
    plt,
    save_figure,
    table,
)

from training.data.splits import split_dataset
from training.data.tokenizer import train_tokenizer
from training.objectives.translation import translation_corpus

args = parse_args("Tokens, one-hot vectors, embeddings, word2vec and contextual vectors.", add_model_flags)
report = Report(args, "02")
torch.manual_seed(0)
# word2vec's training steps are tiny (a few thousand rows of 64 numbers): on a shared CPU one thread runs them
# faster than several, and makes every run give the same numbers.
torch.set_num_threads(1)

# %% [markdown]
# ## 1. Tokens: the project's byte-level BPE
#
# The main job trains its tokenizer with `training.data.tokenizer.train_tokenizer` on the training split of its English
# → German pairs (strings of at most 100 characters), English and German together, so that both languages share one
# vocabulary of 8,000 tokens. This tutorial trains the same tokenizer with the same function, split and data, at three
# vocabulary sizes: 600 and 2,000 (the tutorials' own small runs) and 8,000 (the main job).
#
# The data is the main job's corpus: the gettext catalogs of the pinned PyPI wheels listed in its config
# (`training/configs/translation_en_de.yaml`, `catalog_packages`), fetched once and the same on every machine, so
# every count, merge and neighbour quoted here is what you get too. It holds 14,615 pairs.
#
# Byte-level BPE (Sennrich et al. 2016; GPT-2's byte-level variant, Radford et al. 2019) starts from the 256 byte
# values and learns **merges**: it repeatedly joins the pair of adjacent symbols that is most frequent in the
# training text into one new symbol, until the vocabulary has the requested size. A space belongs to the word
# after it and is written `Ġ`, so `" file"` and `"file"` are different tokens.

# %%
main_job = yaml.safe_load(MAIN_JOB_CONFIG.read_text())  # training/configs/translation_en_de.yaml
# The main job's corpus: the pinned wheels' catalogs, never the machine's.
corpus = translation_corpus("de", max_chars=main_job["max_chars"], packages=main_job["catalog_packages"])
splits = split_dataset(corpus, key="source")  # the same deterministic split as the main job
report["pairs"] = len(corpus)
report["max_chars"] = main_job["max_chars"]
train_texts = list(chain(splits["train"]["source"], splits["train"]["target"]))  # English and German, one vocabulary
print(f"{len(corpus)} English → German pairs; {len(splits['train'])} in the training split")

VOCAB_SIZES = (600, 2000, 8000)
tokenizers = {size: train_tokenizer(train_texts, size, kind="seq2seq") for size in VOCAB_SIZES}
report["vocab_sizes"] = VOCAB_SIZES
examples = [
    "Save as…", "Could not open file", "Directory", "Keyboard shortcuts", "Datei konnte nicht geöffnet werden"
]  # fmt: skip
rows = [(text, *(" ".join(tokenizers[size].tokenize(text)) for size in VOCAB_SIZES)) for text in examples]
print(table(rows, ("text", *(f"vocab {size}" for size in VOCAB_SIZES))))
report["example_tokens"] = {text: {size: tokenizers[size].tokenize(text) for size in VOCAB_SIZES} for text in examples}
SPLIT_WORD = "Directory"  # a frequent word that even 8,000 tokens cut in two
report["split_word_tokens"] = {size: tokenizers[size].tokenize(SPLIT_WORD) for size in VOCAB_SIZES}

# %% [markdown]
# `"Could not open file"` is four tokens at 8,000 and six at 2,000: these words are among the most frequent in the
# catalogs. But `"Directory"`, a word of file dialogs, is two pieces even with 8,000 tokens, while
# `" directory"` is one. Why?
#
# A tokenizer applies its merges in the order in which it learned them (their **rank**), to each pre-token on its
# own. Replaying them by hand for both shows where `Directory` stops:

# %%
tokenizer = tokenizers[8000]
backend = tokenizer.backend_tokenizer
# The learned merges, in the order they were learned (tokenizers writes them as pairs or as "a b" strings).
merges = [
    tuple(m) if isinstance(m, list) else tuple(m.split()) for m in json.loads(backend.to_str())["model"]["merges"]
]
rank = {pair: i for i, pair in enumerate(merges)}


def replay_bpe(word: str) -> list[tuple[list[str], tuple[str, str] | None]]:
    """Apply the learned merges to one pre-token, lowest rank first; returns every step (symbols, merge applied).

    This is what `tokenizers`' BPE model does; written out only to show the steps."""
    symbols, steps = list(word), []
    while True:
        pairs = [(rank[p], i) for i, p in enumerate(pairwise(symbols)) if p in rank]
        if not pairs:
            steps.append((symbols, None))
            return steps
        _, i = min(pairs)
        steps.append((symbols, (symbols[i], symbols[i + 1])))
        symbols = symbols[:i] + [symbols[i] + symbols[i + 1]] + symbols[i + 2 :]


replays = {}
for word in (SPLIT_WORD, "Ġ" + SPLIT_WORD.lower()):
    replays[word] = [[" ".join(symbols), rank[merge] if merge else None] for symbols, merge in replay_bpe(word)]
    for symbols, merge in replay_bpe(word):
        print(f"  {' '.join(symbols):<22}" + (f"merge {merge} (rank {rank[merge]})" if merge else "no merge left"))
    print()
report["replays"] = replays
# The same text the tokenizer was trained on, cut into pre-tokens the way it cuts them (at spaces, before Ġ).
pre_tokens = Counter(piece for text in train_texts for piece, _ in backend.pre_tokenizer.pre_tokenize_str(text))
# How often the missing last merge would have been seen, against the last merges that made it into the vocabulary:
# BPE counts a pair once per occurrence in the (tokenized-so-far) text.
train_ids = tokenizer(train_texts, add_special_tokens=False)["input_ids"]
pair_counts = Counter(chain.from_iterable(pairwise(row) for row in train_ids))
token_counts = Counter(chain.from_iterable(train_ids))
last_pair = tuple(tokenizer.tokenize(SPLIT_WORD)[-2:])
last_pair_count = pair_counts[tuple(tokenizer.convert_tokens_to_ids(list(last_pair)))]
last_merges = [token_counts[tokenizer.convert_tokens_to_ids(a + b)] for a, b in merges[-50:]]
report["split_word_pretoken_counts"] = {w: pre_tokens[w] for w in replays}
report["missing_pair"] = [*last_pair, last_pair_count, last_pair in rank]
report["last_50_merges_median_count"] = float(np.median(last_merges))
print(
    f"pre-token counts in the training text: {report['split_word_pretoken_counts']}; the pair {last_pair} occurs "
    f"{last_pair_count} times (a merge of it: {last_pair in rank}); the last 50 merges learned were each seen about "
    f"{np.median(last_merges):.0f} times (median)"
)

# The replay gives exactly the tokenizer's pieces (a check on the explanation, over the commonest pre-tokens, each
# turned back into its text: "Ġfile" is " file").
commonest = [piece for piece, _ in pre_tokens.most_common(2000)]
same = [replay_bpe(p)[-1][0] == tokenizer.tokenize(tokenizer.convert_tokens_to_string([p])) for p in commonest]
report["replay_matches"] = [sum(same), len(commonest)]
print(f"replayed merges = tokenizer on {report['replay_matches'][0]} of the {len(commonest)} commonest pre-tokens")

# %% [markdown]
# The replay shows the mechanism: BPE applies the merge learned **earliest** first. Both words start alike:
# `o` + `r`, `r` + `e`, `c` + `t` are among the first merges, because these letter pairs occur in many words. After
# that, ` directory` finds a merge for every step up to the whole word (the last, `Ġdirect` + `ory`, has rank
# 1,760), while `Directory` gets `D` + `ire` and `Dire` + `ct` only late (ranks 3,963 and 5,428) and then stops:
# there is no merge `Direct` + `ory`.
#
# The reason is counting. A capitalised word at the start of a string has no `Ġ`, so it is a different pre-token
# from the same word inside a sentence: `Directory` occurs 5 times in the training text, ` directory` 34 times.
# The pair `Direct` + `ory` occurs 5 times, no more than the last merges that made it into the 8,000 tokens (a
# median of 5 each): at that count the vocabulary is full, and this pair did not get in. A tokenizer does not know
# words; it knows which byte sequences were frequent in its training text.
#
# ### Vocabulary size against tokens per word
#
# A larger vocabulary keeps more words whole. On the validation strings (not seen when the merges were learned),
# the number of tokens per space-separated word:

# %%
validation = {"English": splits["validation"]["source"], "German": splits["validation"]["target"]}
tokens_per_word = {}
for language, texts in validation.items():
    n_words = sum(len(text.split()) for text in texts)
    tokens_per_word[language] = [
        sum(len(tokenizers[size].tokenize(text)) for text in texts) / n_words for size in VOCAB_SIZES
    ]
print(table([(lang, *(f"{v:.2f}" for v in values)) for lang, values in tokens_per_word.items()], ("", *VOCAB_SIZES)))
report["tokens_per_word"] = tokens_per_word

figure, axis = plt.subplots(figsize=(5.5, 3.2))
width = 0.38
for k, (language, values) in enumerate(tokens_per_word.items()):
    axis.bar(np.arange(len(VOCAB_SIZES)) + (k - 0.5) * width, values, width, label=language)
axis.set_xticks(range(len(VOCAB_SIZES)), [f"{size:,}" for size in VOCAB_SIZES])
axis.set_xlabel("BPE vocabulary size (English and German together)")
axis.set_ylabel("tokens per word")
axis.axhline(1, color="gray", lw=0.8, ls="--")
axis.legend()
axis.set_title("Validation strings: a larger vocabulary keeps more words whole", fontsize=9)
save_figure(figure, args.figures, "02_tokens_per_word", tokens_per_word=np.array(list(tokens_per_word.values())))

# %% [markdown]
# German words are longer and share one vocabulary with English, so they are cut into more pieces. The price of a
# larger vocabulary is a larger embedding matrix (one row per token) whose rare rows are seen only a few times in
# training.
#
# ## 2. One-hot vectors and the embedding lookup
#
# Number the $V$ tokens $0 \dots V-1$. The **one-hot** vector of token $i$ is $e_i \in \{0,1\}^V$, a 1 at place $i$.
# Multiplying it by a matrix $W \in \mathbb R^{V \times d}$ picks row $i$: $e_i^\top W = W_i$. An embedding layer
# (`torch.nn.Embedding`, the `embed_tokens` of every hf-attention model) stores $W$ and returns row $i$ directly,
# without building $e_i$. Both give the same numbers, bit for bit:

# %%
V, d = len(tokenizer), 64
embedding = torch.nn.Embedding(V, d)
ids = torch.tensor(tokenizer("Could not open file")["input_ids"])  # the 4 tokens and </s>
one_hot = F.one_hot(ids, V).float()  # (5, 8000)
looked_up, multiplied = embedding(ids), one_hot @ embedding.weight
report["one_hot_equals_lookup"] = torch.equal(looked_up, multiplied)
print(f"ids {ids.tolist()}; one-hot @ W == embedding(ids) exactly: {torch.equal(looked_up, multiplied)}")

# %% [markdown]
# It is exact because every product but one is $0 \cdot w = 0$ and adding zeros changes nothing. The lookup is
# still the one to use: per token the product does $V \cdot d$ multiply-adds and reads all of $W$, the lookup copies
# $d$ numbers; and a batch of one-hot rows is large. For a training batch of the main job, whose config batches by
# tokens (`max_tokens_per_batch`: rows of similar length, at most that many padded positions, rows × longest row;
# about 34 rows of UI strings), with its width $d$ (`hidden_size`):

# %%
batch_tokens = main_job["max_tokens_per_batch"]  # at most 384 padded source positions per batch
d_model = main_job["model_config"]["hidden_size"]  # 256
cost = {
    "batch_tokens": batch_tokens,
    "one_hot_batch_MiB": batch_tokens * V * 4 / 2**20,  # float32 one-hot rows
    "ids_batch_KiB": batch_tokens * 8 / 2**10,  # int64 ids
    "multiply_adds_one_hot": batch_tokens * V * d_model,
    "numbers_copied_lookup": batch_tokens * d_model,
}
report["cost"] = cost
print(
    f"{batch_tokens} token positions: one-hot batch {cost['one_hot_batch_MiB']:.1f} MiB vs ids "
    f"{cost['ids_batch_KiB']:.0f} KiB; {cost['multiply_adds_one_hot']:.2e} multiply-adds vs "
    f"{cost['numbers_copied_lookup']:.2e} numbers copied (a factor V = {V})"
)

# %% [markdown]
# One-hot vectors also carry no similarity: any two different ones are orthogonal, so the cosine between *file*
# and *folder* is exactly the cosine between *file* and *password*: 0. Whatever a model knows about words being
# alike has to live in $W$.

# %%
words = ["Ġfile", "Ġfolder", "Ġdirectory", "ĠDatei", "Ġpassword"]
word_ids = torch.tensor(tokenizer.convert_tokens_to_ids(words))
one_hot_words = F.one_hot(word_ids, V).float()
cosines = F.normalize(one_hot_words, dim=-1) @ F.normalize(one_hot_words, dim=-1).T
report["one_hot_cosines"] = cosines
print(f"cosines between the one-hot vectors of {words}:\n{cosines}")

# %% [markdown]
# ## 3. word2vec: learning $W$ from the company words keep
#
# "You shall know a word by the company it keeps" (Firth 1957). word2vec (Mikolov et al. 2013a, b) turns this into
# a prediction task that needs no labels: slide a window over the text, and
#
# * **CBOW** (continuous bag of words) predicts the centre word from the mean of its context vectors,
#   $h = \frac1{|C|}\sum_{j \in C} v_{w_j}$ (the original code averages; summing only rescales $h$);
# * **skip-gram** predicts each context word from the centre word's vector, $h = v_{w_c}$.
#
# There are two matrices: $W$ (input vectors $v_w$, the embedding we keep) and $W'$ (output vectors $u_w$). A
# softmax over all $V$ words would cost $V$ dot products per prediction; **negative sampling** replaces it with
# $K$ logistic regressions: the true word $o$ against $K$ words drawn from the noise distribution
# $P_n(w) \propto \mathrm{count}(w)^{3/4}$,
#
# $$\mathcal L = -\log \sigma(u_o^\top h) - \sum_{k=1}^{K} \log \sigma(-u_{n_k}^\top h).$$
#
# Very frequent words ("the", "not", "file") are **subsampled**: an occurrence of $w$ is kept with probability
# $\min(1, \sqrt{t/f(w)} + t/f(w))$, $f(w)$ its share of the text, $t = 10^{-4}$ (the word2vec code's rule). There
# is no non-linearity anywhere: the model is two matrices and a dot product.
#
# **The text.** The English side of the same pairs: the strings the translation model reads, so the comparison with
# its embeddings in section 4 is on the same text. Words are lower-cased runs of letters; `%s`-style placeholders
# and tokens with digits are dropped, and words seen under 5 times are left out.

# %%
WORD = re.compile(r"[a-z%$'{}<>_\d]+")  # a word and anything glued to it; kept only if it is all letters
sentences = []
for text in corpus["source"]:
    found = [w for w in WORD.findall(text.lower()) if w.isalpha()]
    if len(found) >= 2:
        sentences.append(found)
counts = Counter(chain.from_iterable(sentences))
MIN_COUNT = 5  # rarer words are left out
vocab = [w for w, n in counts.most_common() if n >= MIN_COUNT]
index = {w: i for i, w in enumerate(vocab)}
report["word2vec_text"] = {"strings": len(sentences), "words": sum(counts.values()), "vocabulary": len(vocab)}

print(f"{len(sentences)} strings, {sum(counts.values())} words, {len(vocab)} distinct words seen at least 5 times")


def windows_of(window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(contexts, centres): for each word with a neighbour, the ids of up to `window` words on each side of it
    (-1 where the window runs past the string), (N, 2 * window), and its own id, (N,)."""
    rows, middles = [], []
    for sentence in sentences:
        ids_ = [index[w] for w in sentence if w in index]
        for i, centre in enumerate(ids_):
            row = [ids_[j] if 0 <= j < len(ids_) else -1 for j in range(i - window, i + window + 1) if j != i]
            if max(row) >= 0:
                rows.append(row)
                middles.append(centre)
    return torch.tensor(rows), torch.tensor(middles)


WINDOW = 3  # context: up to 3 words on each side
contexts, centres = windows_of(WINDOW)  # (N, 6), (N,)
frequency = torch.tensor([counts[w] for w in vocab], dtype=torch.float64)
share = frequency / frequency.sum()
keep_probability = ((1e-4 / share).sqrt() + 1e-4 / share).clamp(max=1).float()
noise = frequency**0.75 / (frequency**0.75).sum()
print(f"{len(centres)} windows; 'the' is kept with probability {keep_probability[index['the']]:.2f}")
DIM, NEGATIVES = 64, 5  # the width of W and W', and K, the noise words per true one


# %%
def window_losses(kind: str, w_in: torch.Tensor, w_out: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """The negative-sampling loss of each window in `rows` (skip-gram: averaged over its context words), with noise
    words from a generator of its own, so that measuring changes nothing in training."""
    generator = torch.Generator().manual_seed(123)
    noise_words = torch.multinomial(noise, len(rows) * NEGATIVES, True, generator=generator).view(-1, NEGATIVES)
    context, centre = contexts[rows], centres[rows]
    with torch.no_grad():
        if kind == "skipgram":
            h = w_in[centre]  # (N, dim)
            present = (context >= 0).float()
            positive = F.logsigmoid((h[:, None] * w_out[context.clamp(min=0)]).sum(-1))  # (N, 6)
            positive = (positive * present).sum(-1) / present.sum(-1)
        else:
            present = (context >= 0).float()[..., None]
            h = (w_in[context.clamp(min=0)] * present).sum(1) / present.sum(1)
            positive = F.logsigmoid((h * w_out[centre]).sum(-1))
        return -(positive + F.logsigmoid(-(h[:, None] * w_out[noise_words]).sum(-1)).sum(-1))


def memorisation_gap(kind: str, w_in: torch.Tensor, w_out: torch.Tensor, seen: torch.Tensor) -> float:
    """Mean over centre words of (loss of its windows not trained on yet) - (loss of its windows trained on).

    Subsampling leaves out a different part of the windows of each frequent word every epoch, so the windows of the
    same word split into seen and not yet seen: the same words, the same kind of context, only the training differs.
    Only words kept with probability 0.2 … 0.8, with at least 5 windows on each side, are compared."""
    rows = ((keep_probability[centres] > 0.2) & (keep_probability[centres] < 0.8)).nonzero()[:, 0]
    losses, was_seen, words = window_losses(kind, w_in, w_out, rows), seen[rows], centres[rows]
    gaps = []
    for word in words.unique():
        mine = words == word
        if (mine & was_seen).sum() >= 5 and (mine & ~was_seen).sum() >= 5:
            gaps.append((losses[mine & ~was_seen].mean() - losses[mine & was_seen].mean()).item())
    return float(np.mean(gaps))


def train_word2vec(
    kind: str,
    epochs: int,
    dim: int = DIM,
    negatives: int = NEGATIVES,
    seed: int = 0,
    gaps=True,
    windows: tuple[torch.Tensor, torch.Tensor] | None = None,
    mean: bool = True,
):
    """CBOW or skip-gram with negative sampling; returns (W, W at initialisation, loss of every step, the
    memorisation gap after each epoch (if `gaps`), W', the first step of each epoch). `windows`: (contexts, centres)
    of another window size (`windows_of`), default the ones above; `mean=False`: CBOW sums the context vectors."""
    assert windows is None or not gaps, "the memorisation gap is measured on the windows above"
    contexts_, centres_ = (contexts, centres) if windows is None else windows
    generator = torch.Generator().manual_seed(seed)
    w_in = torch.nn.Parameter((torch.rand(len(vocab), dim, generator=generator) - 0.5) / dim)  # W: small random
    w_out = torch.nn.Parameter(torch.zeros(len(vocab), dim))  # W': zeros, as in the word2vec code
    initial = w_in.detach().clone()
    optimizer = torch.optim.Adam([w_in, w_out], lr=0.01)
    batch = 1024 if kind == "skipgram" else 256  # skip-gram makes ~2·WINDOW examples per window, CBOW one
    losses, memorisation, epoch_starts = [], [], []
    seen = torch.zeros(len(centres_), dtype=torch.bool)  # the windows trained on so far
    for _ in range(epochs):
        epoch_starts.append(len(losses))
        kept_now = torch.rand(len(centres_), generator=generator) < keep_probability[centres_]
        kept = kept_now.nonzero()[:, 0]
        kept = kept[torch.randperm(len(kept), generator=generator)]
        if kind == "skipgram":  # one (centre → context word) example per word of each window
            inputs = centres_[kept].repeat_interleave(contexts_.shape[1])
            targets = contexts_[kept].flatten()
            inputs, targets = inputs[targets >= 0], targets[targets >= 0]
            order = torch.randperm(len(inputs), generator=generator)
            inputs, targets = inputs[order], targets[order]
        else:  # one (context window → centre word) example per window
            inputs, targets = contexts_[kept], centres_[kept]
        for start in range(0, len(targets), batch):
            x, target = inputs[start : start + batch], targets[start : start + batch]
            if kind == "skipgram":
                h = w_in[x]  # (B, dim)
            else:
                present = (x >= 0).float()[..., None]  # (B, 6, 1)
                h = (w_in[x.clamp(min=0)] * present).sum(1)  # the sum of the context vectors
                if mean:
                    h = h / present.sum(1)  # their mean
            noise_words = torch.multinomial(noise, len(target) * negatives, True, generator=generator)
            positive = (h * w_out[target]).sum(-1)  # u_o · h, (B,)
            negative = (h[:, None] * w_out[noise_words.view(-1, negatives)]).sum(-1)  # u_n · h, (B, K)
            loss = -(F.logsigmoid(positive) + F.logsigmoid(-negative).sum(-1)).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        seen |= kept_now
        if gaps:
            memorisation.append(memorisation_gap(kind, w_in.detach(), w_out.detach(), seen))
    return w_in.detach(), initial, np.array(losses), memorisation, w_out.detach(), epoch_starts


EPOCHS = 6 if args.quick else 10
SMOOTH = 10  # the curves below are means of this many steps, a fifth of an epoch or less
report["word2vec_settings"] = {
    "dim": DIM, "negatives": NEGATIVES, "min_count": MIN_COUNT, "window": WINDOW, "epochs": EPOCHS, "smooth": SMOOTH
}  # fmt: skip


def epoch_changes(losses: np.ndarray, epoch_starts: list[int]) -> dict:
    """Per epoch, how much the loss fell inside it (mean of its first SMOOTH steps - mean of its last SMOOTH) and at
    its start (mean of the previous epoch's last SMOOTH steps - mean of its first SMOOTH; none for the first)."""
    epochs = np.split(losses, epoch_starts[1:])
    return {
        "steps_per_epoch": [len(e) for e in epochs],
        "within": [float(e[:SMOOTH].mean() - e[-SMOOTH:].mean()) for e in epochs],
        "at_start": [float(a[-SMOOTH:].mean() - b[:SMOOTH].mean()) for a, b in pairwise(epochs)],
    }


models = {}
for kind in ("cbow", "skipgram"):
    models[kind] = train_word2vec(kind, EPOCHS)
    losses = models[kind][2]
    report[f"{kind}_loss_at_start"] = losses[0]
    report[f"{kind}_loss_first_last"] = [losses[:SMOOTH].mean(), losses[-SMOOTH:].mean()]
    report[f"{kind}_memorisation_gap"] = models[kind][3]
    report[f"{kind}_epoch_changes"] = epoch_changes(losses, models[kind][5])
    print(
        f"{kind}: {len(losses)} steps, loss {losses[0]:.3f} (first step), {losses[:SMOOTH].mean():.3f} (mean of the "
        f"first {SMOOTH}) → {losses[-SMOOTH:].mean():.3f} (mean of the last {SMOOTH})"
    )
print(
    table(
        [
            (
                epoch + 1,
                *(f"{report[f'{kind}_epoch_changes']['within'][epoch]:.3f}" for kind in models),
                *(f"{([0.0] + report[f'{kind}_epoch_changes']['at_start'])[epoch]:.3f}" for kind in models),
                *(f"{report[f'{kind}_memorisation_gap'][epoch]:.3f}" for kind in models),
            )
            for epoch in range(EPOCHS)
        ],
        (
            "epoch",
            "CBOW: fall within the epoch",
            "skip-gram",
            "CBOW: fall at its start",
            "skip-gram",
            "CBOW: loss of windows not yet seen − seen, after it",
            "skip-gram",
        ),
    )
)

figure, axis = plt.subplots(figsize=(6, 3.2))
curves = {}
for kind, (_, _, losses, _, _, _) in models.items():
    # Each step's place in epochs (epoch e's steps spread over [e, e + 1)), then the mean of SMOOTH steps of both.
    place = np.concatenate(
        [e + np.arange(n) / n for e, n in enumerate(report[f"{kind}_epoch_changes"]["steps_per_epoch"])]
    )
    mean = np.ones(SMOOTH) / SMOOTH
    curves[kind] = np.convolve(losses, mean, mode="valid")
    curves[f"{kind}_epochs"] = np.convolve(place, mean, mode="valid")
    axis.plot(curves[f"{kind}_epochs"], curves[kind], label=kind)
for epoch in range(1, EPOCHS):
    axis.axvline(epoch, color="gray", lw=0.5, ls=":")
axis.set_xlabel("epoch")
axis.set_ylabel("negative-sampling loss (K = 5)")
axis.set_title(f"word2vec on the English catalog strings (mean of {SMOOTH} steps)", fontsize=9)
axis.legend()
save_figure(figure, args.figures, "02_word2vec_loss", **curves)

# %% [markdown]
# The first loss is exactly $6 \log 2 \approx 4.159$: $W'$ starts at zero, so every score is 0 and
# $\sigma(0) = 1/2$ for the true word and for each of the 5 noise words. The curves start a little below it because
# each of their points is the mean of 10 steps: the first, the mean of steps 1 to 10, is 4.13 (CBOW) and 4.14
# (skip-gram).
#
# The curves of CBOW and skip-gram are not on one scale. The loss of one example has the same $1 + K$ terms in both,
# but the examples are different tasks: a CBOW example is a window, whose centre word is predicted from the mean of its
# context vectors; a skip-gram example is one (centre word, context word) pair, up to 6 per window, so the same input,
# the centre word, has several right answers, and part of its loss is that uncertainty, which no vectors can remove.
# Skip-gram's loss ends higher (1.31 against 0.99, means of the last 10 steps): its task is harder, which says nothing
# about whose vectors are better. The pair check below compares their vectors on one task.
#
# Drawn as means of 10 steps (an epoch is about 53 steps of CBOW and 39 of skip-gram), the curves differ between the
# first epochs and the last. In epochs 2 to 5 the loss falls inside each epoch about as much as at its start (on
# average 0.155 inside and 0.141 at the start for CBOW, 0.134 and 0.105 for skip-gram). In the last five epochs it is a
# staircase: flat inside an epoch (a fall of 0.014 on average for CBOW and 0.008 for skip-gram, and a rise in 3 and 2
# of the five) and a step down where a new epoch begins (0.100 and 0.075 on average). The optimiser and its learning
# rate do not change at those points; what changes is that the windows the model meets from then on are again those of
# the epochs before (subsampling varies only which windows of frequent words it keeps). The steps are **memorisation**
# of the training windows, and the table measures it: after each epoch, the windows that subsampling has let through so
# far get a lower loss than the windows of the same centre words that it has not let through yet. In the full run (10
# epochs) the gap is 0.024 (CBOW) and 0.010 (skip-gram) after the first epoch and grows over the next ones, CBOW's to
# 0.300 by the eighth, skip-gram's to 0.319 by the seventh, then falls back a little (0.242 and 0.180 after the tenth).
# The training loss rewards remembering these particular strings; the vectors are judged on something else, below.
#
# ### $W$ and $W'$ are not inverses
#
# One sometimes reads that the output matrix is the pseudo-inverse of the input one. Write $W'$ as a $d \times V$
# matrix (column $w$ is $u_w$), as in that claim: then $\mathrm{pinv}(W)$ is $d \times V$ too, and
# $\mathrm{pinv}(W)\,W = I_d$. Measured on the trained matrices:


# %%
def inverse_check(w_in: torch.Tensor, w_out: torch.Tensor) -> dict:
    """How far W' (as d x V) is from pinv(W), and W'W from the identity I_d, in relative Frobenius norm."""
    w, w_prime = w_in.double(), w_out.double().T  # (V, d), (d, V)
    pinv, identity = torch.linalg.pinv(w), torch.eye(w.shape[1], dtype=torch.float64)
    cosine = F.cosine_similarity(w_prime.flatten(), pinv.flatten(), dim=0).item()
    return {
        "distance_to_pinv": ((w_prime - pinv).norm() / pinv.norm()).item(),
        "cosine_to_pinv": cosine,
        # |W' - c pinv(W)| / |W'| at the best scale c: the part of W' that no multiple of pinv(W) explains
        "distance_to_best_multiple": (1 - cosine**2) ** 0.5,
        "norm_ratio": (w_prime.norm() / pinv.norm()).item(),
        "product_to_identity": ((w_prime @ w - identity).norm() / identity.norm()).item(),
        "pinv_product_to_identity": ((pinv @ w - identity).norm() / identity.norm()).item(),  # ~0: the check works
    }


inverse = {kind: inverse_check(models[kind][0], models[kind][4]) for kind in models}
report["inverse_check"] = inverse
print(
    table(
        [(kind, *(f"{v:.3g}" for v in values.values())) for kind, values in inverse.items()],
        (
            "",
            "|W' - pinv(W)| / |pinv(W)|",
            "cosine",
            "best multiple",
            "|W'| / |pinv(W)|",
            "|W'W - I| / |I|",
            "|pinv(W) W - I| / |I|",
        ),
    )
)

# %% [markdown]
# $W'$ is nowhere near $\mathrm{pinv}(W)$. For skip-gram the relative distance is 204 (CBOW: 201): $W'$ is 205 times
# larger, and even its direction is mostly another one, a cosine of 0.25 with $\mathrm{pinv}(W)$ (CBOW: 0.17), so the
# best multiple of $\mathrm{pinv}(W)$ still leaves 0.97 of it unexplained. $W'W$ is 823 away from $I_d$ in relative
# norm (CBOW: 691), where $\mathrm{pinv}(W)\,W$ is $I_d$ to rounding.
#
# Nothing in training asks for an inverse. The two matrices are separate parameters, and the loss sees only the
# scores $u_o^\top v_c$, the entries of the $V \times V$ product $W\,W'$. That product has rank at most
# $d = 64 \ll V$, so it cannot be the identity; training makes it large for words that occur together (Levy &
# Goldberg 2014: it approximates their pointwise mutual information minus $\log K$). An identity would mean the
# opposite: every word predicts itself and nothing else.
#
# ### Nearest neighbours
#
# The **cosine** $\cos(a, b) = a^\top b / (\lVert a\rVert \lVert b\rVert)$ compares directions. For a few frequent
# words, the closest words among the 1,000 most frequent (rare words got few updates and their vectors are noisy):

# %%
PROBE = ["file", "open", "delete", "error", "window", "password", "server", "color"]
FREQUENT = 1000
report["frequent"] = FREQUENT


def neighbours(matrix: torch.Tensor, row: int, labels: list[str], among: int, k: int = 6) -> list[str]:
    """The k rows of `matrix` (among its first `among`) with the largest cosine to `row`, the row itself left out."""
    unit = F.normalize(matrix[:among], dim=-1)
    scores = unit @ F.normalize(matrix[row], dim=-1)
    if row < among:
        scores[row] = -2
    return [labels[i] for i in scores.topk(k).indices]


word2vec_neighbours = {
    kind: {w: neighbours(models[kind][0], index[w], vocab, FREQUENT) for w in PROBE} for kind in models
}
for kind in models:
    print(f"\n{kind}")
    print(table([(w, ", ".join(word2vec_neighbours[kind][w])) for w in PROBE], ("word", "nearest words")))
report["word2vec_neighbours"] = word2vec_neighbours
report["probe_counts"] = {w: counts[w] for w in PROBE}

# %% [markdown]
# Some neighbours are what a reader would pick: *file* → *document*, *filename*, *directory*, *folder* (CBOW);
# *delete* → *remove*, *deleted*, *rename*; *server* → *host*, *port*, *connect* (skip-gram); *color* →
# *background*, *font*. Others show how little text this is: *password* occurs 19 times, and its CBOW neighbours
# (*picture*, *timer*) are noise; *error* sits with *reading* and *loading* ("error while reading …"); and
# *listenbrainz*, a service one of the catalogued applications talks to, is a neighbour of *server*.

# %% [markdown]
# ### A check a reader can judge: pairs that belong together
#
# 29 pairs of words that play the same role in UI strings (opposites and partners: *open/close*, *read/write*,
# *width/height*, …) against the same words **mismatched** (*open/height*, *read/close*, …: every $a_i$ with every
# $b_j$, $j \ne i$). Using the same words for both sets means word frequency cannot explain a difference.

# %%
PAIRS = [
    ("open", "close"), ("read", "write"), ("file", "directory"), ("create", "delete"), ("add", "remove"),
    ("enable", "disable"), ("start", "stop"), ("show", "hide"), ("before", "after"), ("load", "save"),
    ("upload", "download"), ("import", "export"), ("expand", "collapse"), ("width", "height"), ("row", "column"),
    ("key", "value"), ("username", "password"), ("next", "previous"), ("first", "last"), ("server", "client"),
    ("minimum", "maximum"), ("source", "destination"), ("copy", "move"), ("new", "old"), ("user", "group"),
    ("increase", "decrease"), ("up", "down"), ("left", "right"), ("top", "bottom"),
]  # fmt: skip


def pair_similarity(matrix: torch.Tensor, rows_a: list[int], rows_b: list[int]) -> dict:
    """Cosines of the related pairs (a_i, b_i), mean cosine of the mismatched pairs (a_i, b_j), i != j, and for how
    many a_i the partner b_i is the closest of all the b_j."""
    a, b = F.normalize(matrix[rows_a], dim=-1), F.normalize(matrix[rows_b], dim=-1)
    s = a @ b.T
    off_diagonal = ~torch.eye(len(rows_a), dtype=torch.bool)
    return {
        "pairs": s.diagonal(),
        "related": s.diagonal().mean().item(),
        "mismatched": s[off_diagonal].mean().item(),
        "matches": int((s.argmax(1) == torch.arange(len(rows_a))).sum()),
    }


rows_a, rows_b = [index[a] for a, _ in PAIRS], [index[b] for _, b in PAIRS]
similarity = {
    "untrained": pair_similarity(models["skipgram"][1], rows_a, rows_b),
    "cbow": pair_similarity(models["cbow"][0], rows_a, rows_b),
    "skipgram": pair_similarity(models["skipgram"][0], rows_a, rows_b),
}
rows = [(k, f"{v['related']:.3f}", f"{v['mismatched']:.3f}") for k, v in similarity.items()]
print(table(rows, ("vectors", "related pairs", "mismatched pairs")))
report["word2vec_similarity"] = {
    k: {"related": v["related"], "mismatched": v["mismatched"], "matches": v["matches"]} for k, v in similarity.items()
}
# CBOW against skip-gram on this one task, with more seeds (the seed sets W's start, the order and the noise words):
# their training losses measure different tasks, so this is where the two are compared.
SEEDS = (0, 1, 2)
seed_models = {  # kept for the exercises' last cell
    kind: [models[kind]] + [train_word2vec(kind, EPOCHS, seed=seed, gaps=False) for seed in SEEDS[1:]]
    for kind in ("cbow", "skipgram")
}
seed_similarity = {
    kind: [pair_similarity(trained[0], rows_a, rows_b) for trained in seed_models[kind]] for kind in seed_models
}
report["word2vec_seeds"] = {
    kind: {"gap": [v["related"] - v["mismatched"] for v in values], "matches": [v["matches"] for v in values]}
    for kind, values in seed_similarity.items()
}
print(
    table(
        [
            (kind, *(f"{gap:.3f} ({matches})" for gap, matches in zip(v["gap"], v["matches"], strict=True)))
            for kind, v in report["word2vec_seeds"].items()
        ],
        ("related − mismatched (partner closest)", *(f"seed {seed}" for seed in SEEDS)),
    )
)
report["skipgram_pair_cosines"] = dict(
    zip([f"{a}/{b}" for a, b in PAIRS], similarity["skipgram"]["pairs"].tolist(), strict=True)
)

# %% [markdown]
# Untrained vectors give about 0 for both sets, as random directions in 64 dimensions do. After training, related
# pairs are far closer than mismatched ones. Mismatched pairs are not at 0 either: the trained vectors share a common
# direction (each word is "a word of these strings"), which lifts the cosines a little.
#
# This check is where CBOW and skip-gram can be compared, as their training losses cannot. With three seeds each (the
# seed sets the start of $W$, the order of the windows and the noise words), the gap between related and mismatched
# pairs is 0.302 to 0.315 for CBOW and 0.272 to 0.280 for skip-gram, and a word's partner is the closest of the 29 for
# 14 to 16 words (CBOW) and 16 to 17 (skip-gram). CBOW's gap is larger than skip-gram's with each seed, skip-gram finds
# the partner no less often than CBOW with each seed: each objective is a little ahead on one of the two measures.
#
# Note what "similar" means here: *open* and *close* are opposites, but they occur in the same places
# ("Could not ___ file"), so their vectors are close. word2vec measures **interchangeability in context**, not
# synonymy.
#
# ### Analogies
#
# The famous test is vector arithmetic: $v_{b} - v_{a} + v_{c}$ should be nearest to $v_d$ in
# *a : b = c : d* ("king − man + woman ≈ queen"). On 13 analogies built from the pairs:

# %%
ANALOGIES = [
    ("enable", "disable", "show", "hide"), ("open", "close", "read", "write"), ("width", "height", "row", "column"),
    ("import", "export", "upload", "download"), ("minimum", "maximum", "first", "last"),
    ("left", "right", "top", "bottom"), ("expand", "collapse", "show", "hide"), ("start", "stop", "show", "hide"),
    ("before", "after", "first", "last"), ("up", "down", "top", "bottom"),
    ("increase", "decrease", "add", "remove"), ("file", "files", "user", "users"),
    ("key", "keys", "value", "values"),
]  # fmt: skip


def analogy_hits(matrix: torch.Tensor) -> list[str]:
    """The analogies a : b = c : d whose d is the nearest word to b - a + c (a, b and c themselves excluded)."""
    unit = F.normalize(matrix, dim=-1)
    hits = []
    for a, b, c, d in ANALOGIES:
        scores = unit @ (unit[index[b]] - unit[index[a]] + unit[index[c]])
        scores[[index[a], index[b], index[c]]] = -2
        if vocab[scores.argmax()] == d:
            hits.append(f"{a}:{b} = {c}:{d}")
    return hits


vectors = {"untrained": models["skipgram"][1], "cbow": models["cbow"][0], "skipgram": models["skipgram"][0]}
analogies = {kind: analogy_hits(matrix) for kind, matrix in vectors.items()}
report["analogy_hits"] = analogies
report["pairs_and_analogies"] = [len(PAIRS), len(ANALOGIES)]
for kind, hits in analogies.items():
    print(f"{kind}: {len(hits)} of {len(ANALOGIES)} {hits}")

# %% [markdown]
# Skip-gram solves 1 of the 13 and CBOW none. Analogies need far more text than 45,354 words (Mikolov et al. trained on
# billions): here a *difference* of two vectors is mostly noise, even when the vectors themselves are already good
# neighbours.
#
# ### A map of the vectors
#
# The skip-gram vectors of the pair words, projected on their first two principal components (the 2-D view that
# keeps most of their spread). Lines join the pairs.

# %%
map_words = sorted({w for pair in PAIRS[:14] for w in pair}, key=lambda w: index[w])
points = models["skipgram"][0][[index[w] for w in map_words]]
centred = points - points.mean(0)
_, singular, basis = torch.linalg.svd(centred, full_matrices=False)
xy = centred @ basis[:2].T  # (words, 2)
report["map_explained_variance"] = (singular[:2] ** 2).sum().item() / (singular**2).sum().item()

figure, axis = plt.subplots(figsize=(7, 5.5))
axis.scatter(xy[:, 0], xy[:, 1], s=12, color="tab:blue")
for word, (x, y) in zip(map_words, xy.tolist(), strict=True):
    axis.annotate(word, (x, y), fontsize=8, xytext=(3, 2), textcoords="offset points")
position = {w: xy[i] for i, w in enumerate(map_words)}
for a, b in PAIRS[:14]:
    axis.plot(*zip(position[a].tolist(), position[b].tolist(), strict=True), color="tab:orange", lw=0.8, alpha=0.7)
axis.set_title(
    f"skip-gram vectors, 2 principal components ({100 * report['map_explained_variance']:.0f}% of the spread)",
    fontsize=9,
)
save_figure(figure, args.figures, "02_embedding_map", xy=xy, words=np.array(map_words))

# %% [markdown]
# Two dimensions keep only part of the 64, so the picture is a hint, not a proof; the cosines above are the
# measurement.
#
# ## 4. The Transformer's token embeddings
#
# A Transformer learns its embedding matrix too, but as a by-product of its own task, not of a word2vec objective.
# We load the English → German model of tutorials 06 and 09: the tutorials' own run, the main job's recipe trained
# on the same pinned pairs with a smaller model and vocabulary (`tutorial_support.py` trains it on first use). Its
# embedding is **shared**: the encoder reads English tokens, the decoder German ones, from the same matrix, which is
# also the output layer that scores the next German token (`lm_head`, tied). Its rows are subword tokens of the
# shared English + German vocabulary.

# %%
model, model_tokenizer, origin = load_translation_model(args)
report["model_origin"] = origin
report["model_shape"] = list(model.get_input_embeddings().weight.shape)  # (vocabulary, width)
table_ = model.get_input_embeddings().weight.detach()  # (V, hidden_size)
encoder_embedding, decoder_embedding = model.get_encoder().embed_tokens, model.model.decoder.embed_tokens
report["embedding_shared"] = bool(
    encoder_embedding.weight.data_ptr() == decoder_embedding.weight.data_ptr() == model.lm_head.weight.data_ptr()
)
ids = torch.tensor(model_tokenizer("Could not open file")["input_ids"])
report["model_one_hot_equals_lookup"] = torch.equal(
    encoder_embedding(ids), F.one_hot(ids, len(table_)).to(table_.dtype) @ table_
)
print(
    f"Vocabulary {table_.shape[0]}, width {table_.shape[1]}; encoder, decoder and output layer share one matrix: "
    f"{report['embedding_shared']}; its lookup is one-hot @ W: {report['model_one_hot_equals_lookup']}"
)

# %% [markdown]
# Its vocabulary is small, so most words are several pieces: ` open` is `Ġo` + `pen`, ` password` `Ġp` + `assw` +
# `ord`. A standard way to compare words cut into pieces is to give each word the **mean of the rows of its
# pieces** (of `" word"`, the form inside a string). One caution: two words that share a piece get a positive cosine
# from that piece alone, whatever the training. So every check below is also run on a **random** matrix of the same
# shape with the same pieces: whatever that control shows comes from the shared pieces, not from training.
#
# Raw rows of a trained Transformer are also usually **anisotropic**: they share a large common direction, so that
# most pairs of tokens have a high cosine and the differences ride on top of it (Mu & Viswanath 2018 remove the mean
# vector for this reason). We subtract the mean row of the tokens seen at least 20 times in the training split of the
# pinned pairs (the other rows, such as byte symbols that rarely occur alone, barely moved from their random start).
# First the pair check of section 3, on these word vectors (the last column: for how many words $a_i$ the partner
# $b_i$ is the closest of all the $b_j$):


# %%
def pieces(word: str) -> list[int]:
    """The ids of " word" in the model's vocabulary: one or several pieces."""
    return model_tokenizer(" " + word, add_special_tokens=False)["input_ids"]


def word_vectors(matrix: torch.Tensor, words: list[str]) -> torch.Tensor:
    """One vector per word: the mean of the rows of its pieces, (len(words), width)."""
    return torch.stack([matrix[pieces(w)].mean(0) for w in words])


english_ids = model_tokenizer(list(splits["train"]["source"]), add_special_tokens=False)["input_ids"]
german_ids = model_tokenizer(list(splits["train"]["target"]), add_special_tokens=False)["input_ids"]
seen = Counter(chain.from_iterable(english_ids + german_ids))
frequent = torch.tensor([seen[i] >= 20 for i in range(len(table_))])
report["frequent_tokens"] = [int(frequent.sum()), len(table_)]
report["frequent_min_count"] = 20
matrices = {
    "random": torch.randn(table_.shape, generator=torch.Generator().manual_seed(0)),  # the control: pieces only
    "raw": table_,
    "centred": table_ - table_[frequent].mean(0),  # the common direction removed
}
one_token = [(a, b) for a, b in PAIRS if len(pieces(a)) == len(pieces(b)) == 1]
report["pieces_per_word"] = float(np.mean([len(pieces(w)) for pair in PAIRS for w in pair]))
report["pairs_one_token"] = len(one_token)
print(
    f"{int(frequent.sum())} of {len(table_)} tokens occur at least 20 times; the pair words are "
    f"{report['pieces_per_word']:.1f} pieces each on average, {len(one_token)} of the {len(PAIRS)} pairs are two "
    "single tokens"
)

words_a, words_b = [a for a, _ in PAIRS], [b for _, b in PAIRS]
n = len(PAIRS)
transformer_similarity = {
    name: pair_similarity(word_vectors(matrix, words_a + words_b), list(range(n)), list(range(n, 2 * n)))
    for name, matrix in matrices.items()
}
report["transformer_similarity"] = {
    name: {k: v[k] for k in ("related", "mismatched", "matches")} for name, v in transformer_similarity.items()
}
print(
    table(
        [
            (name, f"{v['related']:.3f}", f"{v['mismatched']:.3f}", f"{v['matches']} of {n}")
            for name, v in [*transformer_similarity.items(), ("word2vec skip-gram", similarity["skipgram"])]
        ],
        ("word vectors", "related pairs", "mismatched pairs", "partner is the closest b"),
    )
)

# %% [markdown]
# **Neighbours.** For the probe words of section 3, the nearest words (centred vectors) among the same 1,000 most
# frequent English words that word2vec's neighbours come from:

# %%
candidates = vocab[:FREQUENT]
candidate_vectors = word_vectors(matrices["centred"], candidates)
candidate_index = {w: i for i, w in enumerate(candidates)}
transformer_neighbours = {w: neighbours(candidate_vectors, candidate_index[w], candidates, FREQUENT) for w in PROBE}
report["transformer_neighbours"] = transformer_neighbours
print(
    table(
        [(w, ", ".join(transformer_neighbours[w]), ", ".join(word2vec_neighbours["skipgram"][w])) for w in PROBE],
        ("word", "Transformer (mean of pieces)", "word2vec skip-gram"),
    )
)

# %% [markdown]
# One thing word2vec on English text cannot show: the Transformer's matrix holds German tokens too. Are an
# English word and its German translation close in it? The same check, with translation pairs (*file/Datei*,
# *error/Fehler*, …) against mismatched ones (*file/Fehler*, …):

# %%
TRANSLATIONS = [
    ("file", "Datei"), ("error", "Fehler"), ("user", "Benutzer"), ("key", "Schlüssel"), ("password", "Passwort"),
    ("window", "Fenster"), ("open", "öffnen"), ("delete", "löschen"), ("name", "Name"), ("directory", "Verzeichnis"),
    ("folder", "Ordner"), ("number", "Zahl"), ("list", "Liste"), ("table", "Tabelle"), ("line", "Zeile"),
    ("value", "Wert"), ("group", "Gruppe"), ("version", "Version"), ("command", "Befehl"), ("option", "Option"),
    ("type", "Typ"), ("message", "Nachricht"), ("size", "Größe"), ("invalid", "ungültig"), ("not", "nicht"),
    ("new", "neue"), ("text", "Text"), ("data", "Daten"), ("files", "Dateien"), ("image", "Bild"),
    ("format", "Format"), ("object", "Objekt"), ("column", "Spalte"), ("path", "Pfad"), ("time", "Zeit"),
    ("cannot", "kann"), ("could", "konnte"), ("failed", "fehlgeschlagen"), ("unknown", "unbekannt"),
    ("missing", "fehlt"), ("server", "Server"), ("index", "Index"), ("input", "Eingabe"), ("output", "Ausgabe"),
    ("search", "Suche"), ("page", "Seite"), ("color", "Farbe"), ("language", "Sprache"), ("device", "Gerät"),
]  # fmt: skip
english, german = [e for e, _ in TRANSLATIONS], [g for _, g in TRANSLATIONS]
n = len(TRANSLATIONS)
report["translation_pairs"] = n
report["translations_one_token"] = sum(len(pieces(e)) == len(pieces(g)) == 1 for e, g in TRANSLATIONS)
translation_similarity = {
    name: pair_similarity(word_vectors(matrix, english + german), list(range(n)), list(range(n, 2 * n)))
    for name, matrix in matrices.items()
}
report["translation_similarity"] = {
    name: {k: v[k] for k in ("related", "mismatched", "matches")} for name, v in translation_similarity.items()
}
# The same without the pairs whose two words share a piece (server/Server: `erver`): spelling cannot explain these.
unshared = [(e, g) for e, g in TRANSLATIONS if not set(pieces(e)) & set(pieces(g))]
n_unshared = len(unshared)
unshared_similarity = {
    name: pair_similarity(
        word_vectors(matrix, [e for e, _ in unshared] + [g for _, g in unshared]),
        list(range(n_unshared)),
        list(range(n_unshared, 2 * n_unshared)),
    )
    for name, matrix in matrices.items()
}
report["translation_pairs_unshared"] = n_unshared
report["translation_similarity_unshared"] = {
    name: {k: v[k] for k in ("related", "mismatched", "matches")} for name, v in unshared_similarity.items()
}
closest = sorted(zip(translation_similarity["centred"]["pairs"].tolist(), TRANSLATIONS, strict=True), reverse=True)
report["translation_closest"] = [f"{e}/{g}" for _, (e, g) in closest[:5]]
report["translation_farthest"] = [f"{e}/{g}" for _, (e, g) in closest[-5:]]
print(
    table(
        [
            (name, f"{v['related']:.3f}", f"{v['mismatched']:.3f}", f"{v['matches']} of {n}")
            for name, v in translation_similarity.items()
        ],
        ("word vectors", "translations", "mismatched", "translation is the closest German word"),
    )
)
print(
    f"{n_unshared} pairs share no piece: centred {unshared_similarity['centred']['related']:.3f} vs "
    f"{unshared_similarity['centred']['mismatched']:.3f}, the translation closest for "
    f"{unshared_similarity['centred']['matches']} (random control: {unshared_similarity['random']['matches']})"
)
print(f"closest: {', '.join(f'{e}/{g} {c:.2f}' for c, (e, g) in closest[:5])}")
print(f"farthest: {', '.join(f'{e}/{g} {c:.2f}' for c, (e, g) in closest[-5:])}")

# %%
groups = [
    ("word2vec\nuntrained", similarity["untrained"]),
    ("word2vec\nCBOW", similarity["cbow"]),
    ("word2vec\nskip-gram", similarity["skipgram"]),
    ("Transformer\nrandom\ncontrol", transformer_similarity["random"]),
    ("Transformer\nraw rows", transformer_similarity["raw"]),
    ("Transformer\ncentred", transformer_similarity["centred"]),
    ("translations\nrandom\ncontrol", translation_similarity["random"]),
    ("translations\ncentred", translation_similarity["centred"]),
]
related = [g["related"] for _, g in groups]
mismatched = [g["mismatched"] for _, g in groups]
figure, axis = plt.subplots(figsize=(9, 3.6))
x = np.arange(len(groups))
axis.bar(x - 0.2, related, 0.4, label="related pairs (open/close, file/Datei, …)")
axis.bar(x + 0.2, mismatched, 0.4, label="mismatched pairs (open/height, file/Fehler, …)")
axis.set_xticks(x, [name for name, _ in groups], fontsize=8)
axis.set_ylabel("mean cosine")
axis.axhline(0, color="gray", lw=0.8)
axis.legend(fontsize=8)
axis.set_title("Related words: word2vec's vectors and a translation model's (mean of a word's pieces)", fontsize=9)
save_figure(
    figure,
    args.figures,
    "02_similarity",
    related=related,
    mismatched=mismatched,
    pairs=[len(PAIRS)] * 6 + [len(TRANSLATIONS)] * 2,
)

# %% [markdown]
# What the numbers of the tutorials' own run show (2,000 tokens of width 128; the pair words are 2.5 pieces each on
# average, and only 7 of the 49 translation pairs, none of the 29 English pairs, have a single token on both sides):
#
# * **English pairs: hardly more than spelling.** Centred, related pairs get 0.246 against 0.108 for mismatched
#   ones, a gap of 0.138; but the random control already has a gap of 0.060, from shared pieces (*enable* and
#   *disable* share `able`), and a word's partner is the closest of the 29 for 5 words, as in the control (5).
#   word2vec's skip-gram: a gap of 0.278, and the partner is the closest for 16 words.
# * **Neighbours: mostly spelling.** Words of several pieces land near words that start with the same piece
#   (*password* → *p*, *port*, *private*; *server* → *s*, *scroll*, *system*). One-token words are no different
#   (*file* → *source*, *was*, *files*, *person*), nothing like word2vec's *server* → *connect*, *host*, *port*.
# * **Translations: yes.** An English word and its German translation get 0.299 against 0.009 for mismatched pairs
#   (control: 0.060 against 0.002), and for 23 of the 49 English words the translation is the closest of the 49
#   German words (control: 8). The closest pairs share a piece (*server/Server*, *group/Gruppe*), but the 43 pairs that
#   share no piece give the same picture: 0.244 against −0.002, the translation closest for 17 (control: 2).
#
# So the translation model has put into its embedding what its own task rewards: a word lies near its translation
# (plausibly because one matrix both reads *file* in the encoder and scores *Datei* at the decoder's output), not
# near the words that could take its place in an English string, which is what word2vec's objective asks for. An
# embedding reflects the objective it was trained with as much as the text.
#
# More differences hold for any Transformer. Its rows are subword tokens, so a word is often several rows, and
# the mean above is only one way to make one vector of them. And these rows are only the *input* of the model: the
# attention layers then change each vector according to the string around it, which word2vec (one vector per word
# whatever the context) cannot do. Section 5 measures that.
#
# ## 5. Contextual vectors: an encoder that fills masks
#
# BERT (Devlin et al. 2019) trains an encoder with the **masked-LM** objective: hide 15% of the tokens of a text and
# predict them from both sides. No labels are needed, as for word2vec, but the predictor is a Transformer, so the
# vector of each token after its layers depends on the whole string. We train a small `HFAttentionForMaskedLM`
# (the library's encoder family, the one `training/objectives/masked_lm.py` trains) on the English strings of the
# training split, with the project's tokenizer for it (`train_tokenizer(..., kind="masked")`, which adds `<mask>`),
# masked by the same collator as the project's masked-LM objective (`DataCollatorForLanguageModeling`: of the
# chosen 15%, 80% become `<mask>`, 10% a random token, 10% stay).

# %%
from transformers import DataCollatorForLanguageModeling  # noqa: E402

from hf_attention import HFAttentionEncoderConfig, HFAttentionForMaskedLM  # noqa: E402

MLM = {
    "vocab_size": 600,
    "hidden_size": 64,
    "layers": 2,
    "steps": 600,  # --quick too: fewer steps stay at the unigram guess (the loss plateaus before it learns context)
    "batch": 64,
    "max_tokens": 24,
    "mask_probability": 0.15,
}
report["mlm_settings"] = MLM
english_train = list(splits["train"]["source"])
mlm_tokenizer = train_tokenizer(english_train, MLM["vocab_size"], kind="masked")
encoded = mlm_tokenizer(english_train, truncation=True, max_length=MLM["max_tokens"], return_special_tokens_mask=True)
features = [
    {"input_ids": ids, "special_tokens_mask": special}
    for ids, special in zip(encoded["input_ids"], encoded["special_tokens_mask"], strict=True)
]
collator = DataCollatorForLanguageModeling(mlm_tokenizer, mlm=True, mlm_probability=MLM["mask_probability"])

torch.manual_seed(0)  # the initial weights and the collator's masks
mlm_config = HFAttentionEncoderConfig(
    vocab_size=len(mlm_tokenizer),
    hidden_size=MLM["hidden_size"],
    num_hidden_layers=MLM["layers"],
    num_attention_heads=4,
    intermediate_size=4 * MLM["hidden_size"],
    position_encoding="rotary",  # positions inside attention: the layer-0 vector of a token is its embedding row
    norm_position="pre",
    hidden_dropout_prob=0.0,
    pad_token_id=mlm_tokenizer.pad_token_id,
)
mlm_model = HFAttentionForMaskedLM(mlm_config)
optimizer = torch.optim.AdamW(mlm_model.parameters(), lr=1e-2, weight_decay=0.01)
warmup = MLM["steps"] // 10
schedule = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda step: min((step + 1) / warmup, (MLM["steps"] - step) / (MLM["steps"] - warmup))
)
order = torch.randperm(len(features))
mlm_losses = []
for step in range(MLM["steps"]):
    start = step * MLM["batch"] % len(features)
    batch = collator([features[i] for i in order[start : start + MLM["batch"]].tolist()])
    loss = mlm_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]).loss
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    schedule.step()
    mlm_losses.append(loss.item())
mlm_model.eval()
report["mlm_loss_first_last"] = [float(np.mean(mlm_losses[:20])), float(np.mean(mlm_losses[-50:]))]
print(f"masked-LM loss {np.mean(mlm_losses[:20]):.2f} (first 20 steps) → {np.mean(mlm_losses[-50:]):.2f} (last 50)")

# %% [markdown]
# **Filling masks on held-out strings.** On the validation strings (not trained on), 15% of the tokens are replaced
# by `<mask>` (all of them, and the same ones for every model), and the model's most likely token is compared with the
# hidden one. The baseline is a unigram model: always guess the most frequent token of the training text.

# %%
held_out = mlm_tokenizer(list(splits["validation"]["source"]), truncation=True, max_length=MLM["max_tokens"])
generator = torch.Generator().manual_seed(1)
unigram = Counter(t for ids in encoded["input_ids"] for t in ids if t not in mlm_tokenizer.all_special_ids)
commonest_token = unigram.most_common(1)[0][0]
hits = unigram_hits = masked_total = 0
with torch.no_grad():
    for ids in held_out["input_ids"]:
        ids = torch.tensor(ids)
        candidates = (ids > max(mlm_tokenizer.all_special_ids)).nonzero()[:, 0]  # not <s>, </s>
        chosen = candidates[torch.rand(len(candidates), generator=generator) < MLM["mask_probability"]]
        if len(chosen) == 0:
            continue
        masked = ids.clone()
        masked[chosen] = mlm_tokenizer.mask_token_id
        guess = mlm_model(input_ids=masked[None]).logits[0, chosen].argmax(-1)
        hits += (guess == ids[chosen]).sum().item()
        unigram_hits += (ids[chosen] == commonest_token).sum().item()
        masked_total += len(chosen)
report["mlm_accuracy"] = {
    "masked_tokens": masked_total,
    "model": hits / masked_total,
    "unigram": unigram_hits / masked_total,
    "unigram_token": mlm_tokenizer.convert_ids_to_tokens(commonest_token),
}
print(
    f"{masked_total} masked tokens: the model fills {hits / masked_total:.1%}, the unigram guess "
    f"{mlm_tokenizer.convert_ids_to_tokens(commonest_token)!r} {unigram_hits / masked_total:.1%}"
)


def fill_mask(before: str, after: str, k: int = 5) -> list[str]:
    """The k most likely tokens for one <mask> between `before` and `after` (whose first word is glued to the mask
    unless `after` starts with a space)."""
    ids = (
        mlm_tokenizer(before)["input_ids"][:-1]  # <s> and the text, without </s>
        + [mlm_tokenizer.mask_token_id]
        + mlm_tokenizer(after, add_special_tokens=False)["input_ids"]
        + [mlm_tokenizer.eos_token_id]
    )
    with torch.no_grad():
        logits = mlm_model(input_ids=torch.tensor([ids])).logits[0, ids.index(mlm_tokenizer.mask_token_id)]
    return [
        mlm_tokenizer.convert_tokens_to_string([t])
        for t in mlm_tokenizer.convert_ids_to_tokens(logits.topk(k).indices)
    ]


FILL = [
    ("Could not open", ""),
    ("Delete the selected", ""),
    ("Are you sure you want to", " this file?"),
    ("Show", " files"),
]
fills = {f"{before} <mask>{after}": fill_mask(before, after) for before, after in FILL}
report["mlm_fills"] = fills
print(table([(text, " | ".join(repr(t) for t in top)) for text, top in fills.items()], ("string", "top 5")))

# %% [markdown]
# After 600 steps (2 layers, width 64, the 600-token vocabulary of the tutorials' small runs, trained on English
# only) the encoder fills 11.9% of the 1,113 masked tokens of the validation strings, against 2.1% for the unigram
# guess (`s`). Its top guesses are often pieces of words, as its vocabulary is, and show what it has learned from
# both sides: after *Delete the selected* it proposes ` person` (Gramps, a genealogy program, is one
# of the catalogued applications), between *Show* and *files* the ending `ing`, and after *Could not open* the
# punctuation that ends such strings. A model that reads both sides of the gap, if a weak one after 600 steps.
#
# **One word, many vectors.** word2vec gives *file* one vector, whatever the string. The encoder's vector of the
# token ` file` after each layer, in the first 40 training strings that hold it, is another matter. For each layer
# we compare the cosine between the vectors of ` file` in two different strings with the cosine between ` file` in
# one string and the other tokens of another string (different words).

# %%
CONTEXT_WORD = " file"
word_id = mlm_tokenizer.convert_tokens_to_ids(mlm_tokenizer.tokenize(CONTEXT_WORD))
assert len(word_id) == 1, "the word must be one token"
with_word = [ids for ids in encoded["input_ids"] if word_id[0] in ids][:40]  # the first 40 training strings with it
file_vectors, other_vectors = [], []  # per string: (layers + 1, dim) of the word; (layers + 1, n, dim) of the rest
with torch.no_grad():
    for ids in with_word:
        states = torch.stack(mlm_model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states)
        states = states[:, 0]  # (layers + 1, T, dim)
        ids = torch.tensor(ids)
        file_vectors.append(states[:, (ids == word_id[0]).nonzero()[0, 0]])
        others = (ids != word_id[0]) & (ids > max(mlm_tokenizer.all_special_ids))
        other_vectors.append(states[:, others])
same_word, different_words = [], []
for layer in range(MLM["layers"] + 1):
    words_ = F.normalize(torch.stack([v[layer] for v in file_vectors]), dim=-1)  # (strings, dim)
    cos = words_ @ words_.T
    off = ~torch.eye(len(words_), dtype=torch.bool)
    same_word.append(cos[off].mean().item())
    cross = [
        (words_[i] @ F.normalize(other_vectors[j][layer], dim=-1).T).mean().item()
        for i in range(len(words_))
        for j in range(len(words_))
        if i != j
    ]
    different_words.append(float(np.mean(cross)))
static = F.normalize(models["skipgram"][0][index["file"]], dim=-1)
report["contextual"] = {
    "word": CONTEXT_WORD,
    "strings": len(with_word),
    "same_word": same_word,
    "different_words": different_words,
    "same_word_min_last_layer": cos[off].min().item(),
    "word2vec_same_word": (static @ static).item(),  # one vector: cosine 1 with itself in every string
}
print(
    table(
        [(layer, f"{a:.3f}", f"{b:.3f}") for layer, (a, b) in enumerate(zip(same_word, different_words, strict=True))],
        ("after layer", f"{CONTEXT_WORD!r} in two strings", f"{CONTEXT_WORD!r} vs other words"),
    )
)

figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
smooth_mlm = np.convolve(mlm_losses, np.ones(20) / 20, mode="valid")
left.plot(smooth_mlm)
left.set_xlabel("step")
left.set_ylabel("masked-LM loss (mean of 20 steps)")
left.set_title("Training the encoder", fontsize=9)
layers_ = np.arange(MLM["layers"] + 1)
right.plot(layers_, same_word, "o-", label=f"'{CONTEXT_WORD.strip()}' in two different strings")
right.plot(layers_, different_words, "o-", label=f"'{CONTEXT_WORD.strip()}' vs other words")
right.axhline(1, color="gray", ls="--", lw=0.8, label="word2vec: one vector, cosine 1")
right.set_xticks(layers_, ["embedding"] + [f"layer {i}" for i in layers_[1:]])
right.set_ylabel("mean cosine")
right.legend(fontsize=7)
right.set_title("The encoder's vectors depend on the string", fontsize=9)
save_figure(
    figure, args.figures, "02_contextual", loss=smooth_mlm, same_word=same_word, different_words=different_words
)

# %% [markdown]
# Before the layers the vector of ` file` is its embedding row, the same in all 40 strings: a mean cosine of 1.000,
# like word2vec's one vector (rotary positions act inside attention, not on this row). After the first layer the
# cosine between ` file` in two different strings falls to 0.868, after the second it is 0.788 (the least similar pair
# of strings: 0.375): the string has changed the vector. It still stays closer to itself than to other words (0.138 and
# 0.245 after the two layers), so the word remains recognisable in its context. This is what the attention layers of
# the next tutorials compute: a vector per token *in its string*, not per word of the vocabulary.

# %% [markdown]
# ## Self-test
#
# a. Why is `Directory` two tokens in the 8,000-token vocabulary when ` directory` is one?
#
# b. An embedding lookup returns the same numbers as a one-hot vector times $W$. Why exactly the same, and why do
#    models use the lookup?
#
# c. Why is word2vec's first training loss $6 \log 2$?
#
# d. Skip-gram's training loss ends higher than CBOW's. Are its vectors worse? How does the tutorial compare the two?
#
# e. What does the translation model's embedding put close together, and how does the tutorial rule out shared
#    spelling?
#
# f. Does the masked-LM encoder give the token ` file` one vector, as word2vec does?

# %% [markdown]
# ### Self-test answers
#
# a. BPE learns its merges within pre-tokens, and a capitalised word at the start of a string has no `Ġ`: `Directory`
#    is a pre-token of its own, seen 5 times in the training text against 34 for ` directory`. A merge is learned
#    only for a frequent pair, and `Direct` + `ory` occurs 5 times, no more than the last merges that got into the
#    vocabulary (a median of 5): it did not get in (section 1).
#
# b. All the entries of $e_i$ but one are 0, so $e_i^\top W$ adds row $i$ to zeros: exactly $W_i$. But the product
#    does $V \cdot d$ multiply-adds per token and reads the whole of $W$, where the lookup copies $d$ numbers: for a
#    batch of the main job, 7.9e8 multiply-adds against 98,304 numbers copied (section 2).
#
# c. $W'$ starts at zero, so the scores all start at 0 and each of the $1 + K$ logistic terms is
#    $-\log\sigma(0) = \log 2$: with $K = 5$ noise words that is $6 \log 2 \approx 4.159$ (section 3).
#
# d. Not necessarily: the losses (1.31 against 0.99) measure different tasks. A skip-gram example is one (centre,
#    context) pair, so the same input has several right answers and part of its loss cannot be removed. The pair
#    check compares the vectors on one task: CBOW's gap between related and mismatched pairs is larger than
#    skip-gram's with each of the three seeds (0.302 to 0.315 against 0.272 to 0.280), while skip-gram finds a word's
#    partner no less often than CBOW (16 to 17 of the 29 words against 14 to 16). Neither is ahead on both measures
#    (section 3).
#
# e. Translations: an English word and its German translation get a mean cosine of 0.299 against 0.009 for
#    mismatched pairs, and the translation is the closest German word for 23 of the 49 English words. Shared pieces
#    cannot explain it: a random matrix with the same pieces (the control) finds the translation for only 8, and the
#    43 pairs that share no piece still find it for 17 (control: 2). English partners such as *open/close* gain
#    little beyond spelling: the partner is the closest for 5 of the 29 words, as in the control (section 4).
#
# f. No. Before the layers it is the embedding row, the same in all 40 strings (mean cosine 1.000); after the two
#    layers the mean cosine of ` file` in different strings is 0.788, against 0.245 with other words: the string
#    changes the vector, and the word stays recognisable (section 5).

# %% [markdown]
# **Next:** [03 · attention pooling as kernel regression](03_nadaraya_watson.py).
#
# ## Exercises
#
# 1. Train the tokenizer at 300 and 16,000 tokens and add them to the tokens-per-word figure. Where does the
#    curve flatten for English, and for German?
# 2. Find a word that the 8,000-token vocabulary splits although it is frequent, and explain the split from the
#    merge ranks with `replay_bpe` (try `"Keyboard"`).
# 3. Change the CBOW mean into a sum. Does the model still train with the same learning rate? By how much does the
#    sum change $h$, and does it change what the model can represent?
# 4. Set `WINDOW = 1` and `WINDOW = 6` and rerun the pair check. Which window gives the larger gap between related
#    and mismatched pairs, and why would a wider window favour *topical* rather than *functional* similarity?
# 5. Train skip-gram on CPython's documentation (`training.data.corpora.python_docs_corpus()`) and look at the
#    neighbours of `list`, `string` and `error`. How do they differ from the catalog vectors?
# 6. Use $W + W'$ (input plus output vectors) instead of $W$ for the pair check. Does it help?
#
# <details><summary>Answers</summary>
#
# 1. The cell below measures it. With 300 tokens an English word of the validation strings is 5.35 tokens on
#    average and a German one 6.47; with 16,000, 1.51 and 1.72. Each doubling of the vocabulary saves less than the
#    one before, in both languages: going up the sizes 300, 600, 2,000, 8,000 and 16,000, tokens per English word fall
#    by 1.80, 0.67, 0.34 and 0.19 per doubling, per German word by 2.19, 0.85, 0.42 and 0.24. So there is no sharp
#    bend: both curves flatten gradually, at the same sizes. The common words are whole early, and the later merges go
#    to rarer words. German stays above English at every size (longer compound words).
# 2. The cell below replays it. With 8,000 tokens `Keyboard` stops at `Key` + `board` after 6 merges, while
#    `Ġkeyboard` becomes one token after 8, the last `Ġkey` + `board` at rank 6,635. A capitalised word at the start
#    of a string has no `Ġ`, so it is another pre-token than the same word inside a sentence, and the catalogs hold
#    each string once: `Keyboard` occurs 3 times in the training text, `Ġkeyboard` 6 times. The merges that build
#    `Key` and `board` were learned early for other words (the last of them at rank 2,668); `Key` + `board` is too
#    rare a pair to be merged within 8,000 tokens.
# 3. The sum of the $m$ context vectors present is $m$ times their mean, and $m$ varies: at most 6, but these strings
#    are short, so a window holds 3.27 context words on average and only 12% of the windows hold 6 (a string of 2
#    words gives each word $m = 1$). So the sum is not one rescaling of $h$: it multiplies $h$, the scores $u^\top h$
#    and the gradients by a factor that changes from window to window, and windows in the middle of long strings
#    weigh more than those at the edges. It still trains with the same learning rate, because Adam divides each
#    parameter's step by the running size of its gradient, so larger gradients do not make larger steps (plain SGD
#    would need a learning rate up to 6 times smaller). What the model can represent does not change: $h$ is still a
#    combination of the context rows of $W$, weighted 1 instead of $1/m$. The cell below measures it, with the pair
#    check's three seeds: the sum trains (a loss of 0.948 to 0.987 over the last 10 steps, 0.986 to 1.016 with the
#    mean), and its gap between related and mismatched pairs, 0.268 to 0.296, is smaller than the mean's with each
#    seed (0.302 to 0.315); the partner is the closest for 13 to 17 words (the mean: 14 to 16).
# 4. The cell below measures it, with the pair check's three seeds. The gap grows with the window, with each seed:
#    for CBOW it is 0.259 to 0.280 with a window of 1, 0.302 to 0.315 with 3 and 0.314 to 0.328 with 6; for
#    skip-gram 0.213 to 0.248, 0.272 to 0.280 and 0.279 to 0.289. But a word's partner is the closest of the 29 no
#    more often with 6 than with 3, with each seed: for 12 to 15 words (CBOW) and 13 to 15 (skip-gram), against 14 to
#    16 and 16 to 17. A small window sees the words that could replace each other in the same slot (*open/close*); a
#    wide window also sees the words of the same topic a few words away (*password* … *expired* … *account*). These
#    strings are short: a window of 6 words on each side holds 4.38 context words on average (3 words: 3.27; 1 word:
#    1.52), so the widest window is most of the string. One reading, not measured: the words of one string's topic
#    move closer together as a group, which lifts the related pairs as a whole while a word's own partner stands out
#    less among the other words of its topic.
# 5. Not run here: CPython's documentation (`pydoc_data.topics`) ships with each Python version, so its text and
#    neighbours would differ from one Python version to the next, where this tutorial's data is pinned. Expect
#    neighbours from Python prose (types, statements, operations) instead of UI words: embeddings describe the text
#    they were trained on; the same word gets different neighbours in another corpus.
# 6. The cell below measures it, with the pair check's three seeds. It helps the gap: related minus mismatched is
#    0.412 to 0.432 with $W + W'$ for CBOW and 0.387 to 0.414 for skip-gram, against 0.302 to 0.315 and 0.272 to
#    0.280 with $W$ alone, larger than with $W$ for each seed, although $W'$ alone gives a smaller gap than $W$ (0.256
#    to 0.271 and 0.245 to 0.268); the two matrices have about the same norm ($|W'|$ is 0.88 to 1.04 times $|W|$). It
#    does not find the partner more often than $W$: the closest for 13 to 15 words (CBOW) and 13 to 17 (skip-gram),
#    against 14 to 16 and 16 to 17. GloVe (Pennington et al. 2014) also adds its two matrices, for the same reason:
#    they are two estimates of each word, with partly different noise.
#
# </details>
#
# ### References
#
# - T. Mikolov, K. Chen, G. Corrado, J. Dean, *Efficient estimation of word representations in vector space*, 2013.
# - T. Mikolov, I. Sutskever, K. Chen, G. Corrado, J. Dean, *Distributed representations of words and phrases and
#   their compositionality*, NeurIPS 2013.
# - R. Sennrich, B. Haddow, A. Birch, *Neural machine translation of rare words with subword units*, ACL 2016.
# - A. Radford et al., *Language models are unsupervised multitask learners* (GPT-2), 2019.
# - J. R. Firth, *A synopsis of linguistic theory 1930–1955*, 1957.
# - J. Mu, P. Viswanath, *All-but-the-top: simple and effective postprocessing for word representations*, ICLR 2018.
# - J. Pennington, R. Socher, C. D. Manning, *GloVe: global vectors for word representation*, EMNLP 2014.
# - O. Levy, Y. Goldberg, *Neural word embedding as implicit matrix factorization*, NeurIPS 2014.
# - J. Devlin, M.-W. Chang, K. Lee, K. Toutanova, *BERT: pre-training of deep bidirectional transformers for
#   language understanding*, NAACL 2019.
# - A. Zhang, Z. C. Lipton, M. Li, A. J. Smola, *Dive into Deep Learning* ([d2l.ai](https://d2l.ai)), §15.1–15.4.

# %%
# The exercises' measurements, after every other cell so that nothing above changes. The pair check's seeds (one in a
# --quick run): the seed sets W's start, the order and the noise words.
EXERCISE_SEEDS = SEEDS[:1] if args.quick else SEEDS


def seed_check(trained: list) -> dict:
    """The pair check's gap (related - mismatched mean cosine) and partners found, for each trained (W, ...)."""
    checks = [pair_similarity(matrix, rows_a, rows_b) for matrix in trained]
    return {"gap": [c["related"] - c["mismatched"] for c in checks], "matches": [c["matches"] for c in checks]}


# Exercise 1: two more vocabulary sizes, tokens per word on the same validation strings as section 1's figure.
extra_tokenizers = {size: train_tokenizer(train_texts, size, kind="seq2seq") for size in (300, 16000)}
all_sizes = sorted([*VOCAB_SIZES, *extra_tokenizers])
per_word = {
    language: [
        tokens_per_word[language][VOCAB_SIZES.index(size)]
        if size in VOCAB_SIZES
        else sum(len(extra_tokenizers[size].tokenize(t)) for t in texts) / sum(len(t.split()) for t in texts)
        for size in all_sizes
    ]
    for language, texts in validation.items()
}
report["exercise_vocab_sizes"] = {
    "sizes": all_sizes,
    "learned": [len(extra_tokenizers.get(size, tokenizers.get(size))) for size in all_sizes],
    "tokens_per_word": per_word,
    # how much tokens per word falls for each doubling of the vocabulary, between neighbouring sizes
    "fall_per_doubling": {
        language: [(a - b) / np.log2(m / n) for (n, a), (m, b) in pairwise(zip(all_sizes, values, strict=True))]
        for language, values in per_word.items()
    },
}
print(table([(lang, *(f"{v:.2f}" for v in values)) for lang, values in per_word.items()], ("", *all_sizes)))

# Exercise 3: CBOW with the sum of the context vectors instead of their mean, the same learning rate.
context_words = (contexts >= 0).sum(1)  # m, the context words present in each window
summed = [train_word2vec("cbow", EPOCHS, seed=seed, gaps=False, mean=False) for seed in EXERCISE_SEEDS]
report["exercise_cbow_sum"] = {
    "context_words_mean": context_words.float().mean().item(),
    "windows_full": (context_words == 2 * WINDOW).float().mean().item(),  # share of windows with m = 6
    "loss_first_last": [[t[2][:SMOOTH].mean(), t[2][-SMOOTH:].mean()] for t in summed],
    "mean_loss_last": [t[2][-SMOOTH:].mean() for t in seed_models["cbow"][: len(EXERCISE_SEEDS)]],
    **seed_check([t[0] for t in summed]),
}

# Exercise 4: the pair check with windows of 1 and 6 words on each side (3 above).
by_window = {}
for window in (1, 6):
    windows = windows_of(window)
    for kind in ("cbow", "skipgram"):
        trained = [train_word2vec(kind, EPOCHS, seed=seed, gaps=False, windows=windows) for seed in EXERCISE_SEEDS]
        by_window[f"{kind}_{window}"] = seed_check([t[0] for t in trained])
    by_window[f"context_words_{window}"] = (windows[0] >= 0).sum(1).float().mean().item()  # per window, on average
report["exercise_windows"] = by_window

# Exercise 6: the pair check on W + W' (input plus output vectors) of the models above, and on W' alone.
report["exercise_w_plus_w_out"] = {
    kind: {
        **seed_check([t[0] + t[4] for t in seed_models[kind][: len(EXERCISE_SEEDS)]]),
        "w_out": seed_check([t[4] for t in seed_models[kind][: len(EXERCISE_SEEDS)]]),
        "norm_ratio": [(t[4].norm() / t[0].norm()).item() for t in seed_models[kind][: len(EXERCISE_SEEDS)]],
    }
    for kind in seed_models
}

# Exercise 2: "Keyboard" replayed as section 1 replays "Directory", and how often each pre-token is in the text.
report["exercise_keyboard"] = {
    word: {
        "steps": [[" ".join(symbols), rank[merge] if merge else None] for symbols, merge in replay_bpe(word)],
        "pretoken_count": pre_tokens[word],
    }
    for word in ("Keyboard", "Ġkeyboard")
}
for word, found in report["exercise_keyboard"].items():
    print(f"{word}: " + " → ".join(f"{symbols} (rank {merge})" for symbols, merge in found["steps"][:-1]), end="")
    print(f" → {found['steps'][-1][0]}; {found['pretoken_count']} times in the training text")

pair_rows = [("CBOW, sum of the context vectors", report["exercise_cbow_sum"])]
pair_rows += [(f"{kind}, window {window}", by_window[f"{kind}_{window}"]) for kind in models for window in (1, 6)]
pair_rows += [(f"{kind}, W + W'", report["exercise_w_plus_w_out"][kind]) for kind in models]
pair_rows += [(f"{kind}, W'", report["exercise_w_plus_w_out"][kind]["w_out"]) for kind in models]
pair_rows += [(f"{kind}, window 3, W (section 3)", report["word2vec_seeds"][kind]) for kind in models]
print(
    table(
        [
            (
                name,
                *(f"{g:.3f} ({m})" for g, m in list(zip(v["gap"], v["matches"], strict=True))[: len(EXERCISE_SEEDS)]),
            )
            for name, v in pair_rows
        ],
        ("related − mismatched (partner closest)", *(f"seed {seed}" for seed in EXERCISE_SEEDS)),
    )
)
print(
    f"CBOW with the sum: loss of the last {SMOOTH} steps "
    f"{', '.join(f'{last:.3f}' for _, last in report['exercise_cbow_sum']['loss_first_last'])} (with the mean: "
    f"{', '.join(f'{last:.3f}' for last in report['exercise_cbow_sum']['mean_loss_last'])}); a window holds "
    f"{report['exercise_cbow_sum']['context_words_mean']:.2f} context words on average, "
    f"{report['exercise_cbow_sum']['windows_full']:.0%} of the windows all 6 (windows of 1 and 6 words on each side: "
    f"{by_window['context_words_1']:.2f} and {by_window['context_words_6']:.2f}); |W'| / |W|: "
    f"{', '.join(f'{r:.2f}' for kind in models for r in report['exercise_w_plus_w_out'][kind]['norm_ratio'])}"
)

# %%
report.save()
