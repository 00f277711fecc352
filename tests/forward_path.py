"""How far one call wanders through the package: the files and functions it visits, and how often it hops between
files.

The rule: under `sys.settrace`, every 'call' and 'return' event of a frame whose code lives in the hf_attention package
is an event of that file; a transition is such an event whose file differs from the file of the previous one. Frames
outside the package (torch, transformers, the standard library) raise no events, so a call that goes through
`nn.Module.__call__` counts as one hop from the caller's file to the callee's, and its return as the hop back when
the caller's file shows up next.

Run as a script for the decoder forward the tests measure: `python tests/forward_path.py`.
"""

import sys
from dataclasses import dataclass, field
from pathlib import Path

import hf_attention

PACKAGE = Path(hf_attention.__file__).resolve().parent


@dataclass
class ForwardPath:
    """What one traced call did inside the package."""

    transitions: int = 0
    files: list[str] = field(default_factory=list)  # in the order they were first entered
    functions: list[str] = field(default_factory=list)  # "file:qualname", in the order they were first called
    hops: list[str] = field(default_factory=list)  # "from → to (event qualname)", one per transition

    def describe(self) -> str:
        return "\n".join(
            [
                f"{self.transitions} transitions across {len(self.files)} files, {len(self.functions)} functions",
                "files: " + ", ".join(self.files),
                "functions:",
                *(f"  {name}" for name in self.functions),
                "hops:",
                *(f"  {hop}" for hop in self.hops),
            ]
        )


def _package_file(code) -> str | None:
    """The file's name relative to the package when `code` belongs to it, else None."""
    path = Path(code.co_filename)
    if not path.is_absolute() or PACKAGE not in path.parents:
        return None
    return str(path.relative_to(PACKAGE))


def trace_forward_path(run) -> ForwardPath:
    """Call `run()` under `sys.settrace` and return the path it took through the package."""
    path = ForwardPath()
    seen_functions: set[str] = set()
    last_file: list[str | None] = [None]
    files_by_code: dict = {}

    def record(event: str, code) -> None:
        if code not in files_by_code:
            files_by_code[code] = _package_file(code)
        name = files_by_code[code]
        if name is None:
            return
        if event == "call":
            function = f"{name}:{code.co_qualname}"
            if function not in seen_functions:
                seen_functions.add(function)
                path.functions.append(function)
            if name not in path.files:
                path.files.append(name)
        if last_file[0] is not None and name != last_file[0]:
            path.transitions += 1
            path.hops.append(f"{last_file[0]} → {name} ({event} {code.co_qualname})")
        last_file[0] = name

    def local_trace(frame, event, arg):
        if event == "return":
            record("return", frame.f_code)
        return local_trace

    def global_trace(frame, event, arg):
        if event != "call":
            return None
        record("call", frame.f_code)
        frame.f_trace_lines = False  # 'return' events only
        return local_trace

    previous = sys.gettrace()
    sys.settrace(global_trace)
    try:
        run()
    finally:
        sys.settrace(previous)
    return path


# The tests' tiny decoder (conftest.TINY: 2 layers, 4 query heads sharing 2 key/value heads), and the same with
# Llama's choices (rotary positions, pre-norm RMSNorm, SwiGLU, no biases).
TINY_DECODER = {
    "vocab_size": 99,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 64,
    "max_position_embeddings": 64,
    "hidden_dropout_prob": 0.0,
}
LLAMA_CHOICES = {
    "position_encoding": "rotary",
    "norm_position": "pre",
    "norm_type": "rmsnorm",
    "hidden_act": "swiglu",
    "scale_embeddings": False,
    "final_norm": True,
    "attention_bias": False,
    "mlp_bias": False,
}


def decoder_forward_with_labels(**config_fields) -> ForwardPath:
    """The path of `model(input_ids, labels=input_ids)` on a (1, 8) batch, for a causal LM of `TINY_DECODER` (with
    `config_fields` on top) in eval mode, after one untraced warm-up call (lazy first-call work is not counted)."""
    import torch

    torch.manual_seed(0)
    config = hf_attention.HFAttentionDecoderConfig(**{**TINY_DECODER, **config_fields})
    model = hf_attention.HFAttentionForCausalLM(config).eval()
    input_ids = torch.randint(1, 99, (1, 8))
    model(input_ids, labels=input_ids)
    return trace_forward_path(lambda: model(input_ids, labels=input_ids))


if __name__ == "__main__":
    for name, fields in (("tiny decoder", {}), ("tiny decoder, Llama's choices", LLAMA_CHOICES)):
        print(f"--- {name}")
        print(decoder_forward_with_labels(**fields).describe())
