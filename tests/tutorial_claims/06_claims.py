"""The numbers of tutorial 06's prose, tied to its full run (docs/figures/06_results.json and 06_*.npz)."""

PLACES = ["same", "previous", "next", "first", "last (</s>)", "punctuation", "elsewhere"]


def shape(r, key):
    return str(r["model_shape"][key])


def share(r, layer, head, place):
    return r["head_place_shares"][layer][head][PLACES.index(place)]


def uniform(r, place):
    return r["uniform_place_shares"][PLACES.index(place)]


def f2(x):
    return x


def largest_gap_to_uniform(r):
    """The largest gap between a head's share and uniform attention's, rounded up to 0.01 (the prose: "within")."""
    uniform_shares = r["uniform_place_shares"]
    gap = max(
        abs(s - u)
        for layer in r["head_place_shares"]
        for head in layer
        for s, u in zip(head, uniform_shares, strict=True)
    )
    return -(-gap * 100 // 1) / 100


def first_token_heads(r):
    """The heads whose pattern is the first token, by their share of it, largest first: (layer, head, share)."""
    heads = [
        (layer, head, share(r, layer, head, "first"))
        for layer in range(len(r["head_place_shares"]))
        for head in range(len(r["head_place_shares"][layer]))
        if r["head_patterns"][f"layer {layer}, head {head}"] == "first"
    ]
    return sorted(heads, key=lambda h: -h[2])


def first_token_claim(r):
    """ "layer 1's head 0 with 0.17, layer 0's head 2 with 0.15 and …": each first-token head, largest share first."""
    return [value for layer, head, s in first_token_heads(r) for value in (str(layer), str(head), s)]


def previous_token_claim(r):
    """ "layer 1's heads 1 and 2 lean towards the previous token, 0.15 each (uniform: 0.12)"."""
    heads = [name for name, place in r["head_patterns"].items() if place == "previous"]
    shares = {round(share(r, int(n.split()[1][:-1]), int(n.split()[-1]), "previous"), 2) for n in heads}
    if heads != ["layer 1, head 1", "layer 1, head 2"] or len(shares) != 1:
        return "the previous-token heads changed"
    return ["1", "1", "2", *shares, uniform(r, "previous")]


def largest_places(r):
    """Each head's place of largest share."""
    return [
        PLACES[max(range(len(PLACES)), key=head.__getitem__)] for layer in r["head_place_shares"] for head in layer
    ]


def looks_at(r, text, layer, written, source):
    """The weight of the first step of `text` that writes `written` while `layer` looks most at `source`."""
    for row, attended, weight in r["cross_most_attended"][text][layer]:
        if row.split(": ", 1)[1] == written:
            return f2(weight) if attended == source else f"looks at {attended!r}"
    return "not written"


def translations_right(r):
    """The sentences the model translates exactly as the reference of the tutorial's table."""
    references = {
        "Could not open file": "Datei konnte nicht geöffnet werden",
        "Show hidden files": "Verborgene Dateien anzeigen",
        "Delete the selected files": "Ausgewählte Dateien löschen",
        "Open the file": "Datei öffnen",
    }
    return [text for text, output in r["translations"].items() if output == references[text]]


CLAIMS = [
    (
        "2 encoder and 2 decoder layers of width 128 with 4 heads, 2,000 steps",
        lambda r, fig: [
            shape(r, "encoder_layers"),
            shape(r, "decoder_layers"),
            shape(r, "hidden_size"),
            shape(r, "heads"),
            r["training_steps"],
        ],
    ),
    (
        "On 100 strings of its test split (held out from training), with beam search as the recipe decodes, it scores "
        "BLEU 43.97 and chrF 51.98",
        lambda r, fig: [str(r["bleu_samples"]), r["test_bleu"], r["test_chrf"]],
    ),
    (
        "Of the 4 short strings it translates greedily further down, 1 comes out exactly as a correct translation.",
        lambda r, fig: [len(r["translations"]), r["translations_exact"]],
    ),
    ("Exactly right: 1 of the 4", lambda r, fig: [r["translations_exact"], len(r["translations"])]),
    (
        "in the third picture the first three rows are empty",
        lambda r, fig: int((~fig("06_masks")["causal_padding"].any(-1)).sum()),
    ),
    (
        "every real query's row still sums to 1",
        lambda r, fig: ["every" if r["real_row_sum_error"] < 1e-5 else "not every", 1],
    ),
    ("On the 605 test strings (4,384 queries)", lambda r, fig: [str(r["test_strings"]), r["test_queries"]]),
    ("no share lies further than 0.10 from uniform attention's", lambda r, fig: largest_gap_to_uniform(r)),
    (
        "layer 0's head 0 puts 0.16 on `</s>` (uniform attention: 0.09) and only 0.05 on the token itself "
        "(uniform: 0.14)",
        lambda r, fig: (
            [
                "0",
                "0",
                f2(share(r, 0, 0, "last (</s>)")),
                f2(uniform(r, "last (</s>)")),
                f2(share(r, 0, 0, "same")),
                f2(uniform(r, "same")),
            ]
            if r["head_patterns"]["layer 0, head 0"] == "last (</s>)"
            else "pattern changed"
        ),
    ),
    (
        "three heads favour the first token, layer 1's head 0 with 0.17, layer 0's head 2 with 0.15 and layer 1's "
        "head 3 with 0.14 (uniform: 0.09)",
        lambda r, fig: [len(first_token_heads(r)), *first_token_claim(r), uniform(r, "first")],
    ),
    (
        "and layer 1's heads 1 and 2 lean towards the previous token, 0.15 each (uniform: 0.12)",
        lambda r, fig: previous_token_claim(r),
    ),
    (
        'The largest share of every head goes "elsewhere"',
        lambda r, fig: "every" if set(largest_places(r)) == {"elsewhere"} else "not every",
    ),
    (
        'On "Save as" the layer\'s input $X$ is 3 × 128 (3 tokens, width 128), $Q$, $K$ and $V$ are 3 × 128, each of '
        "the 4 heads works on 3 × 32 blocks, and $Z$ is 3 × 128 again. The product of the matrices drawn gives the "
        "module's output to within 1.2e-7",
        lambda r, fig: [
            *(r["matrices"][k] for k in ("tokens", "width", "tokens", "width", "tokens", "width", "heads")),
            *(r["matrices"][k] for k in ("tokens", "head_width", "tokens", "width")),
            r["matrices_vs_module_max_abs"],
        ],
    ),
    (
        "1. Queries 0-4 see $1, 2, 3, 4, 5$ keys and the pad queries 5-7 see the 5 real keys",
        lambda r, fig: ["1", "0", "4", *r["exercise_1_keys_seen"][:5], "5", "7", *set(r["exercise_1_keys_seen"][5:])],
    ),
    ("2. 8, 9 and 10 keys", lambda r, fig: ["2", *r["exercise_2_keys_seen"]]),
    (
        "3. Yes, by up to 0.56 here",
        lambda r, fig: ["3", r["exercise_3_swapped_max_abs"]] if r["exercise_3_swapped_max_abs"] > 0 else "no change",
    ),
    ("(to within 6.0e-8, float rounding", lambda r, fig: r["exercise_3_restored_max_abs"]),
    (
        "here the same token 15 times of the 16 that `max_new_tokens` allows",
        lambda r, fig: [
            max(map(r["exercise_5_untrained_tokens"].count, r["exercise_5_untrained_tokens"])),
            len(r["exercise_5_untrained_tokens"]),
        ],
    ),
    (
        'for "Open the file" it looks most at "file" (0.69) while writing "Datei" and at "Open" (0.56) while writing '
        '"öffnen"',
        lambda r, fig: (
            [looks_at(r, "Open the file", 1, "Datei", "file"), looks_at(r, "Open the file", 1, "öffnen", "Open")]
            if translations_right(r) == ["Could not open file"]
            and r["translations"]["Open the file"] == "Die Datei öffnen"
            else "translations changed"
        ),
    ),
    (
        'for "Delete the selected files" at "files" (0.92) for "Dateien" and at "Delete" (0.54) for "löschen"',
        lambda r, fig: (
            [
                looks_at(r, "Delete the selected files", 1, "Dateien", "files"),
                looks_at(r, "Delete the selected files", 1, "löschen", "Delete"),
            ]
            if r["translations"]["Delete the selected files"] == "Die ausgewählte Dateien löschen"
            else "translation changed"
        ),
    ),
    (
        'Each extra "Die" looks most at "the" (0.55 and 0.56)',
        lambda r, fig: sorted(
            looks_at(r, text, 1, "Die", "the") for text in ("Open the file", "Delete the selected files")
        ),
    ),
    (
        'writes "H" and "er" while its second layer looks at "h" (0.90 and 0.82)',
        lambda r, fig: (
            [looks_at(r, "Show hidden files", 1, "H", "h"), looks_at(r, "Show hidden files", 1, "er", "h")]
            if r["translations"]["Show hidden files"] == "Her Dateien anzeigen"
            else "translation changed"
        ),
    ),
    (
        "the trained model's mean normalised entropy is 0.44, against 1.00 for the fresh model",
        lambda r, fig: [f2(r["cross_entropy_trained"]), f2(r["cross_entropy_untrained"])],
    ),
    ("4. 1,050,624 parameters", lambda r, fig: ["4", r["exercise_4_parameters_kv8"]]),
    ("and 656,640 with 2", lambda r, fig: [r["exercise_4_parameters_kv2"], "2"]),
    ("the normalised entropy of about 1.0 in the table above", lambda r, fig: r["cross_entropy_untrained"]),
]
GIVEN = [
    ("# 06 ·", "the tutorial's number"),
    ("(Vaswani et al. 2017 §3.2.2)", "citation"),
    ("keys $0 \\dots i$", "definition of the causal mask"),
    ("the 0/1 `attention_mask`", "definition"),
    ("sees keys $0 \\dots p$.", "definition of the cached causal mask"),
    ("as in Vaswani et al. (2017)", "citation"),
    ("on its pad keys are exactly 0", "what the test of this cell asserts"),
    ("NaN (tutorial 04)", "cross-reference"),
    ("have the colour of 0.", "what the test of this cell asserts"),
    ("(Ainslie et al. 2023)", "citation"),
    ("averaged over all queries; a head's seven shares sum to 1", "a partition of the keys into seven places"),
    ("weighted $1/n$", "definition of uniform attention"),
    ("the first $t - 1$ tokens written", "definition of step t"),
    ("(tutorial 09's figure", "cross-reference"),
    ("each row sums to 1 over them", "the softmax's definition"),
    ("Jain & Wallace (2019)", "citation"),
    ("Wiegreffe & Pinter (2019)", "citation"),
    ("is 1 for a uniform row and 0 for a row", "definition of the normalised entropy"),
    ("(its scores are all near 0)", "why a fresh model is uniform"),
    ("[07 · a Transformer block", "cross-reference"),
]
GIVEN += [
    (
        "1. Build the mask of a *right*-padded target batch in the decoder, as this model trains: "
        '`combine(causal_mask(8, 8, 0, torch.device("cpu")), '
        "padding_mask(torch.tensor([[1, 1, 1, 1, 1, 0, 0, 0]])))`.",
        "exercise 1's setting",
    ),
    (
        '2. `causal_mask(3, 10, 7, torch.device("cpu"))`: three new queries after 7 cached tokens.',
        "exercise 2's setting",
    ),
    ("3. In the cell that runs the heads one by one, swap the outputs of heads 0 and 1", "exercise 3's setting"),
    (
        "4. Count the parameters of "
        "`MultiHeadAttention(hidden_size=512, num_heads=8, num_kv_heads=kv, head_dim=64)` for "
        "`kv = 8` and `kv = 2`",
        "exercise 4's setting",
    ),
    ('5. Translate "Could not open file"', "exercise number"),
    ("1. Queries 0-4 see $1, 2, 3, 4, 5$ keys and the pad queries 5-7 see the 5 real keys", "answer 1: counting"),
    ("every query has at least key 0 before it", "answer 1: counting"),
    ("(Their outputs are never used:", "answer 1: what the loss reads"),
    ("2. 8, 9 and 10 keys", "answer 2: counting"),
    ("sees keys $0 \\dots p$, and the new queries sit at positions 7, 8 and 9.", "answer 2: counting"),
    (
        "`o_proj` reads the concatenation by position, columns $0 \\dots D-1$ as head 0's output",
        "answer 3: layout",
    ),
    ("with 8 key/value heads", "exercise 4's setting"),
    ("`k_proj` and `v_proj` shrink from $512 \\times 512$ to $128 \\times 512$", "answer 4: arithmetic"),
    ("The cache holds $2 \\cdot$", "keys and values"),
    ("1024 against 256, four times fewer", "answer 4: 2 × 8 × 64 and 2 × 2 × 64"),
    ("serves 4 query heads", "answer 4: 8 / 2"),
    ("5. Nothing meaningful", "answer number"),
    ("so every query-key score is close to 0", "answer 5: small weights"),
]
GIVEN += [("tutorial 02, 06 or 09", "cross-reference")]

GIVEN += [
    ("It uses attention in two ways", "self- and cross-attention, defined next"),
    ("for every (query, key) pair", "definition of a mask"),
    ("hides the pad keys from every query", "definition of the padding mask"),
    ("so that every row's last token is a real one and generation can continue all rows at once", "why left padding"),
    ("starts every row from the same start token", "how generate() starts"),
    ("the same data on every machine", "the corpus is pinned"),
    ("identical to the reference scores 100", "the scales of BLEU and chrF"),
    ("The two panels share one colour scale", "how the figure is drawn (asserted by its test)"),
    ("attends in every head independently", "definition of multi-head attention"),
    ("which shrinks the keys and values a decoder must cache", "fewer key/value heads by construction (exercise 4)"),
    ("Every encoder layer × head for one sentence", "what the figure holds"),
    ("All panels share one colour scale", "how the figure is drawn"),
    ("(strings it never trained on)", "definition of the test split"),
    ("into the first of seven places", "the seven places, defined next"),
    ("which ends every source", "what the tokenizer appends"),
    ("none of which the weights show", "what attention weights are"),
    ("To look at every layer and head interactively, the attention explorer writes them all", "what the page holds"),
    ("Swapping the two heads'", "answer 3: heads 0 and 1"),
    ("Alammar's *The Illustrated Transformer* (2018)", "citation"),
]

# The self-test's answers: measured numbers as claims, definitions as given.
CLAIMS += [
    (
        "a lower triangle: 36 of the 64 pairs of 8 tokens",
        lambda r, fig: [r["causal_allowed"], fig("06_masks")["causal"].size, fig("06_masks")["causal"].shape[0]],
    ),
    (
        "after 4 cached tokens the 2 new queries see 5 and 6 keys",
        lambda r, fig: [
            fig("06_masks")["cached"].shape[1] - fig("06_masks")["cached"].shape[0],
            fig("06_masks")["cached"].shape[0],
            *r["cached_keys_seen"],
        ],
    ),
    ("b. Weight 0.0 (the largest weight on a pad key", lambda r, fig: r["pad_key_weight_max"]),
    ('that of "Save as" alone to within 7.2e-7', lambda r, fig: r["padding_invariance_max_abs"]),
    ("(here 4 heads of width 32)", lambda r, fig: [r["matrices"]["heads"], r["matrices"]["head_width"]]),
    ("give the layer's output with a difference of 0.0", lambda r, fig: r["heads_side_by_side_max_abs"]),
    (
        "over the 605 test strings no head's share of any place lies further than 0.10 from uniform attention's, and "
        'every head puts its largest share "elsewhere"',
        lambda r, fig: [
            str(r["test_strings"]),
            largest_gap_to_uniform(r),
            "every" if set(largest_places(r)) == {"elsewhere"} else "not every",
        ],
    ),
    (
        '"Show hidden files" writes "H" while its second layer looks at "h" (0.90)',
        lambda r, fig: looks_at(r, "Show hidden files", 1, "H", "h"),
    ),
    (
        "their mean normalised entropy is 0.44, against 1.00 in a freshly initialised model",
        lambda r, fig: [r["cross_entropy_trained"], r["cross_entropy_untrained"]],
    ),
]
