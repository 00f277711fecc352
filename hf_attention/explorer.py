"""Attention explorer: one self-contained HTML page with every layer and head of a model's attention for one text.

    hf-attention explore --model DIR --text "Open the file" --out attention.html
    hf-attention explore --model DIR --text "Open the file" --target "Datei öffnen" --kind cross --layer 0 --head 2

    >>> from hf_attention.visualize import explore
    >>> page = explore(model, tokenizer, "Open the file", path="attention.html")
    >>> page.weights["cross"].shape        # (layers, heads, queries, keys): the numbers embedded in the page

The page shows, for each kind of attention the model has (self-attention for encoders and decoders; encoder
self-attention, decoder self-attention and cross-attention for encoder-decoder models), a grid of thumbnails with
one per layer × head plus the average over heads, and a large view of the chosen one with token labels. Hovering a
token highlights its row (as a query) or its column (as a key); hovering a cell shows its weight. `layer`, `head`
and `kind` choose the view the page opens on.

The weights are those of `model(..., output_attentions=True)` (one forward pass), embedded in the page as JSON with
6 decimals. The page needs no network: its CSS and JavaScript are inline, and a Content-Security-Policy forbids any
fetch. Sizes are capped as for the heatmaps (`max_tokens` tokens per axis, see hf_attention.visualize), and the page
holds at most `MAX_PAGE_WEIGHTS` numbers. Everything that can be checked before the forward pass is.

This module is outside the remote-code closure.
"""

from __future__ import annotations

import argparse
import html
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from .paths import check_checkpoint, check_text_argument, output_file
from .visualize import (
    KINDS,
    MAX_TOKENS,
    MAX_TOKENS_LIMIT,
    HeatmapTooLarge,
    _check_index,
    _check_length,
    _forward_with_attentions,
    _head,
    _num_heads,
    _positive_int,
    _target_sequence,
    attention_kinds,
    check_finite,
    check_kind,
    decoded_text,
    load_model_and_tokenizer,
    token_labels,
    unknown_ids,
)

DEFAULT_FILE_NAME = "attention.html"  # inside a folder given as the output path
# Numbers embedded in one page (layers × heads × queries × keys over every kind): about 9 bytes each as JSON, so
# 3 million make a page of about 27 MB, which a browser still opens in a few seconds.
MAX_PAGE_WEIGHTS = 3_000_000
DECIMALS = 6
TITLES = {"self": "self-attention", "decoder": "decoder self-attention", "cross": "cross-attention"}
SEQ2SEQ_TITLES = {
    "self": "encoder self-attention",
    "decoder": "decoder self-attention",
    "cross": "cross-attention (decoder → encoder)",
}


@dataclass
class AttentionPage:
    """What `explore` wrote.

    Attributes:
        html: The page.
        path: Where it was written, or None.
        weights: kind → (layers, heads, queries, keys) float32 array, as returned by the model.
        query_tokens: kind → query (row) labels.
        key_tokens: kind → key (column) labels.
        kind, layer, head: The view the page opens on (layer non-negative; head an index or "mean").
    """

    html: str
    path: Path | None
    weights: dict[str, np.ndarray]
    query_tokens: dict[str, list[str]]
    key_tokens: dict[str, list[str]]
    kind: str
    layer: int
    head: int | str


def explore(
    model,
    tokenizer,
    text: str,
    *,
    target: str | None = None,
    kind: str | None = None,
    layer: int | None = None,
    head: int | str | None = "mean",
    path: str | os.PathLike | None = None,
    max_new_tokens: int = 20,
    max_tokens: int = MAX_TOKENS,
    truncate: bool = False,
    title: str | None = None,
) -> AttentionPage:
    """Write an interactive page with every layer and head of the attention of `model` on `text`.

    Args:
        model: An hf-attention model (any family) or another HF model that can return attentions.
        tokenizer: Its tokenizer.
        text: The input text (the source, for an encoder-decoder model).
        target: Target text of an encoder-decoder model; None generates it greedily (`max_new_tokens`). Refused for
            encoder-only and decoder-only models.
        kind: The attention the page opens on: "self", "decoder" or "cross" (default: "cross" for an
            encoder-decoder model, else "self").
        layer: The layer the page opens on (negative counts from the end; default: the last).
        head: The head the page opens on: an index, or "mean" (the average over heads, the default).
        path: Write the page there (parents created). A folder, or a name ending with "/", gets `DEFAULT_FILE_NAME`
            inside it; a name without a suffix gets ".html". None only returns the page.
        max_new_tokens: Length limit of a generated target.
        max_tokens: Most tokens per axis (1 … `MAX_TOKENS_LIMIT`); a longer text or target is refused before the
            forward pass, unless `truncate`.
        truncate: Use the first `max_tokens` tokens of a longer text or target instead of refusing it.
        title: Heading of the page (default: the model's class name).

    Returns:
        An `AttentionPage` with the page and the arrays it embeds.

    Raises:
        ValueError: On an empty text or target, a target or kind the model does not have, a layer or head out of
            range, a text or target longer than the model's positions or the caps (`HeatmapTooLarge`), or a page
            over `MAX_PAGE_WEIGHTS` numbers.
    """
    request = _checked_request(
        model,
        _Request(
            text=text,
            target=target,
            kind=kind,
            layer=layer,
            head=head,
            path=path,
            max_new_tokens=max_new_tokens,
            max_tokens=max_tokens,
            truncate=truncate,
            title=title,
            is_seq2seq=bool(getattr(model.config, "is_encoder_decoder", False)),
            kinds=attention_kinds(model.config),
        ),
    )
    limits = _token_limits(model.config, request)
    model.eval()
    tokens = _tokenize(model, tokenizer, request, limits)  # each sequence checked against the caps once known
    _check_page_size(model.config, request, tokens)
    with torch.no_grad():
        outputs = _forward_with_attentions(model, tokens.inputs)
    weights = _collect_weights(outputs, request)
    layer_index, head_index = _initial_view(weights, request)
    labels = _labels(tokenizer, request, tokens)
    page = _render(request, weights, labels, layer=layer_index, head=head_index)
    if request.path is not None:
        request.path.parent.mkdir(parents=True, exist_ok=True)
        request.path.write_text(page, encoding="utf-8")
    return AttentionPage(
        page, request.path, weights, labels.queries, labels.keys, request.kind, layer_index, head_index
    )


def output_path(path: str | os.PathLike) -> Path:
    """The file a page given `path` is written to (see `paths.output_file`); a ValueError when it cannot be."""
    return output_file(path, default_name=DEFAULT_FILE_NAME, suffixes=(".html", ".htm"), what="an HTML page")


# ---------------------------------------------------------------------------------------------------------------------
# The steps of explore, in the order it takes them. Each check fires as early as it can: the arguments before the
# tokenizer runs, each sequence's length as soon as it is known, the page's size before the forward pass.


@dataclass(frozen=True)
class _Request:
    """The arguments of one `explore` call. `_checked_request` returns them checked, with `kind` and `head` filled
    in (never None), `path` the file to write (a Path, or None) and `title` the page's heading."""

    text: str
    target: str | None
    kind: str | None
    layer: int | None
    head: int | str | None
    path: str | os.PathLike | None
    max_new_tokens: int
    max_tokens: int
    truncate: bool
    title: str | None
    is_seq2seq: bool
    kinds: tuple[str, ...]  # the kinds of attention the model computes

    @property
    def titles(self) -> dict[str, str]:
        """kind → its name on the page."""
        return SEQ2SEQ_TITLES if self.is_seq2seq else TITLES


@dataclass(frozen=True)
class _TokenLimits:
    """How long the text and target may be."""

    max_new_tokens: int  # of a generated target, lowered to what the caps keep
    positions: int | None  # the model's positions, when bounded
    truncation: dict  # the tokenizer's truncation arguments: empty unless truncate


@dataclass(frozen=True)
class _Tokens:
    """The token ids the page is about, and the model inputs made of them."""

    source: list[int]  # the text's
    sequence: list[int] | None  # encoder-decoder models: the start token, then the target (given or generated)
    inputs: dict  # for the forward pass; decoder_input_ids are `decoder_inputs`

    @property
    def decoder_inputs(self) -> list[int]:
        """The decoder rows: the sequence without its last token, which no row needs as input."""
        return self.sequence[:-1] if len(self.sequence) > 1 else self.sequence


@dataclass(frozen=True)
class _Labels:
    """The page's text besides the weights."""

    queries: dict[str, list[str]]  # kind → row labels
    keys: dict[str, list[str]]  # kind → column labels
    writes: dict[str, list[str]]  # kind → the token each decoder row writes (empty for models without a decoder)
    target: str | None  # the target line: given, or decoded from the generated tokens
    unknown_ids: list[int]  # ids the tokenizer has no token for (labelled "<id N>"; said on the page)


def _checked_request(model, request: _Request) -> _Request:
    """`request` checked against the model, before the tokenizer runs, with its defaults filled in."""
    if not (_is_int(request.max_tokens) and 1 <= request.max_tokens <= MAX_TOKENS_LIMIT):
        raise ValueError(f"max_tokens={request.max_tokens!r} is out of range: 1 … {MAX_TOKENS_LIMIT} tokens per axis.")
    if not (_is_int(request.max_new_tokens) and request.max_new_tokens >= 1):
        raise ValueError(f"max_new_tokens={request.max_new_tokens!r} must be a positive integer.")
    path = output_path(request.path) if request.path is not None else None
    if not isinstance(request.text, str) or not request.text.strip():
        raise ValueError("The text is empty: there are no tokens to show attention between.")
    kind = _checked_kind(model, request)
    head = _checked_view(model.config, request, kind)
    return replace(request, kind=kind, head=head, path=path, title=request.title or type(model).__name__)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _checked_kind(model, request: _Request) -> str:
    """The kind the page opens on, after checking it and the target against the model."""
    kind = request.kind
    if kind is None:
        kind = "cross" if "cross" in request.kinds else (request.kinds[0] if request.kinds else "self")
    check_kind(model, kind)
    target = request.target
    if target is not None and not request.is_seq2seq:
        raise ValueError(
            f"target={target!r}: {type(model).__name__} is not an encoder-decoder model, so it has no "
            "target side; leave the target out (the text is all it reads)."
        )
    if target is not None and (not isinstance(target, str) or not target.strip()):
        raise ValueError("The target text is empty: pass a target with tokens, or None to generate one.")
    return kind


def _checked_view(config, request: _Request, kind: str) -> int | str:
    """The head the page opens on ("mean" for None), after checking it and the layer against the config when it
    names its layers and heads (the forward pass's weights are checked again)."""
    head, layer = request.head, request.layer
    if not (head is None or head == "mean" or _is_int(head)):
        raise ValueError(f"head={head!r} is not supported; pass a head index or 'mean' (the average over heads).")
    head = "mean" if head is None else head
    if layer is not None and not _is_int(layer):
        raise ValueError(f"layer={layer!r} must be a layer index (an integer).")
    num_layers, num_heads = _num_layers(config, kind), _num_heads(config)
    if num_layers is not None and layer is not None:
        _check_index("layer", layer, num_layers, f"{request.titles[kind]} layers")
    if num_heads is not None and isinstance(head, int):
        _check_index("head", head, num_heads, "heads per layer")
    return head


def _token_limits(config, request: _Request) -> _TokenLimits:
    """The caps on the text and target: `max_tokens`, the model's positions, and what `truncate` keeps."""
    max_new_tokens, max_tokens = request.max_new_tokens, request.max_tokens
    if request.is_seq2seq and request.target is None and max_new_tokens > max_tokens:  # rows: start + generated[:-1]
        if not request.truncate:
            raise HeatmapTooLarge(
                f"max_new_tokens={max_new_tokens} could generate a target longer than max_tokens={max_tokens} per "
                "axis; lower max_new_tokens, pass truncate=True, or pass the target.",
                f"--max-new-tokens {max_new_tokens} could generate a target longer than the cap of {max_tokens} "
                "tokens per axis (--max-tokens); lower --max-new-tokens, pass --truncate, or pass --target.",
            )
        max_new_tokens = max_tokens
    positions = _position_limit(config)
    longest = max_tokens if positions is None else min(max_tokens, positions)  # what truncation keeps
    if not request.truncate:
        return _TokenLimits(max_new_tokens, positions, {})
    return _TokenLimits(min(max_new_tokens, longest), positions, {"truncation": True, "max_length": longest})


def _tokenize(model, tokenizer, request: _Request, limits: _TokenLimits) -> _Tokens:
    """The text's tokens and, for an encoder-decoder model, the target's (given, or generated greedily), each
    checked against the caps as soon as it is known."""
    device = next(model.parameters()).device
    encoded = tokenizer(request.text, return_tensors="pt", **limits.truncation).to(device)
    source = encoded["input_ids"][0].tolist()
    if not source:
        raise ValueError(f"The text {request.text!r} has no tokens: there are no tokens to show attention between.")
    _check_length("text", len(source), request.max_tokens)
    _check_positions("text", len(source), limits.positions)
    inputs = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
    if not request.is_seq2seq:
        return _Tokens(source, None, inputs)
    with torch.no_grad():
        sequence = _target_sequence(model, tokenizer, inputs, request.target, limits.max_new_tokens, limits.truncation)
    tokens = _Tokens(source, sequence[0].tolist(), inputs)
    _check_length("target", len(tokens.decoder_inputs), request.max_tokens)
    _check_positions("target", len(tokens.decoder_inputs), limits.positions)
    return replace(
        tokens, inputs={**inputs, "decoder_input_ids": torch.tensor([tokens.decoder_inputs], device=device)}
    )


def _check_page_size(config, request: _Request, tokens: _Tokens) -> None:
    """Refuse, before the forward pass, a page over MAX_PAGE_WEIGHTS numbers (when the config names its layers and
    heads; `_collect_weights` checks the weights returned in any case)."""
    heads = _num_heads(config)
    if _num_layers(config, request.kind) is None or heads is None:
        return
    source = len(tokens.source)
    if request.is_seq2seq:
        target = len(tokens.decoder_inputs)
        encoder, decoder = _num_layers(config, "self"), _num_layers(config, "cross")
        _check_page_total(heads * (encoder * source * source + decoder * (target * target + target * source)))
    else:
        _check_page_total(heads * _num_layers(config, "self") * source * source)


def _check_page_total(total: int) -> None:
    if total > MAX_PAGE_WEIGHTS:
        raise ValueError(
            f"The page would hold {total:,} attention weights, more than {MAX_PAGE_WEIGHTS:,}; "
            "pass a shorter text (or target), or a lower max_tokens with truncate."
        )


def _collect_weights(outputs, request: _Request) -> dict[str, np.ndarray]:
    """kind → (layers, heads, queries, keys) float32 array, from the forward pass's outputs."""
    names = {
        "self": "encoder_attentions" if request.is_seq2seq else "attentions",
        "decoder": "decoder_attentions",
        "cross": "cross_attentions",
    }
    weights = {k: torch.stack([w[0] for w in getattr(outputs, names[k])]).float().cpu().numpy() for k in request.kinds}
    _check_page_total(sum(w.size for w in weights.values()))
    for kind, values in weights.items():  # NaN would make the page's data unreadable (JSON has no NaN)
        check_finite(values, request.titles[kind])
    return weights


def _initial_view(weights: dict[str, np.ndarray], request: _Request) -> tuple[int, int | str]:
    """The layer (non-negative) and head (non-negative, or "mean") the page opens on, checked against `weights`."""
    layers, heads = weights[request.kind].shape[:2]
    layer = _check_index(
        "layer", -1 if request.layer is None else request.layer, layers, f"{request.titles[request.kind]} layers"
    )
    head = _check_index("head", request.head, heads, "heads per layer") if isinstance(request.head, int) else "mean"
    return layer, head


def _labels(tokenizer, request: _Request, tokens: _Tokens) -> _Labels:
    """Row and column labels of every kind, and for the decoder rows the token each one writes."""
    source = token_labels(tokenizer, tokens.source, mathtext=False)
    if not request.is_seq2seq:
        return _Labels({"self": source}, {"self": source}, {}, None, unknown_ids(tokenizer, tokens.source))
    decoder = token_labels(tokenizer, tokens.decoder_inputs, mathtext=False)
    written = tokens.sequence[1:]
    writes = token_labels(tokenizer, written, mathtext=False) if written else []
    unknown = unknown_ids(tokenizer, tokens.source + tokens.sequence)
    target = request.target if request.target is not None else decoded_text(tokenizer, written)
    return _Labels(
        {"self": source, "decoder": decoder, "cross": decoder},
        {"self": source, "decoder": decoder, "cross": source},
        {"decoder": writes, "cross": writes},
        target,
        unknown,
    )


# ---------------------------------------------------------------------------------------------------------------------
# Checks


def _num_layers(config, kind: str) -> int | None:
    """Layers of `kind` when the config names them (hf-attention's and most HF configs do)."""
    if getattr(config, "is_encoder_decoder", False):
        names = (
            ("encoder_layers", "num_layers")
            if kind == "self"
            else ("decoder_layers", "num_decoder_layers", "num_layers")
        )
    else:
        names = ("num_hidden_layers",)
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def _position_limit(config) -> int | None:
    """Most positions the model can take, or None when its positions are not bounded (an hf-attention config says:
    only a learned table has a last row; a recurrent model takes any length)."""
    if str(getattr(config, "model_type", "")).startswith("hf_attention"):
        return config.position_limit
    value = getattr(config, "max_position_embeddings", None)
    return value if isinstance(value, int) and value > 0 else None


def _check_positions(what: str, length: int, limit: int | None) -> None:
    if limit is not None and length > limit:
        raise ValueError(
            f"The {what} is {length} tokens, more than the model's {limit} positions "
            f"(max_position_embeddings={limit}); shorten it (or pass truncate=True / --truncate with "
            f"max_tokens / --max-tokens {limit} or less)."
        )


# ---------------------------------------------------------------------------------------------------------------------
# The page


def _render(request: _Request, weights: dict[str, np.ndarray], labels: _Labels, *, layer: int, head: int | str) -> str:
    is_seq2seq = request.is_seq2seq
    order = [k for k in ("cross", "decoder", "self") if k in weights] if is_seq2seq else ["self"]
    data = {
        "title": request.title,
        "text": request.text,
        "target": labels.target,
        "generated": is_seq2seq and request.target is None,
        "unknown_ids": labels.unknown_ids,
        "order": order,
        "kinds": {
            k: {
                "title": request.titles[k],
                "rows": "target tokens (decoder inputs)" if k != "self" and is_seq2seq else "tokens (queries)",
                "columns": "source tokens (keys)"
                if k == "cross"
                else ("target tokens (keys)" if k == "decoder" else "tokens (keys)"),
                "queries": labels.queries[k],
                "keys": labels.keys[k],
                "writes": labels.writes.get(k),
                "weights": np.round(weights[k].astype(np.float64), DECIMALS).tolist(),
            }
            for k in order
        },
        "initial": {"kind": request.kind, "layer": layer, "head": head},
    }
    # "<" escaped so that no token can close the <script> element; the JSON is otherwise unchanged.
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    return _TEMPLATE.replace("__TITLE__", html.escape(f"Attention explorer: {request.title}")).replace(
        "__DATA__", payload
    )


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d1d1f; background: #fafafa; }
header { padding: 14px 22px 8px; background: #fff; border-bottom: 1px solid #ddd; }
h1 { font-size: 19px; margin: 0 0 4px; }
h2 { font-size: 15px; margin: 0 0 8px; }
.meta { font-size: 13px; color: #555; margin: 2px 0; }
.meta b { color: #1d1d1f; }
#controls { display: flex; flex-wrap: wrap; gap: 14px; align-items: center; padding: 10px 22px; background: #fff;
            border-bottom: 1px solid #ddd; font-size: 14px; }
#controls select { font-size: 14px; padding: 2px 4px; }
#readout { font-family: ui-monospace, monospace; font-size: 13px; color: #333; min-height: 1.2em; }
main { display: flex; flex-wrap: wrap; gap: 22px; padding: 16px 22px; align-items: flex-start; }
section.panel { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 12px 14px; }
#grid { border-collapse: collapse; }
#grid th { font-size: 11px; font-weight: normal; color: #555; padding: 2px 4px; }
#grid td { padding: 2px; }
#grid canvas { width: 56px; height: 56px; image-rendering: pixelated; border: 2px solid transparent;
               cursor: pointer; display: block; background: #eee; }
#grid canvas:hover { border-color: #999; }
#grid canvas.selected { border-color: #d62728; }
#view { display: grid; gap: 0; align-items: end; justify-content: start; user-select: none; }
.ktok { writing-mode: vertical-rl; transform: rotate(180deg); font-size: 12px; padding: 3px 0; text-align: left;
        white-space: nowrap; cursor: default; }
.qtok { font-size: 12px; padding: 0 4px; margin-right: 4px; text-align: right; white-space: nowrap; cursor: default;
        align-self: center; justify-self: end; }
.qtok .writes { color: #888; }
.cell { width: var(--cell); height: var(--cell); box-sizing: border-box; }
.cell.hl { box-shadow: inset 0 0 0 1px rgba(214, 39, 40, 0.9); }
.cell.hl-row { box-shadow: inset 0 1px 0 0 #d62728, inset 0 -1px 0 0 #d62728; }
.cell.hl-col { box-shadow: inset 1px 0 0 0 #d62728, inset -1px 0 0 0 #d62728; }
.tok-hl { background: #ffe08a; border-radius: 3px; }
.legend { display: flex; align-items: center; gap: 6px; font-size: 12px; color: #555; margin-top: 10px; }
.legend canvas { width: 160px; height: 10px; border: 1px solid #ccc; }
.note { font-size: 12px; color: #666; max-width: 640px; }
#grid-panel .note { max-width: 340px; }
</style>
</head>
<body>
<header>
  <h1 id="page-title"></h1>
  <p class="meta" id="meta-text"></p>
  <p class="meta" id="meta-target"></p>
  <p class="meta" id="meta-unknown" hidden></p>
</header>
<div id="controls">
  <label>Attention <select id="kind"></select></label>
  <label>Layer <select id="layer"></select></label>
  <label>Head <select id="head"></select></label>
  <span id="readout"></span>
</div>
<main>
  <section class="panel" id="grid-panel">
    <h2>Every layer × head</h2>
    <table id="grid"></table>
    <p class="note">Each thumbnail is one head (the last column: the average over heads). Click one to view it.</p>
  </section>
  <section class="panel">
    <h2 id="view-title"></h2>
    <div id="view"></div>
    <div class="legend"><span>0</span><canvas id="legend" width="160" height="1"></canvas><span id="legend-max"></span>
      <span>(colour scaled to the largest weight of this view; each row sums to 1)</span></div>
    <p class="note" id="view-note"></p>
  </section>
</main>
<script type="application/json" id="attention-data">__DATA__</script>
<script>
"use strict";
(function () {
  const DATA = JSON.parse(document.getElementById("attention-data").textContent);
  const VIRIDIS = [[68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142], [31, 158, 137],
                   [53, 183, 121], [109, 205, 89], [180, 222, 44], [253, 231, 37]];
  const state = {kind: DATA.initial.kind, layer: DATA.initial.layer, head: String(DATA.initial.head)};
  const $ = (id) => document.getElementById(id);

  function colour(t) {
    t = Math.max(0, Math.min(1, t)) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(t), VIRIDIS.length - 2), f = t - i, a = VIRIDIS[i], b = VIRIDIS[i + 1];
    return [0, 1, 2].map((c) => Math.round(a[c] + f * (b[c] - a[c])));
  }
  function matrix(kind, layer, head) {  // (queries × keys) for one head, or the average over heads
    const heads = DATA.kinds[kind].weights[layer];
    if (head !== "mean") return heads[Number(head)];
    return heads[0].map((row, q) => row.map((_, k) => heads.reduce((s, h) => s + h[q][k], 0) / heads.length));
  }
  function largest(m) { let v = 0; for (const row of m) for (const x of row) if (x > v) v = x; return v || 1; }
  function paint(canvas, m) {
    const rows = m.length, cols = m[0].length, max = largest(m);
    canvas.width = cols; canvas.height = rows;
    const context = canvas.getContext("2d"), image = context.createImageData(cols, rows);
    for (let q = 0; q < rows; q++) for (let k = 0; k < cols; k++) {
      const [r, g, b] = colour(m[q][k] / max), o = 4 * (q * cols + k);
      image.data[o] = r; image.data[o + 1] = g; image.data[o + 2] = b; image.data[o + 3] = 255;
    }
    context.putImageData(image, 0, 0);
  }
  function option(select, value, label) {
    const o = document.createElement("option"); o.value = String(value); o.textContent = label; select.appendChild(o);
  }

  function buildControls() {
    const kind = $("kind"), layer = $("layer"), head = $("head"), info = DATA.kinds[state.kind];
    if (!kind.options.length) DATA.order.forEach((k) => option(kind, k, DATA.kinds[k].title));
    kind.value = state.kind;
    layer.textContent = ""; head.textContent = "";
    info.weights.forEach((_, i) => option(layer, i, String(i)));
    info.weights[0].forEach((_, i) => option(head, i, String(i)));
    option(head, "mean", "mean of heads");
    layer.value = String(state.layer); head.value = state.head;
  }

  function buildGrid() {
    const grid = $("grid"), info = DATA.kinds[state.kind], heads = info.weights[0].length;
    grid.textContent = "";
    const header = grid.insertRow(), corner = document.createElement("th");
    corner.textContent = "layer ↓ head →"; header.appendChild(corner);
    for (let h = 0; h <= heads; h++) {
      const th = document.createElement("th"); th.textContent = h < heads ? String(h) : "mean"; header.appendChild(th);
    }
    info.weights.forEach((_, layer) => {
      const row = grid.insertRow(), th = document.createElement("th");
      th.textContent = String(layer); row.appendChild(th);
      for (let h = 0; h <= heads; h++) {
        const head = h < heads ? String(h) : "mean", canvas = document.createElement("canvas");
        canvas.className = "thumb"; canvas.dataset.layer = String(layer); canvas.dataset.head = head;
        canvas.title = `layer ${layer}, ${head === "mean" ? "mean of heads" : "head " + head}`;
        paint(canvas, matrix(state.kind, layer, head));
        canvas.addEventListener("click", () => { state.layer = layer; state.head = head; update(false); });
        row.insertCell().appendChild(canvas);
      }
    });
  }

  let rowCells = [], columnCells = [], queryLabels = [], keyLabels = [];
  function clearHighlight() {
    document.querySelectorAll(".hl, .hl-row, .hl-col, .tok-hl").forEach((e) => e.classList.remove("hl", "hl-row",
      "hl-col", "tok-hl"));
    $("readout").textContent = "";
  }
  function highlightRow(q) {
    rowCells[q].forEach((c) => c.classList.add("hl-row")); queryLabels[q].classList.add("tok-hl");
  }
  function highlightColumn(k) {
    columnCells[k].forEach((c) => c.classList.add("hl-col")); keyLabels[k].classList.add("tok-hl");
  }

  function buildView() {
    const info = DATA.kinds[state.kind], m = matrix(state.kind, state.layer, state.head), max = largest(m);
    const view = $("view"), rows = info.queries.length, cols = info.keys.length;
    const cell = Math.max(8, Math.min(36, Math.floor(600 / Math.max(rows, cols))));
    view.textContent = ""; view.style.setProperty("--cell", cell + "px");
    view.style.gridTemplateColumns = `auto repeat(${cols}, ${cell}px)`;
    view.dataset.kind = state.kind; view.dataset.layer = String(state.layer); view.dataset.head = state.head;
    rowCells = info.queries.map(() => []); columnCells = info.keys.map(() => []); queryLabels = []; keyLabels = [];
    view.appendChild(document.createElement("div"));
    info.keys.forEach((token, k) => {
      const label = document.createElement("div"); label.className = "ktok"; label.dataset.k = String(k);
      label.textContent = token; label.title = `key ${k}: ${token}`;
      label.addEventListener("mouseenter", () => { clearHighlight(); highlightColumn(k);
        $("readout").textContent = `key ${k} "${token}"`; });
      label.addEventListener("mouseleave", clearHighlight);
      keyLabels.push(label); view.appendChild(label);
    });
    info.queries.forEach((token, q) => {
      const label = document.createElement("div"); label.className = "qtok"; label.dataset.q = String(q);
      label.textContent = token;
      if (info.writes && q < info.writes.length) {
        const writes = document.createElement("span"); writes.className = "writes";
        writes.textContent = ` → ${info.writes[q]}`; label.appendChild(writes);
      }
      label.title = `query ${q}: ${token}`;
      label.addEventListener("mouseenter", () => { clearHighlight(); highlightRow(q);
        $("readout").textContent = `query ${q} "${token}"`; });
      label.addEventListener("mouseleave", clearHighlight);
      queryLabels.push(label); view.appendChild(label);
      info.keys.forEach((key, k) => {
        const w = m[q][k], div = document.createElement("div"), [r, g, b] = colour(w / max);
        div.className = "cell"; div.dataset.q = String(q); div.dataset.k = String(k); div.dataset.w = String(w);
        div.style.background = `rgb(${r},${g},${b})`;
        div.title = `${token} → ${key}: ${w.toFixed(4)}`;
        div.addEventListener("mouseenter", () => { clearHighlight(); highlightRow(q); highlightColumn(k);
          div.classList.add("hl"); $("readout").textContent = `"${token}" → "${key}": ${w.toFixed(4)}`; });
        div.addEventListener("mouseleave", clearHighlight);
        rowCells[q].push(div); columnCells[k].push(div); view.appendChild(div);
      });
    });
    const headName = state.head === "mean" ? "mean of heads" : `head ${state.head}`;
    $("view-title").textContent = `${info.title}, layer ${state.layer}, ${headName}`;
    $("legend-max").textContent = max.toFixed(3);
    $("view-note").textContent = `Rows: ${info.rows}; columns: ${info.columns}. Hover a token to highlight its ` +
      "row or column, a cell for its weight." + (info.writes ? " Row i is the decoding step that writes the token " +
      "after the arrow." : "");
    document.querySelectorAll("#grid canvas").forEach((c) => c.classList.toggle("selected",
      c.dataset.layer === String(state.layer) && c.dataset.head === state.head));
  }

  function update(kindChanged) {
    if (kindChanged) {
      const layers = DATA.kinds[state.kind].weights.length;
      if (state.layer >= layers) state.layer = layers - 1;
    }
    buildControls();
    if (kindChanged || !$("grid").rows.length) buildGrid();
    buildView();
  }

  $("page-title").textContent = `Attention explorer: ${DATA.title}`;
  const textLine = document.createElement("span"); textLine.textContent = DATA.text;
  $("meta-text").append("Text: ", textLine);
  if (DATA.target !== null) {
    const targetLine = document.createElement("span"); targetLine.textContent = DATA.target;
    $("meta-target").append(DATA.generated ? "Target (generated greedily): " : "Target: ", targetLine);
  }
  if (DATA.unknown_ids.length) {
    $("meta-unknown").hidden = false;
    $("meta-unknown").textContent = `Token ids the tokenizer does not know (the model's vocabulary is larger), ` +
      `shown as <id N>: ${DATA.unknown_ids.join(", ")}.`;
  }
  const legend = $("legend"), legendContext = legend.getContext("2d"), strip = legendContext.createImageData(160, 1);
  for (let i = 0; i < 160; i++) {
    const [r, g, b] = colour(i / 159); strip.data.set([r, g, b, 255], 4 * i);
  }
  legendContext.putImageData(strip, 0, 0);
  $("kind").addEventListener("change", (e) => { state.kind = e.target.value; update(true); });
  $("layer").addEventListener("change", (e) => { state.layer = Number(e.target.value); update(false); });
  $("head").addEventListener("change", (e) => { state.head = e.target.value; update(false); });
  update(true);
  document.body.dataset.ready = "true";
})();
</script>
</body>
</html>
"""


# ---------------------------------------------------------------------------------------------------------------------
# Command line: hf-attention explore


def add_explore_command(subparsers: argparse._SubParsersAction) -> None:
    """Register `hf-attention explore --model DIR --text "..." --out attention.html`."""
    parser = subparsers.add_parser(
        "explore",
        help="write an interactive HTML page with every layer and head of a checkpoint's attention",
        description="Write one self-contained HTML page (no network needed) with the attention weights of every "
        "layer and head of a saved model for one text: a layer × head grid, a large view with token "
        "labels, hover highlighting and the average over heads.",
    )
    parser.add_argument("--model", required=True, help="checkpoint folder (model, config and tokenizer)")
    parser.add_argument("--text", required=True, help="input text (the source for an encoder-decoder model)")
    parser.add_argument(
        "--target", default=None, help="target text of an encoder-decoder model (default: generated greedily)"
    )
    parser.add_argument(
        "--out",
        default=DEFAULT_FILE_NAME,
        help=f"HTML file to write, or a folder to write {DEFAULT_FILE_NAME} in (default: %(default)s)",
    )
    parser.add_argument(
        "--kind",
        choices=KINDS,
        default=None,
        help="attention the page opens on (default: cross for encoder-decoder models, else self)",
    )
    parser.add_argument("--layer", type=int, default=None, help="layer the page opens on (default: the last)")
    parser.add_argument(
        "--head",
        type=_head,
        default="mean",
        help="head the page opens on: an index, or 'mean' for the average (default: %(default)s)",
    )
    parser.add_argument("--max-new-tokens", type=_positive_int(), default=20, help="length of a generated target")
    parser.add_argument(
        "--max-tokens",
        type=_positive_int(MAX_TOKENS_LIMIT),
        default=MAX_TOKENS,
        help=f"most tokens per axis, up to {MAX_TOKENS_LIMIT}; a longer text is refused unless "
        "--truncate (default: %(default)s)",
    )
    parser.add_argument("--truncate", action="store_true", help="use the first --max-tokens tokens of a longer text")
    parser.add_argument("--trust-remote-code", action="store_true", help="load code shipped with the checkpoint")
    parser.set_defaults(run=_run_explore)


def _run_explore(args: argparse.Namespace) -> int:
    # Everything that can be checked without the model is checked before loading it.
    check_text_argument("--text", args.text)
    check_text_argument("--target", args.target)
    if not args.text.strip():
        raise ValueError("--text is empty: there are no tokens to show attention between.")
    if args.target is not None and not args.target.strip():
        raise ValueError("--target is empty: pass a target text, or leave --target out to generate one.")
    try:
        out = output_path(args.out)
    except ValueError as error:
        raise ValueError(f"--out: {error}") from None
    folder = check_checkpoint(args.model, argument="--model", tokenizer=True)
    model, tokenizer = load_model_and_tokenizer(folder, trust_remote_code=args.trust_remote_code)
    if args.target is not None and not getattr(model.config, "is_encoder_decoder", False):
        raise ValueError(
            f"--target: {folder} holds a {type(model).__name__}, not an encoder-decoder model, so there "
            "is no target side; leave --target out."
        )
    try:
        page = explore(
            model,
            tokenizer,
            args.text,
            target=args.target,
            kind=args.kind,
            layer=args.layer,
            head=args.head,
            path=out,
            max_new_tokens=args.max_new_tokens,
            max_tokens=args.max_tokens,
            truncate=args.truncate,
            title=str(args.model),
        )
    except HeatmapTooLarge as error:
        raise ValueError(error.cli_message) from None
    shapes = ", ".join(
        f"{kind} {w.shape[0]} layers × {w.shape[1]} heads × {w.shape[2]} × {w.shape[3]}"
        for kind, w in page.weights.items()
    )
    print(f"wrote {page.path}: {shapes}")
    return 0
