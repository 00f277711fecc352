"""The numbers of tutorial 04's prose, tied to its full run (docs/figures/04_results.json and 04_*.npz)."""

import math


def variance_row(r, d):
    (row,) = [row for row in r["variance"] if row["d"] == d]
    return row


def equal_weights(r, m):
    (row,) = [row for row in r["jacobian_equal_weights"] if row["m"] == m]
    return row


def one_value(values, decimals):
    """The common value of `values` as the prose rounds it (`decimals`), or a word saying they differ."""
    rounded = {round(v, decimals) for v in values}
    return rounded.pop() if len(rounded) == 1 else "differ"


def decreasing(values):
    return all(b < a for a, b in zip(values, values[1:], strict=False))


def increasing(values):
    return all(b > a for a, b in zip(values, values[1:], strict=False))


def toy_weight(r, sequence):
    """The weight of each real key of a toy sequence, the same for the additive and the dot-product score."""
    additive, dot = r["toy_weights_additive"][sequence][0], r["toy_weights_dot"][sequence][0]
    return dot if abs(additive - dot) < 1e-6 else float("nan")


def real_keys(r, sequence):
    """How many keys of a toy sequence get weight (both scores agree)."""
    counts = {sum(w > 0 for w in r[name][sequence]) for name in ("toy_weights_additive", "toy_weights_dot")}
    return counts.pop() if len(counts) == 1 else "differ"


def distinct(r):
    return r["distinct_keys"]


def at_scale(r, scale):
    (row,) = [row for row in distinct(r)["by_scale"] if row["scale"] == scale]
    return row


def top_key(weights):
    return max(range(len(weights)), key=weights.__getitem__)


def first_scale_where(r, condition):
    return next(row["scale"] for row in distinct(r)["by_scale"] if condition(row))


def below_from(r):
    """The width from which on (and only from which) the unscaled Jacobian is below the scaled one."""
    below = [row["d"] for row in r["variance"] if row["jacobian_dot"] < row["jacobian_scaled_dot"]]
    return below[0] if below and below == [row["d"] for row in r["variance"] if row["d"] >= below[0]] else "mixed"


def rank_row(r, head_width):
    (row,) = [row for row in r["rank_bilinear"] if row["head_width"] == head_width]
    return row


CLAIMS = [
    # The toy example: batch, keys, valid lengths and the means of the valid values, as the run measured them.
    (
        "## The toy example: two sequences, ten keys",
        lambda r, fig: [len(r["toy_weights_dot"]), len(r["toy_weights_dot"][0])],
    ),
    (
        "A batch of 2; each has one query and 10 key–value pairs. Only the first 2 keys of sequence 0 and the first "
        "6 of sequence 1 are real",
        lambda r, fig: [
            len(r["toy_weights_dot"]),
            len(r["toy_weights_dot"][0]),
            real_keys(r, 0),
            0,
            real_keys(r, 1),
            1,
        ],
    ),
    (
        "$(2, 3, 4, 5)$ and $(10, 11, 12, 13)$",
        lambda r, fig: [x for row in r["dot_output"] for x in row],
    ),
    ("`valid_lens = [2, 6]`", lambda r, fig: [real_keys(r, 0), real_keys(r, 1)]),
    (
        "both put weight $1/2$ on each of the two real keys of sequence 0 and $1/6$ on the six of sequence 1: the "
        "padded keys get exactly 0.",
        lambda r, fig: [
            1,
            1 / toy_weight(r, 0),
            real_keys(r, 0),
            0,
            1,
            1 / toy_weight(r, 1),
            real_keys(r, 1),
            1,
            max(r["toy_weights_dot"][0][2:] + r["toy_weights_dot"][1][6:]),
        ],
    ),
    # Where the additive and the dot-product scores differ.
    (
        "Give one query of width 8 ten distinct random keys (of norms 2.0 to 3.4)",
        lambda r, fig: [
            distinct(r)["width"],
            distinct(r)["keys"],
            min(distinct(r)["key_norms"]),
            max(distinct(r)["key_norms"]),
        ],
    ),
    (
        "differ already at $c = 1$: the scaled dot product puts 0.353 of the weight on key 4, the additive "
        "score 0.160.",
        lambda r, fig: [
            # "differ": by more than 0.05 on some key (else the scale it names is not returned)
            at_scale(r, 1)["scale"]
            if max(abs(a - d) for a, d in zip(at_scale(r, 1)["additive"], at_scale(r, 1)["dot"], strict=True)) > 0.05
            else "the same",
            max(at_scale(r, 1)["dot"]),
            top_key(at_scale(r, 1)["dot"]),
            at_scale(r, 1)["additive"][top_key(at_scale(r, 1)["dot"])],
        ],
    ),
    (
        "the keys keep their order (key 4 first at each of the 9 factors) and the weights sharpen without limit, from "
        "0.110 at $c = 0.25$ to 1.000 from $c = 4$ on.",
        lambda r, fig: [
            one_value([top_key(row["dot"]) for row in distinct(r)["by_scale"]], 0),
            len(distinct(r)["by_scale"]),
            max(distinct(r)["by_scale"][0]["dot"]),
            distinct(r)["by_scale"][0]["scale"],
            max(distinct(r)["by_scale"][-1]["dot"]),
            first_scale_where(r, lambda row: round(max(row["dot"]), 3) == 1),
        ],
    ),
    (
        "$\\pm\\lVert w\\rVert_1 = \\pm 1.59$ whatever the norms: no weight can exceed 0.73 among ten keys, the "
        "largest "
        "is 0.210 at $c = 64$, and the top key changes (key 4 up to $c = 2$, key 2 from $c = 4$ on)",
        lambda r, fig: [
            distinct(r)["additive_energy_l1"],
            distinct(r)["additive_largest_weight_possible"],
            distinct(r)["keys"],
            # "the largest": the largest weight of the additive score over every factor, and where
            max(max(row["additive"]) for row in distinct(r)["by_scale"]),
            max(distinct(r)["by_scale"], key=lambda row: max(row["additive"]))["scale"],
            top_key(distinct(r)["by_scale"][0]["additive"]),
            max(
                row["scale"]
                for row in distinct(r)["by_scale"]
                if top_key(row["additive"]) == top_key(distinct(r)["by_scale"][0]["additive"])
            ),
            top_key(distinct(r)["by_scale"][-1]["additive"]),
            first_scale_where(
                r, lambda row: top_key(row["additive"]) != top_key(distinct(r)["by_scale"][0]["additive"])
            ),
        ],
    ),
    # The sign of q·k.
    (
        "one query of width $d = 16$ and 8 keys: orthogonal ones, plus one at $q^\\top k = -4$, one at $+4$, or both "
        "($\\pm 1$ after the scaling)",
        lambda r, fig: [
            r["sign_settings"]["width"],
            r["sign_settings"]["keys"],
            -r["sign_settings"]["dot"],
            r["sign_settings"]["dot"],
            r["sign_scaled_score"],
        ],
    ),
    (
        "With uniform weights at 1/8 = 0.125, the key pointing away gets 0.050 (the orthogonal ones 0.136 each) and "
        "the key pointing towards the query 0.280 (the orthogonal ones 0.103).",
        lambda r, fig: [
            1,
            r["sign_settings"]["keys"],
            r["sign_uniform"],
            r["sign_away"]["key"],
            r["sign_away"]["orthogonal"],
            r["sign_towards"]["key"],
            r["sign_towards"]["orthogonal"],
        ],
    ),
    (
        "the key away gets 0.135 of the weight of the key towards ($e^{-2} = 0.135$), and the key towards 2.718 "
        "times the weight of an orthogonal key ($e^1$).",
        lambda r, fig: [
            r["sign_away_over_towards"],
            -2 * r["sign_scaled_score"],
            r["sign_away_over_towards_formula"],
            r["sign_towards_over_orthogonal"],
            r["sign_scaled_score"],
        ],
    ),
    ("now below uniform too (0.110)", lambda r, fig: r["sign_both"]["orthogonal"]),
    (
        "the weights move by less than $10^{-16}$ (float64 rounding)",
        lambda r, fig: [
            "less" if r["sign_shifted_max_difference"] < 1e-16 else "more",
            10,
            math.ceil(math.log10(r["sign_shifted_max_difference"])),
        ],
    ),
    # Why divide by √d.
    ("over 32 keys", lambda r, fig: math.exp(r["ln_keys"])),
    (
        "(uniform: $\\ln 32 = 3.47$ nats; one-hot: 0)",
        lambda r, fig: [math.exp(r["ln_keys"]), r["ln_keys"], 0],
    ),
    (
        "The variance grows in step with $d$ unscaled and stays at 1 scaled",
        lambda r, fig: [
            "grows" if increasing([row["var_unscaled"] for row in r["variance"]]) else "does not grow",
            # "stays at 1": even the width farthest from 1 rounds to it
            max((row["var_scaled"] for row in r["variance"]), key=lambda v: abs(v - 1)),
        ],
    ),
    (
        "Scaled, the entropy stays near $\\ln 32 - \\tfrac12$ and the Jacobian near 0.24 for every width. "
        "Unscaled, the "
        "entropy and the Jacobian both fall steadily,",
        lambda r, fig: [
            math.exp(r["ln_keys"]),
            one_value([row["jacobian_scaled_dot"] for row in r["variance"]], 2),
            "every"
            if one_value([row["jacobian_scaled_dot"] for row in r["variance"]], 2) != "differ"
            else "not every",
            "fall"
            if decreasing([row["entropy_dot"] for row in r["variance"]])
            and decreasing([row["jacobian_dot"] for row in r["variance"]])
            else "do not both fall",
        ],
    ),
    (
        "at $d = 4$ and $16$ it is 0.30, larger than the scaled 0.24, and only from $d = 64$ on is it below it (0.20, "
        "0.11, 0.07 at $d = 64, 256, 1024$).",
        lambda r, fig: [
            4,
            16,
            one_value([variance_row(r, 4)["jacobian_dot"], variance_row(r, 16)["jacobian_dot"]], 2),
            "larger"
            if all(variance_row(r, d)["jacobian_dot"] > variance_row(r, d)["jacobian_scaled_dot"] for d in (4, 16))
            else "not larger",
            variance_row(r, 4)["jacobian_scaled_dot"],
            below_from(r),
            variance_row(r, 64)["jacobian_dot"],
            variance_row(r, 256)["jacobian_dot"],
            variance_row(r, 1024)["jacobian_dot"],
            64,
            256,
            1024,
        ],
    ),
    (
        "$\\sqrt{31}/32 \\approx 0.17$ for all 32 keys, larger as the weight concentrates on fewer keys (0.5 for two, "
        "whose squared norm is 0.25), and 0 only at one key.",
        lambda r, fig: [
            31,
            32,
            r["jacobian_uniform_limit"],
            "all" if equal_weights(r, 32)["norm"] == r["jacobian_uniform_limit"] else "-",  # equal weights on 32 of 32
            32,
            equal_weights(r, 2)["norm"],
            2,
            equal_weights(r, 2)["squared_norm"],
            equal_weights(r, 1)["norm"],
        ],
    ),
    ("for equal weights on $m$ of the 32 keys:", lambda r, fig: len(r["jacobian_equal_weights"])),
    (
        "The norm peaks at two keys and falls slowly after them (0.47 at three, 0.43 at four, 0.33 at eight)",
        lambda r, fig: [
            max(r["jacobian_equal_weights"], key=lambda row: row["norm"])["m"],
            "falls" if decreasing([row["norm"] for row in r["jacobian_equal_weights"][1:]]) else "does not fall",
            *[x for m in (3, 4, 8) for x in (equal_weights(r, m)["norm"], m)],
        ],
    ),
    ("keep $d = 64$ and vary", lambda r, fig: 64),
    (
        "The curve rises from the uniform value, peaks at a spread of about 2.5 (most of the weight on a few keys), "
        "and "
        "falls towards 0",
        lambda r, fig: [
            "rises" if max(r["jacobian_sweep"]) > r["jacobian_sweep"][0] else "does not rise",
            r["jacobian_peak_sigma"],
            "falls" if r["jacobian_sweep"][-1] < max(r["jacobian_sweep"]) / 3 else "does not fall",
            r["jacobian_sweep"][-1],  # 0.035 at σ = 64: 0 to the prose's rounding
        ],
    ),
    (
        "Unscaled scores at $d = 4$ and $16$ ($\\sigma = 2, 4$) land near the peak",
        lambda r, fig: [4, 16, math.sqrt(4), math.sqrt(16)],
    ),
    (
        "from $d = 64$ ($\\sigma = 8$) they are on the falling side",
        lambda r, fig: [
            64,
            math.sqrt(64),
            "falling" if r["jacobian_peak_sigma"] < math.sqrt(64) else "rising",
        ],
    ),
    ("on the rising side of the peak", lambda r, fig: ["rising" if r["jacobian_peak_sigma"] > 1 else "falling"]),
    # What a bilinear score can express.
    (
        "Measured: $n = 32$ tokens of width $D = 64$ (random, fixed)",
        lambda r, fig: [r["rank_setup"]["tokens"], r["rank_setup"]["width"]],
    ),
    (
        "softmax of 32 random logits (their matrix has full rank)",
        lambda r, fig: (
            r["rank_target_logit_rank"] if r["rank_target_logit_rank"] == r["rank_setup"]["tokens"] else "-"
        ),
    ),
    (
        "The fitted bilinear scores have rank $d_k$ exactly at each of the 6 widths (read off in float64), and the "
        "divergence falls at each step up in $d_k$: 1.045 nats at $d_k = 1$ (uniform weights: 1.411), 0.359 at "
        "$d_k = 4$, 0.020 at $d_k = 16$ and 0.002 at $d_k = n = 32$,",
        lambda r, fig: [
            sum(row["score_rank"] == row["head_width"] for row in r["rank_bilinear"]),
            "falls" if decreasing([row["divergence"] for row in r["rank_bilinear"]]) else "does not fall",
            rank_row(r, 1)["divergence"],
            1,
            r["rank_uniform_divergence"],
            rank_row(r, 4)["divergence"],
            4,
            rank_row(r, 16)["divergence"],
            16,
            rank_row(r, 32)["divergence"],
            r["rank_setup"]["tokens"],
        ],
    ),
    (
        "The free score reaches 2.8e-5 with 2,048 parameters, as many as the bilinear score has at $d_k = 16$",
        lambda r, fig: [
            r["rank_free"]["divergence"],
            r["rank_free"]["parameters"],
            next(row["head_width"] for row in r["rank_bilinear"] if row["parameters"] == r["rank_free"]["parameters"]),
        ],
    ),
    # The summary.
    (
        "a row with no valid key gives zeros, never a uniform row or NaN",
        lambda r, fig: [
            "never"
            if r["library_empty_row"] == [0.0] * 4 and r["library_float16_empty_row"] == [0.0] * 4
            else "sometimes"
        ],
    ),
    (
        "Unscaled dot products grow with the width",
        lambda r, fig: ["grow" if increasing([row["var_unscaled"] for row in r["variance"]]) else "do not grow"],
    ),
    # The answers the last cell measures.
    (
        "4. The gap, averaged over the five widths, is about 0.33 for 8 keys, 0.46 for 32 and 0.48 for 128",
        lambda r, fig: [
            4,
            len(r["variance"]),
            r["answer_entropy_gap"]["8"],
            8,
            r["answer_entropy_gap"]["32"],
            32,
            r["answer_entropy_gap"]["128"],
            128,
        ],
    ),
    (
        "about $\\sigma \\approx 1.1$ (instead of 2.5), with a larger peak, about 0.36: with 8 keys",
        lambda r, fig: [
            r["answer_jacobian_peak_8_keys"][0],
            r["jacobian_peak_sigma"],
            r["answer_jacobian_peak_8_keys"][1],
            8,
        ],
    ),
    (
        "(0.5 at $m = 2$, 0.47 at $m = 3$)",
        lambda r, fig: [equal_weights(r, 2)["norm"], 2, equal_weights(r, 3)["norm"], 3],
    ),
    ("$\\sqrt 7/8 \\approx 0.33$", lambda r, fig: [7, 8, r["answer_uniform_limit_8_keys"]]),
]

GIVEN = [
    ("# 04 ·", "this tutorial's number"),
    ("Tutorial 03 used one fixed way", "cross-reference"),
    ("\\sum_{i=1}^m", "an equation's index"),
    ("hf-attention implements four (`attention_score=`)", "the library's registry of scores (a definition)"),
    ("(Vaswani et al. 2017)", "citation"),
    ("(T5, Raffel et al. 2020)", "citation"),
    ("(Bahdanau et al. 2015)", "citation"),
    ("the Gaussian kernel of tutorial 03. This tutorial runs two of them", "cross-reference; the two it runs"),
    ("d2l.ai §11.3", "citation (a book section)", 2),
    ("Every hf-attention layer ends in a *backend*", "the library's design (a definition)"),
    ("The backend reads three things from the layer", "the backend's arguments, listed after it"),
    ("All keys are equal (ones), so every real key scores the same", "the input the script sets, and its consequence"),
    ("shape it for every head and query", "what padding_mask does (a definition)"),
    ("build the 0/1 padding row", "a definition: 1 = real token, 0 = padding"),
    (
        "$W_q \\in \\mathbb R^{h\\times 20}$ and $W_k \\in \\mathbb R^{h\\times 2}$ here. Because of the two "
        "projections",
        "the toy's widths, set by the script; the two projections of the formula",
    ),
    ("`MultiHeadAttention(hidden_size=20, kv_input_size=2, ...)`", "a code example"),
    ("a 20 → 8 query projection", "the sizes the script sets (AdditiveScore(head_dim=2, attention_dim=8))"),
    ("only the factor $1/\\sqrt d$", "a definition"),
    ("### Where the two scores differ", "the two scores of the section (a title)"),
    ("a common factor $c$ to change their norms. The two rows", "the two rows of the figure (additive, dot)"),
    ("multiplies each dot product by $c^2$", "the math"),
    ("writes $-10^6$ into", "the classic code's constant"),
    ("sets masked weights to exactly 0.", "a definition of the backend"),
    ("valid lengths $[2, 3]$ (one per sequence), and with per-query valid lengths $[[1, 3], [2, 4]]$", "the inputs"),
    ("With valid length 0 the classic softmax sees equal scores ($-10^6$ everywhere)", "the input; the constant"),
    ("And in float16, $-10^6$ is not representable", "the constant"),
    ("(torch 2.15 goes further and refuses to write the number $-10^6$ into", "a version; the constant"),
    ("the query's way, 0 that it is orthogonal", "a definition"),
    ("so that the best key scores 0", "arithmetic: +s shifted by -s"),
    ("a score *lower than the others* is", "the conclusion of the math: only differences of scores matter"),
    ("with mean 0 and variance 1, each product $q_j k_j$ has mean 0 and variance $E[q_j^2]E[k_j^2] = 1$", "the math"),
    ("\\mathrm{Var}\\!\\left(q^\\top k/\\sqrt d\\right) = 1.$$", "the math"),
    ("$\\mathrm{diag}(p) - pp^\\top$ is 0 when", "the math"),
    ('`scaling=1` ("dot") and `scaling=1/sqrt(d)` ("scaled_dot")', "the code's arguments"),
    ("$\\sum_i p_i^2 - 2\\sum_i p_i^3 + (\\sum_i p_i^2)^2$", "the math"),
    ("that is $(m-1)/m^2$", "the math"),
    ("$\\sqrt{m-1}/m$", "the math", 2),
    ("and $\\sigma = 1$ (scaled)", "the definition of the scaling"),
    ("(64 or 128 per head)", "the head widths of common models"),
    ("The argument for $1/\\sqrt d$", "a definition"),
    ("a target pattern whose every row is a", "how the target is made (softmax of random logits, row by row)"),
    ("scaled, $\\sigma = 1$ at every width", "the definition of the scaling"),
    ("(Bhojanapalli et al. 2020,", "citation"),
    ("Tay et al. 2021)", "citation"),
    ("($2 \\cdot 64 \\cdot 16$). In real models $d_k$ is 64 or 128", "arithmetic; the head widths of common models"),
    ("so the bound holds for every head", "the rank bound (the math), for every head"),
    ("**Next:** [05 · positional encodings](05_positional_encodings.py)", "cross-reference"),
    ("1. In the toy example, replace the equal keys by random ones (`keys = torch.randn(2, 10, 2)`)", "an exercise"),
    ("2. Run the classic `d2l_masked_softmax` on a row with valid length 0", "an exercise"),
    ('3. Build the mask "query $i$ may see keys $0 \\dots i$" for 4 queries and 4 keys', "an exercise"),
    ('`hf_attention.modeling.masks.causal_mask(4, 4, 0, torch.device("cpu"))`', "an exercise's code"),
    ("4. The scaled entropy sits near $\\ln 32 - \\tfrac12$. Set `n_keys` to 8 and to 128", "an exercise"),
    ("5. In the sweep, where is the peak of the Jacobian for `n_keys = 8`?", "an exercise"),
    ("1. No: with different keys", "an answer's number"),
    (
        "the padded keys get weight exactly 0, each row sums to 1, and every output is a convex combination",
        "what masking guarantees",
    ),
    ("2. A uniform row (0.25 each), not NaN", "an answer: 1/4 for four equal scores"),
    (
        "so $-10^6$ is representable (rounded to $-999424$) and the softmax sees four equal scores",
        "the constant, its bfloat16 rounding; the exercise's 4 keys",
    ),
    ("float16's largest magnitude is 65504, so there $-10^6$ becomes", "float16's range (a definition)"),
    ("3. `torch.arange(4)[None, :] <= torch.arange(4)[:, None]`", "an answer's code"),
    ("`causal_mask(...)[0, 0]`", "an answer's code"),
    ("valid length of $i + 1$.", "the math"),
    ("$\\sigma^2/2 = 1/2$ from below", "the math"),
    ("$s_i \\sim N(0, \\sigma^2)$", "the math"),
    ("n\\,e^{\\sigma^2/2}$", "the math"),
    ("mean score is $\\sigma^2$", "the math"),
    ("\\ln n - \\sigma^2/2$. 5. At", "the math; the answer's number"),
    ("($\\sigma = 1$) sit almost at the peak", "the definition of the scaling"),
    ("(the classic $-10^6$ version returns", "the classic code's constant"),
]
