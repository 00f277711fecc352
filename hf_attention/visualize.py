"""Attention heatmaps: which tokens each token attends to, for any hf-attention checkpoint (or HF model).

Notation: H heads, Q queries (rows), K keys (columns), L layers.

    >>> from hf_attention.visualize import plot_attention
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
weights, the model is switched to "eager" for the call and switched back.

Size limits: a heatmap axis shows at most `max_tokens` tokens (default `MAX_TOKENS`, at most `MAX_TOKENS_LIMIT`), and
the whole figure at most `MAX_FIGURE_PIXELS` pixels. Drawing costs about 40 bytes per pixel of a panel (a 128-token
panel: ~0.8 GB, 200 tokens: ~2 GB), so longer inputs are refused before the forward pass, with the length, the cap and
how to shorten them; `truncate=True` draws only the first `max_tokens` tokens instead.

Command line: `hf-attention attention-map --model DIR --text "..." --out map.png` (see `add_attention_map_command`).
Every layer and head at once, in one interactive HTML page: `explore` (hf_attention.explorer, `hf-attention explore`).
This module is outside the remote-code closure (it uses matplotlib).
"""

import argparse
import functools
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .paths import check_checkpoint, check_text_argument, output_file

KINDS = ("self", "decoder", "cross")


def attention_kinds(config) -> tuple[str, ...]:
    """The kinds of attention a model of `config` computes: every kind for a Transformer encoder-decoder, "self"
    for an encoder or a decoder alone, and what the config declares (`attention_kinds`) otherwise: "cross" alone for
    a recurrent encoder-decoder with attention, nothing without."""
    declared = getattr(config, "attention_kinds", None)
    if declared is not None:
        return tuple(declared)
    return KINDS if getattr(config, "is_encoder_decoder", False) else ("self",)


def check_kind(model, kind: str) -> None:
    """ValueError unless `kind` is one of KINDS and an attention the model computes, naming what it has."""
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not supported; allowed values are {', '.join(map(repr, KINDS))}.")
    kinds = attention_kinds(model.config)
    if kind in kinds:
        return
    name = type(model).__name__
    if not kinds:
        raise ValueError(
            f"{name} computes no attention weights (its decoder sees the source through one fixed vector): there is "
            "no attention to draw."
        )
    if kinds == ("self",):
        raise ValueError(
            f"kind={kind!r} needs an encoder-decoder model; {name} has only self-attention, use kind='self'."
        )
    raise ValueError(f"kind={kind!r}: {name} has no such attention; it has {', '.join(map(repr, kinds))}.")


# Tokens per heatmap axis: the default cap (labels stay legible, drawing one panel takes < 1 GB) and the largest cap
# allowed (~2 GB for one panel).
MAX_TOKENS = 128
MAX_TOKENS_LIMIT = 200
# Pixels of a whole figure (one panel per head makes a grid of them): 150 million take 600 MB as RGBA.
MAX_FIGURE_PIXELS = 150_000_000
DPI = 120
DEFAULT_FILE_NAME = "attention_map.png"  # inside a folder given as the output path


class HeatmapTooLarge(ValueError):
    """A heatmap over the size limits; `cli_message` says the same with the command's flags."""

    def __init__(self, message: str, cli_message: str):
        super().__init__(message)
        self.cli_message = cli_message


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
    """

    weights: np.ndarray
    query_tokens: list[str]
    key_tokens: list[str]
    layer: int
    head: int | str | None
    kind: str
    figure: Figure
    path: Path | None


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
    if not (isinstance(max_tokens, int) and 1 <= max_tokens <= MAX_TOKENS_LIMIT):
        raise ValueError(f"max_tokens={max_tokens!r} is out of range: 1 … {MAX_TOKENS_LIMIT} tokens per axis.")
    if path is not None:
        path = output_path(path)
    panels = 1 if head is not None else _num_heads(model.config)
    layers, query_tokens, key_tokens = _attention_weights(
        model,
        tokenizer,
        text,
        kind=kind,
        target=target,
        max_new_tokens=max_new_tokens,
        max_tokens=max_tokens,
        truncate=truncate,
        # The figure's size, checked before the forward pass when the number of panels is known from the config.
        before_forward=functools.partial(_check_figure_size, panels) if panels is not None else None,
    )
    layer_index = _check_index("layer", layer if layer is not None else -1, len(layers))
    plotted = _plotted_heads(layers[layer_index], head)
    _check_figure_size(len(plotted) if plotted.ndim == 3 else 1, len(query_tokens), len(key_tokens))
    figure = _draw(plotted, query_tokens, key_tokens, kind=kind, layer=layer_index, head=head)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=DPI)
    return AttentionMap(plotted, query_tokens, key_tokens, layer_index, head, kind, figure, path)


def _plotted_heads(weights: torch.Tensor, head: int | str | None) -> np.ndarray:
    """What is drawn of one layer's (H, Q, K) weights: every head (head None), their mean (Q, K), or one head's
    (Q, K)."""
    if head is None:
        plotted = weights
    elif head == "mean":
        plotted = weights.mean(0)  # (Q, K)
    elif isinstance(head, int) and not isinstance(head, bool):
        plotted = weights[_check_index("head", head, weights.shape[0])]  # (Q, K)
    else:
        raise ValueError(f"head={head!r} is not supported; pass a head index, 'mean' or None (every head).")
    return plotted.float().numpy()


def explore(model, tokenizer, text: str, **options):
    """Write an interactive HTML page with every layer and head of the model's attention on `text`; see
    `hf_attention.explorer.explore` for the options. Returns an `AttentionPage`."""
    from .explorer import explore as write_page  # the explorer imports this module

    return write_page(model, tokenizer, text, **options)


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


@torch.no_grad()
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
    before_forward: Callable[[int, int], None] | None = None,
) -> tuple[list[torch.Tensor], list[str], list[str]]:
    """`attention_weights`, calling `before_forward(Q, K)` once the sizes are known, before the forward pass."""
    check_kind(model, kind)
    if not isinstance(text, str) or not text.strip():
        raise ValueError("The text is empty: there are no tokens to draw attention between.")
    config = model.config
    is_seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    if kind != "self" and target is not None and (not isinstance(target, str) or not target.strip()):
        raise ValueError("The target text is empty: pass a target with tokens, or None to generate one.")
    if kind != "self" and target is None and max_tokens is not None and max_new_tokens > max_tokens:
        if not truncate:
            raise HeatmapTooLarge(
                f"max_new_tokens={max_new_tokens} could generate a target longer than max_tokens={max_tokens} per "
                f"heatmap axis; lower max_new_tokens, pass truncate=True, or pass the target.",
                f"--max-new-tokens {max_new_tokens} could generate a target longer than the cap of {max_tokens} "
                f"tokens per heatmap axis (--max-tokens); lower --max-new-tokens, pass --truncate, or pass --target.",
            )
        max_new_tokens = max_tokens
    limit = {"truncation": True, "max_length": max_tokens} if truncate and max_tokens is not None else {}
    model.eval()
    device = next(model.parameters()).device
    encoded = tokenizer(text, return_tensors="pt", **limit).to(device)
    source = encoded["input_ids"][0].tolist()
    if not source:
        raise ValueError(f"The text {text!r} has no tokens: there are no tokens to draw attention between.")
    _check_length("text", len(source), max_tokens)
    inputs = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
    decoder_ids = None
    if is_seq2seq:
        decoder_ids = _decoder_inputs(model, tokenizer, inputs, target, max_new_tokens, limit)
        if kind != "self":
            _check_length("target", decoder_ids.shape[1], max_tokens)
        inputs["decoder_input_ids"] = decoder_ids
    if before_forward is not None:
        queries = len(source) if kind == "self" else decoder_ids.shape[1]
        before_forward(queries, len(source) if kind != "decoder" else decoder_ids.shape[1])
    outputs = _forward_with_attentions(model, inputs)
    name = {
        "self": "encoder_attentions" if is_seq2seq else "attentions",
        "decoder": "decoder_attentions",
        "cross": "cross_attentions",
    }[kind]
    layers = [weights[0].detach().cpu() for weights in getattr(outputs, name)]  # L × (H, Q, K)
    for index, weights in enumerate(layers):
        check_finite(weights, f"{kind} layer {index}")
    source_labels = token_labels(tokenizer, source)
    if kind == "self":
        return layers, source_labels, source_labels
    target_labels = token_labels(tokenizer, decoder_ids[0].tolist())
    return layers, target_labels, target_labels if kind == "decoder" else source_labels


def token_labels(tokenizer, ids: list[int], *, mathtext: bool = True) -> list[str]:
    """Readable tick labels: byte-level pieces decoded ("Ġthe" → "the"), whitespace shown as "␣", control characters
    escaped, and (`mathtext`, for matplotlib) "$" escaped so that matplotlib does not read it as mathtext. An id the
    tokenizer does not know (a model whose vocab_size is larger than the tokenizer's, as T5's) reads "<id N>"."""
    labels = []
    for token_id, token in zip(ids, tokenizer.convert_ids_to_tokens(ids), strict=True):
        if token is None:
            labels.append(unknown_id_label(token_id))
            continue
        label = tokenizer.convert_tokens_to_string([token]).strip() or "␣"
        if not label.isprintable():
            label = repr(label)[1:-1]
        labels.append(label.replace("$", r"\$") if mathtext else label)
    return labels


def unknown_id_label(token_id: int) -> str:
    """The label of a token id outside the tokenizer's vocabulary."""
    return f"<id {token_id}>"


def unknown_ids(tokenizer, ids: list[int]) -> list[int]:
    """The ids among `ids` that the tokenizer has no token for, in order, each once."""
    tokens = tokenizer.convert_ids_to_tokens(ids)
    return list(dict.fromkeys(i for i, token in zip(ids, tokens, strict=True) if token is None))


def decoded_text(tokenizer, ids: list[int]) -> str:
    """`tokenizer.decode(ids, skip_special_tokens=True)`, with "<id N>" for each id the tokenizer does not know (it
    would fail on those): the runs of known ids are decoded as usual."""
    pieces, run = [], []
    for token_id, token in zip(ids, tokenizer.convert_ids_to_tokens(ids), strict=True):
        if token is not None:
            run.append(token_id)
            continue
        pieces += [tokenizer.decode(run, skip_special_tokens=True)] if run else []
        pieces.append(unknown_id_label(token_id))
        run = []
    pieces += [tokenizer.decode(run, skip_special_tokens=True)] if run else []
    return " ".join(piece.strip() for piece in pieces if piece.strip())


def check_finite(weights: torch.Tensor | np.ndarray, what: str) -> None:
    """Raise ValueError when attention weights hold NaN or infinity (a drawing or a page of them would be blank)."""
    finite = np.isfinite(weights).all() if isinstance(weights, np.ndarray) else bool(torch.isfinite(weights).all())
    if not finite:
        raise ValueError(
            f"The {what} attention weights are not finite numbers (NaN or infinity): the model computes no "
            "attention to show. Check its weights (a training run that diverged, or a float16 overflow)."
        )


def _check_length(what: str, length: int, max_tokens: int | None) -> None:
    if max_tokens is not None and length > max_tokens:
        raise HeatmapTooLarge(
            f"The {what} is {length} tokens, more than max_tokens={max_tokens} per heatmap axis; shorten it, pass "
            f"truncate=True to draw its first {max_tokens} tokens, or raise max_tokens (at most {MAX_TOKENS_LIMIT}).",
            f"--{what} is {length} tokens, more than the cap of {max_tokens} per heatmap axis (--max-tokens); "
            f"shorten it, pass --truncate to draw its first {max_tokens} tokens, or raise --max-tokens (at most "
            f"{MAX_TOKENS_LIMIT}).",
        )


def _decoder_inputs(
    model, tokenizer, inputs: dict, target: str | None, max_new_tokens: int, limit: dict
) -> torch.Tensor:
    """(1, T) decoder inputs: the start token, then the target (given, or generated greedily), without its last
    token, which no row needs as input. `limit` holds the tokenizer's truncation arguments."""
    sequence = _target_sequence(model, tokenizer, inputs, target, max_new_tokens, limit)
    return sequence[:, :-1] if sequence.shape[1] > 1 else sequence


def _target_sequence(
    model, tokenizer, inputs: dict, target: str | None, max_new_tokens: int, limit: dict
) -> torch.Tensor:
    """(1, 1 + N): the decoder's start token, then the N target tokens, given or generated greedily."""
    config = model.config
    start = config.decoder_start_token_id if config.decoder_start_token_id is not None else config.bos_token_id
    if target is not None:
        labels = tokenizer(text_target=target, return_tensors="pt", **limit)["input_ids"]
        labels = labels.to(inputs["input_ids"].device)
        if labels.shape[1] == 0:
            raise ValueError("The target text is empty.")
        return torch.cat([labels.new_full((1, 1), start), labels], dim=1)
    if not hasattr(model, "generate") or not model.can_generate():
        raise ValueError(f"{type(model).__name__} cannot generate a target: pass target=... or use a ...ForSeq2SeqLM.")
    return model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1)


def _forward_with_attentions(model, inputs: dict):
    """Forward pass returning attention weights; switches a fused-backend HF model to eager for this call only."""
    outputs = model(**inputs, output_attentions=True, return_dict=True)
    names = ("attentions", "encoder_attentions", "cross_attentions")  # a recurrent model has only the last
    returned = [getattr(outputs, name, None) for name in names]
    if any(weights and weights[0] is not None for weights in returned):  # a fused kernel returns None weights
        return outputs
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        return model(**inputs, output_attentions=True, return_dict=True)
    finally:
        model.set_attn_implementation(previous)


def _check_index(name: str, index: int, size: int, what: str | None = None) -> int:
    """`index` into `size` items (negative from the end) as a non-negative index, or a ValueError naming `what`."""
    if not -size <= index < size:
        counted = f"{size} {what}" if what else f"{size}"
        raise ValueError(f"{name}={index} is out of range: the model has {counted} (valid: {-size} … {size - 1}).")
    return index % size


def _num_heads(config) -> int | None:
    """The number of attention heads, when the config names it (most do, through their attribute maps)."""
    heads = getattr(config, "num_attention_heads", None)
    return heads if isinstance(heads, int) and heads > 0 else None


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
) -> Figure:
    """One heatmap panel per head in a grid (weights (H, Q, K)), or a single panel (weights (Q, K))."""
    panels = weights if weights.ndim == 3 else weights[None]
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
        type=_head,
        default=None,
        help="head index, or 'mean' for the average over heads (default: one panel per head)",
    )
    parser.add_argument("--kind", choices=KINDS, default="self", help="which attention (default: %(default)s)")
    parser.add_argument("--target", default=None, help="target text for --kind decoder/cross (default: generate)")
    parser.add_argument("--max-new-tokens", type=_positive_int(), default=20, help="length of a generated target")
    parser.add_argument(
        "--max-tokens",
        type=_positive_int(MAX_TOKENS_LIMIT),
        default=MAX_TOKENS,
        help=f"most tokens per axis, up to {MAX_TOKENS_LIMIT}; a longer text is refused unless "
        "--truncate (default: %(default)s)",
    )
    parser.add_argument("--truncate", action="store_true", help="draw the first --max-tokens tokens of a longer text")
    parser.add_argument("--trust-remote-code", action="store_true", help="load code shipped with the checkpoint")
    parser.set_defaults(run=_run_attention_map)


def _head(value: str) -> int | str:
    if value == "mean":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a head index (an integer) or 'mean', got {value!r}") from None


def _positive_int(largest: int | None = None) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = 0
        if number < 1 or (largest is not None and number > largest):
            allowed = f"1 … {largest}" if largest is not None else "a positive integer"
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {value!r}")
        return number

    return parse


def load_model_and_tokenizer(directory: str | Path, *, trust_remote_code: bool = False):
    """The model of a checkpoint folder with the head that fits its family, and its tokenizer.

    Raises:
        ValueError: When `directory` is a local path but not a checkpoint folder with a tokenizer.
    """
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    directory = check_checkpoint(directory, argument="directory", tokenizer=True)
    config = AutoConfig.from_pretrained(directory, trust_remote_code=trust_remote_code)
    if getattr(config, "is_encoder_decoder", False):
        auto = AutoModelForSeq2SeqLM  # generate() is needed to draw a target
    elif getattr(config, "is_decoder", False) or any(a.endswith("ForCausalLM") for a in config.architectures or ()):
        auto = AutoModelForCausalLM
    else:
        auto = AutoModel
    model = auto.from_pretrained(directory, trust_remote_code=trust_remote_code)
    tokenizer = AutoTokenizer.from_pretrained(directory, trust_remote_code=trust_remote_code)
    return model, tokenizer


def _run_attention_map(args: argparse.Namespace) -> int:
    # Everything that can be checked without the model is checked before loading it.
    check_text_argument("--text", args.text)
    check_text_argument("--target", args.target)
    if not args.text.strip():
        raise ValueError("--text is empty: there are no tokens to draw attention between.")
    if args.target is not None and args.kind == "self":
        raise ValueError(
            "--target is only drawn with --kind decoder or --kind cross (the decoder attention of an "
            "encoder-decoder model); --kind self draws the text's self-attention."
        )
    if args.target is not None and not args.target.strip():
        raise ValueError("--target is empty: pass a target text, or leave --target out to generate one.")
    try:
        out = output_path(args.out)
    except ValueError as error:
        raise ValueError(f"--out: {error}") from None
    folder = check_checkpoint(args.model, argument="--model", tokenizer=True)
    model, tokenizer = load_model_and_tokenizer(folder, trust_remote_code=args.trust_remote_code)
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
    return 0
