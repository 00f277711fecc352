"""The numbers of tutorial 03's prose, tied to its full run (docs/figures/03_results.json and the figures' data)."""

import math

import numpy as np


def power_of_ten_between(value: float, low: int, high: int) -> list[str]:
    """'10^-low to 10^-high' when value lies between them (else the value, which makes the check fail)."""
    return ["10", str(low), "10", str(high)] if 10.0**-low < value < 10.0**-high else [value]


def a_few(value: float, exponent: int) -> list[str]:
    """'a few 10^-exponent': the value lies between 10^-exponent and 10^-(exponent-1)."""
    return ["10", str(exponent)] if 10.0**-exponent < value < 10.0 ** -(exponent - 1) else [value]


def far_below(value: float, exponent: int) -> list[str]:
    """'far below 10^-exponent': at least a thousand times smaller."""
    return ["10", str(exponent)] if value < 10.0 ** -(exponent + 3) else [value]


def mantissa_and_exponent(value: float) -> list:
    """m · 10^e as the prose writes it: the mantissa, 10 and the exponent."""
    exponent = math.floor(math.log10(value))
    return [value / 10.0**exponent, 10, exponent]


def slope_turns(curve) -> int:
    """How often a curve's slope changes sign between neighbouring grid points."""
    slopes = np.diff(np.asarray(curve, dtype=float))
    return int((np.sign(slopes[1:]) != np.sign(slopes[:-1])).sum())


def shape(curve) -> str:
    """'zigzag' when the slope changes sign at more than half of the inner points, 'staircase' when more than half of
    the steps are flat (under 1e-3), else 'smooth'."""
    slopes = np.diff(np.asarray(curve, dtype=float))
    if slope_turns(curve) > len(slopes[1:]) / 2:
        return "zigzag"
    return "staircase" if (np.abs(slopes) < 1e-3).mean() > 0.5 else "smooth"


def answer(r, *path):
    value = r["answers"]
    for key in path:
        value = value[key]
    return value


def per_key(r) -> dict:
    low, middle, high = r["per_key_sigma_min_median_max"]
    quiet, noisy = r["per_key_sigma_quietest_noisiest_10"]
    return {"low": low, "middle": middle, "high": high, "quiet": quiet, "noisy": noisy}


CLAIMS = [
    ("a largest weight of 1)", lambda r, fig: r["soft_lookup"]["0.001"]["top_weight_elsewhere"]),
    (
        r"mean of all 50 values (the largest weight is $1/50$)",
        lambda r, fig: [
            # "all": the largest weight is 1/n, so every weight is (they sum to 1)
            "all"
            if abs(r["soft_lookup"]["100.0"]["top_weight_elsewhere"] * len(fig("03_fits")["x_train"]) - 1) < 1e-3
            else "not all",
            len(fig("03_fits")["x_train"]),
            1,
            1 / r["soft_lookup"]["100.0"]["top_weight_elsewhere"],
        ],
    ),
    (
        # the fixed width's fit: its slope turns no more often than the truth's (the peak and the trough)
        "the estimate is smooth but",
        lambda r, fig: (
            "smooth" if slope_turns(fig("03_fits")["y_fixed"]) <= slope_turns(fig("03_fits")["y_truth"]) else "jagged"
        ),
    ),
    (
        "its test error is worse and still growing",
        lambda r, fig: (
            "growing" if fig("03_loss")["test_curve_naive"][-1] > fig("03_loss")["test_curve_naive"][-2] else "flat"
        ),
    ),
    (
        "the training loss keeps falling",
        lambda r, fig: (
            "falling" if fig("03_loss")["losses_naive"][-1] < fig("03_loss")["losses_naive"][-2] else "flat"
        ),
    ),
    (r"(its kernel weight $\times e^3 \approx 20$)", lambda r, fig: ["3", math.exp(3)]),
    (
        r"misses the peak near $x \approx 1.9$ and the trough near 4.4",
        lambda r, fig: list(r["truth_peak_trough_x"]),
    ),
    (r"That is $50 \times 49 = 2450$ numbers", lambda r, fig: ["50", "49", str(r["free_scores_parameters"])]),
    ("(far below $10^{-6}$)", lambda r, fig: far_below(r["library_vs_formula_max_abs_float64"], 6)),
    (
        r"carries an *absolute* error of a few $10^{-6}$",
        lambda r, fig: a_few(r["float32_squared_distance_max_abs_error"], 6),
    ),
    (
        r"a relative error of some $10^{-5}$ to $10^{-4}$: cancellation leaves about 4 significant digits",
        lambda r, fig: (
            power_of_ten_between(r["float32_near_pairs_median_relative_error"], 5, 4)
            + [r["float32_near_pairs_significant_digits"]]
        ),
    ),
    (
        r"an error of a few $10^{-6}$ in $-(x - x_i)^2 w^2/2$ (with $w^2/2 \approx 8$ for the learned width)",
        lambda r, fig: (
            a_few(r["float32_squared_distance_max_abs_error"], 6) + ["2", "2", "2", "2", "2", r["w_learned"] ** 2 / 2]
        ),
    ),
    (
        r"differ from the formula's by only a few $10^{-6}$ in float32",
        lambda r, fig: a_few(r["library_vs_formula_max_abs_float32"], 6),
    ),
    # One width per training key
    ("On the first draw the 50 widths win", lambda r, fig: str(len(fig("03_per_key")["sigma_per_key"]))),
    (
        "the leave-one-out loss falls from 0.360 to 0.328 and the test MSE from 0.049 to 0.037",
        lambda r, fig: [
            "falls" if r["per_key_loo_loss"] < r["train_loss_first_last"][1] else "rises",
            r["train_loss_first_last"][1],
            r["per_key_loo_loss"],
            r["mse_learned"],
            r["per_key_mse"],
        ],
    ),
    (
        r"The widths spread from $\sigma_i = 0.12$ to 0.95 (median 0.43; only 14 of the 50 are narrower than the "
        "one learned width, 0.252)",
        lambda r, fig: (
            [per_key(r)[k] for k in ("low", "high", "middle")]
            + [
                str(r["per_key_narrower_than_single"]),
                str(len(fig("03_per_key")["sigma_per_key"])),
                r["sigma_learned"],
            ]
        ),
    ),
    (
        "the 10 keys whose targets lie closest to $f$ have a mean width of 0.51, the 10 noisiest 0.30",
        lambda r, fig: ["10", per_key(r)["quiet"], "10", per_key(r)["noisy"]],
    ),
    (
        "The five widest keys sit between $x = 4.48$ and 4.76",
        lambda r, fig: [len(r["per_key_widest_x"]), r["per_key_widest_x"][0], r["per_key_widest_x"][-1]],
    ),
    (
        "On the four other draws the per-key widths win 3 times",
        lambda r, fig: [
            len(r["per_key_other_draws_mse"]),
            sum(each < single for single, each in r["per_key_other_draws_mse"]),
        ],
    ),
    (
        "lose once, by much (0.046 against 0.067): averaged over the four, 0.054 for one width and 0.056 for 50",
        lambda r, fig: (
            list(max(r["per_key_other_draws_mse"], key=lambda pair: pair[1] - pair[0]))
            + [len(r["per_key_other_draws_mse"])]
            + [sum(pair[k] for pair in r["per_key_other_draws_mse"]) / 4 for k in (0, 1)]
            + [str(len(fig("03_per_key")["sigma_per_key"]))]
        ),
    ),
    ("Widths fitted to 50 noisy points", lambda r, fig: str(len(fig("03_per_key")["sigma_per_key"]))),
    (
        "on the training pairs it can do far better than any kernel",
        lambda r, fig: "better" if r["free_scores_train_loss"] < r["train_loss_first_last"][1] else "worse",
    ),
    (
        "and on average 0.45 of a row's weight",
        lambda r, fig: r["free_scores_weight_beyond_1"],
    ),
    (
        "(the blue zigzag in the figure, whose slope changes sign at 38 of its 48 inner points, the learned width's "
        "at 4), with a test error 5.2 times that of the one-parameter kernel",
        lambda r, fig: [
            shape(fig("03_free_scores")["y_free"]),
            slope_turns(fig("03_free_scores")["y_free"]),
            len(fig("03_free_scores")["y_free"]) - 2,
            slope_turns(fig("03_free_scores")["y_learned"]),
            r["free_scores_test_mse"] / r["mse_learned"],
        ],
    ),
    # Answers
    (
        r"With noise 0.1 the learned width shrinks to $\sigma = 0.20$ (test MSE 0.013); with noise 1.0 it grows to "
        r"0.31 (test MSE 0.13)",
        lambda r, fig: [
            0.1,
            "shrinks" if answer(r, "noise", "0.1")[0] < r["sigma_learned"] else "grows",
            answer(r, "noise", "0.1")[0],
            answer(r, "noise", "0.1")[1],
            1.0,
            "grows" if answer(r, "noise", "1.0")[0] > r["sigma_learned"] else "shrinks",
            answer(r, "noise", "1.0")[0],
            answer(r, "noise", "1.0")[1],
        ],
    ),
    (
        "so the best width shrinks with more data",
        lambda r, fig: "shrinks" if answer(r, "n_200")[0] < r["sigma_learned"] else "grows",
    ),
    (
        r"$\sigma = 0.17$ (test MSE 0.015, from 0.049)",
        lambda r, fig: [answer(r, "n_200")[0], answer(r, "n_200")[1], r["mse_learned"]],
    ),
    (
        "Test MSE 0.15, 0.093, 0.049, 0.12 and 0.43",
        lambda r, fig: [answer(r, "fixed_sigma_mse", s) for s in ("0.05", "0.1", "0.25", "0.5", "1.0")],
    ),
    (
        r"where the leave-one-out fit landed ($\sigma = 0.252$, MSE 0.049)",
        lambda r, fig: [r["sigma_learned"], r["mse_learned"]],
    ),
    (
        r"`log_width` keeps falling, to $-10.8$ ($w = e^{-\log\sigma^2/2} \approx 220$), and the training loss falls "
        r"to $6 \cdot 10^{-4}$",
        lambda r, fig: (
            ["falling" if answer(r, "library_naive", "log_width") < 0 else "rising"]  # it starts at 0
            + [answer(r, "library_naive", "log_width"), 2, 2]
            + [round(answer(r, "library_naive", "w"), -1)]
            # from the loss at its start, w = 1 with self included: the by-hand naive fit's first loss
            + ["falls" if answer(r, "library_naive", "loss") < fig("03_loss")["losses_naive"][0] else "rises"]
            + mantissa_and_exponent(answer(r, "library_naive", "loss"))
        ),
    ),
    (
        "runs away much faster than the additive steps on $w$ (which reached 8.6)",
        lambda r, fig: ["faster" if answer(r, "library_naive", "w") > r["w_naive"] else "slower", r["w_naive"]],
    ),
    (
        r"5. $\sigma = 0.013$. The second nearest key gets the weight ratio $e^{-(0.0495^2 - 0.0187^2)/2\sigma^2}$",
        lambda r, fig: [
            "5",
            answer(r, "lookup", "sigma"),
            answer(r, "lookup", "distances")[1],
            "2",
            answer(r, "lookup", "distances")[0],
            "2",
            "2",
            "2",
        ],
    ),
    (
        "difference of their values (0.45)",
        lambda r, fig: abs(answer(r, "lookup", "values")[0] - answer(r, "lookup", "values")[1]),
    ),
    (
        r"below 0.001 when the ratio is below 0.0022, i.e. $0.00105/\sigma^2 > 6.1$, $\sigma < 0.013$",
        lambda r, fig: [
            0.001,
            answer(r, "lookup", "ratio"),
            answer(r, "lookup", "half_gap"),
            "2",
            answer(r, "lookup", "log_ratio"),
            answer(r, "lookup", "sigma"),
        ],
    ),
    (
        "(0.019 and 0.050 away, values 3.70 and 3.25)",
        lambda r, fig: list(answer(r, "lookup", "distances")) + list(answer(r, "lookup", "values")),
    ),
    (
        r"$\log S = 1.53$ at the farthest query it wins for $b = 3$, 1.59 for $b = 8$",
        lambda r, fig: [
            answer(r, "salience_others_log_weight", "3.0"),
            3,
            answer(r, "salience_others_log_weight", "8.0"),
            8,
        ],
    ),
    (
        r"So the reach is $d = \sqrt{(b - \log S)/8}$: measured on a fine grid of queries, 0.43 for $b = 3$ and 0.89 "
        r"for $b = 8$, 2.09 times as far, more than the $\sqrt{8/3} = 1.63$ times of a reach proportional to "
        r"$\sqrt b$",
        lambda r, fig: [
            8,  # 1 / (2 · 0.25²)
            answer(r, "salience_reach", "3.0"),
            3,
            answer(r, "salience_reach", "8.0"),
            8,
            answer(r, "salience_reach", "8.0") / answer(r, "salience_reach", "3.0"),
            "more"
            if answer(r, "salience_reach", "8.0") / answer(r, "salience_reach", "3.0") > math.sqrt(8 / 3)
            else "less",
            8,
            3,
            math.sqrt(8 / 3),
        ],
    ),
    (
        "it gives the regressions run separately on their own points to a largest difference of 2.2e-15, float64 "
        "rounding",
        lambda r, fig: answer(r, "padded_bmm", "vs_separate_max_abs"),
    ),
    (
        r"the training loss falls to $4 \cdot 10^{-6}$, but the mean weight of a row on its own key is only 0.12",
        lambda r, fig: (
            # from the loss of equal weights, where the free scores start: the variance of the targets
            ["falls" if answer(r, "free_unmasked", "loss") < np.var(fig("03_fits")["y_train"]) else "rises"]
            + mantissa_and_exponent(answer(r, "free_unmasked", "loss"))
            + [answer(r, "free_unmasked", "own_weight")]
        ),
    ),
    ("the nearest rows give a test MSE of 0.26", lambda r, fig: answer(r, "free_unmasked", "test_mse")),
    # Self-test answers
    ("gets the value of its nearest key, 3.70)", lambda r, fig: r["soft_lookup"]["0.001"]["elsewhere"]),
    (
        "every weight is about $1/50$)",
        lambda r, fig: [
            # "every": the largest weight is 1/n, so every weight is (they sum to 1)
            "every"
            if abs(r["soft_lookup"]["100.0"]["top_weight_elsewhere"] * len(fig("03_fits")["x_train"]) - 1) < 1e-3
            else "not every",
            1,
            1 / r["soft_lookup"]["100.0"]["top_weight_elsewhere"],
        ],
    ),
    (
        r"it reached 8.6 in 1000 steps, and its test MSE, 0.085, is worse than the 0.049 of leave-one-out "
        r"($\sigma = 0.252$) and still growing",
        lambda r, fig: [
            r["w_naive"],
            len(fig("03_loss")["losses_naive"]),
            r["mse_naive"],
            "worse" if r["mse_naive"] > r["mse_learned"] else "better",
            r["mse_learned"],
            r["sigma_learned"],
            "growing" if fig("03_loss")["test_curve_naive"][-1] > fig("03_loss")["test_curve_naive"][-2] else "flat",
        ],
    ),
    ("Test MSE 0.905 for average pooling", lambda r, fig: r["mse_average"]),
    ("0.428 for the fixed width", lambda r, fig: r["mse_fixed_kernel"]),
    (
        r"0.049 for the learned width, $\sigma = 0.252$",
        lambda r, fig: [r["mse_learned"], r["sigma_learned"]],
    ),
    (
        "The 2450 free scores drive the leave-one-out loss towards zero",
        # towards zero: below a hundredth of the learned width's leave-one-out loss
        lambda r, fig: (
            str(r["free_scores_parameters"])
            if r["free_scores_train_loss"] < r["train_loss_first_last"][1] / 100
            else f"not towards zero ({r['free_scores_train_loss']})"
        ),
    ),
    (
        "a zigzag with 5.2 times the test error of the one-parameter kernel",
        lambda r, fig: [shape(fig("03_free_scores")["y_free"]), r["free_scores_test_mse"] / r["mse_learned"]],
    ),
    (
        "The weights are `(4, 50, 50)`, (batch, queries, keys), and the values `(4, 50, 1)`; `torch.bmm` returns the "
        "four products at once, `(4, 50, 1)`",
        lambda r, fig: [
            *r["bmm_shapes"]["weights"],
            *r["bmm_shapes"]["values"],
            r["bmm_shapes"]["output"][0],
            *r["bmm_shapes"]["output"],
        ],
    ),
    (
        "`(4, 1, 50) @ (4, 50, 1) → (4, 1, 1)`",
        lambda r, fig: [
            r["bmm_shapes"]["weights"][0],
            r["bmm_shapes"]["one_query_output"][1],
            r["bmm_shapes"]["weights"][2],
            *r["bmm_shapes"]["values"],
            *r["bmm_shapes"]["one_query_output"],
        ],
    ),
    (
        "on four other noise draws the 50 widths average a test MSE of 0.056 against 0.054 for a single width (on the "
        "first draw 0.037 against 0.049), because 50 widths",
        lambda r, fig: [
            len(r["per_key_other_draws_mse"]),
            str(len(fig("03_per_key")["sigma_per_key"])),
            float(np.mean([pair[1] for pair in r["per_key_other_draws_mse"]])),
            float(np.mean([pair[0] for pair in r["per_key_other_draws_mse"]])),
            r["per_key_mse"],
            r["mse_learned"],
            str(len(fig("03_per_key")["sigma_per_key"])),
        ],
    ),
]

GIVEN = [
    ("# 03 ·", "the tutorial's number"),
    ("Nadaraya (1964) and Watson (1964)", "citations"),
    ("(William James, 1890;", "citation"),
    ("§10.2", "a section of d2l.ai", 2),
    ("§11.2", "a section of d2l.ai"),
    ("§10.1", "a section of d2l.ai"),
    (r"\sum_{i=1}^{n}", "maths"),
    (r"\sum_i \alpha(x, x_i) = 1", "maths: the weights sum to 1"),
    (r"$K(u) = \exp(-u^2/2)$", "maths: the Gaussian kernel"),
    ("the scores $-(x - x_i)^2/2$", "maths"),
    ("a 1-D function", "one dimension"),
    (r"$f(x) = 2\sin(x) + x^{0.8}$; 50 training inputs drawn uniformly from $[0, 5)$", "the data the script draws"),
    ("standard deviation 0.5", "the noise the script draws"),
    (r"the grid $0, 0.1, \dots, 4.9$", "the test grid the script sets"),
    ("Put the 50 training pairs", "the data size the script sets"),
    ("weights that sum to 1", "the softmax's definition"),
    ("(tutorials 06 and 07)", "cross-reference"),
    (r"\exp(-(x - x_i)^2/2\sigma^2)", "maths: the kernel"),
    (r"At $\sigma = 0.001$", "a width the script tries"),
    ("answers the query 2.5", "the query the script sets"),
    (r"at $\sigma = 100$", "a width the script tries"),
    ("what section 3 learns", "cross-reference"),
    (r"$a(x, x_i) = -(x - x_i)^2/2\sigma^2 + b_i$", "maths"),
    ("Give the training point nearest 2.5 a salience $b = 3$", "the salience the script sets"),
    (r"with $\sigma = 0.25$:", "the width the script sets"),
    (
        r"a distance of 1 costs $1/2\sigma^2 = 8$ in the score, more than the salience adds",
        "arithmetic: 1 / (2 · 0.25²) = 8 > b = 3, the salience the script sets",
    ),
    ("tutorial 05", "cross-reference"),
    ("## 1. Average pooling: every key gets the same weight", "section number; average pooling's definition"),
    ("## 2. Nadaraya–Watson", "section number"),
    ("## 3. A learned", "section number"),
    ("Score $a(x, x_i) = -(x - x_i)^2 / 2$", "maths"),
    (r"fixed at $\sigma = 1$", "the width the script sets"),
    (r"$a(x, x_i) = -((x - x_i)\,w)^2/2$, i.e. a kernel of width $\sigma = 1/w$", "maths"),
    ("with learning rate 0.5,", "the learning rate the script sets (d2l.ai's)"),
    (r"with $\sigma = 1$ it averages", "the fixed width"),
    ("normalised to a peak of 1", "a definition"),
    ("(each curve sums to 1)", "the softmax's definition"),
    (r"$a(x, x_i) = -((x - x_i)\,w_i)^2/2$, 50 parameters", "maths; one per training key"),
    ("is the one of section 3", "cross-reference"),
    ("at learning rate 0.5, the same number", "the learning rate the script sets"),
    ("every $w_i$ starting at 1)", "the start the script sets"),
    ('"training query 17 and training key 30"', "an example of a cell"),
    ("points farther than 1 away", "the distance the script measures beyond"),
    (r"$-\lVert q - k\rVert^2 / (2\sigma_h^2)$", "maths"),
    (r"stored as $\log \sigma_h^2$", "maths"),
    (r"$\sigma = 1/w$, so $\log\sigma^2 = -2\log w$", "maths"),
    ("one head of width 1", "the layer's size"),
    ("$(x, 0)$", "the queries' stream"),
    (r"$\lVert q\rVert^2 + \lVert k\rVert^2 - 2\,q\cdot k$", "maths"),
    (r"(about 7 significant digits, a relative rounding of $6\cdot10^{-8}$)", "float32's precision (2⁻²⁴)"),
    (r"$x^2 \approx 25$", "arithmetic: the largest input is near 5"),
    ("$0.1^2 = 0.01$", "arithmetic"),
    ("not the 7 of a float32 number", "float32's precision"),
    (r"a relative $10^{-5}$ at most", "arithmetic: the numbers of the sentence before"),
    (r"Gradient descent on $\log\sigma^2$", "maths"),
    ("(batch, keys, 1); the result is (batch, queries, 1)", "shapes"),
    (r"$-10^6$", "a constant of other code"),
    ("[04 · scoring", "cross-reference"),
    (
        "## Exercises 1. Change the noise of the training targets from 0.5 to 0.1, then to 1.0",
        "the exercise's settings",
    ),
    ("2. Set `n_train = 200`", "the exercise's setting"),
    (r"3. Skip the learning: evaluate the fixed-width estimator at $\sigma = 0.05, 0.1, 0.25, 0.5, 1$", "settings"),
    ("4. In the cell", "exercise number"),
    ("after 1000 steps", "the full run's steps"),
    ("5. The soft lookup at the query 2.5", "exercise number; the query of the script"),
    ("to within 0.001?", "the exercise's tolerance"),
    ("6. In the section on cues, raise the salience of the key near 2.5 from $b = 3$ to $b = 8$", "settings"),
    (r"(with $\sigma = 0.25$)?", "the width of the cues section"),
    ("7. Train the free scores", "exercise number"),
    ("dim=1)", "code"),
    (
        "8. Give the four data sets of the `bmm` section different numbers of training points, 50, 40, 30 and 20",
        "settings",
    ),
    ("## Answers 1.", "answer number"),
    ("2. $\\sigma", "answer number"),
    ("3. Test MSE", "answer number"),
    ("near $\\sigma = 0.25$, where", "the U's bottom: the tried width nearest the learned one"),
    ("4. `log_width`", "answer number"),
    (r"$\log \sigma^2$ is a", "maths"),
    (
        r"$-d^2/2\sigma^2 + b = b - 8d^2$. It takes half the weight while $e^{b - 8d^2}$ exceeds the summed kernel "
        "weight $S$ of the other keys, and $S$ is not the 1 of a single key",
        "arithmetic: 1 / (2 · 0.25²) = 8; what taking half the weight means",
    ),
    ("6. A query", "answer number"),
    ("grows as $d^2$", "maths"),
    ("7. No:", "answer number"),
    ("with 50 free numbers per row", "the data size"),
    ("8. Pad every data set to 50 keys", "answer number; the data size"),
    ("tutorial 04)", "cross-reference", 2),
    ("(batch, 1, 1, keys)", "a shape"),
    ("0/1 padding mask", "the mask's values"),
    # Definitions, settings and maths in words
    ("function three ways", "the estimators the tutorial builds (average, fixed width, learned width)"),
    ("why the three roles", "query, key and value"),
    ("compared with **every** key", "the definition of attention pooling"),
    ("weighted mean of **all** the values. Hence the three names", "the definition of attention pooling"),
    ("In a Transformer all three are vectors that three different learned projections", "what a Transformer does"),
    ("in self-attention every token is a query", "the definition of self-attention"),
    ("Very narrow, all the weight goes to the nearest key", "the softmax's limit as the width goes to 0"),
    (
        "Very wide, every key gets the same weight and every query the mean of all values",
        "the softmax's limit as the width grows without bound",
    ),
    ("has two kinds of cue", "James's account"),
    ("the same for every query. Without the query term every query gets the same weights", "maths: no query term"),
    ("cannot follow the query at all", "maths: the weights do not depend on the query"),
    ("Every test point gets the same answer, a flat line", "average pooling's definition: one constant"),
    ("far ones almost none", "the Gaussian kernel's shape"),
    ("each point puts all its weight on its own key", "the softmax's limit as w grows"),
    ("what three queries attend to", "the three queries the script probes"),
    ("the weights three test queries give", "the three queries the script probes"),
    ("gives every training key its own width", "the variant's definition"),
    ("so both also run on four other draws", "the draws the script makes"),
    ("its keys are new in every sequence", "what a Transformer reads"),
    ("one free score $A_{ij}$ for every pair", "the definition of the free scores"),
    ("work for every sentence", "scores computed from contents are defined for any input"),
    ("a fused kernel that does all of it in one call", "the definition of a fused kernel"),
    ("In float64 the two agree", "the two ways of computing a squared distance"),
    ("the mask format every hf-attention layer takes", "the library's mask format"),
    ("Four data sets here: the same $x$ grid, four noise draws", "the batch the script makes"),
    ("A Python loop over the four", "the batch the script makes"),
    ("on a batch of four, all in float64", "the batch and the dtype the script sets"),
    ("runs with two batch axes", "the shape of MultiHeadAttention's product"),
    ("broadcasts over all the leading axes", "torch.matmul's definition"),
    ("Does the learned width grow or shrink", "an exercise's question"),
    ("Why does it go faster than the by-hand naive fit?", "an exercise's question (the answer measures it)"),
    ("Predict it from the two nearest keys", "an exercise's question"),
    ("does it now take more than half of a query's weight", "an exercise's question"),
    ("one `bmm` call still does all four", "an exercise's question"),
    # Self-test
    (r"the fixed width $\sigma = 1$ and the learned width", "the width the script sets"),
    ("for the four regressions of the batched section", "the batch the script makes"),
    (r"softmax over the keys of $-(x - x_i)^2/2\sigma^2$", "maths"),
    (r"(at $\sigma = 0.001$ the query 2.5", "a width and the query the script sets"),
    (r"(with $\sigma = 100$", "a width the script tries"),
    ("(section 3 and the training curves)", "cross-reference"),
    ("sections 1 to 3.", "cross-reference"),
    ("in every sequence, so a width per key", "what a Transformer reads"),
]
