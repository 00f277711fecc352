"""Generation recipes on top of `model.generate()`: the compiled static-cache path.

Every `GenerationMixin` strategy (greedy, beam search, sampling with temperature / top-k / top-p, repetition penalty,
`num_return_sequences`, ...) works on `HFAttentionForCausalLM` and `HFAttentionForSeq2SeqLM` through plain
`model.generate(...)`. This module adds what is not a one-liner: decoding with a preallocated KV cache
(`StaticCache`) and the one-token decoding step compiled by `torch.compile`.

Why a helper: transformers compiles the decoding step only on accelerators unless the private flag
`CompileConfig._compile_all_devices` is set, and only when the cache is a static one. The recipe below sets both, so
that it runs on CPU too (checked on transformers 5.23). The first call compiles (the slow part:
up to three graphs: prefill, first decode step, then a shape-generic decode step); later calls with the same batch
size and lengths reuse the compiled graphs and are fast.

This module is not shipped with checkpoints.
"""

from typing import Any

import torch
from transformers import CompileConfig, GenerationMixin

# Inductor's C++ wrapper: the compiled step calls its kernels from C++ instead of from a generated Python function; on
# CPU that removes a per-step cost that is a large share of a one-token step (see the benchmarks' compiled rows).
CPU_INDUCTOR_OPTIONS = {"cpp_wrapper": True}


def make_compile_config(*, fullgraph: bool = True, mode: str | None = None, **options: Any) -> CompileConfig:
    """A `CompileConfig` that also compiles on CPU.

    Args:
        fullgraph: Ask torch.compile for one graph without breaks (our models compile fully; a break is a bug).
        mode: torch.compile mode. None (the default mode) works everywhere; "reduce-overhead" uses CUDA graphs (GPU
            only). torch.compile takes either a mode or inductor `options`, not both.
        **options: Other `CompileConfig` fields (`dynamic`, `backend`, `options`: inductor options such as
            `CPU_INDUCTOR_OPTIONS`).

    Returns:
        The config, with `_compile_all_devices = True` (transformers would otherwise skip compiling on CPU).
    """
    config = CompileConfig(fullgraph=fullgraph, mode=mode, **options)
    # Private flag of transformers 5.x: without it generate() compiles only on cuda/xpu/neuron/tpu devices.
    config._compile_all_devices = True
    return config


def default_compile_config(device: torch.device) -> CompileConfig:
    """compiled_generate's default for a model on `device`: CUDA graphs on a GPU, the C++ wrapper on a CPU."""
    if device.type == "cuda":
        return make_compile_config(mode="reduce-overhead")
    if device.type == "cpu":
        return make_compile_config(options=dict(CPU_INDUCTOR_OPTIONS))
    return make_compile_config()


def compiled_generate(
    model: GenerationMixin,
    input_ids: torch.Tensor | None = None,
    *,
    compile_config: CompileConfig | None = None,
    **generate_kwargs: Any,
) -> torch.Tensor | Any:
    """`model.generate()` with a static KV cache and a `torch.compile`d decoding step.

    Same arguments and result as `generate()`; the output is identical to the dynamic-cache path. Use it when one model
    serves many generations of similar shape: the compile cost (tens of seconds) is paid on the first call only.

    Example:
        >>> from hf_attention.runtime.compiled_generation import compiled_generate
        >>> tokens = compiled_generate(model, **tokenizer(["Hello"], return_tensors="pt"), max_new_tokens=32)

    Args:
        model: An hf-attention generative model (or any HF model that supports a static cache).
        input_ids: (B, T) prompt ids (decoder) or source ids (encoder-decoder), as for `generate()`.
        compile_config: How to compile; default `make_compile_config()` (fullgraph) with, for a model on a GPU,
            `mode="reduce-overhead"` (the step replayed as a CUDA graph: its cost no longer depends on the host's
            work per kernel launch), and for a model on CPU `CPU_INDUCTOR_OPTIONS` (inductor's C++ wrapper).
        **generate_kwargs: Anything `generate()` takes: attention_mask, max_new_tokens, num_beams, do_sample, ...

    Returns:
        What `generate()` returns: (B·num_return_sequences, L) token ids, or a `GenerateOutput`.

    Raises:
        ValueError: If `cache_implementation` is given and is not "static" (compiling needs a fixed-size cache).
    """
    cache = generate_kwargs.pop("cache_implementation", "static")
    if cache != "static":
        raise ValueError(
            f"compiled_generate needs cache_implementation='static' (got {cache!r}): torch.compile needs a KV cache "
            "whose tensors keep their shape from step to step."
        )
    if compile_config is None:
        compile_config = default_compile_config(getattr(model, "device", torch.device("cpu")))
    return model.generate(input_ids, cache_implementation="static", compile_config=compile_config, **generate_kwargs)
