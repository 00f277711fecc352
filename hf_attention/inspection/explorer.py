"""Attention explorer: one self-contained HTML page with every layer and head of a model's attention for one text.

    hf-attention explore --model DIR --text "Open the file" --out attention.html
    hf-attention explore --model DIR --text "Open the file" --target "Datei öffnen" --kind cross --layer 0 --head 2

    >>> from hf_attention.inspection.explorer import explore
    >>> page = explore(model, tokenizer, "Open the file", path="attention.html")
    >>> page.weights["cross"].shape        # (layers, heads, queries, keys): the numbers embedded in the page

The page shows, for each kind of attention the model has (self-attention for encoders and decoders; encoder
self-attention, decoder self-attention and cross-attention for encoder-decoder models), a grid of thumbnails with
one per layer × head plus the average over heads, and a large view of the chosen one with token labels. Hovering a
token highlights its row (as a query) or its column (as a key); hovering a cell shows its weight. `layer`, `head`
and `kind` choose the view the page opens on. A model with attention sinks (GPT-OSS, `attention_sinks`) has one
more column in the view, "⟨sink⟩", set apart from the keys: the weight each query gave its head's sink.

The weights are those of `model(..., output_attentions=True)` (one forward pass), embedded in the page as JSON with
6 decimals. The page needs no network: its CSS and JavaScript are inline, and a Content-Security-Policy forbids any
fetch. Sizes are capped as for the heatmaps (`max_tokens` tokens per axis and the model's positions), and the page
holds at most `MAX_PAGE_WEIGHTS` numbers. Everything that can be checked before the forward pass is.

The input checks, the tokens, the forward pass and the token labels come from attention_maps.py, shared with the
heatmaps (heatmaps.py); this module adds the page's own checks and writes the page. The page's HTML, CSS and
JavaScript are package data (explorer_page/page.html, style.css, explorer.js), put into one file here.

This module is not shipped with checkpoints.
"""

from __future__ import annotations

import argparse
import functools
import html
import json
import os
import re
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path

import numpy as np
import torch

from ..commands.paths import output_file
from .attention_maps import (
    KINDS,
    MAX_TOKENS,
    HeatmapTooLarge,
    Tokens,
    add_size_arguments,
    attention_kinds,
    attention_layers,
    check_finite,
    check_index,
    check_kind,
    check_max_new_tokens,
    check_max_tokens,
    check_target,
    check_text,
    check_text_arguments,
    decoded_text,
    has_attention_sinks,
    head_argument,
    is_int,
    load_checked,
    num_heads,
    num_layers,
    sink_weights,
    token_labels,
    tokenize,
    unknown_ids,
)

DEFAULT_FILE_NAME = "attention.html"  # inside a folder given as the output path
PAGE_FOLDER = "explorer_page"  # package data: page.html, style.css, explorer.js
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
        sink_weights: For a model with attention sinks (GPT-OSS, `attention_sinks`), whose weights leave the sink
            out: kind → (layers, heads, queries), the weight each query gave the sink (1 − its row's sum); else None.
    """

    html: str
    path: Path | None
    weights: dict[str, np.ndarray]
    query_tokens: dict[str, list[str]]
    key_tokens: dict[str, list[str]]
    kind: str
    layer: int
    head: int | str
    sink_weights: dict[str, np.ndarray] | None = None


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
    return _write_page(model, tokenizer, request)


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
class _Labels:
    """The page's text besides the weights."""

    queries: dict[str, list[str]]  # kind → row labels
    keys: dict[str, list[str]]  # kind → column labels
    writes: dict[str, list[str]]  # kind → the token each decoder row writes (empty for models without a decoder)
    target: str | None  # the target line: given, or decoded from the generated tokens
    unknown_ids: list[int]  # ids the tokenizer has no token for (labelled "<id N>"; said on the page)


def _checked_request(model, request: _Request) -> _Request:
    """`request` checked against the model, before the tokenizer runs, with its defaults filled in."""
    check_max_tokens(request.max_tokens)
    check_max_new_tokens(request.max_new_tokens)
    path = output_path(request.path) if request.path is not None else None
    check_text(request.text)
    kind = _checked_kind(model, request)
    head = _checked_view(model.config, request, kind)
    return replace(request, kind=kind, head=head, path=path, title=request.title or type(model).__name__)


def _checked_kind(model, request: _Request) -> str:
    """The kind the page opens on, after checking it and the target against the model."""
    kind = request.kind
    if kind is None:
        kind = "cross" if "cross" in request.kinds else (request.kinds[0] if request.kinds else "self")
    check_kind(model, kind)
    check_target(model, request.target)
    return kind


def _checked_view(config, request: _Request, kind: str) -> int | str:
    """The head the page opens on ("mean" for None), after checking it and the layer against the config when it
    names its layers and heads (the forward pass's weights are checked again)."""
    head, layer = request.head, request.layer
    if not (head is None or head == "mean" or is_int(head)):
        raise ValueError(f"head={head!r} is not supported; pass a head index or 'mean' (the average over heads).")
    head = "mean" if head is None else head
    if layer is not None and not is_int(layer):
        raise ValueError(f"layer={layer!r} must be a layer index (an integer).")
    layers, heads = num_layers(config, kind), num_heads(config)
    if layers is not None and layer is not None:
        check_index("layer", layer, layers, f"{request.titles[kind]} layers")
    if heads is not None and isinstance(head, int):
        check_index("head", head, heads, "heads per layer")
    return head


def _write_page(model, tokenizer, request: _Request) -> AttentionPage:
    """The steps after the arguments' checks: the tokens, the page's size, the forward pass, the view the page
    opens on, the labels, and the page (written when `request.path` is set)."""
    tokens = tokenize(  # each sequence checked against the caps as soon as it is known
        model,
        tokenizer,
        request.text,
        target=request.target,
        max_new_tokens=request.max_new_tokens,
        max_tokens=request.max_tokens,
        truncate=request.truncate,
    )
    _check_page_size(model.config, request, tokens)
    weights = _collect_weights(attention_layers(model, tokens, request.kinds), request)
    layer_index, head_index = _initial_view(weights, request)
    request = _as_the_model_reads_it(request, tokens)
    labels = _labels(tokenizer, request, tokens)
    sinks = None
    if has_attention_sinks(model):  # the weights leave the sink out: what each row misses went to it
        sinks = {k: sink_weights(torch.from_numpy(w)).numpy() for k, w in weights.items()}
    page = _render(
        request, weights, labels, layer=layer_index, head=head_index, placeholders=tokens.placeholders, sinks=sinks
    )
    if request.path is not None:
        request.path.parent.mkdir(parents=True, exist_ok=True)
        request.path.write_text(page, encoding="utf-8")
    return AttentionPage(
        page,
        request.path,
        weights,
        labels.queries,
        labels.keys,
        request.kind,
        layer_index,
        head_index,
        sinks,
    )


def _as_the_model_reads_it(request: _Request, tokens: Tokens) -> _Request:
    """The request with the text (and given target) the model read: protected, for a model trained with placeholder
    protection, so that the page's text lines match the token rows and columns below them."""
    protected = tokens.protection
    if protected.text is None:
        return request
    target = protected.target if request.target is not None else None
    return replace(request, text=protected.text, target=target)


def _check_page_size(config, request: _Request, tokens: Tokens) -> None:
    """Refuse, before the forward pass, a page over MAX_PAGE_WEIGHTS numbers (when the config names its layers and
    heads; `_collect_weights` checks the weights returned in any case)."""
    heads = num_heads(config)
    if num_layers(config, request.kind) is None or heads is None:
        return
    source = len(tokens.source)
    if request.is_seq2seq:
        target = len(tokens.decoder_inputs)
        encoder, decoder = num_layers(config, "self"), num_layers(config, "cross")
        _check_page_total(heads * (encoder * source * source + decoder * (target * target + target * source)))
    else:
        _check_page_total(heads * num_layers(config, "self") * source * source)


def _check_page_total(total: int) -> None:
    if total > MAX_PAGE_WEIGHTS:
        raise ValueError(
            f"The page would hold {total:,} attention weights, more than {MAX_PAGE_WEIGHTS:,}; "
            "pass a shorter text (or target), or a lower max_tokens with truncate."
        )


def _collect_weights(layers: dict[str, list[torch.Tensor]], request: _Request) -> dict[str, np.ndarray]:
    """kind → (layers, heads, queries, keys) float32 array, from kind → one (H, Q, K) tensor per layer."""
    weights = {kind: torch.stack(layers[kind]).float().numpy() for kind in request.kinds}
    _check_page_total(sum(w.size for w in weights.values()))
    for kind, values in weights.items():  # NaN would make the page's data unreadable (JSON has no NaN)
        check_finite(values, request.titles[kind])
    return weights


def _initial_view(weights: dict[str, np.ndarray], request: _Request) -> tuple[int, int | str]:
    """The layer (non-negative) and head (non-negative, or "mean") the page opens on, checked against `weights`."""
    layers, heads = weights[request.kind].shape[:2]
    layer = check_index(
        "layer", -1 if request.layer is None else request.layer, layers, f"{request.titles[request.kind]} layers"
    )
    head = check_index("head", request.head, heads, "heads per layer") if isinstance(request.head, int) else "mean"
    return layer, head


def _labels(tokenizer, request: _Request, tokens: Tokens) -> _Labels:
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
# The page


def _render(
    request: _Request,
    weights: dict[str, np.ndarray],
    labels: _Labels,
    *,
    layer: int,
    head: int | str,
    placeholders: list[tuple[str, str]] = (),
    sinks: dict[str, np.ndarray] | None = None,
) -> str:
    is_seq2seq = request.is_seq2seq
    order = [k for k in ("cross", "decoder", "self") if k in weights] if is_seq2seq else ["self"]
    data = {
        "title": request.title,
        "text": request.text,
        "target": labels.target,
        "placeholders": [list(pair) for pair in placeholders],  # (sentinel, placeholder) of a protected text
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
                # (layers, heads, queries): the weight each query gave its head's sink, drawn as a last column
                "sinks": None if sinks is None else np.round(sinks[k].astype(np.float64), DECIMALS).tolist(),
            }
            for k in order
        },
        "initial": {"kind": request.kind, "layer": layer, "head": head},
    }
    # "<" escaped so that no token can close the <script> element; the JSON is otherwise unchanged.
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    fields = {"__TITLE__": html.escape(f"Attention explorer: {request.title}"), "__DATA__": payload}
    # One pass over the template: a title or a token that contains a marker's text is never filled in again.
    return re.sub("__TITLE__|__DATA__", lambda marker: fields[marker.group()], page_template())


@functools.cache
def page_template() -> str:
    """The page with `__TITLE__` and `__DATA__` still to fill in: page.html with style.css and explorer.js put inline
    (package data in explorer_page/, kept as real files so that editors and linters see HTML, CSS and JavaScript)."""
    folder = resources.files(__package__).joinpath(PAGE_FOLDER)

    def read(name: str) -> str:
        return folder.joinpath(name).read_text(encoding="utf-8")

    # Each marker stands alone on its line, and each file ends with a newline, which the marker's line break makes.
    return read("page.html").replace("__STYLE__\n", read("style.css")).replace("__SCRIPT__\n", read("explorer.js"))


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
        type=head_argument,
        default="mean",
        help="head the page opens on: an index, or 'mean' for the average (default: %(default)s)",
    )
    add_size_arguments(parser, verb="use")
    parser.set_defaults(run=_run_explore)


def _run_explore(args: argparse.Namespace) -> int:
    # Everything that can be checked without the model is checked before loading it.
    check_text_arguments(args, verb="show")
    out, folder, model, tokenizer = load_checked(args, output_path)
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
