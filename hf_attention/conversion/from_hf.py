"""Load real pretrained weights into the from-scratch code: GPT-2, Llama, BERT, BART, Marian and T5.

`from_hf(model)` reads an instance of one of the reference classes below, builds the hf_attention config that
describes the same network (every difference from the 2017 paper is a named config knob, never a special case here),
copies the weights under our module names and returns the equivalent hf_attention model:

| reference class                        | hf_attention class        |
|----------------------------------------|---------------------------|
| GPT2LMHeadModel, LlamaForCausalLM      | HFAttentionForCausalLM    |
| GPT2ForSequenceClassification,         | HFAttentionDecoderFor-    |
| LlamaForSequenceClassification         | SequenceClassification    |
| BertModel                              | HFAttentionEncoderModel   |
| BertForMaskedLM                        | HFAttentionForMaskedLM    |
| BartForConditionalGeneration,          | HFAttentionForSeq2SeqLM   |
| MarianMTModel, T5ForConditionalGeneration |                        |

Every parameter of the new model gets a value from the reference (no silently random weights), every reference
weight is used or explicitly dropped with a reason, and options the code cannot express raise a ValueError that names
them. `hf-attention convert SRC DST` does the same for a checkpoint folder (or Hub id), or a llama.cpp file
(`model.gguf`, read by from_gguf.py), and writes a checkpoint that loads with the Auto classes, by the rules of
destinations.py: never over the source or the current folder, and over an existing checkpoint at DST only with
`--overwrite`.

What an architecture's names mean lives in its module of architectures/ (its converter, `to_ours`, which to_hf.py
reads backwards); this module holds what every architecture shares: the checks around a converter, the choice of
class for a checkpoint, and the command.

This module is not shipped with checkpoints: it may import anything.
"""

import argparse
import copy
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from torch import Tensor
from transformers import AutoConfig, AutoTokenizer, PreTrainedModel

from ..architectures import REGISTRY, by_model_type, by_reference_class
from ..architectures.weights import Weights
from ..commands.destinations import check_destination
from ..commands.paths import TOKENIZER_FILES, check_checkpoint
from .from_gguf import check_gguf_file, describe, gguf_tokenizer, is_gguf_path, load_gguf

logger = logging.getLogger(__name__)

# Still importable from here, where it was defined before the architectures had modules of their own.
_Weights = Weights

# Reference class → its architecture's converter, in the registry's order. Exact classes only: a subclass may change
# the forward pass in ways a weight copy cannot see.
CONVERTERS: dict[type, Callable] = {
    reference_class: architecture.to_ours
    for architecture in REGISTRY.values()
    for reference_class in architecture.classes.values()
}


def from_hf(model: PreTrainedModel) -> PreTrainedModel:
    """Build the hf_attention model equivalent to a Hugging Face reference model, with its weights.

    Args:
        model: An instance of GPT2LMHeadModel, LlamaForCausalLM, GPT2ForSequenceClassification,
            LlamaForSequenceClassification, BertModel, BertForMaskedLM, BartForConditionalGeneration, MarianMTModel or
            T5ForConditionalGeneration.

    Returns:
        The hf_attention model (same dtype, device, attention backend and generation config), in the reference's
        train/eval mode.

    Raises:
        ValueError: For another model class (a PEFT wrapper: saying to merge its adapters first), a model whose
            weights are on the meta device, or an option of a supported one that hf_attention cannot express.
    """
    convert = CONVERTERS.get(type(model))
    if convert is None:
        supported = ", ".join(cls.__name__ for cls in CONVERTERS)
        raise ValueError(
            f"from_hf: {type(model).__name__} is not supported; supported classes are {supported}."
            + peft_hint(model, "from_hf")
        )
    check_not_on_meta(model, "from_hf")
    weights = Weights(model)
    model_class, config, dropped = convert(model, weights)
    # Several architectures compute the same function (a Mistral without a window is a Llama): the converted model
    # remembers which one it was, and `to_hf(..., to="auto")` writes that one back.
    config.converted_from = by_reference_class(type(model)).name
    for key, reason in weights.check_all_used(dropped):
        logger.warning("from_hf: dropping %s (%s).", key, reason)
    parameter = next(model.parameters())
    converted = model_class(config).to(dtype=parameter.dtype, device=parameter.device)
    implementation = model.config._attn_implementation
    if implementation in ("eager", "sdpa"):
        converted.set_attn_implementation(implementation)
    _load(converted, weights.out)
    if model.can_generate():
        converted.generation_config = copy.deepcopy(model.generation_config)
    return converted.train(model.training)


def peft_hint(model, caller: str) -> str:
    """What to do with a PEFT wrapper (a PeftModel around a supported model), as the end of a refusal; "" for any
    other model. peft is looked up only where it was imported already: a model cannot be a PeftModel without it."""
    peft = sys.modules.get("peft")
    if peft is None or not isinstance(model, getattr(peft, "PeftModel", ())):
        return ""
    base = type(model.get_base_model()).__name__
    return (
        f" This is a PEFT {type(model).__name__} (adapters on a {base}): call `model = model.merge_and_unload()` "
        f"first, which folds the adapters (LoRA and the other adapters that merge) into the {base}'s weights, and "
        f"pass that {base} to {caller}."
    )


def check_not_on_meta(model: PreTrainedModel, caller: str) -> None:
    """ValueError when a tensor of `model` is on the meta device (built under `torch.device("meta")` or accelerate's
    `init_empty_weights`): it has a shape but no values to convert, and comparing it fails deep inside torch."""
    tensors = (*model.named_parameters(), *model.named_buffers())
    empty = [name for name, tensor in tensors if tensor.is_meta]
    if empty:
        name = type(model).__name__
        # (init_empty_weights leaves the buffers where they were: every parameter on meta is "the weights")
        which = (
            f"the weights of this {name} are"
            if all(parameter.is_meta for parameter in model.parameters())
            else f"{len(empty)} of the {len(tensors)} tensors of this {name} (the first: {empty[0]}) are"
        )
        raise ValueError(
            f'{caller}: {which} on the meta device (built under `torch.device("meta")` or `init_empty_weights()`): '
            "they have shapes but no values to convert. Load the weights first (`from_pretrained`, or "
            f"`load_state_dict(..., assign=True)`), then call {caller} again."
        )


def _load(model: PreTrainedModel, state_dict: dict[str, Tensor]) -> None:
    """Load `state_dict` and prove that every parameter and buffer of `model` received a reference value."""
    missing, unexpected = model.load_state_dict(state_dict, strict=False)
    if unexpected:
        raise RuntimeError(f"from_hf produced weights the model does not have: {unexpected}")
    ours = model.state_dict()
    loaded = {ours[key].data_ptr() for key in state_dict}
    untouched = [key for key in missing if ours[key].data_ptr() not in loaded]  # a tied alias counts as loaded
    if untouched:
        raise RuntimeError(f"from_hf left these weights at their random initialisation: {untouched}")
    # Two reference tensors loaded into one tied parameter would silently overwrite each other: check every value.
    changed = [key for key, value in state_dict.items() if not torch.equal(ours[key], value.to(ours[key].dtype))]
    if changed:
        raise RuntimeError(f"from_hf: weights changed while loading (tied to another tensor?): {changed}")


# ---------------------------------------------------------------------------------------------------------------------
# Command line: hf-attention convert SRC DST


def load_reference(source: str) -> PreTrainedModel:
    """Load a GPT-2, Llama, BERT, BART, Marian or T5 checkpoint (folder or Hub id) with the class `from_hf` takes.

    BERT checkpoints saved with an MLM head (`BertForMaskedLM`, `BertForPreTraining`) load as BertForMaskedLM,
    others as BertModel; GPT-2 and Llama checkpoints saved as sequence classifiers load as their
    ForSequenceClassification class (each architecture's `checkpoint_classes`).
    """
    config = AutoConfig.from_pretrained(source)
    architecture = by_model_type(config.model_type)
    if architecture is None:
        supported = ", ".join(a.model_type for a in REGISTRY.values())
        raise ValueError(f"{source}: model_type {config.model_type!r} is not supported; supported: {supported}.")
    reference_class = architecture.checkpoint_class(" ".join(config.architectures or []))
    return reference_class.from_pretrained(source, dtype="auto")


def convert_checkpoint(source: str, destination: str | os.PathLike, *, overwrite: bool = False) -> PreTrainedModel:
    """Convert a reference checkpoint into an hf_attention checkpoint (weights, config, generation config and, when
    the source has one that loads, its tokenizer).

    `source` is a checkpoint folder, a Hub id, or a llama.cpp file: a name ending in .gguf (`_convert_gguf`).

    The checkpoint is written to a temporary folder next to `destination` and renamed into place once complete, so
    that a failure never leaves a half-written checkpoint.

    Raises:
        ValueError: Before loading anything, when `source` is a local path that is not a checkpoint folder (or not
            a GGUF file hf-attention reads: from_gguf.check_gguf_file), or when `destination` is not UTF-8, is the
            source, inside it or holds it, is the current folder or holds it, is a file, or is a non-empty folder
            (replaced only when it holds only a checkpoint and `overwrite` is true); and before the swap, when the
            folder was filled meanwhile.
    """
    if is_gguf_path(source):
        return _convert_gguf(source, destination, overwrite)
    source = check_checkpoint(source, argument="source")
    target = check_destination(destination, source=source, overwrite=overwrite)
    _check_weight_files(source)
    converted = from_hf(load_reference(source))

    def write(folder: Path) -> None:
        converted.save_pretrained(folder)
        # AutoTokenizer builds an empty tokenizer for a folder without tokenizer files: check for them first.
        if os.path.isdir(source) and not any(os.path.exists(os.path.join(source, name)) for name in TOKENIZER_FILES):
            logger.warning("No tokenizer copied: %s holds no tokenizer files.", source)
            return
        try:
            AutoTokenizer.from_pretrained(source).save_pretrained(folder)
        except (OSError, ValueError, TypeError) as error:  # e.g. a Hub repo with weights only: not an error
            logger.warning("No tokenizer copied from %s: %s", source, error)

    target.write(write)
    return converted


def _convert_gguf(source: str | os.PathLike, destination: str | os.PathLike, overwrite: bool) -> PreTrainedModel:
    """`convert_checkpoint` for a llama.cpp file: transformers' float32 model of it, converted, with its tokenizer.

    The config records the file and its quantization (`converted_from_gguf`); the GGUF `quantization_config` of
    transformers' model is not carried over (the weights written are plain float32)."""
    file = check_gguf_file(source, argument="source")
    target = check_destination(destination, source=str(file.path), overwrite=overwrite)
    converted = from_hf(load_gguf(file))
    converted.config.converted_from_gguf = file.provenance()
    logger.info("Converted %s", describe(converted.config.converted_from_gguf))
    tokenizer = gguf_tokenizer(file)

    def write(folder: Path) -> None:
        converted.save_pretrained(folder)
        if tokenizer is not None:
            tokenizer.save_pretrained(folder)

    target.write(write)
    return converted


def _check_weight_files(source: str) -> None:
    """Raise ValueError naming the file when a safetensors file of a local source cannot be read (truncated, not
    safetensors): transformers' own error names neither the file nor the cause."""
    if not os.path.isdir(source):
        return
    for path in sorted(Path(source).glob("*.safetensors")):
        try:
            with safe_open(path, framework="pt") as weights:
                weights.keys()
        except (SafetensorError, OSError) as error:
            raise ValueError(
                f"source weights {path} cannot be read ({error}); the file is damaged or was not copied whole."
            ) from None


def add_convert_command(subparsers: argparse._SubParsersAction) -> None:
    """Register `hf-attention convert SRC DST`."""
    parser = subparsers.add_parser(
        "convert",
        help="import a GPT-2, Llama, BERT, BART, Marian or T5 checkpoint, or a llama.cpp file, into hf_attention",
        description="Convert a Hugging Face GPT-2, Llama, BERT, BART, Marian or T5 checkpoint into an hf_attention "
        "checkpoint with the same outputs, loadable with the Auto classes. A llama.cpp file (NAME.gguf) is read "
        "through transformers, its weights dequantized to float32.",
    )
    parser.add_argument(
        "source",
        help="local checkpoint folder, a llama.cpp file (a name ending in .gguf), or a Hub id when the network is "
        "available",
    )
    parser.add_argument(
        "destination",
        help="new or empty folder to write the hf_attention checkpoint to (not the source, nor the current folder or "
        "one holding it)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace DESTINATION if it holds a model checkpoint and nothing else (any other file is refused, "
        "naming it); the new checkpoint is written beside it and swapped in when complete, keeping the folder's "
        "permissions",
    )
    parser.set_defaults(run=_run_convert)


def _run_convert(args: argparse.Namespace) -> int:
    model = convert_checkpoint(args.source, args.destination, overwrite=args.overwrite)
    print(f"Wrote {type(model).__name__} ({model.num_parameters():,} parameters) to {args.destination}")
    provenance = getattr(model.config, "converted_from_gguf", None)
    if provenance is not None:
        print(f"from {describe(provenance)}")
    return 0
