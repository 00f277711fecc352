"""The numbers of tutorial 11's prose and where its full run measured them (tests/test_tutorial_prose_numbers.py)."""


def layer_range(r, fig) -> list:
    """The mirror head's layer, its heads' smallest and largest weight on the mirror digit, the other layer and its
    largest."""
    layer = r["mirror_head"][0]
    other = 1 - layer
    row, other_row = r["weight_on_mirror"][layer], r["weight_on_mirror"][other]
    return [str(layer), f"{min(row):.2f}", f"{max(row):.2f}", str(other), f"{max(other_row):.2f}"]


CLAIMS = [
    ("then 3 to 10 digits, then", lambda r, fig: [str(n) for n in r["digits_per_string"]]),
    (
        "The vocabulary has 15 tokens: 5 special ones and the 10 digits.",
        lambda r, fig: [str(r["vocabulary"][k]) for k in ("tokens", "special", "digits")],
    ),
    (
        "there are only 2,000 sources with 3 digits",
        # two task tokens times every string of the shortest length
        lambda r, fig: [f"{2 * 10 ** r['digits_per_string'][0]:,}", str(r["digits_per_string"][0])],
    ),
    (
        "In the full run (2,000 steps of 64 strings, less the 1,165 strings that were test strings)",
        lambda r, fig: [f"{r['steps']:,}", str(r["batch"]), f"{r['dropped_test_strings']:,}"],
    ),
    (
        "the loss falls from 3.597 to 0.0005 nats per token (means of the first and the last 20 steps)",
        lambda r, fig: [
            f"{r['loss_first']:.3f}",
            f"{r['loss_last']:.4f}" if r["loss_last"] < r["loss_first"] else "rises",
            str(r["loss_window"]),
        ],
    ),
    (
        "Greedy decoding writes 1.000 of the 1,000 test strings exactly right: copy 1.000, reverse 1.000.",
        lambda r, fig: [
            f"{r['exact_match']:.3f}",
            f"{r['test_size']:,}",
            f"{r['exact_match_copy']:.3f}",
            f"{r['exact_match_reverse']:.3f}",
        ],
    ),
    ("With `--quick`'s 300 steps", lambda r, fig: str(r["quick_steps"])),
    ("ReLU feed-forward networks 4 times as wide", lambda r, fig: str(r["sizes"]["ffn_width"] // r["sizes"]["width"])),
    ("one batch of 8 test strings", lambda r, fig: str(r["check_batch"])),
    (
        "On this run's CPU that gives the same bits (a difference of 0.0)",
        lambda r, fig: f"{max(r['logits_max_abs_eager'], r['cross_weights_max_abs_eager']):.1f}",
    ),
    (
        "4.3e-06 at most, on logits as large as 10.8",
        lambda r, fig: [f"{r['logits_max_abs_sdpa']:.1e}", f"{r['check_logits_largest']:.1f}"],
    ),
    (
        "All 1,000 rows of the full run are identical",
        lambda r, fig: f"{r['generate_identical_rows']:,}" if r["generate_shape_equal"] else "shapes differ",
    ),
    ("at a token it wrote is 5.706,", lambda r, fig: f"{r['smallest_margin']:.3f}"),
    (
        "the four heads of decoder layer 1 put 0.93 to 0.98 of their weight on the mirror digit, those of layer 0 at "
        "most 0.33",
        layer_range,
    ),
    (
        "The map drawn is layer 1's head 1 on a test string of 10 digits (0.98 of its weight",
        lambda r, fig: [
            str(fig("11_cross_attention")["head"][0]),
            str(fig("11_cross_attention")["head"][1]),
            str(r["map_digits"]),
            f"{r['map_mirror_weight']:.2f}",
        ],
    ),
]

GIVEN = [
    ("# 11 · An encoder-decoder", "this tutorial's number"),
    ("Tutorial 07 wrote an encoder layer in plain torch, tutorial 10 a decoder block", "cross-references"),
    ("the whole 2017 Transformer (Vaswani et al. 2017)", "citation"),
    ("<reverse> 3 1 4 1 5 </s> → 5 1 4 1 3 </s>", "an example of the format"),
    ("**Attention** is tutorial 07's multi-head attention", "cross-reference"),
    ("the causal mask of tutorial 10", "cross-reference"),
    ("The **encoder block** is tutorial 07's", "cross-reference"),
    ("The **decoder block** is tutorial 10's", "cross-reference"),
    ("Tutorial 10's block was pre-norm", "cross-reference"),
    ("as in the paper (§3.4)", "citation"),
    ("(one table for each side, as in tutorial 10)", "cross-reference"),
    ("(tied weights, §3.4 again)", "citation"),
    ("(teacher forcing, tutorial 09)", "cross-reference"),
    ("a key-value cache instead, tutorial 09", "cross-reference"),
    ("loading is a renaming, as in tutorial 10.", "cross-reference"),
    ("(1 = real token)", "the meaning of attention_mask"),
    ("give a weight of exactly 0", "the softmax of -inf, and the library's masked weights set to 0"),
    ("are equal to float32 rounding, within 1e-5:", "the bound tests/test_tutorial_seq2seq_by_hand.py asserts"),
    (
        "(by 1.4e-6 on an AVX2-only AMD EPYC, 2.6e-6 on a Zen 4 EPYC)",
        "measured on those machines, not by this run (tests/test_tutorial_seq2seq_by_hand.py)",
    ),
    ("adds its sums in another order (tutorial 07)", "cross-reference"),
    ("(`num_beams=1, do_sample=False`)", "the arguments of greedy search"),
    ("(it predicts target token $t$, counted from 0)", "a definition"),
    ("(the source's position 0 is the task token)", "the format of a source"),
    ("the encoder block of tutorial 07 and the decoder block of tutorial 10", "cross-references"),
    ("**Next:** [12 · today's attention]", "the next tutorial"),
    ("1. Train without the positions", "exercise number"),
    ("2. Drop the source padding mask", "exercise number"),
    ("3. The decoder runs its whole prefix", "exercise number"),
    ("4. Set `norm_position", "exercise number"),
    ("1. Neither, except", "answer number"),
    ("(tutorial 07, exercise 4)", "cross-reference"),
    ("2. No. The `<pad>` rows", "answer number"),
    (r"3. Step $k$ (from 1 to $n$) runs the decoder on $k$ positions: $1 + 2 + \dots + n = n(n+1)/2$", "arithmetic"),
    ("4. Each sublayer becomes", "answer number"),
]
