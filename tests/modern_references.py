"""Tiny Hugging Face reference models of today's decoder and encoder architectures, built with random weights, never
downloaded: every `tiny_references` case of the architectures' registry (hf_attention/architectures/: Llama 3's RoPE
variants, Qwen2, Qwen3, Mistral, Gemma 3, Phi-3, OLMo 2, SmolLM3, ModernBERT, ...), so that an architecture's module
brings its tests with it.

Each case is one HF class and one tiny config chosen so that every feature that sets the architecture apart is
exercised by a 24-token batch (architectures/tiny.py). Every parameter is moved away from its initialisation, so a
norm applied with the wrong formula (Gemma's `1 + w`), a swapped q/k norm or a forgotten bias changes the logits.

References are built once per process and shared: the models returned must not be mutated. The exception is a model
whose rotary embedding keeps state between calls (`rope_type="dynamic"` remembers the longest sequence it has seen):
each call returns a fresh copy of it, so that a test's outcome cannot depend on which tests ran before it.
"""

import copy
import functools
import zlib

import torch
from transformers import PreTrainedModel

from hf_attention.architectures import REGISTRY
from hf_attention.architectures.tiny import (  # noqa: F401 (the sizes, read by the tests through this module)
    BOS,
    DECODER,
    EOS,
    LENGTH,
    NUM_LABELS,
    ORIGINAL_LENGTH,
    PAD,
    SPECIAL,
    THETA,
    VOCAB,
    WINDOW,
)

# name → (HF class, its config factory), from every architecture of the registry.
CASES = {
    name: (reference.model_class, reference.config)
    for architecture in REGISTRY.values()
    for name, reference in architecture.tiny_references.items()
}
# The architecture name `to_hf` writes each case as.
ARCHITECTURE = {name: architecture.name for architecture in REGISTRY.values() for name in architecture.tiny_references}
CAUSAL_LMS = [name for name, (cls, _) in CASES.items() if cls.__name__.endswith("ForCausalLM")]
ENCODERS = [name for name, (cls, _) in CASES.items() if cls.__name__.startswith("ModernBert")]
# Rotary embeddings whose frequencies depend on the longest sequence seen before (not only on the current call).
STATEFUL = {"llama3_dynamic"}


def perturb(model: PreTrainedModel, seed: int) -> PreTrainedModel:
    """Add noise to every parameter and saved buffer: 0.02·N(0, 1) to matrices, 0.1·N(0, 1) to vectors (norm weights
    that start at 1 or, for Gemma, 0; biases that start at 0; DeepSeek-V3's balancing bias, a buffer starting at 0),
    so that each vector differs clearly from its initial value and from its neighbours (q_norm from k_norm, one
    layer's norm from the next)."""
    generator = torch.Generator().manual_seed(seed)
    saved = model.state_dict().keys()
    # the parameters, then the saved buffers of floats (DeepSeek-V3's balancing bias, which starts at zero)
    buffers = [tensor for name, tensor in model.named_buffers() if name in saved and tensor.is_floating_point()]
    with torch.no_grad():
        for tensor in [*model.parameters(), *buffers]:  # a tied matrix is listed (and moved) once
            scale = 0.1 if tensor.dim() == 1 else 0.02
            tensor.add_(scale * torch.randn(tensor.shape, generator=generator))
    return model


@functools.cache
def _built(name: str, attn: str) -> PreTrainedModel:
    if attn != "eager":  # the same weights behind another backend
        model = copy.deepcopy(_built(name, "eager"))
        model.set_attn_implementation(attn)
        return model
    model_class, make_config = CASES[name]
    seed = zlib.crc32(name.encode())  # the case's own: adding a case to the registry changes no other case's weights
    with torch.random.fork_rng():  # the same weights whichever test builds the case first
        torch.manual_seed(seed)
        model = model_class._from_config(make_config(), attn_implementation="eager")
    return perturb(model.float().eval(), seed)


def reference(name: str, attn: str = "eager") -> PreTrainedModel:
    """The tiny HF model of case `name` (float32, eval mode) with attention backend `attn` ("eager" or "sdpa").

    Built once per process and shared: do not mutate it (deep-copy it to train). Stateful cases (see STATEFUL) are
    copied on every call, so each caller starts from the freshly built state.
    """
    model = _built(name, attn)
    return copy.deepcopy(model) if name in STATEFUL else model


def padded_batch(name: str, length: int = LENGTH, seed: int = 0) -> dict[str, torch.Tensor]:
    """Three rows of `length` columns holding all, 3/4 and 1/2 of `length` real tokens (24: 24, 18, 12).

    Decoders are padded on the left, as `generate()` needs (their last column is real in every row, which is also
    where their sequence classifiers read). ModernBERT is padded on the right: its classifier reads the first
    column, and HF numbers its positions from the first column.
    """
    ids = torch.randint(3, VOCAB, (3, length), generator=torch.Generator().manual_seed(seed))
    real = torch.tensor([length, length * 3 // 4, length // 2])
    columns = torch.arange(length)[None]
    first_real = 0 if name in ENCODERS else length - real[:, None]  # right padding: real from column 0
    mask = ((columns >= first_real) & (columns < first_real + real[:, None])).long()
    return {"input_ids": ids.masked_fill(mask == 0, PAD), "attention_mask": mask}


def generate_positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """The position_ids `generate()` gives a left-padded batch: counted from each row's first real token (padding
    gets 1, as in transformers' generation utilities)."""
    return (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)


def forward_inputs(name: str, length: int = LENGTH) -> dict[str, torch.Tensor]:
    """The forward comparison's inputs: `padded_batch`, with generate()'s position_ids for the decoders."""
    inputs = padded_batch(name, length)
    if name not in ENCODERS:
        inputs["position_ids"] = generate_positions(inputs["attention_mask"])
    return inputs


def real_positions(values: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """`values` (B, T, …) at the real tokens only, flattened to (N, …); (B, C) values (a classifier's logits) are
    returned whole. A padding position's output is not defined: HF's eager and sdpa backends already disagree there."""
    if values.dim() == 2:
        return values
    return values[attention_mask.bool()]


def max_difference_at_real(theirs: torch.Tensor, ours: torch.Tensor, attention_mask: torch.Tensor) -> float:
    """The largest |theirs - ours| over the real tokens (see `real_positions`); the shapes must agree."""
    assert theirs.shape == ours.shape, (theirs.shape, ours.shape)
    a, b = real_positions(theirs, attention_mask), real_positions(ours, attention_mask)
    return (a - b).abs().max().item()


def main_output(output) -> torch.Tensor:
    """The logits of a model with a head, the last hidden state of a base model."""
    return output.logits if "logits" in output else output.last_hidden_state
