"""The numbers of tutorial 09's prose, tied to its full run (docs/figures/09_results.json and 09_greedy_steps.npz)."""


def e3(r, key):
    return r["exercise_3"][key]


CLAIMS = [
    # the settings of this model and this script, as its run reports them
    ("The recipe translates with 4 beams.", lambda r, fig: str(r["beams"])),
    ("greedy was already what a beam of 4 finds best", lambda r, fig: str(r["beams"])),
    ("it prunes to 4 prefixes", lambda r, fig: str(r["beams"])),
    (
        "this model trains on more than that (label smoothing 0.1, which adds 0.1 × the mean of −log p over the whole "
        "vocabulary, and the unlikelihood of repeating a token, weight 2.0)",
        lambda r, fig: [
            "more" if e3(r, "label_smoothing") > 0 or e3(r, "unlikelihood_weight") > 0 else "no more",
            e3(r, "label_smoothing"),
            e3(r, "label_smoothing"),
            e3(r, "unlikelihood_weight"),
        ],
    ),
    # the loss by hand (smoothing and unlikelihood added) is the library's loss: the first section computes all of it
    (
        "the first section computes all of it by hand",
        lambda r, fig: (
            "all" if abs(r["teacher_forcing_loss_by_hand"] - r["teacher_forcing_loss_library"]) < 1e-4 else "part"
        ),
    ),
    ("($\\varepsilon = 0.1$:", lambda r, fig: e3(r, "label_smoothing")),
    ("previous tokens (weight 2.0)", lambda r, fig: e3(r, "unlikelihood_weight")),
    ("and with 8 beams instead of 4.", lambda r, fig: [str(2 * r["beams"]), str(r["beams"])]),
]
GIVEN = [
    ("# 09 ·", "the tutorial's number"),
    ("The 2017 Transformer", "citation"),
    ("model of tutorial 06", "cross-reference"),
    ("the $t - 1$ tokens written so far", "definition of step t"),
    ("(Jain & Wallace 2019; Wiegreffe & Pinter 2019)", "citation"),
    ("**Check 1:", "numbering"),
    ("**Check 2:", "numbering"),
    ("(tutorial 06's cross-attention figure", "cross-reference"),
    ("about $T^2/2$ token positions", "arithmetic"),
    ("one of tutorial 06.", "cross-reference"),
    ("before transformers 5.24)", "the library version that renamed the argument"),
    ("with 1.0 (the project's recipe", "the recipe's length penalty (training/configs)"),
    ("with 0 it is the plain sum", "definition"),
    ("(1.0 out of 0.6, 1.0 and 1.4)", "docs/training.md, the recipe's choice"),
    ("4 beams added 1.6 BLEU", "docs/training.md, the recipe's measurement"),
    ("[tutorial 06's page]", "cross-reference"),
    ("[10 · a decoder-only", "cross-reference"),
    ("1. Call `model.generate(**encoded, max_new_tokens=3, do_sample=False, num_beams=1)`", "exercise 1's setting"),
    ("2. How many decoder positions", "numbering"),
    ("3. Teacher-force the model on its own greedy output (`labels = prefix[:, 1:]`)", "exercise 3's setting"),
    ("4. After the cached loop", "numbering"),
    ('5. Encode `[source, "Save"]` as one padded batch and run the greedy loop on row 1', "exercise 5's setting"),
    ("6. Rerun the greedy/beam comparison with `length_penalty=0.0`", "exercise 6's setting"),
    ("1. It is the first 4 ids of `prefix` (the start token and 3 tokens)", "answer 1: max_new_tokens=3 plus <s>"),
    (
        "2. Without a cache, step $t$ runs the decoder over $t$ positions: $1 + 2 + \\dots + T = T(T+1)/2$",
        "answer 2: arithmetic",
    ),
    ("3. No:", "numbering"),
    ("4. Only the self-attention", "numbering"),
    ("5. Yes, up to float rounding: the padding mask gives the pad keys of row 1", "numbering, exercise 5's row"),
    ("dividing by the length (1.0) removes that bias, and the recipe chose 1.0", "the recipe's length penalty"),
]


def step_of(r, token):
    """The index of the first greedy step that writes `token`."""
    return r["step_tokens"].index(token)


def p_of(r, token):
    return r["step_probabilities"][step_of(r, token)]


def alternative(r, token, rank):
    """The probability of the `rank`-th next-best candidate of the step that writes `token`, as (its token, 0.00)."""
    candidate, probability = r["step_alternatives"][step_of(r, token)][rank]
    return candidate, probability


def looked_at(r, layer, token):
    return r["most_attended_source_token"][layer][step_of(r, token)]


def least_sure_step(r):
    probabilities = r["step_probabilities"]
    return probabilities.index(min(probabilities))


def beam_row(r, source):
    return next(row for row in r["greedy_vs_beam"] if row["source"] == source)


def overwrite(r):
    return beam_row(r, "Do you want to overwrite the existing file?")


def close_all(r):
    """The output that length_penalty=0 gives "Close all windows", with the 4-beam output's scores."""
    return change(r, "length_penalty_0", "Close all windows")


def change(r, name, source):
    return next(row for row in r["exercise_6"][name] if row["source"] == source)


CLAIMS += [
    (
        "writes the reference exactly, in 11 steps",
        lambda r, fig: str(r["steps"]) if r["translation_equals_reference"] else "not the reference",
    ),
    ('("Datei" 0.69, `</s>` 0.93)', lambda r, fig: [p_of(r, "Datei"), p_of(r, "</s>")]),
    (
        'least sure at step 6 ("ge", 0.19)',
        lambda r, fig: (
            [str(least_sure_step(r) + 1), r["step_probabilities"][least_sure_step(r)]]
            if r["step_tokens"][least_sure_step(r)] == "ge"
            else "another step"
        ),
    ),
    (
        'At step 7 it decides the verb: "öff" (0.51) against "ändert" (0.10) and "laden" (0.10)',
        lambda r, fig: (
            [str(step_of(r, "öff") + 1), p_of(r, "öff"), alternative(r, "öff", 0)[1], alternative(r, "öff", 1)[1]]
            if [alternative(r, "öff", k)[0] for k in (0, 1)] == ["ändert", "laden"]
            and [looked_at(r, layer, "öff") for layer in (0, 1)] == ["pen", "pen"]
            else "candidates changed"
        ),
    ),
    (
        "The reordering shows in layer 1",
        lambda r, fig: (
            "1"
            if [looked_at(r, 1, token) for token in ("Datei", "onn", "te", "nicht", "werden")]
            == ["file", "ou", "ld", "not", "not"]
            else "attention changed"
        ),
    ),
    (
        "With this model, 4 beams change 9 of the 12 outputs and score higher on 8 of the 9.",
        lambda r, fig: [
            r["beams"],
            r["beam_differs"],
            r["strings"],
            r["beam_scores_higher_where_different"],
            r["beam_differs"],
        ],
    ),
    (
        '"Wähle einfügen" → "Eine Ordner auswählen", mean log p −1.27 → −0.83',
        lambda r, fig: (
            [
                beam_row(r, "Select a folder")["greedy_mean_log_p"],
                beam_row(r, "Select a folder")["beam_mean_log_p"],
            ]
            if (beam_row(r, "Select a folder")["greedy"], beam_row(r, "Select a folder")["beam"])
            == ("Wähle einfügen", "Eine Ordner auswählen")
            else "outputs changed"
        ),
    ),
    (
        "the beam's output scores lower (−1.69 → −1.79)",
        lambda r, fig: (
            [overwrite(r)["greedy_mean_log_p"], overwrite(r)["beam_mean_log_p"]]
            if overwrite(r)["beam_mean_log_p"] < overwrite(r)["greedy_mean_log_p"]
            else "higher"
        ),
    ),
    (
        "For this run's 11 steps (10 tokens and `</s>`), 66 against 11.",
        lambda r, fig: [
            str(r["steps"]),
            str(r["steps"] - 1),
            str(r["steps"] * (r["steps"] + 1) // 2),
            str(r["steps"]),
        ],
    ),
    (
        "on its 11 labels, the loss times the labels is 17.14 against $-\\sum_t \\log p_t = 6.21$",
        lambda r, fig: [str(e3(r, "labels")), e3(r, "loss_times_labels"), e3(r, "minus_sum_log_p")],
    ),
    (
        "the smoothing term is 1.04 (the cross-entropy term 0.51, unlikelihood 0.014)",
        lambda r, fig: [
            e3(r, "terms_per_label")["smoothing"],
            e3(r, "terms_per_label")["cross_entropy"],
            e3(r, "terms_per_label")["unlikelihood"],
        ],
    ),
    (
        "6. With this model, 8 beams change 3 of the 12 outputs",
        lambda r, fig: ["6", str(2 * r["beams"]), str(len(r["exercise_6"]["8_beams"])), str(r["strings"])],
    ),
    (
        '"The file could not be found": "Die Datei koppelte nicht gespeichert werden" → "Die-Datei konnte nicht '
        'gespeichert werden", mean log p −0.95 against −0.98 with 4 beams, a higher score',
        lambda r, fig: (
            [
                change(r, "8_beams", "The file could not be found")["mean_log_p"],
                change(r, "8_beams", "The file could not be found")["beam_mean_log_p"],
                str(r["beams"]),
            ]
            if change(r, "8_beams", "The file could not be found")["output"]
            == "Die-Datei konnte nicht gespeichert werden"
            else "output changed"
        ),
    ),
    (
        "`length_penalty=0.0` 3 change, each to a shorter output",
        lambda r, fig: (
            [r["exercise_6_settings"]["length_penalty"], str(len(r["exercise_6"]["length_penalty_0"]))]
            if all(row["tokens"] < row["beam_tokens"] for row in r["exercise_6"]["length_penalty_0"])
            else "not all shorter"
        ),
    ),
    (
        '"Alle schließen schließen", 4 tokens with `</s>` and a summed log-probability of −4.66, against −6.71 for '
        'the 6 of the right "Alle Fenster schließen" (mean −1.16 against −1.12)',
        lambda r, fig: (
            [
                str(close_all(r)["tokens"]),
                close_all(r)["sum_log_p"],
                close_all(r)["beam_sum_log_p"],
                str(close_all(r)["beam_tokens"]),
                close_all(r)["mean_log_p"],
                close_all(r)["beam_mean_log_p"],
            ]
            if (close_all(r)["output"], close_all(r)["beam"]) == ("Alle schließen schließen", "Alle Fenster schließen")
            else "output changed"
        ),
    ),
]
GIVEN += [("(tutorial 06 describes it)", "cross-reference")]


def beam_scores_higher_and_worse(r):
    """Ranked by the summed log-probability, the wrong "Alle schließen schließen" beats the right "Alle Fenster
    schließen" (exercise 6)."""
    row = close_all(r)
    return (row["output"], row["beam"]) == ("Alle schließen schließen", "Alle Fenster schließen") and (
        row["sum_log_p"] > row["beam_sum_log_p"]
    )


CLAIMS += [
    ("Our sentence and eleven more UI strings", lambda r, fig: r["strings"] - 1),
    # a row that is not clean: layer 1 at "werden" looks at "not" (the claim of "The reordering shows in layer 1")
    (
        'Not every row is that clean ("werden" looks at "not" too)',
        lambda r, fig: "every" if looked_at(r, 1, "werden") == "not" else "(changed)",
    ),
    # the self-attention cache holds one position per step taken
    (
        "whose keys and values grow by one position per step",
        lambda r, fig: "grow" if r["cache_self_attention_length"] == r["steps"] else "do not grow",
    ),
    (
        "the most probable output is not always the best translation",
        lambda r, fig: "always" if beam_scores_higher_and_worse(r) else "(changed)",
    ),
    (
        "The cell below runs it: the same ids as the loop's first 4.",
        lambda r, fig: (
            len(r["exercise_1"]["tokens"]) if r["exercise_1"]["tokens"] == r["exercise_1"]["prefix_start"] else "other"
        ),
    ),
    (
        "4. Only the self-attention length grows (by one)",
        lambda r, fig: [
            "4",
            "grows"
            if r["exercise_4"]["self_attention"][1] > r["exercise_4"]["self_attention"][0]
            and r["exercise_4"]["cross_attention"][1] == r["exercise_4"]["cross_attention"][0]
            else "(changed)",
        ],
    ),
    (
        "Measured in the cell below: self-attention 11 → 12 positions, cross-attention 8 → 8, the source's 8 tokens.",
        lambda r, fig: [*r["exercise_4"]["self_attention"], *r["exercise_4"]["cross_attention"], r["source_length"]],
    ),
    (
        '"Save", padded with 6 pad tokens, writes the same 3 tokens (`</s>` included) as alone ("Speichern"), and its '
        "logits differ by at most 1.3e-6.",
        lambda r, fig: (
            [
                r["exercise_5"]["pad_positions"],
                r["exercise_5"]["tokens"],
                r["exercise_5"]["logits_max_abs"],
            ]
            if r["exercise_5"]["same_tokens"] and r["exercise_5"]["output"] == "Speichern"
            else "another output"
        ),
    ),
]
GIVEN += [
    ("translates in two phases", "the encoder and the decoder: a definition"),
    ("outputs a probability for every word of the vocabulary", "what the output layer is"),
    ("predicts every position in one parallel pass", "what teacher forcing is"),
    ("One forward pass scores every position at once", "what teacher forcing is"),
    ("the model never sees its own mistakes during training", "what teacher forcing is: the reference is fed"),
    ("cross-attention row of the new position in every decoder layer", "what the loop records"),
    ("the loop recomputes the whole prefix at every step", "what the loop does"),
    ("runs the decoder over all $t$ positions at step $t$", "what the loop without a cache does"),
    ("The cache is an object that every step fills in place", "what the cache is"),
    ("commits to the most probable token at every step", "the definition of greedy decoding"),
    (
        "at every step it extends each of them by every token and keeps the $k$ best of all those extensions",
        "the definition of beam search",
    ),
    ("Where the two outputs are the same", "greedy's and the beam's"),
    ("prefixes at every step and can drop", "the definition of beam search"),
    ("the most probable output of all (that would take a search over every sequence)", "a definition"),
    ("sampling draws from the distribution (all available through", "what generate() offers"),
    ("the decoder's look at the source at every step", "what cross-attention is"),
    ("the explorer shows it for every layer and head", "what the explorer draws"),
    ("repeating one of the two previous tokens", "the unlikelihood term's definition (the library's loss)"),
    ("The cell below prints all of it.", "what the cell prints"),
    ("for a model trained without either, all three numbers agree", "arithmetic: ε = 0 and α = 0"),
    ("unless two tokens are tied that closely", "a condition, not a measurement"),
    ("Every token adds a negative log-probability", "arithmetic: log p < 0"),
    ("the loss is $(1 - \\varepsilon)$", "the formula"),
    # the self-test
    ("## Self-test 1. During", "numbering"),
    ("2. Why can one", "numbering"),
    ("3. In an `EncoderDecoderCache`, which part grows", "numbering; a question"),
    ("4. What does beam search keep", "numbering"),
    ("5. Why does ranking", "numbering"),
    ("## Answers to the self-test 1. The labels", "numbering"),
    ("2. The causal mask", "numbering"),
    ("3. The self-attention cache gains", "numbering"),
    ("4. It keeps the $k$ best", "numbering"),
    ("5. Each token adds a log-probability below 0", "numbering; arithmetic: log p < 0"),
    ("(`length_penalty=1.0`) removes that", "the recipe's length penalty"),
    ("exercise 6 finds a wrong output", "cross-reference"),
    ('"Alle Fenster schließen" (exercise 6).', "cross-reference"),
    ('among them "Close all windows":', "a quotation"),
]
