"""The numbers of tutorial 08's prose, tied to its full run (docs/figures/08_results.json and 08_*.npz).

Which of them come from timings (noisy on a busy machine; the text states them derived and rounded): the growth
exponents of the time ("eager's time grows as n^1.9 and SDPA's as n^2.0") and the eager/SDPA time ratio ("about 3
times as long"), all from `time_exponent` and `eager_over_sdpa_time_at_longest`. The benchmark's numbers are timings
too, but of the committed benchmarks/results/full.json, which the tutorial only reads.
"""


def multiply_adds(r, layer, n, d):
    a, b = r["multiply_add_constants"][layer]
    return n * d * (a * d + b * n)


def crossover_from_constants(r, a):
    """The length at which attention costs as much as a recurrent layer of a·nd² multiply-adds: (a - 4) d / 2."""
    a_attention, b_attention = r["multiply_add_constants"]["self_attention"]
    return (a - a_attention) * r["d_for_costs"] / b_attention


def window_over_lstm(r, window):
    """The cost of attention restricted to `window` keys per query over an LSTM's: (4 + 2r/d) / 8, whatever n."""
    return (r["multiply_add_constants"]["self_attention"][0] + 2 * window / r["d_for_costs"]) / r[
        "multiply_add_constants"
    ]["lstm"][0]


def constant(r, layer, which=0):
    return r["multiply_add_constants"][layer][which]


def feed_forward_over_attention(r, n: int) -> float:
    """A feed-forward block's 8nd² (inner width 4d: two n×d by d×4d products) over the attention layer's count."""
    return 8 * n * r["d_for_costs"] ** 2 / multiply_adds(r, "self_attention", n, r["d_for_costs"])


def table_lengths(r) -> list[int]:
    return [int(n) for n in r["cost_ratio_attention_over_lstm"]]


def grows(ratio: float, word: str = "grows") -> str:
    """The trend word when a quantity measured at the longest length is above its value at a shorter one."""
    return word if ratio > 1 else "does not grow"


CLAIMS = [
    # The exact counts (their constants are glued to letters, so not numbers of the prose) are in GIVEN.
    (
        # "grow with n²": the eager backend's memory, fitted over the three longest lengths, grows as n^2 (to one
        # decimal); the time follows it (section "The price")
        "memory that grow with $n^2$.",
        lambda r, fig: [
            grows(r["memory_per_doubling_at_longest"]["eager"], "grow"),
            round(r["memory_exponent"]["eager"]),
        ],
    ),
    ("With $d = 512$, the width", lambda r, fig: r["d_for_costs"]),
    (
        # "every": no crossover with a vanilla RNN (crossover None: attention is dearer at any n); "twice": 4d² / 2d²
        "dearer at *every* length, since its projections alone ($4nd^2$) already cost twice the whole RNN",
        lambda r, fig: [
            "every" if r["crossover_n"]["rnn"] is None else "not every",
            2,  # the exponent of 4nd²
            constant(r, "self_attention") // constant(r, "rnn"),
        ],
    ),
    (
        "At $d = 512$ the attention layer costs as much as an LSTM at $n = 1024$ and half as much at $n = 16$",
        lambda r, fig: [
            r["d_for_costs"],
            r["crossover_n"]["lstm"],
            "half" if round(r["cost_ratio_attention_over_lstm"]["16"], 1) == 0.5 else "not half",
            min(table_lengths(r)),
        ],
    ),
    (
        "it costs more than a vanilla RNN or a 3-wide convolution of the same width at every length of the table",
        lambda r, fig: [
            "more"
            if all(
                multiply_adds(r, "self_attention", n, r["d_for_costs"]) > multiply_adds(r, layer, n, r["d_for_costs"])
                for n in table_lengths(r)
                for layer in ("rnn", "convolution_k3")
            )
            else "not always more",
            constant(r, "convolution_k3"),
            "every" if r["crossover_n"]["rnn"] is None and r["crossover_n"]["convolution_k3"] is None else "not every",
        ],
    ),
    ("matches a vanilla RNN at $n = d = 512$", lambda r, fig: r["crossover_n"]["pairwise_part_vs_rnn"]),
    (
        # The feed-forward block's 8nd² is an LSTM's count: it costs more than attention below the LSTM crossover.
        "which costs more than its attention at every length below $n = 1024$.",
        lambda r, fig: [
            "more" if feed_forward_over_attention(r, 1) > 1 else "less",
            "every"
            if all(feed_forward_over_attention(r, n) > 1 for n in range(1, int(r["crossover_n"]["lstm"])))
            else "not every",
            r["crossover_n"]["lstm"],
        ],
    ),
    # Path lengths, measured with gradients.
    (
        "for 33 tokens, 32 centred 3-wide layers",
        lambda r, fig: [r["path_length"]["recurrent_steps"], r["path_length"]["convolution_k3"], 3],
    ),
    (
        "16 centred 5-wide or causal 3-wide ones",
        lambda r, fig: (
            [r["path_length"]["convolution_k5"], 5, 3]
            if r["path_length"]["convolution_k5"] == r["path_length"]["causal_convolution_k3"]
            else "differ"
        ),
    ),
    ("Dilated ones need 6,", lambda r, fig: r["path_length"]["dilated_convolution_k3"]),
    (
        "the profiler records 33 steps of the GRU cell for 33 tokens",
        lambda r, fig: [r["path_length"]["recurrent_steps"], r["path_length"]["recurrent_steps"]],
    ),
    ("a product of 32 Jacobians", lambda r, fig: r["path_length"]["recurrent_steps"] - 1, 2),
    (
        # "grow with n²", the heading: as the claim of the introduction
        "## The price: time and memory that grow with $n^2$",
        lambda r, fig: [
            grows(r["memory_per_doubling_at_longest"]["eager"], "grow"),
            round(r["memory_exponent"]["eager"]),
        ],
    ),
    # Time and memory of one attention call.
    (
        "(batch 1, 4 heads of width 64, forward only): the wall time (the fastest of 5 runs",
        lambda r, fig: [1, r["timing_setup"]["heads"], r["timing_setup"]["width"], r["timing_setup"]["repeats"]],
    ),
    (
        "Eager's extra memory is 2 times the size of one $n \\times n$ weight tensor",
        lambda r, fig: r["eager_memory_over_weights_at_longest"],
    ),
    (
        "grows 4× per doubling of $n$: fitted over the three longest lengths, as $n^{2.0}$, quadratic. SDPA's grows "
        "2× per doubling, as $n^{1.0}$,",
        lambda r, fig: [
            grows(r["memory_per_doubling_at_longest"]["eager"]),
            r["memory_per_doubling_at_longest"]["eager"],
            min(3, len(r["timing_setup"]["lengths"])),  # growth_exponent fits the last three lengths
            r["memory_exponent"]["eager"],
            grows(r["memory_per_doubling_at_longest"]["sdpa"]),
            r["memory_per_doubling_at_longest"]["sdpa"],
            r["memory_exponent"]["sdpa"],
        ],
    ),
    (
        # from timings
        "Fitted over $n = 1024 \\dots 4096$, eager's time grows as $n^{2.0}$ and SDPA's as $n^{1.9}$, and at $n = "
        "4096$ eager takes about 4 times as long.",
        lambda r, fig: [
            r["timing_setup"]["lengths"][-3],
            r["timing_setup"]["lengths"][-1],
            "grows" if r["time_exponent"]["eager"] > 0 else "does not grow",
            r["time_exponent"]["eager"],
            r["time_exponent"]["sdpa"],
            r["timing_setup"]["lengths"][-1],
            r["eager_over_sdpa_time_at_longest"],
        ],
    ),
    # The committed whole-model benchmark.
    (
        "(hidden 256, 4 layers, 4 heads) on 4096 tokens per step, cut into sequences of 128 … 4096 tokens",
        lambda r, fig: [
            r["benchmark_setup"]["hidden"],
            r["benchmark_setup"]["layers"],
            r["benchmark_setup"]["heads"],
            r["benchmark_setup"]["tokens_per_step"],
            r["benchmark_setup"]["shortest"],
            r["benchmark_longest"],
        ],
    ),
    (
        "At 4096 tokens per sequence the eager model needs 4.7 times the memory of the SDPA one and takes 7.9 times "
        "as long per token. From 128 to 4096 tokens per sequence the eager model's time per token grows tenfold, the "
        "SDPA model's by a factor of 1.5, and SDPA's peak memory stays flat",
        lambda r, fig: (
            [
                r["benchmark_longest"],
                r["benchmark_eager_over_sdpa_memory_at_longest"],
                r["benchmark_eager_over_sdpa_time_at_longest"],
                r["benchmark_setup"]["shortest"],
                r["benchmark_longest"],
                grows(r["benchmark_eager_time_growth"]),
                r["benchmark_sdpa_time_growth"],
                # "flat": the peak memory at the longest sequences within 5% of that at the shortest
                "flat" if abs(r["benchmark_sdpa_memory_growth"] - 1) < 0.05 else "not flat",
            ]
            if round(r["benchmark_eager_time_growth"]) == 10
            else "not tenfold"
        ),
    ),
    (
        "cuts the memory to about a third (0.32) for about 30% more time per token.",
        lambda r, fig: [
            r["benchmark_checkpointing"]["memory_ratio"],
            round(100 * (r["benchmark_checkpointing"]["time_ratio"] - 1), -1),  # "about": to the nearest 10
        ],
    ),
    # Answers, measured by the last cell (report["answers"]).
    (
        '1. At $n = 2d = 2048$ (`crossover("lstm", 1024)`).',
        lambda r, fig: [1, r["answers"]["lstm_crossover_at_d_1024"], 1024],
    ),
    (
        "give $n = (6 - 4)\\cdot 512 / 2 = 512$.",
        lambda r, fig: [
            6,
            constant(r, "self_attention"),
            r["d_for_costs"],
            constant(r, "self_attention", 1),
            r["answers"]["gru_crossover_at_d_512"],
        ],
    ),
    (
        "3. The counter gives 3,145,728 FLOPs, the same as $2\\,(4 \\cdot 64 \\cdot 64^2 + 2 \\cdot 64^2 \\cdot 64)$: "
        "2,097,152 in `aten.mm` (the four projections) and 1,048,576 in `aten.bmm`",
        lambda r, fig: [
            3,
            r["answers"]["flop_counter_total"],
            *(
                [2, constant(r, "self_attention"), 64, 64, 2, constant(r, "self_attention", 1), 64, 2, 64]
                if r["answers"]["flops_formula"] == r["answers"]["flop_counter_total"]
                else ["not the same"]
            ),
            r["answers"]["flop_counter_by_operation"]["aten.mm"],
            # the projections: four n×d by d×d products
            2 * 4 * 64 * 64**2 // r["answers"]["flop_counter_by_operation"]["aten.mm"] * constant(r, "self_attention"),
            r["answers"]["flop_counter_by_operation"]["aten.bmm"],
        ],
    ),
    ("`layers_needed` finds 6 and 11.", lambda r, fig: list(r["answers"]["layers_kernel_7"].values())),
    (
        "5. At every length of the table:",
        lambda r, fig: [
            5,
            "every" if all(ratio < 1 for ratio in r["answers"]["window_128_over_lstm"].values()) else "not every",
        ],
    ),
    (
        "$(4 + 0.5)/8 = 0.5625$ whatever $n$",
        lambda r, fig: [
            constant(r, "self_attention"),
            2 * 128 / r["d_for_costs"],
            constant(r, "lstm"),
            window_over_lstm(r, 128) if len(set(r["answers"]["window_128_over_lstm"].values())) == 1 else "varies",
        ],
    ),
    # Self-test answers
    (
        "1. The attention layer's projections alone cost $4nd^2$, twice a vanilla RNN's $2nd^2$;",
        lambda r, fig: [1, 2, constant(r, "self_attention") // constant(r, "rnn"), 2],  # 2: the exponents of d²
    ),
    (
        "2. 32 centred 3-wide layers (one position per layer to either side), and a single self-attention layer.",
        lambda r, fig: (
            [2, r["path_length"]["convolution_k3"], 3]
            if r["path_length"]["self_attention"] == 1
            else "more than one attention layer"
        ),
    ),
    (
        "its extra memory grows 4× per doubling of $n$.",
        lambda r, fig: [
            grows(r["memory_per_doubling_at_longest"]["eager"]),
            r["memory_per_doubling_at_longest"]["eager"],
        ],
    ),
]

GIVEN = [
    ("Total $4nd^2 + 2n^2d$.", "the count (exponents)"),
    ("two $d \\times d$ products per step, $2nd^2$.", "the count (exponent)"),
    ("* **LSTM**: four gates, each with its own $W_x$ and $W_h$: $8nd^2$.", "the definition and its count"),
    ("Against an LSTM, $4nd^2 + 2n^2d = 8nd^2$ at $n = 2d$;", "the count (exponents)"),
    ("against a $k = 3$ convolution, likewise ($4nd^2 > 3nd^2$)", "the kernel the script sets; the count"),
    (
        "the LSTM pays $8d^2$ and the attention layer $4d^2$ for matrices, plus $2nd$ for its pairs; the two are "
        "equal when $2nd = 4d^2$, i.e. $n = 2d$.",
        "an answer: the count (exponents)",
    ),
    ("# 08 · Why attention", "this tutorial's number"),
    ("Self-attention connects every token with every other token in one layer.", "the definition"),
    ("Vaswani et al. (2017, §4 and Table 1) compare the three on three counts", "citation: the paper's table"),
    ("between the two most distant positions", "the definition of the path length"),
    ("## The table of Vaswani et al. (2017), with numbers", "citation"),
    ("| self-attention | $O(n^2 d)$ | $O(1)$ | $O(1)$ |", "the paper's table"),
    ("| recurrent | $O(n d^2)$ |", "the paper's table"),
    ("$O(k\\, n\\, d^2)$ | $O(1)$ |", "the paper's table"),
    ("$O(r\\, n\\, d)$ | $O(1)$ |", "the paper's table"),
    ("(one multiply-add = 2 FLOPs)", "a definition"),
    ("values ($3nd^2$) and the output projection $W_O$ ($nd^2$)", "the count of the projections"),
    ("the scores $QK^\\top$ ($n^2 d$) and the weighted sum of the values ($n^2 d$)", "the count of the pairwise part"),
    ("$h_t = \\tanh(W_x x_t + W_h h_{t-1})$", "the RNN's equation"),
    ("from $d$ to $d$ channels: $knd^2$.", "the count of a convolution"),
    ("with a recurrent layer's $nd^2$", "the paper's count"),
    ("the pairwise part grows as $n^2$,", "the shape of the count (arithmetic)"),
    ("the width of the 2017 base model", "citation"),
    ("a feed-forward block ($8nd^2$ for the usual inner width $4d$", "the count of a feed-forward block"),
    ("output position $n-1$? Exactly those with a non-zero gradient $\\partial y_{n-1} /", "notation"),
    ("until position 0 reaches position $n-1$:", "notation"),
    ("$i - \\frac{k-1}2 \\dots i + \\frac{k-1}2$", "the definition of a centred kernel"),
    (
        "moves information $(k-1)/2$ positions per layer, so crossing $n - 1$ positions takes $\\lceil (n-1) / "
        "\\frac{k-1}{2} \\rceil$ layers",
        "the formula the measured counts are checked against",
    ),
    ("reads $i-k+1 \\dots i$", "the definition of a causal kernel"),
    (
        "moves it $k - 1$ positions per layer, $\\lceil (n-1)/(k-1) \\rceil$ layers. Both are the table's $O(n/k)$, "
        "with constants 2 and 1;",
        "the formulas",
    ),
    ("of kernel 3 with dilations 1, 2, 4, …", "the definition of the dilated stack"),
    ("$1 + 2 + \\dots + 2^{L-1} = 2^L - 1$", "the formula"),
    ("(two positions per layer)", "the formula: (k - 1) / 2 for k = 5, k - 1 for a causal k = 3"),
    ("measured as in tutorial 01:", "cross-reference"),
    ("tutorial 01 shows what that does", "cross-reference"),
    ("A Transformer processes all positions of a layer at once.", "the architecture"),
    ("hf-attention has two backends for the same maths", "the two functions listed after it"),
    ("the weights, $n^2$ numbers per head each", "the size of a score matrix"),
    ("and never stores the $n \\times n$ matrix", "what the fused kernel does (its design; its memory is measured)"),
    ("Both do the same $n^2 d$ multiply-adds; eager also writes and reads the $n^2$ matrices", "the count"),
    ("a linear-cost model would be flat", "the definition: a cost per token that does not depend on n"),
    ("the attention's $n^2$ shows as growth", "the count"),
    ("Attention buys a path of length 1 between any two tokens", "the path length measured above (claimed there)"),
    ("pays $n^2$ in compute; fused kernels remove the $n^2$ *memory*", "the count"),
    ("**Next:** [09 · the encoder-decoder step by step](09_encoder_decoder_step_by_step.py)", "cross-reference"),
    ("1. Set `d = 1024` in the cost cell.", "an exercise"),
    ("2. A GRU has three gates,", "an exercise"),
    ("crossover with self-attention at $d = 512$. 3. Check the count", "an exercise"),
    (
        "`MultiHeadAttention(hidden_size=64, num_heads=4, num_kv_heads=4, head_dim=16, bias=False)` on 64 tokens",
        "an exercise's code",
    ),
    ("with $2(4nd^2 + 2n^2d)$. 4. Predict,", "an exercise: the count in FLOPs"),
    (
        "a causal convolution of kernel 7 and of a centred one of kernel 7 it takes to connect position 0 with "
        "position 32. 5. Self-attention",
        "an exercise",
    ),
    ("for $r = 128$, $d = 512$:", "an exercise"),
    (
        '2. A GRU does $6d^2$ multiply-adds per step; `COSTS["gru"] = (6, 0)` and `crossover("gru", 512)`',
        "an answer: three gates × (W_x, W_h)",
    ),
    (
        "4. Causal, kernel 7: six positions per layer, $\\lceil 32/6 \\rceil = 6$ layers. Centred, kernel 7: three "
        "positions to each side per layer, $\\lceil 32/3 \\rceil = 11$ layers.",
        "an answer: the formulas above (the measurement follows it)",
    ),
    ("its cost $4nd^2 + 2nrd = nd^2(4 + 2r/d)$", "an answer: the count"),
    ('`COSTS["window_128"] = (4 + 2 * 128 / 512, 0)`', "an answer's code"),
    ("between the ends instead of 1.", "the path length of one attention layer"),
    ("## Self-test 1.", "question number"),
    ("dearer than a vanilla RNN at every length", "a question (its answer is claimed)"),
    ("cheaper while $n < d$? 2.", "question number; the paper's claim"),
    (
        "How many layers of centred 3-wide convolutions connect the first and the last of 33 tokens",
        "a question: the kernel and the length the script sets (n = 33)",
    ),
    ("how does its extra memory grow when $n$ doubles", "a question (its answer is claimed)"),
    ("layers? 3.", "question number"),
    (
        "nonetheless? 4. Which of the two backends stores the $n \\times n$ weights",
        "question number; the two backends",
    ),
    ("doubles? 5.", "question number"),
    ("the paper's comparison drops the constants", "the paper's comparison"),
    ("3. The path runs through a step per token", "answer number"),
    ("4. Eager:", "answer number"),
    ("5. The $n^2$ memory: it processes the keys block by block. The $n^2 d$ compute stays.", "the count"),
]
