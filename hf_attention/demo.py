"""`hf-attention demo`: build one small model of each family, save it, reload it through the Auto classes, use it.

This is the project's end-to-end smoke run: it exercises what a user does first (from_config, save_pretrained,
from_pretrained, forward, generate) and checks that the reloaded model computes exactly what the saved one did.
"""

import argparse
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM

from .configuration_hf_attention import HFAttentionDecoderConfig, HFAttentionEncoderConfig, HFAttentionSeq2SeqConfig

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


def run_demo(output_dir: Path | None = None) -> dict[str, float]:
    """Run the demo; returns each family's save→load logit difference (all must be 0)."""
    torch.manual_seed(0)
    root = Path(output_dir or tempfile.mkdtemp(prefix="hf_attention_demo_"))
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
    print(f"checkpoints (safetensors + config with auto_map + model code) in {root}")
    return differences


def add_demo_command(subparsers: argparse._SubParsersAction) -> None:
    """Register `hf-attention demo`."""
    parser = subparsers.add_parser("demo", help="build, save, reload and run one small model of each family")
    parser.add_argument("--output-dir", type=Path, default=None, help="where to leave the checkpoints")
    parser.set_defaults(run=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    if args.output_dir is not None:
        existing = next(p for p in (args.output_dir, *args.output_dir.parents) if p.exists())  # "." at worst
        if not existing.is_dir():
            raise ValueError(f"--output-dir {args.output_dir}: {existing} is a file, not a folder.")
    run_demo(args.output_dir)
    return 0
