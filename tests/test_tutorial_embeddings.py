"""Tutorial 02 (embeddings and word2vec) runs in its --quick mode and its numbers are what its text says; the
committed figures, drawn by a full run with a trained English → German model, show what the text says of them."""

import json
import math
from itertools import pairwise

import numpy as np
import pytest
import torch
import yaml
from test_tutorials import FIGURES, ROOT, assert_figures, run_tutorial

# One worker runs this module's tests, so its module-scoped run happens once (pyproject: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("tutorial02")


@pytest.fixture(scope="module")
def main_job_corpus():
    """The main job's English → German pairs: the catalogs of the pinned wheels its config lists."""
    from training.args import parse_args
    from training.objectives.translation import parallel_corpus

    return parallel_corpus(parse_args(["--config", str(ROOT / "training" / "configs" / "translation_en_de.yaml")])[1])


@pytest.fixture(scope="module")
def untrained_checkpoint(main_job_corpus, tmp_path_factory):
    """A small untrained English → German model with the main job's tokenizer recipe (8,000 BPE tokens on the
    training split): the tutorial's Transformer section runs on it in seconds, and an untrained embedding is the
    control that shows no pair structure."""
    import hf_attention
    from training.data.splits import split_dataset
    from training.data.tokenizer import train_tokenizer

    train = split_dataset(main_job_corpus, key="source")["train"]  # the main job's pinned data
    tokenizer = train_tokenizer(list(train["source"]) + list(train["target"]), 8000, kind="seq2seq")
    torch.manual_seed(0)
    config = hf_attention.HFAttentionSeq2SeqConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        encoder_layers=1,
        decoder_layers=1,
        num_attention_heads=2,
    )
    folder = tmp_path_factory.mktemp("untrained_en_de")
    hf_attention.HFAttentionForSeq2SeqLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def quick_run(untrained_checkpoint, tmp_path_factory):
    return run_tutorial(
        "02_embeddings_word2vec.py", tmp_path_factory.mktemp("tutorial02"), "--model", str(untrained_checkpoint)
    )


def test_tokens(quick_run):
    """The tutorial reads the main job's pinned corpus, the same on every machine: its tokenizers are too."""
    numbers, _, _ = quick_run
    split = numbers["split_word_tokens"]
    assert split["8000"] == ["Direct", "ory"]  # "Directory" stays two pieces even with 8,000 tokens
    assert numbers["replays"]["Ġdirectory"][-1] == ["Ġdirectory", None]  # while " directory" is one token
    first, second, count, learned = numbers["missing_pair"]
    assert [first, second] == split["8000"] and not learned  # no merge of the last two pieces
    # The text's explanation: that pair is no more frequent than the last merges that made it into the vocabulary,
    # and the capitalised pre-token is rarer than the one inside sentences.
    assert count <= numbers["last_50_merges_median_count"]
    counts = numbers["split_word_pretoken_counts"]
    assert counts["Directory"] < counts["Ġdirectory"]
    # The replay applies merges in rank order: a pair there earlier with a lower rank would have been merged first,
    # and a pair a merge creates holds the symbol that merge learned, so it was learned later.
    for word in ("Directory", "Ġdirectory"):
        ranks = [rank for _, rank in numbers["replays"][word][:-1]]
        assert ranks == sorted(ranks)
    assert len(split["600"]) >= len(split["2000"]) >= len(split["8000"])  # a larger vocabulary cuts fewer pieces
    matched, total = numbers["replay_matches"]
    assert matched == total == 2000  # replaying the merges is what the tokenizer does
    for language in ("English", "German"):
        per_word = numbers["tokens_per_word"][language]
        assert per_word[0] > per_word[1] > per_word[2] > 1  # fewer pieces with a larger vocabulary
    assert all(
        g > e for g, e in zip(numbers["tokens_per_word"]["German"], numbers["tokens_per_word"]["English"], strict=True)
    )


def test_one_hot_and_lookup(quick_run):
    numbers, _, _ = quick_run
    assert numbers["one_hot_equals_lookup"] is True  # torch.equal: bit for bit
    assert numbers["model_one_hot_equals_lookup"] is True
    assert numbers["embedding_shared"] is True  # encoder, decoder and lm_head: one matrix
    assert numbers["one_hot_cosines"] == np.eye(5).tolist()  # orthogonal: no similarity at all
    # A batch of the main job is at most max_tokens_per_batch = 384 padded positions (not 64 rows × 32 tokens):
    # 384 × 8000 × 4 bytes of one-hot rows, about 11.7 MiB (it was 62.5 MiB for 64 × 32).
    config = yaml.safe_load((ROOT / "training" / "configs" / "translation_en_de.yaml").read_text())
    assert numbers["cost"]["batch_tokens"] == config["max_tokens_per_batch"] == 384
    assert numbers["cost"]["one_hot_batch_MiB"] == 384 * 8000 * 4 / 2**20 == 11.71875
    assert numbers["cost"]["numbers_copied_lookup"] == 384 * config["model_config"]["hidden_size"]
    assert numbers["cost"]["multiply_adds_one_hot"] == 8000 * numbers["cost"]["numbers_copied_lookup"]


def test_word2vec(quick_run):
    numbers, _, _ = quick_run
    text = numbers["word2vec_text"]
    # The pinned corpus: the same words on every machine (counting them involves no training).
    assert text["words"] == 45_354 and text["vocabulary"] == 1_279
    for kind in ("cbow", "skipgram"):
        # W' starts at zero: every score is 0 and the first loss is (1 + K) log 2 with K = 5 negatives.
        assert abs(numbers[f"{kind}_loss_at_start"] - 6 * math.log(2)) < 1e-5
        first, last = numbers[f"{kind}_loss_first_last"]
        assert last < 0.7 * first
        # The figure's first point is a mean of 10 steps, a little below the first step's 6 log 2 (as the text says).
        assert numbers[f"{kind}_loss_at_start"] - 0.2 < first < numbers[f"{kind}_loss_at_start"]
        # The loss steps down where every epoch begins, and falls less and less inside an epoch.
        changes = numbers[f"{kind}_epoch_changes"]
        assert len(changes["within"]) == 6 and all(step > 0.03 for step in changes["at_start"]), changes
        assert changes["within"][-1] < changes["within"][1] / 1.5, changes
        # The staircase is memorisation: windows trained on have a lower loss than unseen windows of the same
        # words, and the gap grows over the epochs.
        gaps = numbers[f"{kind}_memorisation_gap"]
        assert len(gaps) == 6 and gaps[0] < gaps[-1] and gaps[-1] > 0.1, gaps
    similarity = numbers["word2vec_similarity"]
    untrained = similarity["untrained"]
    assert abs(untrained["related"] - untrained["mismatched"]) < 0.1  # random directions: no structure
    for kind in ("cbow", "skipgram"):
        trained = similarity[kind]
        assert trained["related"] > trained["mismatched"] + 0.15  # related pairs clearly closer
        assert trained["related"] > untrained["related"] + 0.3  # and training is what did it
    # CBOW against skip-gram on the pair check, three seeds each: both clearly trained, neither far ahead.
    seeds = numbers["word2vec_seeds"]
    assert all(len(v["gap"]) == len(v["matches"]) == 3 and min(v["gap"]) > 0.15 for v in seeds.values())
    assert abs(np.mean(seeds["cbow"]["gap"]) - np.mean(seeds["skipgram"]["gap"])) < 0.1
    neighbours = numbers["word2vec_neighbours"]
    assert all(len(words) == 6 for kind in neighbours.values() for words in kind.values())
    # The exercises' cell. 1: two more tokenizers on the pinned data; each doubling of the vocabulary saves less.
    sizes = numbers["exercise_vocab_sizes"]
    assert sizes["sizes"] == sizes["learned"] == [300, 600, 2000, 8000, 16000]
    for language, falls in sizes["fall_per_doubling"].items():
        assert all(a > b > 0 for a, b in pairwise(falls)), (language, falls)
    # 3: CBOW with the sum of the context vectors still trains at the same learning rate, and its vectors pair up.
    summed = numbers["exercise_cbow_sum"]
    assert len(summed["gap"]) == 1  # --quick: one seed
    assert all(last < 0.7 * first for first, last in summed["loss_first_last"]) and min(summed["gap"]) > 0.15
    assert 1 < summed["context_words_mean"] < 6 and 0 < summed["windows_full"] < 1  # short strings: m varies
    # 4: other windows train too; a wider window holds more context words.
    windows = numbers["exercise_windows"]
    assert all(min(windows[f"{kind}_{w}"]["gap"]) > 0.08 for kind in ("cbow", "skipgram") for w in (1, 6))
    assert 1 < windows["context_words_1"] < summed["context_words_mean"] < windows["context_words_6"] < 12
    # 6: W + W' of the same models: related pairs closer than mismatched ones; W and W' of comparable size.
    for kind, check in numbers["exercise_w_plus_w_out"].items():
        assert min(check["gap"]) > 0.15 and 0.5 < min(check["norm_ratio"]) <= max(check["norm_ratio"]) < 2, kind
    hits = numbers["analogy_hits"]
    assert hits["untrained"] == []  # random vectors solve none; trained ones some (how many depends on the text)
    assert 0 < numbers["map_explained_variance"] < 1


def test_output_matrix_is_not_the_pseudo_inverse(quick_run):
    """W' (d x V) against pinv(W): far apart, and W'W far from the identity, while pinv(W) W is the identity."""
    numbers, _, _ = quick_run
    for kind, check in numbers["inverse_check"].items():
        assert check["pinv_product_to_identity"] < 1e-8, kind  # the measurement itself is right
        assert check["distance_to_pinv"] > 0.9, kind  # no closer to pinv(W) than the zero matrix is (distance 1)
        assert abs(check["cosine_to_pinv"]) < 0.5, kind
        assert check["product_to_identity"] > 1, kind  # W'W is further from I_d than the zero matrix


def test_masked_lm_and_contextual_vectors(quick_run):
    numbers, figures, _ = quick_run
    accuracy = numbers["mlm_accuracy"]
    assert accuracy["masked_tokens"] > 500
    first, last = numbers["mlm_loss_first_last"]
    assert last < first - 0.5  # the encoder learns
    # Filling masks from both sides beats always guessing the commonest token, by a wide margin.
    assert accuracy["model"] > accuracy["unigram"] + 0.05 and accuracy["model"] > 2 * accuracy["unigram"]
    assert all(len(top) == 5 for top in numbers["mlm_fills"].values())
    contextual = numbers["contextual"]
    same, different = contextual["same_word"], contextual["different_words"]
    assert contextual["strings"] >= 10
    assert abs(same[0] - 1) < 1e-5  # before the layers: the embedding row, one vector in every string
    assert abs(contextual["word2vec_same_word"] - 1) < 1e-5  # word2vec: one vector, whatever the string
    assert same[-1] < 0.99 and contextual["same_word_min_last_layer"] < 0.95  # after the layers it differs by string
    assert all(s > d + 0.1 for s, d in zip(same, different, strict=True))  # but stays closer than other words


def test_untrained_transformer_embedding_has_no_pair_structure(quick_run):
    """On an untrained checkpoint, the words' vectors (mean of their pieces' rows) show what the random control shows:
    only the pieces that words share, nothing learned."""
    numbers, _, _ = quick_run
    assert "checkpoint given with --model" in numbers["model_origin"]
    # The checkpoint's 8,000 BPE tokens are trained on the main job's pinned corpus, so the same everywhere: most pair
    # words are one token, and every pair and translation counts (a word of several pieces is their mean).
    assert numbers["pairs_one_token"] == 21 and numbers["translations_one_token"] == 43
    assert numbers["translation_pairs"] == 49 and 1 <= numbers["pieces_per_word"] < 1.5
    for check in ("transformer_similarity", "translation_similarity"):
        groups = numbers[check]
        control = groups["random"]["related"] - groups["random"]["mismatched"]
        for name in ("raw", "centred"):
            gap = groups[name]["related"] - groups[name]["mismatched"]
            assert abs(gap - control) < 0.2, (check, name, gap, control)  # random rows of width 32: noise only
    assert set(numbers["transformer_neighbours"]) == {
        "file",
        "open",
        "delete",
        "error",
        "window",
        "password",
        "server",
        "color",
    }
    assert all(len(words) == 6 for words in numbers["transformer_neighbours"].values())


def test_figures(quick_run):
    _, figures, _ = quick_run
    assert_figures(figures, "02_")


def test_committed_word2vec_loss_figure():
    """The committed curves are means of 10 steps: their first points are the full run's reported means of the first
    10 steps (the first step alone is 6 log 2 = 4.159), drawn against epochs; in the last half of the epochs the loss
    is a staircase, flat inside an epoch and a step down where the next begins, as the text says."""
    results = json.loads((FIGURES / "02_results.json").read_text())
    with np.load(FIGURES / "02_word2vec_loss.npz") as data:
        curves = {key: data[key] for key in data.files}
    epochs = results["word2vec_settings"]["epochs"]
    for kind in ("cbow", "skipgram"):
        assert abs(curves[kind][0] - results[f"{kind}_loss_first_last"][0]) < 1e-6
        place = curves[f"{kind}_epochs"]
        assert len(place) == len(curves[kind]) and (np.diff(place) > 0).all() and 0 < place[0] < 0.5 < epochs - 0.5
        changes = results[f"{kind}_epoch_changes"]
        late = slice(epochs // 2, epochs)
        within, at_start = np.mean(changes["within"][late]), np.mean([0, *changes["at_start"]][late])
        assert at_start > 0.05 and abs(within) < at_start / 3, (within, at_start)


def test_committed_similarity_figure():
    """The committed 02_similarity is a full run's (word2vec, and the tutorials' own English → German run): what the
    text says of it."""
    with np.load(FIGURES / "02_similarity.npz") as data:
        related, mismatched, pairs = data["related"], data["mismatched"], data["pairs"]
    # Groups: word2vec untrained, CBOW, skip-gram; the Transformer's random control, raw and centred rows on the 29
    # English pairs; its random control and centred rows on the 49 translation pairs (a word: the mean of its pieces).
    assert pairs.tolist() == [29] * 6 + [49] * 2
    gap = related - mismatched
    assert abs(gap[0]) < 0.1 and gap[1] > 0.2 and gap[2] > 0.2  # training made the pairs; chance did not
    assert gap[5] < gap[2] / 1.5  # the translation model puts far less of the English pairs into its embedding
    assert gap[7] > gap[6] + 0.15  # but clearly puts translations together, beyond what shared pieces give


def test_committed_transformer_embedding_numbers():
    """Section 4's reading of the full run: translations found far beyond the random control (also without shared
    pieces), English partners no better than the control, and the neighbours the text quotes."""
    results = json.loads((FIGURES / "02_results.json").read_text())
    assert results["model_origin"].startswith("the tutorials' own run")
    translations, unshared = results["translation_similarity"], results["translation_similarity_unshared"]
    assert translations["centred"]["matches"] >= 2 * translations["random"]["matches"] + 5
    assert unshared["centred"]["matches"] >= unshared["random"]["matches"] + 10
    english = results["transformer_similarity"]
    assert english["centred"]["matches"] <= english["random"]["matches"] + 2
    assert results["word2vec_similarity"]["skipgram"]["matches"] > english["centred"]["matches"] + 5
    quoted = {"password": ["p", "port", "private"], "server": ["s", "scroll", "system"]}
    quoted["file"] = ["source", "was", "files", "person"]
    for word, words in quoted.items():
        assert results["transformer_neighbours"][word][: len(words)] == words, word
    assert results["word2vec_neighbours"]["skipgram"]["server"][:3] == ["connect", "host", "port"]
    assert results["translation_closest"][1] == "server/Server" and "group/Gruppe" in results["translation_closest"]


def test_committed_contextual_figure():
    """The committed 02_contextual: one vector per word before the layers, a vector per string after them."""
    with np.load(FIGURES / "02_contextual.npz") as data:
        same, different = data["same_word"], data["different_words"]
    assert abs(same[0] - 1) < 1e-5 and same[-1] < 0.99 and (same > different).all()


def test_data_the_text_describes(main_job_corpus, quick_run):
    """Section 1: the tutorial reads exactly the main job's corpus, the catalogs of the pinned wheels."""
    numbers, _, _ = quick_run
    assert numbers["pairs"] == len(main_job_corpus) == 14_615


def test_02_links_to_03():
    text = (ROOT / "docs" / "tutorials" / "02_embeddings_word2vec.py").read_text()
    assert "**Next:** [03 · attention pooling as kernel regression](03_nadaraya_watson.py)" in text
