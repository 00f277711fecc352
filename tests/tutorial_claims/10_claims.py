"""The numbers of tutorial 10's prose and where its full run measured them (tests/test_tutorial_prose_numbers.py)."""


def size(text: str, axis: int) -> str:
    """One axis of a shape written "(1, 18, 32)"."""
    return text.strip("()").split(", ")[axis]


def traced(r, name: str) -> list:
    return dict(r["trace"])[name]


def family_box(r, family: str, label: str) -> str:
    return dict(r["families"][family])[label]


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
        lambda r, fig: [f"{r['text']['nats_per_sentence']:.2f}", str(r["text"]["choices"])],
    ),
    ("A second set of 200 sentences", lambda r, fig: str(r["text"]["validation_sentences"])),
    ("`CONTEXT` = 64 characters", lambda r, fig: str(r["settings"]["context"])),
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
    # What each step bought
    ("(1.43 nats per character)", lambda r, fig: f"{r['models']['bigram']['validation_loss']:.2f}"),
    ("0.09 of the first letters", lambda r, fig: f"{r['models']['bigram']['copy_accuracy']:.2f}"),
    ("among the possible first letters (0.16)", lambda r, fig: f"{r['copy_chance']:.2f}"),
    ("brings the loss to 1.21", lambda r, fig: f"{r['models']['averaging']['validation_loss']:.2f}"),
    ("is the big step, to 0.30", lambda r, fig: f"{r['models']['single head']['validation_loss']:.2f}"),
    ("it copies 0.43 of the words", lambda r, fig: f"{r['models']['single head']['copy_accuracy']:.2f}"),
    (
        "reach 0.142, within 0.016 of the floor of 0.126, and copy 0.97 of the words",
        lambda r, fig: [
            f"{r['models']['blocks']['validation_loss']:.3f}",
            f"{r['models']['blocks']['validation_loss'] - r['loss_floor']:.3f}",
            f"{r['loss_floor']:.3f}",
            f"{r['models']['blocks']['copy_accuracy']:.2f}",
        ],
    ),
    # Which head copies
    (
        "one head of **block 0** puts 0.46 of its weight",
        lambda r, fig: [
            str(max(range(2), key=lambda b: max(r["weight_on_word_to_copy"][b]))),
            f"{max(max(row) for row in r['weight_on_word_to_copy']):.2f}",
        ],
    ),
    ("the heads of block 1 at most 0.20", lambda r, fig: ["1", f"{max(r['weight_on_word_to_copy'][1]):.2f}"]),
    (
        "Block 1's heads are the sharper ones: their largest weight in a row is 0.52 to 0.57 on average, against at "
        "most 0.42 in block 0.",
        lambda r, fig: [
            "1",
            f"{min(r['head_sharpness'][1]):.2f}",
            f"{max(r['head_sharpness'][1]):.2f}",
            f"{max(r['head_sharpness'][0]):.2f}",
            "0",
        ],
    ),
    (
        "its heads put 0.45 to 0.99 of their weight there (0.76 for the head drawn), the heads of block 0 at most "
        "0.20",
        lambda r, fig: [
            f"{min(r['weight_on_landmarks'][1]):.2f}",
            f"{max(r['weight_on_landmarks'][1]):.2f}",
            f"{r['weight_on_landmarks'][1][r['heads_shown'][1]]:.2f}",
            "0",
            f"{max(r['weight_on_landmarks'][0]):.2f}",
        ],
    ),
    # Sampling
    ("1200 in the full run", lambda r, fig: str(r["sample_length"])),
    (
        "(9 of its 22 sentences in the full run)",
        lambda r, fig: [str(r["samples"]["single head"][k]) for k in ("pattern", "sentences")],
    ),
    (
        "consistent sentences, 22 of 26",
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
    ("an axis of the 43 positions", lambda r, fig: str(r["trace_length"])),
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
    # The library
    (
        "the same bits on this run's CPU (a difference of 0.0)",
        lambda r, fig: f"{r['library_eager_vs_hand_logits_max_abs']:.1f}",
    ),
    # Three families
    (
        "The encoder's 18 outputs all move when its token 16 changes",
        lambda r, fig: [
            str(len(r["dependence"]["encoder-only, source token 16 changed"])),
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
        lambda r, fig: [str(r["text"]["choices"]), f"{r['text']['nats_per_sentence']:.2f}"],
    ),
    ("the full run's 3000 steps). What happens", lambda r, fig: str(r["models"]["blocks"]["steps"])),
    (
        "Sample the trained blocks at temperature 0.5 and 2",
        lambda r, fig: [f"{t:g}" for t in r["temperatures"]],
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
        lambda r, fig: (
            [str(r["text"]["names_colours_things"][0])] * 2 + [f"{r['answers']['choice_nats']['name']:.2f}"]
        ),
    ),
    (
        r"the colour's ($\ln 6 = 1.79$",
        lambda r, fig: [str(r["text"]["names_colours_things"][1]), f"{r['answers']['choice_nats']['colour']:.2f}"],
    ),
    (
        r"the thing's ($\ln 6 = 1.79$)",
        lambda r, fig: [str(r["text"]["names_colours_things"][2]), f"{r['answers']['choice_nats']['thing']:.2f}"],
    ),
    (
        "Validation loss 0.215 instead of 0.142 and copy accuracy 0.50 instead of 0.97",
        lambda r, fig: [
            f"{r['answers']['one block']['validation_loss']:.3f}",
            f"{r['models']['blocks']['validation_loss']:.3f}",
            f"{r['answers']['one block']['copy_accuracy']:.2f}",
            f"{r['models']['blocks']['copy_accuracy']:.2f}",
        ],
    ),
    (
        "Temperature 0.5: 26 of 27 sentences consistent (24 of them different); temperature 1: 22 of 26; "
        "temperature 2: 4 of 31",
        lambda r, fig: [
            f"{r['temperatures'][0]:g}",
            *(str(r["answers"]["temperature 0.5"][k]) for k in ("consistent", "sentences", "different_consistent")),
            "1",  # the temperature of the samples above
            *(str(r["samples"]["blocks"][k]) for k in ("consistent", "sentences")),
            f"{r['temperatures'][1]:g}",
            *(str(r["answers"]["temperature 2.0"][k]) for k in ("consistent", "sentences")),
        ],
    ),
    (
        "validation loss 0.133 and copy accuracy 0.998",
        lambda r, fig: [
            f"{r['answers']['no positions']['validation_loss']:.3f}",
            f"{r['answers']['no positions']['copy_accuracy']:.3f}",
        ],
    ),
    (
        "5. A changed token 16 enters",
        lambda r, fig: ["5", str(r["dependence"]["decoder-only, token 16 changed"][0])],
    ),
    (
        "So positions 0-15 run",
        lambda r, fig: ["0", str(r["dependence"]["decoder-only, token 16 changed"][0] - 1)],
    ),
    ("(the full run's 3000 steps; a quick", lambda r, fig: str(r["answers"]["one block"]["steps"])),
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
    ("4. Yes, even better", "answer number"),
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
]
