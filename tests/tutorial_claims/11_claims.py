"""The numbers of tutorial 11's prose and where its full run measured them (tests/test_tutorial_prose_numbers.py)."""

import numpy as np


def layer_range(r, fig) -> list:
    """The mirror head's layer, its heads' smallest and largest weight on the mirror digit, the other layer and its
    largest."""
    layer = r["mirror_head"][0]
    other = 1 - layer
    row, other_row = r["weight_on_mirror"][layer], r["weight_on_mirror"][other]
    return [len(row), str(layer), min(row), max(row), str(other), max(other_row)]


def burst(r, fig) -> list:
    """The training loss's largest rise: where the mean of 20 steps stands highest above the lowest it had reached
    (the step that ends that window, and the ratio), and whether it then falls lower than that lowest."""
    window = r["loss_window"]
    means = np.convolve(fig("11_loss")["losses"], np.ones(window) / window, "valid")
    lowest = np.minimum.accumulate(means)
    ratio = means / lowest
    peak = int(ratio.argmax())
    after = "falls" if means[-1] < lowest[peak] else "does not fall"
    return [
        str(peak + window - 1),
        str(window),
        float(ratio.max()),
        after,
        "lower" if after == "falls" else "not lower",
    ]


def paper(r, name: str) -> dict:
    return r["paper_runs"][name]


def last_mean(r, name: str) -> float:
    return float(np.mean(paper(r, name)["loss_curve"][-r["loss_window"] :]))


def first_mean(r, name: str) -> float:
    return float(np.mean(paper(r, name)["loss_curve"][: r["paper_warmup"]]))


def smoothed_entropy(r) -> float:
    """The entropy of the smoothed target: 1 - ε + ε/V on the right token, ε/V on each of the V - 1 others."""
    eps, vocab = r["label_smoothing"], r["vocabulary"]["tokens"]
    right, other = 1 - eps + eps / vocab, eps / vocab
    return -(right * np.log(right) + (vocab - 1) * other * np.log(other))


SMOOTHED = "warm-up, ε = 0.1"


def constant_strings(r, fig) -> list:
    """Exercise 1's strings of one repeated digit: how many, the lengths, how many the model without source positions
    writes right (in all and at each length, of how many), and the wrong ones that are the right digit miscounted
    (all of the wrong ones, or the prose's "the 82 others are" is wrong)."""
    first = r["exercise_1"]
    by_length = first["constant_right_by_length"]
    wrong = first["constant_strings"] - first["constant_right"]
    return [
        first["constant_strings"],
        *(str(n) for n in r["digits_per_string"]),
        first["constant_right"],
        *by_length.values(),
        first["constant_strings"] // len(by_length),
        first["constant_miscounted"] if first["constant_miscounted"] == wrong else "not all the others",
    ]


def decoder_positions(r, fig) -> list:
    """Exercise 3: the digits of each string, the tokens written, the positions `greedy` and `generate()` compute."""
    rows = r["exercise_3"]
    return [
        *(str(row["tokens"] - 1) for row in rows),
        *(row["tokens"] for row in rows),
        *(row["greedy"] for row in rows),
        *(row["generate"] for row in rows),
    ]


CLAIMS = [
    # Answers, measured in the cell after them
    (
        "the main run again (2,000 steps on the same batches, from the same initial weights)",
        lambda r, fig: r["exercise_1"]["steps"],
    ),
    (
        "It writes 0.026 of the test copies and 0.028 of the reversals exactly right (1.000 and 1.000 with positions)",
        lambda r, fig: [
            r["exercise_1"]["exact_match_copy"],
            r["exercise_1"]["exact_match_reverse"],
            r["exact_match_copy"],
            r["exact_match_reverse"],
        ],
    ),
    ("is right 0.043 of the time at best", lambda r, fig: r["exercise_1"]["best_without_order"]),
    (
        "For a string and its reversal its logits agree to 7.2e-6, float rounding, and it writes the same answer for "
        "both in 1,000 of the 1,000 test strings",
        lambda r, fig: [
            r["exercise_1"]["mirrored_logits_max_abs"],
            r["exercise_1"]["same_answer_for_mirrored"],
            r["test_size"],
        ],
    ),
    (
        "of the 160 of them (each digit, each length from 3 to 10, both tasks) it writes 78 right, 20, 20, 20, 10, 4, "
        "0, 0 and 4 of the 20 at each length, and the 82 others are the right digit written",
        constant_strings,
    ),
    (
        "on the 890 test strings of 3 to 9 digits, each alone and in the test set's batch, where `<pad>` fills it to "
        "the 12 source tokens of a 10-digit string",
        lambda r, fig: [
            r["exercise_2"]["padded_strings"],
            str(r["digits_per_string"][0]),
            str(r["digits_per_string"][1] - 1),
            str(r["digits_per_string"][1] + 2),  # the task token, the digits, `</s>`
            str(r["digits_per_string"][1]),
        ],
    ),
    (
        "With the mask the logits alone and in the batch agree to 4.4e-6, and the argmax changes at 0 of the 6,217 "
        "target positions; without it they differ by up to 17, and the argmax changes at 1,910 of them, in 400 of "
        "the 890 strings.",
        lambda r, fig: [
            r["exercise_2"]["max_abs"]["masked"],
            r["exercise_2"]["argmax_changed_tokens"]["masked"],
            r["exercise_2"]["padded_tokens"],
            r["exercise_2"]["max_abs"]["unmasked"],
            r["exercise_2"]["argmax_changed_tokens"]["unmasked"],
            r["exercise_2"]["argmax_changed_strings"]["unmasked"],
            r["exercise_2"]["padded_strings"],
        ],
    ),
    (
        "the library computes these unmasked logits too (to 2.6e-5)",
        lambda r, fig: r["exercise_2"]["library_without_attention_mask_max_abs"],
    ),
    (
        "one test string of 3, 6 and 10 digits, $n$ = 4, 7 and 11 tokens with its `</s>`: `greedy` computes 10, 28 "
        "and 66, the sum above, and `generate()` 4, 7 and 11, one per token",
        decoder_positions,
    ),
    (
        "on the check batch their logits agree to 3.6e-6 (logits up to 8.0), where the post-norm blocks with the same "
        "weights are 9.7 away",
        lambda r, fig: [
            r["exercise_4"]["logits_max_abs"],
            r["exercise_4"]["logits_largest"],
            r["exercise_4"]["post_norm_blocks_max_abs"],
        ],
    ),
    (
        "transformers' schedule is the formula, times the constant that sets its peak, to 4.4e-16 (relative)",
        lambda r, fig: r["paper_schedule_vs_formula_max_relative"],
    ),
    (
        "with $d = 32$ and warmup = 60 the formula's own peak is 0.023, far higher than the 3e-3 this model trains at",
        lambda r, fig: [
            str(r["sizes"]["width"]),
            str(r["paper_warmup"]),
            r["paper_formula_peak"],
            "higher" if r["paper_formula_peak"] > 3 * r["paper_peak_lr"] else "not far higher",
            r["paper_peak_lr"],
        ],
    ),
    ("so the three runs peak at 3e-3", lambda r, fig: [len(r["paper_runs"]), r["paper_peak_lr"]]),
    (
        "(mean of the first 60 steps 2.35, against 2.72 with warm-up",
        lambda r, fig: [str(r["paper_warmup"]), first_mean(r, "no warm-up"), first_mean(r, "warm-up")],
    ),
    (
        "(0.0063 against 0.0020, means of the last 20 steps;",
        lambda r, fig: [last_mean(r, "no warm-up"), last_mean(r, "warm-up"), str(r["loss_window"])],
    ),
    (
        "and 0.997 of the test strings come out exactly right against 1.000",
        lambda r, fig: [paper(r, "no warm-up")["exact_match"], paper(r, "warm-up")["exact_match"]],
    ),
    (
        "gets as many strings exactly right (1.000) and as many tokens (1.0000 against 1.0000), but its cross-entropy "
        "on the right tokens is 0.0988 against 0.0019",
        lambda r, fig: [
            paper(r, SMOOTHED)["exact_match"]
            if f"{paper(r, SMOOTHED)['exact_match']:.3f}" == f"{paper(r, 'warm-up')['exact_match']:.3f}"
            else "not as many",
            paper(r, SMOOTHED)["token_accuracy"],
            paper(r, "warm-up")["token_accuracy"],
            paper(r, SMOOTHED)["cross_entropy"],
            paper(r, "warm-up")["cross_entropy"],
        ],
    ),
    (
        "a probability of 0.906 on average, against 0.998 without smoothing",
        lambda r, fig: [paper(r, SMOOTHED)["confidence"], paper(r, "warm-up")["confidence"]],
    ),
    (
        r"= 0.907 on the right token ($V = 15$), a cross-entropy of 0.098, and its training loss ends at 0.558, just "
        "above the entropy of the smoothed target, 0.556",
        lambda r, fig: [
            r["smoothing_best_confidence"],
            str(r["vocabulary"]["tokens"]),
            r["smoothing_floor_cross_entropy"],
            paper(r, SMOOTHED)["loss_curve"][-1],
            smoothed_entropy(r),
        ],
    ),
    ("then 3 to 10 digits, then", lambda r, fig: [str(n) for n in r["digits_per_string"]]),
    (
        "The vocabulary has 15 tokens: 5 special ones and the 10 digits.",
        lambda r, fig: [str(r["vocabulary"][k]) for k in ("tokens", "special", "digits")],
    ),
    (
        "there are only 2,000 sources with 3 digits",
        # two task tokens times every string of the shortest length
        lambda r, fig: [2 * 10 ** r["digits_per_string"][0], str(r["digits_per_string"][0])],
    ),
    (
        "In the full run (2,000 steps of 64 strings, less the 1,165 strings that were test strings)",
        lambda r, fig: [r["steps"], str(r["batch"]), r["dropped_test_strings"]],
    ),
    (
        "the loss falls from 3.597 to 0.0004 nats per token (means of the first and the last 20 steps)",
        lambda r, fig: [
            "falls" if r["loss_last"] < r["loss_first"] else "rises",
            r["loss_first"],
            r["loss_last"],
            str(r["loss_window"]),
        ],
    ),
    (
        "at step 358 the mean of the last 20 steps is 3.2 times the lowest it had reached, and then it falls lower "
        "than before",
        burst,
    ),
    (
        "Greedy decoding writes 1.000 of the 1,000 test strings exactly right: copy 1.000, reverse 1.000.",
        lambda r, fig: [
            r["exact_match"],
            r["test_size"],
            r["exact_match_copy"],
            r["exact_match_reverse"],
        ],
    ),
    ("(`--quick` trains 300 steps and prints", lambda r, fig: str(r["quick_steps"])),
    ("ReLU feed-forward networks 4 times as wide", lambda r, fig: str(r["sizes"]["ffn_width"] // r["sizes"]["width"])),
    ("one batch of 8 test strings", lambda r, fig: str(r["check_batch"])),
    (
        "on this run's CPU by 2.9e-6 on the logits and 4.2e-7 on the weights",
        lambda r, fig: [r["logits_max_abs_eager"], r["cross_weights_max_abs_eager"]],
    ),
    (
        "2.9e-6 at most, on logits as large as 10.8",
        lambda r, fig: [r["logits_max_abs_sdpa"], r["check_logits_largest"]],
    ),
    (
        "All 1,000 rows of the full run are identical",
        lambda r, fig: [
            "All" if r["generate_identical_rows"] == r["test_size"] else "Not all",
            r["generate_identical_rows"] if r["generate_shape_equal"] else "shapes differ",
        ],
    ),
    (
        # near a tie: a gap of the order of the float rounding between the two computations (1e-5)
        "The loop never came near a tie: the smallest gap between its best and second-best logit at a token it wrote "
        "is 5.972,",
        lambda r, fig: ["never" if r["smallest_margin"] > 1e-3 else "once", r["smallest_margin"]],
    ),
    (
        "the four heads of decoder layer 1 put 0.91 to 0.97 of their weight on the mirror digit, those of layer 0 at "
        "most 0.31",
        layer_range,
    ),
    (
        "The map drawn is layer 1's head 1 on a test string of 10 digits (0.95 of its weight",
        lambda r, fig: [
            str(fig("11_cross_attention")["head"][0]),
            str(fig("11_cross_attention")["head"][1]),
            str(r["map_digits"]),
            r["map_mirror_weight"],
        ],
    ),
    (
        "they differ by 2.9e-6 at most, with either backend",
        lambda r, fig: max(r["logits_max_abs_sdpa"], r["logits_max_abs_eager"]),
    ),
    # Self-test answers
    (
        "the closest they came at a written token was a gap of 5.972",
        lambda r, fig: r["smallest_margin"],
    ),
    (
        "wrote the loop's tokens, padding included, in 1,000 of the 1,000 test strings",
        lambda r, fig: [
            r["generate_identical_rows"] if r["generate_shape_equal"] else "shapes differ",
            r["test_size"],
        ],
    ),
    (
        "d. Layer 1: over the test set's reversals, its heads put between 0.91 and 0.97 of their cross-attention "
        "weight on the mirror digit, source position $n - t$, where the heads of layer 0 put at most 0.31",
        lambda r, fig: layer_range(r, fig)[1:],
    ),
    (
        "it writes 1.000 of the test strings exactly right, as the model without it does, but gives the token it "
        "chooses 0.906 of its probability on average (0.998 without smoothing), close to the smoothed target's own "
        "0.907",
        lambda r, fig: [
            paper(r, SMOOTHED)["exact_match"]
            if f"{paper(r, SMOOTHED)['exact_match']:.3f}" == f"{paper(r, 'warm-up')['exact_match']:.3f}"
            else "not as the model without it",
            paper(r, SMOOTHED)["confidence"],
            paper(r, "warm-up")["confidence"],
            r["smoothing_best_confidence"],
        ],
    ),
]

GIVEN = [
    (r"e. What did label smoothing with $\epsilon = 0.1$ change", "the setting of the run the question is about"),
    ('("Two details of the paper\'s training")', "a section's title"),
    ("## Two details of the paper's training", "the section's plan"),
    (r"The paper (§5.3) used Adam with $\beta = (0.9, 0.98)$, $\epsilon = 10^{-9}$", "the paper's settings"),
    (
        r"a rate that rises linearly for `warmup` steps and then falls as $1/\sqrt{\text{step}}$",
        "the schedule's shape",
    ),
    (
        r"\text{lr} = d^{-0.5} \cdot \min(\text{step}^{-0.5},\ \text{step} \cdot \text{warmup}^{-1.5})",
        "the paper's formula",
    ),
    (r"is $d^{-0.5} \cdot \text{warmup}^{-0.5}$", "the formula at step = warmup"),
    (
        r"And the paper (§5.4) trained on smoothed targets: with label smoothing $\epsilon = 0.1$",
        "the paper's setting",
    ),
    (r"the target is $1 - \epsilon$ on the right token", "definition of label smoothing"),
    ("(`cross_entropy(..., label_smoothing=0.1)`)", "the argument"),
    ("but improves accuracy and BLEU score", "a quotation of the paper"),
    ("Three fresh models, each trained", "the runs the script sets"),
    (r"falling as $1/\sqrt{\cdot}$ from there (`num_warmup_steps=0`)", "the second run's schedule"),
    ("(unsmoothed, for all three)", "what the cell computes"),
    (r"the best a model can do under $\epsilon = 0.1$ is $1 - \epsilon + \epsilon/V$", "the formula"),
    ("# 11 · An encoder-decoder", "this tutorial's number"),
    ("Tutorial 07 wrote an encoder layer in plain torch, tutorial 10 a decoder block", "cross-references"),
    ("the whole 2017 Transformer (Vaswani et al. 2017)", "citation"),
    ("Self-attention passes the same rows twice", "definition: as queries and as keys and values"),
    ("one forward pass scores every position at once", "definition of teacher forcing"),
    ("so every test string is new to the model", "by construction: the batch filter above"),
    ("until every row of the batch has written `</s>`", "the loop's stopping rule"),
    ("This loop recomputes the whole prefix at every step", "what the loop's code does"),
    ("post-norm layers with biases on every projection", "the config's settings"),
    ("The library's state dict names every parameter", "the library's structure (the load is strict)"),
    ("are one tensor under four names: all four get our embedding", "the four names the load fills"),
    ("as every `transformers` encoder-decoder does", "the library's convention"),
    ("the argmax, and so every token, must be the same", "what the check requires"),
    ("where the two computations differ by float rounding", "the two: generate() and the loop"),
    ("the target shifted right behind `<s>`, every position scored in one pass", "definition of teacher forcing"),
    ("(every query sees every source position, `<pad>` included)", "the exercise's setting"),
    ("runs its whole prefix again at every step of `greedy`", "the exercise"),
    ("(all digits the same)", "the answer's condition"),
    ("take some weight in every softmax", "the answer: what the softmax does"),
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
        "(a difference of 0.0 on an Intel Xeon with AMX)",
        "measured by an earlier full run on that machine, not this one",
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
    ("1. Neither.", "answer number"),
    ("(tutorial 07, exercise 4)", "cross-reference"),
    ("2. No. The `<pad>` rows", "answer number"),
    (
        r"3. Step $k$ (from 1 to $n$) runs the decoder on $k$ positions: $1 + 2 + \dots + n = n(n+1)/2$ in all. With "
        r"a cache each step computes only its new position, $n$ in all",
        "arithmetic",
    ),
    ("4. Each sublayer becomes", "answer number"),
]
