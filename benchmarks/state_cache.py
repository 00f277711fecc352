"""Section `state_cache`: what a decoder's cache holds per token and layer when its layers do not cache per-head keys
and values (multi-head latent attention, Gated DeltaNet), ours vs HF, against a Llama's per-head cache.

Three tiny decoders (`MODELS`: d_model 64, vocab 256, fp32) decode `state_new` tokens greedily from a
`state_prompt`-token prompt at batch 1, HF's model and ours converted from it, the tokens asserted equal to HF's:

- llama: plain multi-head attention, every head's key and value cached per token (2 · heads · head_dim numbers per
  token and layer), the per-head baseline;
- deepseek_v3: multi-head latent attention in both layers (DeepSeek-V2 §2.1; `hf_attention.modeling.latent_attention`):
  per token and layer only the normalised latent c (`kv_lora_rank` numbers) and the rotated key shared by the heads
  (`qk_rope_head_dim`). Ours keeps them in a `LatentCacheLayer`; transformers' DeepSeek-V3 caches the same two
  tensors in a `DynamicLayer`, and decompresses every cached latent into per-head keys and values at each step (ours
  folds the up-projections into the query instead). "Per head": what the decompressed keys and values of one token
  take, H · (n + ρ) + H · v numbers, i.e. what a per-head cache of the same layer would hold;
- qwen3_next: three Gated DeltaNet layers to one full-attention layer (Yang et al. 2024; `gated_deltanet`). A DeltaNet
  layer's cache is its convolution's last K inputs (2 · Hk · Dk + Hv · Dv channels) and its recurrent state (Hv × Dk ×
  Dv), constant in the length; both sides keep them in transformers' `LinearAttentionLayer`. The full-attention
  layer caches per-head keys and values as the Llama does.

The cache is read after every forward call (one per token) by a forward hook, from the `past_key_values` the call
returns, as `window_cache` reads it: the model's own cache, whichever `generate()` made. Figures per kind of layer
(attention, latent, linear), summed over the layers of that kind: held (the bytes of the cached tensors as shaped),
after the prompt, at the end and at the most; storage (the bytes of the distinct storages behind them: our CPU
per-head cache grows in place into spare capacity, `kv_cache.GrowingKVLayer`); per token and layer (held at the end /
layers / cached positions) for the kinds that grow, and per layer for the linear state, which does not. The figures are
sizes, not timings: the same on any machine. One thread, as `window_cache` (and for the same reason).
"""

import dataclasses
import time

import torch
from torch import nn
from transformers.cache_utils import LinearAttentionCacheLayerMixin

from .harness import Session
from .models import make_generation_pair, random_ids
from .plan import Plan

SIDES = ("hf", "ours")
_BASE = {"vocab": 256, "hidden": 64, "heads": 4, "ffn": 128}
# Each model's plan fields (`benchmarks.models` builds the reference from them): 4 heads of 16 on d_model 64 for the
# Llama; DeepSeek-V3's query/key heads of 16 + 8 rotated, values of 16, a key/value latent of 16 and a query latent
# of 48, its first layer dense and the second a mixture of 4 experts; Qwen3-Next's DeltaNet with 4 key heads and 8
# value heads of 16, its attention layer with 2 key/value heads of 16, 4 experts.
MODELS = {
    "llama": {**_BASE, "layers": 2},
    "deepseek_v3": {
        **_BASE,
        "layers": 2,
        "head_dim": 24,
        "qk_rope_head_dim": 8,
        "q_lora_rank": 48,
        "kv_lora_rank": 16,
        "experts": 4,
    },
    "qwen3_next": {**_BASE, "layers": 4, "kv_heads": 2, "head_dim": 16, "experts": 4},
}
KINDS = ("attention", "latent", "linear")


def layer_kind(layer, config) -> str:
    """linear (a Gated DeltaNet layer's conv and recurrent states), latent (one latent and one rotated key per token:
    the model has latent attention) or attention (per-head keys and values)."""
    if isinstance(layer, LinearAttentionCacheLayerMixin):
        return "linear"
    return "latent" if getattr(config, "kv_lora_rank", None) is not None else "attention"


def layer_tensors(layer) -> list[torch.Tensor]:
    """The tensors a cache layer holds: keys and values, or a linear layer's conv and recurrent states."""
    if isinstance(layer, LinearAttentionCacheLayerMixin):
        held = [*layer.conv_states.values(), *layer.recurrent_states.values()]
    else:
        held = [layer.keys, layer.values]
    return [t for t in held if isinstance(t, torch.Tensor) and t.numel() > 0]


class StateProbe:
    """Bytes held by each kind of cache layer after each forward call of a model (see the module docstring)."""

    def __init__(self, model: nn.Module):
        self.config = model.config
        self.steps: list[dict] = []
        self._handle = model.register_forward_hook(self._read)

    def _read(self, module: nn.Module, args: tuple, output) -> None:
        cache = output.past_key_values
        step = {}
        for index, layer in enumerate(cache.layers):
            kind = layer_kind(layer, self.config)
            tensors = layer_tensors(layer)
            figures = step.setdefault(kind, {"held": 0, "storages": {}, "layers": [], "classes": set()})
            figures["held"] += sum(t.numel() * t.element_size() for t in tensors)
            figures["storages"].update({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors})
            figures["layers"].append(index)
            figures["classes"].add(type(layer).__name__)
            if kind != "linear" and tensors:
                figures["positions"] = tensors[0].shape[-2]
        self.steps.append(step)

    def remove(self) -> None:
        self._handle.remove()

    def summary(self) -> dict[str, dict]:
        """Per kind: the layers, their cache classes, held and storage bytes after the prompt, at the end, at most."""
        first, last = self.steps[0], self.steps[-1]
        found = {}
        for kind, figures in last.items():
            held = [step[kind]["held"] for step in self.steps]
            storage = [sum(step[kind]["storages"].values()) for step in self.steps]
            found[kind] = {
                "layers": figures["layers"],
                "cache_layers": sorted(figures["classes"]),
                "held_first_bytes": first[kind]["held"],
                "held_end_bytes": held[-1],
                "held_max_bytes": max(held),
                "storage_end_bytes": storage[-1],
                "storage_max_bytes": max(storage),
                "positions_end": figures.get("positions"),
                "forward_calls": len(self.steps),
            }
        return found


def state_plan(plan: Plan, model: str) -> Plan:
    """The plan of one of this section's decoders: `MODELS[model]`, no other family's shapes."""
    return dataclasses.replace(plan, **MODELS[model], family_shapes={})


def expected_numbers(config, kind: str) -> dict:
    """What the config says a layer of `kind` caches, in numbers (elements): per token for the kinds that grow, per
    layer for the linear state; for latent layers also the per-head keys and values the latent stands for."""
    if kind == "attention":
        heads = config.num_key_value_heads
        return {"per_token": 2 * heads * config.head_dim, "per_head_per_token": 2 * heads * config.head_dim}
    if kind == "latent":
        heads, rope = config.num_attention_heads, config.qk_rope_head_dim
        return {
            "per_token": config.kv_lora_rank + rope,
            "per_head_per_token": heads * (config.qk_nope_head_dim + rope) + heads * config.v_head_dim,
        }
    key_heads, value_heads = config.linear_num_key_heads, config.linear_num_value_heads
    key_dim, value_dim = config.linear_key_head_dim, config.linear_value_head_dim
    conv = (2 * key_heads * key_dim + value_heads * value_dim) * config.linear_conv_kernel_dim
    recurrent = value_heads * key_dim * value_dim
    return {"conv_state": conv, "recurrent_state": recurrent, "state": conv + recurrent}


def decode(model: nn.Module, inputs: dict, new_tokens: int) -> tuple[torch.Tensor, dict, float]:
    """Greedy decoding of exactly `new_tokens` tokens: (the sequences, the probe's summary, seconds)."""
    probe = StateProbe(model)
    try:
        start = time.perf_counter()
        tokens = model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
        seconds = time.perf_counter() - start
    finally:
        probe.remove()
    return tokens, probe.summary(), seconds


def measure(plan: Plan, session: Session) -> list[dict]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return [row for model in MODELS for row in decode_model(plan, session, model)]
    finally:
        torch.set_num_threads(threads)


def decode_model(plan: Plan, session: Session, model: str) -> list[dict]:
    """The rows of one model: per side, one row per kind of cache layer it has."""
    total = plan.state_prompt + plan.state_new
    sized = state_plan(plan, model)
    pair = dict(zip(SIDES, make_generation_pair(model, sized, session.device, max_positions=total), strict=True))
    prompt = random_ids(sized, 1, plan.state_prompt, session.device, seed=5)
    inputs = {"input_ids": prompt, "attention_mask": torch.ones_like(prompt)}
    decoded = {side: decode(side_model, inputs, plan.state_new) for side, side_model in pair.items()}
    same = bool(torch.equal(decoded["ours"][0], decoded["hf"][0]))
    assert same, (
        f"state_cache ({model}): our {plan.state_new} greedy tokens differ from HF's; refusing to compare the caches "
        "of different generations"
    )
    config = pair["hf"].config
    element = next(pair["hf"].parameters()).element_size()
    rows = []
    for side, (_, kinds, seconds) in decoded.items():
        for kind in (k for k in KINDS if k in kinds):
            figures = kinds[kind]
            layers = len(figures["layers"])
            numbers = expected_numbers(config, kind)
            grows = figures["positions_end"] is not None
            per_layer = figures["held_end_bytes"] / layers
            rows.append(
                {
                    "model": model,
                    "side": side,
                    "kind": kind,
                    "prompt": plan.state_prompt,
                    "new_tokens": plan.state_new,
                    "shape": dict(MODELS[model]),
                    "element_bytes": element,
                    **figures,
                    "per_layer_bytes": per_layer,
                    "per_token_layer_bytes": per_layer / figures["positions_end"] if grows else None,
                    "expected_numbers": numbers,
                    "same_tokens_as_hf": same,
                    "seconds": seconds,
                    "threads": torch.get_num_threads(),
                }
            )
            row = rows[-1]
            session.log(
                f"state_cache {model:11s} {side:4s} {kind:9s}: {layers} layers ({', '.join(row['cache_layers'])}), "
                + (
                    f"{row['per_token_layer_bytes']:.0f} B per token and layer, {row['positions_end']} positions"
                    if grows
                    else f"{per_layer / 2**10:.1f} KiB per layer (after the prompt "
                    f"{figures['held_first_bytes'] / layers / 2**10:.1f})"
                )
                + f"; {plan.state_new} tokens in {seconds:.1f} s"
            )
    return rows
