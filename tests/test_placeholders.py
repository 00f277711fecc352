"""Placeholder protection (hf_attention/modeling/placeholders.py): each syntax's placeholders become indexed sentinels
and come back unchanged; training pairs give the target the sentinel of the matching source occurrence; every sentinel
an output lost, invented or duplicated is reported; the tokenizer holds the sentinels as single, non-special tokens;
the scores count placeholders per syntax."""

import ast
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hf_attention.modeling.pipelines import pipeline_files
from hf_attention.modeling.placeholders import (
    QA_PLACEHOLDER,
    SENTINEL,
    SENTINEL_COUNT,
    SENTINEL_PATTERN,
    SENTINELS,
    SYNTAXES,
    Problem,
    Restored,
    protect,
    protect_batch,
    protect_pair,
    restore,
    restore_batch,
    stray_sentinels,
    syntax_of,
    tokenizer_protects,
    translate_protected,
)

# (placeholder, its syntax): every form the QA checks keep.
EXAMPLES = [
    ("%s", "printf"),
    ("%d", "printf"),
    ("%1$s", "printf"),
    ("%-5.2f", "printf"),
    ("%(name)s", "printf-named"),
    ("%(value)r", "printf-named"),
    ("%1", "qt"),
    ("{}", "format"),
    ("{0}", "format"),
    ("{name}", "format"),
    ("{0:.2f}", "format"),
    ('<a href="https://example.org/?a=1&b=2">', "tag"),
    ('<span style="font-weight:bold">', "tag"),
    ("</b>", "tag"),
    ("<br/>", "tag"),
    ("<br />", "tag"),
    ('<a href="x>y">', "tag"),  # a quoted attribute value may hold ">" (and "<")
    ("<a title='a<b' href=\"/\">", "tag"),
    ("&amp;", "entity"),
    ("&#39;", "entity"),
]


@pytest.mark.parametrize(("placeholder", "syntax"), EXAMPLES)
def test_each_syntax_is_protected_and_restored(placeholder, syntax):
    assert QA_PLACEHOLDER.fullmatch(placeholder) and syntax_of(placeholder) == syntax
    source = f"Cannot delete {placeholder} now"
    masked, originals = protect(source)
    assert (masked, originals) == ("Cannot delete ⟦ph_0⟧ now", [placeholder])
    assert restore(masked, originals) == Restored(source, [])
    masked_source, masked_target, _ = protect_pair(source, f"{placeholder} kann nicht gelöscht werden")
    assert (masked_source, masked_target) == (masked, "⟦ph_0⟧ kann nicht gelöscht werden")
    # the German output, as a model writes it, comes back with the source's exact text
    assert restore("⟦ph_0⟧ kann jetzt nicht gelöscht werden", originals).text == (
        f"{placeholder} kann jetzt nicht gelöscht werden"
    )


def test_what_is_not_a_placeholder_stays_text():
    source = "50% done, <file> and <none>, a & b, {a b}"
    assert protect(source) == (source, [])
    assert not any(QA_PLACEHOLDER.search(token) for token in SENTINELS)
    assert SYNTAXES == ("printf-named", "printf", "qt", "format", "tag", "entity")
    with pytest.raises(ValueError, match=r"placeholder='<file>' is not a placeholder; allowed are .* printf-named"):
        syntax_of("<file>")
    assert syntax_of("⟦ph_3⟧") == SENTINEL


def test_every_occurrence_takes_the_next_sentinel_in_order():
    source = 'Click <a href="%(url)s">here</a> to open %s &amp; %s'
    assert protect(source) == (
        "Click ⟦ph_0⟧here⟦ph_1⟧ to open ⟦ph_2⟧ ⟦ph_3⟧ ⟦ph_4⟧",
        ['<a href="%(url)s">', "</a>", "%s", "&amp;", "%s"],
    )


def test_the_target_takes_the_sentinel_of_the_matching_source_occurrence():
    # reordered named placeholders keep their own sentinels
    source, target = "Move %(file)s to %(folder)s", "%(folder)s: %(file)s hierher verschieben"
    assert protect_pair(source, target) == (
        "Move ⟦ph_0⟧ to ⟦ph_1⟧",
        "⟦ph_1⟧: ⟦ph_0⟧ hierher verschieben",
        ["%(file)s", "%(folder)s"],
    )
    # the k-th %s of the target is the k-th %s of the source; one the source has not got, and one it has fewer
    # times, stay as text
    source, target = "Copy %s to %s <b>now</b>", "%s nach %s kopieren {0} %s <b>jetzt</b>"
    assert protect_pair(source, target) == (
        "Copy ⟦ph_0⟧ to ⟦ph_1⟧ ⟦ph_2⟧now⟦ph_3⟧",
        "⟦ph_0⟧ nach ⟦ph_1⟧ kopieren {0} %s ⟦ph_2⟧jetzt⟦ph_3⟧",
        ["%s", "%s", "<b>", "</b>"],
    )
    masked_source, masked_target, originals = protect_pair(source, target)
    assert protect(source) == (masked_source, originals)
    assert restore(masked_target, originals) == Restored(target, [])


def test_restore_reports_lost_invented_and_duplicated_sentinels():
    originals = ["%(name)s", "%d", "<b>"]
    assert restore("⟦ph_1⟧ ⟦ph_0⟧ ⟦ph_2⟧", originals) == Restored("%d %(name)s <b>", [])  # reordering is fine
    lost = restore("Kann nicht löschen ⟦ph_1⟧⟦ph_2⟧", originals)
    assert lost == Restored("Kann nicht löschen %d<b>", [Problem("lost", "⟦ph_0⟧", "%(name)s", 0)])
    everything = restore("⟦ph_2⟧ ⟦ph_0⟧ ⟦ph_0⟧ ⟦ph_7⟧ ⟦ph_3⟧ ⟦ph_0⟧", originals)
    assert everything == Restored(
        "<b> %(name)s %(name)s ⟦ph_7⟧ ⟦ph_3⟧ %(name)s",
        [
            Problem("duplicated", "⟦ph_0⟧", "%(name)s", 3),
            Problem("lost", "⟦ph_1⟧", "%d", 0),
            Problem("invented", "⟦ph_3⟧", None, 1),
            Problem("invented", "⟦ph_7⟧", None, 1),
        ],
    )
    assert [p.describe() for p in everything.problems] == [
        "duplicated %(name)s (3 times)",
        "lost %d",
        "invented ⟦ph_3⟧",
        "invented ⟦ph_7⟧",
    ]
    assert restore("Nichts", []) == Restored("Nichts", [])
    assert restore("⟦ph_01⟧ ⟦ph_⟧", []) == Restored("⟦ph_01⟧ ⟦ph_⟧", [])  # not sentinels: text


def test_a_sentinel_string_in_the_source_survives():
    source = "Literal ⟦ph_0⟧ and ⟦ph_12⟧, then %s"
    masked, originals = protect(source)
    assert (masked, originals) == ("Literal ⟦ph_0⟧ and ⟦ph_1⟧, then ⟦ph_2⟧", ["⟦ph_0⟧", "⟦ph_12⟧", "%s"])
    assert restore(masked, originals) == Restored(source, [])
    assert protect_pair(source, "%s und ⟦ph_12⟧")[1] == "⟦ph_2⟧ und ⟦ph_1⟧"


def test_placeholders_beyond_the_sentinels_stay_text_but_sentinel_strings_never_do():
    source = " ".join(f"%(v{i})s" for i in range(SENTINEL_COUNT + 8))
    masked, originals = protect(source)
    assert originals == [f"%(v{i})s" for i in range(SENTINEL_COUNT)]
    assert masked.endswith(
        f"⟦ph_{SENTINEL_COUNT - 1}⟧ %(v{SENTINEL_COUNT})s "
        + " ".join(f"%(v{i})s" for i in range(SENTINEL_COUNT + 1, SENTINEL_COUNT + 8))
    )
    assert restore(masked, originals) == Restored(source, [])
    # a sentinel string after the last free sentinel still gets one: left as text, restore would replace it
    source_with_literal = source + " ⟦ph_0⟧"
    masked, originals = protect(source_with_literal)
    assert len(originals) == SENTINEL_COUNT and originals[-1] == "⟦ph_0⟧"
    assert restore(masked, originals) == Restored(source_with_literal, [])
    with pytest.raises(ValueError, match=r"holds 33 sentinel strings .* at most 32 can be protected"):
        protect(" ".join(SENTINELS) + " ⟦ph_0⟧")


def test_a_placeholder_left_as_text_past_the_sentinels_is_reported_when_lost():
    """Past the 32 sentinels the model copies the placeholders itself: one it mangles is reported, given the source,
    as lost with no sentinel (before, only sentinels were checked, and the mangled one passed silently)."""
    source = " ".join(f"%(v{i})s" for i in range(SENTINEL_COUNT + 2))
    masked, originals = protect(source)
    mangled = masked.replace(f"%(v{SENTINEL_COUNT + 1})s", f"%(w{SENTINEL_COUNT + 1})s")
    restored = restore(mangled, originals, source=source)
    assert restored.problems == [Problem("lost", None, f"%(v{SENTINEL_COUNT + 1})s", 0)]
    assert restored.problems[0].describe() == f"lost %(v{SENTINEL_COUNT + 1})s (left as text)"
    assert restore(masked, originals, source=source) == Restored(source, [])
    assert restore(mangled, originals).problems == []  # without the source, only the sentinels can be checked
    assert translate_protected([source], lambda texts: [mangled])[0].problems == restored.problems
    assert restore_batch([mangled], [originals], [source])[0].problems == restored.problems


def test_a_target_sentinel_string_its_source_lacks_is_refused():
    """A target that writes ⟦ph_3⟧ as text where the source has no such sentinel would teach the model to invent
    sentinels: protect_pair refuses the pair, and `stray_sentinels` names what training drops it for."""
    assert stray_sentinels("Open %s", "⟦ph_3⟧ %s öffnen") == ["⟦ph_3⟧"]
    assert stray_sentinels("Open ⟦ph_3⟧", "⟦ph_3⟧ öffnen") == []  # the source's own: it gets a sentinel
    assert stray_sentinels("Open ⟦ph_3⟧", "⟦ph_3⟧ ⟦ph_3⟧ öffnen") == ["⟦ph_3⟧"]  # once more than the source
    with pytest.raises(ValueError, match=r"target holds the sentinel string\(s\) ⟦ph_3⟧, which its source does not"):
        protect_pair("Open %s", "⟦ph_3⟧ %s öffnen")


def test_arguments_are_checked():
    with pytest.raises(TypeError, match="source must be a str; got int"):
        protect(3)
    with pytest.raises(TypeError, match="output must be a str; got NoneType"):
        restore(None, [])
    # a string as originals would be read character by character (⟦ph_0⟧ restored as "%")
    with pytest.raises(TypeError, match=r"originals must be a list of placeholder strings, .* got str \('%s'\)"):
        restore("⟦ph_0⟧ öffnen", "%s")
    with pytest.raises(TypeError, match=r"originals must be a list .* got NoneType \(None\)"):
        restore("⟦ph_0⟧ öffnen", None)
    with pytest.raises(TypeError, match=r"originals\[1\] must be a str .* got int \(5\)"):
        restore("⟦ph_0⟧ öffnen", ["%s", 5])
    with pytest.raises(ValueError, match="2 outputs for 1 protected sources"):
        restore_batch(["a", "b"], [[]])


def test_translate_protected_masks_calls_once_and_restores_in_order():
    calls = []

    def engine(masked: list[str]) -> list[str]:
        calls.append(masked)
        # a translation that moves the first sentinel to the end, and one that drops it
        return ["⟦ph_1⟧ dann ⟦ph_0⟧", "ohne Platzhalter"]

    results = translate_protected(["Open %(a)s with {b}", "Delete %s"], engine)
    assert calls == [["Open ⟦ph_0⟧ with ⟦ph_1⟧", "Delete ⟦ph_0⟧"]]
    assert results == [
        Restored("{b} dann %(a)s", []),
        Restored("ohne Platzhalter", [Problem("lost", "⟦ph_0⟧", "%s", 0)]),
    ]
    assert protect_batch(["a %s", "b"]) == (["a ⟦ph_0⟧", "b"], [["%s"], []])
    with pytest.raises(ValueError, match="translate_fn returned 1 outputs for 2 texts"):
        translate_protected(["a", "b"], lambda masked: ["x"])


# Text around the placeholders: words, punctuation, the characters placeholders are made of, and broken sentinels.
_TEXT = st.text(alphabet=st.sampled_from(list("ab Z.:%{}<>&;#$/=\"'|-_09ph⟦⟧")), max_size=6)
_PIECES = st.one_of(
    _TEXT,
    st.sampled_from([p for p, _ in EXAMPLES] + ["%%", "50%", "⟦ph_", "⟦ph_40⟧", SENTINELS[0], SENTINELS[31]]),
    st.just(" %s" * 9),  # so that some sources hold more placeholders than there are sentinels
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PIECES, max_size=45), st.lists(_PIECES, max_size=12))
def test_protect_then_restore_is_the_identity(source_pieces, target_pieces):
    source, target = "".join(source_pieces), "".join(target_pieces)
    masked, originals = protect(source)
    assert restore(masked, originals) == Restored(source, [])
    assert restore(masked, originals, source=source) == Restored(source, [])  # the text ones are all there
    sentinels = [match.group() for match in SENTINEL_PATTERN.finditer(masked)]
    assert sentinels == list(SENTINELS[: len(originals)])  # each once, in order
    if stray_sentinels(source, target):  # a sentinel string that only the target has: the pair is refused
        with pytest.raises(ValueError, match="which its source does not: a model trained on the pair learns"):
            protect_pair(source, target)
        return
    masked_source, masked_target, pair_originals = protect_pair(source, target)
    assert (masked_source, pair_originals) == (masked, originals)
    if not SENTINEL_PATTERN.search(target):
        assert restore(masked_target, originals).text == target


# ---------------------------------------------------------------------------------------------- the tokenizer


def test_the_tokenizer_holds_each_sentinel_as_one_id_that_decoding_keeps(tmp_path):
    from transformers import AutoTokenizer

    from training.data.tokenizer import train_tokenizer

    pairs = [protect_pair(f"Delete %s from {word}?", f"%s aus {word} löschen?") for word in ("a", "bc", "def")] * 40
    texts = [text for source, target, _ in pairs for text in (source, target)] + ["Open the file"] * 20
    tokenizer = train_tokenizer(texts, 300, kind="seq2seq", placeholder_sentinels=True, min_frequency=1)
    assert len(tokenizer) == 300 and tokenizer_protects(tokenizer)  # BPE filled its share, the sentinels the rest
    ids = tokenizer.convert_tokens_to_ids(list(SENTINELS))
    assert ids == list(range(300 - SENTINEL_COUNT, 300))
    assert not set(ids) & set(tokenizer.all_special_ids)
    text = "Kann ⟦ph_0⟧ nicht löschen: ⟦ph_31⟧⟦ph_1⟧."
    encoded = tokenizer(text)["input_ids"]
    assert all(encoded.count(i) == 1 for i in tokenizer.convert_tokens_to_ids(["⟦ph_0⟧", "⟦ph_31⟧", "⟦ph_1⟧"]))
    assert tokenizer.decode(encoded, skip_special_tokens=True) == text
    tokenizer.save_pretrained(tmp_path)
    reloaded = AutoTokenizer.from_pretrained(tmp_path)
    assert tokenizer_protects(reloaded) and reloaded(text)["input_ids"] == encoded
    # without protection: no sentinel, and "⟦ph_0⟧" is text like any other
    plain = train_tokenizer(texts, 300, kind="seq2seq", min_frequency=1)
    assert not tokenizer_protects(plain) and len(plain(SENTINELS[0])["input_ids"]) > 2


def test_sentinels_are_for_the_seq2seq_tokenizer_and_fit_in_the_vocabulary():
    from training.data.tokenizer import check_vocab_size, train_tokenizer

    with pytest.raises(ValueError, match=r"placeholder_sentinels=True is not supported for kind='causal'.*'seq2seq'"):
        train_tokenizer(["a b"], 400, kind="causal", placeholder_sentinels=True)
    check_vocab_size(260, "seq2seq")
    with pytest.raises(
        ValueError, match=r"vocab_size=260 is too small: .* and 32 placeholder sentinels, so at least 292"
    ):
        check_vocab_size(260, "seq2seq", placeholder_sentinels=True)


# ------------------------------------------------------------------------------------------ shipped code, scores


def test_the_module_ships_with_the_pipeline_and_imports_only_the_standard_library():
    import hf_attention

    assert {"pipelines.py", "placeholders.py"} <= set(pipeline_files())
    package = Path(hf_attention.__file__).parent / "modeling"
    tree = ast.parse((package / "placeholders.py").read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert all(name.split(".")[0] in sys.stdlib_module_names | {"__future__"} for name in imported), imported


def test_scores_count_placeholders_per_syntax_and_sentinel_problems():
    from training.finish import metrics

    assert metrics.QA_PLACEHOLDER is QA_PLACEHOLDER  # one definition
    sources = ["Cannot delete %(name)s: %s", "<b>Open</b> {0} &amp; %1", "No placeholder"]
    outputs = ["Kann nicht löschen: %s", "<b>Öffnen {0} &amp; %1", "Kein"]
    assert metrics.placeholder_counts(sources, outputs) == {
        "printf-named": {"kept": 0, "total": 1},
        "printf": {"kept": 1, "total": 1},
        "qt": {"kept": 1, "total": 1},
        "format": {"kept": 1, "total": 1},
        "tag": {"kept": 1, "total": 2},
        "entity": {"kept": 1, "total": 1},
    }
    problems = [[Problem("lost", "⟦ph_0⟧", "%(name)s", 0)], [Problem("lost", "⟦ph_1⟧", "</b>", 0)], []]
    scores = metrics.translation_scores(sources, outputs, outputs, problems)
    assert scores["placeholders"] == 71.43 and scores["placeholders_by_syntax"]["tag"] == {"kept": 1, "total": 2}
    assert (scores["sentinels_lost"], scores["sentinels_invented"], scores["sentinels_duplicated"]) == (2, 0, 0)
    assert "sentinels_lost" not in metrics.translation_scores(sources, outputs, outputs)


def test_the_card_shows_the_placeholders_per_syntax_in_and_out_of_domain():
    from training.finish.export import card_metadata, placeholder_table
    from training.objectives import objective_for

    results = {
        "bleu": 10.0,
        "placeholders": 50.0,
        "placeholders_by_syntax": {"printf": {"kept": 3, "total": 4}},
        "sentinels_lost": 1,
        "sentinels_invented": 0,
        "sentinels_duplicated": 2,
        "ood_placeholders_by_syntax": {"printf": {"kept": 1, "total": 1}, "tag": {"kept": 5, "total": 9}},
        "ood_sentinels_lost": 4,
        "ood_sentinels_invented": 1,
        "ood_sentinels_duplicated": 0,
    }
    table = placeholder_table(results)
    assert "| syntax | test | out of domain |" in table
    assert "| printf | 3/4 | 1/1 |" in table and "| tag | – | 5/9 |" in table
    assert "lost / invented / duplicated: test 1 / 0 / 2, out of domain 4 / 1 / 0." in table
    assert placeholder_table({"bleu": 1.0}) == ""
    report = SimpleNamespace(results=results, datasets=["d"], language=["en", "de"], license="mit", model_name="m")
    metrics = card_metadata(objective_for("translation"), report)["model-index"][0]["results"]
    names = {m["name"] for split in metrics for m in split["metrics"]}
    assert "test sentinels_lost" in names and not any("by_syntax" in name for name in names)
