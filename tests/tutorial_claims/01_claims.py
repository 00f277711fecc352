"""The numbers of tutorial 01's prose, tied to its full run (docs/figures/01_results.json and the figures' data)."""

import math


def commas(value) -> str:
    return f"{value:,}"


def mantissa_and_exponent(value: float) -> list[str]:
    """'2 · 10^-4' for 0.00017: the leading digit, 10 and the exponent's size."""
    mantissa, exponent = f"{value:.0e}".split("e")
    return [mantissa, "10", str(abs(int(exponent)))]


def power_of_ten(value: float) -> list[str]:
    """'10^-5' for 1.6e-5: 10 and the size of the rounded exponent."""
    return ["10", str(abs(round(math.log10(value))))]


def below(value: float, bound: str) -> str:
    """The bound the prose states when the value is below it (else the value, which makes the check fail)."""
    return bound if value < float(bound) else f"{value}"


def params(r, size: str, kind: str) -> str:
    return commas(r["parameters_by_hidden"][size][kind])


STYLES = ("bahdanau", "luong", "luong_feeding")


def style_accuracy(r, style: str) -> list[float]:
    return r["style_sequence_accuracy"][style]


CLAIMS = [
    # 1. The task
    (
        r"with 10 symbols, a string of $n$ of them carries $n \log_2 10 \approx 3.3\,n$ bits",
        lambda r, fig: [str(r["task"]["symbols"])] * 2 + [f"{math.log2(r['task']['symbols']):.1f}"],
    ),
    (
        "3 … 12 = the symbols",
        lambda r, fig: [str(r["task"]["first_symbol"]), str(r["task"]["first_symbol"] + r["task"]["symbols"] - 1)],
    ),
    # 2. Three models
    ("numbers (128 in the full run)", lambda r, fig: str(2 * r["hidden"]["full"])),
    ("`HIDDEN` wide (64)", lambda r, fig: str(r["hidden"]["full"])),
    (
        "168,256 against 314,752 (plain) and 347,648 (attention) in the full run, and 43,168 against 79,552 and "
        "87,808 with `--quick`",
        lambda r, fig: (
            [params(r, "64", k) for k in ("transformer", "rnn", "attention")]
            + [params(r, "32", k) for k in ("transformer", "rnn", "attention")]
        ),
    ),
    # 3. Accuracy against length
    ("copies 200 fresh strings", lambda r, fig: str(r["test_rows"])),
    ("its 128 numbers of state", lambda r, fig: str(2 * r["hidden"]["full"])),
    (
        "strings of up to 24 symbols, 1,500 steps) it copies 1.00 of the strings at every tested length",
        lambda r, fig: [
            str(r["task"]["max_length"]),
            commas(r["steps"]["full"]),
            f"{min(r['sequence_accuracy']['transformer']):.2f}",
        ],
    ),
    ("`--quick` (300 steps)", lambda r, fig: str(r["steps"]["quick"])),
    ("`--quick`'s 300 steps", lambda r, fig: str(r["steps"]["quick"])),
    # Luong
    (
        "train for 300 steps instead of 1,500",
        lambda r, fig: [str(r["style_steps"]), commas(r["steps"]["full"])],
    ),
    (
        "After 300 steps all three copy at least 0.98 of the strings of 6 to 18 symbols",
        lambda r, fig: [
            str(r["style_steps"]),
            f"{min(style_accuracy(r, s)[i] for s in STYLES for i in range(1, len(r['test_lengths']) - 1)):.2f}",
            str(r["test_lengths"][1]),
            str(r["test_lengths"][-2]),
        ],
    ),
    (
        "the longest tested length, 22: Bahdanau's decoder copies 0.95 of those strings, Luong's 0.72, Luong's with "
        "input feeding 0.98 (final losses 0.037, 0.066 and 0.026)",
        lambda r, fig: (
            [str(r["test_lengths"][-1])]
            + [f"{style_accuracy(r, s)[-1]:.2f}" for s in STYLES]
            + [f"{r['style_final_loss'][s]:.3f}" for s in STYLES]
        ),
    ),
    (
        "(298,496 parameters against 347,648",
        lambda r, fig: [commas(r["style_parameters"]["luong"]), commas(r["style_parameters"]["bahdanau"])],
    ),
    (
        "(Strings of 2 symbols are the weakest for all three at this budget: 0.92, 0.89 and 0.93.)",
        lambda r, fig: [str(r["test_lengths"][0])] + [f"{style_accuracy(r, s)[0]:.2f}" for s in STYLES],
    ),
    # 5. Vanishing gradients
    (
        r"is about $2 \cdot 10^{-4}$ in the full run against 0.36 for the plain RNN",
        lambda r, fig: mantissa_and_exponent(r["final_loss"]["attention"]) + [f"{r['final_loss']['rnn']:.2f}"],
    ),
    ("In the full run (strings of 24 symbols)", lambda r, fig: str(r["task"]["max_length"])),
    (
        "receives about $10^{-5}$ of the gradient",
        lambda r, fig: power_of_ten(r["gradient_first_over_last_untrained"]["rnn"]),
    ),
    (
        "within a factor of about 1.1",
        lambda r, fig: f"{1 / r['gradient_first_over_last_untrained']['attention']:.1f}",
    ),
    ("the first token gets 7.05 times", lambda r, fig: f"{r['gradient_first_over_last']['rnn']:.2f}"),
    # 6. Exploding gradients
    (
        "a tanh RNN of width 64 (`torch.nn.RNN`) reads 48 random input vectors",
        lambda r, fig: [str(r["elman"]["width"]), str(r["elman"]["length"])],
    ),
    (
        r"Over 47 steps the first token's gradient is about $10^{-19}$ of the last one's at $g = 0.5$ and about "
        r"$10^{6}$ times larger at $g = 3$. Even $g = 1$ vanishes (below $10^{-6}$)",
        lambda r, fig: (
            [str(r["elman"]["length"] - 1)]
            + power_of_ten(r["elman_first_over_last"]["0.5"])
            + ["0.5"]
            + power_of_ten(r["elman_first_over_last"]["3.0"])
            + ["3", "1"]
            + ["10", "6" if r["elman_first_over_last"]["1.0"] < 1e-6 else f"{r['elman_first_over_last']['1.0']}"]
        ),
    ),
    ("a spectral radius of about 0.6", lambda r, fig: f"{r['elman_default_spectral_radius']:.1f}"),
    (
        "a tanh RNN of width 64 (PyTorch's default initialisation) with an embedding of 10 symbols and a linear "
        "output, trained with plain SGD at learning rate 1.5 to name the symbol 4 positions before the end of a "
        "random string of 24",
        lambda r, fig: [
            str(r["elman"]["width"]),
            str(r["task"]["symbols"]),
            str(r["elman_sgd"]["lr"]),
            str(r["elman_sgd"]["back"]),
            str(r["elman_sgd"]["length"]),
        ],
    ),
    (
        "(a loss of 0.41 over steps 100–199, against the clipped run's 0.23)",
        lambda r, fig: [
            f"{r['clipping_loss_by_100_steps']['unclipped'][1]:.2f}",
            "100",
            "199",
            f"{r['clipping_loss_by_100_steps']['clipped'][1]:.2f}",
        ],
    ),
    (
        "(above 10 for the first time at step 235), up to 67, about 30 times its median",
        lambda r, fig: [
            "10",
            str(r["clipping_first_spike"]),
            f"{r['clipping_largest_norm']['unclipped']:.0f}",
            f"{round(r['clipping_spike_over_median'], -1):.0f}",
        ],
    ),
    (
        r"A spike is a step of length $1.5 \lVert g \rVert$",
        lambda r, fig: str(r["elman_sgd"]["lr"]),
    ),
    (
        r"($\ln 10 \approx 2.30$) and stays there: 4.03 over the last 100 steps",
        lambda r, fig: [
            str(r["task"]["symbols"]),
            f"{math.log(r['task']['symbols']):.2f}",
            f"{r['clipping_loss_by_100_steps']['unclipped'][-1]:.2f}",
            "100",
        ],
    ),
    (
        "no step is longer than 1.5 and the loss keeps falling, to 0.02",
        lambda r, fig: [str(r["elman_sgd"]["lr"]), f"{r['clipping_loss_by_100_steps']['clipped'][-1]:.2f}"],
    ),
    (
        "never takes a step longer than 1.5 and ends below 0.05",
        lambda r, fig: [str(r["elman_sgd"]["lr"]), below(r["clipping_loss_by_100_steps"]["clipped"][-1], "0.05")],
    ),
    (
        "was above 1 on 94% of its steps (median 2.3, largest 9.0)",
        lambda r, fig: [
            "1",
            f"{100 * r['section2_share_clipped']['rnn']:.0f}",
            f"{r['section2_median_norm']['rnn']:.1f}",
            f"{r['section2_largest_norm']['rnn']:.1f}",
        ],
    ),
    (
        r"The attention RNN's median is 0.16, but its norm spiked to 31 on its way to a loss of $2 \cdot 10^{-4}$",
        lambda r, fig: (
            [
                f"{r['section2_median_norm']['attention']:.2f}",
                f"{r['section2_largest_norm']['attention']:.0f}",
            ]
            + mantissa_and_exponent(r["final_loss"]["attention"])
        ),
    ),
    # 7. Sequential steps
    (
        "the Transformer layer's 123 are a sequence too",
        lambda r, fig: str(r["transformer_layer_operations"][0]),
    ),
    (
        "the same 123 operations for 8 tokens or 256",
        lambda r, fig: [
            str(r["transformer_layer_operations"][-1]),
            str(r["sequence_lengths"][0]),
            str(r["sequence_lengths"][-1]),
        ],
    ),
    (
        "387 operations for 8 tokens, 44 more for each further token (2,851 for 64)",
        lambda r, fig: [
            str(r["rnn_layer_operations"][0]),
            str(r["sequence_lengths"][0]),
            str((r["rnn_layer_operations"][1] - r["rnn_layer_operations"][0]) // (r["sequence_lengths"][1] - 8)),
            commas(r["rnn_layer_operations"][r["sequence_lengths"].index(64)]),
            "64",
        ],
    ),
    ("at a fixed budget of 512 tokens per batch", lambda r, fig: str(r["timing_tokens"])),
    # Exercise 7 and its answer
    (
        "with learning rate 0.5 instead of 1.5 (`train_elman(None, lr=0.5)`)",
        lambda r, fig: ["0.5", str(r["elman_sgd"]["lr"]), "0.5"],
    ),
    (
        "At learning rate 0.5 the unclipped run trains (a loss of 0.004 over its last 100 steps) and its gradient "
        "norm never spikes (the largest is 4.0)",
        lambda r, fig: [
            "0.5",
            f"{r['unclipped_lr_0.5']['last_100_loss']:.3f}",
            "100",
            f"{r['unclipped_lr_0.5']['largest_norm']:.1f}",
        ],
    ),
]

GIVEN = [
    ("# 01 ·", "the tutorial's number"),
    ("(Cho et al. 2014; Sutskever et al. 2014)", "citations"),
    ("Bahdanau, Cho and Bengio (2015)", "citation"),
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
    ("{t-1}", "maths: the step before", 7),
    ("{j-1}", "maths: the position before", 4),
    ("$t-1$", "maths: the step before"),
    ("1. the plain encoder-decoder falls off", "list item"),
    ("2. the attention weights are an alignment", "list item"),
    ("3. at initialisation", "list item"),
    ("4. an RNN's gradient can also explode", "list item"),
    ("5. a recurrent layer needs", "list item"),
    ("## 1. A task", "section number"),
    ("## 2. Three models", "section number"),
    ("## 3. Accuracy", "section number"),
    ("## 4. The attention weights", "section number"),
    ("## 5. Vanishing", "section number"),
    ("## 6. Exploding", "section number"),
    ("## 7. Steps", "section number"),
    ("## 8. Do we", "section number"),
    ("section 6 says why", "cross-reference"),
    ("section 3 shows", "cross-reference"),
    ("(section 5)", "cross-reference"),
    ("the training loop of section 2", "cross-reference"),
    ("The models of section 2", "cross-reference"),
    ("section 2's figure", "cross-reference"),
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
    ("`hidden_size=4 * HIDDEN`", "the exercise's expression"),
    ("clipped to norm 1:", "the threshold the code sets (max_norm 1.0)"),
    ("typically below 1:", "a Jacobian's norm below 1: the condition for vanishing"),
    ("$z$ near 1", "a gate's value near 1: what holding the state means"),
    (r"\operatorname{diag}(1 - h_t^2)", "the derivative of tanh"),
    ("below 1 wherever the state is not 0", "the slope of tanh"),
    ("nearly 0 where the model", "the cross-entropy's derivative"),
    ("with $c = 1$", "the threshold the training loop sets"),
    ("clipping at $c = 1$", "the threshold the SGD run sets"),
    ("clipped at 1 all the same", "the threshold of section 2"),
    ("clipping cut to 1", "the threshold of section 2"),
    ("$n^2$", "maths: the quadratic cost"),
    ("## Exercises 1.", "exercise number"),
    ("? 2. Read", "exercise number"),
    ("? 3. Set", "exercise number"),
    ("? 4. Replace", "exercise number"),
    ("? 5. Count", "exercise number"),
    ("first. 6. Train", "exercise number"),
    ("? 7. Train", "exercise number"),
    ("## Answers 1.", "answer number"),
    ("longest. 2. The", "answer number"),
    ("instead. 3. Both", "answer number"),
    ("bottleneck. 4. For", "answer number"),
    ("space. 5. On", "answer number"),
    ("PyTorch. 6. The", "answer number"),
    ("end. 7. The cell", "answer number"),
]
