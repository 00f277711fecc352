"""`hf-attention demo`: build one small model of each family, save it, reload it through the Auto classes, use it.

This is the project's end-to-end smoke run: it exercises what a user does first (from_config, save_pretrained,
from_pretrained, forward, generate) and checks that the reloaded model computes exactly what the saved one did.

With `--output-dir DIR` the checkpoints are left in DIR/decoder, DIR/encoder and DIR/seq2seq, by the rules of
destinations.py: DIR must be new or empty, or, with `--overwrite`, hold nothing but an earlier demo's checkpoints.
"""

import argparse
import os
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM

from ..modeling.configuration_hf_attention import (
    HFAttentionDecoderConfig,
    HFAttentionEncoderConfig,
    HFAttentionSeq2SeqConfig,
)
from .checkpoint_files import listing, not_only_a_checkpoint
from .destinations import Output, check_destination

SMALL = {
    "vocab_size": 1000,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "hidden_dropout_prob": 0.0,
}


def _round_trip(model, auto_class, folder: Path, inputs: dict) -> tuple[object, float]:
    """Save, reload with `auto_class`, and return the reloaded model and the largest logit difference."""
    model.eval().save_pretrained(folder)
    reloaded = auto_class.from_pretrained(folder)
    with torch.no_grad():
        difference = (model(**inputs).logits - reloaded(**inputs).logits).abs().max().item()
    return reloaded, difference


# The subfolders a demo writes, one checkpoint each.
FAMILIES = ("decoder", "encoder", "seq2seq")


def _not_only_demo_output(folder: Path) -> str | None:
    """What in `folder` is not an earlier demo's output, in a few words; None when it is one (or part of one)."""
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir())
    others = [name for name in names if name.removesuffix("/") not in FAMILIES or not name.endswith("/")]
    if others:
        return f"it also holds {listing(others)}"
    for name in names:
        foreign = not_only_a_checkpoint(folder / name)
        if foreign:
            return f"{name} is not only a model checkpoint: {foreign}"
    return None


DEMO_OUTPUT = Output(
    "an earlier demo's checkpoints",
    f"the subfolders {', '.join(f'{family}/' for family in FAMILIES)}, each a model checkpoint",
    _not_only_demo_output,
)


def run_demo(output_dir: str | os.PathLike | None = None, *, overwrite: bool = False) -> dict[str, float]:
    """Run the demo; returns each family's save→load logit difference (all must be 0).

    The checkpoints go to a new temporary folder, or to `output_dir`, which is checked before anything is built: it
    must be new or empty, or hold an earlier demo's checkpoints and nothing else, which `overwrite` replaces. They are
    swapped in only once all three reload exactly.
    """
    if output_dir is None:
        root = Path(tempfile.mkdtemp(prefix="hf_attention_demo_"))
        differences = _build_save_and_reload(root)
    else:
        destination = check_destination(output_dir, argument="--output-dir", output=DEMO_OUTPUT, overwrite=overwrite)
        differences = {}
        destination.write(lambda folder: differences.update(_build_save_and_reload(folder)))
        root = destination.path
    print(f"checkpoints (safetensors + config with auto_map + model code) in {root}")
    return differences


def _build_save_and_reload(root: Path) -> dict[str, float]:
    """Build, save into `root`, reload and use one model of each family; raise unless each reloads exactly."""
    torch.manual_seed(0)
    prompt = torch.tensor([[1, 17, 256, 42, 7], [1, 99, 3, 512, 64]])
    differences = {}

    decoder = AutoModelForCausalLM.from_config(
        HFAttentionDecoderConfig(
            num_hidden_layers=2,
            position_encoding="rotary",
            norm_position="pre",
            norm_type="rmsnorm",
            hidden_act="swiglu",
            num_key_value_heads=2,
            **SMALL,
        )
    )
    decoder, differences["decoder"] = _round_trip(
        decoder, AutoModelForCausalLM, root / "decoder", {"input_ids": prompt}
    )
    tokens = decoder.generate(prompt, max_new_tokens=8, do_sample=False, eos_token_id=None)
    print(f"decoder  ({type(decoder).__name__}, rotary, GQA): greedy continuation {tokens[0, 5:].tolist()}")

    encoder = AutoModelForMaskedLM.from_config(HFAttentionEncoderConfig(num_hidden_layers=2, **SMALL))
    encoder, differences["encoder"] = _round_trip(
        encoder, AutoModelForMaskedLM, root / "encoder", {"input_ids": prompt}
    )
    with torch.no_grad():
        guess = encoder(prompt).logits[0, 2].argmax().item()
    print(f"encoder  ({type(encoder).__name__}, sinusoidal, post-norm): prediction at position 2 is token {guess}")

    seq2seq = AutoModelForSeq2SeqLM.from_config(
        HFAttentionSeq2SeqConfig(encoder_layers=2, decoder_layers=2, position_encoding="sinusoidal", **SMALL)
    )
    seq2seq, differences["seq2seq"] = _round_trip(
        seq2seq, AutoModelForSeq2SeqLM, root / "seq2seq", {"input_ids": prompt, "decoder_input_ids": prompt[:, :3]}
    )
    tokens = seq2seq.generate(prompt, max_new_tokens=8, num_beams=4, eos_token_id=None)
    print(f"seq2seq  ({type(seq2seq).__name__}, 2017 Transformer): beam-search output {tokens[0].tolist()}")

    for family, difference in differences.items():
        print(f"{family:8s} save → from_pretrained: max |Δlogit| = {difference:.1e}")
        if difference != 0.0:
            raise RuntimeError(f"{family}: the reloaded model differs from the saved one by {difference}")
    return differences


def add_demo_command(subparsers: argparse._SubParsersAction) -> None:
    """Register `hf-attention demo`."""
    parser = subparsers.add_parser(
        "demo",
        help="build, save, reload and run one small model of each family",
        description="Build, save, reload through the Auto classes and run one small model of each family (decoder, "
        "encoder, seq2seq), and check that each reloaded model computes exactly what the saved one did.",
    )
    parser.add_argument(
        "--output-dir",
        default=None,
        metavar="DIR",
        help="new or empty folder to leave the checkpoints in, as DIR/decoder, DIR/encoder and DIR/seq2seq (not the "
        "current folder, nor one holding it); default: a new temporary folder",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier demo's checkpoints in --output-dir: a folder holding only the subfolders "
        "decoder/, encoder/ and seq2seq/, each a model checkpoint (anything else is refused, naming it); the new "
        "checkpoints are written beside it and swapped in when complete",
    )
    parser.set_defaults(run=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    run_demo(args.output_dir, overwrite=args.overwrite)
    return 0
