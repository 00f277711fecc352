"""The attention explorer: one self-contained HTML page per text whose numbers are the model's `output_attentions`,
checked in Python and in a real headless browser (Debian's Chromium driven by Playwright, network blocked), plus its
command line and its errors.

The browser tests fail (they never skip) when Playwright or Chromium is missing: `pip install -e ".[dev]"` installs
Playwright, `.ci/install-browser` installs Chromium (Playwright's own browser download is never used).
"""

import json
import os
import re
import tempfile
from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from test_cli_errors import assert_error, run

from hf_attention import HFAttentionForCausalLM, HFAttentionForMaskedLM, HFAttentionForSeq2SeqLM
from hf_attention.commands.cli import main
from hf_attention.inspection.explorer import MAX_PAGE_WEIGHTS, explore
from hf_attention.inspection.heatmaps import SINK_LABEL, HeatmapTooLarge, load_model_and_tokenizer, plot_attention

TEXT = "Return the value of the named attribute"
TARGET = "Gibt den Wert zurück"
FAMILIES = {"encoder": HFAttentionForMaskedLM, "decoder": HFAttentionForCausalLM, "seq2seq": HFAttentionForSeq2SeqLM}
# A wider initialisation than the default 0.02, so that the weights are far from uniform and a wrong cell shows.
PEAKED = {"initializer_range": 0.5}
CHROMIUM = os.environ.get("HF_ATTENTION_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def checkpoint(saved_checkpoint, family: str, **overrides) -> Path:
    return saved_checkpoint(FAMILIES[family], family, **{**PEAKED, **overrides})


def embedded_data(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="attention-data">(.*?)</script>', page, re.S)
    assert match, "no embedded attention data"
    return json.loads(match.group(1))


def reference_attentions(model, tokenizer, family: str, target: str | None = TARGET) -> dict[str, torch.Tensor]:
    """kind → (layers, heads, queries, keys) from the model's own `output_attentions`, computed here."""
    encoded = tokenizer(TEXT, return_tensors="pt")
    extra = {}
    if family == "seq2seq":
        labels = tokenizer(text_target=target, return_tensors="pt")["input_ids"]
        extra["decoder_input_ids"] = torch.cat(
            [torch.tensor([[model.config.decoder_start_token_id]]), labels[:, :-1]], dim=1
        )
    with torch.no_grad():
        outputs = model(**encoded, **extra, output_attentions=True)
    if family != "seq2seq":
        return {"self": torch.stack(outputs.attentions)[:, 0]}
    return {
        "self": torch.stack(outputs.encoder_attentions)[:, 0],
        "decoder": torch.stack(outputs.decoder_attentions)[:, 0],
        "cross": torch.stack(outputs.cross_attentions)[:, 0],
    }


# --------------------------------------------------------------------------------------------- the page's numbers


@pytest.mark.parametrize("family", FAMILIES)
def test_page_embeds_the_models_attentions(saved_checkpoint, tmp_path, family):
    model, tokenizer = load_model_and_tokenizer(checkpoint(saved_checkpoint, family))
    target = TARGET if family == "seq2seq" else None
    page = explore(model, tokenizer, TEXT, target=target, path=tmp_path / "page")
    assert page.path == tmp_path / "page.html" and page.path.read_text(encoding="utf-8") == page.html
    expected = reference_attentions(model, tokenizer, family)
    data = embedded_data(page.html)
    assert sorted(data["kinds"]) == sorted(expected)
    for kind, weights in expected.items():
        embedded = torch.tensor(data["kinds"][kind]["weights"], dtype=torch.float64)
        torch.testing.assert_close(embedded, weights.double(), atol=1e-6, rtol=0)
        torch.testing.assert_close(torch.from_numpy(page.weights[kind]), weights)
        assert len(data["kinds"][kind]["queries"]) == weights.shape[2]
        assert len(data["kinds"][kind]["keys"]) == weights.shape[3]
    assert data["initial"] == {
        "kind": "cross" if family == "seq2seq" else "self",
        "layer": expected[page.kind].shape[0] - 1,
        "head": "mean",
    }


def test_generated_target_rows_and_what_they_write(saved_checkpoint):
    model, tokenizer = load_model_and_tokenizer(checkpoint(saved_checkpoint, "seq2seq"))
    page = explore(model, tokenizer, TEXT, max_new_tokens=6)
    generated = model.generate(**tokenizer(TEXT, return_tensors="pt"), max_new_tokens=6, do_sample=False)
    cross = embedded_data(page.html)["kinds"]["cross"]
    assert len(cross["queries"]) == len(cross["writes"]) == generated.shape[1] - 1  # start + all but the last
    assert page.weights["cross"].shape[2:] == (generated.shape[1] - 1, len(tokenizer(TEXT)["input_ids"]))


def test_page_needs_no_network_and_escapes_its_text(saved_checkpoint):
    model, tokenizer = load_model_and_tokenizer(checkpoint(saved_checkpoint, "decoder"))
    text = "</script><script>alert(1)</script> https://example.com"
    page = explore(model, tokenizer, text, title="<b>model</b>").html
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing loaded from anywhere
    assert page.count("</script>") == 2 and "<b>model</b>" not in page  # the text cannot close the data element
    assert embedded_data(page)["text"] == text


def test_page_size_is_capped_before_the_forward_pass(saved_checkpoint, monkeypatch):
    import hf_attention.inspection.attention_maps as attention_maps
    import hf_attention.inspection.explorer as explorer

    model, tokenizer = load_model_and_tokenizer(checkpoint(saved_checkpoint, "encoder"))
    calls = []
    monkeypatch.setattr(explorer, "MAX_PAGE_WEIGHTS", 100)
    monkeypatch.setattr(attention_maps, "forward_with_attentions", lambda *a: calls.append(a))
    with pytest.raises(ValueError, match="more than 100"):
        explore(model, tokenizer, TEXT)
    assert not calls and MAX_PAGE_WEIGHTS >= 1_000_000


# ------------------------------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("family", "options", "message"),
    [
        ("decoder", {"layer": 2}, "layer=2 is out of range: the model has 2"),
        ("decoder", {"head": 4}, "head=4 is out of range: the model has 4 heads"),
        ("decoder", {"head": "max"}, "head='max' is not supported"),
        ("decoder", {"target": "Hallo"}, "not an encoder-decoder model"),
        ("encoder", {"kind": "cross"}, "kind='cross' needs an encoder-decoder model"),
        ("seq2seq", {"kind": "keys"}, "kind='keys' is not supported"),
        ("seq2seq", {"target": "  "}, "target text is empty"),
        ("decoder", {"max_tokens": 3}, "more than max_tokens=3"),
        ("decoder", {"max_tokens": 500}, "max_tokens=500 is out of range"),
        ("seq2seq", {"max_tokens": 5, "max_new_tokens": 9, "target": None}, "max_new_tokens=9 could generate"),
    ],
)
def test_bad_options_are_clear_errors(saved_checkpoint, family, options, message):
    model, tokenizer = load_model_and_tokenizer(checkpoint(saved_checkpoint, family))
    with pytest.raises(ValueError, match=re.escape(message)):
        explore(model, tokenizer, TEXT, **options)


def test_text_longer_than_the_learned_positions(saved_checkpoint, tmp_path):
    folder = checkpoint(saved_checkpoint, "decoder", position_encoding="learned", max_position_embeddings=4)
    model, tokenizer = load_model_and_tokenizer(folder)
    with pytest.raises(ValueError, match="more than the model's 4 positions"):
        explore(model, tokenizer, TEXT)
    page = explore(model, tokenizer, TEXT, truncate=True)  # the first 4 tokens
    assert page.weights["self"].shape[2:] == (4, 4)


def test_truncate_keeps_the_first_tokens(saved_checkpoint):
    model, tokenizer = load_model_and_tokenizer(checkpoint(saved_checkpoint, "encoder"))
    page = explore(model, tokenizer, TEXT, max_tokens=3, truncate=True)
    assert page.weights["self"].shape[2:] == (3, 3)
    with pytest.raises(HeatmapTooLarge):
        explore(model, tokenizer, TEXT, max_tokens=3)


@pytest.mark.parametrize(
    ("family", "extra", "words"),
    [
        ("decoder", ["--target", "Hallo Welt"], ["--target", "not an encoder-decoder model"]),
        ("decoder", ["--layer", "5"], ["layer=5 is out of range", "2 self-attention layers"]),
        ("seq2seq", ["--head", "9"], ["head=9 is out of range", "4 heads"]),
        ("decoder", ["--max-tokens", "4"], ["--text is", "--max-tokens", "--truncate"]),
        ("decoder", ["--out", "page.png"], ["--out", "HTML"]),
        ("encoder", ["--kind", "decoder"], ["kind='decoder' needs an encoder-decoder model"]),
        ("decoder", ["--text", " "], ["--text is empty"]),
        ("decoder", ["--text", "caf\udce9"], ["--text is not valid UTF-8", "byte 0xe9"]),  # bytes that are not UTF-8
        ("seq2seq", ["--target", "\udcff"], ["--target is not valid UTF-8", "byte 0xff at byte 0"]),
    ],
)
def test_command_line_errors(saved_checkpoint, tmp_path, capsys, monkeypatch, family, extra, words):
    monkeypatch.chdir(tmp_path)
    folder = checkpoint(saved_checkpoint, family)
    argv = ["explore", "--model", str(folder), "--text", TEXT, "--out", str(tmp_path / "a.html")]
    code, _, err = run(capsys, argv + extra)
    assert_error(code, err, ["hf-attention explore: error:", *words])
    assert not (tmp_path / "a.html").exists()


def test_command_line_error_for_a_missing_folder(tmp_path, capsys):
    code, _, err = run(capsys, ["explore", "--model", str(tmp_path / "nope"), "--text", TEXT])
    assert_error(code, err, ["--model", "no such folder"])


def test_command_line_writes_the_page(saved_checkpoint, tmp_path, capsys):
    folder = checkpoint(saved_checkpoint, "seq2seq")
    code, out, err = run(
        capsys,
        [
            "explore",
            "--model",
            str(folder),
            "--text",
            TEXT,
            "--target",
            TARGET,
            "--kind",
            "decoder",
            "--layer",
            "0",
            "--head",
            "1",
            "--out",
            str(tmp_path),
        ],
    )
    assert code == 0, err
    page = (tmp_path / "attention.html").read_text(encoding="utf-8")
    assert f"wrote {tmp_path / 'attention.html'}" in out
    assert embedded_data(page)["initial"] == {"kind": "decoder", "layer": 0, "head": 1}


# ------------------------------------------------------------------------------------------------ in a browser


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (Debian's) with a fresh profile. Missing Playwright or Chromium fails the tests."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright is not installed: pip install -e '.[dev]' (never `playwright install`).")
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"No Chromium at {CHROMIUM}: run .ci/install-browser (apt-get install chromium).")
    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as profile:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1400, "height": 1000},
        )
        yield context
        context.close()


class OpenPage:
    """The page at `path` in a new tab, with every request recorded and any non-file request aborted."""

    def __init__(self, context, path: Path):
        self.requests, self.blocked, self.errors = [], [], []
        self.tab = context.new_page()

        def route(route):
            if route.request.url.startswith("file://"):
                route.continue_()
            else:
                self.blocked.append(route.request.url)
                route.abort()

        self.tab.route("**/*", route)
        self.tab.on("request", lambda request: self.requests.append(request.url))
        self.tab.on("pageerror", lambda error: self.errors.append(str(error)))
        self.tab.on("console", lambda message: message.type == "error" and self.errors.append(message.text))
        self.tab.goto(path.resolve().as_uri())
        self.tab.wait_for_selector("body[data-ready=true]")

    def choose(self, kind: str, layer: int, head: int | str) -> None:
        """Pick the view through the page's own controls."""
        self.tab.select_option("#kind", kind)
        self.tab.select_option("#layer", str(layer))
        self.tab.select_option("#head", str(head))

    def cell(self, query: int, key: int) -> float:
        return float(self.tab.get_attribute(f'#view .cell[data-q="{query}"][data-k="{key}"]', "data-w"))

    def view(self) -> dict:
        return self.tab.eval_on_selector("#view", "v => ({...v.dataset})")

    def close(self) -> None:
        assert not self.blocked, f"the page tried the network: {self.blocked}"
        assert all(url.startswith("file://") for url in self.requests), self.requests
        assert not self.errors, self.errors
        self.tab.close()


@pytest.mark.parametrize("family", FAMILIES)
def test_browser_shows_the_models_weights(browser, saved_checkpoint, tmp_path, capsys, family):
    folder = checkpoint(saved_checkpoint, family)
    extra = ["--target", TARGET] if family == "seq2seq" else []
    assert (
        main(
            [
                "explore",
                "--model",
                str(folder),
                "--text",
                TEXT,
                "--layer",
                "0",
                "--head",
                "1",
                "--out",
                str(tmp_path / "page.html"),
                *extra,
            ]
        )
        == 0
    )
    model, tokenizer = load_model_and_tokenizer(folder)
    expected = reference_attentions(model, tokenizer, family)
    page = OpenPage(browser, tmp_path / "page.html")
    try:
        # The view the page opens on: --layer 0 --head 1.
        assert page.view()["layer"] == "0" and page.view()["head"] == "1"
        assert page.tab.input_value("#layer") == "0" and page.tab.input_value("#head") == "1"
        for kind, weights in expected.items():
            layers, heads, queries, keys = weights.shape
            for layer, head in ((layers - 1, heads - 1), (0, 2)):
                page.choose(kind, layer, head)
                assert page.view() == {"kind": kind, "layer": str(layer), "head": str(head)}
                assert page.tab.locator("#view .cell").count() == queries * keys
                shown = weights[layer, head]
                assert (shown.max() - shown.min()) > 0.05  # far from uniform: a wrong cell would show
                for query, key in ((queries - 1, 0), (queries // 2, keys - 1), (queries - 1, keys // 2), (1, 0)):
                    assert abs(page.cell(query, key) - shown[query, key].item()) < 1e-3, (kind, layer, head)
            page.choose(kind, 0, "mean")
            mean = weights[0].mean(0)
            assert abs(page.cell(queries - 1, keys - 1) - mean[-1, -1].item()) < 1e-3
            assert abs(page.cell(queries // 2, 0) - mean[queries // 2, 0].item()) < 1e-3
        if family == "decoder":  # causal: the first query sees only itself
            page.choose("self", 0, 0)
            assert page.cell(0, 1) == 0.0 and abs(page.cell(0, 0) - 1.0) < 1e-6
    finally:
        page.close()


def test_browser_grid_and_hover(browser, saved_checkpoint, tmp_path):
    model, tokenizer = load_model_and_tokenizer(checkpoint(saved_checkpoint, "seq2seq"))
    explore(model, tokenizer, TEXT, target=TARGET, path=tmp_path / "page.html")
    weights = reference_attentions(model, tokenizer, "seq2seq")
    page = OpenPage(browser, tmp_path / "page.html")
    try:
        tab = page.tab
        layers, heads, queries, keys = weights["cross"].shape
        # A thumbnail per layer × head plus the mean, for the kind shown; clicking one opens it.
        assert tab.locator("#grid canvas").count() == layers * (heads + 1)
        tab.click('#grid canvas[data-layer="0"][data-head="3"]')
        assert page.view() == {"kind": "cross", "layer": "0", "head": "3"}
        assert tab.input_value("#layer") == "0" and tab.input_value("#head") == "3"
        assert abs(page.cell(2, 1) - weights["cross"][0, 3, 2, 1].item()) < 1e-3
        assert tab.locator("#grid canvas.selected").count() == 1
        # Hovering a query token highlights its row; a key token its column; a cell both, with its weight.
        tab.hover('#view .qtok[data-q="2"]')
        rows = tab.eval_on_selector_all("#view .cell.hl-row", "cells => cells.map(c => c.dataset.q)")
        assert rows == ["2"] * keys
        assert tab.eval_on_selector('#view .qtok[data-q="2"]', "e => e.classList.contains('tok-hl')")
        tab.hover('#view .ktok[data-k="1"]')
        columns = tab.eval_on_selector_all("#view .cell.hl-col", "cells => cells.map(c => c.dataset.k)")
        assert columns == ["1"] * queries and not tab.locator("#view .cell.hl-row").count()
        tab.hover('#view .cell[data-q="3"][data-k="0"]')
        assert tab.locator("#view .cell.hl-row").count() == keys
        assert tab.locator("#view .cell.hl-col").count() == queries
        assert f"{weights['cross'][0, 3, 3, 0].item():.4f}" in tab.inner_text("#readout")
        # Another kind through the control: the grid follows.
        tab.select_option("#kind", "self")
        encoder_layers, encoder_heads = weights["self"].shape[:2]
        assert tab.locator("#grid canvas").count() == encoder_layers * (encoder_heads + 1)
    finally:
        page.close()


def test_ids_the_tokenizer_does_not_know_are_labelled_and_named_on_the_page(trained_tokenizer):
    """A model whose vocabulary is larger than its tokenizer's (as T5's 32128 ids for 32100 tokens) can generate ids
    without a token: they are labelled "<id N>" and the page says which they are."""
    tokenizer = trained_tokenizer("seq2seq")
    unknown = len(tokenizer) + 2
    model = HFAttentionForSeq2SeqLM(
        tiny_config("seq2seq", vocab_size=len(tokenizer) + 5, lm_head_bias=True, tie_word_embeddings=False)
    ).eval()
    with torch.no_grad():
        model.lm_head.bias[unknown] = 100.0  # every step writes the unknown id
    page = explore(model, tokenizer, TEXT, max_new_tokens=3)
    data = embedded_data(page.html)
    assert data["unknown_ids"] == [unknown]
    assert page.query_tokens["cross"][1:] == [f"<id {unknown}>"] * 2  # rows: start token, then what was written
    assert data["target"] == " ".join([f"<id {unknown}>"] * 3)
    assert "Token ids the tokenizer does not know" in page.html


def test_attention_that_is_not_finite_is_refused_not_written(saved_checkpoint, tmp_path, capsys):
    folder = checkpoint(saved_checkpoint, "decoder")
    model, tokenizer = load_model_and_tokenizer(folder)
    with torch.no_grad():
        model.model.decoder.layers[0].self_attn.q_proj.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match="attention weights are not finite numbers"):
        explore(model, tokenizer, TEXT, path=tmp_path / "page.html")
    with pytest.raises(ValueError, match="attention weights are not finite numbers"):
        plot_attention(model, tokenizer, TEXT, path=tmp_path / "map.png")
    model.save_pretrained(tmp_path / "nan")
    tokenizer.save_pretrained(tmp_path / "nan")
    code, _, err = run(capsys, ["explore", "--model", str(tmp_path / "nan"), "--text", TEXT, "--out", str(tmp_path)])
    assert_error(code, err, ["hf-attention explore: error:", "not finite numbers"])
    assert not list(tmp_path.glob("*.html")) and not list(tmp_path.glob("*.png"))


def test_a_title_or_text_holding_the_templates_markers_is_written_as_it_is(saved_checkpoint):
    """The page template is filled in one pass: a title containing `__DATA__` (or a text containing `__TITLE__`) is
    shown as written, and the data element still holds the data."""
    model, tokenizer = load_model_and_tokenizer(checkpoint(saved_checkpoint, "decoder"))
    page = explore(model, tokenizer, "a __TITLE__ b", title="x __DATA__ y").html
    assert "<title>Attention explorer: x __DATA__ y</title>" in page
    assert embedded_data(page)["text"] == "a __TITLE__ b"


@pytest.fixture(scope="module")
def protecting_model():
    """A tiny random translation model whose tokenizer holds the placeholder sentinels (a model trained with
    placeholder protection reads its source with them), with a tokenizer of the same kind that holds none."""
    from hf_attention.modeling.placeholders import protect_pair
    from training.data.tokenizer import train_tokenizer

    pairs = [
        protect_pair(f"Delete %(name)s in the {w} <b>%s</b>", f"%(name)s im {w} löschen") for w in ("file", "page")
    ]
    texts = [text for source, target, _ in pairs for text in (source, target)] * 10
    tokenizer = train_tokenizer(texts, 320, kind="seq2seq", placeholder_sentinels=True, min_frequency=1)
    plain = train_tokenizer(texts, 320, kind="seq2seq", min_frequency=1)
    torch.manual_seed(0)
    model = HFAttentionForSeq2SeqLM(tiny_config("seq2seq", vocab_size=len(tokenizer), max_position_embeddings=64))
    return model.eval(), tokenizer, plain


def header_lines(page: OpenPage) -> list[tuple[str, str]]:
    """(id, text) of each line of the page's header that is shown, top to bottom."""
    shown = "lines => lines.filter(p => !p.hidden && p.offsetParent !== null).map(p => [p.id, p.innerText])"
    return [tuple(line) for line in page.tab.eval_on_selector_all("header p.meta", shown)]


def test_browser_shows_the_placeholder_line_under_the_protected_text(browser, protecting_model, tmp_path):
    """docs/generation.md: a protected model's page shows the text as the model reads it (sentinels in place of the
    placeholders) and adds a line with what each sentinel stands for, `⟦ph_0⟧ = %(name)s, …`; the placeholders are
    shown as text (`<b>` is not markup there)."""
    from hf_attention.modeling.placeholders import SENTINELS, protect, protect_pair

    model, tokenizer, _ = protecting_model
    text, target = "Delete %(name)s in the <b>file</b>", "%(name)s in der <b>Datei</b> löschen"
    masked, originals = protect(text)
    assert originals == ["%(name)s", "<b>", "</b>"]
    explore(model, tokenizer, text, target=target, path=tmp_path / "page.html")
    page = OpenPage(browser, tmp_path / "page.html")
    try:
        mapping = ", ".join(f"{SENTINELS[i]} = {original}" for i, original in enumerate(originals))
        assert header_lines(page) == [
            ("meta-text", f"Text (protected, as the model reads it): {masked}"),
            ("meta-placeholders", f"Placeholders: {mapping}."),
            ("meta-target", f"Target: {protect_pair(text, target)[1]}"),
        ]
        assert page.tab.eval_on_selector("#meta-placeholders", "p => p.children.length") == 0  # text, not markup
        assert page.tab.locator("header b").count() == 0
    finally:
        page.close()


@pytest.mark.parametrize("case", ["protecting tokenizer, no placeholder in the text", "tokenizer without sentinels"])
def test_browser_shows_no_placeholder_line_when_nothing_was_protected(browser, protecting_model, tmp_path, case):
    model, protecting, plain = protecting_model
    tokenizer, text = (protecting, "Delete the file") if case.startswith("protecting") else (plain, "Delete %s")
    explore(model, tokenizer, text, target="Datei löschen", path=tmp_path / "page.html")
    page = OpenPage(browser, tmp_path / "page.html")
    try:
        assert header_lines(page) == [("meta-text", f"Text: {text}"), ("meta-target", "Target: Datei löschen")]
        assert page.tab.locator("#meta-placeholders").is_hidden()
    finally:
        page.close()


def test_browser_draws_the_weight_given_to_the_sink_as_a_last_column(browser, trained_tokenizer, tmp_path):
    from test_attention_sinks import GPT_OSS_LIKE, sinked

    tokenizer = trained_tokenizer("decoder")
    model = sinked(HFAttentionForCausalLM(tiny_config("decoder", vocab_size=len(tokenizer), **GPT_OSS_LIKE)))
    returned = explore(model, tokenizer, TEXT, layer=1, head=2, path=tmp_path / "page.html")
    sinks, weights = returned.sink_weights["self"], returned.weights["self"]  # (L, H, Q), (L, H, Q, K)
    layers, heads, queries, keys = weights.shape
    page = OpenPage(browser, tmp_path / "page.html")
    try:
        tab = page.tab
        for layer, head in ((1, 2), (0, 0)):
            page.choose("self", layer, head)
            drawn = tab.eval_on_selector_all(
                '#view .cell[data-sink="true"]', "cells => cells.map(c => [Number(c.dataset.q), Number(c.dataset.w)])"
            )
            assert [q for q, _ in drawn] == list(range(queries))
            assert max(abs(w - sinks[layer, head, q]) for q, w in drawn) < 1e-5
            assert min(w for _, w in drawn) > 1e-3  # each query gave the sink a visible share
            # the keys' cells are as before, one per (query, key), and the sink's label closes the key row
            assert tab.locator("#view .cell:not(.sink)").count() == queries * keys
            assert tab.locator("#view .ktok").last.inner_text() == SINK_LABEL
        page.choose("self", 0, "mean")
        mean = tab.get_attribute('#view .cell[data-sink="true"][data-q="3"]', "data-w")
        assert abs(float(mean) - sinks[0, :, 3].mean()) < 1e-5
        tab.hover('#view .cell[data-sink="true"][data-q="3"]')
        assert SINK_LABEL in tab.inner_text("#readout")
        assert tab.locator("#view .cell.hl-row").count() == keys + 1  # the row's keys and its sink
        assert SINK_LABEL in tab.inner_text("#view-note")
    finally:
        page.close()
    # a model without sinks draws no such column
    plain = HFAttentionForCausalLM(tiny_config("decoder", vocab_size=len(tokenizer)))
    explore(plain, tokenizer, TEXT, path=tmp_path / "plain.html")
    page = OpenPage(browser, tmp_path / "plain.html")
    try:
        assert page.tab.locator("#view .cell.sink").count() == 0
        assert SINK_LABEL not in page.tab.inner_text("#view")
    finally:
        page.close()
