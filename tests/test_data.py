"""Tests of the data layer: embedded corpora (training/data/corpora.py), filters, deterministic splits (splits.py),
user files (user_data.py), the objectives' own corpora and features (objectives/), errors, tokenisation.

The corpora are read from this machine (pydoc topics, /usr/share/locale), limited to a few catalogs to stay fast.
"""

import json

import pytest
from datasets import ClassLabel, Dataset
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from training.data.corpora import (
    available_languages,
    filter_pairs,
    is_format_only,
    python_docs_corpus,
    split_paragraphs,
)
from training.data.splits import SPLITS, corpus_checksum, split_dataset
from training.data.user_data import filter_texts, load_user_dataset
from training.objectives.causal_lm import causal_lm_features
from training.objectives.language_id import language_id_corpus
from training.objectives.masked_lm import masked_lm_features
from training.objectives.translation import flatten_translation, translation_corpus, translation_features

FEW = 4  # catalogs read per language: enough for thousands of pairs, fast enough for a unit test
needs_catalogs = pytest.mark.skipif(
    not {"de", "fr", "es"} <= set(available_languages()), reason="needs gettext catalogs for de, fr and es"
)


@pytest.fixture(scope="module")
def tokenizer():
    """A tiny WordLevel tokenizer (<pad>=0, <s>=1, </s>=2, <unk>=3, <mask>=4) that appends </s> to every text."""
    lines = ["the cat sat on the mat", "die Katze sass auf der Matte", "a dog ran in the park today"]
    specials = ["<pad>", "<s>", "</s>", "<unk>", "<mask>"]
    backend = Tokenizer(models.WordLevel(unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.train_from_iterator(lines, trainers.WordLevelTrainer(special_tokens=specials))
    backend.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 2)]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        mask_token="<mask>",
    )


# ------------------------------------------------------------------------------------------------ filters


@pytest.mark.parametrize(
    "text",
    [
        "%s",
        "%d: %s",
        "%1$s (%2$d)",
        "{0} / {1}",
        "<b>%s</b>",
        "%a %b %e %H:%M:%S %Y",
        "...",
        "  ",
        "100%",
        "${HOME}/%s",
    ],
)
def test_format_only_strings_are_detected(text):
    assert is_format_only(text)


@pytest.mark.parametrize("text", ["File", "%s failed", "Open {name}", "Datei öffnen", "Файл"])
def test_strings_with_words_are_kept(text):
    assert not is_format_only(text)


def test_filter_pairs_drops_each_kind_and_counts_it():
    pairs = [
        ("Open file", "Datei öffnen"),
        ("menu\x04Open", "Öffnen"),  # msgctxt prefix is stripped
        ("%d: %s", "%d: %s"),  # format-only
        ("Cancel", "Cancel"),  # untranslated
        ("Two\nlines", "Zwei\nZeilen"),  # multi-line
        ("Open file", "Datei aufmachen"),  # duplicate source: the first translation wins
        ("", "leer"),
        ("x" * 50, "y" * 50),  # too long for max_chars=40
    ]
    kept, counts = filter_pairs(pairs, max_chars=40)
    assert kept == [("Open file", "Datei öffnen"), ("Open", "Öffnen")]
    assert counts == {
        "read": 8,
        "kept": 2,
        "format_only": 1,
        "untranslated": 1,
        "multi_line": 1,
        "duplicate": 1,
        "empty": 1,
        "too_long": 1,
    }


def test_split_paragraphs_unwraps_prose_and_drops_headings_and_code():
    text = "Title\n*****\n\nThis paragraph is long enough to keep,\nand it is wrapped over two lines.\n\n   x = 1\n"
    assert split_paragraphs(text, min_chars=20) == [
        "This paragraph is long enough to keep, and it is wrapped over two lines."
    ]
    assert split_paragraphs(text, min_chars=5, keep_code=True)[-1] == "x = 1"


# ------------------------------------------------------------------------------------------------ corpora


def test_python_docs_corpus_is_english_prose():
    corpus = python_docs_corpus(max_topics=10)
    assert corpus.column_names == ["text"]
    assert len(corpus) > 20
    assert all(len(text) >= 80 for text in corpus["text"])
    assert sum(" the " in text for text in corpus["text"]) > len(corpus) // 2


@needs_catalogs
def test_translation_corpus_has_real_pairs():
    corpus = translation_corpus("de", max_catalogs=FEW, machine=True)
    assert corpus.column_names == ["source", "target"]
    assert len(corpus) > 100
    sources = list(corpus["source"])
    assert len(set(sources)) == len(sources)
    for source, target in zip(sources, corpus["target"], strict=True):
        assert source != target and "\n" not in source + target and "\x04" not in source
        assert not is_format_only(source) and len(source) <= 200


def test_language_id_corpus_has_class_labels():  # the pinned wheels' catalogs: no machine catalog needed
    corpus = language_id_corpus(["de", "fr", "es"], max_catalogs=FEW, max_per_language=50)
    assert corpus.column_names == ["text", "label"]
    assert isinstance(corpus.features["label"], ClassLabel)
    assert corpus.features["label"].names == ["de", "fr", "es"]
    assert sorted(set(corpus["label"])) == [0, 1, 2]
    assert all(list(corpus["label"]).count(label) <= 50 for label in range(3))
    assert all(len(text) >= 10 for text in corpus["text"])


def test_unknown_language_names_the_directory(tmp_path):
    with pytest.raises(ValueError, match=r"No gettext catalogs.*'xx'.*LC_MESSAGES"):
        translation_corpus("xx", locale_dir=tmp_path, machine=True)


def test_empty_translation_corpus_names_filters_and_counts(monkeypatch):
    monkeypatch.setattr("training.objectives.translation.read_pairs", lambda *a, **k: [("%s", "%s"), ("OK", "OK")])
    with pytest.raises(ValueError, match=r"empty after filtering.*format-only.*format_only=1.*untranslated=1"):
        translation_corpus("de", machine=True)


def test_translation_corpus_without_a_source_says_what_to_name():
    """The default corpus is the pinned wheels' catalogs; the machine's are read only when asked for."""
    with pytest.raises(ValueError, match=r"no source: name pinned PyPI wheels .*catalog_packages.*system_catalogs"):
        translation_corpus("de")


def test_corpus_checksum_tells_the_same_data_from_other_data():
    from datasets import Dataset

    def splits(*targets):
        return {"train": Dataset.from_dict({"source": ["a", "b"], "target": list(targets)})}

    same = corpus_checksum(splits("x", "y"), ("source", "target"))
    assert same == corpus_checksum(splits("x", "y"), ("source", "target")) and len(same) == 64
    assert same != corpus_checksum(splits("x", "z"), ("source", "target"))  # one string differs
    assert same != corpus_checksum(splits("xy", ""), ("source", "target"))  # strings are delimited
    assert same != corpus_checksum({"test": splits("x", "y")["train"]}, ("source", "target"))  # split names count


# ------------------------------------------------------------------------------------------------- splits


def test_splits_are_deterministic_disjoint_and_complete():
    texts = [f"sentence number {i}" for i in range(2000)]
    dataset = Dataset.from_dict({"source": texts, "target": [t.upper() for t in texts]})
    first = split_dataset(dataset, key="source", fractions=(0.8, 0.1, 0.1))
    again = split_dataset(dataset.shuffle(seed=1), key="source", fractions=(0.8, 0.1, 0.1))
    parts = {name: set(first[name]["source"]) for name in SPLITS}
    assert all(parts[name] == set(again[name]["source"]) for name in SPLITS)
    assert not (
        parts["train"] & parts["validation"] or parts["train"] & parts["test"] or parts["validation"] & parts["test"]
    )
    assert set().union(*parts.values()) == set(texts)
    assert 1450 < len(parts["train"]) < 1750 and len(parts["validation"]) > 100


def test_split_keeps_duplicate_sources_together_and_drops_zero_fractions():
    dataset = Dataset.from_dict({"text": ["same", "same", "other", "same"]})
    splits = split_dataset(dataset, fractions=(0.5, 0.5, 0.0))
    assert set(splits) == {"train", "validation"}
    assert any(list(split["text"]).count("same") == 3 for split in splits.values())


@pytest.mark.parametrize("fractions", [(0.9, 0.1), (0.5, 0.5, 0.5), (1.2, -0.1, -0.1)])
def test_invalid_fractions_raise(fractions):
    with pytest.raises(ValueError, match="fractions"):
        split_dataset(Dataset.from_dict({"text": ["a"]}), fractions=fractions)


# ---------------------------------------------------------------------------------------------- user data


def test_user_text_json_and_csv_files(tmp_path):
    (tmp_path / "a.txt").write_text("first line\nsecond line\n")
    (tmp_path / "a.jsonl").write_text(
        "\n".join(json.dumps({"en": f"hi {i}", "de": f"hallo {i}", "id": i}) for i in range(3))
    )
    (tmp_path / "a.csv").write_text("text,label\nhello,0\nbonjour,1\n")
    text = load_user_dataset(str(tmp_path / "a.txt"))
    assert list(text["text"]) == ["first line", "second line"]
    pairs = load_user_dataset(str(tmp_path / "a.jsonl"), columns={"en": "source", "de": "target"})
    assert pairs.column_names == ["source", "target"] and pairs[0] == {"source": "hi 0", "target": "hallo 0"}
    table = load_user_dataset([str(tmp_path / "a.csv")], columns=["text"])
    assert table.column_names == ["text"] and list(table["text"]) == ["hello", "bonjour"]


def test_missing_file_names_the_path(tmp_path):
    path = str(tmp_path / "nope.json")
    with pytest.raises(ValueError, match="not found.*nope.json"):
        load_user_dataset(path)


def test_missing_column_names_it_and_the_existing_ones(tmp_path):
    (tmp_path / "a.csv").write_text("text,label\nhello,0\n")
    with pytest.raises(ValueError, match=r"'sentence' not found.*\['text', 'label'\]"):
        load_user_dataset(str(tmp_path / "a.csv"), columns=["sentence"])


def test_unknown_extension_asks_for_a_format(tmp_path):
    (tmp_path / "a.xml").write_text("<a/>")
    with pytest.raises(ValueError, match="data_format"):
        load_user_dataset(str(tmp_path / "a.xml"))


def test_filter_texts_empty_result_names_filters():
    with pytest.raises(ValueError, match=r"empty after filtering \(min_chars=10.*read=2"):
        filter_texts(Dataset.from_dict({"text": ["short", ""]}), min_chars=10)


def test_flatten_translation():
    nested = Dataset.from_dict({"translation": [{"en": "cat", "de": "Katze"}]})
    assert flatten_translation(nested, "en", "de")[0] == {"source": "cat", "target": "Katze"}
    with pytest.raises(ValueError, match="'fr' not in column"):
        flatten_translation(nested, "en", "fr")


# ------------------------------------------------------------------------------------------- tokenisation


def test_causal_lm_features_are_packed_blocks(tokenizer):
    texts = Dataset.from_dict({"text": ["the cat sat on the mat", "a dog ran in the park today"] * 5})
    blocks = causal_lm_features(texts, tokenizer, block_size=8)
    assert blocks.column_names == ["input_ids", "attention_mask", "labels"]
    assert len(blocks) == (5 * (7 + 8)) // 8  # each text plus one </s>, concatenated, tail dropped
    assert all(len(row) == 8 for row in blocks["input_ids"])
    assert list(blocks["labels"]) == list(blocks["input_ids"])
    assert blocks["input_ids"][0][6] == tokenizer.eos_token_id  # the document boundary survives packing


def test_causal_lm_too_little_text_raises(tokenizer):
    with pytest.raises(ValueError, match="block_size=64"):
        causal_lm_features(Dataset.from_dict({"text": ["the cat"]}), tokenizer, block_size=64)


def test_masked_lm_features_truncate_and_collate(tokenizer):
    from transformers import DataCollatorForLanguageModeling

    texts = Dataset.from_dict({"text": ["the cat sat on the mat", "a dog"]})
    features = masked_lm_features(texts, tokenizer, max_length=4)
    assert set(features.column_names) == {"input_ids", "attention_mask", "special_tokens_mask"}
    assert [len(row) for row in features["input_ids"]] == [4, 3]
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.5, seed=0)
    batch = collator([features[i] for i in range(2)])
    assert batch["input_ids"].shape == batch["labels"].shape == (2, 4)


def test_translation_features_have_labels(tokenizer):
    pairs = Dataset.from_dict({"source": ["the cat sat on the mat"], "target": ["die Katze sass auf der Matte"]})
    features = translation_features(pairs, tokenizer, max_source_length=5, max_target_length=3)
    assert set(features.column_names) == {"input_ids", "attention_mask", "labels"}
    assert len(features[0]["input_ids"]) == 5 and len(features[0]["labels"]) == 3
    assert features[0]["labels"][:2] == tokenizer.convert_tokens_to_ids(["die", "Katze"])
    with pytest.raises(ValueError, match="'target' not found"):
        translation_features(pairs.remove_columns("target"), tokenizer, max_source_length=5, max_target_length=3)


@needs_catalogs
def test_corpus_to_features_with_the_project_tokenizer():
    tokenizer_module = pytest.importorskip("training.data.tokenizer")
    splits = split_dataset(translation_corpus("de", max_catalogs=2, machine=True), key="source")
    train = splits["train"].select(range(min(200, len(splits["train"]))))
    tokenizer = tokenizer_module.train_tokenizer(list(train["source"]) + list(train["target"]), 300, kind="seq2seq")
    features = translation_features(train, tokenizer, max_source_length=16, max_target_length=16)
    assert len(features) == len(train) and max(len(r) for r in features["labels"]) <= 16


def test_language_id_sample_spreads_over_all_splits():
    sample = language_id_corpus(("de", "fr"), max_per_language=200, max_catalogs=4)
    sizes = {name: len(part) for name, part in split_dataset(sample, key="text", fractions=(0.8, 0.1, 0.1)).items()}
    assert set(sizes) == {"train", "validation", "test"} and all(sizes.values()), sizes
