"""The numbers of tutorial 02's prose: what its full run measured (docs/figures/02_results.json) or given."""

from itertools import pairwise

import numpy as np


def _max_at(gaps, place):
    """The largest gap, formatted, when it comes after epoch `place` + 1 as the prose says; else a mismatch."""
    return gaps[place] if max(gaps) == gaps[place] else f"the largest gap is after epoch {gaps.index(max(gaps)) + 1}"


def _phase(r, kind, early):
    """(mean fall inside an epoch, mean fall at an epoch's start) over epochs 2 … E/2 (early) or the last E/2."""
    changes, half = r[f"{kind}_epoch_changes"], r["word2vec_settings"]["epochs"] // 2
    within, at_start = changes["within"], [None, *changes["at_start"]]  # at_start[e]: the fall where epoch e begins
    epochs = range(1, half) if early else range(half, len(within))
    return [float(np.mean([within[e] for e in epochs])), float(np.mean([at_start[e] for e in epochs]))]


def _flat(r, kind):
    """A staircase in the last half of the epochs: on average the loss changes inside an epoch by less than a third
    of the step down at an epoch's start."""
    within, at_start = _phase(r, kind, early=False)
    return at_start > 0 and abs(within) < at_start / 3


def _rises(r, kind):
    """In how many of the last half of the epochs the loss rose inside the epoch."""
    within = r[f"{kind}_epoch_changes"]["within"]
    return sum(w < 0 for w in within[r["word2vec_settings"]["epochs"] // 2 :])


def _grows_to_max(gaps):
    """The gap grows after every epoch up to its largest."""
    top = gaps.index(max(gaps))
    return all(a < b for a, b in zip(gaps[:top], gaps[1 : top + 1], strict=True))


def _by_seed(r, measure):
    """(CBOW's, skip-gram's) value of a pair-check measure for each seed."""
    return list(zip(r["word2vec_seeds"]["cbow"][measure], r["word2vec_seeds"]["skipgram"][measure], strict=True))


def _gap(similarity):
    """Related minus mismatched mean cosine."""
    return similarity["related"] - similarity["mismatched"]


def _span(values):
    """The smallest and the largest value over the seeds: the prose's "a to b"."""
    return [min(values), max(values)]


def _seeds(r):
    """How many seeds the exercises' cell used: the pair check's, cut to that many for comparisons."""
    return len(r["exercise_cbow_sum"]["gap"])


def _section_3(r, kind, measure):
    """A pair-check measure of section 3's models (window 3, W), over the seeds the exercises' cell used."""
    return r["word2vec_seeds"][kind][measure][: _seeds(r)]


def _windows(r):
    """The window sizes the exercises' cell tried besides section 3's."""
    return sorted(int(key.split("_")[-1]) for key in r["exercise_windows"] if key.startswith("cbow_"))


def _window(r, kind, window, measure):
    """A pair-check measure with another window; section 3's own window is section 3's models."""
    if window == r["word2vec_settings"]["window"]:
        return _section_3(r, kind, measure)
    return r["exercise_windows"][f"{kind}_{window}"][measure]


def _decreasing(values):
    return all(a > b for a, b in pairwise(values))


def _grows_with_window(r):
    """With each seed and both objectives, the gap is larger with each larger window."""
    sizes = sorted([*_windows(r), r["word2vec_settings"]["window"]])
    return all(
        all(a < b for a, b in pairwise(gaps))
        for kind in ("cbow", "skipgram")
        for gaps in zip(*(_window(r, kind, w, "gap") for w in sizes), strict=True)
    )


def keyboard_replay(r) -> list:
    """'Keyboard' ends as two pieces, Key + board; ' keyboard' as one token: the merges each took, the last rank."""
    upper, lower = (r["exercise_keyboard"][w]["steps"] for w in ("Keyboard", "Ġkeyboard"))
    if upper[-1][0] == "Key board" and lower[-1][0] == "Ġkeyboard":
        return [8000, len(upper) - 1, len(lower) - 1, lower[-2][1]]
    return [f"the replays end at {upper[-1][0]!r} and {lower[-1][0]!r}"]


CLAIMS = [
    # 1. Tokens
    ("strings of at most 100 characters", lambda r, fig: r["max_chars"]),
    ("one vocabulary of 8,000 tokens", lambda r, fig: r["vocab_sizes"][2]),
    (
        "at three vocabulary sizes: 600 and 2,000 (the tutorials' own small runs) and 8,000 (the main job)",
        lambda r, fig: [len(r["vocab_sizes"]), *r["vocab_sizes"]],
    ),
    ("It holds 14,615 pairs.", lambda r, fig: r["pairs"]),
    (
        "is four tokens at 8,000 and six at 2,000",
        lambda r, fig: [
            len(r["example_tokens"]["Could not open file"]["8000"]),
            r["vocab_sizes"][2],
            len(r["example_tokens"]["Could not open file"]["2000"]),
            r["vocab_sizes"][1],
        ],
    ),
    (
        "is two pieces even with 8,000 tokens",
        lambda r, fig: [len(r["split_word_tokens"]["8000"]), r["vocab_sizes"][2]],
    ),
    (
        "finds a merge for every step up to the whole word",
        lambda r, fig: "every" if r["replays"]["Ġdirectory"][-1][0] == "Ġdirectory" else "not every",
    ),
    ("`Ġdirect` + `ory`, has rank 1,760)", lambda r, fig: r["replays"]["Ġdirectory"][-2][1]),
    (
        "only late (ranks 3,963 and 5,428)",
        lambda r, fig: [r["replays"]["Directory"][-3][1], r["replays"]["Directory"][-2][1]],
    ),
    (
        "`Directory` occurs 5 times in the training text, ` directory` 34 times",
        lambda r, fig: [str(r["split_word_pretoken_counts"][w]) for w in ("Directory", "Ġdirectory")],
    ),
    (
        "The pair `Direct` + `ory` occurs 5 times, no more than the last merges that made it into the 8,000 tokens (a "
        "median of 5 each)",
        lambda r, fig: [
            r["missing_pair"][2],
            "more" if r["missing_pair"][2] <= r["last_50_merges_median_count"] else "fewer",
            r["vocab_sizes"][2],
            r["last_50_merges_median_count"],
        ],
    ),
    # 2. One-hot vectors
    ("*file* and *password*: 0.", lambda r, fig: r["one_hot_cosines"][0][4]),
    # 3. word2vec
    ("words seen under 5 times are left out", lambda r, fig: r["word2vec_settings"]["min_count"]),
    (
        r"exactly $6 \log 2 \approx 4.159$",
        lambda r, fig: [1 + r["word2vec_settings"]["negatives"], "2", r["cbow_loss_at_start"]],
    ),
    ("for each of the 5 noise words", lambda r, fig: r["word2vec_settings"]["negatives"]),
    (
        "each of their points is the mean of 10 steps: the first, the mean of steps 1 to 10, is 4.13 (CBOW) and 4.14 "
        "(skip-gram)",
        lambda r, fig: [
            r["word2vec_settings"]["smooth"],
            1,
            r["word2vec_settings"]["smooth"],
            fig("02_word2vec_loss")["cbow"][0],
            fig("02_word2vec_loss")["skipgram"][0],
        ],
    ),
    ("up to 6 per window", lambda r, fig: 2 * r["word2vec_settings"]["window"]),
    (
        "Skip-gram's loss ends higher (1.31 against 0.99, means of the last 10 steps)",
        lambda r, fig: [
            r["skipgram_loss_first_last"][1],
            r["cbow_loss_first_last"][1],
            r["word2vec_settings"]["smooth"],
        ],
    ),
    (
        "Drawn as means of 10 steps (an epoch is about 53 steps of CBOW and 39 of skip-gram)",
        lambda r, fig: [
            r["word2vec_settings"]["smooth"],
            float(np.mean(r["cbow_epoch_changes"]["steps_per_epoch"])),
            float(np.mean(r["skipgram_epoch_changes"]["steps_per_epoch"])),
        ],
    ),
    (
        "In epochs 2 to 5 the loss falls inside each epoch about as much as at its start (on average 0.155 inside and "
        "0.141 at the start for CBOW, 0.134 and 0.105 for skip-gram)",
        lambda r, fig: [
            2,
            r["word2vec_settings"]["epochs"] // 2,
            "falls" if min(_phase(r, kind, early=True)[0] for kind in ("cbow", "skipgram")) > 0 else "rises",
            *_phase(r, "cbow", early=True),
            *_phase(r, "skipgram", early=True),
        ],
    ),
    (
        "In the last five epochs it is a staircase: flat inside an epoch (a fall of 0.014 on average for CBOW and "
        "0.008 for skip-gram, and a rise in 3 and 2 of the five) and a step down where a new epoch begins (0.100 and "
        "0.075 on average)",
        lambda r, fig: [
            r["word2vec_settings"]["epochs"] - r["word2vec_settings"]["epochs"] // 2,
            "staircase" if all(_flat(r, kind) for kind in ("cbow", "skipgram")) else "ramp",
            "flat" if all(_flat(r, kind) for kind in ("cbow", "skipgram")) else "steep",
            "fall" if _phase(r, "cbow", early=False)[0] > 0 else "rise",
            _phase(r, "cbow", early=False)[0],
            _phase(r, "skipgram", early=False)[0],
            "rise" if _rises(r, "cbow") + _rises(r, "skipgram") > 0 else "fall",
            _rises(r, "cbow"),
            _rises(r, "skipgram"),
            r["word2vec_settings"]["epochs"] - r["word2vec_settings"]["epochs"] // 2,
            _phase(r, "cbow", early=False)[1],
            _phase(r, "skipgram", early=False)[1],
        ],
    ),
    (
        "get a lower loss than the windows",
        lambda r, fig: (
            "lower" if min(r["cbow_memorisation_gap"] + r["skipgram_memorisation_gap"]) > 0 else "not always lower"
        ),
    ),
    (
        "In the full run (10 epochs) the gap is 0.024 (CBOW) and 0.010 (skip-gram) after the first epoch",
        lambda r, fig: [
            r["word2vec_settings"]["epochs"],
            r["cbow_memorisation_gap"][0],
            r["skipgram_memorisation_gap"][0],
        ],
    ),
    (
        "and grows over the next ones, CBOW's to 0.300 by the eighth, skip-gram's to 0.319 by the seventh",
        lambda r, fig: [
            "grows" if _grows_with_window(r) else "varies",
            _max_at(r["cbow_memorisation_gap"], 7),
            _max_at(r["skipgram_memorisation_gap"], 6),
        ],
    ),
    (
        "then falls back a little (0.242 and 0.180 after the tenth)",
        lambda r, fig: [
            "falls"
            if all(r[f"{k}_memorisation_gap"][9] < max(r[f"{k}_memorisation_gap"]) for k in ("cbow", "skipgram"))
            else "stays",
            r["cbow_memorisation_gap"][9],
            r["skipgram_memorisation_gap"][9],
        ],
    ),
    (
        "For skip-gram the relative distance is 204 (CBOW: 201): $W'$ is 205 times larger",
        lambda r, fig: [
            r["inverse_check"]["skipgram"]["distance_to_pinv"],
            r["inverse_check"]["cbow"]["distance_to_pinv"],
            r["inverse_check"]["skipgram"]["norm_ratio"],
        ],
    ),
    (
        r"a cosine of 0.25 with $\mathrm{pinv}(W)$ (CBOW: 0.17)",
        lambda r, fig: [
            r["inverse_check"]["skipgram"]["cosine_to_pinv"],
            r["inverse_check"]["cbow"]["cosine_to_pinv"],
        ],
    ),
    ("still leaves 0.97 of it", lambda r, fig: r["inverse_check"]["skipgram"]["distance_to_best_multiple"]),
    (
        "$W'W$ is 823 away from $I_d$ in relative norm (CBOW: 691)",
        lambda r, fig: [
            r["inverse_check"]["skipgram"]["product_to_identity"],
            r["inverse_check"]["cbow"]["product_to_identity"],
        ],
    ),
    (r"rank at most $d = 64 \ll V$", lambda r, fig: r["word2vec_settings"]["dim"]),
    ("among the 1,000 most frequent", lambda r, fig: r["frequent"]),
    ("*password* occurs 19 times", lambda r, fig: r["probe_counts"]["password"]),
    ("29 pairs of words", lambda r, fig: r["pairs_and_analogies"][0]),
    (
        "Untrained vectors give about 0 for both sets, as random directions in 64 dimensions do",
        lambda r, fig: [
            max(abs(v) for v in r["word2vec_similarity"]["untrained"].values()),
            r["word2vec_settings"]["dim"],
        ],
    ),
    ("On 13 analogies", lambda r, fig: r["pairs_and_analogies"][1]),
    (
        "far more text than 45,354 words",
        lambda r, fig: ["more" if r["word2vec_text"]["words"] < 1e9 else "less", r["word2vec_text"]["words"]],
    ),
    (
        "Skip-gram solves 1 of the 13 and CBOW none.",
        lambda r, fig: [
            len(r["analogy_hits"]["skipgram"]),
            r["pairs_and_analogies"][1],
            "none" if not r["analogy_hits"]["cbow"] else len(r["analogy_hits"]["cbow"]),
        ],
    ),
    (
        "Mismatched pairs are not at 0 either",
        lambda r, fig: (
            0 if min(r["word2vec_similarity"][k]["mismatched"] for k in ("cbow", "skipgram")) > 0.1 else "at 0"
        ),
    ),
    (
        "With three seeds each",
        lambda r, fig: len(r["word2vec_seeds"]["cbow"]["gap"]),
    ),
    (
        "pairs is 0.302 to 0.315 for CBOW and 0.272 to 0.280 for skip-gram, and a word's partner is the closest of "
        "the 29 for 14 to 16 words (CBOW) and 16 to 17 (skip-gram). CBOW's gap is larger than skip-gram's with each "
        "seed",
        lambda r, fig: [
            min(r["word2vec_seeds"]["cbow"]["gap"]),
            max(r["word2vec_seeds"]["cbow"]["gap"]),
            min(r["word2vec_seeds"]["skipgram"]["gap"]),
            max(r["word2vec_seeds"]["skipgram"]["gap"]),
            r["pairs_and_analogies"][0],
            min(r["word2vec_seeds"]["cbow"]["matches"]),
            max(r["word2vec_seeds"]["cbow"]["matches"]),
            min(r["word2vec_seeds"]["skipgram"]["matches"]),
            max(r["word2vec_seeds"]["skipgram"]["matches"]),
            "larger" if all(c > k for c, k in _by_seed(r, "gap")) else "not larger",
        ],
    ),
    (
        # with each seed, skip-gram finds at least as many partners closest as CBOW
        "skip-gram finds the partner no less often than CBOW with each seed",
        lambda r, fig: "less" if all(k >= c for c, k in _by_seed(r, "matches")) else "more",
    ),
    ("keep only part of the 64", lambda r, fig: r["word2vec_settings"]["dim"]),
    # 4. The Transformer's embedding
    ("seen at least 20 times", lambda r, fig: r["frequent_min_count"]),
    ("among the same 1,000 most frequent English words", lambda r, fig: r["frequent"]),
    (
        "(2,000 tokens of width 128; the pair words are 2.5 pieces each on average, and only 7 of the 49 translation "
        "pairs, none of the 29 English pairs, have a single token on both sides)",
        lambda r, fig: [
            r["model_shape"][0],
            r["model_shape"][1],
            r["pieces_per_word"],
            r["translations_one_token"],
            r["translation_pairs"],
            "none" if r["pairs_one_token"] == 0 else r["pairs_one_token"],
            r["pairs_and_analogies"][0],
        ],
    ),
    (
        "Centred, related pairs get 0.246 against 0.108 for mismatched ones, a gap of 0.138; but the random control "
        "already has a gap of 0.060",
        lambda r, fig: [
            r["transformer_similarity"]["centred"]["related"],
            r["transformer_similarity"]["centred"]["mismatched"],
            _gap(r["transformer_similarity"]["centred"]),
            _gap(r["transformer_similarity"]["random"]),
        ],
    ),
    (
        "a word's partner is the closest of the 29 for 5 words, as in the control (5)",
        lambda r, fig: [
            r["pairs_and_analogies"][0],
            r["transformer_similarity"]["centred"]["matches"],
            r["transformer_similarity"]["random"]["matches"],
        ],
    ),
    (
        "word2vec's skip-gram: a gap of 0.278, and the partner is the closest for 16 words",
        lambda r, fig: [
            _gap(r["word2vec_similarity"]["skipgram"]),
            r["word2vec_similarity"]["skipgram"]["matches"],
        ],
    ),
    (
        "get 0.299 against 0.009 for mismatched pairs (control: 0.060 against 0.002), and for 23 of the 49 English "
        "words the translation is the closest of the 49 German words (control: 8)",
        lambda r, fig: [
            r["translation_similarity"]["centred"]["related"],
            r["translation_similarity"]["centred"]["mismatched"],
            r["translation_similarity"]["random"]["related"],
            r["translation_similarity"]["random"]["mismatched"],
            r["translation_similarity"]["centred"]["matches"],
            r["translation_pairs"],
            r["translation_pairs"],
            r["translation_similarity"]["random"]["matches"],
        ],
    ),
    (
        "the 43 pairs that share no piece give the same picture: 0.244 against −0.002, the translation closest for 17 "
        "(control: 2)",
        lambda r, fig: [
            r["translation_pairs_unshared"],
            r["translation_similarity_unshared"]["centred"]["related"],
            r["translation_similarity_unshared"]["centred"]["mismatched"],
            r["translation_similarity_unshared"]["centred"]["matches"],
            r["translation_similarity_unshared"]["random"]["matches"],
        ],
    ),
    # 5. Contextual vectors
    ("hide 15% of the tokens of a text", lambda r, fig: 100 * r["mlm_settings"]["mask_probability"]),
    (
        "of the chosen 15%, 80% become",
        lambda r, fig: [100 * r["mlm_settings"]["mask_probability"], "80"],
    ),
    ("(not trained on), 15% of the tokens", lambda r, fig: 100 * r["mlm_settings"]["mask_probability"]),
    (
        "After 600 steps (2 layers, width 64, the 600-token vocabulary",
        lambda r, fig: [
            r["mlm_settings"]["steps"],
            r["mlm_settings"]["layers"],
            r["mlm_settings"]["hidden_size"],
            r["mlm_settings"]["vocab_size"],
        ],
    ),
    (
        "the encoder fills 11.9% of the 1,113 masked tokens of the validation strings, against 2.1% for the unigram",
        lambda r, fig: [
            100 * r["mlm_accuracy"]["model"],
            r["mlm_accuracy"]["masked_tokens"],
            100 * r["mlm_accuracy"]["unigram"],
        ],
    ),
    ("if a weak one after 600 steps", lambda r, fig: r["mlm_settings"]["steps"]),
    ("in the first 40 training strings", lambda r, fig: r["contextual"]["strings"]),
    (
        "the same in all 40 strings: a mean cosine of 1.000",
        lambda r, fig: [
            "all" if abs(r["contextual"]["same_word"][0] - 1) < 1e-4 else "not all",
            r["contextual"]["strings"],
            r["contextual"]["same_word"][0],
        ],
    ),
    (
        "falls to 0.868, after the second it is 0.788 (the least similar pair of strings: 0.375)",
        lambda r, fig: [
            "falls" if r["contextual"]["same_word"][1] < r["contextual"]["same_word"][0] else "rises",
            r["contextual"]["same_word"][1],
            r["contextual"]["same_word"][2],
            r["contextual"]["same_word_min_last_layer"],
        ],
    ),
    (
        "(0.138 and 0.245 after the two layers)",
        lambda r, fig: [*r["contextual"]["different_words"][1:], r["mlm_settings"]["layers"]],
    ),
    # Exercises
    (
        "German stays above English at every size",
        lambda r, fig: (
            "every"
            if all(
                g > e
                for g, e in zip(
                    *(r["exercise_vocab_sizes"]["tokens_per_word"][k] for k in ("German", "English")), strict=True
                )
            )
            else "not every"
        ),
    ),
    (
        "With 300 tokens an English word of the validation strings is 5.35 tokens on average and a German one 6.47; "
        "with 16,000, 1.51 and 1.72",
        lambda r, fig: [
            r["exercise_vocab_sizes"]["learned"][0],
            r["exercise_vocab_sizes"]["tokens_per_word"]["English"][0],
            r["exercise_vocab_sizes"]["tokens_per_word"]["German"][0],
            r["exercise_vocab_sizes"]["learned"][-1],
            r["exercise_vocab_sizes"]["tokens_per_word"]["English"][-1],
            r["exercise_vocab_sizes"]["tokens_per_word"]["German"][-1],
        ],
    ),
    (
        "Each doubling of the vocabulary saves less than the one before, in both languages: going up the sizes 300, "
        "600, 2,000, 8,000 and 16,000, tokens per English word fall by 1.80, 0.67, 0.34 and 0.19 per doubling, per "
        "German word by 2.19, 0.85, 0.42 and 0.24",
        lambda r, fig: [
            "less" if all(_decreasing(v) for v in r["exercise_vocab_sizes"]["fall_per_doubling"].values()) else "more",
            *r["exercise_vocab_sizes"]["learned"],
            "fall" if min(min(v) for v in r["exercise_vocab_sizes"]["fall_per_doubling"].values()) > 0 else "rise",
            *r["exercise_vocab_sizes"]["fall_per_doubling"]["English"],
            *r["exercise_vocab_sizes"]["fall_per_doubling"]["German"],
        ],
    ),
    (
        "at most 6, but these strings are short, so a window holds 3.27 context words on average and only 12% of the "
        "windows hold 6",
        lambda r, fig: [
            2 * r["word2vec_settings"]["window"],
            r["exercise_cbow_sum"]["context_words_mean"],
            100 * r["exercise_cbow_sum"]["windows_full"],
            2 * r["word2vec_settings"]["window"],
        ],
    ),
    (
        "with the pair check's three seeds: the sum trains (a loss of 0.948 to 0.987 over the last 10 steps, 0.986 to "
        "1.016 with the mean), and its gap between related and mismatched pairs, 0.268 to 0.296, is smaller than the "
        "mean's with each seed (0.302 to 0.315); the partner is the closest for 13 to 17 words (the mean: 14 to 16)",
        lambda r, fig: [
            _seeds(r),
            *_span([last for _, last in r["exercise_cbow_sum"]["loss_first_last"]]),
            r["word2vec_settings"]["smooth"],
            *_span(r["exercise_cbow_sum"]["mean_loss_last"]),
            *_span(r["exercise_cbow_sum"]["gap"]),
            "smaller"
            if all(s < m for s, m in zip(r["exercise_cbow_sum"]["gap"], _section_3(r, "cbow", "gap"), strict=True))
            else "not smaller",
            *_span(_section_3(r, "cbow", "gap")),
            *_span(r["exercise_cbow_sum"]["matches"]),
            *_span(_section_3(r, "cbow", "matches")),
        ],
    ),
    (
        "with the pair check's three seeds. The gap grows with the window, with each seed: for CBOW it is 0.259 to "
        "0.280 with a window of 1, 0.302 to 0.315 with 3 and 0.314 to 0.328 with 6; for skip-gram 0.213 to 0.248, "
        "0.272 to 0.280 and 0.279 to 0.289",
        lambda r, fig: [
            _seeds(r),
            "grows"
            if all(
                all(
                    _decreasing(values[::-1])
                    for values in zip(*(_window(r, kind, w, "gap") for w in sizes), strict=True)
                )
                for kind in ("cbow", "skipgram")
                for sizes in [sorted([*_windows(r), r["word2vec_settings"]["window"]])]
            )
            else "varies",
            *(
                value
                for w in sorted([*_windows(r), r["word2vec_settings"]["window"]])
                for value in [*_span(_window(r, "cbow", w, "gap")), w]
            ),
            *(
                value
                for w in sorted([*_windows(r), r["word2vec_settings"]["window"]])
                for value in _span(_window(r, "skipgram", w, "gap"))
            ),
        ],
    ),
    (
        "But a word's partner is the closest of the 29 no more often with 6 than with 3, with each seed: for 12 to 15 "
        "words (CBOW) and 13 to 15 (skip-gram), against 14 to 16 and 16 to 17",
        lambda r, fig: [
            r["pairs_and_analogies"][0],
            "more"
            if all(
                wide <= narrow
                for kind in ("cbow", "skipgram")
                for wide, narrow in zip(
                    _window(r, kind, max(_windows(r)), "matches"), _section_3(r, kind, "matches"), strict=True
                )
            )
            else "fewer",
            max(_windows(r)),
            r["word2vec_settings"]["window"],
            *_span(_window(r, "cbow", max(_windows(r)), "matches")),
            *_span(_window(r, "skipgram", max(_windows(r)), "matches")),
            *_span(_section_3(r, "cbow", "matches")),
            *_span(_section_3(r, "skipgram", "matches")),
        ],
    ),
    (
        "a window of 6 words on each side holds 4.38 context words on average (3 words: 3.27; 1 word: 1.52)",
        lambda r, fig: [
            max(_windows(r)),
            r["exercise_windows"][f"context_words_{max(_windows(r))}"],
            r["word2vec_settings"]["window"],
            r["exercise_cbow_sum"]["context_words_mean"],
            min(_windows(r)),
            r["exercise_windows"][f"context_words_{min(_windows(r))}"],
        ],
    ),
    (
        "with the pair check's three seeds. It helps the gap: related minus mismatched is 0.412 to 0.432 with "
        "$W + W'$ for CBOW and 0.387 to 0.414 for skip-gram, against 0.302 to 0.315 and 0.272 to 0.280 with $W$ "
        "alone, larger than with $W$ for each seed, although $W'$ alone gives a smaller gap than $W$ (0.256 to 0.271 "
        "and 0.245 to 0.268)",
        lambda r, fig: [
            _seeds(r),
            *_span(r["exercise_w_plus_w_out"]["cbow"]["gap"]),
            *_span(r["exercise_w_plus_w_out"]["skipgram"]["gap"]),
            *_span(_section_3(r, "cbow", "gap")),
            *_span(_section_3(r, "skipgram", "gap")),
            "larger"
            if all(
                both > alone
                for kind in ("cbow", "skipgram")
                for both, alone in zip(
                    r["exercise_w_plus_w_out"][kind]["gap"], _section_3(r, kind, "gap"), strict=True
                )
            )
            else "not larger",
            "smaller"
            if all(
                out < alone
                for kind in ("cbow", "skipgram")
                for out, alone in zip(
                    r["exercise_w_plus_w_out"][kind]["w_out"]["gap"], _section_3(r, kind, "gap"), strict=True
                )
            )
            else "not smaller",
            *_span(r["exercise_w_plus_w_out"]["cbow"]["w_out"]["gap"]),
            *_span(r["exercise_w_plus_w_out"]["skipgram"]["w_out"]["gap"]),
        ],
    ),
    (
        "about the same norm ($|W'|$ is 0.88 to 1.04 times $|W|$)",
        lambda r, fig: _span(
            [x for kind in ("cbow", "skipgram") for x in r["exercise_w_plus_w_out"][kind]["norm_ratio"]]
        ),
    ),
    (
        # summed over the seeds, W + W' finds no more partners than W, for both objectives
        "does not find the partner more often than $W$: the closest for 13 to 15 words (CBOW) and 13 to 17 "
        "(skip-gram), against 14 to 16 and 16 to 17",
        lambda r, fig: [
            "more"
            if all(
                sum(r["exercise_w_plus_w_out"][kind]["matches"]) <= sum(_section_3(r, kind, "matches"))
                for kind in ("cbow", "skipgram")
            )
            else "fewer",
            *_span(r["exercise_w_plus_w_out"]["cbow"]["matches"]),
            *_span(r["exercise_w_plus_w_out"]["skipgram"]["matches"]),
            *_span(_section_3(r, "cbow", "matches")),
            *_span(_section_3(r, "skipgram", "matches")),
        ],
    ),
    (
        "**English pairs: hardly more than spelling.**",
        lambda r, fig: (
            "more"
            if _gap(r["transformer_similarity"]["centred"]) > _gap(r["transformer_similarity"]["random"])
            and r["transformer_similarity"]["centred"]["matches"]
            <= r["transformer_similarity"]["random"]["matches"] + 2
            else "not more"
        ),
    ),
    ("a learning rate up to 6 times smaller", lambda r, fig: 2 * r["word2vec_settings"]["window"]),
    # Self-test
    (
        "Why is `Directory` two tokens in the 8,000-token vocabulary",
        lambda r, fig: [len(r["split_word_tokens"]["8000"]), r["vocab_sizes"][2]],
    ),
    (r"first training loss $6 \log 2$?", lambda r, fig: [1 + r["word2vec_settings"]["negatives"], "2"]),
    (
        "Skip-gram's training loss ends higher than CBOW's",
        lambda r, fig: "higher" if r["skipgram_loss_first_last"][1] > r["cbow_loss_first_last"][1] else "lower",
    ),
    (
        "seen 5 times in the training text against 34 for ` directory`",
        lambda r, fig: [str(r["split_word_pretoken_counts"][w]) for w in ("Directory", "Ġdirectory")],
    ),
    (
        "`Direct` + `ory` occurs 5 times, no more than the last merges that got into the vocabulary (a median of 5)",
        lambda r, fig: [
            r["missing_pair"][2],
            "more" if r["missing_pair"][2] <= r["last_50_merges_median_count"] else "fewer",
            r["last_50_merges_median_count"],
        ],
    ),
    (
        "for a batch of the main job, 7.9e8 multiply-adds against 98,304 numbers copied",
        lambda r, fig: [r["cost"]["multiply_adds_one_hot"], r["cost"]["numbers_copied_lookup"]],
    ),
    (
        r"with $K = 5$ noise words that is $6 \log 2 \approx 4.159$",
        lambda r, fig: [
            r["word2vec_settings"]["negatives"],
            1 + r["word2vec_settings"]["negatives"],
            "2",
            r["cbow_loss_at_start"],
        ],
    ),
    (
        "the losses (1.31 against 0.99)",
        lambda r, fig: [r["skipgram_loss_first_last"][1], r["cbow_loss_first_last"][1]],
    ),
    (
        "CBOW's gap between related and mismatched pairs is larger than skip-gram's with each of the three seeds "
        "(0.302 to 0.315 against 0.272 to 0.280)",
        lambda r, fig: [
            "larger" if all(c > k for c, k in _by_seed(r, "gap")) else "not larger",
            len(r["word2vec_seeds"]["cbow"]["gap"]),
            min(r["word2vec_seeds"]["cbow"]["gap"]),
            max(r["word2vec_seeds"]["cbow"]["gap"]),
            min(r["word2vec_seeds"]["skipgram"]["gap"]),
            max(r["word2vec_seeds"]["skipgram"]["gap"]),
        ],
    ),
    (
        # with each seed, skip-gram finds at least as many partners closest as CBOW
        "skip-gram finds a word's partner no less often than CBOW (16 to 17 of the 29 words against 14 to 16)",
        lambda r, fig: [
            "less" if all(k >= c for c, k in _by_seed(r, "matches")) else "more",
            min(r["word2vec_seeds"]["skipgram"]["matches"]),
            max(r["word2vec_seeds"]["skipgram"]["matches"]),
            r["pairs_and_analogies"][0],
            min(r["word2vec_seeds"]["cbow"]["matches"]),
            max(r["word2vec_seeds"]["cbow"]["matches"]),
        ],
    ),
    (
        "get a mean cosine of 0.299 against 0.009 for mismatched pairs, and the translation is the closest German "
        "word for 23 of the 49 English words",
        lambda r, fig: [
            r["translation_similarity"]["centred"]["related"],
            r["translation_similarity"]["centred"]["mismatched"],
            r["translation_similarity"]["centred"]["matches"],
            r["translation_pairs"],
        ],
    ),
    (
        "finds the translation for only 8, and the 43 pairs that share no piece still find it for 17 (control: 2)",
        lambda r, fig: [
            r["translation_similarity"]["random"]["matches"],
            r["translation_pairs_unshared"],
            r["translation_similarity_unshared"]["centred"]["matches"],
            r["translation_similarity_unshared"]["random"]["matches"],
        ],
    ),
    (
        "the partner is the closest for 5 of the 29 words, as in the control",
        lambda r, fig: (
            [r["transformer_similarity"]["centred"]["matches"], r["pairs_and_analogies"][0]]
            if r["transformer_similarity"]["centred"]["matches"] == r["transformer_similarity"]["random"]["matches"]
            else ["not as in the control"]
        ),
    ),
    (
        "the same in all 40 strings (mean cosine 1.000)",
        lambda r, fig: [
            "all" if abs(r["contextual"]["same_word"][0] - 1) < 1e-4 else "not all",
            r["contextual"]["strings"],
            r["contextual"]["same_word"][0],
        ],
    ),
    (
        "after the two layers the mean cosine of ` file` in different strings is 0.788, against 0.245 with other "
        "words",
        lambda r, fig: [
            r["mlm_settings"]["layers"],
            r["contextual"]["same_word"][-1],
            r["contextual"]["different_words"][-1],
        ],
    ),
    (
        # Exercise 2: the replay of "Keyboard" and " keyboard" (last cell): where each stops, after how many merges.
        "With 8,000 tokens `Keyboard` stops at `Key` + `board` after 6 merges, while `Ġkeyboard` becomes one token "
        "after 8, the last `Ġkey` + `board` at rank 6,635.",
        lambda r, fig: keyboard_replay(r),
    ),
    (
        "`Keyboard` occurs 3 times in the training text, `Ġkeyboard` 6 times.",
        lambda r, fig: [r["exercise_keyboard"][w]["pretoken_count"] for w in ("Keyboard", "Ġkeyboard")],
    ),
    (
        "(the last of them at rank 2,668); `Key` + `board` is too rare a pair to be merged within 8,000 tokens.",
        lambda r, fig: [r["exercise_keyboard"]["Keyboard"]["steps"][-2][1], 8000],
    ),
]

GIVEN = [
    ("# 02 · Embeddings", "the tutorial's number"),
    ("1. a **tokenizer**", "list numbering"),
    ("2. an **embedding**", "list numbering"),
    ('(id 431 is not "closer" to id 432 than to id 7000)', "made-up ids of an example"),
    ("(Mikolov et al. 2013)", "citation"),
    ("## 1. Tokens", "section number"),
    ("(Sennrich et al. 2016; GPT-2's byte-level variant, Radford et al. 2019)", "citations"),
    ("from the 256 byte values", "the number of byte values"),
    ("## 2. One-hot", "section number"),
    (r"tokens $0 \dots V-1$", "notation"),
    (r"$e_i \in \{0,1\}^V$, a 1 at place $i$", "definition of a one-hot vector"),
    (r"$0 \cdot w = 0$", "arithmetic"),
    ("about 34 rows of UI strings", "the main job config's own comment on its batches"),
    ("## 3. word2vec", "section number"),
    ("(Firth 1957)", "citation"),
    (r"\mathrm{count}(w)^{3/4}", "word2vec's noise distribution"),
    (r"\sum_{k=1}^{K}", "notation"),
    (r"$\min(1, \sqrt{t/f(w)} + t/f(w))$", "word2vec's subsampling rule"),
    ("$t = 10^{-4}$", "the word2vec code's constant"),
    ("embeddings in section 4", "cross-reference"),
    (r"$\sigma(0) = 1/2$", "arithmetic"),
    ("(Levy & Goldberg 2014:", "citation"),
    ("so every score is 0 and", "W' starts at zero"),
    ("(the 2-D view", "the dimension of a plot"),
    ("## 4. The Transformer", "section number"),
    ("tutorials 06 and 09", "cross-reference"),
    ("the probe words of section 3", "cross-reference"),
    ("the pair check of section 3", "cross-reference"),
    ("(Mu & Viswanath 2018", "citation"),
    ("Section 5 measures", "cross-reference"),
    ("## 5. Contextual", "section number"),
    ("BERT (Devlin et al. 2019)", "citation"),
    ("10% a random token, 10% stay", "the collator's fixed split of the masked tokens"),
    ("[03 · attention pooling", "cross-reference"),
    ("1. Train the tokenizer at 300 and 16,000 tokens", "an exercise's numbering and its settings"),
    ("2. Find a word that the 8,000-token vocabulary", "an exercise's numbering and the vocabulary of the text"),
    ("3. Change the CBOW mean", "exercise numbering"),
    ("4. Set `WINDOW = 1` and `WINDOW = 6`", "an exercise's numbering and its settings"),
    ("5. Train skip-gram", "exercise numbering"),
    ("6. Use $W + W'$", "exercise numbering"),
    ("2. The cell below replays it.", "answer numbering"),
    ("3. The sum of the $m$", "answer numbering"),
    ("(a string of 2 words gives each word $m = 1$)", "arithmetic of an example"),
    ("weighted 1 instead of $1/m$", "arithmetic"),
    ("5. Not run here", "answer numbering"),
    ("1. The cell below measures it.", "answer numbering"),
    ("4. The cell below measures it,", "answer numbering"),
    ("6. The cell below measures it,", "answer numbering"),
    ("GloVe (Pennington et al. 2014) also adds its two matrices", "citation; GloVe's input and output matrices"),
    ("they are two estimates of each word", "W and W'"),
    ("the two matrices have", "W and W'"),
    ("vector space*, 2013.", "citation"),
    ("compositionality*, NeurIPS 2013.", "citation"),
    ("subword units*, ACL 2016.", "citation"),
    ("(GPT-2), 2019.", "citation"),
    ("linguistic theory 1930–1955*, 1957.", "citation"),
    ("word representations*, ICLR 2018.", "citation"),
    ("word representation*, EMNLP 2014.", "citation"),
    ("matrix factorization*, NeurIPS 2014.", "citation"),
    ("language understanding*, NAACL 2019.", "citation"),
    ("§15.1–15.4", "book sections"),
    # Definitions, settings and maths in words
    ("in which every token is equally far from every other", "one-hot vectors' definition"),
    ("the same on every machine, so every count, merge and neighbour", "the data is pinned"),
    ("the `embed_tokens` of every hf-attention model", "the library's embedding"),
    ("every product but one is", "arithmetic of a one-hot product"),
    ("reads all of $W$", "arithmetic of a one-hot product"),
    ("any two different ones are orthogonal", "one-hot vectors' definition"),
    ("There are two matrices", "word2vec's definition"),
    ("A softmax over all $V$ words", "the softmax's definition"),
    ("the model is two matrices and a dot product", "word2vec's definition"),
    ("the same $1 + K$ terms", "the loss's definition"),
    ("The two matrices are separate parameters", "word2vec's definition"),
    ("every word predicts itself and nothing else", "what an identity would mean"),
    ("every $a_i$ with every $b_j$", "the mismatched pairs' definition"),
    ("a *difference* of two vectors", "the analogy test's definition"),
    ("their first two principal components", "the projection the script makes"),
    ("Two dimensions keep", "the projection the script makes"),
    ("two words that share a piece get a positive cosine", "arithmetic of a mean of rows"),
    ("So every check below is also run on a", "the script's design"),
    ("the closest of all the $b_j$", "the count's definition"),
    ("(all of them, and the same ones for every model)", "the masks the script draws"),
    ("always guess the most frequent token", "the unigram baseline's definition"),
    ("in two different strings", "the comparison's definition", 2),
    ("windows in the middle of long strings weigh more than those at the edges", "arithmetic: a sum of more vectors"),
    ("on one of the two measures", "the pair check's two measures: the gap and the partners found"),
    # Self-test
    ("How does the tutorial compare the two?", "CBOW and skip-gram"),
    ("(section 1)", "cross-reference"),
    ("All the entries of $e_i$ but one are 0", "the one-hot vector's definition"),
    ("(section 2)", "cross-reference"),
    ("so the scores all start at 0", "W' starts at zero"),
    (r"each of the $1 + K$ logistic terms is $-\log\sigma(0) = \log 2$", "arithmetic: sigma(0) = 1/2"),
    ("(section 3)", "cross-reference", 2),
    ("(section 4)", "cross-reference"),
    ("(section 5)", "cross-reference"),
]
