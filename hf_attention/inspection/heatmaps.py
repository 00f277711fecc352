"""Attention heatmaps: which tokens each token attends to, for any hf-attention checkpoint (or HF model).

Notation: H heads, Q queries (rows), K keys (columns), L layers.

    >>> from hf_attention.inspection.heatmaps import plot_attention
    >>> result = plot_attention(model, tokenizer, "The list is empty.", layer=-1, head="mean", path="map.png")
    >>> result.weights.shape          # (Q, K): exactly what was drawn
    >>> result.query_tokens, result.key_tokens

Kinds of attention (`kind`):
- "self": the model's main self-attention: the encoder's (encoder and encoder-decoder models) or the decoder's
  (decoder-only models); text × text.
- "decoder": the decoder self-attention of an encoder-decoder model; target × target.
- "cross": the decoder-to-encoder attention of an encoder-decoder model; target (rows) × source (columns).
For "decoder" and "cross", the target is `target` (a text) or, when it is None, what the model generates greedily.
Rows are then the decoder inputs: the start token followed by the target, so row i is the step that writes target
token i.

The weights come from the forward pass with `output_attentions=True`. hf-attention models switch to the eager path for
that one call whatever backend they were loaded with; for other models saved with a fused backend that returns no
weights, the model is switched to "eager" for the call and switched back. That pass, the token labels and every input
check come from attention_maps.py, shared with the explorer; this module chooses what to draw and draws it.

Attention sinks (GPT-OSS, `attention_sinks`): the weights leave the sink out (each row sums to less than 1), and the
weight that went to it, 1 − the row's sum, is drawn as one more column, "⟨sink⟩", right of the keys and apart from
them; `AttentionMap.sink_weights` holds it.

Size limits: a heatmap axis shows at most `max_tokens` tokens (default `MAX_TOKENS`, at most `MAX_TOKENS_LIMIT`), and
the whole figure at most `MAX_FIGURE_PIXELS` pixels. Drawing costs about 40 bytes per pixel of a panel (a 128-token
panel: ~0.8 GB, 200 tokens: ~2 GB), so longer inputs are refused before the forward pass, with the length, the cap and
how to shorten them; `truncate=True` draws only the first `max_tokens` tokens instead. A text or target longer than
the model's positions (`config.position_limit`, or `max_position_embeddings` of another model) is refused likewise.

Command line: `hf-attention attention-map --model DIR --text "..." --out map.png` (see `add_attention_map_command`).
Every layer and head at once, in one interactive HTML page: `explore` (explorer.py, `hf-attention explore`).
This module is not shipped with checkpoints (it uses matplotlib).
"""

import argparse
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from ..commands.paths import output_file
from ..modeling.placeholders import SENTINELS
from .attention_maps import (
    KINDS,
    MAX_TOKENS,
    MAX_TOKENS_LIMIT,
    HeatmapTooLarge,
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
    load_checked,
    load_model_and_tokenizer,
    num_heads,
    protection,
    sink_weights,
    token_labels,
    tokenize,
    unknown_id_label,
    unknown_ids,
)

# The public names: the heatmap's own, and the names of attention_maps its callers need beside them (the limits, the
# error a refused input raises, the token labels, loading a checkpoint folder).
__all__ = [
    "KINDS",
    "MAX_TOKENS",
    "MAX_TOKENS_LIMIT",
    "AttentionMap",
    "HeatmapTooLarge",
    "attention_kinds",
    "attention_weights",
    "check_finite",
    "check_kind",
    "decoded_text",
    "has_attention_sinks",
    "load_model_and_tokenizer",
    "output_path",
    "plot_attention",
    "sink_weights",
    "token_labels",
    "unknown_id_label",
    "unknown_ids",
]


# Pixels of a whole figure (one panel per head makes a grid of them): 150 million take 600 MB as RGBA.
MAX_FIGURE_PIXELS = 150_000_000
DPI = 120
DEFAULT_FILE_NAME = "attention_map.png"  # inside a folder given as the output path
SINK_LABEL = "⟨sink⟩"  # the label of the column that shows the weight given to attention sinks


@dataclass
class AttentionMap:
    """What `plot_attention` drew.

    Attributes:
        weights: The plotted attention weights: (H, Q, K) with one panel per head (head=None), else (Q, K).
        query_tokens: Q row labels.
        key_tokens: K column labels.
        layer: Index of the layer drawn (non-negative).
        head: The head drawn, "mean", or None for all heads.
        kind: "self", "decoder" or "cross".
        figure: The matplotlib Figure (not attached to pyplot; display it in a notebook or save it again).
        path: Where the PNG was written, or None.
        sink_weights: For a model with attention sinks, the weight each query gave the sink, 1 − the row's sum of
            `weights` (drawn as the last column, labelled `SINK_LABEL`): (H, Q) or (Q,) as `weights`; else None.
    """

    weights: np.ndarray
    query_tokens: list[str]
    key_tokens: list[str]
    layer: int
    head: int | str | None
    kind: str
    figure: Figure
    path: Path | None
    sink_weights: np.ndarray | None = None


def plot_attention(
    model,
    tokenizer,
    text: str,
    *,
    layer: int | None = None,
    head: int | str | None = None,
    kind: str = "self",
    target: str | None = None,
    path: str | Path | None = None,
    max_new_tokens: int = 20,
    max_tokens: int = MAX_TOKENS,
    truncate: bool = False,
) -> AttentionMap:
    """Draw the attention weights of one layer as a queries × keys heatmap with token labels.

    Args:
        model: An hf-attention model (any family) or another HF model that can return attentions.
        tokenizer: Its tokenizer.
        text: The input text (the source, for an encoder-decoder model).
        layer: Layer index (negative counts from the end); None draws the last layer.
        head: A head index, "mean" for the average over heads, or None for one panel per head.
        kind: "self", "decoder" or "cross" (see the module docstring).
        target: Target text for kind "decoder"/"cross"; None generates it (greedy, `max_new_tokens`).
        path: Write the figure there as PNG (parents created); None only returns it. A path without a suffix gets
            ".png"; an existing folder (or a string ending with "/") gets the file `DEFAULT_FILE_NAME` inside it.
            `AttentionMap.path` is the file written.
        max_new_tokens: Length limit of a generated target.
        max_tokens: Most tokens per axis (1 … `MAX_TOKENS_LIMIT`); a longer text or target is refused before the
            forward pass, unless `truncate`.
        truncate: Draw the first `max_tokens` tokens of a longer text or target instead of refusing it.

    Returns:
        An `AttentionMap` holding the plotted array, the labels and the figure.

    Raises:
        ValueError: On an empty text, an unknown kind, a kind the model does not have (e.g. "cross" on a decoder),
            a layer / head out of range, a path matplotlib cannot write, or (`HeatmapTooLarge`) a text, target or
            figure over the size limits.
    """
    check_max_tokens(max_tokens)
    if path is not None:
        path = output_path(path)
    panels = 1 if head is not None else num_heads(model.config)
    layers, query_tokens, key_tokens = _attention_weights(
        model,
        tokenizer,
        text,
        kind=kind,
        target=target,
        max_new_tokens=max_new_tokens,
        max_tokens=max_tokens,
        truncate=truncate,
        panels=panels,
    )
    layer_index = check_index("layer", layer if layer is not None else -1, len(layers))
    plotted = _plotted_heads(layers[layer_index], head)
    sink = _plotted_heads(sink_weights(layers[layer_index]), head) if has_attention_sinks(model) else None
    columns = len(key_tokens) + (sink is not None)
    _check_figure_size(len(plotted) if plotted.ndim == 3 else 1, len(query_tokens), columns)
    figure = _draw(plotted, query_tokens, key_tokens, kind=kind, layer=layer_index, head=head, sink=sink)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=DPI)
    return AttentionMap(plotted, query_tokens, key_tokens, layer_index, head, kind, figure, path, sink)


def _plotted_heads(weights: torch.Tensor, head: int | str | None) -> np.ndarray:
    """What is drawn of one layer's (H, Q, K) weights: every head (head None), their mean (Q, K), or one head's
    (Q, K); likewise of its (H, Q) sink weights."""
    if head is None:
        plotted = weights
    elif head == "mean":
        plotted = weights.mean(0)  # (Q, K)
    elif isinstance(head, int) and not isinstance(head, bool):
        plotted = weights[check_index("head", head, weights.shape[0])]  # (Q, K)
    else:
        raise ValueError(f"head={head!r} is not supported; pass a head index, 'mean' or None (every head).")
    return plotted.float().numpy()


def attention_weights(
    model,
    tokenizer,
    text: str,
    *,
    kind: str = "self",
    target: str | None = None,
    max_new_tokens: int = 20,
    max_tokens: int | None = None,
    truncate: bool = False,
) -> tuple[list[torch.Tensor], list[str], list[str]]:
    """Every layer's attention weights for one text, with the token labels of their rows and columns.

    Arguments as in `plot_attention`, except that `max_tokens` is None (no limit) by default.

    Returns:
        (one (H, Q, K) tensor per layer, Q query labels, K key labels).

    Raises:
        ValueError: As `plot_attention`.
    """
    return _attention_weights(
        model,
        tokenizer,
        text,
        kind=kind,
        target=target,
        max_new_tokens=max_new_tokens,
        max_tokens=max_tokens,
        truncate=truncate,
    )


def _attention_weights(
    model,
    tokenizer,
    text: str,
    *,
    kind: str,
    target: str | None,
    max_new_tokens: int,
    max_tokens: int | None,
    truncate: bool,
    panels: int | None = None,
) -> tuple[list[torch.Tensor], list[str], list[str]]:
    """`attention_weights`; with `panels` (known from the config), the figure's size is checked once the token counts
    are known, before the forward pass."""
    check_kind(model, kind)
    check_text(text)
    check_max_new_tokens(max_new_tokens)
    if kind != "self":  # no target is drawn with kind "self"; check_kind made sure the model has a target side
        check_target(model, target)
    tokens = tokenize(
        model,
        tokenizer,
        text,
        target=target,
        max_new_tokens=max_new_tokens,
        max_tokens=max_tokens,
        truncate=truncate,
        target_on_axis=kind != "self",
    )
    if panels is not None:
        queries = len(tokens.source) if kind == "self" else len(tokens.decoder_inputs)
        _check_figure_size(panels, queries, len(tokens.source) if kind != "decoder" else len(tokens.decoder_inputs))
    layers = attention_layers(model, tokens, (kind,))[kind]  # L × (H, Q, K)
    for index, weights in enumerate(layers):
        check_finite(weights, f"{kind} layer {index}")
    source_labels = token_labels(tokenizer, tokens.source)
    if kind == "self":
        return layers, source_labels, source_labels
    target_labels = token_labels(tokenizer, tokens.decoder_inputs)
    return layers, target_labels, target_labels if kind == "decoder" else source_labels


def _figure_inches(panels: int, queries: int, keys: int) -> tuple[float, float]:
    """(width, height) in inches of a grid of `panels` heatmaps, at most 4 per row."""
    columns = min(panels, 4)
    rows = math.ceil(panels / columns)
    side = max(3.5, 0.28 * max(queries, keys) + 1.5)  # inches: room for one label per token
    return side * columns + 1, side * rows + 0.5


def _check_figure_size(panels: int, queries: int, keys: int) -> None:
    width, height = (round(inches * DPI) for inches in _figure_inches(panels, queries, keys))
    if width * height > MAX_FIGURE_PIXELS:
        grid = (
            f"{panels} panels (one per head) of {queries} × {keys} tokens make"
            if panels > 1
            else (f"a panel of {queries} × {keys} tokens makes")
        )
        what = f"{grid} a {width} × {height}-pixel figure, more than {MAX_FIGURE_PIXELS // 10**6} million pixels"
        raise HeatmapTooLarge(
            f"{what}; draw one head (head=0) or the mean over heads (head='mean'), or a shorter text.",
            f"{what}; draw one head (--head 0) or the mean over heads (--head mean), or a shorter text.",
        )


def output_path(path: str | os.PathLike) -> Path:
    """The file a heatmap given `path` is written to (see `paths.output_file`: a folder gets `DEFAULT_FILE_NAME`, a
    name without a suffix ".png"); the suffix must be a format matplotlib writes."""
    formats = tuple(sorted(f".{f}" for f in FigureCanvasAgg.get_supported_filetypes()))
    return output_file(path, default_name=DEFAULT_FILE_NAME, suffixes=(".png", *formats), what="a matplotlib image")


def _draw(
    weights: np.ndarray,
    query_tokens: list[str],
    key_tokens: list[str],
    *,
    kind: str,
    layer: int,
    head: int | str | None,
    sink: np.ndarray | None = None,
) -> Figure:
    """One heatmap panel per head in a grid (weights (H, Q, K)), or a single panel (weights (Q, K)); the sink
    weights ((H, Q) or (Q,)), when there are any, as a last column set apart by a white line."""
    panels = weights if weights.ndim == 3 else weights[None]
    if sink is not None:
        sink_panels = sink if sink.ndim == 2 else sink[None]  # (panels, Q)
        panels = np.concatenate([panels, sink_panels[..., None]], axis=-1)
        key_tokens = [*key_tokens, SINK_LABEL]
    columns = min(len(panels), 4)
    rows = math.ceil(len(panels) / columns)
    figure = Figure(figsize=_figure_inches(len(panels), len(query_tokens), len(key_tokens)), layout="constrained")
    FigureCanvasAgg(figure)  # a canvas without pyplot: no global state, nothing to close
    axes = figure.subplots(rows, columns, squeeze=False)
    what = {"self": "self-attention", "decoder": "decoder self-attention", "cross": "cross-attention"}[kind]
    for index, axis in enumerate(axes.flat):
        if index >= len(panels):
            axis.set_visible(False)
            continue
        image = axis.imshow(panels[index], cmap="viridis", vmin=0.0, aspect="auto", interpolation="nearest")
        axis.set_xticks(range(len(key_tokens)), key_tokens, rotation=90, fontsize=8)
        axis.set_yticks(range(len(query_tokens)), query_tokens, fontsize=8)
        axis.set_xlabel("source tokens (keys)" if kind == "cross" else "keys")
        axis.set_ylabel("target tokens (queries)" if kind != "self" else "queries")
        label = f"head {index}" if head is None else ("mean over heads" if head == "mean" else f"head {head}")
        axis.set_title(f"{what}, layer {layer}, {label}", fontsize=9)
        if sink is not None:
            axis.axvline(len(key_tokens) - 1.5, color="white", linewidth=2)
        figure.colorbar(image, ax=axis, shrink=0.8)
    return figure


# ---------------------------------------------------------------------------------------------------------------------
# Command line: hf-attention attention-map


def add_attention_map_command(subparsers: argparse._SubParsersAction) -> None:
    """Register `hf-attention attention-map --model DIR --text "..." --out map.png`."""
    parser = subparsers.add_parser(
        "attention-map",
        help="draw an attention heatmap of a checkpoint folder to PNG",
        description="Draw the attention weights of one layer of a saved model as a queries × keys heatmap.",
    )
    parser.add_argument("--model", required=True, help="checkpoint folder (model, config and tokenizer)")
    parser.add_argument("--text", required=True, help="input text (the source for an encoder-decoder model)")
    parser.add_argument(
        "--out",
        default=DEFAULT_FILE_NAME,
        help=f"PNG file to write, or a folder to write {DEFAULT_FILE_NAME} in (default: %(default)s)",
    )
    parser.add_argument("--layer", type=int, default=None, help="layer index, negative from the end (default: last)")
    parser.add_argument(
        "--head",
        type=head_argument,
        default=None,
        help="head index, or 'mean' for the average over heads (default: one panel per head)",
    )
    parser.add_argument("--kind", choices=KINDS, default="self", help="which attention (default: %(default)s)")
    parser.add_argument("--target", default=None, help="target text for --kind decoder/cross (default: generate)")
    add_size_arguments(parser, verb="draw")
    parser.set_defaults(run=_run_attention_map)


def _run_attention_map(args: argparse.Namespace) -> int:
    # Everything that can be checked without the model is checked before loading it.
    check_text_arguments(args, verb="draw")
    if args.target is not None and args.kind == "self":
        raise ValueError(
            "--target is only drawn with --kind decoder or --kind cross (the decoder attention of an "
            "encoder-decoder model); --kind self draws the text's self-attention."
        )
    out, _, model, tokenizer = load_checked(args, output_path)
    try:
        result = plot_attention(
            model,
            tokenizer,
            args.text,
            layer=args.layer,
            head=args.head,
            kind=args.kind,
            target=args.target,
            path=out,
            max_new_tokens=args.max_new_tokens,
            max_tokens=args.max_tokens,
            truncate=args.truncate,
        )
    except HeatmapTooLarge as error:
        raise ValueError(error.cli_message) from None
    print(f"wrote {result.path}: layer {result.layer}, {len(result.query_tokens)} × {len(result.key_tokens)} tokens")
    protected = protection(tokenizer, args.text, None)
    if protected.originals:  # the figure's labels are sentinels: say what each one stands for
        mapping = ", ".join(f"{SENTINELS[index]} = {original}" for index, original in enumerate(protected.originals))
        print(f"protected text (as the model reads it): {protected.text}; placeholders: {mapping}")
    return 0
