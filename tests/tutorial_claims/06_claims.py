"""The numbers of tutorial 06's prose, tied to its full run (docs/figures/06_results.json and 06_*.npz)."""

PLACES = ["same", "previous", "next", "first", "last (</s>)", "punctuation", "elsewhere"]


def shape(r, key):
    return str(r["model_shape"][key])


def share(r, layer, head, place):
    return r["head_place_shares"][layer][head][PLACES.index(place)]


def uniform(r, place):
    return r["uniform_place_shares"][PLACES.index(place)]


def f2(x):
    return f"{x:.2f}"


def largest_gap_to_uniform(r):
    """The largest gap between a head's share and uniform attention's, rounded up to 0.01 (the prose: "within")."""
    uniform_shares = r["uniform_place_shares"]
    gap = max(
        abs(s - u)
        for layer in r["head_place_shares"]
        for head in layer
        for s, u in zip(head, uniform_shares, strict=True)
    )
    return f"{-(-gap * 100 // 1) / 100:.2f}"


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
    """'layer 1's heads 3 and 0 with 0.18 and 0.17 and layer 0's head 2 with 0.16 (uniform: 0.09)'."""
    (l1, h1, s1), (l2, h2, s2), (l3, h3, s3) = first_token_heads(r)
    assert l1 == l2 != l3, "the prose groups the first two heads by layer"
    return [str(l1), str(h1), str(h2), f2(s1), f2(s2), str(l3), str(h3), f2(s3), f2(uniform(r, "first"))]


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
            f"{r['training_steps']:,}",
        ],
    ),
    (
        "on 100 strings of its test split, BLEU 45.08 and chrF 52.08",
        lambda r, fig: [str(r["bleu_samples"]), f"{r['test_bleu']:.2f}", f"{r['test_chrf']:.2f}"],
    ),
    ("On the 605 test strings (4,384 queries)", lambda r, fig: [str(r["test_strings"]), f"{r['test_queries']:,}"]),
    ("every share is within 0.09 of uniform attention's", lambda r, fig: largest_gap_to_uniform(r)),
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
        "layer 1's heads 3 and 0 with 0.18 and 0.17 and layer 0's head 2 with 0.16 (uniform: 0.09)",
        lambda r, fig: first_token_claim(r),
    ),
    (
        'for "Open the file" it looks most at "file" (0.46, most of the rest on "the") while writing "Datei" and at '
        '"Open" (0.50) while writing "öffnen"',
        lambda r, fig: (
            [looks_at(r, "Open the file", 1, "Datei", "file"), looks_at(r, "Open the file", 1, "öffnen", "Open")]
            if translations_right(r) == ["Could not open file", "Open the file"]
            else "translations changed"
        ),
    ),
    (
        'for "Delete the selected files" at "files" (0.92) for "Dateien" and at "Delete" (0.50) for "löschen"',
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
        'The extra "Die" looks at "the" (0.57)',
        lambda r, fig: looks_at(r, "Delete the selected files", 1, "Die", "the"),
    ),
    (
        'writes "H" and "er" while its second layer looks at "h" (0.73 and 0.75)',
        lambda r, fig: (
            [looks_at(r, "Show hidden files", 1, "H", "h"), looks_at(r, "Show hidden files", 1, "er", "h")]
            if r["translations"]["Show hidden files"] == "Her Dateien anzeigen"
            else "translation changed"
        ),
    ),
    (
        "the trained model's mean normalised entropy is 0.47, against 1.00 for the fresh model",
        lambda r, fig: [f2(r["cross_entropy_trained"]), f2(r["cross_entropy_untrained"])],
    ),
    ("4. 1,050,624 parameters", lambda r, fig: ["4", f"{r['exercise_4_parameters_kv8']:,}"]),
    ("and 656,640 with 2", lambda r, fig: [f"{r['exercise_4_parameters_kv2']:,}", "2"]),
    ("the normalised entropy of about 1.0 in the table above", lambda r, fig: f"{r['cross_entropy_untrained']:.1f}"),
]
GIVEN = [
    ("# 06 ·", "the tutorial's number"),
    ("(Vaswani et al. 2017 §3.2.2)", "citation"),
    ("keys $0 \\dots i$", "definition of the causal mask"),
    ("the 0/1 `attention_mask`", "definition"),
    ("sees keys $0 \\dots p$.", "definition of the cached causal mask"),
    ("as in Vaswani et al. (2017)", "citation"),
    ("on its pad keys are exactly 0", "what the test of this cell asserts"),
    ("row still sums to 1", "the softmax's definition"),
    ("NaN (tutorial 04)", "cross-reference"),
    ("have the colour of 0.", "what the test of this cell asserts"),
    ("(Ainslie et al. 2023)", "citation"),
    ("seven shares sum to 1", "a partition of the keys"),
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
    ("at least key 0 before it", "answer 1: counting"),
    ("2. 8, 9 and 10 keys", "answer 2: counting"),
    ("sees keys $0 \\dots p$, and the new queries sit at positions 7, 8 and 9.", "answer 2: counting"),
    (
        "3. Yes: `o_proj` reads the concatenation by position, columns $0 \\dots D-1$ as head 0's output",
        "answer 3: layout",
    ),
    ("with 8 key/value heads", "exercise 4's setting"),
    ("`k_proj` and `v_proj` shrink from $512 \\times 512$ to $128 \\times 512$", "answer 4: arithmetic"),
    ("The cache holds $2 \\cdot$", "keys and values"),
    ("1024 against 256", "answer 4: 2 × 8 × 64 and 2 × 2 × 64"),
    ("serves 4 query heads", "answer 4: 8 / 2"),
    ("5. Nothing meaningful", "answer number"),
    ("score is close to 0", "answer 5: small weights"),
]
GIVEN += [("tutorial 02, 06 or 09", "cross-reference")]
