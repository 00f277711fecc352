"""Tutorial 02 (embeddings and word2vec) runs in its --quick mode and its numbers are what its text says; the
committed figures, drawn by a full run with a trained English → German model, show what the text says of them."""

import math

import numpy as np
import pytest
import torch
import yaml
from test_tutorials import FIGURES, ROOT, assert_figures, run_tutorial


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
    from training.splits import split_dataset
    from training.tokenizer import train_tokenizer

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
    """The tutorial reads the machine's own catalogs, which differ between machines: what is asserted here is what
    holds on any of them (the mechanism), not the counts the text quotes from one machine."""
    numbers, _, _ = quick_run
    ranks, save = numbers["ranks"], numbers["save_tokens"]
    assert ranks["v ve"] < ranks["a ve"]  # BPE learns the shorter, commoner pieces first
    if numbers["has_merge_S_ave"]:
        assert save["8000"] == ["Save"]
    else:
        # The text's explanation: no merge S + ave, because that pair is rarer than the last merges learned.
        assert save["8000"] == ["S", "ave"]
        assert numbers["pair_S_ave_count"] < numbers["last_50_merges_median_count"]
    assert len(save["600"]) >= len(save["2000"]) >= len(save["8000"])  # a larger vocabulary cuts fewer pieces
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
    assert text["words"] > 50_000 and text["vocabulary"] > 500  # the machine's catalogs: their size varies
    for kind in ("cbow", "skipgram"):
        # W' starts at zero: every score is 0 and the first loss is (1 + K) log 2 with K = 5 negatives.
        assert abs(numbers[f"{kind}_loss_at_start"] - 6 * math.log(2)) < 1e-5
        first, last = numbers[f"{kind}_loss_first_last"]
        assert last < 0.7 * first
        # The figure's first point is a mean of 50 steps, already below the first step's 6 log 2 (as the text says).
        assert first < numbers[f"{kind}_loss_at_start"] - 0.3
        # The staircase is memorisation: windows trained on have a lower loss than unseen windows of the same
        # words, and the gap grows with each epoch.
        gaps = numbers[f"{kind}_memorisation_gap"]
        assert len(gaps) == 2 and 0.03 < gaps[0] < gaps[1], gaps
    similarity = numbers["word2vec_similarity"]
    untrained = similarity["untrained"]
    assert abs(untrained["related"] - untrained["mismatched"]) < 0.1  # random directions: no structure
    for kind in ("cbow", "skipgram"):
        trained = similarity[kind]
        assert trained["related"] > trained["mismatched"] + 0.2  # related pairs clearly closer
        assert trained["related"] > untrained["related"] + 0.3  # and training is what did it
    neighbours = numbers["word2vec_neighbours"]
    assert all(len(words) == 6 for kind in neighbours.values() for words in kind.values())
    hits = numbers["analogy_hits"]
    assert hits["untrained"] == []  # random vectors solve none; trained ones some (how many depends on the text)
    assert 0 < numbers["map_explained_variance"] < 1


def test_untrained_transformer_embedding_has_no_pair_structure(quick_run):
    numbers, _, _ = quick_run
    assert "checkpoint given with --model" in numbers["model_origin"]
    # Pairs whose two words are single tokens with the checkpoint's 8,000 BPE tokens (trained on the main job's pinned
    # corpus, so the same everywhere).
    assert numbers["transformer_pairs"] == 18
    untrained = numbers["transformer_similarity"]
    assert abs(untrained["related"] - untrained["mismatched"]) < 0.1
    assert numbers["translation_pairs"] == 43  # file/Datei, error/Fehler, ...: one token each
    untrained = numbers["translation_similarity"]
    assert abs(untrained["related"] - untrained["mismatched"]) < 0.1


def test_figures(quick_run):
    _, figures, _ = quick_run
    assert_figures(figures, "02_")


def test_committed_word2vec_loss_figure():
    """The committed curves are means of 50 steps: their first points are the 3.39 and 3.56 the text quotes (the
    first step alone is 6 log 2 = 4.159), and the staircase steps down at each of the 5 epochs."""
    with np.load(FIGURES / "02_word2vec_loss.npz") as data:
        cbow, skipgram = data["cbow"], data["skipgram"]
    assert round(float(cbow[0]), 2) == 3.39 and round(float(skipgram[0]), 2) == 3.56
    for curve in (cbow, skipgram):
        epoch = (len(curve) + 49) // 5  # steps per epoch (the curve is 49 points shorter than the losses)
        drops = [
            curve[e * epoch - 150 : e * epoch - 50].mean() - curve[e * epoch : e * epoch + 100].mean()
            for e in (2, 3, 4)
        ]
        assert all(drop > 0.05 for drop in drops), drops


def test_committed_similarity_figure():
    """The committed 02_similarity is a full run's (word2vec, and a trained English → German model's embedding):
    what the text says of it."""
    with np.load(FIGURES / "02_similarity.npz") as data:
        related, mismatched, pairs = data["related"], data["mismatched"], data["pairs"]
    # Groups: word2vec untrained, CBOW, skip-gram; Transformer raw rows, centred rows, centred English/German pairs.
    gap = related - mismatched
    assert abs(gap[0]) < 0.1 and gap[1] > 0.25 and gap[2] > 0.25  # training made the pairs; chance did not
    assert pairs[3] == pairs[4] >= 5 and pairs[5] >= 20
    assert 0 < gap[3] < gap[2] / 2 and 0 < gap[4] < gap[2] / 2  # the Transformer separates English pairs less
    assert gap[5] > 0.1  # but puts translations closer than mismatched English/German pairs
    assert mismatched[4] > mismatched[5] + 0.1  # English/English closer than English/German: the model's sides


def test_data_the_text_describes(main_job_corpus, quick_run):
    """Section 1: the main job reads only the pinned wheels' catalogs (about 14,600 pairs, 45,000 English words);
    the tutorial reads the machine's, about four times the English text on the machine the text quotes."""
    import re

    numbers, _, _ = quick_run
    words = re.compile(r"[a-z%$'{}<>_\d]+")  # the tutorial's own word rule
    english = sum(
        len([w for w in words.findall(text.lower()) if w.isalpha()])
        for text in main_job_corpus["source"]
        if len([w for w in words.findall(text.lower()) if w.isalpha()]) >= 2
    )
    assert abs(len(main_job_corpus) - 14_600) < 100 and abs(english - 45_000) < 1_000
    assert numbers["word2vec_text"]["words"] > english  # the reason the tutorial reads the machine's catalogs


def test_02_links_to_03():
    text = (ROOT / "docs" / "tutorials" / "02_embeddings_word2vec.py").read_text()
    assert "**Next:** [03 · attention pooling as kernel regression](03_nadaraya_watson.py)" in text
