"""The numbers of tutorial 09's prose, tied to its full run (docs/figures/09_results.json and 09_greedy_steps.npz)."""


def f2(x):
    return f"{abs(x):.2f}"


def e3(r, key):
    return r["exercise_3"][key]


CLAIMS = [
    # the settings of this model and this script, as its run reports them
    ("The recipe translates with 4 beams.", lambda r, fig: str(r["beams"])),
    ("greedy was already what a beam of 4 finds best", lambda r, fig: str(r["beams"])),
    ("it prunes to 4 prefixes at every step", lambda r, fig: str(r["beams"])),
    (
        "(label smoothing 0.1, which adds 0.1 × the mean of −log p over the whole vocabulary, and the unlikelihood of "
        "repeating a token, weight 2.0)",
        lambda r, fig: [str(e3(r, "label_smoothing"))] * 2 + [str(e3(r, "unlikelihood_weight"))],
    ),
    ("($\\varepsilon = 0.1$: the loss is $(1 - \\varepsilon)$", lambda r, fig: [str(e3(r, "label_smoothing")), "1"]),
    ("previous tokens (weight 2.0)", lambda r, fig: str(e3(r, "unlikelihood_weight"))),
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
    return f2(r["step_probabilities"][step_of(r, token)])


def alternative(r, token, rank):
    """The probability of the `rank`-th next-best candidate of the step that writes `token`, as (its token, 0.00)."""
    candidate, probability = r["step_alternatives"][step_of(r, token)][rank]
    return candidate, f2(probability)


def looked_at(r, layer, token):
    return r["most_attended_source_token"][layer][step_of(r, token)]


def least_sure_step(r):
    probabilities = r["step_probabilities"]
    return probabilities.index(min(probabilities))


def beam_row(r, source):
    return next(row for row in r["greedy_vs_beam"] if row["source"] == source)


def change(r, name, source):
    return next(row for row in r["exercise_6"][name] if row["source"] == source)


CLAIMS += [
    (
        "writes the reference exactly, in 11 steps",
        lambda r, fig: str(r["steps"]) if r["translation_equals_reference"] else "not the reference",
    ),
    ('("Datei" 0.77, `</s>` 0.93)', lambda r, fig: [p_of(r, "Datei"), p_of(r, "</s>")]),
    (
        'least sure at step 6 ("ge", 0.19)',
        lambda r, fig: (
            [str(least_sure_step(r) + 1), f2(r["step_probabilities"][least_sure_step(r)])]
            if r["step_tokens"][least_sure_step(r)] == "ge"
            else "another step"
        ),
    ),
    (
        'At step 7 it decides the verb: "öff" (0.49) against "laden" (0.13) and "ändert" (0.10)',
        lambda r, fig: (
            [str(step_of(r, "öff") + 1), p_of(r, "öff"), alternative(r, "öff", 0)[1], alternative(r, "öff", 1)[1]]
            if [alternative(r, "öff", k)[0] for k in (0, 1)] == ["laden", "ändert"]
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
        "With this model, 4 beams change 9 of the 12 outputs and score higher on all 9.",
        lambda r, fig: (
            [
                str(r["beams"]),
                str(r["beam_differs"]),
                str(r["strings"]),
                str(r["beam_scores_higher_where_different"]),
            ]
            if r["beam_scores_higher_where_different"] == r["beam_differs"]
            else "not all"
        ),
    ),
    (
        '"Wähle diesen auswählen" → "Einen Ordner auswählen", mean log p −1.21 → −0.85',
        lambda r, fig: (
            [
                f2(beam_row(r, "Select a folder")["greedy_mean_log_p"]),
                f2(beam_row(r, "Select a folder")["beam_mean_log_p"]),
            ]
            if (beam_row(r, "Select a folder")["greedy"], beam_row(r, "Select a folder")["beam"])
            == ("Wähle diesen auswählen", "Einen Ordner auswählen")
            else "outputs changed"
        ),
    ),
    (
        "(−1.268 → −1.262)",
        lambda r, fig: (
            [
                f"{abs(beam_row(r, 'Close all windows')['greedy_mean_log_p']):.3f}",
                f"{abs(beam_row(r, 'Close all windows')['beam_mean_log_p']):.3f}",
            ]
            if (beam_row(r, "Close all windows")["greedy"], beam_row(r, "Close all windows")["beam"])
            == ("Alle Fenster schließen", "Alle Winds schließen")
            else "outputs changed"
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
        "on its 11 labels, the loss times the labels is 17.26 against $-\\sum_t \\log p_t = 6.29$",
        lambda r, fig: [str(e3(r, "labels")), f2(e3(r, "loss_times_labels")), f2(e3(r, "minus_sum_log_p"))],
    ),
    (
        "the smoothing term is 1.04 (the cross-entropy term 0.51, unlikelihood 0.015)",
        lambda r, fig: [
            f2(e3(r, "terms_per_label")["smoothing"]),
            f2(e3(r, "terms_per_label")["cross_entropy"]),
            f"{e3(r, 'terms_per_label')['unlikelihood']:.3f}",
        ],
    ),
    (
        "6. With this model, 8 beams change 3 of the 12 outputs",
        lambda r, fig: ["6", str(2 * r["beams"]), str(len(r["exercise_6"]["8_beams"])), str(r["strings"])],
    ),
    (
        '"Alle Winds schließen" → "Alle Benutzern schließen", mean log p −1.25 against −1.26 with 4 beams',
        lambda r, fig: (
            [
                f2(change(r, "8_beams", "Close all windows")["mean_log_p"]),
                f2(change(r, "8_beams", "Close all windows")["beam_mean_log_p"]),
                str(r["beams"]),
            ]
            if change(r, "8_beams", "Close all windows")["output"] == "Alle Benutzern schließen"
            else "output changed"
        ),
    ),
    (
        "`length_penalty=0.0` 4 change, each to a shorter output",
        lambda r, fig: (
            ["0.0", str(len(r["exercise_6"]["length_penalty_0"]))]
            if all(row["tokens"] < row["beam_tokens"] for row in r["exercise_6"]["length_penalty_0"])
            else "not all shorter"
        ),
    ),
    (
        "10 tokens with `</s>` and a summed log-probability of −6.04, against −6.29 for the 11 of the right one "
        "(mean −0.60 against −0.57)",
        lambda r, fig: (
            [
                str(change(r, "length_penalty_0", "Could not open file")["tokens"]),
                f2(change(r, "length_penalty_0", "Could not open file")["sum_log_p"]),
                f2(change(r, "length_penalty_0", "Could not open file")["beam_sum_log_p"]),
                str(change(r, "length_penalty_0", "Could not open file")["beam_tokens"]),
                f2(change(r, "length_penalty_0", "Could not open file")["mean_log_p"]),
                f2(change(r, "length_penalty_0", "Could not open file")["beam_mean_log_p"]),
            ]
            if change(r, "length_penalty_0", "Could not open file")["output"]
            == "Datei konnte nicht gespeichert werden"
            else "output changed"
        ),
    ),
]
GIVEN += [("(tutorial 06 describes it)", "cross-reference")]
