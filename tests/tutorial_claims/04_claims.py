"""The numbers of tutorial 04's prose, tied to its full run (docs/figures/04_results.json and 04_*.npz)."""

import math


def f2(x):
    return f"{x:.2f}"


def f3(x):
    return f"{x:.3f}"


def variance_row(r, d):
    (row,) = [row for row in r["variance"] if row["d"] == d]
    return row


def equal_weights(r, m):
    (row,) = [row for row in r["jacobian_equal_weights"] if row["m"] == m]
    return row


CLAIMS = [
    # The toy example: batch, keys, valid lengths and the means of the valid values, as the run measured them.
    (
        "A batch of 2; each has one query and 10 key–value pairs. Only the first 2 keys of sequence 0 and the first "
        "6 of "
        "sequence 1 are real",
        lambda r, fig: [
            str(len(r["toy_weights_dot"])),
            str(len(r["toy_weights_dot"][0])),
            str(sum(w > 0 for w in r["toy_weights_dot"][0])),
            "0",
            str(sum(w > 0 for w in r["toy_weights_dot"][1])),
            "1",
        ],
    ),
    (
        "$(2, 3, 4, 5)$ and $(10, 11, 12, 13)$",
        lambda r, fig: [f"{x:.0f}" for row in r["dot_output"] for x in row],
    ),
    (
        "`valid_lens = [2, 6]`",
        lambda r, fig: [str(sum(w > 0 for w in row)) for row in r["toy_weights_dot"]],
    ),
    (
        "both put weight $1/2$ on each of the two real keys of sequence 0 and $1/6$ on the six of sequence 1: the "
        "padded "
        "keys get exactly 0.",
        lambda r, fig: [
            "1",
            f"{1 / r['toy_weights_dot'][0][0]:.0f}",
            "0",
            "1",
            f"{1 / r['toy_weights_dot'][1][0]:.0f}",
            "1",
            f"{max(r['toy_weights_dot'][0][2:] + r['toy_weights_dot'][1][6:]):.0f}",
        ],
    ),
    # The sign of q·k.
    (
        "one query of width $d = 16$ and 8 keys: orthogonal ones, plus one at $q^\\top k = -4$, one at $+4$, or both "
        "($\\pm 1$ after the scaling)",
        lambda r, fig: [
            str(r["sign_settings"]["width"]),
            str(r["sign_settings"]["keys"]),
            f"{r['sign_settings']['dot']:.0f}",
            f"{r['sign_settings']['dot']:.0f}",
            f"{r['sign_scaled_score']:.0f}",
        ],
    ),
    (
        "With uniform weights at 1/8 = 0.125, the key pointing away gets 0.050 (the orthogonal ones 0.136 each) and "
        "the "
        "key pointing towards the query 0.280 (the orthogonal ones 0.103).",
        lambda r, fig: [
            "1",
            str(r["sign_settings"]["keys"]),
            f3(r["sign_uniform"]),
            f3(r["sign_away"]["key"]),
            f3(r["sign_away"]["orthogonal"]),
            f3(r["sign_towards"]["key"]),
            f3(r["sign_towards"]["orthogonal"]),
        ],
    ),
    (
        "the key away gets 0.135 of the weight of the key towards ($e^{-2} = 0.135$), and the key towards 2.718 "
        "times the "
        "weight of an orthogonal key ($e^1$).",
        lambda r, fig: [
            f3(r["sign_away_over_towards"]),
            f"{2 * r['sign_scaled_score']:.0f}",
            f3(r["sign_away_over_towards_formula"]),
            f3(r["sign_towards_over_orthogonal"]),
            f"{r['sign_scaled_score']:.0f}",
        ],
    ),
    ("now below uniform too (0.110)", lambda r, fig: f3(r["sign_both"]["orthogonal"])),
    (
        "the weights move by less than $10^{-16}$ (float64 rounding)",
        lambda r, fig: ["10", str(-math.ceil(math.log10(r["sign_shifted_max_difference"])))],
    ),
    # Why divide by √d.
    ("over 32 keys", lambda r, fig: f"{math.exp(r['ln_keys']):.0f}"),
    (
        "(uniform: $\\ln 32 = 3.47$ nats; one-hot: 0)",
        lambda r, fig: [f"{math.exp(r['ln_keys']):.0f}", f2(r["ln_keys"]), "0"],
    ),
    (
        "Scaled, the entropy stays near $\\ln 32 - \\tfrac12$ and the Jacobian near 0.24 for every width.",
        lambda r, fig: [
            f"{math.exp(r['ln_keys']):.0f}",
            # "near 0.24 for every width": every width's scaled Jacobian rounds to it
            {f2(row["jacobian_scaled_dot"]) for row in r["variance"]}.pop()
            if len({f2(row["jacobian_scaled_dot"]) for row in r["variance"]}) == 1
            else "differs between widths",
        ],
    ),
    (
        "at $d = 4$ and $16$ it is 0.30, larger than the scaled 0.24, and only from $d = 64$ on does it fall (0.20, "
        "0.11, "
        "0.07 at $d = 64, 256, 1024$).",
        lambda r, fig: [
            "4",
            "16",
            {f2(variance_row(r, 4)["jacobian_dot"]), f2(variance_row(r, 16)["jacobian_dot"])}.pop()
            if f2(variance_row(r, 4)["jacobian_dot"]) == f2(variance_row(r, 16)["jacobian_dot"])
            else "differs between d = 4 and 16",
            f2(variance_row(r, 4)["jacobian_scaled_dot"]),
            "64",
            f2(variance_row(r, 64)["jacobian_dot"]),
            f2(variance_row(r, 256)["jacobian_dot"]),
            f2(variance_row(r, 1024)["jacobian_dot"]),
            "64",
            "256",
            "1024",
        ],
    ),
    (
        "$\\sqrt{31}/32 \\approx 0.17$ for all 32 keys, larger as the weight concentrates on fewer keys (0.5 for two, "
        "whose squared norm is 0.25), and 0 only at one key.",
        lambda r, fig: [
            "31",
            "32",
            f2(r["jacobian_uniform_limit"]),
            "32",
            f"{equal_weights(r, 2)['norm']:.1f}",
            f2(equal_weights(r, 2)["squared_norm"]),
            f"{equal_weights(r, 1)['norm']:.0f}",
        ],
    ),
    ("for equal weights on $m$ of the 32 keys:", lambda r, fig: str(len(r["jacobian_equal_weights"]))),
    (
        "(0.47 at three, 0.43 at four, 0.33 at eight)",
        lambda r, fig: [f2(equal_weights(r, m)["norm"]) for m in (3, 4, 8)],
    ),
    ("keep $d = 64$ and vary", lambda r, fig: "64"),
    ("peaks at a spread of about 2.5", lambda r, fig: f"{r['jacobian_peak_sigma']:.1f}"),
    (
        "Unscaled scores at $d = 4$ and $16$ ($\\sigma = 2, 4$) land near the peak",
        lambda r, fig: ["4", "16", f"{math.sqrt(4):.0f}", f"{math.sqrt(16):.0f}"],
    ),
    ("from $d = 64$ ($\\sigma = 8$) they are on the falling side", lambda r, fig: ["64", f"{math.sqrt(64):.0f}"]),
    # The answers the last cell measures.
    (
        "is about 0.33 for 8 keys, 0.46 for 32 and 0.48 for 128",
        lambda r, fig: [
            f2(r["answer_entropy_gap"]["8"]),
            "8",
            f2(r["answer_entropy_gap"]["32"]),
            "32",
            f2(r["answer_entropy_gap"]["128"]),
            "128",
        ],
    ),
    (
        "about $\\sigma \\approx 1.1$ (instead of 2.5), with a larger peak, about 0.36: with 8 keys",
        lambda r, fig: [
            f"{r['answer_jacobian_peak_8_keys'][0]:.1f}",
            f"{r['jacobian_peak_sigma']:.1f}",
            f2(r["answer_jacobian_peak_8_keys"][1]),
            "8",
        ],
    ),
    (
        "(0.5 at $m = 2$, 0.47 at $m = 3$)",
        lambda r, fig: [f"{equal_weights(r, 2)['norm']:.1f}", "2", f2(equal_weights(r, 3)["norm"]), "3"],
    ),
    ("$\\sqrt 7/8 \\approx 0.33$", lambda r, fig: ["7", "8", f2(r["answer_uniform_limit_8_keys"])]),
]

GIVEN = [
    ("# 04 ·", "this tutorial's number"),
    ("Tutorial 03 used one fixed way", "cross-reference"),
    ("\\sum_{i=1}^m", "an equation's index"),
    ("(Vaswani et al. 2017)", "citation"),
    ("(T5, Raffel et al. 2020)", "citation"),
    ("(Bahdanau et al. 2015)", "citation"),
    ("the Gaussian kernel of tutorial 03.", "cross-reference"),
    ("d2l.ai §11.3", "citation (a book section)", 2),
    ("build the 0/1 padding row", "a definition: 1 = real token, 0 = padding"),
    (
        "$W_q \\in \\mathbb R^{h\\times 20}$ and $W_k \\in \\mathbb R^{h\\times 2}$",
        "the toy's widths, set by the script",
    ),
    ("`MultiHeadAttention(hidden_size=20, kv_input_size=2, ...)`", "a code example"),
    ("a 20 → 8 query projection", "the sizes the script sets (AdditiveScore(head_dim=2, attention_dim=8))"),
    ("only the factor $1/\\sqrt d$", "a definition"),
    ("writes $-10^6$ into", "the classic code's constant"),
    ("sets masked weights to exactly 0.", "a definition of the backend"),
    ("valid lengths $[2, 3]$ (one per sequence), and with per-query valid lengths $[[1, 3], [2, 4]]$", "the inputs"),
    ("With valid length 0 the classic softmax sees equal scores ($-10^6$ everywhere)", "the input; the constant"),
    ("And in float16, $-10^6$ is not representable", "the constant"),
    ("(torch 2.15 goes further and refuses to write the number $-10^6$ into", "a version; the constant"),
    ("the query's way, 0 that it is orthogonal", "a definition"),
    ("so that the best key scores 0", "arithmetic: +s shifted by -s"),
    ("with mean 0 and variance 1, each product $q_j k_j$ has mean 0 and variance $E[q_j^2]E[k_j^2] = 1$", "the math"),
    ("\\mathrm{Var}\\!\\left(q^\\top k/\\sqrt d\\right) = 1.$$", "the math"),
    ("$\\mathrm{diag}(p) - pp^\\top$ is 0 when", "the math"),
    ('`scaling=1` ("dot") and `scaling=1/sqrt(d)` ("scaled_dot")', "the code's arguments"),
    ("stays at 1 scaled", "the math of the paragraph before (the table shows it)"),
    ("$\\sum_i p_i^2 - 2\\sum_i p_i^3 + (\\sum_i p_i^2)^2$", "the math"),
    ("that is $(m-1)/m^2$", "the math"),
    ("$\\sqrt{m-1}/m$", "the math", 2),
    ("and $\\sigma = 1$ (scaled)", "the definition of the scaling"),
    ("and falls towards 0 as one key takes all the weight", "the limit of the formula"),
    ("(64 or 128 per head)", "the head widths of common models"),
    ("The argument for $1/\\sqrt d$", "a definition"),
    ("scaled, $\\sigma = 1$ at", "the definition of the scaling"),
    ("**Next:** [05 · positional encodings](05_positional_encodings.py)", "cross-reference"),
    ("1. In the toy example, replace the equal keys by random ones (`keys = torch.randn(2, 10, 2)`)", "an exercise"),
    ("2. Run the classic `d2l_masked_softmax` on a row with valid length 0", "an exercise"),
    ('3. Build the mask "query $i$ may see keys $0 \\dots i$" for 4 queries and 4 keys', "an exercise"),
    ('`hf_attention.modeling.masks.causal_mask(4, 4, 0, torch.device("cpu"))`', "an exercise's code"),
    ("4. The scaled entropy sits near $\\ln 32 - \\tfrac12$. Set `n_keys` to 8 and to 128", "an exercise"),
    ("5. In the sweep, where is the peak of the Jacobian for `n_keys = 8`?", "an exercise"),
    ("1. No: with different keys", "an answer's number"),
    ("the padded keys get weight exactly 0, each row sums to 1", "what masking guarantees"),
    ("2. A uniform row (0.25 each), not NaN", "an answer: 1/4 for four equal scores"),
    ("so $-10^6$ is representable (rounded to $-999424$)", "the constant and its bfloat16 rounding (arithmetic)"),
    ("float16's largest magnitude is 65504, so there $-10^6$ becomes", "float16's range (a definition)"),
    ("3. `torch.arange(4)[None, :] <= torch.arange(4)[:, None]`", "an answer's code"),
    ("`causal_mask(...)[0, 0]`", "an answer's code"),
    ("valid length of $i + 1$. 4. The gap,", "the math; the answer's number"),
    ("$\\sigma^2/2 = 1/2$ from below", "the math"),
    ("$s_i \\sim N(0, \\sigma^2)$", "the math"),
    ("n\\,e^{\\sigma^2/2}$", "the math"),
    ("mean score is $\\sigma^2$", "the math"),
    ("\\ln n - \\sigma^2/2$. 5. At", "the math; the answer's number"),
    ("($\\sigma = 1$) sit almost at the peak", "the definition of the scaling"),
]
