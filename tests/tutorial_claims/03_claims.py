"""The numbers of tutorial 03's prose, tied to its full run (docs/figures/03_results.json and the figures' data)."""

import math


def power_of_ten_between(value: float, low: int, high: int) -> list[str]:
    """'10^-low to 10^-high' when value lies between them (else the value, which makes the check fail)."""
    return ["10", str(low), "10", str(high)] if 10.0**-low < value < 10.0**-high else [f"{value}"]


def a_few(value: float, exponent: int) -> list[str]:
    """'a few 10^-exponent': the value lies between 10^-exponent and 10^-(exponent-1)."""
    return ["10", str(exponent)] if 10.0**-exponent < value < 10.0 ** -(exponent - 1) else [f"{value}"]


def far_below(value: float, exponent: int) -> list[str]:
    """'far below 10^-exponent': at least a thousand times smaller."""
    return ["10", str(exponent)] if value < 10.0 ** -(exponent + 3) else [f"{value}"]


def mantissa_and_exponent(value: float) -> list[str]:
    mantissa, exponent = f"{value:.0e}".split("e")
    return [mantissa, "10", str(abs(int(exponent)))]


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
    ("a largest weight of 1)", lambda r, fig: f"{r['soft_lookup']['0.001']['top_weight_elsewhere']:.0f}"),
    (
        r"mean of all 50 values (the largest weight is $1/50$)",
        lambda r, fig: ["50", "1", str(round(1 / r["soft_lookup"]["100.0"]["top_weight_elsewhere"]))],
    ),
    (r"(its kernel weight $\times e^3 \approx 20$)", lambda r, fig: ["3", f"{math.exp(3):.0f}"]),
    (
        r"misses the peak near $x \approx 1.9$ and the trough near 4.4",
        lambda r, fig: [f"{x:.1f}" for x in r["truth_peak_trough_x"]],
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
            + [f"{r['float32_near_pairs_significant_digits']:.0f}"]
        ),
    ),
    (
        r"an error of a few $10^{-6}$ in $-(x - x_i)^2 w^2/2$ (with $w^2/2 \approx 8$ for the learned width)",
        lambda r, fig: (
            a_few(r["float32_squared_distance_max_abs_error"], 6)
            + ["2", "2", "2", "2", "2", f"{r['w_learned'] ** 2 / 2:.0f}"]
        ),
    ),
    (
        r"weights above differ by only a few $10^{-6}$ in float32",
        lambda r, fig: a_few(r["library_vs_formula_max_abs_float32"], 6),
    ),
    # One width per training key
    ("On the first draw the 50 widths win", lambda r, fig: str(len(fig("03_per_key")["sigma_per_key"]))),
    (
        "the leave-one-out loss falls from 0.360 to 0.328 and the test MSE from 0.049 to 0.037",
        lambda r, fig: [
            f"{r['train_loss_first_last'][1]:.3f}",
            f"{r['per_key_loo_loss']:.3f}",
            f"{r['mse_learned']:.3f}",
            f"{r['per_key_mse']:.3f}",
        ],
    ),
    (
        r"The widths spread from $\sigma_i = 0.12$ to 0.95 (median 0.43; only 14 of the 50 are narrower than the "
        "one learned width, 0.252)",
        lambda r, fig: (
            [f"{per_key(r)[k]:.2f}" for k in ("low", "high", "middle")]
            + [
                str(r["per_key_narrower_than_single"]),
                str(len(fig("03_per_key")["sigma_per_key"])),
                f"{r['sigma_learned']:.3f}",
            ]
        ),
    ),
    (
        "the 10 keys whose targets lie closest to $f$ have a mean width of 0.51, the 10 noisiest 0.30",
        lambda r, fig: ["10", f"{per_key(r)['quiet']:.2f}", "10", f"{per_key(r)['noisy']:.2f}"],
    ),
    (
        "The five widest keys all sit between $x = 4.48$ and 4.76",
        lambda r, fig: [f"{r['per_key_widest_x'][0]:.2f}", f"{r['per_key_widest_x'][-1]:.2f}"],
    ),
    (
        "the per-key widths win 3 times",
        lambda r, fig: str(sum(each < single for single, each in r["per_key_other_draws_mse"])),
    ),
    (
        "lose once, by much (0.046 against 0.067): averaged over the four, 0.054 for one width and 0.056 for 50",
        lambda r, fig: (
            [f"{x:.3f}" for x in max(r["per_key_other_draws_mse"], key=lambda pair: pair[1] - pair[0])]
            + [f"{sum(pair[k] for pair in r['per_key_other_draws_mse']) / 4:.3f}" for k in (0, 1)]
            + [str(len(fig("03_per_key")["sigma_per_key"]))]
        ),
    ),
    ("Widths fitted to 50 noisy points", lambda r, fig: str(len(fig("03_per_key")["sigma_per_key"]))),
    # Answers
    (
        r"With noise 0.1 the learned width shrinks to $\sigma = 0.20$ (test MSE 0.013); with noise 1.0 it grows to "
        r"0.31 (test MSE 0.13)",
        lambda r, fig: [
            "0.1",
            f"{answer(r, 'noise', '0.1')[0]:.2f}",
            f"{answer(r, 'noise', '0.1')[1]:.3f}",
            "1.0",
            f"{answer(r, 'noise', '1.0')[0]:.2f}",
            f"{answer(r, 'noise', '1.0')[1]:.2f}",
        ],
    ),
    (
        r"$\sigma = 0.17$ (test MSE 0.015, from 0.049)",
        lambda r, fig: [f"{answer(r, 'n_200')[0]:.2f}", f"{answer(r, 'n_200')[1]:.3f}", f"{r['mse_learned']:.3f}"],
    ),
    (
        "Test MSE 0.15, 0.093, 0.049, 0.12 and 0.43",
        lambda r, fig: [
            f"{answer(r, 'fixed_sigma_mse', s):{f}}"
            for s, f in (("0.05", ".2f"), ("0.1", ".3f"), ("0.25", ".3f"), ("0.5", ".2f"), ("1.0", ".2f"))
        ],
    ),
    (
        r"where the leave-one-out fit landed ($\sigma = 0.252$, MSE 0.049)",
        lambda r, fig: [f"{r['sigma_learned']:.3f}", f"{r['mse_learned']:.3f}"],
    ),
    (
        r"to $-10.8$ ($w = e^{-\log\sigma^2/2} \approx 220$), and the training loss falls to $6 \cdot 10^{-4}$",
        lambda r, fig: (
            [f"{-answer(r, 'library_naive', 'log_width'):.1f}", "2", "2"]
            + [f"{round(answer(r, 'library_naive', 'w'), -1):.0f}"]
            + mantissa_and_exponent(answer(r, "library_naive", "loss"))
        ),
    ),
    ("(which reached 8.6)", lambda r, fig: f"{r['w_naive']:.1f}"),
    (
        r"5. $\sigma = 0.013$. The second nearest key gets the weight ratio $e^{-(0.0495^2 - 0.0187^2)/2\sigma^2}$",
        lambda r, fig: [
            "5",
            f"{answer(r, 'lookup', 'sigma'):.3f}",
            f"{answer(r, 'lookup', 'distances')[1]:.4f}",
            "2",
            f"{answer(r, 'lookup', 'distances')[0]:.4f}",
            "2",
            "2",
            "2",
        ],
    ),
    (
        "difference of their values (0.45)",
        lambda r, fig: f"{abs(answer(r, 'lookup', 'values')[0] - answer(r, 'lookup', 'values')[1]):.2f}",
    ),
    (
        r"below 0.001 when the ratio is below 0.0022, i.e. $0.00105/\sigma^2 > 6.1$, $\sigma < 0.013$",
        lambda r, fig: [
            "0.001",
            f"{answer(r, 'lookup', 'ratio'):.4f}",
            f"{answer(r, 'lookup', 'half_gap'):.5f}",
            "2",
            f"{answer(r, 'lookup', 'log_ratio'):.1f}",
            f"{answer(r, 'lookup', 'sigma'):.3f}",
        ],
    ),
    (
        "(0.019 and 0.050 away, values 3.70 and 3.25)",
        lambda r, fig: (
            [f"{d:.3f}" for d in answer(r, "lookup", "distances")]
            + [f"{v:.2f}" for v in answer(r, "lookup", "values")]
        ),
    ),
    (
        r"up to $d = 0.89$ for $b = 8$ (measured on a fine grid of queries; 0.43 for $b = 3$)",
        lambda r, fig: [
            f"{answer(r, 'salience_reach', '8.0'):.2f}",
            "8",
            f"{answer(r, 'salience_reach', '3.0'):.2f}",
            "3",
        ],
    ),
    (
        r"the training loss falls to $4 \cdot 10^{-6}$, but the mean weight of a row on its own key is only 0.12",
        lambda r, fig: (
            mantissa_and_exponent(answer(r, "free_unmasked", "loss"))
            + [f"{answer(r, 'free_unmasked', 'own_weight'):.2f}"]
        ),
    ),
    ("the nearest rows give a test MSE of 0.26", lambda r, fig: f"{answer(r, 'free_unmasked', 'test_mse'):.2f}"),
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
    (r"a distance of 1 costs $1/2\sigma^2 = 8$", "arithmetic: 1 / (2 · 0.25²)"),
    ("tutorial 05", "cross-reference"),
    ("## 1. Average pooling", "section number"),
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
    ("starting at 1)", "the start the script sets"),
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
    (r"$-d^2/2\sigma^2 + b = b - 8d^2$, against about 0", "arithmetic: 1 / (2 · 0.25²) = 8"),
    ("6. A query", "answer number"),
    ("grows as $d^2$", "maths"),
    ("7. No:", "answer number"),
    ("with 50 free numbers per row", "the data size"),
    ("8. Pad every data set to 50 keys", "answer number; the data size"),
    ("tutorial 04)", "cross-reference", 2),
    ("(batch, 1, 1, keys)", "a shape"),
    ("0/1 padding mask", "the mask's values"),
]
