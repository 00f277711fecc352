"""The numbers of tutorial 07's prose (a Transformer block by hand), tied to what its full run measured.

`r` is docs/figures/07_results.json, `fig(name)` the arrays of docs/figures/NAME.npz.
"""


def _g(values):
    """Whole numbers as the prose writes them (4, not 4.0); others with up to 6 significant digits."""
    return list(values)


def _key_row(i):
    """A row of the worked example's table: the key, q·k, /√d, the exponential, the weight, the value."""

    def numbers(r, fig):
        e = r["example"]
        return [
            *_g(e["keys"][i]),
            e["dots"][i],
            e["scaled"][i],
            e["exponentials"][i],
            e["weights"][i],
            *_g(e["values"][i]),
        ]

    return numbers


def _weighted_sum(r, fig):
    e = r["example"]
    terms = [n for i in range(3) for n in (e["weights"][i], *_g(e["values"][i]))]
    return [*terms, *(v for v in e["output"])]


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


NO_RESIDUAL = ("post-norm, no residual", "pre-norm, no residual")


def _collapsed_at(r, name):
    """The first layer whose positions' similarity reads 1.000 (the prose's rounding), 0 for the input."""
    return next(i for i, s in enumerate(_depth(r, name)["similarity"]) if round(s, 3) == 1)


def _grows(r, name, word):
    """`word` ("grows"/"grow") if the hidden states' std at the top is over 1.5 times the input's, else "stays"."""
    std = _depth(r, name)["std"]
    return word if std[-1] > 1.5 * std[0] else "stays"


def _gradient_spread(r, name):
    """How unequal a stack's gradients are across depth: the largest layer's over the smallest layer's."""
    gradient = _depth(r, name)["gradient"]
    return max(gradient) / min(gradient)


def _less_spread(r):
    return "less" if _gradient_spread(r, "pre-norm") < _gradient_spread(r, "post-norm") else "more"


CLAIMS = [
    # The worked example: one query, three keys.
    (
        "width $d = 4$ (so $\\sqrt d = 2$), three keys, and values of width 2",
        lambda r, fig: [
            str(len(r["example"]["query"])),
            len(r["example"]["query"]) ** 0.5,
            len(r["example"]["keys"]),
            str(len(r["example"]["values"][0])),
        ],
    ),
    ("| $q$ | (1, 1, 0, 1) |", lambda r, fig: _g(r["example"]["query"])),
    ("| $k_1$ | (2, 1, 0, 1) | 4 | 2 | 7.389 | 0.547 | (1, 0) |", _key_row(0)),
    ("| $k_2$ | (0, 1, 1, 0) | 1 | 0.5 | 1.649 | 0.122 | (0, 1) |", _key_row(1)),
    ("| $k_3$ | (1, 0, 2, 2) | 3 | 1.5 | 4.482 | 0.331 | (1, 1) |", _key_row(2)),
    ("by their sum, 13.519.", lambda r, fig: r["example"]["exponential_sum"]),
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
            r["single_head_size"]["D"] ** 0.5,
            r["single_head_size"]["D"] ** 0.5,
            "1",
            r["single_head_size"]["D"] ** 0.5,
        ],
    ),
    ("Against the eager backend the difference is **0.0**", lambda r, fig: r["single_head_eager_max_abs"]),
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
    ("chance ($1/T = 0.1$)", lambda r, fig: ["1", r["uniform_weight"]]),
    # Dropout on the attention weights.
    (
        "Measured with the library's 4-head layer from above, given $p = 0.1$",
        lambda r, fig: [str(r["heads"]), r["dropout"]["p"]],
    ),
    (
        "In training mode a share 0.100 of the weights is dropped ($p = 0.1$), and each kept weight is the eval "
        "weight divided by $1 - p$",
        lambda r, fig: [r["dropout"]["dropped_share"], r["dropout"]["p"], "1"],
    ),
    (
        "So a row no longer sums to 1: a row that lost nothing sums to $1/(1 - p) = 1.11$, one that lost a large "
        "weight much less (down to 0.176 here); the row sums have a standard deviation of 0.145.",
        lambda r, fig: [
            "1",
            "1",
            "1",
            r["dropout"]["row_sum_max"],
            r["dropout"]["row_sum_min"],
            r["dropout"]["row_sum_std"],
        ],
    ),
    ("Their mean is 1.000: dividing by $1 - p$", lambda r, fig: [r["dropout"]["row_sum_mean"], "1"]),
    (
        "output is off by 0.036 on average (its entries average 0.187 in size); the mean over the 2000 copies is "
        "off by at most 0.004.",
        lambda r, fig: [
            r["dropout"]["output_one_copy_mean_abs"],
            r["dropout"]["output_scale_mean_abs"],
            str(r["dropout"]["copies"]),
            r["dropout"]["output_mean_max_abs"],
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
        "both stacks end with their 10 positions holding the *same* vector (similarity 1.000), reached within two "
        "layers",
        lambda r, fig: [
            r["depth_size"]["tokens"],
            min(_depth(r, n)["similarity"][-1] for n in NO_RESIDUAL),
            max(_collapsed_at(r, n) for n in NO_RESIDUAL),
        ],
    ),
    (
        "0.00 at the input, reaches 0.91 at layer 24 in post-norm, 0.90 with residuals and no norm, and 0.66 in "
        "pre-norm.",
        lambda r, fig: [
            abs(_depth(r, "post-norm")["similarity"][0]),
            _depth(r, "post-norm")["similarity"][-1],
            str(len(_depth(r, "post-norm")["similarity"]) - 1),
            _depth(r, "residual, no norm")["similarity"][-1],
            _depth(r, "pre-norm")["similarity"][-1],
        ],
    ),
    (
        "the hidden states keep a standard deviation of 1 at every depth",
        lambda r, fig: [
            max(_depth(r, "post-norm")["std"][1:]),
            "every" if all(round(s) == 1 for s in _depth(r, "post-norm")["std"][1:]) else "not every",
        ],
    ),
    (
        "each layer's gradient is 98 to 941 times that of the same layer",
        lambda r, fig: list(r["no_norm_gradient_ratio"]),
    ),
    (
        "the pre-norm hidden states grow with depth (std about 2 at the top)",
        lambda r, fig: [_grows(r, "pre-norm", "grow"), _depth(r, "pre-norm")["std"][-1]],
    ),
    ("In the 24-layer stack", lambda r, fig: str(r["depth_size"]["layers"])),
    # The reverse task.
    ("read 10 random digits", lambda r, fig: str(r["model"]["length"])),
    ("the digit at position $9 - i$", lambda r, fig: str(r["model"]["length"] - 1)),
    (
        "2 post-norm encoder layers ($D = 32$, 4 heads, FFN width 128)",
        lambda r, fig: [str(r["model"][k]) for k in ("layers", "width", "heads", "ffn_width")],
    ),
    ("| attention dropout | dropout with $p = 0.1$", lambda r, fig: r["dropout"]["p"]),
    ("right 10% of the time", lambda r, fig: 100 * r["chance"]),
    ("What the full run (400 steps, three seeds)", lambda r, fig: [str(r["steps"]), len(r["seeds"])]),
    ("(about 0.28 of the digits)", lambda r, fig: r["bag_of_tokens_ceiling"]),
    (
        "varies from seed to seed (0.36 to 0.64)",
        lambda r, fig: [
            min(r["reverse"]["no residuals"]["token"]),
            max(r["reverse"]["no residuals"]["token"]),
        ],
    ),
    (
        "its loss is 1.18 at step 100, where the full model's is 0.17",
        lambda r, fig: [
            _smoothed(r, "reverse: no feed-forward", 100),
            "100",
            _smoothed(r, "reverse: full", 100),
        ],
    ),
    ("to share out the pairs $(i, 9-i)$", lambda r, fig: str(r["model"]["length"] - 1)),
    (
        "**With attention dropout** ($p = 0.1$) its lowest test accuracy over the seeds is 1.000 on digits and 1.000 "
        "on whole sequences, and its training loss, measured with the dropout on, ends at 0.003 like the full "
        "model's (0.003).",
        lambda r, fig: [
            r["dropout"]["p"],
            min(r["reverse"]["attention dropout"]["token"]),
            min(r["reverse"]["attention dropout"]["sequence"]),
            sum(r["reverse"]["attention dropout"]["final_loss"]) / len(r["seeds"]),
            sum(r["reverse"]["full"]["final_loss"]) / len(r["seeds"]),
        ],
    ),
    # The mirror sum.
    ("output $(x_i + x_{9-i}) \\bmod 10$", lambda r, fig: [str(r["model"]["length"] - 1), "10"]),
    (
        "In the full run (800 steps, three seeds) the full model gets at least 99.98% of the digits and 99.8% of the "
        "whole sequences right.",
        lambda r, fig: [
            str(r["mirror_sum_steps"]),
            len(r["seeds"]),
            100 * min(r["mirror_sum"]["full"]["token"]),
            100 * min(r["mirror_sum"]["full"]["sequence"]),
        ],
    ),
    (
        "it ends with 22% to 34% of the digits wrong and at most 8.2% of the sequences right",
        lambda r, fig: [
            100 * (1 - max(r["mirror_sum"]["no feed-forward"]["token"])),
            100 * (1 - min(r["mirror_sum"]["no feed-forward"]["token"])),
            100 * max(r["mirror_sum"]["no feed-forward"]["sequence"]),
        ],
    ),
    (
        "Its loss (mean over seeds) was 1.56 at step 400, 0.90 at step 600 and 0.78 at step 800, where the full "
        "model's was already 0.02 at step 400.",
        lambda r, fig: [
            _smoothed(r, "mirror sum: no feed-forward", 400),
            "400",
            _smoothed(r, "mirror sum: no feed-forward", 600),
            "600",
            _smoothed(r, "mirror sum: no feed-forward", r["mirror_sum_steps"]),
            str(r["mirror_sum_steps"]),
            _smoothed(r, "mirror sum: full", 400),
            "400",
        ],
    ),
    ("It slows down in the last 200 steps", lambda r, fig: str(r["mirror_sum_steps"] - 600)),
    # Answer 6 reads a number measured in the section on LayerNorm per sentence.
    (
        "A later token still moves position 0 (by 0.11, as before)",
        lambda r, fig: ["0", r["norm_dependence"]["per sentence"]["future_token"]],
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

CLAIMS += [
    (
        "takes more than half the weight",
        lambda r, fig: ["more" if r["example"]["weights"][0] > 0.5 else "less", "half"],
    ),
    # One row at a time through the FFN: the same function, but the bits differed somewhere in the full run.
    ("but not always the same bits", lambda r, fig: "always" if r["ffn_row_by_row_max_abs"] > 0 else "in fact always"),
    (
        "Per token, none of the four changes a single bit of the outputs compared",
        lambda r, fig: [
            "none" if all(v == 0 for v in r["norm_dependence"]["per token"].values()) else "some",
            len(r["norm_dependence"]["per token"]),
        ],
    ),
    (
        "Per sentence, all three that apply to it move the outputs compared (by up to 0.71, 0.11 and 0.11)",
        lambda r, fig: [
            "all" if all(v > 0 for v in r["norm_dependence"]["per sentence"].values()) else "not all",
            len(r["norm_dependence"]["per sentence"]),
            *r["norm_dependence"]["per sentence"].values(),
        ],
    ),
    ("for five variants", lambda r, fig: len(r["depth"])),
    ("so it grows with depth (hence", lambda r, fig: _grows(r, "pre-norm", "grows")),
    (
        "Its gradients are not equal across depth either (the first layer's is 1.63 times the last layer's), but they "
        "vary less than post-norm's: a factor of 1.68 from the smallest to the largest of its 24 layers, against 5.36 "
        "in post-norm",
        lambda r, fig: [
            _depth(r, "pre-norm")["gradient_first_over_last"],
            _less_spread(r),
            _gradient_spread(r, "pre-norm"),
            str(r["depth_size"]["layers"]),
            _gradient_spread(r, "post-norm"),
        ],
    ),
    (
        "(the first layer gets 0.19 of what the last one gets)",
        lambda r, fig: _depth(r, "post-norm")["gradient_first_over_last"],
    ),
    (
        "Without any norm the stream grows fastest",
        lambda r, fig: (
            _grows(r, "residual, no norm", "grows")
            if _depth(r, "residual, no norm")["std"][-1]
            > max(_depth(r, n)["std"][-1] for n in ("post-norm", "pre-norm"))
            else "not fastest"
        ),
    ),
    ("can do better than chance", lambda r, fig: "better" if r["bag_of_tokens_ceiling"] > r["chance"] else "worse"),
    (
        "the bag of its 10 digits, so its best guess is the most frequent digit among the other 9.",
        lambda r, fig: [str(r["model"]["length"]), str(r["model"]["length"] - 1)],
    ),
    (
        "The **full** model reverses every test sequence, with every seed.",
        lambda r, fig: ["every" if min(r["reverse"]["full"]["sequence"]) == 1 else "not every"] * 2,
    ),
    (
        "and never gets a whole sequence right",
        lambda r, fig: "never" if max(r["reverse"]["no positions"]["sequence"]) == 0 else "sometimes",
    ),
    (
        "but at most 0.05% of the whole sequences are right",
        lambda r, fig: 100 * max(r["reverse"]["no residuals"]["sequence"]),
    ),
    (
        "the 24-layer stack above needed its norms, and a stack of 2 layers",
        lambda r, fig: [str(r["depth_size"]["layers"]), str(r["model"]["layers"])],
    ),
    (
        "the model has 4 heads in each of 2 layers",
        lambda r, fig: [str(r["model"]["heads"]), str(r["model"]["layers"])],
    ),
    ("with gradients that vary less across depth than post-norm's", lambda r, fig: _less_spread(r)),
    ("statistics over the 5 real tokens", lambda r, fig: str(r["norm_sentence"]["tokens"])),
]

GIVEN += [
    ("Three terms first.", "the number of terms the list below defines"),
    ("and never stores the $T \\times T$ weights", "what the fused kernel is (its design)"),
    ("are the two places for LayerNorm", "definition: post-norm and pre-norm"),
    ("Two programs that compute the same formula", "float arithmetic's rule"),
    ("Three learned matrices of shape", "definition: W_q, W_k, W_v"),
    ("table of dot products between every query and every key", "definition of QKᵀ"),
    ("takes from every token", "definition of a row of A"),
    ("Every number below is computed by the next cell.", "what the cell does"),
    ("to the library's two attention functions", "the two functions named next"),
    ("that every multi-head layer has", "definition of MultiHeadAttention"),
    ("That is not a promise for every CPU", "a caveat, not a measurement"),
    ("and the two then differ by float32 rounding", "the two layouts just named; a caveat"),
    ("then one product for all heads", "what the code does"),
    ("and the FFN's two) is a", "the FFN's two projections"),
    ("the same linear map at every position", "definition of a 1 × 1 convolution"),
    ("copies the token into every head, `o_proj` holds the three taps side by side", "the cell's 3-tap construction"),
    ("with the same weights for every input", "definition of a convolution"),
    ("Two more differences the picture", "the two differences listed next"),
    ("for every pair of input and output channels", "definition of a convolution's tap"),
    ("shared by all $d$ channels", "definition of a head"),
    ("## Why two matrices", "W_q and W_k"),
    ("Tie the two,", "W_q and W_k"),
    ("Then, in every head,", "the algebra of tied projections"),
    ("two tokens can never *both* prefer", "the algebra of tied projections"),
    ("(swap two words, or reverse", "an example of a task"),
    ("so every output row of $AV$", "the algebra of the softmax"),
    ("applied to every row separately", "definition of the position-wise FFN"),
    ("keeps every weight, hence the output, right *on average*", "dropout's expectation: E[mask] / (1 - p) = 1"),
    ("makes two passes", "what the hand-written code does"),
    ("all its $T \\times D$ numbers together", "definition of a per-sentence norm"),
    ("and three measurements show why", "the three bullets below"),
    ("a batch of two and compare", "the cell's setting"),
    ("with its two blocks", "EncoderLayer's two blocks, named next"),
    ("Three measurements per layer:", "the three bullets below"),
    ("the vectors of two different tokens", "definition of the measure"),
    ("pass back through every layer", "the chain rule without residuals"),
    ("so each layer replaces every token by nearly the same average", "the mechanism of rank collapse (Dong et al.)"),
    ("Post-norm ends every layer with a LayerNorm", "definition of post-norm"),
    ("Pre-norm never normalises the main stream", "definition of pre-norm"),
    ("every layer *adds* to it", "definition of pre-norm"),
    ("every layer's key projection is its query projection", "definition of the variant"),
    ("Two yardsticks.", "the two named next"),
    ("The tied algebra forbids two positions", "the algebra of tied projections"),
    ("with fresh random batches at every step", "the training setup"),
    ("but now two digits gathered", "definition of the task"),
    ("and no two tokens can favour each other", "the algebra of tied projections, above"),
    ("post-norm at every layer's output, pre-norm at every sublayer's input", "definitions"),
    ("of the two digits' vectors", "the exercise's setting"),
    ("look at the four digit pairs", "the exercise's hint"),
    ("Which of the three problems", "the three problems above"),
    ("and the two differ in the last bit", "the answer's arithmetic"),
    ("and the two four-term sums", "the answer's algebra"),
    ("every operation of the encoder", "the answer's argument"),
    ("a sum over all positions", "the answer's argument"),
    ("Every position with the same digit", "the answer's argument"),
    ("a different normaliser for every position", "the answer's argument"),
    ("five stacked identities, `o_proj` the five taps", "the exercise's 5-tap convolution"),
]

# The self-test's answers: measured numbers as claims, definitions and algebra as given.
CLAIMS += [
    (
        "at least 99.8% of the whole sequences right, the model without FFN at most 8.2% after 800 steps",
        lambda r, fig: [
            100 * min(r["mirror_sum"]["full"]["sequence"]),
            100 * max(r["mirror_sum"]["no feed-forward"]["sequence"]),
            str(r["mirror_sum_steps"]),
        ],
    ),
    (
        "tied, 0.87 of the rows put their largest weight on the token itself, against 0.10 untied",
        lambda r, fig: [r["tied_argmax_on_self"], r["untied_argmax_on_self"]],
    ),
    (
        "padding moved the real tokens by up to 0.71, a changed last token moved position 0 by 0.11 (a decoder could "
        "read the future through the norm), and an appended token moved the first ones by 0.11; per token, none of "
        "these changed a bit.",
        lambda r, fig: [
            r["norm_dependence"]["per sentence"]["padding"],
            "0",
            r["norm_dependence"]["per sentence"]["future_token"],
            r["norm_dependence"]["per sentence"]["appended_token"],
            "none" if all(v == 0 for v in r["norm_dependence"]["per token"].values()) else "some",
        ],
    ),
    (
        "Without residuals the positions collapse onto one vector, similarity 1.000 within two layers",
        lambda r, fig: [
            min(_depth(r, n)["similarity"][-1] for n in NO_RESIDUAL),
            max(_collapsed_at(r, n) for n in NO_RESIDUAL),
        ],
    ),
    (
        "its layers' gradients differ by a factor of 1.68 at most, post-norm's by 5.36.",
        lambda r, fig: [_gradient_spread(r, "pre-norm"), _gradient_spread(r, "post-norm")],
    ),
    (
        "about 0.28 of the digits, and never gets a sequence right; without residuals at most 0.05% of the sequences",
        lambda r, fig: [
            r["bag_of_tokens_ceiling"],
            "never" if max(r["reverse"]["no positions"]["sequence"]) == 0 else "sometimes",
            100 * max(r["reverse"]["no residuals"]["sequence"]),
        ],
    ),
]
GIVEN += [
    ("would round differently (exercise 1)", "cross-reference"),
    ("A row of $A$ is non-negative and sums to 1, so an output row", "the softmax's definition"),
    ("(*Why two matrices, $W_q \\ne W_k$?*)", "a section's title"),
    ("and no two tokens favour each other", "the algebra of tied projections"),
]
