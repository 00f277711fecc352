"""The numbers of tutorial 01's prose, tied to its full run (docs/figures/01_results.json and the figures' data)."""

import math

import numpy as np


def mantissa_and_exponent(value: float) -> list:
    """'2 · 10^-4' for 0.00017: the mantissa (the prose rounds it), 10 and the exponent's size."""
    exponent = math.floor(math.log10(value))
    return [value / 10**exponent, "10", str(abs(exponent))]


def power_of_ten(value: float) -> list[str]:
    """'10^-5' for 1.6e-5: 10 and the size of the rounded exponent."""
    return ["10", str(abs(round(math.log10(value))))]


def below(value: float, bound: float) -> float:
    """The bound the prose states when the value is below it (else the value, which makes the check fail)."""
    return bound if value < bound else value


def params(r, size: str, kind: str) -> int:
    return r["parameters_by_hidden"][size][kind]


STYLES = ("bahdanau", "luong", "luong_feeding")


def style_accuracy(r, style: str) -> list[float]:
    return r["style_sequence_accuracy"][style]


def blocks(fig, kind: str, size: int = 50) -> np.ndarray:
    """The mean loss of each block of `size` training steps of section 2's run (01_training.npz)."""
    losses = fig("01_training")[kind]
    return losses[: len(losses) // size * size].reshape(-1, size).mean(axis=1)


def transformer_ahead(fig) -> list[int]:
    """The 50-step blocks in which the Transformer's mean loss is below the attention RNN's."""
    return np.flatnonzero(blocks(fig, "transformer") < blocks(fig, "attention")).tolist()


def attention_ahead_after(fig) -> str:
    """'every' when the attention RNN's mean loss is below the Transformer's in every block after the last one the
    Transformer leads."""
    after = transformer_ahead(fig)[-1] + 1
    return "every" if np.all(blocks(fig, "attention")[after:] < blocks(fig, "transformer")[after:]) else "not every"


def unbroken(indices: list[int]) -> str:
    """'every' when the blocks are one unbroken run ("below ... in every block up to ...")."""
    return "every" if indices == list(range(indices[0], indices[-1] + 1)) else "not every"


def strings(accuracy: float, rows: int) -> int:
    return round(accuracy * rows)


def falls(values) -> str:
    """'falls' when the curve never goes up and ends below where it starts (a share of strings against length)."""
    steps = np.diff(np.asarray(values, dtype=float))
    return "falls" if np.all(steps <= 0) and steps.sum() < 0 else "does not fall"


# Section 3's decoders over several seeds (results["luong_seeds"]).
PAIRS = (("bahdanau", "luong"), ("bahdanau", "luong_feeding"), ("luong", "luong_feeding"))


def seed_range(r, measure: str, style: str) -> list[float]:
    """[mean, lowest, highest] over the seeds, as the prose writes 'mean (lowest to highest)'."""
    values = r["luong_seeds"][measure][style]
    return [float(np.mean(values)), min(values), max(values)]


def separated(r) -> list[str]:
    """The pairs of decoders the seeds separate, as in tutorial 05's extrapolation ranking: every seed of one ahead of
    every seed of the other (more strings right at the longest length; a lower final loss), ranges that do not
    overlap."""
    found = []
    for measure, ahead in (("sequences_at_longest", 1), ("final_loss", -1)):
        for a, b in PAIRS:
            first, second = (np.array(r["luong_seeds"][measure][s]) * ahead for s in (a, b))
            if first.min() > second.max() or second.min() > first.max():
                winner, loser = (a, b) if first.min() > second.max() else (b, a)
                found.append(f"{winner} ahead of {loser} in {measure}")
    return found


SEPARATED = [
    "bahdanau ahead of luong in sequences_at_longest",
    "luong_feeding ahead of luong in sequences_at_longest",
    "bahdanau ahead of luong in final_loss",
    "luong_feeding ahead of bahdanau in final_loss",
    "luong_feeding ahead of luong in final_loss",
]  # what the prose states


def separated_in(r, measure: str) -> list[str]:
    return [pair for pair in separated(r) if pair.endswith(measure)]


def if_separated(r, stated: list[str], tokens: list) -> list:
    """The snippet's tokens when the seeds separate exactly the pairs the prose states; else what they do separate
    (the prose must then say that, and `stated` list it)."""
    found = separated(r)
    return tokens if found == stated else [f"the seeds separate {found or 'no pair'}: rewrite the prose to say so"]


# The exercises' models (results["exercises"]): the share of strings right at the first, middle and last tested length.
def ex(r) -> dict:
    return r["exercises"]


def three_lengths(r) -> list[int]:
    lengths = r["test_lengths"]
    return [lengths[0], lengths[len(lengths) // 2], lengths[-1]]


def at_three(r, name: str) -> list[float]:
    accuracy = ex(r)["sequence_accuracy"][name]
    return [accuracy[0], accuracy[len(accuracy) // 2], accuracy[-1]]


MIDDLE_LENGTHS = [6, 10, 14]  # where the plain models' curves part (they all copy short strings, none long ones)


def at_lengths(r, name: str, lengths: list[int]) -> list[float]:
    accuracy = ex(r)["sequence_accuracy"][name]
    return [accuracy[r["test_lengths"].index(n)] for n in lengths]


def copies_at(r, name: str, lengths: list[int]) -> list:
    """'copies 0.93 of the strings of 6 symbols, 0.38 of those of 10 and 0.02 of those of 14'."""
    return [v for value, n in zip(at_lengths(r, name, lengths), lengths, strict=True) for v in (value, n)]


def from_length(r, name: str, length: int) -> list[float]:
    return ex(r)["sequence_accuracy"][name][r["test_lengths"].index(length) :]


def at_or_above(r, name: str, other: str) -> bool:
    return all(
        a >= b for a, b in zip(ex(r)["sequence_accuracy"][name], ex(r)["sequence_accuracy"][other], strict=True)
    )


def better_up_to(r, name: str, other: str, length: int) -> str:
    """'every' when `name` copies more strings than `other` at every tested length up to `length`."""
    upto = r["test_lengths"].index(length) + 1
    pairs = zip(ex(r)["sequence_accuracy"][name][:upto], ex(r)["sequence_accuracy"][other][:upto], strict=True)
    return "every" if all(a > b for a, b in pairs) else "not every"


def copies_three(r, name: str) -> list:
    """'copies 0.36 of the strings of 2 symbols, 0.00 of those of 6 and 0.00 of those of 8'."""
    (a, b, c), (m, n, o) = at_three(r, name), three_lengths(r)
    return [a, m, b, n, c, o]


def first_over_last(curve: list[float]) -> float:
    return curve[0] / curve[-1]


def weakest_inside(curve: list[float]) -> int | None:
    """The (1-based) position of the weakest gradient when it is inside the string, not at an end (else None)."""
    weakest = int(np.argmin(curve))
    return weakest + 1 if 0 < weakest < len(curve) - 1 else None


def easier_reversed(r) -> list[str]:
    """The models whose mean share of strings right over the tested lengths is higher on the reverse task than on
    the copy (the same budget)."""
    accuracy = ex(r)["sequence_accuracy"]
    return [k for k in ("rnn", "attention", "transformer") if np.mean(accuracy[f"{k}_reverse"]) > np.mean(accuracy[k])]


def reversed_source_by_position(r) -> list:
    """Exercise 2 at the longest length: the string's first symbol is the one both readers get right most often (the
    reversed reader more often than the forward one), its last the one they get right least often."""
    backwards, forwards = (ex(r)["position_accuracy"][k] for k in ("rnn_reversed_source", "rnn"))
    easiest_first = all(np.argmax(curve) == 0 for curve in (backwards, forwards)) and backwards[0] > forwards[0]
    hardest_last = all(np.argmin(curve) == len(curve) - 1 for curve in (backwards, forwards))
    if easiest_first and hardest_last:
        return [r["test_lengths"][-1], backwards[0], backwards[-1], forwards[0], forwards[-1]]
    return [f"by position, reversed {backwards}, forwards {forwards}: not the start easiest and the end hardest"]


def reversed_source_reach(r) -> list:
    """Exercise 2's trained gradients: the forward reader's strongest at the first token it reads, the backward
    reader's at the last token it reads (both: the string's first symbol)."""
    forwards, backwards = (ex(r)["gradient_reach"][k] for k in ("rnn", "rnn_reversed_source"))
    if int(np.argmax(forwards)) == 0 and int(np.argmax(backwards)) == len(backwards) - 1:
        return [first_over_last(forwards), first_over_last(backwards)]
    return [f"the strongest gradients are at positions {np.argmax(forwards) + 1} and {np.argmax(backwards) + 1}"]


def reverse_task_by_position(r) -> list:
    """Exercise 6: the plain model alone finds the reverse easier, and writes the first symbol right more often than
    the last."""
    reverse = ex(r)["position_accuracy"]["rnn_reverse"]
    if easier_reversed(r) == ["rnn"] and reverse[0] > reverse[-1]:
        return [r["test_lengths"][-1], reverse[0], reverse[-1]]
    return [f"easier reversed: {easier_reversed(r)}; the plain model by position: {reverse}"]


CLAIMS = [
    # Introduction
    (
        "1. the plain encoder-decoder falls off on long inputs and the attention one does not",
        lambda r, fig: ["1", falls(r["sequence_accuracy"]["rnn"])],
    ),
    # 1. The task
    (
        r"with 10 symbols, a string of $n$ of them carries $n \log_2 10 \approx 3.3\,n$ bits",
        lambda r, fig: [r["task"]["symbols"]] * 2 + [math.log2(r["task"]["symbols"])],
    ),
    (
        "3 … 12 = the symbols",
        lambda r, fig: [r["task"]["first_symbol"], r["task"]["first_symbol"] + r["task"]["symbols"] - 1],
    ),
    # 2. Three models
    ("numbers (128 in the full run)", lambda r, fig: 2 * r["hidden"]["full"]),
    ("`HIDDEN` wide (64)", lambda r, fig: r["hidden"]["full"]),
    (
        # "about half": the Transformer's parameters over each RNN's, both 0.5 to one decimal
        "it has about half the parameters of either RNN",
        lambda r, fig: (
            "half"
            if all(round(r["parameters"]["transformer"] / r["parameters"][k], 1) == 0.5 for k in ("rnn", "attention"))
            else "not half"
        ),
    ),
    (
        "168,256 against 314,752 (plain) and 347,648 (attention) in the full run, and 43,168 against 79,552 and "
        "87,808 with `--quick`",
        lambda r, fig: (
            [params(r, "64", k) for k in ("transformer", "rnn", "attention")]
            + [params(r, "32", k) for k in ("transformer", "rnn", "attention")]
        ),
    ),
    (
        "it has nearly twice the Transformer's parameters",
        lambda r, fig: round(r["parameters"]["rnn"] / r["parameters"]["transformer"]),
    ),
    # 3. Accuracy against length
    ("copies 200 fresh strings", lambda r, fig: r["test_rows"]),
    (
        "The plain encoder-decoder falls off with the length of the string: it copies 1.00 of the strings of 6 "
        "symbols, 0.40 of those of 14 and 0.005 of those of 22. Its 128 numbers of state",
        lambda r, fig: [
            falls(r["sequence_accuracy"]["rnn"]),
            r["sequence_accuracy"]["rnn"][1],
            r["test_lengths"][1],
            r["sequence_accuracy"]["rnn"][3],
            r["test_lengths"][3],
            r["sequence_accuracy"]["rnn"][-1],
            r["test_lengths"][-1],
            2 * r["hidden"]["full"],
        ],
    ),
    (
        "strings of up to 24 symbols, 1,500 steps) it copies 1.00 of the strings at every tested length",
        lambda r, fig: [
            r["task"]["max_length"],
            r["steps"]["full"],
            min(r["sequence_accuracy"]["transformer"]),
            "every" if min(r["sequence_accuracy"]["transformer"]) == 1.0 else "not every",
        ],
    ),
    (
        # Section 2's losses in blocks of 50 steps: the Transformer behind, then ahead in most blocks, then behind in
        # every block to the end.
        "In blocks of 50 steps (section 2's figure), its mean loss is still 2.09 over steps 150–199, against the "
        "attention RNN's 0.73; over steps 250–299 it is 0.040 against 0.20, and it is below the attention RNN's in 14 "
        "of the 15 blocks from there to steps 950–999. From steps 1,000–1,049 on, the attention RNN's is the lower "
        "one in every block",
        lambda r, fig: [
            50,
            2,
            blocks(fig, "transformer")[3],
            150,
            199,
            blocks(fig, "attention")[3],
            50 * transformer_ahead(fig)[0],
            50 * transformer_ahead(fig)[0] + 49,
            blocks(fig, "transformer")[transformer_ahead(fig)[0]],
            blocks(fig, "attention")[transformer_ahead(fig)[0]],
            len(transformer_ahead(fig)),
            transformer_ahead(fig)[-1] - transformer_ahead(fig)[0] + 1,
            50 * transformer_ahead(fig)[-1],
            50 * transformer_ahead(fig)[-1] + 49,
            50 * (transformer_ahead(fig)[-1] + 1),
            50 * (transformer_ahead(fig)[-1] + 1) + 49,
            attention_ahead_after(fig),
        ],
    ),
    (
        r"and it ends lower ($2 \cdot 10^{-4}$ against $4 \cdot 10^{-4}$ over the last 20 steps)",
        lambda r, fig: (
            mantissa_and_exponent(r["final_loss"]["attention"])
            + mantissa_and_exponent(r["final_loss"]["transformer"])
            + [20]
            if r["final_loss"]["attention"] < r["final_loss"]["transformer"]
            else ["the Transformer ends lower"]
        ),
    ),
    (
        "With `--quick` (300 steps of a narrower model, with a learning rate that decays to zero by step 300)",
        lambda r, fig: [r["steps"]["quick"]] * 2,
    ),
    ("`--quick`'s 300 steps", lambda r, fig: r["steps"]["quick"]),
    # Luong
    (
        "train for 300 steps instead of 1,500",
        lambda r, fig: [r["style_steps"], r["steps"]["full"]],
    ),
    (
        "After 300 steps all three copy at least 0.975 of the strings of 6 to 18 symbols",
        lambda r, fig: [
            r["style_steps"],
            "all" if min(style_accuracy(r, s)[i] for s in STYLES for i in range(1, 5)) >= 0.975 else "not all",
            len(r["style_sequence_accuracy"]),
            min(style_accuracy(r, s)[i] for s in STYLES for i in range(1, len(r["test_lengths"]) - 1)),
            r["test_lengths"][1],
            r["test_lengths"][-2],
        ],
    ),
    (
        "the longest tested length, 22: Bahdanau's decoder copies 0.94 of those strings, Luong's 0.73, Luong's with "
        "input feeding 0.99 (final losses 0.038, 0.063 and 0.023)",
        lambda r, fig: (
            [r["test_lengths"][-1]]
            + [style_accuracy(r, s)[-1] for s in STYLES]
            + [r["style_final_loss"][s] for s in STYLES]
        ),
    ),
    (
        "at length 22, Bahdanau's decoder is 9 strings of 200 behind input feeding, and Luong's without feeding is "
        "44 behind Bahdanau's.",
        lambda r, fig: [
            r["test_lengths"][-1],
            strings(style_accuracy(r, "luong_feeding")[-1], r["test_rows"])
            - strings(style_accuracy(r, "bahdanau")[-1], r["test_rows"]),
            r["test_rows"],
            strings(style_accuracy(r, "bahdanau")[-1], r["test_rows"])
            - strings(style_accuracy(r, "luong")[-1], r["test_rows"]),
        ],
    ),
    (
        "(298,496 parameters against 347,648",
        lambda r, fig: [r["style_parameters"]["luong"], r["style_parameters"]["bahdanau"]],
    ),
    (
        "(Strings of 2 symbols are copied worse than those of 6 to 18 by all three at this budget: 0.94, 0.88 and "
        "0.92.)",
        lambda r, fig: (
            [
                r["test_lengths"][0],
                "worse"
                if all(style_accuracy(r, s)[0] < min(style_accuracy(r, s)[1:-1]) for s in STYLES)
                else "not worse",
                r["test_lengths"][1],
                r["test_lengths"][-2],
                "all" if all(style_accuracy(r, s)[0] < min(style_accuracy(r, s)[1:-1]) for s in STYLES) else "not all",
                len(r["style_sequence_accuracy"]),
            ]
            + [style_accuracy(r, s)[0] for s in STYLES]
        ),
    ),
    # Luong's comparison over seeds
    (
        "Over the 5 seeds, at length 22 Bahdanau's decoder copies 0.94 of the strings on average (0.88 to 0.98 from "
        "seed to seed), Luong's 0.75 (0.63 to 0.88) and Luong's with input feeding 0.98 (0.96 to 0.99); their final "
        "losses average 0.038 (0.031 to 0.045), 0.066 (0.054 to 0.082) and 0.027 (0.023 to 0.030).",
        lambda r, fig: (
            [len(r["luong_seeds"]["seeds"]), r["test_lengths"][-1]]
            + [v for s in STYLES for v in seed_range(r, "sequences_at_longest", s)]
            + [v for s in STYLES for v in seed_range(r, "final_loss", s)]
        ),
    ),
    (
        # The order the seeds give: the pairs whose ranges do not overlap (SEPARATED), in both measures.
        "In the strings right at length 22, Bahdanau's decoder and Luong's with input feeding are each ahead of "
        "Luong's without feeding, and these two are not separated from each other; in the final loss all three pairs "
        "are separated: input feeding lowest, then Bahdanau's, then Luong's without feeding.",
        lambda r, fig: if_separated(
            r,
            SEPARATED,
            [r["test_lengths"][-1], 2, "all" if len(separated_in(r, "final_loss")) == 3 else "not all", 3],
        ),
    ),
    (
        "So the single seed's drop of Luong's decoder without feeding at length 22 holds over the seeds",
        lambda r, fig: if_separated(r, SEPARATED, [r["test_lengths"][-1]]),
    ),
    (
        "Luong's decoder without feeding stays behind the other two at length 22 with every seed, while Bahdanau's "
        "and input feeding are not separated there (in the final loss, all three pairs are).",
        lambda r, fig: if_separated(
            r,
            SEPARATED,
            [
                2,
                r["test_lengths"][-1],
                "every",  # separated ranges: every seed of the two ahead of every seed of Luong's
                "all" if len(separated_in(r, "final_loss")) == 3 else "not all",
                3,
            ],
        ),
    ),
    ("The cell after that comparison trains each from 5 seeds", lambda r, fig: len(r["luong_seeds"]["seeds"])),
    # 5. Vanishing gradients
    (
        r"is about $2 \cdot 10^{-4}$ in the full run against 0.36 for the plain RNN",
        lambda r, fig: mantissa_and_exponent(r["final_loss"]["attention"]) + [r["final_loss"]["rnn"]],
    ),
    (
        # "about a thousand": the ratio of the mean gradients, to the nearest thousand
        "its gradients are on average about a thousand times smaller than the plain RNN's",
        lambda r, fig: [
            int(round(r["gradient_mean_trained"]["rnn"] / r["gradient_mean_trained"]["attention"], -3)),
            "smaller" if r["gradient_mean_trained"]["attention"] < r["gradient_mean_trained"]["rnn"] else "larger",
        ],
    ),
    ("In the full run (strings of 24 symbols)", lambda r, fig: r["task"]["max_length"]),
    (
        "receives about $10^{-5}$ of the gradient",
        lambda r, fig: power_of_ten(r["gradient_first_over_last_untrained"]["rnn"]),
    ),
    (
        "within a factor of about 1.1",
        lambda r, fig: 1 / r["gradient_first_over_last_untrained"]["attention"],
    ),
    ("the first token gets 6.76 times", lambda r, fig: r["gradient_first_over_last"]["rnn"]),
    # 6. Exploding gradients
    (
        "a tanh RNN of width 64 (`torch.nn.RNN`) reads 48 random input vectors",
        lambda r, fig: [r["elman"]["width"], r["elman"]["length"]],
    ),
    (
        r"Over 47 steps the first token's gradient is about $10^{-19}$ of the last one's at $g = 0.5$ and about "
        r"$10^{6}$ times larger at $g = 3$. Even $g = 1$ vanishes (below $10^{-6}$)",
        lambda r, fig: (
            [r["elman"]["length"] - 1]
            + power_of_ten(r["elman_first_over_last"]["0.5"])
            + [r["elman"]["gains"][0]]
            + power_of_ten(r["elman_first_over_last"]["3.0"])
            + [r["elman"]["gains"][3], r["elman"]["gains"][1]]
            + ["10", "6" if r["elman_first_over_last"]["1.0"] < 1e-6 else r["elman_first_over_last"]["1.0"]]
        ),
    ),
    ("a spectral radius of about 0.6", lambda r, fig: r["elman_default_spectral_radius"]),
    (
        "a tanh RNN of width 64 (PyTorch's default initialisation) with an embedding of 10 symbols and a linear "
        "output, trained with plain SGD at learning rate 1.5 to name the symbol 4 positions before the end of a "
        "random string of 24",
        lambda r, fig: [
            r["elman"]["width"],
            r["task"]["symbols"],
            r["elman_sgd"]["lr"],
            r["elman_sgd"]["back"],
            r["elman_sgd"]["length"],
        ],
    ),
    (
        "(a loss of 0.55 over steps 100–199, against the clipped run's 0.21)",
        lambda r, fig: [
            r["clipping_loss_by_100_steps"]["unclipped"][1],
            100,
            199,
            r["clipping_loss_by_100_steps"]["clipped"][1],
        ],
    ),
    (
        "(above 10 for the first time at step 221), up to 33, about 20 times its median",
        lambda r, fig: [
            "10",
            r["clipping_first_spike"],
            r["clipping_largest_norm"]["unclipped"],
            round(r["clipping_spike_over_median"], -1),
        ],
    ),
    (r"A spike is a step of length $1.5 \lVert g \rVert$", lambda r, fig: r["elman_sgd"]["lr"]),
    (
        r"($\ln 10 \approx 2.30$) and stays there: 3.87 over the last 100 steps",
        lambda r, fig: [
            r["task"]["symbols"],
            math.log(r["task"]["symbols"]),
            r["clipping_loss_by_100_steps"]["unclipped"][-1],
            100,
        ],
    ),
    (
        # "falls block by block": every 100-step block of the clipped run below the one before, up to the fifth;
        # "rises": the last block above the fifth. The gradient norm: the largest of the last 100 steps.
        "each step is at most 1.5 long, and the loss falls block by block to 0.006 over steps 400–499, then rises to "
        "0.01 over the last 100 steps, where its gradient norm still reaches 2.2 (cut to 1 before the step)",
        lambda r, fig: [
            r["elman_sgd"]["lr"],  # the learning rate times the threshold c = 1
            falls(r["clipping_loss_by_100_steps"]["clipped"][:5]),
            r["clipping_loss_by_100_steps"]["clipped"][4],
            400,
            499,
            "rises"
            if r["clipping_loss_by_100_steps"]["clipped"][5] > r["clipping_loss_by_100_steps"]["clipped"][4]
            else "falls",
            r["clipping_loss_by_100_steps"]["clipped"][5],
            100,
            float(fig("01_exploding")["clipped_norm"][-100:].max()),
            "1",
        ],
    ),
    (
        "the clipped run ends below 0.05.",
        lambda r, fig: below(r["clipping_loss_by_100_steps"]["clipped"][-1], 0.05),
    ),
    (
        "was above 1 on 94% of its steps (median 2.3, largest 9.0)",
        lambda r, fig: [
            "1",
            100 * r["section2_share_clipped"]["rnn"],
            r["section2_median_norm"]["rnn"],
            r["section2_largest_norm"]["rnn"],
        ],
    ),
    (
        r"The attention RNN's median is 0.13, but its norm spiked to 29 on its way to a loss of $2 \cdot 10^{-4}$",
        lambda r, fig: (
            [r["section2_median_norm"]["attention"], r["section2_largest_norm"]["attention"]]
            + mantissa_and_exponent(r["final_loss"]["attention"])
        ),
    ),
    # 7. Sequential steps
    ("the Transformer layer's 123 are a sequence too", lambda r, fig: r["transformer_layer_operations"][0]),
    (
        "the same 123 operations for 8 tokens or 256",
        lambda r, fig: [
            r["transformer_layer_operations"][-1] if len(set(r["transformer_layer_operations"])) == 1 else "differ",
            r["sequence_lengths"][0],
            r["sequence_lengths"][-1],
        ],
    ),
    (
        # "grows by a fixed number per token": the same increase per token between every two measured lengths
        "The GRU's list grows by a fixed number of operations per token",
        lambda r, fig: (
            "grows"
            if len(set(np.diff(r["rnn_layer_operations"]) / np.diff(r["sequence_lengths"]))) == 1
            and r["rnn_layer_operations"][-1] > r["rnn_layer_operations"][0]
            else "does not grow evenly"
        ),
    ),
    (
        "387 operations for 8 tokens, 44 more for each further token (2,851 for 64)",
        lambda r, fig: [
            r["rnn_layer_operations"][0],
            r["sequence_lengths"][0],
            (r["rnn_layer_operations"][1] - r["rnn_layer_operations"][0])
            // (r["sequence_lengths"][1] - r["sequence_lengths"][0]),
            r["rnn_layer_operations"][r["sequence_lengths"].index(64)],
            64,
        ],
    ),
    ("at a fixed budget of 512 tokens per batch", lambda r, fig: r["timing_tokens"]),
    (
        # "grows": the GRU's time per forward rises at every longer row length (the committed figure's data)
        "the GRU's time grows with its number of steps",
        lambda r, fig: "grows" if np.all(np.diff(fig("01_sequential")["gru_seconds"]) > 0) else "does not grow",
    ),
    (
        "from rows of 8 tokens to rows of 256, the GRU's time per forward grew 6.1-fold and the Transformer layer's "
        "1.2-fold",
        lambda r, fig: [
            int(fig("01_sequential")["timing_lengths"][0]),
            int(fig("01_sequential")["timing_lengths"][-1]),
            "grew" if fig("01_sequential")["gru_seconds"][-1] > fig("01_sequential")["gru_seconds"][0] else "shrank",
            float(fig("01_sequential")["gru_seconds"][-1] / fig("01_sequential")["gru_seconds"][0]),
            float(
                fig("01_sequential")["transformer_layer_seconds"][-1]
                / fig("01_sequential")["transformer_layer_seconds"][0]
            ),
        ],
    ),
    # 8.
    (
        "(every string copied at every tested length;",
        lambda r, fig: ["every" if min(r["sequence_accuracy"]["transformer"]) == 1.0 else "not every"] * 2,
    ),
    (
        "a list of operations that does not grow with the length",
        lambda r, fig: "grow" if len(set(r["transformer_layer_operations"])) == 1 else "stay",
    ),
    # Exercises 5 and 7, and their answers
    (
        "per step three `aten::sigmoid_`",
        lambda r, fig: r["lstm_profiler_events"]["8, oneDNN off"]["aten::sigmoid_"] // 8,
    ),
    (
        "with learning rate 0.5 instead of 1.5 (`train_elman(None, lr=0.5)`)",
        lambda r, fig: [0.5, r["elman_sgd"]["lr"], 0.5],
    ),
    # Exercises 1-4 and 6, measured in the last code cell on section 3's Luong budget
    ("300 steps): where", lambda r, fig: ex(r)["steps"]),
    (
        "The cell below measures it at 300 steps, beside the plain model trained on the same budget.",
        lambda r, fig: ex(r)["steps"],
    ),
    (
        # "moves to the right": the larger state copies at least as many strings at every tested length.
        "(a state of 256 numbers instead of 128, and 1,252,096 parameters instead of 314,752) the plain model copies "
        "0.93 of the strings of 6 symbols, 0.38 of those of 10 and 0.02 of those of 14, against 0.44, 0.01 and 0.00 "
        "with the smaller state: its curve moves to the right. From 6 symbols on it falls with the length "
        "nonetheless, to 0.00 at 22.",
        lambda r, fig: (
            [4 * r["hidden"]["this_run"], 2 * r["hidden"]["this_run"]]
            + [ex(r)["parameters"]["rnn_4h"], ex(r)["parameters"]["rnn"]]
            + copies_at(r, "rnn_4h", MIDDLE_LENGTHS)
            + at_lengths(r, "rnn", MIDDLE_LENGTHS)
            + (
                [MIDDLE_LENGTHS[0], falls(from_length(r, "rnn_4h", MIDDLE_LENGTHS[0]))]
                + [at_lengths(r, "rnn_4h", [r["test_lengths"][-1]])[0], r["test_lengths"][-1]]
                if at_or_above(r, "rnn_4h", "rnn")
                else ["the larger state is not ahead at every length"]
            )
        ),
    ),
    (
        "The cell below measures it at 300 steps. Reading each string backwards, the plain model copies 0.82 of the "
        "strings of 6 symbols, 0.20 of those of 10 and 0.01 of those of 14 (forwards: 0.44, 0.01 and 0.00): better at "
        "every tested length up to 14, and from 6 symbols on still falling with the length.",
        lambda r, fig: (
            [ex(r)["steps"], *copies_at(r, "rnn_reversed_source", MIDDLE_LENGTHS)]
            + at_lengths(r, "rnn", MIDDLE_LENGTHS)
            + [better_up_to(r, "rnn_reversed_source", "rnn", MIDDLE_LENGTHS[-1]), MIDDLE_LENGTHS[-1]]
            + [
                MIDDLE_LENGTHS[0],
                "falling" if falls(from_length(r, "rnn_reversed_source", 6)) == "falls" else "rising",
            ]
        ),
    ),
    (
        # Position by position at the longest length: the string's first symbol is the easiest for both readers, the
        # last the hardest, and reading backwards gets the first right more often.
        "Position by position, in the strings of 22 it writes the string's first symbol right in 0.77 of them and the "
        "last in 0.06 (forwards: 0.51 and 0.04): reading backwards makes the start, already the easiest part, easier "
        "still, and the end stays the hardest.",
        lambda r, fig: reversed_source_by_position(r),
    ),
    (
        "After training, both send the strongest gradient to the string's first symbol: the forward reader reads it "
        "first and gives it 6.66 times the gradient of the last token it reads; the backward reader reads it last, "
        "and the first token it reads (the string's last symbol) gets 0.07 of it.",
        lambda r, fig: reversed_source_reach(r),
    ),
    (
        "The cell below measures it, at initialisation and after 300 steps.",
        lambda r, fig: ex(r)["steps"],
    ),
    (
        "the first source token gets 1.04 of the gradient of the last (one way: 1.6e-5), and the weakest is position "
        "13 of 24, inside the string.",
        lambda r, fig: [
            first_over_last(ex(r)["gradient_reach_untrained"]["rnn_bidirectional"]),
            first_over_last(ex(r)["gradient_reach_untrained"]["rnn"]),
            weakest_inside(ex(r)["gradient_reach_untrained"]["rnn_bidirectional"]) or "at an end",
            len(ex(r)["gradient_reach_untrained"]["rnn_bidirectional"]),
        ],
    ),
    (
        # Trained: the weakest gradient at the last position; the one-way model's ratio is exercise 2's.
        "After training, the first gets 4.97 times the last's, and the weakest is the last position: trained on the "
        "copy, the model sends the most gradient to the start of the string, as the one-way model does (6.66 times, "
        "above).",
        lambda r, fig: (
            [
                first_over_last(ex(r)["gradient_reach"]["rnn_bidirectional"]),
                first_over_last(ex(r)["gradient_reach"]["rnn"]),
            ]
            if int(np.argmin(ex(r)["gradient_reach"]["rnn_bidirectional"]))
            == len(ex(r)["gradient_reach"]["rnn_bidirectional"]) - 1
            and int(np.argmax(ex(r)["gradient_reach"]["rnn_bidirectional"])) == 0
            else ["the trained bidirectional model's weakest gradient is not at the last position"]
        ),
    ),
    (
        "The cell below measures it at 300 steps, against Bahdanau's additive decoder trained on the same budget",
        lambda r, fig: ex(r)["steps"],
    ),
    (
        "With the dot product the attention RNN copies 0.93 of the strings of 2 symbols, 0.99 of those of 14 and 0.98 "
        "of those of 22 (additive: 0.94, 1.00 and 0.94), and on the string of the alignment figure its mean weight on "
        "the diagonal is 0.553 (additive: 0.439; a uniform row would give 0.0625).",
        lambda r, fig: [
            *copies_three(r, "dot"),
            *at_three(r, "attention"),
            ex(r)["alignment_diagonal_mean"]["dot"],
            ex(r)["alignment_diagonal_mean"]["additive"],
            1 / min(16, r["task"]["max_length"]),  # section 4's string has min(16, MAX_LENGTH) symbols
        ],
    ),
    (
        "The dot product has no parameters of its own (314,752 against 347,648)",
        lambda r, fig: [ex(r)["parameters"]["dot"], ex(r)["parameters"]["attention"]],
    ),
    (
        "The cell below measures it at 300 steps, each model against its own copy run on the same budget (strings "
        "right at lengths 6 and 10, reversing against copying): the plain encoder-decoder 0.84 and 0.23 against 0.44 "
        "and 0.01; the attention RNN 0.98 and 0.95 against 1.00 and 1.00; the Transformer 0.00 and 0.00 against 0.03 "
        "and 0.00 (at this budget it has not got going, as in section 3).",
        lambda r, fig: (
            [ex(r)["steps"], *MIDDLE_LENGTHS[:2]]
            + [
                v
                for k in ("rnn", "attention", "transformer")
                for v in at_lengths(r, f"{k}_reverse", MIDDLE_LENGTHS[:2]) + at_lengths(r, k, MIDDLE_LENGTHS[:2])
            ]
            + [3]
        ),
    ),
    (
        # "alone finds the reverse easier": easier_reversed; "the hardest part ... becomes the easiest": its first
        # symbol right more often than its last.
        "Averaged over the tested lengths, the plain encoder-decoder alone finds the reverse easier: its first output "
        "token is the last one it read, so the hardest part of copying (remembering the start) becomes the easiest. "
        "In the strings of 22 it writes the first symbol right in 0.80 of them and the last in 0.04: it still fails "
        "at their end.",
        lambda r, fig: reverse_task_by_position(r),
    ),
    (
        "The attention RNN reverses worse than it copies at every tested length (0.62 against 0.94 of the strings of "
        "2, 0.79 against 0.94 of those of 22)",
        lambda r, fig: [
            "worse"
            if np.mean(ex(r)["sequence_accuracy"]["attention_reverse"])
            < np.mean(ex(r)["sequence_accuracy"]["attention"])
            else "better",
            "every"
            if all(
                a < b
                for a, b in zip(
                    ex(r)["sequence_accuracy"]["attention_reverse"],
                    ex(r)["sequence_accuracy"]["attention"],
                    strict=True,
                )
            )
            else "not every",
            ex(r)["sequence_accuracy"]["attention_reverse"][0],
            ex(r)["sequence_accuracy"]["attention"][0],
            r["test_lengths"][0],
            ex(r)["sequence_accuracy"]["attention_reverse"][-1],
            ex(r)["sequence_accuracy"]["attention"][-1],
            r["test_lengths"][-1],
        ],
    ),
    (
        # "never spikes": no step's gradient norm above 10, the spike of section 6
        "At learning rate 0.5 the unclipped run trains (a loss of 0.004 over its last 100 steps) and its gradient "
        "norm never spikes (the largest is 4.0)",
        lambda r, fig: [
            0.5,
            r["unclipped_lr_0.5"]["last_100_loss"],
            100,
            "never" if r["unclipped_lr_0.5"]["largest_norm"] <= 10 else "sometimes",
            r["unclipped_lr_0.5"]["largest_norm"],
        ],
    ),
    # Self-test answers
    (
        "(128 numbers in the full run). A short string fits in it; a long one does not, so the plain model's share "
        "of strings copied exactly falls with the length.",
        lambda r, fig: [2 * r["hidden"]["full"], falls(r["sequence_accuracy"]["rnn"])],
    ),
    (
        "the smaller gaps are a few strings of 200.",
        lambda r, fig: r["test_rows"],
    ),
]

GIVEN = [
    ("# 01 ·", "the tutorial's number"),
    ("(Cho et al. 2014; Sutskever et al. 2014)", "citations"),
    ("neural machine translation was two recurrent networks", "the definition: an encoder and a decoder"),
    ("Bahdanau, Cho and Bengio (2015)", "citation"),
    ("their decoder scores every encoder state", "the definition of attention"),
    ("a different context for every output token", "the definition of attention"),
    ("This tutorial trains three architectures", "the models the script sets (KINDS)"),
    ("(Cho et al. 2014)", "citation"),
    ("(Bahdanau et al. 2015)", "citation"),
    ("(Vaswani et al. 2017)", "citation"),
    ("Vaswani et al. (2017)", "citation"),
    ("Luong, Pham and Manning (2015)", "citation"),
    ("Jain & Wallace 2019", "citation"),
    ("(Bengio et al. 1994; Pascanu et al. 2013)", "citations", 2),
    ("(Pascanu et al. 2013)", "citation"),
    ("Hochreiter & Schmidhuber 1997, Cho et al. 2014", "citations"),
    ("(Sutskever et al. 2014 reversed it)", "citation"),
    ("Luong et al. 2015)", "citation"),
    ("figure 2", "a figure of Bahdanau et al.", 2),
    ("{t-1}", "maths: the step before", 8),
    ("{j-1}", "maths: the position before", 5),
    ("$t-1$", "maths: the step before"),
    ("2. the attention weights are an alignment", "list item"),
    ("3. at initialisation", "list item"),
    ("4. an RNN's gradient can also explode", "list item"),
    ("5. a recurrent layer needs", "list item"),
    ("## 1. A task", "section number"),
    ("(every output token has exactly one source token to look at)", "the definition of a copy"),
    ("## 2. Three models", "section number"),
    ("is fed to it at every step", "the architecture (Cho et al.'s decoder)"),
    ("the same two GRUs", "the architecture: an encoder and a decoder"),
    ("attends over every encoder state", "the definition of attention"),
    ("two layers each", "the depth the script sets"),
    (
        "All three get the same batches, the same number of steps and the same optimiser (AdamW, and every gradient "
        "clipped to norm 1:",
        "the training setup the script sets (max_norm 1.0)",
    ),
    ("## 3. Accuracy", "section number"),
    ("A string counts as right when every token is right", "the definition of the score"),
    ("section 6 says why", "cross-reference"),
    ("## 4. The attention weights", "section number"),
    ("## 5. Vanishing", "section number"),
    ("## 6. Exploding", "section number"),
    ("## 7. Steps", "section number"),
    ("## 8. Do we", "section number"),
    (
        "Luong's RNN never sees where it looked",
        "the architecture: without input feeding its RNN reads the token alone",
    ),
    ("The three decoders below", "the decoders the script sets (ATTENTION_STYLES)"),
    ("so that all three get the same number of steps", "the budget the script sets (STYLE_STEPS)"),
    ("seed 0's weights and batches", "the seed the script sets"),
    ("The cell below trains the three decoders again", "the decoders the script sets (ATTENTION_STYLES)"),
    ("seed 0 is the run above, reused", "the seed the script reuses"),
    (
        "only where every seed of one is ahead of every seed of the other",
        "the definition of separated ranges (the claims' `separated`)",
    ),
    ("attention then reads all its states at once", "the architecture (one call over the target)"),
    ("With attention, every $h_j$ is one step from every output", "the architecture"),
    ("section 3 shows", "cross-reference"),
    ("(section 5)", "cross-reference"),
    ("the training loop of section 2", "cross-reference"),
    ("The models of section 2", "cross-reference"),
    ("section 2's figure", "cross-reference", 2),
    ("the gated cells of section 5", "cross-reference"),
    ("as section 7 does", "cross-reference"),
    ("section 7's GRU count", "cross-reference"),
    ("SGD run of section 6", "cross-reference"),
    ("(tutorial 08 measures", "cross-reference"),
    (
        "embeddings (02), attention as kernel regression (03), the score functions (04), positions (05), multi-head "
        "self- and cross-attention (06), the block assembled by hand (07), the cost of attention (08), the "
        "encoder-decoder step by step (09), a decoder-only language model built up from a bigram table (10), an "
        "encoder-decoder built by hand (11), and today's attention (12)",
        "cross-references",
    ),
    ("[02 · embeddings", "cross-reference"),
    ("Token ids: 0 = padding, 1 = start of the target (`<s>`), 2 = end", "the special tokens' ids (definitions)"),
    ("`2 * HIDDEN`", "the code's expression"),
    ("`hidden_size=4 * HIDDEN`", "the exercise's expression", 2),
    ("typically below 1:", "a Jacobian's norm below 1: the condition for vanishing"),
    ("$z$ near 1", "a gate's value near 1: what holding the state means"),
    (r"\operatorname{diag}(1 - h_t^2)", "the derivative of tanh"),
    ("(every singular value equal to $g$)", "the definition of g times an orthogonal matrix"),
    ("is the same for every $g$", "by construction: the loss is the sum of the last state"),
    ("below 1 wherever the state is not 0", "the slope of tanh"),
    ("a slope below 1 on top of", "the slope of tanh"),
    ("(all parameters as one vector)", "the definition of the norm clipping uses"),
    ("nearly 0 where the model", "the cross-entropy's derivative", 2),
    ("calls it at every step with $c = 1$", "the threshold the training loop sets"),
    ("twice on the same batches", "the two runs the script makes"),
    ("clipping at $c = 1$", "the threshold the SGD run sets"),
    ("clipped at 1 all the same", "the threshold of section 2"),
    ("clipping cut to 1", "the threshold of section 2"),
    ("A Transformer layer computes all $n$ positions", "the architecture"),
    ("PyTorch's profiler records every operation", "what a profiler is"),
    ("each of them handles all $n$ positions at once", "the architecture"),
    ("when every target token is known in advance", "teacher forcing (the definition)"),
    ("The Transformer decoder runs all target positions", "the architecture (causal mask)"),
    ("$n^2$", "maths: the quadratic cost"),
    ("## Exercises 1.", "exercise number"),
    ("would resize all three models", "the models the script sets"),
    ("Does it ever stop falling?", "an exercise's question"),
    ("? 2. Read", "exercise number"),
    ("? 3. Set", "exercise number"),
    ("? 4. Replace", "exercise number"),
    ("? 5. Count", "exercise number"),
    ("first. 6. Train the three models", "exercise number; the models the script sets"),
    ("? 7. Train", "exercise number"),
    (
        "## Answers The last cell measures answers 1–4 and 6 with one training run per model (seed 0,",
        "answer numbers; the seed the script sets",
    ),
    ("established. 1. The cell", "answer number"),
    ("where two runs differ by a few strings", "a caution about any two runs, not a measurement"),
    ("(all encoder states) grows with the source", "the architecture: one encoder state per source token"),
    ("the source. 2. The cell", "answer number"),
    ("turned round. 3. The cell", "answer number"),
    ("above). 4. The cell", "answer number"),
    ("compare them. 5. On", "answer number"),
    ("PyTorch. 6. The", "answer number"),
    ("as sure. 7. The cell", "answer number"),
    ("## Self-test 1.", "question number"),
    ("hardly does? 2.", "question number"),
    ("go? 3. Section 3 ranks", "question number; cross-reference"),
    ("firmer? 4. Section 5's figure", "question number; cross-reference"),
    ("themselves? 5.", "question number"),
    ("ones? 6.", "question number"),
    ("<summary>Answers</summary> 1.", "answer number"),
    ("the string. 2.", "answer number"),
    ("$\\tilde h_t$). 3.", "answer number"),
    ("pairs are). 4.", "answer number"),
    ("sequence. 5.", "answer number"),
    ("one-step path. 6.", "answer number"),
    ("each over all positions at once", "the architecture"),
]
