"""Tutorial 02 (embeddings and word2vec) runs in its --quick mode and its numbers are what its text says; the
committed figures, drawn by a full run with a trained English → German model, show what the text says of them."""

import math

import numpy as np
import pytest
import torch
from test_tutorials import FIGURES, assert_figures, run_tutorial


@pytest.fixture(scope="module")
def untrained_checkpoint(tmp_path_factory):
    """A small untrained English → German model with the main job's tokenizer recipe (8,000 BPE tokens on the
    training split): the tutorial's Transformer section runs on it in seconds, and an untrained embedding is the
    control that shows no pair structure."""
    import hf_attention
    from training.data import split_dataset, translation_corpus
    from training.tokenizer import train_tokenizer

    train = split_dataset(translation_corpus("de", max_chars=100), key="source")["train"]
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
    numbers, _, _ = quick_run
    # "Save" stays in two pieces even with the main job's 8,000 tokens, because no merge S + ave was learned: the
    # pair is rarer than the last merges that made it into the vocabulary.
    assert numbers["save_tokens"]["8000"] == ["S", "ave"] and numbers["save_tokens"]["2000"] == ["S", "ave"]
    assert len(numbers["save_tokens"]["600"]) > 2
    assert not numbers["has_merge_S_ave"] and numbers["ranks"]["S a"] is not None
    assert numbers["ranks"]["v ve"] < numbers["ranks"]["a ve"] < numbers["ranks"]["S a"]  # learned in this order
    assert numbers["pair_S_ave_count"] == 9 and numbers["last_50_merges_median_count"] == 17  # as the text says
    assert numbers["save_pretoken_counts"]["Save"] < numbers["save_pretoken_counts"]["Ġsave"]
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
    assert numbers["cost"]["one_hot_batch_MiB"] == 62.5  # 64 × 32 tokens × 8000 × 4 bytes
    assert numbers["cost"]["multiply_adds_one_hot"] == 8000 * numbers["cost"]["numbers_copied_lookup"]


def test_word2vec(quick_run):
    numbers, _, _ = quick_run
    text = numbers["word2vec_text"]
    assert text["words"] > 150_000 and 2500 < text["vocabulary"] < 4500
    for kind in ("cbow", "skipgram"):
        # W' starts at zero: every score is 0 and the first loss is (1 + K) log 2 with K = 5 negatives.
        assert abs(numbers[f"{kind}_loss_at_start"] - 6 * math.log(2)) < 1e-5
        first, last = numbers[f"{kind}_loss_first_last"]
        assert last < 0.7 * first
    similarity = numbers["word2vec_similarity"]
    untrained = similarity["untrained"]
    assert abs(untrained["related"] - untrained["mismatched"]) < 0.1  # random directions: no structure
    for kind in ("cbow", "skipgram"):
        trained = similarity[kind]
        assert trained["related"] > trained["mismatched"] + 0.2  # related pairs clearly closer
        assert trained["related"] > untrained["related"] + 0.3  # and training is what did it
    neighbours = numbers["word2vec_neighbours"]
    assert "close" in neighbours["cbow"]["open"] and "close" in neighbours["skipgram"]["open"]
    assert {"directory", "folder"} & set(neighbours["cbow"]["file"])
    hits = numbers["analogy_hits"]
    assert hits["untrained"] == []
    assert len(hits["cbow"]) + len(hits["skipgram"]) >= 1 and max(len(hits["cbow"]), len(hits["skipgram"])) <= 6
    assert 0 < numbers["map_explained_variance"] < 1


def test_untrained_transformer_embedding_has_no_pair_structure(quick_run):
    numbers, _, _ = quick_run
    assert "checkpoint given with --model" in numbers["model_origin"]
    assert numbers["transformer_pairs"] == 23  # pairs whose two words are single tokens with 8,000 BPE tokens
    untrained = numbers["transformer_similarity"]
    assert abs(untrained["related"] - untrained["mismatched"]) < 0.1
    assert numbers["translation_pairs"] == 49  # file/Datei, error/Fehler, ...: one token each
    untrained = numbers["translation_similarity"]
    assert abs(untrained["related"] - untrained["mismatched"]) < 0.1


def test_figures(quick_run):
    _, figures, _ = quick_run
    assert_figures(figures, "02_")


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
    assert mismatched[4] > mismatched[5] + 0.15  # English/English closer than English/German: the main structure
