"""Where one forward call of a generative model spends its time: wall clocks on its parts, by forward hooks.

`decoder_parts` names the modules of each phase, for the HF references and for our models alike: the token (and
absolute-position) embeddings, each decoder layer, the final norm and the LM head. What the model's forward spends
outside them (masks, rotary tables or relative position biases computed once per stack, input checks, output
wrapping) is the difference between the whole forward and those parts.
"""

import dataclasses
import time
from collections import defaultdict

from torch import nn

from .harness import synchronize

# family: (decoder stack, its embedding modules, its layer list, its final norm), as attribute paths of the HF model.
REFERENCE_PARTS = {
    "gpt2": ("transformer", ("wte", "wpe"), "h", "ln_f"),
    "llama": ("model", ("embed_tokens",), "layers", "norm"),
    "bart": ("model.decoder", ("embed_tokens", "embed_positions", "layernorm_embedding"), "layers", "layer_norm"),
    "t5": ("decoder", ("embed_tokens",), "block", "final_layer_norm"),
    "qwen3": ("model", ("embed_tokens",), "layers", "norm"),
    "gemma3": ("model", ("embed_tokens",), "layers", "norm"),  # embed_tokens scales by √d_model itself
    "qwen3_moe": ("model", ("embed_tokens",), "layers", "norm"),
    "gpt_oss": ("model", ("embed_tokens",), "layers", "norm"),
    "deepseek_v3": ("model", ("embed_tokens",), "layers", "norm"),
    "qwen3_next": ("model", ("embed_tokens",), "layers", "norm"),
}


@dataclasses.dataclass
class DecoderParts:
    """The modules whose time makes up each phase of a decoding step (a phase may have none, e.g. BART's norm)."""

    top: nn.Module
    embedding: list[nn.Module]
    layers: list[nn.Module]
    final_norm: list[nn.Module]
    lm_head: list[nn.Module]


def _attribute(module: nn.Module, path: str) -> nn.Module | None:
    for name in path.split("."):
        module = getattr(module, name, None)
    return module


def decoder_parts(family: str, model: nn.Module, *, ours: bool) -> DecoderParts:
    """The phases of `model`: the HF reference of `family`, or (`ours`) our model converted from it."""
    if ours:
        stack = model.model.decoder
        absolute = getattr(stack.position, "kind", None) == "absolute"  # rotary and biases are not embeddings
        embedding = [
            stack.embed_tokens,
            stack.position if absolute else None,
            stack.token_type_embeddings,
            stack.embedding_norm,
        ]
        layers, norm, head = stack.layers, stack.norm, [model.lm_head_transform, model.lm_head]
    else:
        stack_path, embedding_names, layers_name, norm_name = REFERENCE_PARTS[family]
        stack = _attribute(model, stack_path)
        embedding = [_attribute(stack, name) for name in embedding_names]
        layers, norm, head = getattr(stack, layers_name), _attribute(stack, norm_name), [model.lm_head]
    return DecoderParts(
        top=model,
        embedding=_present(embedding),
        layers=list(layers),
        final_norm=_present([norm]),
        lm_head=_present(head),
    )


def _present(modules: list[nn.Module | None]) -> list[nn.Module]:
    return [module for module in modules if module is not None]


class PhaseClock:
    """Seconds per phase of every forward call of `parts.top` (a step), in `steps` (one dict per call).

    A step opens when the top model's forward starts and closes when it returns, so module calls outside it (the
    encoder of an encoder-decoder, run once before decoding) are not counted; `starts` holds the perf_counter time
    at which each step opened. Each hook costs a few µs, alike on both sides. `remove()` takes the hooks off.
    """

    def __init__(self, parts: DecoderParts, device: str):
        self.device = device
        self.steps: list[dict[str, float]] = []
        self.starts: list[float] = []
        self._step: dict[str, float] | None = None
        self._started: dict[int, float] = {}
        self._handles = []
        self._watch(parts.top, "forward")
        for module in parts.embedding:
            self._watch(module, "embedding")
        for index, layer in enumerate(parts.layers):
            self._watch(layer, f"layer {index}")
        for module in parts.final_norm:
            self._watch(module, "final_norm")
        for module in parts.lm_head:
            self._watch(module, "lm_head")

    def _watch(self, module: nn.Module, phase: str) -> None:
        is_top = phase == "forward"

        def before(module, args):
            synchronize(self.device)
            now = time.perf_counter()
            if is_top:
                self._step = defaultdict(float)
                self.starts.append(now)
            self._started[id(module)] = now

        def after(module, args, output):
            synchronize(self.device)
            elapsed = time.perf_counter() - self._started.pop(id(module))
            if self._step is not None:
                self._step[phase] += elapsed
            if is_top:
                self.steps.append(dict(self._step))
                self._step = None

        self._handles += [module.register_forward_pre_hook(before), module.register_forward_hook(after)]

    def clear(self) -> None:
        self.steps.clear()
        self.starts.clear()

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
