"""The numbers of tutorial 07's prose (a Transformer block by hand), tied to what its full run measured.

`r` is docs/figures/07_results.json, `fig(name)` the arrays of docs/figures/NAME.npz.
"""


def _g(values):
    """Whole numbers as the prose writes them (4, not 4.0); others with up to 6 significant digits."""
    return [f"{v:g}" for v in values]


def _key_row(i):
    """A row of the worked example's table: the key, q·k, /√d, the exponential, the weight, the value."""

    def numbers(r, fig):
        e = r["example"]
        return [
            *_g(e["keys"][i]),
            f"{e['dots'][i]:g}",
            f"{e['scaled'][i]:g}",
            f"{e['exponentials'][i]:.3f}",
            f"{e['weights'][i]:.3f}",
            *_g(e["values"][i]),
        ]

    return numbers


def _weighted_sum(r, fig):
    e = r["example"]
    terms = [n for i in range(3) for n in (f"{e['weights'][i]:.3f}", *_g(e["values"][i]))]
    return [*terms, *(f"{v:.3f}" for v in e["output"])]


def _exponent(value):
    """The n of "a few times 10^-n": the value is between 10^-n and 10^-(n - 1)."""
    if value <= 0:
        return "no rounding at all"
    n = 0
    while value < 1:
        value, n = value * 10, n + 1
    return str(n)


def _depth(r, name):
    return r["depth"][name]


def _smoothed(r, name, step):
    return r["smoothed_loss"][name][str(step)]


CLAIMS = [
    # The worked example: one query, three keys.
    (
        "width $d = 4$ (so $\\sqrt d = 2$), three keys, and values of width 2",
        lambda r, fig: [
            str(len(r["example"]["query"])),
            f"{len(r['example']['query']) ** 0.5:g}",
            str(len(r["example"]["values"][0])),
        ],
    ),
    ("| $q$ | (1, 1, 0, 1) |", lambda r, fig: _g(r["example"]["query"])),
    ("| $k_1$ | (2, 1, 0, 1) | 4 | 2 | 7.389 | 0.547 | (1, 0) |", _key_row(0)),
    ("| $k_2$ | (0, 1, 1, 0) | 1 | 0.5 | 1.649 | 0.122 | (0, 1) |", _key_row(1)),
    ("| $k_3$ | (1, 0, 2, 2) | 3 | 1.5 | 4.482 | 0.331 | (1, 1) |", _key_row(2)),
    ("by their sum, 13.519.", lambda r, fig: f"{r['example']['exponential_sum']:.3f}"),
    (
        "$0.547 \\cdot (1, 0) + 0.122 \\cdot (0, 1) + 0.331 \\cdot (1, 1) = (0.878, 0.453)$",
        _weighted_sum,
    ),
    (
        "softened the scores 4 : 1 : 3 into 2 : 0.5 : 1.5 before",
        lambda r, fig: [*_g(r["example"]["dots"]), *_g(r["example"]["scaled"])],
    ),
    # Single head and multi-head attention by hand.
    (
        "With $D = d = 16$, $\\sqrt d = 4$ and dividing by 4 is the same operation as the library's multiplication "
        "by `scaling` $= 1/4$",
        lambda r, fig: [
            str(r["single_head_size"]["D"]),
            f"{r['single_head_size']['D'] ** 0.5:g}",
            f"{r['single_head_size']['D'] ** 0.5:g}",
            "1",
            f"{r['single_head_size']['D'] ** 0.5:g}",
        ],
    ),
    ("Against the eager backend the difference is **0.0**", lambda r, fig: str(r["single_head_eager_max_abs"])),
    (
        "Against SDPA it is float rounding, a few times $10^{-8}$",
        lambda r, fig: ["10", _exponent(r["single_head_sdpa_max_abs"])],
    ),
    (
        "Here $D = 16$, $H = 4$, $d = 4$",
        lambda r, fig: [
            str(r["single_head_size"]["D"]),
            str(r["heads"]),
            str(r["single_head_size"]["D"] // r["heads"]),
        ],
    ),
    # The convolution analogy, tied projections.
    (
        "Measured, with $D = 16$ channels and $T = 10$ positions",
        lambda r, fig: [str(r["single_head_size"]["D"]), str(r["conv_positions"])],
    ),
    (
        "on random inputs ($T = 10$ tokens, $D = 32$, 4 heads)",
        lambda r, fig: [str(r["tied_size"]["T"]), str(r["tied_size"]["D"]), str(r["tied_size"]["heads"])],
    ),
    ("chance ($1/T = 0.1$)", lambda r, fig: ["1", f"{r['uniform_weight']:g}"]),
    # Dropout on the attention weights.
    (
        "Measured with the library's 4-head layer from above, given $p = 0.1$",
        lambda r, fig: [str(r["heads"]), f"{r['dropout']['p']:g}"],
    ),
    (
        "In training mode a share 0.100 of the weights is dropped ($p = 0.1$), and each kept weight is the eval "
        "weight divided by $1 - p$",
        lambda r, fig: [f"{r['dropout']['dropped_share']:.3f}", f"{r['dropout']['p']:g}", "1"],
    ),
    (
        "So a row no longer sums to 1: a row that lost nothing sums to $1/(1 - p) = 1.11$, one that lost a large "
        "weight much less (down to 0.176 here); the row sums have a standard deviation of 0.145.",
        lambda r, fig: [
            "1",
            "1",
            "1",
            f"{r['dropout']['row_sum_max']:.2f}",
            f"{r['dropout']['row_sum_min']:.3f}",
            f"{r['dropout']['row_sum_std']:.3f}",
        ],
    ),
    ("Their mean is 1.000: dividing by $1 - p$", lambda r, fig: [f"{r['dropout']['row_sum_mean']:.3f}", "1"]),
    (
        "output is off by 0.036 on average (its entries average 0.187 in size); the mean over the 2000 copies is "
        "off by at most 0.004.",
        lambda r, fig: [
            f"{r['dropout']['output_one_copy_mean_abs']:.3f}",
            f"{r['dropout']['output_scale_mean_abs']:.3f}",
            str(r["dropout"]["copies"]),
            f"{r['dropout']['output_mean_max_abs']:.3f}",
        ],
    ),
    # LayerNorm per token, not per sentence.
    ("random sentences of width $D = 16$", lambda r, fig: str(r["norm_sentence"]["D"])),
    (
        "the same 5-token sentence alone and padded to 8 rows",
        lambda r, fig: [str(r["norm_sentence"]["tokens"]), str(r["norm_sentence"]["padded"])],
    ),
    # The deep stack at initialisation.
    (
        "Stack 24 such layers ($D = 32$, 4 heads, random weights, random inputs of 10 tokens)",
        lambda r, fig: [str(r["depth_size"][k]) for k in ("layers", "D", "heads", "tokens")],
    ),
    (
        "(similarity 1.000), reached within two layers",
        lambda r, fig: (
            f"{min(_depth(r, n)['similarity'][-1] for n in ('post-norm, no residual', 'pre-norm, no residual')):.3f}"
        ),
    ),
    (
        "0.00 at the input, reaches 0.91 at layer 24 in post-norm, 0.90 with residuals and no norm, and 0.66 in "
        "pre-norm.",
        lambda r, fig: [
            f"{abs(_depth(r, 'post-norm')['similarity'][0]):.2f}",
            f"{_depth(r, 'post-norm')['similarity'][-1]:.2f}",
            str(len(_depth(r, "post-norm")["similarity"]) - 1),
            f"{_depth(r, 'residual, no norm')['similarity'][-1]:.2f}",
            f"{_depth(r, 'pre-norm')['similarity'][-1]:.2f}",
        ],
    ),
    (
        "the hidden states keep a standard deviation of 1 at every depth",
        lambda r, fig: f"{max(_depth(r, 'post-norm')['std'][1:]):.0f}",
    ),
    (
        "each layer's gradient is 98 to 941 times that of the same layer",
        lambda r, fig: [f"{v:.0f}" for v in r["no_norm_gradient_ratio"]],
    ),
    (
        "(std about 2 at the top)",
        lambda r, fig: f"{_depth(r, 'pre-norm')['std'][-1]:.0f}",
    ),
    ("In the 24-layer stack", lambda r, fig: str(r["depth_size"]["layers"])),
    # The reverse task.
    ("read 10 random digits", lambda r, fig: str(r["model"]["length"])),
    ("the digit at position $9 - i$", lambda r, fig: str(r["model"]["length"] - 1)),
    (
        "2 post-norm encoder layers ($D = 32$, 4 heads, FFN width 128)",
        lambda r, fig: [str(r["model"][k]) for k in ("layers", "width", "heads", "ffn_width")],
    ),
    ("| attention dropout | dropout with $p = 0.1$", lambda r, fig: f"{r['dropout']['p']:g}"),
    ("right 10% of the time", lambda r, fig: f"{100 * r['chance']:.0f}"),
    ("What the full run (400 steps, three seeds)", lambda r, fig: str(r["steps"])),
    ("(about 0.28 of the digits)", lambda r, fig: f"{r['bag_of_tokens_ceiling']:.2f}"),
    (
        "varies from seed to seed (0.36 to 0.64)",
        lambda r, fig: [
            f"{min(r['reverse']['no residuals']['token']):.2f}",
            f"{max(r['reverse']['no residuals']['token']):.2f}",
        ],
    ),
    (
        "its loss is 1.18 at step 100, where the full model's is 0.17",
        lambda r, fig: [
            f"{_smoothed(r, 'reverse: no feed-forward', 100):.2f}",
            "100",
            f"{_smoothed(r, 'reverse: full', 100):.2f}",
        ],
    ),
    ("to share out the pairs $(i, 9-i)$", lambda r, fig: str(r["model"]["length"] - 1)),
    (
        "**With attention dropout** ($p = 0.1$) its lowest test accuracy over the seeds is 1.000 on digits and 1.000 "
        "on whole sequences, and its training loss, measured with the dropout on, ends at 0.003 like the full "
        "model's (0.003).",
        lambda r, fig: [
            f"{r['dropout']['p']:g}",
            f"{min(r['reverse']['attention dropout']['token']):.3f}",
            f"{min(r['reverse']['attention dropout']['sequence']):.3f}",
            f"{sum(r['reverse']['attention dropout']['final_loss']) / len(r['seeds']):.3f}",
            f"{sum(r['reverse']['full']['final_loss']) / len(r['seeds']):.3f}",
        ],
    ),
    # The mirror sum.
    ("output $(x_i + x_{9-i}) \\bmod 10$", lambda r, fig: [str(r["model"]["length"] - 1), "10"]),
    (
        "In the full run (800 steps, three seeds) the full model gets every digit right and at least 99.8% of the "
        "whole sequences.",
        lambda r, fig: [str(r["mirror_sum_steps"]), f"{100 * min(r['mirror_sum']['full']['sequence']):.1f}"],
    ),
    (
        "it ends with 22% to 34% of the digits wrong and at most 8.2% of the sequences right",
        lambda r, fig: [
            f"{100 * (1 - max(r['mirror_sum']['no feed-forward']['token'])):.0f}",
            f"{100 * (1 - min(r['mirror_sum']['no feed-forward']['token'])):.0f}",
            f"{100 * max(r['mirror_sum']['no feed-forward']['sequence']):.1f}",
        ],
    ),
    (
        "Its loss (mean over seeds) was 1.56 at step 400, 0.90 at step 600 and 0.78 at step 800, where the full "
        "model's was already 0.02 at step 400.",
        lambda r, fig: [
            f"{_smoothed(r, 'mirror sum: no feed-forward', 400):.2f}",
            "400",
            f"{_smoothed(r, 'mirror sum: no feed-forward', 600):.2f}",
            "600",
            f"{_smoothed(r, 'mirror sum: no feed-forward', r['mirror_sum_steps']):.2f}",
            str(r["mirror_sum_steps"]),
            f"{_smoothed(r, 'mirror sum: full', 400):.2f}",
            "400",
        ],
    ),
    ("It slows down in the last 200 steps", lambda r, fig: str(r["mirror_sum_steps"] - 600)),
    # Answer 6 reads a number measured in the section on LayerNorm per sentence.
    (
        "A later token still moves position 0 (by 0.11, as before)",
        lambda r, fig: ["0", f"{r['norm_dependence']['per sentence']['future_token']:.2g}"],
    ),
]

GIVEN = [
    # Titles, cross-references, citations.
    ("07 · A Transformer block by hand", "the tutorial's number"),
    ("Tutorials 03 to 06", "cross-reference"),
    ("encoder layer of the 2017 Transformer (Vaswani et al. 2017 §3)", "citation"),
    ("Left, the 2017 encoder layer", "citation"),
    ("unit variance (tutorial 04)", "cross-reference"),
    ("from the library (tutorial 04)", "cross-reference"),
    ("with biases as in the 2017 model", "citation"),
    ("(Cordonnier, Loukas & Jaggi 2020 show the general case: with $k^2$ heads", "citation and its result"),
    ("where attention without positions is (tutorial 05)", "cross-reference"),
    ("(Vaswani et al. 2017 §3.3) supplies that: $\\mathrm{FFN}(x) = \\max(0, xW_1 + b_1)", "citation, formula"),
    ("(the 2017 paper drops sublayer outputs; BERT and GPT-2 drop", "citation"),
    ("Pre-norm (GPT-2, Llama)", "model names"),
    ("(Ba et al. 2016)", "citation"),
    ("(Dong et al. 2021 call this rank collapse)", "citation"),
    ("why the 2017 recipe needs a learning-rate warm-up", "citation"),
    ("(Xiong et al. 2020)", "citation"),
    ("depends on the order of the rows (tutorial 05)", "cross-reference"),
    ("permutation-equivariant, tutorial 05)", "cross-reference"),
    ("can express (exercise 3)", "cross-reference"),
    ("[08 · why attention]", "link to the next tutorial"),
    # Definitions and formulas.
    ("rescales each token's vector to mean 0 and variance 1; details below", "definition of LayerNorm"),
    ("token's vector to mean 0 and variance 1 over its $D$ features", "definition of LayerNorm"),
    ("\\sqrt{\\sigma^2 + \\varepsilon}", "formula"),
    ("$\\sigma^2$ the mean and (biased) variance", "formula"),
    ("a few units of $10^{-7}$ in float32 for values near 1", "float32 precision (machine epsilon 1.2e-7)"),
    ("with $d = 8$ the two would round differently", "a width where 1/√d is not a power of two (exercise 1)"),
    ("$W_o$ is a $1 \\times 1$ convolution that mixes", "a pointwise convolution's kernel size"),
    ("1. Every projection of the layer", "list number"),
    ("is a **$1 \\times 1$ convolution**", "a pointwise convolution's kernel size"),
    ("`nn.Conv1d(D, D, kernel_size=1)`", "a pointwise convolution's kernel size"),
    ("2. A convolution with a kernel of $k$ taps", "list number"),
    ("offset $h - (k - 1)/2$: with a single allowed key its weight is 1", "formula; a softmax over one key"),
    ("3. Where the analogy breaks", "list number"),
    ("$s_{ii} = \\lVert a_i\\rVert^2 \\ge 0$", "formula"),
    ("Every row of $A$ is non-negative and sums to 1", "definition of the softmax"),
    ("a $1 \\times D$ product", "a single row"),
    ("every weight is set to 0 with probability $p$ and the kept ones are divided by $1 - p$", "dropout's definition"),
    ("the layer norm's gain and bias at 1 and 0", "LayerNorm's initial gain and bias"),
    ("in a decoder, position 0 must not depend", "the first position"),
    ("compare position 0;", "the first position"),
    ("pull the mean towards 0", "the pad rows are zeros"),
    ("a later token leaks into position 0", "the first position"),
    ("(0 for unrelated random vectors, 1 when every position holds the same vector)", "the cosine's range"),
    ("a linear layer to 10 digit logits", "ten digits"),
    ("a table of 100 entries", "ten digits by ten digits"),
    ("takes the learning rate towards 0", "the one-cycle schedule's end"),
    ("The projections are $1 \\times 1$ convolutions", "a pointwise convolution's kernel size"),
    # Exercises and answers: their own settings and the algebra of the answers.
    ("1. Give every head the width $d = 8$ ($D = 32$, $H = 4$)", "the exercise's setting"),
    ("2. Show that with $W_k = W_q$", "list number"),
    ("$u^\\top S u \\ge 0$ for every vector", "formula"),
    ("3. Why can no model", "list number"),
    ("$(0, 0)$, $(5, 5)$, $(0, 5)$, $(5, 0)$", "the exercise's digit pairs"),
    ("4. Without positions the reverse model", "list number"),
    ("5. In the 24-layer stack", "list number"),
    ("6. Normalise per sentence", "list number"),
    (
        "7. Write a 5-tap convolution (`nn.Conv1d(D, D, kernel_size=5, padding=2)`) as a multi-head attention, and a "
        "3-tap convolution with dilation 2.",
        "the exercise's setting",
    ),
    (
        "1. $1/\\sqrt 8$ is not a power of two: the hand version divides by the rounded $\\sqrt 8$, the library "
        "multiplies by the rounded $8^{-1/2}$",
        "the answer's arithmetic",
    ),
    ("Writing `* K.shape[-1] ** -0.5` instead of `/ math.sqrt(K.shape[-1])`", "code"),
    ("2. $S = AA^\\top$ with $A = XW + \\mathbf 1 b^\\top$", "formula"),
    ("\\lVert A^\\top u\\rVert^2 \\ge 0$", "formula"),
    ("3. A linear classifier on $\\alpha e(a) + (1 - \\alpha) e(b)$", "formula"),
    (
        "To answer $(0,0) \\mapsto 0$ and $(5,5) \\mapsto 0$ the sum $f_0(0) + g_0(0) + f_0(5) + g_0(5)$ must exceed "
        "the same sum for class 5; to answer $(0,5) \\mapsto 5$ and $(5,0) \\mapsto 5$",
        "the answer's algebra",
    ),
    ("4. Copying needs no positions", "list number"),
    ("can reach 100%", "copying is exact"),
    ("5. In the final LayerNorm", "list number"),
    ("6. Only padding", "list number"),
    ("7. Five heads whose masks allow the offsets $-2, -1, 0, 1, 2$ (head $h$: key $j = i + h - 2$)", "the answer"),
    ("Dilation 2 with 3 taps: three heads with offsets $-2, 0, 2$", "the answer"),
]
