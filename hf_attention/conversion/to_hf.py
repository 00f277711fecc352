"""Write an hf-attention model as the standard architecture it matches: GPT-2, Llama, BERT, BART, Marian or T5.

The inverse of `convert.from_hf`, built from it rather than beside it. For a target architecture:

1. its own config class is filled from ours (the `reference_config` of its module in architectures/), and the
   reference model is built from it;
2. `from_hf`'s converter for that class reads the reference and says which hf-attention config it is, and which of
   our parameter names each reference tensor becomes (as a view of the reference tensor);
3. when that config equals ours on every field that changes what the network computes, our tensors are copied into
   those views, and the reference model computes what ours computes. Every field that differs stands in the way, and
   is named with the value the architecture needs.

So an import and an export can never disagree about what a knob means: there is one table of correspondences (the
converters), read in both directions. `from_hf(to_hf(m))` gives `m` back bit for bit, and `to_hf(from_hf(ref))` the
reference's state dict.

Two differences are neutral and filled in: a vocabulary bias that the architecture always has (BART/Marian's
`final_logits_bias`, BERT's MLM bias) is written as zeros when our model has none, and BERT's token-type table gets one
row of zeros when our encoder has no token types (BERT always adds row 0). Dropout rates only act in training: those
the architecture cannot hold are reported in a warning, never a refusal. Where the architecture holds copies of one
of our tensors (an untied BART's per-stack embeddings, an untied BERT head's two bias names), each copy gets its
values.

What is particular to an architecture (its classes, its config, where its positions live, what its model card says
about padding) is its module's; this module holds the comparison, the export and the command, which read the registry.

This module is not shipped with checkpoints: it may import anything.
"""

import argparse
import copy
import logging
import os
import re
from pathlib import Path

import torch
import transformers
from torch import Tensor
from transformers import AutoConfig, AutoTokenizer, PreTrainedModel

from ..architectures import REGISTRY, by_reference_class
from ..architectures.base import Architecture
from ..architectures.weights import Weights
from ..commands.destinations import check_destination
from ..commands.paths import TOKENIZER_FILES, check_checkpoint
from ..modeling.configuration_hf_attention import HFAttentionConfigBase
from ..modeling.knobs import KNOBS
from ..modeling.modeling_hf_attention import (
    HFAttentionDecoderForSequenceClassification,
    HFAttentionEncoderModel,
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionForSequenceClassification,
    HFAttentionForTokenClassification,
)
from .from_hf import CONVERTERS, _check_weight_files, check_not_on_meta, peft_hint

logger = logging.getLogger(__name__)

ARCHITECTURES = tuple(REGISTRY)


def _target_classes() -> dict[type, dict[str, type[PreTrainedModel]]]:
    """Our class → the reference class of each architecture that has that head, in the registry's order."""
    targets: dict[type, dict[str, type[PreTrainedModel]]] = {}
    for architecture in REGISTRY.values():
        for ours, theirs in architecture.classes.items():
            targets.setdefault(ours, {})[architecture.name] = theirs
    return targets


_TARGET_CLASSES = _target_classes()

# What each knob's row in the knob table (knobs.py) says to_hf does with it: fields that change only training (a
# difference is reported, not refused), fields that act with one positional scheme only, and fields of the
# vocabulary head, which models without an LM head do not have.
_TRAINING_ONLY = {name for name, knob in KNOBS.items() if knob.to_hf == "training"}
_SCHEME_FIELDS = {name: knob.scheme for name, knob in KNOBS.items() if knob.scheme is not None}
_NEEDS = {name: knob.needs for name, knob in KNOBS.items() if knob.needs is not None}
_LM_HEAD_FIELDS = {name for name, knob in KNOBS.items() if knob.to_hf == "lm_head"}
# The knobs compared: every field of the knob table, the layer counts and the special tokens included.
_COMPARED = tuple(KNOBS)


# ---------------------------------------------------------------------------------------------------------------------
# Comparison


def _neutral(field: str, ours, theirs) -> bool:
    """Differences that change no output: a bias of zeros, BERT's single token-type row of zeros."""
    return (field == "lm_head_bias" and ours is False and theirs is True) or (
        field == "type_vocab_size" and ours == 0 and theirs == 1
    )


def _differences(ours: PreTrainedModel, derived: HFAttentionConfigBase) -> tuple[list[tuple], list[tuple]]:
    """(fields that change the computation, training-only fields) where `derived` differs from our config, each as
    (field, our value, the architecture's value)."""
    c = ours.config
    blocking, training = [], []
    for field in _COMPARED:
        if not hasattr(c, field) or not hasattr(derived, field):
            continue
        mine, theirs = getattr(c, field), getattr(derived, field)
        if _as_list(mine) == _as_list(theirs) or _neutral(field, mine, theirs) or _irrelevant(ours, field):
            continue
        (training if field in _TRAINING_ONLY else blocking).append((field, mine, theirs))
    return blocking, training


def _irrelevant(model: PreTrainedModel, field: str) -> bool:
    """Whether `field` plays no part in `model`'s computation (so the architecture's value does not matter)."""
    c = model.config
    if _SCHEME_FIELDS.get(field, c.position_encoding) != c.position_encoding:
        return True  # e.g. rope_theta of a model without rotary positions
    if field in _NEEDS and getattr(c, _NEEDS[field], None) is None:
        return True  # e.g. the router of a model without experts
    if field == "max_position_embeddings":
        # a scheme without a table takes any length (T5 has no such field), unless a RoPE scaling counts from it
        return c.position_limit is None and getattr(c, "rope_type", "default") == "default"
    return field in _LM_HEAD_FIELDS and model.get_output_embeddings() is None


def _as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


class _Match:
    """One architecture tried against a model: its reference (with random weights), where each of our tensors goes,
    and what stands in the way."""

    def __init__(self, model: PreTrainedModel, architecture: str, reference_class: type[PreTrainedModel]):
        self.architecture = architecture
        # Built in float32 (float64 for a float64 model), whatever the model's dtype: our weights are copied into it
        # exactly, and to_hf casts the result once at the end.
        wide = torch.float64 if next(model.parameters()).dtype == torch.float64 else torch.float32
        try:
            reference_config = REGISTRY[architecture].reference_config(model.config)
            self.reference = reference_class(reference_config).to(wide)
            self.weights = Weights(self.reference)
            model_class, derived, self.dropped = CONVERTERS[reference_class](self.reference, self.weights)
        except Exception as error:  # whatever transformers (or the converter reading its model) raises
            raise _Unbuildable(architecture, error) from error
        if model_class is not type(model):  # the tables above and the converters disagree: a bug, not bad input
            raise RuntimeError(f"to_hf: {reference_class.__name__} converts to {model_class.__name__}")
        self.blocking, self.training_only = _differences(model, derived)
        # Where every tensor goes is settled here, before anything is copied, so that `exportable_as` (which
        # training runs before its first step) refuses whatever `to_hf` would.
        self.zeroed = [] if self.blocking else self._place_every_tensor(model)

    def _place_every_tensor(self, model: PreTrainedModel) -> list[str]:
        """The reference tensors to zero (those the converter drops); raises if one of our tensors has no place in
        the reference, or a reference tensor would get no value (the tables and the converter disagree: a bug)."""
        ours = model.state_dict()
        missing = _not_exported(ours, {name for name in self.weights.out if name in ours})
        if missing:
            raise RuntimeError(f"to_hf: {self.architecture} has no place for {missing}")
        reference_tensors = self.reference.state_dict()
        # Tensors the converter read without mapping them are fixed tables it checked (Marian's sinusoids): kept.
        read = [reference_tensors[key] for key in self.weights.used]
        repeats = [reference_tensors[key] for key in self.weights.repeats]
        covered = {_storage(tensor) for tensor in (*self.weights.out.values(), *read, *repeats)}
        zeroed = []
        for key, tensor in reference_tensors.items():
            if _storage(tensor) in covered:
                continue
            if not any(key.startswith(prefix) for prefix in self.dropped):
                raise RuntimeError(f"to_hf: the {self.architecture} tensor {key} got no value")
            zeroed.append(key)  # e.g. BERT's pooler: no hf-attention output uses it; zeros make it say so
        return zeroed


class _Unbuildable(Exception):
    """A candidate whose reference cannot be built from the config written for it (transformers' own checks, or its
    RoPE code, refuse a combination ours takes): it stands in the way as a whole, for the reason given. The checks
    of our own tables that follow (`_Match`'s RuntimeErrors) are bugs, and are not this."""

    def __init__(self, architecture: str, error: Exception):
        self.architecture = architecture
        self.reason = f"its model cannot be built from this config ({type(error).__name__}: {error})"
        super().__init__(f"{architecture}: {self.reason}")


def _try(model: PreTrainedModel, architecture: str, reference_class: type[PreTrainedModel]) -> "_Match | _Unbuildable":
    """The candidate `architecture` built against `model`, or why it cannot be (the candidate is out, and a message
    that lists the candidates says why)."""
    try:
        return _Match(model, architecture, reference_class)
    except _Unbuildable as unbuildable:
        return unbuildable


def _describe(differences: list[tuple], architecture: str) -> str:
    return "; ".join(f"{field}={mine!r} ({architecture} needs {theirs!r})" for field, mine, theirs in differences)


def _candidates(model: PreTrainedModel) -> dict[str, type[PreTrainedModel]]:
    targets = _TARGET_CLASSES.get(type(model))
    if targets is None:
        exportable = ", ".join(cls.__name__ for cls in _TARGET_CLASSES)
        raise ValueError(
            f"to_hf: {type(model).__name__} has no standard counterpart among {'/'.join(ARCHITECTURES)}; the classes "
            f"that export are {exportable}." + peft_hint(model, "to_hf")
        )
    return targets


def _choose(model: PreTrainedModel, to: str) -> _Match:
    if to != "auto" and to not in ARCHITECTURES:
        raise ValueError(f"to={to!r} is not an architecture; choose one of {', '.join(ARCHITECTURES)} or 'auto'.")
    targets = _candidates(model)
    # (before any reference is built: placing meta tensors, which have no storage, would fail as a bug of ours)
    check_not_on_meta(model, "to_hf")
    if to != "auto":
        if to not in targets:
            raise ValueError(
                f"to_hf: {type(model).__name__} cannot be written as {to}; it has the counterparts "
                f"{', '.join(targets)}."
            )
        match = _try(model, to, targets[to])
        if isinstance(match, _Unbuildable):
            raise ValueError(
                f"to_hf: this {type(model).__name__} cannot be written as {to}: {match.reason}. Nothing was written."
            )
        if match.blocking:
            raise ValueError(
                f"to_hf: this {type(model).__name__} is not a {to} model: {_describe(match.blocking, to)}. "
                "Nothing was written."
            )
        return match
    # The architecture a converted model came from first (`from_hf` records it), then the registry's order; the first
    # that matches is the answer, and the others are not built at all (one may not build from this config).
    source = getattr(model.config, "converted_from", None)
    order = sorted(targets, key=lambda architecture: architecture != source)
    tried = []
    for architecture in order:
        match = _try(model, architecture, targets[architecture])
        if isinstance(match, _Match) and not match.blocking:
            return match
        tried.append(match)
    raise ValueError(_no_architecture_message(model, tried))


def _no_architecture_message(model: PreTrainedModel, tried: list["_Match | _Unbuildable"]) -> str:
    """Why no candidate fits: first the values that no candidate accepts, then each candidate's list (or why it could
    not be built)."""
    names = "/".join(m.architecture for m in tried)
    built = [m for m in tried if isinstance(m, _Match)]
    fields = [{field for field, _, _ in m.blocking} for m in built]
    nowhere = sorted(set.intersection(*fields)) if fields else []
    c = model.config
    lines = [f"to_hf: this {type(model).__name__} matches none of {names}."]
    if nowhere:
        nowhere_values = ", ".join(f"{field}={getattr(c, field)!r}" for field in nowhere)
        # (said of the candidates that were built: of one that was not, it is not known)
        lines.append(f"No standard architecture among {'/'.join(m.architecture for m in built)} has {nowhere_values}.")
    lines += [
        f"{m.architecture}: {_describe(m.blocking, m.architecture) if isinstance(m, _Match) else m.reason}."
        for m in tried
    ]
    return " ".join(lines) + " Nothing was written."


def exportable_as(model: PreTrainedModel, to: str = "auto") -> str:
    """The architecture `to_hf(model, to)` writes; raises what `to_hf` would (the same configuration comparison, the
    same placing of every tensor), without copying weights."""
    return _choose(model, to).architecture


# ---------------------------------------------------------------------------------------------------------------------
# The export


def to_hf(model: PreTrainedModel, to: str = "auto") -> PreTrainedModel:
    """The standard Hugging Face model that computes what `model` computes, with its weights.

    Args:
        model: An HFAttentionForCausalLM or HFAttentionDecoderForSequenceClassification (→ gpt2, llama),
            HFAttentionEncoderModel or HFAttentionForMaskedLM (→ bert) or HFAttentionForSeq2SeqLM (→ bart, marian,
            t5).
        to: One of "gpt2", "llama", "bert", "bart", "marian", "t5", or "auto" for the one that matches.

    Returns:
        A GPT2LMHeadModel, LlamaForCausalLM, …, T5ForConditionalGeneration in `model`'s dtype, device and
        train/eval mode, with `model`'s generation config. It loads and runs without hf_attention.

    Raises:
        ValueError: Before anything is built from the weights, naming every field of the config that the
            architecture cannot express and the value it needs (for "auto": for each candidate, or why its model
            could not be built), or when `model`'s weights are on the meta device.
    """
    match = _choose(model, to)
    if match.training_only:
        logger.warning(
            "to_hf: %s keeps other training-only settings (inference is the same): %s.",
            match.architecture,
            _describe(match.training_only, match.architecture),
        )
    if _shorter_positions(model, match.architecture):
        c = model.config
        logger.warning(
            "to_hf: %s holds positions in a table of max_position_embeddings=%d rows, so the exported model takes "
            "inputs of at most %d tokens (each source and target), where this model's %s positions take any length. "
            "To export for longer inputs, raise max_position_embeddings in this model's config first: it changes "
            "none of this model's outputs.",
            match.architecture,
            c.max_position_embeddings,
            c.max_position_embeddings,
            c.position_encoding,
        )
    reference = match.reference
    _copy_into(model, match)  # float32 (float64) holds every value of a half-precision model exactly
    parameter = next(model.parameters())
    reference.to(dtype=parameter.dtype, device=parameter.device)
    if model.can_generate():
        reference.generation_config = copy.deepcopy(model.generation_config)
    implementation = model.config._attn_implementation
    if implementation in ("eager", "sdpa"):
        try:
            reference.set_attn_implementation(implementation)
        except ValueError:  # a class without SDPA (Gemma 2 caps its scores): its eager computes the same function
            reference.set_attn_implementation("eager")
    return reference.train(model.training)


def _shorter_positions(model: PreTrainedModel, architecture: str) -> bool:
    """Whether the export of `model` as `architecture` takes fewer positions than `model` (a Marian export of
    sinusoidal positions: ours are computed for any position, Marian's are looked up in a table)."""
    return REGISTRY[architecture].position_table and model.config.position_limit is None


def _copy_into(model: PreTrainedModel, match: _Match) -> None:
    """Write every tensor of `model` into the reference through the converter's views, and into the reference
    tensors that repeat them; zero the reference tensors that have no counterpart (neutral differences, dropped
    modules such as BERT's pooler). Where each goes was settled by `match`."""
    ours = model.state_dict()
    weights = match.weights
    reference_tensors = match.reference.state_dict()
    with torch.no_grad():
        for name, view in weights.out.items():
            if name in ours:
                view.copy_(ours[name])
            else:  # a neutral difference: the architecture has a tensor our model lacks
                view.zero_()
        for names, keys, back in weights.rearranged:  # tensors the converter built by more than a view
            values = back({name: ours[name] for name in names})
            for key in keys:
                reference_tensors[key].copy_(values[key])
        for key, source in weights.repeats.items():  # an untied copy (the same tensor when tied)
            if _storage(reference_tensors[key]) != _storage(reference_tensors[source]):
                reference_tensors[key].copy_(reference_tensors[source])
        for key in match.zeroed:
            reference_tensors[key].zero_()


def _storage(tensor: Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def _not_exported(ours: dict[str, Tensor], written: set[str]) -> list[str]:
    """Our tensors whose values reached no reference tensor (a tied alias of a written one counts as written)."""
    storage = {_storage(ours[name]) for name in written}
    return [name for name, tensor in ours.items() if name not in written and _storage(tensor) not in storage]


# ---------------------------------------------------------------------------------------------------------------------
# Command line: hf-attention export --to ARCH SRC DST

# The Auto class that loads an export of each of our classes, for the model card's example.
_AUTO_NAMES = {
    HFAttentionForCausalLM: "AutoModelForCausalLM",
    HFAttentionDecoderForSequenceClassification: "AutoModelForSequenceClassification",
    HFAttentionEncoderModel: "AutoModel",
    HFAttentionForMaskedLM: "AutoModelForMaskedLM",
    HFAttentionForSeq2SeqLM: "AutoModelForSeq2SeqLM",
    HFAttentionForSequenceClassification: "AutoModelForSequenceClassification",
    HFAttentionForTokenClassification: "AutoModelForTokenClassification",
}


def load_hf_attention(source: str) -> PreTrainedModel:
    """Load an hf-attention checkpoint with the class it was saved as (one of those `to_hf` takes). The Auto classes
    know hf-attention's configs: importing this module imported the package, which registers them."""
    config = AutoConfig.from_pretrained(source)
    if not str(config.model_type).startswith("hf_attention"):
        raise ValueError(
            f"{source}: model_type {config.model_type!r} is not an hf-attention checkpoint; `export` writes "
            "hf-attention checkpoints as standard ones (`convert` goes the other way)."
        )
    names = {cls.__name__: cls for cls in _TARGET_CLASSES}
    saved_as = next((name for name in config.architectures or [] if name in names), None)
    if saved_as is None:
        raise ValueError(
            f"{source} was saved as {', '.join(config.architectures or ['(no architectures)'])}; the classes that "
            f"export are {', '.join(names)}."
        )
    return names[saved_as].from_pretrained(source)


def export_checkpoint(
    source: str, destination: str | os.PathLike, *, to: str = "auto", overwrite: bool = False
) -> PreTrainedModel:
    """Write the hf-attention checkpoint `source` as a standard checkpoint (config, safetensors weights, generation
    config, tokenizer, model card) that loads with the Auto classes where hf_attention is not installed.

    The folder is written beside `destination` and renamed into place once complete; a refusal (a config the
    architecture cannot express, a destination that holds other files, is the current folder or is not named in
    UTF-8) comes before anything is written. Before the swap, the written folder is loaded with transformers alone
    (the Auto class of the export) and run on a few tokens: an export that does not run is refused, and nothing is
    left at `destination`.
    """
    source = check_checkpoint(source, argument="source")
    target = check_destination(destination, source=source, overwrite=overwrite)
    _check_weight_files(source)
    exported = to_hf(load_hf_attention(source), to).eval()

    def write(folder: Path) -> None:
        exported.save_pretrained(folder)
        _check_runs_alone(folder, exported)
        has_tokenizer = os.path.isdir(source) and any(
            os.path.exists(os.path.join(source, name)) for name in TOKENIZER_FILES
        )
        if has_tokenizer:
            AutoTokenizer.from_pretrained(source).save_pretrained(folder)
        else:
            logger.warning("No tokenizer copied: %s holds no tokenizer files.", source)
        card = Path(source, "README.md")
        (folder / "README.md").write_text(
            # the name of the folder written (what the user typed may be ".." or end in "/.")
            export_card(exported, target.path.name, card.read_text(encoding="utf-8") if card.is_file() else ""),
            encoding="utf-8",
        )

    target.write(write)
    return exported


def _auto_name(model: PreTrainedModel) -> str:
    """The name of the Auto class that loads an export (`model`: the standard model `to_hf` returned)."""
    architecture = by_reference_class(type(model))
    ours = next(cls for cls, theirs in architecture.classes.items() if theirs is type(model))
    return _AUTO_NAMES[ours]


# The tokens of the forward pass that checks a written export: a few, so that the check costs one step of the model.
_PROBE_LENGTH = 4


def _check_runs_alone(folder: Path, exported: PreTrainedModel) -> None:
    """Load the checkpoint written to `folder` as its users will (transformers' Auto class, from the folder alone)
    and run it on a few tokens: a config that transformers saves but cannot run (a field its forward pass needs,
    written as null) is refused here, before the folder is swapped in, rather than reported as written.

    Raises:
        ValueError: Naming the class, the step that failed and transformers' error.
    """
    auto = _auto_name(exported)
    c = exported.config
    # Token ids inside the vocabulary, and no more positions than a position table holds
    length = max(1, min(_PROBE_LENGTH, getattr(c, "max_position_embeddings", None) or _PROBE_LENGTH))
    ids = (torch.arange(length) % c.vocab_size).unsqueeze(0)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if c.is_encoder_decoder:
        inputs["decoder_input_ids"] = ids
    step = f"{auto}.from_pretrained"
    try:
        loaded = getattr(transformers, auto).from_pretrained(folder, dtype=exported.dtype)
        step = f"a forward pass of the {type(loaded).__name__} it loads on {length} tokens"
        with torch.no_grad():
            loaded.eval()(**inputs)
    except Exception as error:  # whatever transformers raises: the export is not what it should be
        raise ValueError(
            f"export: the {c.model_type} checkpoint written does not run in transformers: {step} failed "
            f"({type(error).__name__}: {error}). Nothing was written. hf-attention wrote a config that "
            "transformers cannot run: please report it, with this model's config.json."
        ) from error


def export_card(model: PreTrainedModel, name: str, source_card: str) -> str:
    """A model card for an exported checkpoint: how to load it, then the hf-attention card it came from."""
    architecture = by_reference_class(type(model))
    auto = _auto_name(model)
    model_type = model.config.model_type
    left_padding_note = architecture.left_padding_note
    body = re.sub(r"\A---\n.*?\n---\n", "", source_card, flags=re.DOTALL).strip()
    lines = [
        "---",
        "library_name: transformers",
        f"tags: [hf-attention, {model_type}]",
        "---",
        "",
        f"# {name} ({type(model).__name__})",
        "",
        f"An hf-attention model written as a standard `{model_type}` checkpoint with `hf-attention export`: it loads "
        "with transformers alone (no `trust_remote_code`, no hf_attention) and computes the same logits and tokens"
        + (" on rows without padding on the left." if left_padding_note else "."),
        *(["", left_padding_note] if left_padding_note else []),
        *_position_table_note(model, architecture),
        "",
        "```python",
        f"from transformers import AutoTokenizer, {auto}",
        "",
        f'tokenizer = AutoTokenizer.from_pretrained("{name}")',
        f'model = {auto}.from_pretrained("{name}")',
        "```",
    ]
    if body:
        lines += ["", "## The model as trained with hf-attention", "", _demote_headings(body)]
    return "\n".join(lines) + "\n"


def _position_table_note(model: PreTrainedModel, architecture: Architecture) -> list[str]:
    """The longest input of an architecture whose positions are rows of a table (Marian's computed sinusoids too)."""
    if not architecture.position_table:
        return []
    rows = model.config.max_position_embeddings
    return [
        "",
        f"Its positions are the rows of a table (`max_position_embeddings`): it takes inputs of at most {rows} "
        "tokens.",
    ]


def _demote_headings(markdown: str) -> str:
    """Nest the source card under one heading (its `#` title becomes `###`)."""
    return re.sub(r"^(#{1,4}) ", r"\1## ", markdown, flags=re.MULTILINE)


def add_export_command(subparsers: argparse._SubParsersAction) -> None:
    """Register `hf-attention export --to ARCH SRC DST`."""
    parser = subparsers.add_parser(
        "export",
        help="write an hf-attention checkpoint as a GPT-2, Llama, BERT, BART, Marian or T5 checkpoint",
        description="Write an hf-attention checkpoint as the standard architecture it matches, loadable by "
        "transformers without hf_attention or trust_remote_code (and by tools that know only standard "
        "architectures). A configuration with no standard equivalent is refused before anything is written, naming "
        "every field in the way.",
    )
    parser.add_argument("source", help="hf-attention checkpoint folder")
    parser.add_argument(
        "destination",
        help="new or empty folder to write the standard checkpoint to (not the source, nor the current folder or one "
        "holding it)",
    )
    parser.add_argument(
        "--to",
        default="auto",
        choices=(*ARCHITECTURES, "auto"),
        help="the architecture to write (default: auto, the one that matches)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace DESTINATION if it holds a model checkpoint and nothing else (any other file is refused, naming "
        "it); the new checkpoint is written beside it and swapped in when complete, keeping the folder's permissions",
    )
    parser.set_defaults(run=_run_export)


def _run_export(args: argparse.Namespace) -> int:
    model = export_checkpoint(args.source, args.destination, to=args.to, overwrite=args.overwrite)
    print(f"Wrote {type(model).__name__} ({model.num_parameters():,} parameters) to {args.destination}")
    return 0
