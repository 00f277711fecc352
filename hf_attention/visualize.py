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

Command line: `hf-attention attention-map --model DIR --text "..." --out map.png` (see `add_attention_map_command`).
This module is outside the remote-code closure (it uses matplotlib).
"""

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .paths import check_checkpoint

KINDS = ("self", "decoder", "cross")


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
        path: Write the figure there as PNG (parents created); None only returns it.
        max_new_tokens: Length limit of a generated target.

    Returns:
        An `AttentionMap` holding the plotted array, the labels and the figure.

    Raises:
        ValueError: On an empty text, an unknown kind, a kind the model does not have (e.g. "cross" on a decoder),
            or a layer / head out of range.
    """
    layers, query_tokens, key_tokens = attention_weights(
        model, tokenizer, text, kind=kind, target=target, max_new_tokens=max_new_tokens
    )
    layer_index = _check_index("layer", layer if layer is not None else -1, len(layers))
    weights = layers[layer_index]  # (H, Q, K)
    if head is None:
        plotted = weights
    elif head == "mean":
        plotted = weights.mean(0)  # (Q, K)
    elif isinstance(head, int) and not isinstance(head, bool):
        plotted = weights[_check_index("head", head, weights.shape[0])]  # (Q, K)
    else:
        raise ValueError(f"head={head!r} is not supported; pass a head index, 'mean' or None (every head).")
    plotted = plotted.float().numpy()
    figure = _draw(plotted, query_tokens, key_tokens, kind=kind, layer=layer_index, head=head)
    if path is not None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=120)
    return AttentionMap(plotted, query_tokens, key_tokens, layer_index, head, kind, figure, path)


@torch.no_grad()
def attention_weights(
    model, tokenizer, text: str, *, kind: str = "self", target: str | None = None, max_new_tokens: int = 20
) -> tuple[list[torch.Tensor], list[str], list[str]]:
    """Every layer's attention weights for one text, with the token labels of their rows and columns.

    Arguments as in `plot_attention`.

    Returns:
        (one (H, Q, K) tensor per layer, Q query labels, K key labels).

    Raises:
        ValueError: As `plot_attention`.
    """
    if kind not in KINDS:
        raise ValueError(f"kind={kind!r} is not supported; allowed values are {', '.join(map(repr, KINDS))}.")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("The text is empty: there are no tokens to draw attention between.")
    config = model.config
    is_seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    if kind != "self" and not is_seq2seq:
        raise ValueError(
            f"kind={kind!r} needs an encoder-decoder model; {type(model).__name__} has only self-attention, "
            "use kind='self'."
        )
    model.eval()
    device = next(model.parameters()).device
    encoded = tokenizer(text, return_tensors="pt").to(device)
    source = encoded["input_ids"][0].tolist()
    inputs = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
    decoder_ids = None
    if is_seq2seq:
        decoder_ids = _decoder_inputs(model, tokenizer, inputs, target, max_new_tokens)
        inputs["decoder_input_ids"] = decoder_ids
    outputs = _forward_with_attentions(model, inputs)
    name = {"self": "encoder_attentions" if is_seq2seq else "attentions", "decoder": "decoder_attentions",
            "cross": "cross_attentions"}[kind]
    layers = [weights[0].detach().cpu() for weights in getattr(outputs, name)]  # L × (H, Q, K)
    source_labels = token_labels(tokenizer, source)
    if kind == "self":
        return layers, source_labels, source_labels
    target_labels = token_labels(tokenizer, decoder_ids[0].tolist())
    return layers, target_labels, target_labels if kind == "decoder" else source_labels


def token_labels(tokenizer, ids: list[int]) -> list[str]:
    """Readable tick labels: byte-level pieces decoded ("Ġthe" → "the"), whitespace shown as "␣", control characters
    escaped, and "$" escaped so that matplotlib does not read it as mathtext."""
    labels = []
    for token in tokenizer.convert_ids_to_tokens(ids):
        label = tokenizer.convert_tokens_to_string([token]).strip() or "␣"
        if not label.isprintable():
            label = repr(label)[1:-1]
        labels.append(label.replace("$", r"\$"))
    return labels


def _decoder_inputs(model, tokenizer, inputs: dict, target: str | None, max_new_tokens: int) -> torch.Tensor:
    """(1, T) decoder inputs: the start token, then the target (given, or generated greedily), without its last
    token, which no row needs as input."""
    config = model.config
    start = config.decoder_start_token_id if config.decoder_start_token_id is not None else config.bos_token_id
    if target is not None:
        labels = tokenizer(text_target=target, return_tensors="pt")["input_ids"].to(inputs["input_ids"].device)
        if labels.shape[1] == 0:
            raise ValueError("The target text is empty.")
        return torch.cat([labels.new_full((1, 1), start), labels[:, :-1]], dim=1)
    if not hasattr(model, "generate") or not model.can_generate():
        raise ValueError(f"{type(model).__name__} cannot generate a target: pass target=... or use a ...ForSeq2SeqLM.")
    generated = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1)
    return generated[:, :-1] if generated.shape[1] > 1 else generated


def _forward_with_attentions(model, inputs: dict):
    """Forward pass returning attention weights; switches a fused-backend HF model to eager for this call only."""
    outputs = model(**inputs, output_attentions=True, return_dict=True)
    attentions = getattr(outputs, "attentions", None) or getattr(outputs, "encoder_attentions", None)
    if attentions:
        return outputs
    previous = model.config._attn_implementation
    model.set_attn_implementation("eager")
    try:
        return model(**inputs, output_attentions=True, return_dict=True)
    finally:
        model.set_attn_implementation(previous)


def _check_index(name: str, index: int, size: int) -> int:
    if not -size <= index < size:
        raise ValueError(f"{name}={index} is out of range: the model has {size} (valid: {-size} … {size - 1}).")
    return index % size


def _draw(weights: np.ndarray, query_tokens: list[str], key_tokens: list[str], *, kind: str, layer: int,
          head: int | str | None) -> Figure:
    """One heatmap panel per head in a grid (weights (H, Q, K)), or a single panel (weights (Q, K))."""
    panels = weights if weights.ndim == 3 else weights[None]
    columns = min(len(panels), 4)
    rows = math.ceil(len(panels) / columns)
    side = max(3.5, 0.28 * max(len(query_tokens), len(key_tokens)) + 1.5)  # inches: room for one label per token
    figure = Figure(figsize=(side * columns + 1, side * rows + 0.5), layout="constrained")
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
        "attention-map", help="draw an attention heatmap of a checkpoint folder to PNG",
        description="Draw the attention weights of one layer of a saved model as a queries × keys heatmap.",
    )
    parser.add_argument("--model", required=True, help="checkpoint folder (model, config and tokenizer)")
    parser.add_argument("--text", required=True, help="input text (the source for an encoder-decoder model)")
    parser.add_argument("--out", default="attention_map.png", help="PNG file to write (default: %(default)s)")
    parser.add_argument("--layer", type=int, default=None, help="layer index, negative from the end (default: last)")
    parser.add_argument("--head", default=None,
                        help="head index, or 'mean' for the average over heads (default: one panel per head)")
    parser.add_argument("--kind", choices=KINDS, default="self", help="which attention (default: %(default)s)")
    parser.add_argument("--target", default=None, help="target text for --kind decoder/cross (default: generate)")
    parser.add_argument("--max-new-tokens", type=int, default=20, help="length of a generated target")
    parser.add_argument("--trust-remote-code", action="store_true", help="load code shipped with the checkpoint")
    parser.set_defaults(run=_run_attention_map)


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
    head = args.head
    if head is not None and head != "mean":
        try:
            head = int(head)
        except ValueError:
            raise SystemExit(f"--head must be an integer or 'mean', got {head!r}") from None
    folder = check_checkpoint(args.model, argument="--model", tokenizer=True)
    model, tokenizer = load_model_and_tokenizer(folder, trust_remote_code=args.trust_remote_code)
    result = plot_attention(model, tokenizer, args.text, layer=args.layer, head=head, kind=args.kind,
                            target=args.target, path=args.out, max_new_tokens=args.max_new_tokens)
    print(f"wrote {result.path}: layer {result.layer}, {len(result.query_tokens)} × {len(result.key_tokens)} tokens")
    return 0
