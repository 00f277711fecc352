"""Attention maps: what the heatmaps (hf_attention.inspection.heatmaps) and the explorer page
(hf_attention.inspection.explorer) show, got once for both: the input checks, the tokens, one forward pass with
`output_attentions=True`, and the token labels.

Notation: H heads, Q queries (rows), K keys (columns), L layers.

Kinds of attention: "self" (the encoder's, or a decoder-only model's), "decoder" (the decoder self-attention of an
encoder-decoder model) and "cross" (decoder → encoder). For an encoder-decoder model the decoder rows are its inputs:
the start token, then the target (given, or generated greedily) without its last token, so row i is the step that
writes target token i.

The two front ends call these pieces in the order that makes every check fire as early as it can: the arguments
before the tokenizer runs, each sequence's length (against `max_tokens` and the model's positions) as soon as it is
known, their own size caps (a figure's pixels, a page's numbers) before the forward pass. `HeatmapTooLarge` carries the
command line's wording of a size error beside the API's.

Attention sinks (GPT-OSS's learned softmax column, hf-attention's `attention_sinks`): the weights a model returns
leave the sink's column out, as transformers' GPT-OSS returns them, so each row sums to less than 1; what is missing
went to the sink (`sink_weights`), which the heatmaps and the explorer's page draw as a column of their own (the
explorer also returns them beside the weights).

This module is not shipped with checkpoints; it imports neither front end.
"""

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..commands.paths import check_checkpoint, check_text_argument
from ..modeling.placeholder_constraint import sentinel_constraint
from ..modeling.placeholders import SENTINELS, protect_pair, tokenizer_protects

KINDS = ("self", "decoder", "cross")
# Tokens per axis: the default cap (heatmap labels stay legible, drawing one panel takes < 1 GB) and the largest cap
# allowed (~2 GB for one heatmap panel).
MAX_TOKENS = 128
MAX_TOKENS_LIMIT = 200


class HeatmapTooLarge(ValueError):
    """A heatmap or page over the size limits; `cli_message` says the same with the command's flags."""

    def __init__(self, message: str, cli_message: str):
        super().__init__(message)
        self.cli_message = cli_message


# ---------------------------------------------------------------------------------------------------------------------
# Checks of the arguments, against the model's config, before the tokenizer runs


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


def is_int(value) -> bool:
    """An integer, not a bool (True would pass for 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_max_tokens(max_tokens) -> None:
    if not (is_int(max_tokens) and 1 <= max_tokens <= MAX_TOKENS_LIMIT):
        raise ValueError(f"max_tokens={max_tokens!r} is out of range: 1 … {MAX_TOKENS_LIMIT} tokens per axis.")


def check_max_new_tokens(max_new_tokens) -> None:
    if not (is_int(max_new_tokens) and max_new_tokens >= 1):
        raise ValueError(f"max_new_tokens={max_new_tokens!r} must be a positive integer.")


def check_text(text) -> None:
    if not isinstance(text, str) or not text.strip():
        raise ValueError("The text is empty: there are no tokens to show attention between.")


def check_target(model, target) -> None:
    """A target needs a model with a target side (an encoder-decoder), and tokens; None (generate one) is allowed."""
    if target is None:
        return
    if not getattr(model.config, "is_encoder_decoder", False):
        raise ValueError(
            f"target={target!r}: {type(model).__name__} is not an encoder-decoder model, so it has no "
            "target side; leave the target out (the text is all it reads)."
        )
    if not isinstance(target, str) or not target.strip():
        raise ValueError("The target text is empty: pass a target with tokens, or None to generate one.")


def check_index(name: str, index: int, size: int, what: str | None = None) -> int:
    """`index` into `size` items (negative from the end) as a non-negative index, or a ValueError naming `what`."""
    if not -size <= index < size:
        counted = f"{size} {what}" if what else f"{size}"
        raise ValueError(f"{name}={index} is out of range: the model has {counted} (valid: {-size} … {size - 1}).")
    return index % size


def num_heads(config) -> int | None:
    """The number of attention heads, when the config names it (most do, through their attribute maps)."""
    heads = getattr(config, "num_attention_heads", None)
    return heads if isinstance(heads, int) and heads > 0 else None


def num_layers(config, kind: str) -> int | None:
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


def position_limit(config) -> int | None:
    """Most positions the model can take, or None when they are not bounded. An hf-attention config asks its
    positional scheme (`config.position_limit`: a learned table's rows; None for the others and for a recurrent
    model); another model is taken to have a table of `max_position_embeddings` rows, as BART and Marian do."""
    if str(getattr(config, "model_type", "")).startswith("hf_attention"):
        return config.position_limit
    value = getattr(config, "max_position_embeddings", None)
    return value if isinstance(value, int) and value > 0 else None


# ---------------------------------------------------------------------------------------------------------------------
# The tokens, each sequence checked against the caps as soon as it is known


@dataclass(frozen=True)
class Tokens:
    """The token ids the attention is computed on, and the model inputs made of them."""

    source: list[int]  # the text's
    sequence: list[int] | None  # encoder-decoder models: the start token, then the target (given or generated)
    inputs: dict  # for the forward pass; decoder_input_ids are `decoder_inputs`
    protection: "Protection" = field(default_factory=lambda: Protection(None, None, []))

    @property
    def placeholders(self) -> list[tuple[str, str]]:
        """(sentinel, the placeholder it stands for) of a protected text, in order; empty without protection."""
        return list(zip(SENTINELS, self.protection.originals, strict=False))

    @property
    def decoder_inputs(self) -> list[int]:
        """The decoder rows: the sequence without its last token, which no row needs as input."""
        return self.sequence[:-1] if len(self.sequence) > 1 else self.sequence


@dataclass(frozen=True)
class Protection:
    """What a model trained with placeholder protection reads (hf_attention/modeling/placeholders.py): the text and the
    given target with their placeholders as sentinels, and the placeholders (`originals[i]` is sentinel i). Both texts
    None: the tokenizer holds no sentinels, the model reads the text as it is."""

    text: str | None
    target: str | None
    originals: list[str]


def protection(tokenizer, text: str, target: str | None) -> Protection:
    """The text (and target) as the model reads them: protected when the tokenizer holds the sentinels, as the
    translation pipeline protects its sources; a heatmap of the raw text would show tokens the model never sees."""
    if not tokenizer_protects(tokenizer):
        return Protection(None, None, [])
    masked, masked_target, originals = protect_pair(text, target)
    return Protection(masked, masked_target, originals)


@torch.no_grad()
def tokenize(
    model,
    tokenizer,
    text: str,
    *,
    target: str | None,
    max_new_tokens: int,
    max_tokens: int | None,
    truncate: bool,
    target_on_axis: bool = True,
) -> Tokens:
    """The text's tokens and, for an encoder-decoder model, the target's (given, or generated greedily with
    `max_new_tokens`), each checked against `max_tokens` (None: no cap) and the model's positions as soon as it is
    known; `truncate` keeps the first tokens that fit instead. `target_on_axis` False (a heatmap of the encoder's
    self-attention) leaves the target out of the `max_tokens` checks: no axis shows it. A tokenizer that holds the
    placeholder sentinels gets the protected text and target (`protection`), and a generated target is decoded
    under the sentinel constraint, as the translation pipeline does."""
    protected = protection(tokenizer, text, target)
    text = protected.text if protected.text is not None else text
    target = protected.target if protected.target is not None else target
    config = model.config
    is_seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    capped = max_tokens if target_on_axis else None
    if is_seq2seq and target is None and capped is not None and max_new_tokens > capped:  # rows: start + generated
        if not truncate:
            raise HeatmapTooLarge(
                f"max_new_tokens={max_new_tokens} could generate a target longer than max_tokens={capped} per "
                f"heatmap axis; lower max_new_tokens, pass truncate=True, or pass the target.",
                f"--max-new-tokens {max_new_tokens} could generate a target longer than the cap of {capped} "
                f"tokens per heatmap axis (--max-tokens); lower --max-new-tokens, pass --truncate, or pass --target.",
            )
        max_new_tokens = capped
    positions = position_limit(config)
    longest = min((n for n in (max_tokens, positions) if n is not None), default=None)  # what truncation keeps
    truncation = {"truncation": True, "max_length": longest} if truncate and longest is not None else {}
    if truncation:
        max_new_tokens = min(max_new_tokens, longest)
    model.eval()
    device = next(model.parameters()).device
    encoded = tokenizer(text, return_tensors="pt", **truncation).to(device)
    source = encoded["input_ids"][0].tolist()
    if not source:
        raise ValueError(f"The text {text!r} has no tokens: there are no tokens to show attention between.")
    check_length("text", len(source), max_tokens)
    check_positions("text", len(source), positions)
    inputs = {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"]}
    if not is_seq2seq:
        return Tokens(source, None, inputs, protected)
    sequence = target_sequence(model, tokenizer, inputs, target, max_new_tokens, truncation)
    tokens = Tokens(source, sequence[0].tolist(), inputs, protected)
    check_length("target", len(tokens.decoder_inputs), capped)
    check_positions("target", len(tokens.decoder_inputs), positions)
    decoder_ids = torch.tensor([tokens.decoder_inputs], device=device)
    return Tokens(tokens.source, tokens.sequence, {**inputs, "decoder_input_ids": decoder_ids}, protected)


def target_sequence(
    model, tokenizer, inputs: dict, target: str | None, max_new_tokens: int, truncation: dict
) -> torch.Tensor:
    """(1, 1 + N): the decoder's start token, then the N target tokens, given or generated greedily. `truncation`
    holds the tokenizer's truncation arguments."""
    config = model.config
    start = config.decoder_start_token_id if config.decoder_start_token_id is not None else config.bos_token_id
    if target is not None:
        labels = tokenizer(text_target=target, return_tensors="pt", **truncation)["input_ids"]
        labels = labels.to(inputs["input_ids"].device)
        if labels.shape[1] == 0:
            raise ValueError("The target text is empty.")
        return torch.cat([labels.new_full((1, 1), start), labels], dim=1)
    if not hasattr(model, "generate") or not model.can_generate():
        raise ValueError(f"{type(model).__name__} cannot generate a target: pass target=... or use a ...ForSeq2SeqLM.")
    eos = model.generation_config.eos_token_id
    eos = tokenizer.eos_token_id if eos is None else eos
    constraint = sentinel_constraint(
        tokenizer, inputs["input_ids"], eos, max_new_tokens, generation_config=model.generation_config
    )  # None without sentinels
    return model.generate(
        **inputs, max_new_tokens=max_new_tokens, do_sample=False, num_beams=1, logits_processor=constraint
    )


def check_length(what: str, length: int, max_tokens: int | None) -> None:
    if max_tokens is not None and length > max_tokens:
        raise HeatmapTooLarge(
            f"The {what} is {length} tokens, more than max_tokens={max_tokens} per heatmap axis; shorten it, pass "
            f"truncate=True to draw its first {max_tokens} tokens, or raise max_tokens (at most {MAX_TOKENS_LIMIT}).",
            f"--{what} is {length} tokens, more than the cap of {max_tokens} per heatmap axis (--max-tokens); "
            f"shorten it, pass --truncate to draw its first {max_tokens} tokens, or raise --max-tokens (at most "
            f"{MAX_TOKENS_LIMIT}).",
        )


def check_positions(what: str, length: int, limit: int | None) -> None:
    if limit is not None and length > limit:
        raise ValueError(
            f"The {what} is {length} tokens, more than the model's {limit} positions "
            f"(max_position_embeddings={limit}); shorten it (or pass truncate=True / --truncate with "
            f"max_tokens / --max-tokens {limit} or less)."
        )


# ---------------------------------------------------------------------------------------------------------------------
# The forward pass


def attention_layers(model, tokens: Tokens, kinds: tuple[str, ...]) -> dict[str, list[torch.Tensor]]:
    """kind → one (H, Q, K) CPU tensor per layer, for each of `kinds`, from one forward pass on `tokens`."""
    with torch.no_grad():
        outputs = forward_with_attentions(model, tokens.inputs)
    is_seq2seq = bool(getattr(model.config, "is_encoder_decoder", False))
    names = {
        "self": "encoder_attentions" if is_seq2seq else "attentions",
        "decoder": "decoder_attentions",
        "cross": "cross_attentions",
    }
    return {kind: [weights[0].detach().cpu() for weights in getattr(outputs, names[kind])] for kind in kinds}


def forward_with_attentions(model, inputs: dict):
    """Forward pass returning attention weights; switches a fused-backend HF model to eager for this call only.
    (hf-attention models switch to their eager path for such a call by themselves, whatever their backend.)"""
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


def has_attention_sinks(model) -> bool:
    """Whether `model`'s attention has sinks: a parameter named `sinks` in an attention module, as in hf-attention
    models with `attention_sinks=True` and transformers' GPT-OSS."""
    return any(name == "sinks" or name.endswith(".sinks") for name, _ in model.named_parameters())


def sink_weights(weights: torch.Tensor) -> torch.Tensor:
    """The weight each query gave its head's sink, from attention weights that leave the sink out: 1 − the row's
    sum, (…, Q, K) → (…, Q), summed in float64 (clamped at 0: a model without sinks gives rounding errors only)."""
    return (1.0 - weights.double().sum(-1)).clamp(min=0.0).to(weights.dtype)


def check_finite(weights: torch.Tensor | np.ndarray, what: str) -> None:
    """Raise ValueError when attention weights hold NaN or infinity (a drawing or a page of them would be blank)."""
    finite = np.isfinite(weights).all() if isinstance(weights, np.ndarray) else bool(torch.isfinite(weights).all())
    if not finite:
        raise ValueError(
            f"The {what} attention weights are not finite numbers (NaN or infinity): the model computes no "
            "attention to show. Check its weights (a training run that diverged, or a float16 overflow)."
        )


# ---------------------------------------------------------------------------------------------------------------------
# Token labels


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


# ---------------------------------------------------------------------------------------------------------------------
# What both commands (attention-map, explore) share: loading a checkpoint folder and parsing --head and the counts


def load_model_and_tokenizer(directory, *, trust_remote_code: bool = False):
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


def head_argument(value: str) -> int | str:
    """--head: an index, or "mean"."""
    if value == "mean":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a head index (an integer) or 'mean', got {value!r}") from None


def positive_int_argument(largest: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer from 1 to `largest` (None: no upper bound)."""

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


def add_size_arguments(parser: argparse.ArgumentParser, *, verb: str) -> None:
    """The arguments both commands end with: --max-new-tokens, --max-tokens, --truncate (`verb`: what the command does
    with the first tokens of a longer text) and --trust-remote-code."""
    parser.add_argument(
        "--max-new-tokens", type=positive_int_argument(), default=20, help="length of a generated target"
    )
    parser.add_argument(
        "--max-tokens",
        type=positive_int_argument(MAX_TOKENS_LIMIT),
        default=MAX_TOKENS,
        help=f"most tokens per axis, up to {MAX_TOKENS_LIMIT}; a longer text is refused unless "
        "--truncate (default: %(default)s)",
    )
    parser.add_argument(
        "--truncate", action="store_true", help=f"{verb} the first --max-tokens tokens of a longer text"
    )
    parser.add_argument("--trust-remote-code", action="store_true", help="load code shipped with the checkpoint")


def check_text_arguments(args: argparse.Namespace, *, verb: str) -> None:
    """--text and --target as both commands take them: text (no lone surrogates, ...), and --text not empty (`verb`:
    what the command does with attention, for the message)."""
    check_text_argument("--text", args.text)
    check_text_argument("--target", args.target)
    if not args.text.strip():
        raise ValueError(f"--text is empty: there are no tokens to {verb} attention between.")


def load_checked(args: argparse.Namespace, output_path: Callable[[str], Path]) -> tuple:
    """The rest of what both commands check before the model loads (an empty --target, the --out path, which
    `output_path` resolves, and the --model folder), then the model and its tokenizer: (out, folder, model,
    tokenizer)."""
    if args.target is not None and not args.target.strip():
        raise ValueError("--target is empty: pass a target text, or leave --target out to generate one.")
    try:
        out = output_path(args.out)
    except ValueError as error:
        raise ValueError(f"--out: {error}") from None
    folder = check_checkpoint(args.model, argument="--model", tokenizer=True)
    model, tokenizer = load_model_and_tokenizer(folder, trust_remote_code=args.trust_remote_code)
    return out, folder, model, tokenizer
