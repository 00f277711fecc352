# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # 11 · An encoder-decoder built by hand
#
# Tutorial 07 wrote an encoder layer in plain torch, tutorial 10 a decoder block. This one joins them into
# the whole 2017 Transformer (Vaswani et al. 2017): an encoder that reads a source, a decoder that writes a target,
# and cross-attention between them. It is trained by hand on digit strings (copy them, or write them backwards),
# decodes greedily with a loop of its own, and then moves into hf-attention's `HFAttentionForSeq2SeqLM`, which must
# compute the same logits and `generate()` the same tokens.
#
# Run it: `python docs/tutorials/11_encoder_decoder_by_hand.py` (add `--quick` for a shorter version).

# %%
import math

import torch
from torch import nn
from tutorial_support import Report, parse_args, plt, save_figure, table

import hf_attention

args = parse_args("An encoder-decoder written in plain torch, trained by hand, loaded into hf-attention.")
report = Report(args, "11")
torch.set_num_threads(1)  # tiny models: one thread is as fast, and leaves the machine's other cores alone
torch.manual_seed(0)

# %% [markdown]
# ## The task: copy or reverse a string of digits
#
# A source is a task token, `<copy>` or `<reverse>`, then 3 to 10 digits, then `</s>`; its target is the digits
# copied or reversed, then `</s>`:
#
# ```text
# <reverse> 3 1 4 1 5 </s>   →   5 1 4 1 3 </s>
# ```
#
# The strings of a batch have different lengths, so the short ones are padded with `<pad>` at the end. The
# vocabulary has 15 tokens: 5 special ones and the 10 digits. Everything is drawn from a `torch.Generator` with a
# fixed seed: the training batches from one, the test set from another.

# %%
PAD, BOS, EOS, COPY, REVERSE = 0, 1, 2, 3, 4  # BOS is the decoder's start token
SPECIAL = ["<pad>", "<s>", "</s>", "<copy>", "<reverse>"]
VOCAB = len(SPECIAL) + 10
SHORTEST, LONGEST = 3, 10


def make_examples(count: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """`count` random (source, target) pairs, right-padded: sources (count, LONGEST + 2), targets (count,
    LONGEST + 1)."""
    sources = torch.full((count, LONGEST + 2), PAD)
    targets = torch.full((count, LONGEST + 1), PAD)
    lengths = torch.randint(SHORTEST, LONGEST + 1, (count,), generator=generator)
    tasks = torch.randint(0, 2, (count,), generator=generator)
    digits = torch.randint(0, 10, (count, LONGEST), generator=generator) + len(SPECIAL)
    for row, (n, task) in enumerate(zip(lengths.tolist(), tasks.tolist(), strict=True)):
        string = digits[row, :n]
        sources[row, : n + 2] = torch.cat(
            [torch.tensor([COPY if task == 0 else REVERSE]), string, torch.tensor([EOS])]
        )
        targets[row, : n + 1] = torch.cat([string if task == 0 else string.flip(0), torch.tensor([EOS])])
    return sources, targets


def show(ids) -> str:
    """Token ids as text, padding left out."""
    return " ".join(SPECIAL[i] if i < len(SPECIAL) else str(i - len(SPECIAL)) for i in ids.tolist() if i != PAD)


report["vocabulary"] = {"tokens": VOCAB, "special": len(SPECIAL), "digits": VOCAB - len(SPECIAL)}
report["digits_per_string"] = [SHORTEST, LONGEST]
sources, targets = make_examples(3, torch.Generator().manual_seed(0))
for source, target in zip(sources, targets, strict=True):
    print(f"{show(source):40s} → {show(target)}")

# %% [markdown]
# ## The pieces, in plain torch
#
# **Attention** is tutorial 07's multi-head attention, with one change: the queries may come from another sequence
# than the keys and values. Self-attention passes the same rows twice; **cross-attention** passes the decoder's rows
# as queries and the encoder's output as keys and values. A boolean mask (True = may attend) says which keys each
# query sees: the source's real tokens, not its padding, and in the decoder's self-attention only the past (the
# causal mask of tutorial 10). The weights of the last call are kept, for the pictures at the end.


# %%
class Attention(nn.Module):
    """softmax(Q Kᵀ/√d + mask) V over H heads, then W_o; queries from `x`, keys and values from `memory`."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(width, width) for _ in range(4))

    def forward(self, x: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B, T, E), memory (B, S, E), mask (B, 1, T|1, S) → (B, T, E)."""
        B, T, E = x.shape
        d = E // self.heads
        q = self.q_proj(x).view(B, T, self.heads, d).transpose(1, 2)  # (B, H, T, d)
        k, v = (p(memory).view(B, -1, self.heads, d).transpose(1, 2) for p in (self.k_proj, self.v_proj))
        scores = q @ k.transpose(-2, -1) * d**-0.5  # (B, H, T, S)
        self.last_weights = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
        heads = self.last_weights @ v  # (B, H, T, d)
        return self.o_proj(heads.transpose(1, 2).reshape(B, T, E))  # the heads side by side, then W_o


# %% [markdown]
# The **encoder block** is tutorial 07's, post-norm as in the paper: self-attention, Add & Norm, the feed-forward
# network, Add & Norm. The **decoder block** is tutorial 10's with one sublayer more: causal self-attention, then
# cross-attention to the encoder output, then the feed-forward network, each in its own Add & Norm. Tutorial 10's
# block was pre-norm; here both stacks are post-norm, because the library sets one norm placement for the whole
# encoder-decoder, and the hand-built model is made to fit the library, not the other way round.


# %%
def feed_forward(width: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(width, 4 * width), nn.ReLU(), nn.Linear(4 * width, width))


class EncoderBlock(nn.Module):
    """x ← LN(x + self-attention(x)), then x ← LN(x + FFN(x))."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.self_attention, self.self_attention_norm = Attention(width, heads), nn.LayerNorm(width)
        self.ffn, self.ffn_norm = feed_forward(width), nn.LayerNorm(width)

    def forward(self, x, source_mask):
        x = self.self_attention_norm(x + self.self_attention(x, x, source_mask))
        return self.ffn_norm(x + self.ffn(x))


class DecoderBlock(nn.Module):
    """x ← LN(x + causal self-attention(x)), x ← LN(x + cross-attention(x, encoder output)), x ← LN(x + FFN(x))."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.self_attention, self.self_attention_norm = Attention(width, heads), nn.LayerNorm(width)
        self.cross_attention, self.cross_attention_norm = Attention(width, heads), nn.LayerNorm(width)
        self.ffn, self.ffn_norm = feed_forward(width), nn.LayerNorm(width)

    def forward(self, y, memory, causal_mask, source_mask):
        y = self.self_attention_norm(y + self.self_attention(y, y, causal_mask))
        y = self.cross_attention_norm(y + self.cross_attention(y, memory, source_mask))
        return self.ffn_norm(y + self.ffn(y))


# %% [markdown]
# Around the blocks: one **token embedding** shared by source and target (they speak the same vocabulary), multiplied
# by $\sqrt E$ as in the paper (§3.4), a learned **position** vector per position (one table for each side, as in
# tutorial 10), and the **output projection** to the vocabulary, which reuses the embedding matrix (tied weights, §3.4
# again). The encoder runs once per source; the decoder reads the target so far and the encoder's output, called the
# memory, and returns one row of logits per target position.


# %%
class EncoderDecoder(nn.Module):
    def __init__(self, width: int, heads: int, layers: int, max_length: int):
        super().__init__()
        self.width = width
        self.embed = nn.Embedding(VOCAB, width)
        nn.init.normal_(self.embed.weight, std=width**-0.5)  # ×√E in forward: token vectors of unit variance
        self.source_positions = nn.Embedding(max_length, width)
        self.target_positions = nn.Embedding(max_length, width)
        self.encoder = nn.ModuleList(EncoderBlock(width, heads) for _ in range(layers))
        self.decoder = nn.ModuleList(DecoderBlock(width, heads) for _ in range(layers))

    def embed_with_positions(self, ids: torch.Tensor, positions: nn.Embedding) -> torch.Tensor:
        return self.embed(ids) * math.sqrt(self.width) + positions(torch.arange(ids.shape[1]))

    def encode(self, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Source ids (B, S) → memory (B, S, E) and the source mask (B, 1, 1, S): padding is never attended to."""
        source_mask = (source != PAD)[:, None, None, :]
        x = self.embed_with_positions(source, self.source_positions)
        for block in self.encoder:
            x = block(x, source_mask)
        return x, source_mask

    def decode(self, decoder_input: torch.Tensor, memory: torch.Tensor, source_mask: torch.Tensor) -> torch.Tensor:
        """Target so far (B, T) → logits (B, T, V). The causal mask alone hides the padding at the end of a target:
        it comes after every real token, so no real position ever sees it."""
        T = decoder_input.shape[1]
        causal_mask = torch.ones(T, T, dtype=torch.bool).tril()
        y = self.embed_with_positions(decoder_input, self.target_positions)
        for block in self.decoder:
            y = block(y, memory, causal_mask, source_mask)
        return y @ self.embed.weight.T  # the tied output projection

    def forward(self, source: torch.Tensor, decoder_input: torch.Tensor) -> torch.Tensor:
        return self.decode(decoder_input, *self.encode(source))


WIDTH, HEADS, LAYERS, MAX_LENGTH = 32, 4, 2, 16
torch.manual_seed(0)
model = EncoderDecoder(WIDTH, HEADS, LAYERS, MAX_LENGTH)
report["parameters"] = sum(p.numel() for p in model.parameters())
report["sizes"] = {"width": WIDTH, "heads": HEADS, "layers": LAYERS, "ffn_width": 4 * WIDTH, "max_length": MAX_LENGTH}
print(f"{report['parameters']:,} parameters")

# %% [markdown]
# ## Training by hand: teacher forcing
#
# The decoder learns to predict target token $t$ from the source and the *correct* tokens before $t$ (teacher
# forcing, tutorial 09): its input is the target shifted right behind `<s>`, and one forward pass scores every
# position at once, the causal mask keeping each from seeing its own answer. The loss is the cross-entropy over the
# real target tokens (`ignore_index` skips the padding). AdamW with a one-cycle schedule (a short warm-up, which
# post-norm needs, then a slow decay), on fresh random batches. The test set is drawn first, and a training batch
# leaves out any string of it that it happens to draw (short ones do: there are only 2,000 sources with 3 digits), so
# every test string is new to the model.


# %%
def shift_right(targets: torch.Tensor) -> torch.Tensor:
    """`<s>` then the target without its last token: what the decoder reads while it learns to write `targets`."""
    return torch.cat([torch.full_like(targets[:, :1], BOS), targets[:, :-1]], dim=1)


QUICK_STEPS, FULL_STEPS = 300, 2000
STEPS = QUICK_STEPS if args.quick else FULL_STEPS
BATCH = 64
TEST = 200 if args.quick else 1000
test_sources, test_targets = make_examples(TEST, torch.Generator().manual_seed(12345))  # drawn before training
held_out = set(map(tuple, test_sources.tolist()))


def train(model, optimizer, schedule, steps: int, label_smoothing: float = 0.0, clip: float | None = 1.0) -> dict:
    """`steps` batches of fresh strings (test strings dropped); the loss, the learning rate and the drops of each."""
    generator = torch.Generator().manual_seed(1)  # every run sees the same batches
    log = {"loss": [], "lr": [], "dropped": 0}
    for _ in range(steps):
        sources, targets = make_examples(BATCH, generator)
        keep = torch.tensor([tuple(row) not in held_out for row in sources.tolist()])  # never train on a test string
        sources, targets, log["dropped"] = sources[keep], targets[keep], log["dropped"] + int((~keep).sum())
        logits = model(sources, shift_right(targets))
        loss = nn.functional.cross_entropy(
            logits.flatten(0, 1), targets.flatten(), ignore_index=PAD, label_smoothing=label_smoothing
        )
        optimizer.zero_grad()
        loss.backward()
        if clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), clip)
        log["lr"].append(schedule.get_last_lr()[0])  # the rate this step's update uses
        optimizer.step()
        schedule.step()
        log["loss"].append(loss.item())
    return log


optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=STEPS, pct_start=0.1)
log = train(model, optimizer, schedule, STEPS)
losses, dropped = log["loss"], log["dropped"]
model.eval()
WINDOW = 20
report["quick_steps"] = QUICK_STEPS
report["steps"], report["batch"], report["test_size"], report["dropped_test_strings"] = STEPS, BATCH, TEST, dropped
report["loss_window"] = WINDOW
report["loss_first"] = sum(losses[:WINDOW]) / WINDOW
report["loss_last"] = sum(losses[-WINDOW:]) / WINDOW
print(f"{dropped} training strings dropped: they are in the test set")
print(
    f"{STEPS} steps of {BATCH}: loss {report['loss_first']:.3f} → {report['loss_last']:.4f} (means of {WINDOW} steps)"
)

figure, axis = plt.subplots(figsize=(7, 3.5), layout="constrained")
axis.semilogy(losses, lw=0.8)
axis.axhline(math.log(10), color="grey", ls=":", label="a uniform guess among the digits (ln 10)")
axis.set_xlabel("training step")
axis.set_ylabel("cross-entropy (nats per token)")
axis.set_title("Training loss, teacher forcing")
axis.legend()
save_figure(figure, args.figures, "11_loss", losses=losses)

# %% [markdown]
# ## Greedy decoding by hand
#
# To write, the model has no target to read: it starts from `<s>`, takes the most likely next token (the argmax),
# appends it and runs the decoder again on the longer prefix, until every row of the batch has written `</s>`. The
# encoder runs once; a row that has finished gets `<pad>` from then on. This loop recomputes the whole prefix at every
# step, the simplest way to write it (`generate()` keeps a key-value cache instead, tutorial 09).


# %%
@torch.no_grad()
def greedy(model: EncoderDecoder, sources: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
    """(B, S) sources → (B, 1 + written) ids: `<s>`, the tokens, `</s>`, and `<pad>` after it."""
    memory, source_mask = model.encode(sources)
    written = torch.full((len(sources), 1), BOS)
    finished = torch.zeros(len(sources), dtype=torch.bool)
    for _ in range(max_new_tokens):
        next_token = model.decode(written, memory, source_mask)[:, -1].argmax(-1)
        next_token = next_token.masked_fill(finished, PAD)
        written = torch.cat([written, next_token[:, None]], dim=1)
        finished |= next_token == EOS
        if finished.all():
            break
    return written


def exactly_right(model: EncoderDecoder) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy answers to the test set, and which of them are exactly right (the padding after `</s>` included)."""
    written = greedy(model, test_sources, max_new_tokens=LONGEST + 1)
    answers = nn.functional.pad(written[:, 1:], (0, test_targets.shape[1] - (written.shape[1] - 1)), value=PAD)
    return written, (answers == test_targets).all(1)


by_hand, right = exactly_right(model)
is_reverse = test_sources[:, 0] == REVERSE
report["exact_match"] = right.float().mean().item()
report["exact_match_copy"] = right[~is_reverse].float().mean().item()
report["exact_match_reverse"] = right[is_reverse].float().mean().item()
print(
    f"exact match on {TEST} test strings: {report['exact_match']:.3f} (copy {report['exact_match_copy']:.3f}, "
    f"reverse {report['exact_match_reverse']:.3f})"
)
for source, answer in zip(test_sources[:3], by_hand[:3], strict=True):
    print(f"{show(source):40s} → {show(answer[1:])}")

# %% [markdown]
# In the full run (2,000 steps of 64 strings, less the 1,165 strings that were test strings) the loss falls from 3.597
# to 0.0004 nats per token (means of the first and the last 20 steps), not without setbacks (the figure): at step 358
# the mean of the last 20 steps is 3.2 times the lowest it had reached, and then it falls lower than before. Greedy
# decoding writes 1.000 of the 1,000 test strings exactly right: copy 1.000, reverse 1.000. (`--quick` trains 300 steps
# and prints its own numbers.)
#
# ## The same model in hf-attention
#
# Now the library's encoder-decoder, `HFAttentionForSeq2SeqLM`, with a config that says what the hand-built model
# is: post-norm layers with biases on every projection, ReLU feed-forward networks 4 times as wide, learned positions,
# embeddings scaled by $\sqrt E$ and tied to the output projection, no final norm, no dropout. The library's state
# dict names every parameter; loading is a renaming, as in tutorial 10. (`model.shared`, the encoder's and the
# decoder's `embed_tokens` and `lm_head` are one tensor under four names: all four get our embedding.)

# %%
from transformers import AutoModelForSeq2SeqLM  # noqa: E402

config = hf_attention.HFAttentionSeq2SeqConfig(
    vocab_size=VOCAB,
    hidden_size=WIDTH,
    num_attention_heads=HEADS,
    intermediate_size=4 * WIDTH,
    encoder_layers=LAYERS,
    decoder_layers=LAYERS,
    hidden_act="relu",
    norm_position="post",
    final_norm=False,
    position_encoding="learned",
    max_position_embeddings=MAX_LENGTH,
    scale_embeddings=True,
    tie_word_embeddings=True,
    lm_head_bias=False,
    attention_bias=True,
    mlp_bias=True,
    layer_norm_eps=1e-5,  # nn.LayerNorm's default
    hidden_dropout_prob=0.0,
    attention_dropout=0.0,
    activation_dropout=0.0,
    pad_token_id=PAD,
    bos_token_id=BOS,
    eos_token_id=EOS,
    decoder_start_token_id=BOS,
)
library = AutoModelForSeq2SeqLM.from_config(config).eval()

RENAMES = {  # hand-built name → the library's, for the parts inside a block
    "self_attention": "self_attn",  # self_attention.q_proj → self_attn.q_proj, self_attention_norm → self_attn_norm
    "cross_attention": "cross_attn",
    "ffn_norm": "mlp_norm",
    "ffn.0": "mlp.fc1",
    "ffn.2": "mlp.fc2",
}


def library_state(model: EncoderDecoder) -> dict:
    """The hand-built model's tensors under the library's names."""
    state = {
        "model.shared.weight": model.embed.weight,
        "model.encoder.embed_tokens.weight": model.embed.weight,
        "model.decoder.embed_tokens.weight": model.embed.weight,
        "lm_head.weight": model.embed.weight,
        "model.encoder.position.weight": model.source_positions.weight,
        "model.decoder.position.weight": model.target_positions.weight,
    }
    for side, blocks in (("encoder", model.encoder), ("decoder", model.decoder)):
        for index, block in enumerate(blocks):
            for name, tensor in block.state_dict().items():
                for mine, theirs in RENAMES.items():
                    name = name.replace(mine, theirs)
                state[f"model.{side}.layers.{index}.{name}"] = tensor
    return state


state = library_state(model)
assert set(state) == set(library.state_dict()), set(state) ^ set(library.state_dict())
library.load_state_dict(state, strict=True)
report["library_class"] = type(library).__name__
report["library_parameters"] = sum(p.numel() for p in library.parameters())
for name in list(state)[6:12]:
    print(name)

# %% [markdown]
# The check: one batch of 8 test strings of different lengths, so that sources and targets are padded, through both
# models. The library takes the padding as an `attention_mask` over the source (1 = real token), as every
# `transformers` encoder-decoder does, and the teacher-forced decoder input as `decoder_input_ids`.

# %%
CHECK = 8
batch_sources, batch_targets = test_sources[:CHECK], test_targets[:CHECK]
report["check_batch"] = CHECK
report["check_batch_source_lengths"] = (batch_sources != PAD).sum(1)
with torch.no_grad():
    logits_by_hand = model(batch_sources, shift_right(batch_targets))
    inputs = {
        "input_ids": batch_sources,
        "attention_mask": (batch_sources != PAD).long(),
        "decoder_input_ids": shift_right(batch_targets),
    }
    logits_sdpa = library(**inputs).logits  # the default backend, SDPA
    eager = library(**inputs, output_attentions=True)  # the eager backend, which returns the weights
report["logits_max_abs_sdpa"] = (logits_sdpa - logits_by_hand).abs().max().item()
report["logits_max_abs_eager"] = (eager.logits - logits_by_hand).abs().max().item()
report["check_logits_largest"] = logits_by_hand.abs().max().item()
report["cross_weights_max_abs_eager"] = max(
    (library_weights - block.cross_attention.last_weights).abs().max().item()
    for library_weights, block in zip(eager.cross_attentions, model.decoder, strict=True)
)
assert report["logits_max_abs_sdpa"] < 1e-5 and report["logits_max_abs_eager"] < 1e-5
print(
    f"logits {tuple(logits_by_hand.shape)}, library vs by hand: SDPA {report['logits_max_abs_sdpa']:.1e}, "
    f"eager {report['logits_max_abs_eager']:.1e}; cross-attention weights (eager) "
    f"{report['cross_weights_max_abs_eager']:.1e}"
)

# %% [markdown]
# The library computes the hand-built model's logits to float rounding: they differ by 2.9e-6 at most, with either
# backend, and the eager backend's cross-attention weights agree too. (Why the last bits differ, backend by backend, is
# float-rounding detail: the appendix at the end.)
#
# Then decoding: `generate()` with greedy search (`num_beams=1, do_sample=False`) on the whole test set, against the
# loop above. `generate()` runs the encoder once and the decoder one token at a time with a key-value cache, so its
# logits differ from the loop's by float rounding; the argmax, and so every token, must be the same.

# %%
with torch.no_grad():
    generated = library.generate(
        input_ids=test_sources,
        attention_mask=(test_sources != PAD).long(),
        max_new_tokens=LONGEST + 1,
        num_beams=1,
        do_sample=False,
    )
    # How close did the loop come to a tie? The gap between its best and second-best logit at every token it wrote.
    best_two = model(test_sources, by_hand[:, :-1]).topk(2, dim=-1).values
written_tokens = by_hand[:, 1:] != PAD
report["smallest_margin"] = (best_two[..., 0] - best_two[..., 1])[written_tokens].min().item()
same_shape = generated.shape == by_hand.shape
identical_rows = int((generated == by_hand).all(1).sum()) if same_shape else 0
report["generate_shape_equal"] = same_shape
report["generate_identical_rows"] = identical_rows
assert identical_rows == TEST, (generated.shape, by_hand.shape, identical_rows)
print(f"generate() vs the loop by hand: {identical_rows} of {TEST} rows identical, token for token")
print(f"smallest gap between the best and the second-best logit of a written token: {report['smallest_margin']:.3f}")

# %% [markdown]
# All 1,000 rows of the full run are identical, padding included. The loop never came near a tie: the smallest gap
# between its best and second-best logit at a token it wrote is 5.972, where the two computations differ by float
# rounding. The hand-built model is the library's `HFAttentionForSeq2SeqLM` with other names for its parameters, and
# from here on it has what a `transformers` model has: `generate()` with beam search and sampling, `save_pretrained`,
# the pipelines, the attention explorer.
#
# ## Where the decoder looks: cross-attention on a reversal
#
# To write the reversal of $n$ digits, the decoder's position $t$ (it predicts target token $t$, counted from 0)
# needs the source digit $n - t$ (the source's position 0 is the task token). Over the reversal strings of the test
# set, the share of each cross-attention head's weight that goes to that source position:

# %%
with torch.no_grad():
    reverse_sources, reverse_targets = test_sources[is_reverse], test_targets[is_reverse]
    model(reverse_sources, shift_right(reverse_targets))  # every block keeps its weights
lengths = (reverse_targets != PAD).sum(1) - 1  # digits per string
on_mirror = torch.zeros(LAYERS, HEADS)
for row, n in enumerate(lengths.tolist()):
    t = torch.arange(n)
    for layer, block in enumerate(model.decoder):
        on_mirror[layer] += block.cross_attention.last_weights[row, :, t, n - t].mean(-1)
on_mirror /= len(lengths)
report["weight_on_mirror"] = on_mirror
best_layer, best_head = divmod(int(on_mirror.argmax()), HEADS)
report["mirror_head"] = [best_layer, best_head]
print(
    table(
        [(f"decoder layer {layer}", *(f"{w:.2f}" for w in on_mirror[layer].tolist())) for layer in range(LAYERS)],
        ("weight on the mirror digit", *(f"head {h}" for h in range(HEADS))),
    )
)

example = int(torch.nonzero(lengths == LONGEST)[0]) if bool((lengths == LONGEST).any()) else 0
n = int(lengths[example])
source_tokens = show(reverse_sources[example]).split()
target_tokens = show(shift_right(reverse_targets)[example]).split()[: n + 1]
weights = model.decoder[best_layer].cross_attention.last_weights[example, best_head, : n + 1, : n + 2]
report["map_digits"] = n
report["map_mirror_weight"] = weights[torch.arange(n), n - torch.arange(n)].mean()
figure, axis = plt.subplots(figsize=(5.5, 5), layout="constrained")
axis.imshow(weights, cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
axis.set_xticks(range(n + 2), source_tokens, rotation=90)
axis.set_yticks(range(n + 1), target_tokens)
axis.set_xlabel("source (keys)")
axis.set_ylabel("decoder input (queries)")
axis.set_title(f"cross-attention, decoder layer {best_layer}, head {best_head}")
save_figure(figure, args.figures, "11_cross_attention", weights=weights, head=report["mirror_head"])

# %% [markdown]
# In the full run the four heads of decoder layer 1 put 0.91 to 0.97 of their weight on the mirror digit, those of
# layer 0 at most 0.31: the first layer's heads look elsewhere, the second layer's fetch the digit to write. The map
# drawn is layer 1's head 1 on a test string of 10 digits (0.95 of its weight on the mirror digit there): the
# anti-diagonal, read from the last digit back to the first, and at the last row, which writes `</s>`, a look back at
# the start of the source, the task token and the first digit.
#
# ## Two details of the paper's training: warm-up and label smoothing
#
# The run above used a one-cycle schedule. The paper (§5.3) used Adam with $\beta = (0.9, 0.98)$, $\epsilon = 10^{-9}$
# and a rate that rises linearly for `warmup` steps and then falls as $1/\sqrt{\text{step}}$:
#
# $$\text{lr} = d^{-0.5} \cdot \min(\text{step}^{-0.5},\ \text{step} \cdot \text{warmup}^{-1.5}),$$
#
# whose peak, at step = warmup, is $d^{-0.5} \cdot \text{warmup}^{-0.5}$. transformers has this shape as
# `get_inverse_sqrt_schedule` (a multiplier of the optimizer's rate, here set to the peak); the cell checks it against
# the formula. And the paper (§5.4) trained on smoothed targets: with label smoothing $\epsilon = 0.1$ the target is
# $1 - \epsilon$ on the right token plus $\epsilon$ spread evenly over the vocabulary
# (`cross_entropy(..., label_smoothing=0.1)`), which "hurts perplexity, as the model learns to be more unsure, but
# improves accuracy and BLEU score". Three fresh models, each trained with the paper's Adam and no gradient clipping
# on the same batches: the paper's schedule; the same peak from the first step, falling as $1/\sqrt{\cdot}$ from there
# (`num_warmup_steps=0`); and the paper's schedule with smoothed targets. Each is scored on the test set: exactly right
# strings (greedy), and, teacher-forced, the cross-entropy of the right tokens (unsmoothed, for all three) and the
# probability given to the token chosen.

# %%
from transformers import get_inverse_sqrt_schedule  # noqa: E402

COMPARE_STEPS = 100 if args.quick else 600
WARMUP = COMPARE_STEPS // 10
# The formula's own peak, d^-0.5 warmup^-0.5, was set for d = 512 and warmup = 4,000 (0.0007); for this small model
# it is far higher than it trains at, so the runs keep its shape and scale it to the main run's peak (a constant
# factor in front, as implementations of the schedule allow).
PEAK = 3e-3
SMOOTHING = 0.1
report["paper_formula_peak"] = WIDTH**-0.5 * WARMUP**-0.5
report["paper_formula_peak_base"] = 512**-0.5 * 4000**-0.5


@torch.no_grad()
def scored(model: EncoderDecoder) -> dict:
    """Exact-match rate (greedy); teacher-forced: cross-entropy, token accuracy, probability of the chosen token."""
    model.eval()
    real = test_targets != PAD
    log_probs = model(test_sources, shift_right(test_targets)).log_softmax(-1)[real]  # (real tokens, V)
    return {
        "exact_match": exactly_right(model)[1].float().mean().item(),
        "cross_entropy": nn.functional.nll_loss(log_probs, test_targets[real]).item(),
        "token_accuracy": (log_probs.argmax(-1) == test_targets[real]).float().mean().item(),
        "confidence": log_probs.max(-1).values.exp().mean().item(),
    }


paper = {}
for name, warmup, smoothing in (
    ("warm-up", WARMUP, 0.0),
    ("no warm-up", 0, 0.0),
    ("warm-up, ε = 0.1", WARMUP, SMOOTHING),
):
    torch.manual_seed(0)  # the same initial weights for the three
    run = EncoderDecoder(WIDTH, HEADS, LAYERS, MAX_LENGTH)
    optimizer = torch.optim.Adam(run.parameters(), lr=PEAK, betas=(0.9, 0.98), eps=1e-9)
    # timescale = warmup: after the warm-up (or from the start) the multiplier is sqrt(warmup / (step + shift))
    schedule = get_inverse_sqrt_schedule(optimizer, num_warmup_steps=warmup, timescale=WARMUP)
    log = train(run, optimizer, schedule, COMPARE_STEPS, label_smoothing=smoothing, clip=None)
    paper[name] = {"loss_curve": log["loss"], "lr": log["lr"], **scored(run)}
# transformers' step k is the paper's step_num k (its step 0 has rate 0: the first update does nothing)
factor = PEAK / (WIDTH**-0.5 * WARMUP**-0.5)
formula = [factor * WIDTH**-0.5 * min(k**-0.5, k * WARMUP**-1.5) for k in range(1, COMPARE_STEPS)]
report["paper_schedule_vs_formula_max_relative"] = max(
    abs(lr / f - 1) for lr, f in zip(paper["warm-up"]["lr"][1:], formula, strict=True)
)
report["paper_steps"], report["paper_warmup"], report["paper_peak_lr"] = COMPARE_STEPS, WARMUP, PEAK
report["label_smoothing"] = SMOOTHING
# the best a smoothed model can do: the smoothed target itself, 1 - ε + ε/V on the right token
report["smoothing_best_confidence"] = 1 - SMOOTHING + SMOOTHING / VOCAB
report["smoothing_floor_cross_entropy"] = -math.log(report["smoothing_best_confidence"])
report["paper_runs"] = {name: {k: v for k, v in row.items() if k != "lr"} for name, row in paper.items()}
print(f"transformers' schedule vs the formula: {report['paper_schedule_vs_formula_max_relative']:.1e} (relative)")
print(
    table(
        [
            (
                name,
                f"{row['loss_curve'][-1]:.3f}",
                f"{row['exact_match']:.3f}",
                f"{row['token_accuracy']:.4f}",
                f"{row['cross_entropy']:.4f}",
                f"{row['confidence']:.4f}",
            )
            for name, row in paper.items()
        ],
        ("run", "last training loss", "exact match", "token accuracy", "cross-entropy", "confidence"),
    )
)

figure, (left, right) = plt.subplots(1, 2, figsize=(11, 3.6), layout="constrained")
for name in ("warm-up", "no warm-up"):
    left.plot(paper[name]["lr"], label=name)
    right.semilogy(paper[name]["loss_curve"], lw=0.8, label=name)
left.set(xlabel="training step", ylabel="learning rate", title=f"the paper's schedule, warmup = {WARMUP}")
right.set(xlabel="training step", ylabel="training cross-entropy", title="the same peak, with and without warm-up")
left.legend()
right.legend()
save_figure(
    figure,
    args.figures,
    "11_warmup",
    **{f"lr_{name.replace(' ', '_').replace('-', '_')}": paper[name]["lr"] for name in ("warm-up", "no warm-up")},
    **{
        f"loss_{name.replace(' ', '_').replace('-', '_')}": paper[name]["loss_curve"]
        for name in ("warm-up", "no warm-up")
    },
)

# %% [markdown]
# transformers' schedule is the formula, times the constant that sets its peak, to 4.4e-16 (relative). That constant
# is needed here: with $d = 32$ and warmup = 60 the formula's own peak is 0.023, far higher than the 3e-3 this model
# trains at above, so the three runs peak at 3e-3 (and the second starts there).
#
# Warm-up, on this small model, is not what makes training work. Without it the loss comes down sooner (mean of the
# first 60 steps 2.35, against 2.72 with warm-up, which spends those steps at a lower rate) and ends a little higher
# (0.0063 against 0.0020, means of the last 20 steps; its rate stays a little below the first run's after the warm-up,
# the figure), and 0.997 of the test strings come out exactly right against 1.000. One seed, and a gap that small
# proves little; warm-up earns its place in deep post-norm stacks at the paper's rates, where the first updates, with
# Adam's moment estimates still unsettled, can throw training off for good.
#
# Label smoothing does what the paper says. The model trained on smoothed targets gets as many strings exactly right
# (1.000) and as many tokens (1.0000 against 1.0000), but its cross-entropy on the right tokens is 0.0988 against
# 0.0019, because it gives the token it chooses a probability of 0.906 on average, against 0.998 without smoothing.
# That is the smoothed target's own value: the best a model can do under $\epsilon = 0.1$ is $1 - \epsilon +
# \epsilon/V$ = 0.907 on the right token ($V = 15$), a cross-entropy of 0.098, and its training loss ends at 0.558,
# just above the entropy of the smoothed target, 0.556. The model is less sure, by design; on a task it gets right
# anyway, that is the only change it makes.
#
# ## Summary
#
# * An encoder-decoder is the encoder block of tutorial 07 and the decoder block of tutorial 10 with one more
#   sublayer, cross-attention: queries from the decoder, keys and values from the encoder's output, padding masked.
# * Training is teacher forcing: the target shifted right behind `<s>`, every position scored in one pass. Writing is
#   a loop: encode once, then one argmax per step until `</s>`.
# * With the right config the library's `HFAttentionForSeq2SeqLM` is the same model: the same logits to float
#   rounding, the same greedy tokens from `generate()`, and a cross-attention map that shows what the task needs.
# * The paper's warm-up schedule is transformers' `get_inverse_sqrt_schedule`; label smoothing is an argument of
#   `cross_entropy`, and it makes the model less sure of its answers without making them worse here.
#
# **Next:** [12 · today's attention](12_todays_attention.py), or back to the [list of tutorials](../README.md).

# %% [markdown]
# ## Self-test
#
# a. In the decoder's cross-attention, where do the queries come from, where the keys and values, and which source
#    positions may a query see?
# b. In training, the decoder reads `<s>` and the target without its last token. Why shifted, and why can one forward
#    pass score the whole target?
# c. The loop by hand reruns the whole prefix at each step; `generate()` keeps a cache, and its logits differ from the
#    loop's by float rounding. Why are its tokens still the loop's, and were they?
# d. On a reversal, which decoder layer's cross-attention fetches the digit to write, and how does the tutorial tell?
# e. What did label smoothing with $\epsilon = 0.1$ change in the model trained with it, and what did it leave as it
#    was?

# %% [markdown]
# ### Self-test answers
#
# a. Queries from the decoder's rows, keys and values from the encoder's output (the memory); the source mask lets a
#    query see the source's real tokens, not its padding ("The pieces, in plain torch").
# b. Position $t$ must predict target token $t$ from the tokens before it, so its input is the token before it, and
#    the first position's is `<s>`. The causal mask hides from each position its own answer and the ones after it, so
#    the positions can be scored together without seeing what they predict (teacher forcing, "Training by hand").
# c. A token changes only if the loop's best and second-best logits are closer than the rounding that separates
#    `generate()` from the loop; the closest they came at a written token was a gap of 5.972. And `generate()` wrote
#    the loop's tokens, padding included, in 1,000 of the 1,000 test strings ("The same model in hf-attention").
# d. Layer 1: over the test set's reversals, its heads put between 0.91 and 0.97 of their cross-attention weight on
#    the mirror digit, source position $n - t$, where the heads of layer 0 put at most 0.31 ("Where the decoder
#    looks").
# e. Its confidence, not its answers: it writes 1.000 of the test strings exactly right, as the model without it
#    does, but gives the token it chooses 0.906 of its probability on average (0.998 without smoothing), close to the
#    smoothed target's own 0.907 ("Two details of the paper's training").

# %% [markdown]
# ## Exercises
#
# 1. Train without the positions of the source (leave `source_positions` out of `encode`). Can the model still copy?
#    Reverse?
# 2. Drop the source padding mask in `encode` (every query sees every source position, `<pad>` included). Is the
#    output for a string still the same alone and in a batch with a longer string?
# 3. The decoder runs its whole prefix again at every step of `greedy`. How many decoder positions does it compute
#    for an output of $n$ tokens, and how many does `generate()` with its cache?
# 4. Set `norm_position="pre"` in the config (and `final_norm=True`). Which lines of the hand-built blocks must
#    change so that the logits agree again?
#
# ## Answers
#
# 1. Neither. Without positions the encoder's output at a digit depends on that digit and on the multiset of the
#    source's tokens, not on where it stands (tutorial 07, exercise 4), and cross-attention sees the memory as a set
#    of rows. So a string and its reversal give the decoder the same memory, and it must write the same answer for
#    both: one of them is wrong, whatever the task, unless the string is its own reversal. The cell below trains it:
#    the main run again (2,000 steps on the same batches, from the same initial weights) with the source positions
#    held at zero. It writes 0.026 of the test copies and 0.028 of the reversals exactly right (1.000 and 1.000 with
#    positions), where a decoder that knows which digits a string holds but not their order, and writes one of their
#    orders, is right 0.043 of the time at best. For a string and its reversal its logits agree to 7.2e-6, float
#    rounding, and it writes the same answer for both in 1,000 of the 1,000 test strings. The strings whose order
#    does not matter (all digits the same) are an exception only in part: of the 160 of them (each digit, each length
#    from 3 to 10, both tasks) it writes 78 right, 20, 20, 20, 10, 4, 0, 0 and 4 of the 20 at each length, and the 82
#    others are the right digit written too few or too many times. Order cannot make them wrong, the count can:
#    without positions, how many digits the source holds shows only in how the softmax shares its weight among
#    identical rows.
# 2. No. The `<pad>` rows become keys like any other and take some weight in every softmax, so the logits of a
#    string change with the number of `<pad>` its batch adds (and its answer can change with them). The mask is what
#    makes a row's output independent of the other rows of the batch; the library builds it from `attention_mask`.
#    The cell below runs the trained model on the 890 test strings of 3 to 9 digits, each alone and in the test set's
#    batch, where `<pad>` fills it to the 12 source tokens of a 10-digit string. With the mask the logits alone and in
#    the batch agree to 4.4e-6, and the argmax changes at 0 of the 6,217 target positions; without it they differ by
#    up to 17, and the argmax changes at 1,910 of them, in 400 of the 890 strings. Given no `attention_mask`, the
#    library computes these unmasked logits too (to 2.6e-5).
# 3. Step $k$ (from 1 to $n$) runs the decoder on $k$ positions: $1 + 2 + \dots + n = n(n+1)/2$ in all. With a cache
#    each step computes only its new position, $n$ in all; the keys and values of the past and of the encoder's output
#    are read from the cache. The cell below counts the positions that reach the first decoder layer's feed-forward
#    network while each writes the answer to one test string of 3, 6 and 10 digits, $n$ = 4, 7 and 11 tokens with its
#    `</s>`: `greedy` computes 10, 28 and 66, the sum above, and `generate()` 4, 7 and 11, one per token.
# 4. Each sublayer becomes `y = y + sublayer(norm(y))` instead of `y = norm(y + sublayer(y))`, and each stack ends
#    with one more `nn.LayerNorm` (the library's `encoder.norm` and `decoder.norm`), applied to the encoder's output
#    before it becomes the memory and to the decoder's before the output projection. The cell below builds those
#    blocks and norms (`PreNormEncoderBlock`, `PreNormDecoderBlock`, `PreNormEncoderDecoder`) with the trained model's
#    weights, and loads the same weights into the library's model with `norm_position="pre"` and `final_norm=True`:
#    on the check batch their logits agree to 3.6e-6 (logits up to 8.0), where the post-norm blocks with the same
#    weights are 9.7 away.

# %%
from collections import Counter  # noqa: E402
from functools import partial  # noqa: E402


def answers(model: EncoderDecoder, sources: torch.Tensor) -> torch.Tensor:
    """Greedy answers without the `<s>`, padded to the targets' width (as `exactly_right` pads them)."""
    written = greedy(model, sources, max_new_tokens=LONGEST + 1)[:, 1:]
    return nn.functional.pad(written, (0, LONGEST + 1 - written.shape[1]), value=PAD)


# Exercise 1: the main run again (the same initial weights, optimizer, schedule and batches) with source positions of
# zero, frozen: the encoder reads the tokens alone, not where they stand.
torch.manual_seed(0)
unordered = EncoderDecoder(WIDTH, HEADS, LAYERS, MAX_LENGTH)
nn.init.zeros_(unordered.source_positions.weight)
unordered.source_positions.weight.requires_grad_(False)
optimizer = torch.optim.AdamW(unordered.parameters(), lr=3e-3, weight_decay=0.0)
schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=STEPS, pct_start=0.1)
train(unordered, optimizer, schedule, STEPS)
unordered.eval()
unordered_answers = answers(unordered, test_sources)
unordered_right = (unordered_answers == test_targets).all(1)
digit_counts = (test_sources != PAD).sum(1) - 2
mirrored = test_sources.clone()  # each test source with its digits reversed, the task token and `</s>` in place
for row, n in enumerate(digit_counts.tolist()):
    mirrored[row, 1 : n + 1] = test_sources[row, 1 : n + 1].flip(0)
with torch.no_grad():
    decoder_input = shift_right(test_targets)
    mirrored_gap = (unordered(mirrored, decoder_input) - unordered(test_sources, decoder_input)).abs().max().item()
same_answer = (answers(unordered, mirrored) == unordered_answers).all(1)


def orders(digits: list[int]) -> int:
    """How many distinct strings the digits make: n! over the factorial of each digit's count."""
    return math.factorial(len(digits)) // math.prod(math.factorial(c) for c in Counter(digits).values())


# A decoder that knows which digits a source holds, not their order, writes one order of them: right for 1 string of
# the orders() the digits make, at best (each order is as likely as the others).
best_without_order = torch.tensor(
    [1 / orders(row[1 : n + 1]) for row, n in zip(test_sources.tolist(), digit_counts.tolist(), strict=True)]
)
# the strings whose order does not matter: every digit the same, every length, both tasks (not held out of training)
constant = [
    (task, [digit] * n) for task in (COPY, REVERSE) for n in range(SHORTEST, LONGEST + 1) for digit in range(10)
]
constant_sources = torch.full((len(constant), LONGEST + 2), PAD)
constant_targets = torch.full((len(constant), LONGEST + 1), PAD)
for row, (task, digits) in enumerate(constant):
    ids = [digit + len(SPECIAL) for digit in digits]
    constant_sources[row, : len(ids) + 2] = torch.tensor([task, *ids, EOS])
    constant_targets[row, : len(ids) + 1] = torch.tensor([*ids, EOS])  # the copy and the reversal
constant_answers = answers(unordered, constant_sources)
constant_right = (constant_answers == constant_targets).all(1)
# a wrong answer that is the right digit written too few or too many times: the order was right, the count not
only_that_digit = (constant_answers == constant_targets[:, :1]) | (constant_answers == EOS) | (constant_answers == PAD)
miscounted = ~constant_right & only_that_digit.all(1)
constant_lengths = torch.tensor([len(digits) for _, digits in constant])
report["exercise_1"] = {
    "steps": STEPS,
    "exact_match_copy": unordered_right[~is_reverse].float().mean().item(),
    "exact_match_reverse": unordered_right[is_reverse].float().mean().item(),
    "best_without_order": best_without_order.mean().item(),
    "mirrored_logits_max_abs": mirrored_gap,
    "same_answer_for_mirrored": int(same_answer.sum()),
    "constant_strings": len(constant),
    "constant_right": int(constant_right.sum()),
    "constant_miscounted": int(miscounted.sum()),
    "constant_right_by_length": {
        n: int(constant_right[constant_lengths == n].sum()) for n in range(SHORTEST, LONGEST + 1)
    },
}
print(
    f"without source positions: copy {report['exercise_1']['exact_match_copy']:.3f}, reverse "
    f"{report['exercise_1']['exact_match_reverse']:.3f} exactly right (at best {best_without_order.mean():.3f} "
    f"knowing the digits but not their order); a string and its reversal: logits {mirrored_gap:.1e} apart, the same "
    f"answer for {int(same_answer.sum())} of {TEST}; digits all the same: "
    f"{report['exercise_1']['constant_right']} of {len(constant)} right, {int(miscounted.sum())} wrong by the count "
    f"alone; right by length: {report['exercise_1']['constant_right_by_length']}"
)

# Exercise 2: the trained model with and without its source padding mask; each test string alone (no padding) and in
# the test set's batch, padded to the longest string.


def encode_unmasked(model: EncoderDecoder, source: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`encode` with a mask of all True: every query sees every source position, `<pad>` included."""
    source_mask = torch.ones_like(source, dtype=torch.bool)[:, None, None, :]
    x = model.embed_with_positions(source, model.source_positions)
    for block in model.encoder:
        x = block(x, source_mask)
    return x, source_mask


with torch.no_grad():
    in_batch = {
        "masked": model(test_sources, decoder_input),
        "unmasked": model.decode(decoder_input, *encode_unmasked(model, test_sources)),
    }
    # the library leaves the mask out when it gets no attention_mask: the unmasked logits too
    library_unmasked = library(input_ids=test_sources, decoder_input_ids=decoder_input).logits
    gaps = dict.fromkeys(in_batch, 0.0)
    changed = {name: [0, 0] for name in in_batch}  # tokens, strings whose argmax changes
    tokens = strings = 0
    for n in range(SHORTEST, LONGEST):  # every string shorter than the longest is padded in the batch
        rows = digit_counts == n
        alone = model(test_sources[rows, : n + 2], decoder_input[rows, : n + 1])  # no padding: mask all True
        tokens, strings = tokens + alone.shape[0] * alone.shape[1], strings + alone.shape[0]
        for name, logits in in_batch.items():
            gaps[name] = max(gaps[name], (logits[rows, : n + 1] - alone).abs().max().item())
            flips = logits[rows, : n + 1].argmax(-1) != alone.argmax(-1)
            changed[name][0] += int(flips.sum())
            changed[name][1] += int(flips.any(1).sum())
report["exercise_2"] = {
    "padded_strings": strings,
    "padded_tokens": tokens,
    "max_abs": gaps,
    "argmax_changed_tokens": {name: c[0] for name, c in changed.items()},
    "argmax_changed_strings": {name: c[1] for name, c in changed.items()},
    "library_without_attention_mask_max_abs": (library_unmasked - in_batch["unmasked"]).abs().max().item(),
}
print(
    table(
        [
            (
                name,
                f"{gaps[name]:.1e}",
                f"{changed[name][0]} of {tokens}",
                f"{changed[name][1]} of {strings}",
            )
            for name in in_batch
        ],
        ("source padding", "alone vs in the batch: max |Δ logit|", "argmax changed: tokens", "strings"),
    )
)
library_gap = report["exercise_2"]["library_without_attention_mask_max_abs"]
print(f"the library without attention_mask vs the hand-built model without its mask: {library_gap:.1e}")

# Exercise 3: the decoder positions computed, counted where they enter the first decoder layer's feed-forward network


def positions_computed(network: nn.Module, decode) -> tuple[int, int]:
    """The tokens `decode()` writes, and the positions that `network` computes meanwhile."""
    seen = []
    hook = network.register_forward_pre_hook(lambda module, inputs: seen.append(inputs[0].shape[1]))
    with torch.no_grad():
        written = decode()
    hook.remove()
    return written.shape[1] - 1, sum(seen)


positions = []
for digits in (3, 6, 10):
    source = test_sources[digit_counts == digits][:1, : digits + 2]  # one test string, unpadded
    tokens, by_hand = positions_computed(model.decoder[0].ffn, partial(greedy, model, source, LONGEST + 1))
    generate_tokens, cached = positions_computed(
        library.model.decoder.layers[0].mlp,
        partial(
            library.generate, input_ids=source, attention_mask=torch.ones_like(source), max_new_tokens=LONGEST + 1
        ),
    )
    positions.append({"tokens": tokens, "greedy": by_hand, "generate_tokens": generate_tokens, "generate": cached})
report["exercise_3"] = positions
print(
    table(
        [
            (row["tokens"], row["tokens"] * (row["tokens"] + 1) // 2, row["greedy"], row["generate"])
            for row in positions
        ],
        ("tokens written n", "n(n+1)/2", "positions: greedy", "positions: generate()"),
    )
)

# Exercise 4: the answer's pre-norm blocks and final norms, with the trained model's weights, against the library's
# pre-norm model with the same weights


class PreNormEncoderBlock(EncoderBlock):
    """x ← x + self-attention(LN(x)), then x ← x + FFN(LN(x))."""

    def forward(self, x, source_mask):
        normed = self.self_attention_norm(x)
        x = x + self.self_attention(normed, normed, source_mask)
        return x + self.ffn(self.ffn_norm(x))


class PreNormDecoderBlock(DecoderBlock):
    """y ← y + causal self-attention(LN(y)), y ← y + cross-attention(LN(y), memory), y ← y + FFN(LN(y))."""

    def forward(self, y, memory, causal_mask, source_mask):
        normed = self.self_attention_norm(y)
        y = y + self.self_attention(normed, normed, causal_mask)
        y = y + self.cross_attention(self.cross_attention_norm(y), memory, source_mask)
        return y + self.ffn(self.ffn_norm(y))


class PreNormEncoderDecoder(EncoderDecoder):
    """The pre-norm blocks, and one more LayerNorm at the end of each stack."""

    def __init__(self, width: int, heads: int, layers: int, max_length: int):
        super().__init__(width, heads, layers, max_length)
        self.encoder = nn.ModuleList(PreNormEncoderBlock(width, heads) for _ in range(layers))
        self.decoder = nn.ModuleList(PreNormDecoderBlock(width, heads) for _ in range(layers))
        self.encoder_norm, self.decoder_norm = nn.LayerNorm(width), nn.LayerNorm(width)

    def encode(self, source):
        memory, source_mask = super().encode(source)
        return self.encoder_norm(memory), source_mask

    def decode(self, decoder_input, memory, source_mask):
        causal_mask = torch.ones(decoder_input.shape[1], decoder_input.shape[1], dtype=torch.bool).tril()
        y = self.embed_with_positions(decoder_input, self.target_positions)
        for block in self.decoder:
            y = block(y, memory, causal_mask, source_mask)
        return self.decoder_norm(y) @ self.embed.weight.T


pre_norm = PreNormEncoderDecoder(WIDTH, HEADS, LAYERS, MAX_LENGTH).eval()
final_norms = {"encoder": pre_norm.encoder_norm, "decoder": pre_norm.decoder_norm}  # the library's `norm` of each
final_state = {f"{side}.norm.{name}": t for side, norm in final_norms.items() for name, t in norm.state_dict().items()}
missing = pre_norm.load_state_dict(model.state_dict(), strict=False).missing_keys  # all but the two new norms
assert sorted(missing) == sorted(name.replace(".norm", "_norm") for name in final_state), missing
pre_config = hf_attention.HFAttentionSeq2SeqConfig.from_dict(
    {**config.to_dict(), "norm_position": "pre", "final_norm": True}
)
library_pre = AutoModelForSeq2SeqLM.from_config(pre_config).eval()
state = library_state(pre_norm) | {f"model.{name}": t for name, t in final_state.items()}
library_pre.load_state_dict(state, strict=True)
with torch.no_grad():
    logits_pre = pre_norm(batch_sources, shift_right(batch_targets))
    library_logits_pre = library_pre(**inputs).logits
    post_vs_pre = (model(batch_sources, shift_right(batch_targets)) - library_logits_pre).abs().max().item()
report["exercise_4"] = {
    "logits_max_abs": (library_logits_pre - logits_pre).abs().max().item(),
    "logits_largest": logits_pre.abs().max().item(),
    "post_norm_blocks_max_abs": post_vs_pre,
}
print(
    f"pre-norm, by hand vs the library: {report['exercise_4']['logits_max_abs']:.1e} (logits up to "
    f"{report['exercise_4']['logits_largest']:.1f}); the post-norm blocks vs the library's pre-norm: {post_vs_pre:.1f}"
)

# %% [markdown]
# ## Appendix: the last bits of the library's logits
#
# The check of "The same model in hf-attention", backend by backend.
#
# With the eager backend the logits and the cross-attention weights are equal to float32 rounding, within 1e-5: it
# runs the hand-written operations in the same order (its masked scores get the most negative float instead of
# $-\infty$, and both give a weight of exactly 0). Where the matrix library runs the same kernels for both layouts of
# the same products, that gives the same bits (a difference of 0.0 on an Intel Xeon with AMX); where it picks other
# kernels for the library's layout, the last bits differ: on this run's CPU by 2.9e-6 on the logits and 4.2e-7 on the
# weights. With the default SDPA backend they agree to float rounding, 2.9e-6 at most, on logits as large as 10.8: the
# fused kernel adds its sums in another order (tutorial 07).

# %%
report.save()
