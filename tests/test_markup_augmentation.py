"""Markup augmentation of translation pairs: the same tags and placeholders go into both sides, never inside markup
that is already there, never past the length limit, never onto a held-out source; the choices are reproducible and
the option reaches the training split through `split_corpus`."""

import random
import re

import pytest
from datasets import Dataset

from training.data.markup_augmentation import (
    WAYS,
    augment_pair,
    augment_with_markup,
    shared_words,
)
from training.finish.metrics import placeholders

PAIRS = [
    ("Open %s in Spyder", "%s in Spyder öffnen"),
    ("Save file", "Datei speichern"),
    ("Version 3.2 of %(name)s", "Version 3.2 von %(name)s"),
    ("Delete {name}?", "{name} löschen?"),
    ("Install <b>PyQt5</b> first", "Installieren Sie zuerst <b>PyQt5</b>"),
]


def test_shared_words_are_name_like_and_outside_markup():
    assert shared_words("Open %s in Spyder", "%s in Spyder öffnen") == ["Spyder"]  # not "in", not the "s" of %s
    assert shared_words("Version 3.2 of %(name)s", "Version 3.2 von %(name)s") == ["3.2", "Version"]
    assert shared_words("Delete {name}?", "{name} löschen?") == []  # "name" is inside a field
    assert shared_words("Install <b>PyQt5</b> first", "Installieren Sie zuerst <b>PyQt5</b>") == ["PyQt5"]
    assert shared_words("Copy PDF to PDF", "PDF nach PDF kopieren") == []  # twice: no single place for the markup


@pytest.mark.parametrize("way", WAYS)
def test_every_augmented_pair_carries_the_same_new_markup_in_both_sides(way):
    rng = random.Random(0)
    made = 0
    for step in range(50):
        source, target = PAIRS[step % len(PAIRS)]
        partner = PAIRS[(step + 1) % len(PAIRS)]
        pair = augment_pair(source, target, way, rng, partner=partner)
        if pair is None:
            assert way == "mark" and not shared_words(source, target)  # only a pair with no shared word is skipped
            continue
        made += 1
        new_source, new_target = pair
        added = placeholders(new_source) - placeholders(source)
        assert added, (way, source, new_source)  # markup was added ...
        assert placeholders(new_target) - placeholders(target) == added  # ... the same to the target
        assert not placeholders(source) - placeholders(new_source)  # and what was there is kept whole
        if way == "join":
            assert new_source.endswith(partner[0]) and new_target.endswith(partner[1])
        if way == "wrap":
            assert source in new_source and target in new_target
        if way == "mark":
            assert any(
                f">{word}</" in new_source and f">{word}</" in new_target for word in shared_words(source, target)
            )
    assert made >= 30
    with pytest.raises(ValueError, match="way='shuffle' is not a way .* wrap, join, mark, slot"):
        augment_pair("a", "b", "shuffle", rng)


def test_augmentation_is_reproducible_bounded_and_keeps_held_out_sources_out():
    train = Dataset.from_dict(
        {"source": [s for s, _ in PAIRS] * 20, "target": [t for _, t in PAIRS] * 20, "origin": ["x"] * 100}
    )
    first = augment_with_markup(train, fraction=0.5, max_chars=40)
    again = augment_with_markup(train, fraction=0.5, max_chars=40)
    assert list(first["source"]) == list(again["source"]) and list(first["target"]) == list(again["target"])
    assert first.column_names == ["source", "target"]
    assert list(first["source"])[:100] == list(train["source"])  # the original pairs first, unchanged
    extra = first.select(range(100, len(first)))
    assert 0 < len(extra) <= 50
    assert max(len(text) for text in list(extra["source"]) + list(extra["target"])) <= 40
    banned = set(list(extra["source"])[:5])
    kept = augment_with_markup(train, fraction=0.5, max_chars=40, held_out_sources=banned)
    assert not banned & set(list(kept["source"])[100:])
    assert augment_with_markup(train, fraction=0.0, max_chars=40) is train


def test_composed_pairs_put_closing_tags_inside_the_text_and_elements_carry_attributes():
    """Half of the pairs are made in two ways: a closing tag then sits before a line break and more text, where
    real strings have it (`<b>Unable to load %s</b><br><br>...`), not only at the end."""
    train = Dataset.from_dict({"source": [s for s, _ in PAIRS] * 40, "target": [t for _, t in PAIRS] * 40})
    extra = list(augment_with_markup(train, fraction=1.0, max_chars=100)["source"])[200:]
    closed_inside = [text for text in extra if re.search(r"</\w+><br", text)]
    assert len(closed_inside) >= 5
    assert any('<a href="' in text for text in extra)
    assert all(text.count("<br") <= 2 * 2 for text in extra)  # at most two joins, each one or two breaks


@pytest.mark.parametrize("fraction", [-0.1, 1.5])
def test_a_fraction_outside_0_1_is_refused(fraction):
    train = Dataset.from_dict({"source": ["a"], "target": ["b"]})
    with pytest.raises(ValueError, match=rf"markup_augmentation={fraction} .* 0 to 1"):
        augment_with_markup(train, fraction=fraction, max_chars=40)


def test_the_option_is_checked_and_reaches_the_training_split_only():
    from training.args import parse_args
    from training.data.splits import split_corpus
    from training.objectives import objective_for

    with pytest.raises(ValueError, match="markup_augmentation"):
        parse_args(["--objective", "translation", "--markup_augmentation", "2"])
    rows = {
        "source": [f"Open file number {i}" for i in range(400)],
        "target": [f"Datei {i} öffnen" for i in range(400)],
    }
    corpus = Dataset.from_dict(rows)
    objective = objective_for("translation")
    _, data_args, _, _ = parse_args(["--objective", "translation", "--markup_augmentation", "0.25"])
    plain_args = parse_args(["--objective", "translation"])[1]
    plain, augmented = split_corpus(objective, corpus, plain_args), split_corpus(objective, corpus, data_args)
    for name in ("validation", "test"):
        assert augmented[name]["source"] == plain[name]["source"]
    assert len(augmented["train"]) == len(plain["train"]) + round(0.25 * len(plain["train"]))
    held_out = set(plain["validation"]["source"]) | set(plain["test"]["source"])
    assert not held_out & set(augmented["train"]["source"])


def test_with_protection_the_augmented_pairs_carry_sentinels_too():
    """The augmentation runs on the raw pairs; the featurizer then protects every training row, augmented or not, and
    the tokenizer learns from the protected pairs."""
    from hf_attention.modeling.placeholders import SENTINELS, protect_pair, tokenizer_protects
    from training.args import parse_args
    from training.data.splits import split_corpus
    from training.data.tokenizer import make_tokenizer
    from training.objectives import objective_for

    rows = {
        "source": [f"Open file number {i} in Spyder" for i in range(300)],
        "target": [f"Datei Nummer {i} in Spyder öffnen" for i in range(300)],
    }
    objective = objective_for("translation")
    flags = ["--objective", "translation", "--markup_augmentation", "0.5", "--protect_placeholders", "true"]
    data_args = parse_args(flags)[1]
    train = split_corpus(objective, Dataset.from_dict(rows), data_args)["train"]
    augmented = [i for i, source in enumerate(train["source"]) if placeholders(source)]
    assert len(augmented) > 50  # the corpus itself holds no markup
    tokenizer = make_tokenizer(objective, train, data_args, vocab_size=400)
    assert tokenizer_protects(tokenizer)
    features = objective.data.featurize(train, tokenizer, data_args)
    sentinel_ids = set(tokenizer.convert_tokens_to_ids(list(SENTINELS)))
    for i in augmented[:20]:
        source, target, originals = protect_pair(train["source"][i], train["target"][i])
        row = features[i]
        assert tokenizer.decode(row["input_ids"], skip_special_tokens=True) == source
        assert tokenizer.decode(row["labels"], skip_special_tokens=True) == target
        assert originals and set(row["input_ids"]) & sentinel_ids and set(row["labels"]) & sentinel_ids
    # the same rows without protection: the tokenizer holds no sentinel, and the features are the raw pairs
    plain_args = parse_args(["--objective", "translation", "--markup_augmentation", "0.5"])[1]
    plain = make_tokenizer(objective, train, plain_args, vocab_size=400)
    assert not tokenizer_protects(plain)
    row = objective.data.featurize(train.select([augmented[0]]), plain, plain_args)[0]
    assert plain.decode(row["input_ids"], skip_special_tokens=True) == train["source"][augmented[0]]
