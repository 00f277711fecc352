"""The numbers of tutorial 05's prose, tied to its full run (docs/figures/05_results.json and 05_*.npz)."""

import math

import numpy as np


def thousands(x, places=0):
    """35,000 → ['35', '000']: how the prose writes a number with a thin space between thousands (whole numbers)."""
    return f"{round(x, places):,.0f}".split(",")


def f2(x):
    return x


SCHEMES = ("sinusoidal", "learned", "rotary", "alibi", "relative")


def seeds(r, scheme, span):
    """The accuracy of each seed of `scheme` over `span` (trained_lengths, longer, last_16)."""
    return r["extrapolation_by_seed"][scheme][span]


def mean_range(r, scheme, span):
    """[mean, lowest, highest] over the seeds, as the prose writes 'mean (lowest to highest)'."""
    values = seeds(r, scheme, span)
    return [sum(values) / len(values), min(values), max(values)]


def above(r, span, higher, lower):
    """True when every seed of `higher` beats every seed of `lower` over `span`: the ranges do not overlap."""
    return min(seeds(r, higher, span)) > max(seeds(r, lower, span))


def overlap(r, span, a, b):
    return not above(r, span, a, b) and not above(r, span, b, a)


def by_seed_at(fig, scheme, position):
    """The accuracy of each seed of `scheme` at one test position (from the figure's data)."""
    data = fig("05_extrapolation")
    (index,) = [i for i, p in enumerate(data["positions"].tolist()) if p == position]
    return data[f"{scheme}_by_seed"][:, index].tolist()


def last_right_every_seed(fig, scheme, first, threshold=0.95):
    """The last position up to which every seed of `scheme` stays at or above `threshold`."""
    data = fig("05_extrapolation")
    positions = data["positions"].tolist()
    lowest = dict(zip(positions, data[f"{scheme}_by_seed"].min(0).tolist(), strict=True))
    return last_right(lowest, first, threshold)


def extrapolation_accuracy(fig, scheme):
    """Accuracy by position (from the figure's data), as a dict position → accuracy."""
    data = fig("05_extrapolation")
    return dict(zip(data["positions"].tolist(), data[scheme].tolist(), strict=True))


def last_right(accuracy, first, threshold=0.95):
    """The last position from `first` on up to which the accuracy stays at or above `threshold`."""
    position = first - 1
    while accuracy.get(position + 1, 0.0) >= threshold:
        position += 1
    return position


def setup(r, key):
    return str(r["extrapolation_setup"][key])


def new_rows_peak(fig, r):
    """Rows train_length … 23 of the position-position panel: the key where all of them peak (one key, or 'differ')."""
    matrix = fig("05_score_terms")["position_position"]
    start = r["extrapolation_setup"]["train_length"]
    peaks = {int(np.argmax(matrix[i, : i + 1])) for i in range(start, matrix.shape[0])}
    return str(peaks.pop()) if len(peaks) == 1 else "differ"


def trained_on_32(r, scheme):
    accuracy = r["answer_trained_on_32"][scheme]  # per position 0 … 63
    return {p: a for p, a in enumerate(accuracy) if p >= r["extrapolation_setup"]["offset"]}


CLAIMS = [
    # The sinusoidal table.
    ("(a period of $2\\pi \\approx 6.3$ positions)", lambda r, fig: ["2", r["sinusoidal_periods"][0]]),
    (
        "approach $2\\pi \\cdot 10000 \\approx 62\\,832$ positions. For the $d = 32$ table drawn here it is about 35 "
        "000 "
        "(and about 61 000 for $d = 512$).",
        lambda r, fig: [
            "2",
            "10000",
            *thousands(r["large_d_limit_period"]),
            str(len(r["sinusoidal_periods"]) * 2),
            *thousands(r["slowest_period"], -3),
            *thousands(2 * math.pi * 10000 ** (510 / 512), -3),  # the formula of the text, for d = 512
            "512",
        ],
    ),
    (
        "Checked on the library's table for positions 0 … 199 and offsets 1, 5, 20:",
        lambda r, fig: ["0", "199", "1", "5", "20"] if r["rotation_max_error"] < 1e-5 else "fails",
    ),
    # The five schemes.
    (
        "8 exact small distances per direction, then logarithmically wider buckets up to 128",
        lambda r, fig: (
            [str(r["t5_buckets_at"]["-8"]), "128"]  # distances 0 … 7 have buckets 0 … 7 of their own
            if r["t5_buckets_at"]["-7"] == 7 and r["t5_buckets_at"]["-128"] == r["t5_buckets_at"]["-160"]
            else "not so"
        ),
    ),
    # Order-blindness.
    (
        "Take a small random encoder (2 layers, 4 heads, width 32, no dropout), feed it 12 tokens",
        lambda r, fig: [str(r["order_blindness_setup"][k]) for k in ("layers", "heads", "width", "tokens")],
    ),
    ("standard deviation of 0.2, which", lambda r, fig: r["order_blindness_setup"]["initializer_range"]),
    (
        "Every positional scheme breaks that.",
        lambda r, fig: (
            "every" if all(d > 0.1 for s, d in r["permutation_difference"].items() if s != "none") else "not every"
        ),
    ),
    # Extrapolation.
    ("output the token **three places back**", lambda r, fig: r["extrapolation_setup"]["offset"]),
    (
        "from a vocabulary of 16; the first three positions",
        lambda r, fig: [setup(r, "vocab"), r["extrapolation_setup"]["offset"]],
    ),
    (
        "(`HFAttentionForCausalLM`, width 64, 4 heads, causal attention, no dropout) is trained with each scheme on "
        "sequences of 16 tokens, then tested on sequences of 64: positions 3-15 are the lengths it was trained on, "
        "positions 16-63 are new. For the learned table, `max_position_embeddings` is 64 so that the long inputs run; "
        "its rows 16-63 keep their random initialisation, since no training input reaches them. Chance is "
        "$1/16$.",
        lambda r, fig: [
            setup(r, "width"),
            setup(r, "heads"),
            setup(r, "train_length"),
            setup(r, "test_length"),
            setup(r, "offset"),
            str(r["extrapolation_setup"]["train_length"] - 1),
            setup(r, "train_length"),
            str(r["extrapolation_setup"]["test_length"] - 1),
            setup(r, "test_length"),
            setup(r, "train_length"),
            str(r["extrapolation_setup"]["test_length"] - 1),
            "1",
            1 / r["extrapolation_chance"],
        ],
    ),
    (
        "Each scheme is trained from 4 seeds;",
        lambda r, fig: r["extrapolation_setup"]["seeds"],
    ),
    (
        "every scheme but ALiBi learns the task in the full run (500 steps): 1.00 with each seed. ALiBi does not: "
        "0.66 "
        "(0.65 to 0.68).",
        lambda r, fig: [
            "every"
            if [s for s in SCHEMES if min(seeds(r, s, "trained_lengths")) < 0.99] == ["alibi"]
            else "not every",
            r["extrapolation_setup"]["steps"],
            min(min(seeds(r, s, "trained_lengths")) for s in SCHEMES if s != "alibi"),
            *mean_range(r, "alibi", "trained_lengths"),
        ],
    ),
    (
        "at chance (0.06) from the very first new position on: 0.05 to 0.08 over positions 16-22, and 0.12 (0.11 to "
        "0.13) over positions 16-63.",
        lambda r, fig: [
            r["extrapolation_chance"],
            min(a for p, a in extrapolation_accuracy(fig, "sinusoidal").items() if 16 <= p <= 22),
            max(a for p, a in extrapolation_accuracy(fig, "sinusoidal").items() if 16 <= p <= 22),
            16,
            "22",
            *mean_range(r, "sinusoidal", "longer"),
            setup(r, "train_length"),
            str(r["extrapolation_setup"]["test_length"] - 1),
        ],
    ),
    ("has not seen its rows past 15;", lambda r, fig: str(r["extrapolation_setup"]["train_length"] - 1)),
    (
        "at chance, 0.07 (0.06 to 0.08) over positions 16-63: rows 16-63 are",
        lambda r, fig: [
            *mean_range(r, "learned", "longer"),
            setup(r, "train_length"),
            str(r["extrapolation_setup"]["test_length"] - 1),
            setup(r, "train_length"),
            str(r["extrapolation_setup"]["test_length"] - 1),
        ],
    ),
    (
        "right up to position 21 with each seed (0.98 or more), then it drops at once, to 0.36 to 0.74 at position 22 "
        "depending on the seed: 0.37 (0.30 to 0.51) over positions 16-63 and 0.13 (0.08 to 0.21) over the last 16.",
        lambda r, fig: [
            last_right_every_seed(fig, "rotary", r["extrapolation_setup"]["train_length"]),
            min(min(by_seed_at(fig, "rotary", p)) for p in range(16, 22)),
            # "drops": every seed loses more than a third at the next position
            "drops" if max(by_seed_at(fig, "rotary", 22)) < 0.8 else "holds",
            min(by_seed_at(fig, "rotary", 22)),
            max(by_seed_at(fig, "rotary", 22)),
            last_right_every_seed(fig, "rotary", r["extrapolation_setup"]["train_length"]) + 1,
            *mean_range(r, "rotary", "longer"),
            setup(r, "train_length"),
            str(r["extrapolation_setup"]["test_length"] - 1),
            *mean_range(r, "rotary", "last_16"),
            16,
        ],
    ),
    (
        "(Trained on 32 tokens, it stays right up to position 40: exercise 6.)",
        lambda r, fig: ["32", str(last_right(trained_on_32(r, "rotary"), 32)), "6"],
    ),
    (
        "0.45 (0.43 to 0.46) over positions 16-63, declining with the position to 0.28 (0.27 to 0.29) over the "
        "last 16",
        lambda r, fig: [
            *mean_range(r, "relative", "longer"),
            setup(r, "train_length"),
            str(r["extrapolation_setup"]["test_length"] - 1),
            *mean_range(r, "relative", "last_16"),
            16,
        ],
    ),
    (
        "0.39 (0.37 to 0.41) over positions 16-63, well below its 0.66 on the trained lengths, then nearly level, "
        "0.37 "
        "(0.36 to 0.39) over the last 16.",
        lambda r, fig: [
            *mean_range(r, "alibi", "longer"),
            setup(r, "train_length"),
            str(r["extrapolation_setup"]["test_length"] - 1),
            r["extrapolation"]["alibi"]["trained_lengths"],
            # "nearly level": the last 16 positions within 0.05 of all new ones
            *(
                mean_range(r, "alibi", "last_16")
                if abs(r["extrapolation"]["alibi"]["last_16"] - r["extrapolation"]["alibi"]["longer"]) < 0.05
                else ["not level"]
            ),
            16,
        ],
    ),
    (
        "over positions 16-63, T5's buckets are above ALiBi, ALiBi above the sinusoidal table and the sinusoidal "
        "table "
        "above the learned one; rotary's range (0.30 to 0.51) overlaps both T5's and ALiBi's, so it ranks only above "
        "the two absolute schemes. Over the last 16 positions ALiBi comes first and T5's buckets second, ahead of "
        "rotary and sinusoidal, whose ranges overlap.",
        lambda r, fig: (
            [
                setup(r, "train_length"),
                str(r["extrapolation_setup"]["test_length"] - 1),
                min(seeds(r, "rotary", "longer")),
                max(seeds(r, "rotary", "longer")),
                len(("sinusoidal", "learned")),
                16,
            ]
            if above(r, "longer", "relative", "alibi")
            and above(r, "longer", "alibi", "sinusoidal")
            and above(r, "longer", "sinusoidal", "learned")
            and overlap(r, "longer", "rotary", "relative")
            and overlap(r, "longer", "rotary", "alibi")
            and above(r, "longer", "rotary", "sinusoidal")
            and all(above(r, "last_16", "alibi", s) for s in SCHEMES if s != "alibi")
            and all(above(r, "last_16", "relative", s) for s in ("rotary", "sinusoidal", "learned"))
            and overlap(r, "last_16", "rotary", "sinusoidal")
            else "another order"
        ),
    ),
    (
        "it does not extrapolate (0.12, against the learned table's 0.07 and chance at 0.06)",
        lambda r, fig: [
            r["extrapolation"]["sinusoidal"]["longer"],
            r["extrapolation"]["learned"]["longer"],
            r["extrapolation_chance"],
        ],
    ),
    (
        "The relative schemes come nearer, but none of them extrapolates here",
        # "none": no scheme keeps within 0.1 of its accuracy on the trained lengths past them
        lambda r, fig: (
            "none" if all(e["longer"] < e["trained_lengths"] - 0.1 for e in r["extrapolation"].values()) else "some"
        ),
    ),
    (
        "the last 16 positions here agree on ALiBi first and T5's buckets second, and no more (and ALiBi is first "
        "for a "
        "task it never learned).",
        lambda r, fig: [16, "never" if max(seeds(r, "alibi", "trained_lengths")) < 0.9 else "once"],
    ),
    (
        "rotary's accuracy varied between seeds by more than the gap between T5's buckets and ALiBi",
        lambda r, fig: (
            "more"
            if max(seeds(r, "rotary", "longer")) - min(seeds(r, "rotary", "longer"))
            > r["extrapolation"]["relative"]["longer"] - r["extrapolation"]["alibi"]["longer"]
            else "less"
        ),
    ),
    # The four terms of the score.
    (
        "(a standard deviation of 3.6 against 0.1 to 0.5)",
        lambda r, fig: [
            r["score_terms"]["position-position"]["std"],
            min(t["std"] for n, t in r["score_terms"].items() if n != "position-position"),
            max(t["std"] for n, t in r["score_terms"].items() if n != "position-position"),
        ],
    ),
    (
        "For $W = I$ exactly (share 1.000000), for a random $W$ hardly (0.03).",
        lambda r, fig: [r["offset_share_identity_W"], f2(r["offset_share_random_W"])],
    ),
    (
        "Over the positions it was trained on, 80 to 95% of the term is a function of $i - j$, and in every row the "
        "largest position score is on the key three places back;",
        lambda r, fig: [
            100 * min(r["position_position_offset_share"]["trained_positions"]),
            100 * max(r["position_position_offset_share"]["trained_positions"]),
            "every" if r["position_position_peak_at_offset"]["trained_positions"] == [1.0] * 4 else "not every",
            r["extrapolation_setup"]["offset"],
        ],
    ),
    (
        "over positions 16-63 only about 30% is, and the peak is three back in 2 to 8% of the rows.",
        lambda r, fig: [
            setup(r, "train_length"),
            str(r["extrapolation_setup"]["test_length"] - 1),
            # "about": the mean over the heads, to the nearest 10%
            round(100 * np.mean(r["position_position_offset_share"]["new_positions"]), -1),
            r["extrapolation_setup"]["offset"],
            100 * min(r["position_position_peak_at_offset"]["new_positions"]),
            100 * max(r["position_position_peak_at_offset"]["new_positions"]),
        ],
    ),
    (
        "below row 15 of the position–position panel, rows 16-23 all peak at key 12 instead of three places back.",
        lambda r, fig: [
            str(r["extrapolation_setup"]["train_length"] - 1),
            setup(r, "train_length"),
            str(fig("05_score_terms")["position_position"].shape[0] - 1),
            "all" if new_rows_peak(fig, r) != "differ" else "not all",
            new_rows_peak(fig, r),
            r["extrapolation_setup"]["offset"],
        ],
    ),
    # The answers the last cell measures.
    (
        "1. About 54 410 positions ($2\\pi \\cdot 10000^{126/128}$), 87% of the limit 62 832;",
        lambda r, fig: [
            "1",
            *thousands(r["answer_slowest_period_128"]),
            "2",
            "10000",
            "126",
            "128",
            100 * r["answer_slowest_period_128"] / r["large_d_limit_period"],
            *thousands(r["large_d_limit_period"]),
        ],
    ),
    (
        "2. All three are 11.777 (to float rounding)",
        lambda r, fig: [
            2,
            "All" if max(r["answer_gram_offset_5"]) - min(r["answer_gram_offset_5"]) < 1e-4 else "Not all",
            len(r["answer_gram_offset_5"]),
            np.mean(r["answer_gram_offset_5"]),
        ],
    ),
    (
        "3. 8 heads: $2^{-1}, 2^{-2}, \\dots, 2^{-8}$. 6 heads: 0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125.",
        lambda r, fig: [
            "3",
            "8",
            "2",
            math.log2(r["answer_alibi_slopes"]["8"][0]),
            "2",
            math.log2(r["answer_alibi_slopes"]["8"][1]),
            "2",
            math.log2(r["answer_alibi_slopes"]["8"][-1]),
            "6",
            *list(r["answer_alibi_slopes"]["6"]),
        ],
    ),
    (
        "4. $+9 \\to 24$, $-9 \\to 8$, $+50 \\to 29$, $-50 \\to 13$, $+100 \\to 31$, $-100 \\to 15$.",
        lambda r, fig: [
            "4",
            *[x for d, b in r["answer_buckets"].items() for x in (d[1:], str(b))],
        ],
    ),
    (
        "6. Positions 32-40 stay right (1.00 at each), then the accuracy falls (0.64 on average over positions 41-63; "
        "500 steps, one seed): as with 16 tokens",
        lambda r, fig: [
            "6",
            "32",
            str(last_right(trained_on_32(r, "rotary"), 32)),
            f2(
                min(
                    a
                    for p, a in trained_on_32(r, "rotary").items()
                    if 32 <= p <= last_right(trained_on_32(r, "rotary"), 32)
                )
            ),
            "falls"
            if max(a for p, a in trained_on_32(r, "rotary").items() if p > last_right(trained_on_32(r, "rotary"), 32))
            < 0.95
            else "holds",
            f2(
                np.mean(
                    [
                        a
                        for p, a in trained_on_32(r, "rotary").items()
                        if p > last_right(trained_on_32(r, "rotary"), 32)
                    ]
                )
            ),
            str(last_right(trained_on_32(r, "rotary"), 32) + 1),
            str(r["extrapolation_setup"]["test_length"] - 1),
            setup(r, "steps"),
            setup(r, "train_length"),
        ],
    ),
    (
        "(16 → 21, 32 → 40)",
        lambda r, fig: [
            setup(r, "train_length"),
            str(last_right(extrapolation_accuracy(fig, "rotary"), r["extrapolation_setup"]["train_length"])),
            "32",
            str(last_right(trained_on_32(r, "rotary"), 32)),
        ],
    ),
    (
        "model trained on 32 tokens still falls to 0.08 at position 32,",
        lambda r, fig: [
            "32",
            "falls" if trained_on_32(r, "sinusoidal")[32] < 0.2 < trained_on_32(r, "sinusoidal")[31] else "holds",
            f2(trained_on_32(r, "sinusoidal")[32]),
            "32",
        ],
    ),
    (
        "unchanged (by less than $10^{-6}$)",
        lambda r, fig: ["less" if r["answer_decoder_last_output_change"]["1"] < 1e-6 else "more", 10, -6],
    ),
    (
        "with 2 layers it changes (by up to 0.9 in a component)",
        lambda r, fig: ["2", r["answer_decoder_last_output_change"]["2"]],
    ),
    (
        "7. 1 to rounding (within $10^{-14}$ of it,",
        lambda r, fig: (
            ["7", r["answer_block_W_offset_share"], 10, -14]
            if abs(1 - r["answer_block_W_offset_share"]) < 1e-14
            else "not 1"
        ),
    ),
]

GIVEN = [
    ("# 05 · Positional encodings", "this tutorial's number"),
    ("compares every token with every other token", "the definition of self-attention"),
    ("then the five ways hf-attention puts position back in", "the library's schemes (a definition)"),
    ("It ends with two measurements", "the sections that follow"),
    ("The lowest bit flips at every step,", "binary counting"),
    ("does the same with smooth waves", "sines are smooth (a definition)"),
    ("a row as a whole is different for every position. Smooth values", "a property of sines of distinct frequencies"),
    ("the same way at every position.", "the math: M_k does not depend on p"),
    ("pattern constant along every diagonal. ## The five schemes", "the math above; the five schemes of the table"),
    ("cannot tell the two orders apart", "the original and the shuffled order"),
    ("## Longer than trained", "a title (the question)"),
    ("Two claims about the sinusoidal table", "the claims quoted, listed after it"),
    ("work on inputs longer than any it was trained on", "a quoted claim"),
    (
        "it cannot extrapolate at all: its rows past the training length are never trained",
        "a quoted claim; no input reaches them",
    ),
    ("at every position, output the token", "the task (a definition)"),
    ("Its penalty grows with the distance in every head", "the definition of ALiBi's bias"),
    ("but a query at position 30 sees keys up to 30 places back", "arithmetic: an example position"),
    ("the offsets past 15 fall into buckets", "arithmetic: training sequences of 16 tokens have offsets 0-15"),
    ("and take a growing share of the weight", "the consequence (more unseen offsets at later positions)"),
    ("So the two claims about the sinusoidal table", "the claims quoted above"),
    ("although it has a row for every position", "the table's definition"),
    ("the product expands into four terms", "the math"),
    ("The first compares what two tokens are, the last where they are, and the two middle ones", "the math"),
    ("the four terms of every head", "what is measured (a description)"),
    ("The four terms add up to", "the math (the numbers above measure it)"),
    ("and nothing made it do so on rows it never saw", "arithmetic: training inputs reach rows 0-15 only"),
    ("the slowest frequency is $10000^{-(d-2)/d}$, which approaches $10^{-4}$ only as $d$ grows", "the math"),
    (
        "take the four slopes of the nearest lower power of two and fill up with every other slope",
        "the rule of Press et al.",
    ),
    ("so the list is two interleaved geometric sequences", "the rule of Press et al."),
    ("commutes with every rotation", "the math"),
    ("the first row it never saw", "arithmetic: sequences of 32 tokens have positions 0-31"),
    ("Vaswani et al. 2017 §3.5", "citation"),
    ("BERT, GPT-2", "a model's name"),
    ("Su et al. 2021 (RoFormer)", "citation"),
    ("Press et al. 2022 (causal", "citation"),
    ("Raffel et al. 2020 (T5)", "citation"),
    (
        "$$PE(p, 2i) = \\sin\\left(p / 10000^{2i/d}\\right),\\qquad PE(p, 2i+1) = \\cos\\left(p / "
        "10000^{2i/d}\\right).$$",
        "the definition",
    ),
    (
        "$\\omega_i = 10000^{-2i/d}$, $i = 0 \\dots d/2 - 1$; the frequencies fall geometrically from 1",
        "the definition",
    ),
    (
        "towards $10^{-4}$. The slowest pair, $i = d/2 - 1$, has the frequency $10000^{-(d-2)/d}$ and the period "
        "$2\\pi \\cdot 10000^{(d-2)/d}$",
        "the definition",
    ),
    ("row 1 holds", "the definition"),
    ("$\\omega_i = \\operatorname{atan2}(PE(1, 2i), PE(1, 2i+1))$", "the definition"),
    ("Write the positions 0, 1, 2, … in binary.", "counting"),
    ("the next every 2 steps, the next every 4", "binary counting"),
    ("slower by a factor 2.", "binary counting"),
    ("$10000^{2/d}$ per column pair instead of 2.", "the definition; binary counting"),
    ("$(PE(p+k, 2i), PE(p+k, 2i+1))$", "the definition"),
    ("Press et al. (2022) define", "citation"),
    ("$2^{-8/H}, 2^{-16/H}, \\dots$", "the definition of ALiBi's slopes"),
    ("weights of standard deviation 0.02", "the usual initialisation (the library's default initializer_range)"),
    ("since token 5 sees 5 tokens and token 1 sees one", "an example of the causal mask"),
    ("Press et al. (2022) found on language models", "citation"),
    ("each diagonal explains: 1 when it depends", "the definition of the share"),
    ("(exercise 7)", "cross-reference"),
    (
        "**Next:** [06 · multi-head, self- and cross-attention, masks](06_multihead_self_cross_masks.py)",
        "cross-reference",
    ),
    ("1. Set `WIDTH = 128`.", "an exercise"),
    ("limit $2\\pi \\cdot 10000$? 2. Check on", "an exercise"),
    ("$PE(i)\\cdot PE(i+5)$ is the same for $i = 0, 10, 30$.", "an exercise"),
    ("3. Print `alibi_slopes(8)` and `alibi_slopes(6)`.", "an exercise"),
    ("4. With `relative_position_bucket(..., bidirectional=True, num_buckets=32, max_distance=128)`", "an exercise"),
    ("the distances $+9, -9, +50, -50, +100, -100$ fall into? 5. Repeat", "an exercise"),
    (
        "shuffle only the 11 before it: is the last position's output unchanged with 1 layer? With 2? 6. Train",
        "an exercise",
    ),
    ("on sequences of 32 tokens instead of 16 (`TRAIN_LENGTH = 32`, 500 steps) and test on 64 again.", "an exercise"),
    ("the sinusoidal one do at position 32? 7. Build a $W$ out of 2 × 2 blocks", "an exercise"),
    ("width 64) and measure", "an exercise"),
    ("Why is it what it is? 8. Which terms", "an exercise"),
    ("here $\\sum_{i=0}^{15} \\cos(5\\omega_i)$.", "the formula for d = 32 and offset 5"),
    ("the next power (8 heads)", "the rule of Press et al."),
    ("For a head count that is not a power of two", "the rule of Press et al."),
    (
        "Positive distances use buckets 16-31 and negative ones 0-15; beyond the 8 exact distances, the buckets are "
        "logarithmic, so 9 and 50 are close in bucket index, and everything past about 128 lands",
        "the definition of T5's buckets (answer 4 lists the measured ones)",
    ),
    ("with 1 layer the last output", "the exercise's setting"),
    ("their biases stay near their initial 0", "the library's initialisation of the bias table"),
    ("lands in the last bucket of its direction. 5. No:", "an answer's number"),
    ("towards that form. 8. $q_i", "an answer's number"),
]
