"""The numbers of tutorial 02's prose: what its full run measured (docs/figures/02_results.json) or given."""


def _max_at(gaps, place):
    """The largest gap, formatted, when it comes after epoch `place` + 1 as the prose says; else a mismatch."""
    return (
        f"{gaps[place]:.3f}"
        if max(gaps) == gaps[place]
        else f"the largest gap is after epoch {gaps.index(max(gaps)) + 1}"
    )


def _signed(value, negative):
    """|value| to 3 decimals, as the prose writes it after its sign; a mismatch when the sign is not the prose's."""
    return f"{abs(value):.3f}" if (value < 0) == negative else f"{value:.3f} has the other sign"


def _gap(similarity):
    """Related minus mismatched mean cosine."""
    return similarity["related"] - similarity["mismatched"]


CLAIMS = [
    # 1. Tokens
    ("strings of at most 100 characters", lambda r, fig: f"{r['max_chars']}"),
    ("one vocabulary of 8,000 tokens", lambda r, fig: f"{r['vocab_sizes'][2]:,}"),
    (
        "at three vocabulary sizes: 600 and 2,000 (the tutorials' own small runs) and 8,000 (the main job)",
        lambda r, fig: [f"{size:,}" for size in r["vocab_sizes"]],
    ),
    ("It holds 14,615 pairs.", lambda r, fig: f"{r['pairs']:,}"),
    ("is four tokens at 2,000 and 8,000", lambda r, fig: [f"{r['vocab_sizes'][1]:,}", f"{r['vocab_sizes'][2]:,}"]),
    ("is two pieces even with 8,000 tokens", lambda r, fig: f"{r['vocab_sizes'][2]:,}"),
    ("`Ġdirect` + `ory`, has rank 1,760)", lambda r, fig: f"{r['replays']['Ġdirectory'][-2][1]:,}"),
    (
        "only late (ranks 3,963 and 5,428)",
        lambda r, fig: [f"{r['replays']['Directory'][-3][1]:,}", f"{r['replays']['Directory'][-2][1]:,}"],
    ),
    (
        "`Directory` occurs 5 times in the training text, ` directory` 34 times",
        lambda r, fig: [str(r["split_word_pretoken_counts"][w]) for w in ("Directory", "Ġdirectory")],
    ),
    (
        "The pair `Direct` + `ory` occurs 5 times, no more than the last merges that made it into the 8,000 tokens (a "
        "median of 5 each)",
        lambda r, fig: [
            str(r["missing_pair"][2]),
            f"{r['vocab_sizes'][2]:,}",
            f"{r['last_50_merges_median_count']:.0f}",
        ],
    ),
    # 2. One-hot vectors
    ("*file* and *password*: 0.", lambda r, fig: f"{r['one_hot_cosines'][0][4]:.0f}"),
    # 3. word2vec
    ("words seen fewer than 5 times are left out", lambda r, fig: f"{r['word2vec_settings']['min_count']}"),
    (
        r"exactly $6 \log 2 \approx 4.159$",
        lambda r, fig: [f"{1 + r['word2vec_settings']['negatives']}", "2", f"{r['cbow_loss_at_start']:.3f}"],
    ),
    ("for each of the 5 noise words", lambda r, fig: f"{r['word2vec_settings']['negatives']}"),
    (
        "each of its points is the mean of 50 steps: its first point, the mean of steps 1 to 50, is already 3.28 "
        "(CBOW) and 3.23 (skip-gram)",
        lambda r, fig: [
            f"{r['word2vec_settings']['smooth']}",
            "1",
            f"{r['word2vec_settings']['smooth']}",
            f"{fig('02_word2vec_loss')['cbow'][0]:.2f}",
            f"{fig('02_word2vec_loss')['skipgram'][0]:.2f}",
        ],
    ),
    (
        "CBOW's loss ends lower (1.01 against 1.32)",
        lambda r, fig: [f"{r['cbow_loss_first_last'][1]:.2f}", f"{r['skipgram_loss_first_last'][1]:.2f}"],
    ),
    (
        "In the full run (10 epochs) the gap is 0.024 (CBOW) and 0.010 (skip-gram) after the first epoch",
        lambda r, fig: [
            f"{r['word2vec_settings']['epochs']}",
            f"{r['cbow_memorisation_gap'][0]:.3f}",
            f"{r['skipgram_memorisation_gap'][0]:.3f}",
        ],
    ),
    (
        "CBOW's to 0.300 by the eighth, skip-gram's to 0.319 by the seventh",
        lambda r, fig: [_max_at(r["cbow_memorisation_gap"], 7), _max_at(r["skipgram_memorisation_gap"], 6)],
    ),
    (
        "(0.242 and 0.180 after the tenth)",
        lambda r, fig: [f"{r['cbow_memorisation_gap'][9]:.3f}", f"{r['skipgram_memorisation_gap'][9]:.3f}"],
    ),
    (
        "For skip-gram the relative distance is 204 (CBOW: 201): $W'$ is 205 times larger",
        lambda r, fig: [
            f"{r['inverse_check']['skipgram']['distance_to_pinv']:.0f}",
            f"{r['inverse_check']['cbow']['distance_to_pinv']:.0f}",
            f"{r['inverse_check']['skipgram']['norm_ratio']:.0f}",
        ],
    ),
    (
        r"a cosine of 0.25 with $\mathrm{pinv}(W)$ (CBOW: 0.17)",
        lambda r, fig: [
            f"{r['inverse_check']['skipgram']['cosine_to_pinv']:.2f}",
            f"{r['inverse_check']['cbow']['cosine_to_pinv']:.2f}",
        ],
    ),
    ("still leaves 0.97 of it", lambda r, fig: f"{r['inverse_check']['skipgram']['distance_to_best_multiple']:.2f}"),
    (
        "$W'W$ is 823 away from $I_d$ in relative norm (CBOW: 691)",
        lambda r, fig: [
            f"{r['inverse_check']['skipgram']['product_to_identity']:.0f}",
            f"{r['inverse_check']['cbow']['product_to_identity']:.0f}",
        ],
    ),
    (r"rank at most $d = 64 \ll V$", lambda r, fig: f"{r['word2vec_settings']['dim']}"),
    ("among the 1,000 most frequent", lambda r, fig: f"{r['frequent']:,}"),
    ("*password* occurs 19 times", lambda r, fig: f"{r['probe_counts']['password']}"),
    ("29 pairs of words", lambda r, fig: f"{r['pairs_and_analogies'][0]}"),
    (
        "Untrained vectors give about 0 for both sets, as random directions in 64 dimensions do",
        lambda r, fig: [
            f"{max(abs(v) for v in r['word2vec_similarity']['untrained'].values()):.0f}",
            f"{r['word2vec_settings']['dim']}",
        ],
    ),
    ("On 13 analogies", lambda r, fig: f"{r['pairs_and_analogies'][1]}"),
    ("far more text than 45,354 words", lambda r, fig: f"{r['word2vec_text']['words']:,}"),
    ("keep only part of the 64", lambda r, fig: f"{r['word2vec_settings']['dim']}"),
    # 4. The Transformer's embedding
    ("seen at least 20 times", lambda r, fig: f"{r['frequent_min_count']}"),
    ("among the same 1,000 most frequent English words", lambda r, fig: f"{r['frequent']:,}"),
    (
        "(2,000 tokens of width 128; the pair words are 2.5 pieces each on average, and only 7 of the 49 translation "
        "pairs, none of the 29 English pairs, are two single tokens)",
        lambda r, fig: [
            f"{r['model_shape'][0]:,}",
            f"{r['model_shape'][1]}",
            f"{r['pieces_per_word']:.1f}",
            f"{r['translations_one_token']}",
            f"{r['translation_pairs']}",
            # "none": no English pair is two single tokens
            f"{r['pairs_and_analogies'][0]}" if r["pairs_one_token"] == 0 else f"{r['pairs_one_token']} are",
        ],
    ),
    (
        "Centred, related pairs get 0.242 against 0.107 for mismatched ones, a gap of 0.135; but the random control "
        "already has a gap of 0.060",
        lambda r, fig: [
            f"{r['transformer_similarity']['centred']['related']:.3f}",
            f"{r['transformer_similarity']['centred']['mismatched']:.3f}",
            f"{_gap(r['transformer_similarity']['centred']):.3f}",
            f"{_gap(r['transformer_similarity']['random']):.3f}",
        ],
    ),
    (
        "a word's partner is the closest of the 29 for 5 words, as in the control (5)",
        lambda r, fig: [
            f"{r['pairs_and_analogies'][0]}",
            f"{r['transformer_similarity']['centred']['matches']}",
            f"{r['transformer_similarity']['random']['matches']}",
        ],
    ),
    (
        "word2vec's skip-gram: a gap of 0.278, and the partner is the closest for 16 words",
        lambda r, fig: [
            f"{_gap(r['word2vec_similarity']['skipgram']):.3f}",
            f"{r['word2vec_similarity']['skipgram']['matches']}",
        ],
    ),
    (
        "get 0.298 against 0.012 for mismatched pairs (control: 0.060 against 0.002), and for 23 of the 49 English "
        "words the translation is the closest of the 49 German words (control: 8)",
        lambda r, fig: [
            f"{r['translation_similarity']['centred']['related']:.3f}",
            f"{r['translation_similarity']['centred']['mismatched']:.3f}",
            f"{r['translation_similarity']['random']['related']:.3f}",
            f"{r['translation_similarity']['random']['mismatched']:.3f}",
            f"{r['translation_similarity']['centred']['matches']}",
            f"{r['translation_pairs']}",
            f"{r['translation_pairs']}",
            f"{r['translation_similarity']['random']['matches']}",
        ],
    ),
    (
        "the 43 pairs that share none give the same picture: 0.242 against 0.000, the translation closest for 17 "
        "(control: 2)",
        lambda r, fig: [
            f"{r['translation_pairs_unshared']}",
            f"{r['translation_similarity_unshared']['centred']['related']:.3f}",
            _signed(r["translation_similarity_unshared"]["centred"]["mismatched"], negative=False),
            f"{r['translation_similarity_unshared']['centred']['matches']}",
            f"{r['translation_similarity_unshared']['random']['matches']}",
        ],
    ),
    # 5. Contextual vectors
    ("hide 15% of the tokens of a text", lambda r, fig: f"{100 * r['mlm_settings']['mask_probability']:.0f}"),
    (
        "of the chosen 15%, 80% become",
        lambda r, fig: [f"{100 * r['mlm_settings']['mask_probability']:.0f}", "80"],
    ),
    ("(never trained on), 15% of the tokens", lambda r, fig: f"{100 * r['mlm_settings']['mask_probability']:.0f}"),
    (
        "After 600 steps (2 layers, width 64, the 600-token vocabulary",
        lambda r, fig: [
            f"{r['mlm_settings']['steps']}",
            f"{r['mlm_settings']['layers']}",
            f"{r['mlm_settings']['hidden_size']}",
            f"{r['mlm_settings']['vocab_size']}",
        ],
    ),
    (
        "the encoder fills 16.9% of the 1,113 masked tokens of the validation strings, against 2.1% for the unigram",
        lambda r, fig: [
            f"{100 * r['mlm_accuracy']['model']:.1f}",
            f"{r['mlm_accuracy']['masked_tokens']:,}",
            f"{100 * r['mlm_accuracy']['unigram']:.1f}",
        ],
    ),
    ("if a weak one after 600 steps", lambda r, fig: f"{r['mlm_settings']['steps']}"),
    ("in the first 40 training strings", lambda r, fig: f"{r['contextual']['strings']}"),
    (
        "the same in all 40 strings: a mean cosine of 1.000",
        lambda r, fig: [f"{r['contextual']['strings']}", f"{r['contextual']['same_word'][0]:.3f}"],
    ),
    (
        "falls to 0.749, after the second it is 0.745 (the least similar two strings: 0.201)",
        lambda r, fig: [
            f"{r['contextual']['same_word'][1]:.3f}",
            f"{r['contextual']['same_word'][2]:.3f}",
            f"{r['contextual']['same_word_min_last_layer']:.3f}",
        ],
    ),
    (
        "(0.109 and 0.175 after the two layers)",
        lambda r, fig: [f"{v:.3f}" for v in r["contextual"]["different_words"][1:]],
    ),
    # Exercises
    ("$m$ is 6 inside a string", lambda r, fig: f"{2 * r['word2vec_settings']['window']}"),
    ("from window to window, up to 6,", lambda r, fig: f"{2 * r['word2vec_settings']['window']}"),
    ("a learning rate up to 6 times smaller", lambda r, fig: f"{2 * r['word2vec_settings']['window']}"),
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
    ("Mismatched pairs are not at 0 either", "the value random directions give"),
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
    ("1. Tokens per word falls", "answer numbering"),
    ("2. A capitalised word", "answer numbering"),
    ("3. The sum of the $m$", "answer numbering"),
    ("(a string of 2 words gives each word $m = 1$)", "arithmetic of an example"),
    ("weighted 1 instead of $1/m$", "arithmetic"),
    ("4. A small window", "answer numbering"),
    ("5. Not run here", "answer numbering"),
    ("6. GloVe (Pennington et al. 2014)", "answer numbering and citation"),
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
]
