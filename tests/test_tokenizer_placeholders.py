"""The trained byte-level BPE tokenizer keeps format placeholders, markup tags and entities whole.

training/data/tokenizer.py makes every `PLACEHOLDER_PATTERN` match (with one optional leading space) a pre-token of its
own, so BPE never merges one with the text around it, a frequent one becomes a single token, and text without
placeholders is tokenised exactly as with GPT-2's byte-level pre-tokenizer. Synthetic UI strings, made here.
"""

import json
import random
import re

import pytest
from text_fixtures import pydoc_paragraphs
from tokenizers import pre_tokenizers
from transformers import AutoTokenizer

from training.data.tokenizer import KINDS, PLACEHOLDER_PATTERN, train_tokenizer

PLACEHOLDER = re.compile(PLACEHOLDER_PATTERN)
VOCAB_SIZE = 600

# Frequent in the synthetic corpus (each one in roughly one string of eight), so BPE learns each as one token.
FREQUENT = ["%s", "%d", "%(name)s", "{0}", "<b>", "</b>", "&amp;"]
# One or a few times each in the corpus.
RARE = [
    "%1$s",
    "%-10.3f",
    "%%",
    "%1",
    "%2",
    "%L1",
    "%.*s",
    "%lu",
    "%@",
    "%(count)d",
    "{name}",
    "{}",
    "{0:>10}",
    "{user.name}",
    "{{count}}",
    "${var}",
    "${HOME}",
    "$PATH",
    '<a href="https://example.org/">',
    "</a>",
    "<br/>",
    "<br />",
    '<span class="x">',
    "</span>",
    "&lt;",
    "&gt;",
    "&#39;",
    "&#x27;",
    "&nbsp;",
    "&quot;",
]
VERBS = ["Delete", "Open", "Save", "Copy", "Move", "Rename", "Close", "Print", "Show", "Hide", "Export", "Import"]
NOUNS = ["file", "folder", "document", "image", "account", "message", "window", "page", "item", "contact", "photo"]
WORDS = ["the", "to", "in", "from", "all", "selected", "new", "recent", "shared", "local", "remote", "now", "and"]
# A placeholder in the middle of a sentence, after "(", between tags, at the start and at the end of the string.
TEMPLATES = [
    "{v} {p} {w} {n}?",
    "{v} the {n} ({p})",
    "{p} {n}s {w} {w}",
    "Could not {v2} {p}: {w} {n} is {w}",
    "{v} <b>{p}</b> {w} {n}",
    "{n}: {p} of {p}",
    "{v} {n} {w} {p}.",
    "{w} {n} {p} {w} {n}",
]


SLOTS = {"v": VERBS, "v2": [verb.lower() for verb in VERBS], "n": NOUNS, "w": WORDS}


def ui_strings(count: int, seed: int, *, placeholders: bool = True) -> list[str]:
    """`count` synthetic UI strings; with `placeholders`, each slot holds a frequent placeholder 85% of the time,
    without, it holds a noun (and there is no markup)."""
    rng = random.Random(seed)

    def fill(slot: re.Match) -> str:
        if slot.group(1) != "p":
            return rng.choice(SLOTS[slot.group(1)])
        if not placeholders:
            return rng.choice(NOUNS)
        return rng.choice(FREQUENT) if rng.random() < 0.85 else rng.choice(RARE)

    strings = []
    for _ in range(count):
        text = re.sub(r"\{(v2|v|n|w|p)\}", fill, rng.choice(TEMPLATES))
        strings.append(text if placeholders else text.replace("<b>", "").replace("</b>", ""))
    return strings


TRAIN = ui_strings(400, seed=0)
GENERATED = ui_strings(60, seed=1)  # held out, with the training distribution of placeholders
HELD_OUT = GENERATED + [
    "Rename %(name)s to %(new_name)s?",
    "Copy (%s) and <b>%d</b> items &amp; more",
    "%1$s of %2$s: %-10.3f%%",
    "Qt says %1 and %L1, path ${HOME}/$PATH, {0} {name} {} {0:>10} {{count}}",
    'See <a href="https://example.org/?a=1&amp;b=2">the site</a><br/>&lt;tag&gt; &#39;x&#39;&nbsp;done',
    "Straße %s → 日本語 {0} 😀<b>emoji</b>😀   three spaces\tand a tab\n%d",
    "(%s)%s{0}{1}<b></b>&amp;&amp;",
]
ROUND_TRIP = HELD_OUT + [
    "",
    " ",
    "   leading and trailing   ",
    "naïve café, Ünïcödé, emoji 👩‍👩‍👧 🇩🇪, CJK 漢字, Arabic ٣٤ and a NBSP\u00a0here",
    "broken: %( %(name %5 {unclosed <b &amp &#; $ ${} 100% of 50%off a < b > c",
    "multi\n\nline\r\nwindows  \t tabs %s\n",
]


@pytest.fixture(scope="module")
def tokenizers():
    return {kind: train_tokenizer(TRAIN, VOCAB_SIZE, kind=kind) for kind in KINDS}


def byte_spans(tokenizer, text: str) -> list[tuple[int, int]]:
    """The byte range of `text.encode()` each token of `text` covers (byte-level BPE: a token is whole bytes)."""
    decoder = {char: byte for byte, char in byte_level_table().items()}
    spans, start = [], 0
    for token in tokenizer.convert_ids_to_tokens(tokenizer(text, add_special_tokens=False)["input_ids"]):
        length = len(bytes(decoder[char] for char in token))
        spans.append((start, start + length))
        start += length
    assert start == len(text.encode())
    return spans


def byte_level_table() -> dict[int, str]:
    """GPT-2's byte → printable character table, which the ByteLevel pre-tokenizer and decoder use."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + extra)
            extra += 1
    return table


def placeholder_byte_spans(text: str) -> list[tuple[int, int]]:
    return [(len(text[: m.start()].encode()), len(text[: m.end()].encode())) for m in PLACEHOLDER.finditer(text)]


def test_the_byte_table_is_the_tokenizers_one():
    assert set(byte_level_table().values()) == set(pre_tokenizers.ByteLevel.alphabet())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Delete %(name)s?", ["Delete", " %(name)s", "?"]),
        ("(%s)", ["(", "%s", ")"]),
        ("Copy %1$s to %-10.3f%%", ["Copy", " %1$s", " to", " %-10.3f", "%%"]),
        ("Qt %1 and %L1", ["Qt", " %1", " and", " %L1"]),
        ("{0} {name} {} {{count}} {0:>10}", ["{0}", " {name}", " {}", " {{count}}", " {0:>10}"]),
        ("${var}/$PATH", ["${var}", "/", "$PATH"]),
        (
            '<b>bold</b> <a href="x y">link</a><br/>',
            ["<b>", "bold", "</b>", ' <a href="x y">', "link", "</a>", "<br/>"],
        ),
        ("&amp;&lt; &#39; &#x27;&nbsp;", ["&amp;", "&lt;", " &#39;", " &#x27;", "&nbsp;"]),
        ("two  %s", ["two", " ", " %s"]),
        # Not placeholders: GPT-2's pre-tokens.
        (
            "50% off, a < b > c, {a: 1}, $5",
            ["50", "%", " off", ",", " a", " <", " b", " >", " c", ",", " {", "a", ":", " 1", "},", " $", "5"],
        ),
    ],
)
def test_each_placeholder_is_one_pre_token(tokenizers, text, expected):
    pre_tokenizer = tokenizers["seq2seq"].backend_tokenizer.pre_tokenizer
    alphabet = byte_level_table()
    pieces = [piece for piece, _ in pre_tokenizer.pre_tokenize_str(text)]
    assert pieces == ["".join(alphabet[b] for b in piece.encode()) for piece in expected]


def test_pre_tokens_match_the_python_pattern_and_gpt2_elsewhere(tokenizers):
    """On random strings: every `PLACEHOLDER_PATTERN` match (Python's `re`) starts (perhaps after its one leading
    space) and ends on a pre-token boundary; the pre-tokens tile the string; and a string without a match has exactly
    GPT-2's pre-tokens."""
    ours, gpt2 = tokenizers["causal"].backend_tokenizer.pre_tokenizer, pre_tokenizers.ByteLevel(add_prefix_space=False)
    rng = random.Random(0)
    alphabet = list("ab %{}$<>&;#()'\"/=:.,!-_019sdL\t\n") + ["é", "😀", "漢", "\u00a0", "\u2003", "٣"]
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25)))
        pieces = ours.pre_tokenize_str(text)
        ends = [end for _, (_, end) in pieces]
        assert [start for _, (start, _) in pieces] == [0, *ends[:-1]][: len(ends)]
        assert (ends[-1] if ends else 0) == len(text)
        starts = {start for _, (start, _) in pieces}
        for match in PLACEHOLDER.finditer(text):
            leading_space = match.start() > 0 and text[match.start() - 1] == " " and match.start() - 1 in starts
            assert match.start() in starts or leading_space, (text, match, pieces)
            assert match.end() in starts | {len(text)}, (text, match, pieces)
        if not PLACEHOLDER.search(text):
            assert pieces == gpt2.pre_tokenize_str(text), text


@pytest.mark.parametrize("kind", KINDS)
def test_no_token_crosses_a_placeholder_boundary(tokenizers, kind):
    tokenizer = tokenizers[kind]
    for text in HELD_OUT:
        spans = byte_spans(tokenizer, text)
        starts, ends = {start for start, _ in spans}, {end for _, end in spans}
        encoded = text.encode()
        for start, end in placeholder_byte_spans(text):
            with_space = start > 0 and encoded[start - 1 : start] == b" " and (start - 1) in starts
            assert start in starts or with_space, (text, encoded[start:end])
            assert end in ends, (text, encoded[start:end])
            # The tokens from that boundary to the placeholder's end are the placeholder (and its space), nothing else.
            first = start - 1 if start not in starts else start
            inside = [span for span in spans if first <= span[0] < end]
            assert encoded[inside[0][0] : inside[-1][1]] in (encoded[start:end], b" " + encoded[start:end])


@pytest.mark.parametrize("kind", KINDS)
def test_frequent_placeholders_are_single_tokens(tokenizers, kind):
    tokenizer = tokenizers[kind]
    seen = set()
    for text in GENERATED:
        spans = byte_spans(tokenizer, text)
        for match, (start, end) in zip(PLACEHOLDER.finditer(text), placeholder_byte_spans(text), strict=True):
            if match.group() in FREQUENT:
                covering = [span for span in spans if span[0] < end and span[1] > start]
                assert len(covering) == 1, (text, match.group(), covering)
                seen.add(match.group())
    assert seen == set(FREQUENT)


@pytest.mark.parametrize("kind", KINDS)
def test_decode_of_encode_is_the_text(tokenizers, kind):
    tokenizer = tokenizers[kind]
    for text in ROUND_TRIP:
        ids = tokenizer(text)["input_ids"]
        assert tokenizer.decode(ids, skip_special_tokens=True) == text
        assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text
        assert tokenizer.unk_token_id not in ids


@pytest.mark.parametrize("kind", KINDS)
def test_offsets_point_at_the_text_of_each_token(tokenizers, kind):
    tokenizer = tokenizers[kind]
    specials = set(tokenizer.all_special_ids)
    for text in HELD_OUT:
        encoding = tokenizer(text, return_offsets_mapping=True)
        for token_id, (start, end) in zip(encoding["input_ids"], encoding["offset_mapping"], strict=True):
            if token_id in specials:
                assert (start, end) == (0, 0)
                continue
            piece = tokenizer.decode([token_id])
            if start == end:  # a token of nothing but white space: trim_offsets leaves it empty
                assert piece.isspace()
            elif piece.isascii():
                # ByteLevel(trim_offsets) keeps the leading space out of the offsets
                assert text[start:end] == piece.lstrip(" ")
        for match in PLACEHOLDER.finditer(text):
            if match.group() in FREQUENT:
                assert (match.start(), match.end()) in encoding["offset_mapping"], (text, match.group())


@pytest.mark.parametrize("kind", KINDS)
def test_autotokenizer_loads_the_same_tokenizer(tokenizers, kind, tmp_path):
    tokenizer = tokenizers[kind]
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    for text in ROUND_TRIP:
        ours = tokenizer(text, return_offsets_mapping=True)
        theirs = loaded(text, return_offsets_mapping=True)
        assert theirs["input_ids"] == ours["input_ids"]
        assert theirs["offset_mapping"] == ours["offset_mapping"]
        assert loaded.decode(theirs["input_ids"], skip_special_tokens=True) == text
    pre_tokenize = loaded.backend_tokenizer.pre_tokenizer.pre_tokenize_str
    assert pre_tokenize("Delete %(name)s?") == tokenizer.backend_tokenizer.pre_tokenizer.pre_tokenize_str(
        "Delete %(name)s?"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_special_tokens_keep_their_ids(tokenizers, kind):
    tokenizer = tokenizers[kind]
    expected = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3} | ({"<mask>": 4} if kind == "masked" else {})
    assert {token: tokenizer.convert_tokens_to_ids(token) for token in expected} == expected
    ids = tokenizer.pad_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id
    assert ids == (0, 1, 2, 3)
    assert len(tokenizer) <= VOCAB_SIZE
    # A special token in the text is still the special token, not a tag.
    assert tokenizer("a </s> b", add_special_tokens=False)["input_ids"].count(2) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_text_without_placeholders_tokenises_as_before(kind):
    """Trained on text without placeholders, the tokenizer is the one GPT-2's plain ByteLevel pre-tokenizer gives."""
    paragraphs = [text for text in pydoc_paragraphs(limit=600) if not PLACEHOLDER.search(text)]
    synthetic = ui_strings(300, seed=2, placeholders=False)
    assert not any(PLACEHOLDER.search(text) for text in synthetic)
    train, held_out = paragraphs[:300] + synthetic[:200], paragraphs[300:] + synthetic[200:]
    ours = train_tokenizer(train, VOCAB_SIZE, kind=kind)
    before = train_tokenizer(train, VOCAB_SIZE, kind=kind, keep_placeholders=False)
    assert ours.get_vocab() == before.get_vocab()
    for text in held_out:
        assert ours(text)["input_ids"] == before(text)["input_ids"], text


def test_keep_placeholders_false_is_gpt2s_plain_pre_tokenizer(tmp_path):
    """What benchmarks/deploy.py checks before it names the pre-tokenizer "gpt-2" for llama.cpp's GGUF converter."""
    tokenizer = train_tokenizer(TRAIN, VOCAB_SIZE, kind="causal", keep_placeholders=False)
    tokenizer.save_pretrained(tmp_path)
    pre = json.loads((tmp_path / "tokenizer.json").read_text())["pre_tokenizer"]
    assert pre["type"] == "ByteLevel" and pre["use_regex"] and not pre["add_prefix_space"]
    pieces = [piece for piece, _ in tokenizer.backend_tokenizer.pre_tokenizer.pre_tokenize_str("Delete %(name)s?")]
    assert pieces == ["Delete", "Ġ%(", "name", ")", "s", "?"]  # GPT-2's regex cuts the placeholder
