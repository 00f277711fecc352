"""The numbers of tutorial 10's prose and where its full run measured them (tests/test_tutorial_prose_numbers.py)."""


def size(text: str, axis: int) -> str:
    """One axis of a shape written "(1, 18, 32)"."""
    return text.strip("()").split(", ")[axis]


def traced(r, name: str) -> list:
    return dict(r["trace"])[name]


def family_box(r, family: str, label: str) -> str:
    return dict(r["families"][family])[label]


def smooth_rows(weights) -> bool:
    """Each row is one value on and below the diagonal and 0 above it."""
    for t, row in enumerate(weights):
        if abs(row[: t + 1] - row[0]).max() > 1e-7 or abs(row[t + 1 :]).max(initial=0) > 0:
            return False
    return True


def last(r, model: str, what: str) -> float:
    """The mean of a model's evaluations in the last fifth of its training: "loss" or "copy" (accuracy)."""
    return r["models"][model]["last_fifth"][what][0]


def answer(r, variant: str, what: str) -> list:
    """An exercise variant's last fifth: [mean, lowest, highest] of its "loss" or "copy" accuracy."""
    return r["answers"][variant]["last_fifth"][what]


def gain(r, before: str, after: str) -> dict:
    return r["gains"][f"{before} → {after}"]


def same_steps(r):
    """The steps every model trained for, if they are the same."""
    steps = {m["steps"] for m in r["models"].values()}
    return steps.pop() if len(steps) == 1 else "unequal budgets"


def landmark_blocks(r) -> list:
    """The block whose heads put the most weight on the landmarks (by its least such head), the range of its heads,
    then the other block and its largest."""
    weights = r["weight_on_landmarks"]
    looker = max(range(len(weights)), key=lambda b: min(weights[b]))
    other = 1 - looker
    return [looker, min(weights[looker]), max(weights[looker]), other, max(weights[other])]


def span(moved: list) -> list:
    return [str(moved[0]), str(moved[-1])]


CLAIMS = [
    # The text
    ("2000 sentences of one pattern", lambda r, fig: str(r["text"]["train_sentences"])),
    (
        "(8 names, 6 colours, 6 things: 288 sentences",
        lambda r, fig: [*map(str, r["text"]["names_colours_things"]), str(r["text"]["choices"])],
    ),
    (
        "the thing was written 9-10 characters earlier, the colour 26-31 and the name 29-34",
        lambda r, fig: [
            str(n) for word in ("thing", "colour", "name") for n in r["text"]["copy_distance_range"][word]
        ],
    ),
    ("(27 of them)", lambda r, fig: str(r["text"]["vocab_size"])),
    (
        r"the 5.66 nats of the choice ($\ln 288$)",
        lambda r, fig: [r["text"]["nats_per_sentence"], str(r["text"]["choices"])],
    ),
    ("A second set of 200 sentences", lambda r, fig: str(r["text"]["validation_sentences"])),
    (
        "`CONTEXT` = 64 characters (1.4 sentences of the text)",
        lambda r, fig: [
            str(r["settings"]["context"]),
            r["settings"]["context"] * r["text"]["train_sentences"] / r["text"]["characters"],
        ],
    ),
    (
        "a (batch, 64) tensor of token ids and its (batch, 64) targets",
        lambda r, fig: [str(r["settings"]["context"])] * 2,
    ),
    ("on the 200 held-out sentences, each fed", lambda r, fig: str(r["text"]["validation_sentences"])),
    (r"against the floor of $\ln 288$ per sentence", lambda r, fig: str(r["text"]["choices"])),
    # The averaging trick and the blocks
    ("(B, T, E) = (4, 8, 32)", lambda r, fig: [str(n) for n in r["averaging_input_shape"]]),
    (
        "`HEADS` = 4 heads of width $32/4 = 8$",
        lambda r, fig: [str(r["settings"][k]) for k in ("heads", "width", "heads", "head_width")],
    ),
    # What each step bought: the same budget, then each model's mean over the last fifth of its training
    (
        "The four models had the same budget: 2500 steps, each on a batch of 32 windows of 64 characters (80,000 "
        "windows)",
        lambda r, fig: [
            len(r["models"]),
            same_steps(r),
            str(r["settings"]["batch"]),
            str(r["settings"]["context"]),
            same_steps(r) * r["settings"]["batch"],
        ],
    ),
    (
        "each step lowers the validation loss, and all three drops are clear",
        lambda r, fig: [
            "all" if all(g["loss_clear"] for g in r["gains"].values()) else "not all",
            len(r["gains"]),
            "drops" if all(g["loss_drop"] > 0 for g in r["gains"].values()) else "rises",
        ],
    ),
    ("(1.43 nats per character)", lambda r, fig: last(r, "bigram", "loss")),
    ("0.09 of the first letters", lambda r, fig: last(r, "bigram", "copy")),
    ("among the possible first letters (0.16)", lambda r, fig: r["copy_chance"]),
    (
        "brings the loss to 1.14, a clear gain",
        lambda r, fig: last(r, "averaging", "loss") if gain(r, "bigram", "averaging")["loss_clear"] else "not clear",
    ),
    (
        "Its copy accuracy is not a clear gain: 0.11 against the bigram's 0.09, and it wobbles between 0.07 and 0.20",
        lambda r, fig: (
            [
                last(r, "averaging", "copy"),
                last(r, "bigram", "copy"),
                *r["models"]["averaging"]["last_fifth"]["copy"][1:],
            ]
            if not gain(r, "bigram", "averaging")["copy_clear"]
            else "a clear gain"
        ),
    ),
    (
        "is the largest drop, to 0.25",
        lambda r, fig: (
            last(r, "single head", "loss")
            if max(r["gains"], key=lambda k: r["gains"][k]["loss_drop"]) == "averaging → single head"
            else "not the largest"
        ),
    ),
    (
        "it copies 0.50 of the words",
        lambda r, fig: last(r, "single head", "copy") if gain(r, "averaging", "single head")["copy_clear"] else "?",
    ),
    (
        "**two blocks** (multi-head attention, FFN, residuals, LayerNorm) reach 0.134, within 0.008 of the floor of "
        "0.126, and copy 0.998 of the words",
        lambda r, fig: [
            r["settings"]["layers"],
            last(r, "blocks", "loss"),
            last(r, "blocks", "loss") - r["loss_floor"],
            r["loss_floor"],
            last(r, "blocks", "copy"),
        ],
    ),
    # Which head copies
    (
        "one head of **block 0** puts 0.39 of its weight",
        lambda r, fig: [
            str(max(range(2), key=lambda b: max(r["weight_on_word_to_copy"][b]))),
            max(max(row) for row in r["weight_on_word_to_copy"]),
        ],
    ),
    ("the heads of block 1 at most 0.17", lambda r, fig: ["1", max(r["weight_on_word_to_copy"][1])]),
    (
        "Block 1's heads are the sharper ones: their largest weight in a row is 0.54 to 0.62 on average, against at "
        "most 0.35 in block 0.",
        lambda r, fig: [
            "1",
            min(r["head_sharpness"][1]),
            max(r["head_sharpness"][1]),
            max(r["head_sharpness"][0]),
            "0",
        ],
    ),
    (
        "its heads put 0.47 to 0.98 of their weight there (0.77 for the head drawn), the heads of block 0 at most "
        "0.20",
        lambda r, fig: [
            min(r["weight_on_landmarks"][1]),
            max(r["weight_on_landmarks"][1]),
            r["weight_on_landmarks"][1][r["heads_shown"][1]],
            "0",
            max(r["weight_on_landmarks"][0]),
        ],
    ),
    # Sampling
    ("1200 in the full run", lambda r, fig: str(r["sample_length"])),
    (
        "(21 of its 27 sentences in the full run), but none of them is consistent",
        lambda r, fig: [
            *(str(r["samples"]["single head"][k]) for k in ("pattern", "sentences")),
            "none"
            if r["samples"]["single head"]["consistent"] == 0
            else str(r["samples"]["single head"]["consistent"]),
        ],
    ),
    (
        "consistent sentences, 25 of 27",
        lambda r, fig: [str(r["samples"]["blocks"][k]) for k in ("consistent", "sentences")],
    ),
    # One forward pass
    (
        "one held-out sentence of 43 characters, batch 1",
        lambda r, fig: [str(r["trace_length"]), str(traced(r, "input ids")[0])],
    ),
    (
        "E = 32 width, H = 4 heads, d = 8 head width, V = 27 characters",
        lambda r, fig: (
            [str(r["settings"][k]) for k in ("width", "heads", "head_width")] + [str(r["text"]["vocab_size"])]
        ),
    ),
    (
        "Every tensor has an axis of the 43 positions",
        lambda r, fig: [
            "every" if all(r["trace_length"] in shape for _, shape in r["trace"]) else "not every",
            str(r["trace_length"]),
        ],
    ),
    (
        "are (1, 43) or (1, 43, ·)",
        lambda r, fig: [str(n) for n in traced(r, "input ids")] + [str(n) for n in traced(r, "logits")[:2]],
    ),
    ("The position embeddings are (43, 32)", lambda r, fig: [str(n) for n in traced(r, "position embeddings")]),
    (
        "(1, 4, 43, 8) for q, k, v",
        lambda r, fig: [str(n) for n in traced(r, "block 0: q, k, v: x W_q, x W_k, x W_v, split into heads")],
    ),
    ("in the (1, 4, 43, 43) scores", lambda r, fig: [str(n) for n in traced(r, "block 0: scores q kᵀ / √d")]),
    # The FFN is four times as wide as the model inside, and the model has two blocks.
    (
        "four times as wide inside",
        lambda r, fig: traced(r, "block 0: FFN inside: relu(x W_1 + b_1)")[-1] // r["settings"]["width"],
    ),
    ("Two such blocks", lambda r, fig: r["settings"]["layers"]),
    # "smooth": every row of the equal weights is one value on and below the diagonal (no jumps inside a row)
    (
        "Equal weights are a smooth triangle",
        lambda r, fig: "smooth" if smooth_rows(fig("10_weights")["panel_0"]) else "jagged",
    ),
    # The library
    (
        "the same bits on this run's CPU (a difference of 0.0)",
        lambda r, fig: r["library_eager_vs_hand_logits_max_abs"],
    ),
    # Three families
    (
        "The encoder's 18 outputs all move when its token 16 changes",
        lambda r, fig: [
            str(size(family_box(r, "encoder-only (BERT)", "input ids"), 1)),
            "all"
            if len(r["dependence"]["encoder-only, source token 16 changed"])
            == int(size(family_box(r, "encoder-only (BERT)", "input ids"), 1))
            else "not all",
            str(r["dependence"]["decoder-only, token 16 changed"][0]),
        ],
    ),
    (
        "outputs 0-15 do not move by a single bit; only 16 and 17",
        lambda r, fig: (
            ["0", str(r["dependence"]["decoder-only, token 16 changed"][0] - 1)]
            + [str(n) for n in r["dependence"]["decoder-only, token 16 changed"]]
        ),
    ),
    (
        "target token 7 reaches only target positions 7-14",
        lambda r, fig: (
            [str(r["dependence"]["encoder-decoder, target token 7 changed"][0])]
            + span(r["dependence"]["encoder-decoder, target token 7 changed"])
        ),
    ),
    # the earlier outputs did not move when a later token changed
    (
        "(the past never changes)",
        lambda r, fig: "never" if r["dependence"]["decoder-only, token 16 changed"][0] == 16 else "sometimes",
    ),
    (
        "a change in the source reaches every target position through cross-attention",
        lambda r, fig: (
            "every"
            if len(r["dependence"]["encoder-decoder, source token 16 changed"])
            == int(size(family_box(r, "encoder-decoder: decoder", "target ids (shifted right)"), 1))
            else "not every"
        ),
    ),
    (
        "on the 18 source characters and 15 target characters, and the trained decoder-only model on the same 18 "
        "characters",
        lambda r, fig: [
            size(family_box(r, "encoder-decoder: encoder", "source ids"), 1),
            size(family_box(r, "encoder-decoder: decoder", "target ids (shifted right)"), 1),
            size(family_box(r, "decoder-only (GPT)", "input ids"), 1),
        ],
    ),
    ("built from the same 27 characters", lambda r, fig: str(r["text"]["vocab_size"])),
    # Exercises
    (
        r"The floor is $\ln 288 = 5.66$",
        lambda r, fig: [str(r["text"]["choices"]), r["text"]["nats_per_sentence"]],
    ),
    ("the full run's 2500 steps). What happens", lambda r, fig: str(r["models"]["blocks"]["steps"])),
    (
        "Sample the trained blocks at temperature 0.5 and 2",
        lambda r, fig: list(r["temperatures"]),
    ),
    (
        "1200 characters with seed 1 as above",
        lambda r, fig: [str(r["sample_length"]), str(r["sample_seed"])],
    ),
    (
        "outputs at positions 0-15 did not move by a single bit when token 16 changed",
        lambda r, fig: (
            ["0", str(r["dependence"]["decoder-only, token 16 changed"][0] - 1)]
            + [str(r["dependence"]["decoder-only, token 16 changed"][0])]
        ),
    ),
    # Answers
    (
        r"the name's (8 equally likely letters, $\ln 8 = 2.08$ nats)",
        lambda r, fig: [str(r["text"]["names_colours_things"][0])] * 2 + [r["answers"]["choice_nats"]["name"]],
    ),
    (
        r"the colour's ($\ln 6 = 1.79$",
        lambda r, fig: [str(r["text"]["names_colours_things"][1]), r["answers"]["choice_nats"]["colour"]],
    ),
    (
        r"the thing's ($\ln 6 = 1.79$)",
        lambda r, fig: [str(r["text"]["names_colours_things"][2]), r["answers"]["choice_nats"]["thing"]],
    ),
    (
        "Validation loss 0.215 instead of 0.134 and copy accuracy 0.49 instead of 0.998 (the means of the last fifth, "
        "full run, one seed): one layer copies half of the words",
        lambda r, fig: [
            answer(r, "one block", "loss")[0],
            last(r, "blocks", "loss"),
            answer(r, "one block", "copy")[0],
            last(r, "blocks", "copy"),
            "half" if round(answer(r, "one block", "copy")[0], 1) == 0.5 else "not half",
        ],
    ),
    (
        "Temperature 0.5: 26 of 27 sentences consistent (23 of them different); temperature 1: 25 of 27; "
        "temperature 2: 2 of 27",
        lambda r, fig: [
            r["temperatures"][0],
            *(str(r["answers"]["temperature 0.5"][k]) for k in ("consistent", "sentences", "different_consistent")),
            "1",  # the temperature of the samples above
            *(str(r["samples"]["blocks"][k]) for k in ("consistent", "sentences")),
            r["temperatures"][1],
            *(str(r["answers"]["temperature 2.0"][k]) for k in ("consistent", "sentences")),
        ],
    ),
    (
        "4. Yes, nearly as well in this run: validation loss 0.140 and copy accuracy 0.979 (the means of the last "
        "fifth), against 0.134 and 0.998 with positions; the losses of the last fifth overlap (0.135 to 0.148 against "
        "0.131 to 0.143)",
        lambda r, fig: (
            [
                "4",
                answer(r, "no positions", "loss")[0],
                answer(r, "no positions", "copy")[0],
                last(r, "blocks", "loss"),
                last(r, "blocks", "copy"),
                *answer(r, "no positions", "loss")[1:],
                *r["models"]["blocks"]["last_fifth"]["loss"][1:],
            ]
            # "overlap": neither range lies wholly below the other
            if answer(r, "no positions", "loss")[1] <= r["models"]["blocks"]["last_fifth"]["loss"][2]
            and r["models"]["blocks"]["last_fifth"]["loss"][1] <= answer(r, "no positions", "loss")[2]
            else "apart"
        ),
    ),
    (
        "5. A changed token 16 enters",
        lambda r, fig: ["5", str(r["dependence"]["decoder-only, token 16 changed"][0])],
    ),
    (
        "So positions 0-15 run",
        lambda r, fig: ["0", str(r["dependence"]["decoder-only, token 16 changed"][0] - 1)],
    ),
    ("(the full run's 2500 steps; a quick", lambda r, fig: str(r["answers"]["one block"]["steps"])),
    # Self-test
    (
        "for 0.998 of the copied words, yet 2 of the 27 sentences they wrote with seed 1 are not consistent",
        lambda r, fig: [
            last(r, "blocks", "copy"),
            r["samples"]["blocks"]["sentences"] - r["samples"]["blocks"]["consistent"],
            r["samples"]["blocks"]["sentences"],
            r["sample_seed"],
        ],
    ),
    # Self-test answers
    (
        r"$\ln 288 = 5.66$ nats per sentence, 0.126 nats per character",
        lambda r, fig: [r["text"]["choices"], r["text"]["nats_per_sentence"], r["loss_floor"]],
    ),
    ("The blocks come within 0.008 of that floor", lambda r, fig: last(r, "blocks", "loss") - r["loss_floor"]),
    (
        "The loss went from 1.14 to 0.25, the largest drop of the build-up, and the copy accuracy from 0.11 to 0.50",
        lambda r, fig: (
            (
                [last(r, "averaging", "loss"), last(r, "single head", "loss")]
                if max(r["gains"], key=lambda k: r["gains"][k]["loss_drop"]) == "averaging → single head"
                else ["not the largest"] * 2
            )
            + (
                [last(r, "averaging", "copy"), last(r, "single head", "copy")]
                if gain(r, "averaging", "single head")["copy_clear"]
                else ["not a clear gain"] * 2
            )
        ),
    ),
    (
        "Block 0 fetches the word: one of its heads puts 0.39 of its weight",
        lambda r, fig: [
            max(range(2), key=lambda b: max(r["weight_on_word_to_copy"][b])),
            max(max(row) for row in r["weight_on_word_to_copy"]),
        ],
    ),
    (
        "Block 1 finds where in the sentence the position is: its heads put 0.47 to 0.98 of their weight on the "
        'landmarks (the full stops, "the", "of", "is"), block 0\'s at most 0.20',
        lambda r, fig: landmark_blocks(r),
    ),
    (
        "the logits differ by 0.0 with the eager backend and by 6.2e-6 with SDPA",
        lambda r, fig: [r["library_eager_vs_hand_logits_max_abs"], r["library_vs_hand_logits_max_abs"]],
    ),
]

GIVEN = [
    ("# 10 · A decoder-only", "this tutorial's number"),
    ("float32 rounding, within 1e-5, on a CPU", "the bound tests/test_tutorial_lm.py asserts for the eager backend"),
    ("Tutorials 06 and 09", "cross-reference"),
    ("the 2017 Transformer that translates", "a year"),
    ("(the 2017 Transformer, T5, BART", "a year"),
    ("## Step 1:", "section number"),
    ("## Step 2:", "section number"),
    ("## Step 3:", "section number"),
    ("## Step 4:", "section number"),
    (r"positions $0 \dots t$", "the definition of the average"),
    (r"holds $1/(t+1)$ in its first $t + 1$ places", "the definition of the average"),
    ("a softmax over scores of 0", "the definition of equal scores"),
    ("(tutorial 04)", "cross-reference"),
    ("Nothing else changes from step 2", "cross-reference"),
    ("what tutorial 07 took apart", "cross-reference"),
    ("**Next:** [11 · an encoder-decoder", "cross-reference"),
    ("block and tutorial 07's encoder block", "cross-reference"),
    ("GPT-2 and Llama", "a model's name"),
    (r"$\max(0, xW_1 + b_1)W_2 + b_2$", "the FFN's formula"),
    ("exercise 2 trains one block", "cross-reference"),
    (
        "the fixed average of step 2, the single head of step 3, and one head of each block of step 4",
        "cross-reference",
    ),
    ("At the rows that copy, block 1 looks", "block name"),
    ("(400 characters with `--quick`", "the quick run's setting"),
    ("(exercise 3 changes the temperature)", "cross-reference"),
    ("(tutorial 08)", "cross-reference"),
    ("another order (tutorial 07)", "cross-reference"),
    ("1. The floor is", "exercise number"),
    ("2. Train the last model", "exercise number"),
    ("(`GPT(layers=1)`", "the exercise's code"),
    ("3. Sample the trained", "exercise number"),
    ("4. Train the blocks without", "exercise number"),
    ("5. In the section", "exercise number"),
    ("Why exactly 0, and not merely small?", "the question's point"),
    ("over the whole sentence (tutorial 07) keep that?", "cross-reference"),
    ("1. Only the first letters", "answer number"),
    ("2. Validation loss", "answer number"),
    ("3. Temperature", "answer number"),
    ("(tutorial 07 measured how far a later token then moves position 0)", "cross-reference"),
    ("with probability 1, so the floor of the second half is 0", "arithmetic"),
    ("its block 0 finds the candidate words, its block 1 looks", "block names"),
    ("at 0 it is greedy decoding", "the limit of the temperature"),
    ("lets position $t$ see $t + 1$ tokens", "arithmetic"),
    ("(tutorial 05, exercise 5)", "cross-reference"),
    (
        "a weight of exactly 0 there (a softmax of $-\\infty$ is 0, and the library also sets masked weights to 0)",
        "arithmetic",
    ),
    # Words that are definitions or settings, not measurements
    ("the same on every machine, nothing downloaded", "the script writes the text from a seeded generator"),
    ("traced with the shape of every tensor", "what the trace records"),
    ("the three families", "encoder-only, decoder-only and encoder-decoder", 3),
    ("first half", "a part of the sentence, not a quantity", 4),
    ("second half", "a part of the sentence, not a quantity", 8),
    ("the last character or two", "a model of one or two characters of context: the example"),
    ("Three measurements for every model below", "what the script measures"),
    ("the second half's three words (the thing, the name, the colour", "the pattern's definition"),
    ("The three, on a random", "the three forms just named"),
    ("averages the past of every position that way", "the model's definition"),
    ("Every position now sees all of its context", "the model's definition"),
    ("Every position emits three vectors through three learned maps", "the head's definition"),
    ("at every position: the per-token computation", "the FFN's definition"),
    ("mixes the words of its two halves", "the sentence's halves"),
    ("the same text on every run", "a seeded generator"),
    ("## One forward pass, every shape", "a heading"),
    ("with the shape of every tensor it makes", "what the trace records"),
    ("the same vectors are added to every sentence of a batch", "broadcasting: the table has no batch axis"),
    ("the cost that grows with the square of the length (tutorial 08)", "a T × T table; cross-reference"),
    ("(the whole context again at every step)", "what the loop does"),
    ("## Three families side by side", "a heading"),
    ("The two others use the same layers", "encoder-only and encoder-decoder"),
    ("so every position sees the whole input", "the definition of attention without a causal mask"),
    ("in every layer a cross-attention", "the architecture's definition"),
    ("Three library models of the sizes above", "the three families"),
    ("trained on all positions at once", "what the causal mask allows"),
    ("Every layer is pre-norm", "the configs set norm_position='pre'"),
    ("writes every layer and head of a model's attention", "what the explorer does"),
    ("word-level model that splits every character", "the tokenizer's definition"),
    ("with one block instead of two", "the exercise's setting"),
    ("Every other character, and the whole second half, is determined", "the generator's definition"),
    ("carry no meaning here at all", "windows start anywhere: a definition"),
    ("the mean and variance of every position", "what a LayerNorm over the sentence would do"),
    ("it trains the two variants and samples at the two temperatures", "what the cell does"),
    ("Measured over all held-out sentences", "what the measurement averages over"),
    ("the quick run's 400 steps keep the order", "the quick run's setting"),
    ("another matter at step 2.", "section number"),
    ("the bigram table learns at 0.1, the others at 0.01", "the learning rates the script sets"),
    ("the text is the same on every run", "a seeded generator"),
    # Self-test
    ("and why is it not 0?", "the loss of a certain prediction"),
    ("b. Step 2 and step 3 both weigh", "section numbers"),
    ("what does block 0 do and what does block 1 do?", "block names"),
    ("In step 2 each visible position gets the same score, 0,", "the definition of step 2's equal scores"),
    ("in step 3 a score is", "section number"),
    ('("Step 2", "Step 3")', "section names"),
    ("exercise 3 shows what the temperature trades", "cross-reference"),
]
