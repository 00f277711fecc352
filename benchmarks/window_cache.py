"""Section `window_cache`: how much key/value cache sliding-window decoding holds, ours vs HF, against the same model
with the window removed.

A Mistral-shaped decoder with a window of `window_size` tokens on every layer decodes `window_new` tokens greedily
from a `window_prompt`-token prompt (batch 1, fp32): HF's MistralForCausalLM and our model converted from it, then
both again with the window removed (`sliding_window=None`, every layer full attention), which is what an unbounded
cache holds. The model is tiny (`SHAPE`: d_model 64, 2 layers, vocab 256) because what is measured is the cache's
size, which depends on its layers, key/value heads, head width and positions alone, and because a decode of 4096
tokens must stay within seconds on a CPU; the tokens each side generates are asserted equal to HF's.

The cache is read after every forward call (one per generated token) by a forward hook on the model, from the
`past_key_values` the call returns: the model's own cache, whichever `generate()` made, so that nothing is passed
in that would change which cache a side makes. Two figures, each at the end and at its maximum over the steps:

- held: the bytes of the layers' key and value tensors as they are shaped (positions × heads × width), i.e. what
  the cache keeps for attention; a window of W keeps W − 1 positions (the new token's key joins them in each step);
- storage: the bytes of the distinct storages behind those tensors, i.e. the memory the cache keeps alive.
  transformers' sliding layer keeps a view of the last W − 1 positions of the W-position tensor it concatenated in
  the step, so its storage holds one position more than its shape; a layer that grows in place keeps spare capacity.

The figures are sizes, not timings: the same on any machine, and not subject to its load. The decoding runs on one
thread (the run's thread count is restored afterwards): a 64-wide model gains nothing from a second one, and on a
busy 2-core machine two spinning OpenMP threads made a step ten times slower or more (the four decodes took 8
minutes there instead of 40 seconds).
"""

import dataclasses
import time

import torch
from torch import nn

from .harness import Session
from .models import make_generation_pair, random_ids
from .plan import Plan

# The decoder: 4 heads of 16 dims sharing 2 key/value heads (Mistral's grouped-query attention) on d_model 64.
SHAPE = {"vocab": 256, "hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 128, "head_dim": 16}
SIDES = ("hf", "ours")


class CacheProbe:
    """The bytes held by a model's key/value cache after each of its forward calls (see the module docstring)."""

    def __init__(self, model: nn.Module):
        self.steps: list[dict] = []
        self._handle = model.register_forward_hook(self._read)

    def _read(self, module: nn.Module, args: tuple, output) -> None:
        cache = output.past_key_values
        tensors = [
            tensor
            for layer in cache.layers
            for tensor in (layer.keys, layer.values)
            if tensor is not None and tensor.numel() > 0
        ]
        storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
        self.steps.append(
            {
                "held": sum(t.numel() * t.element_size() for t in tensors),
                "storage": sum(storages.values()),
                "positions": cache.layers[0].keys.shape[-2],
                "layer_kinds": sorted({type(layer).__name__ for layer in cache.layers}),
            }
        )

    def remove(self) -> None:
        self._handle.remove()

    def summary(self) -> dict:
        last = self.steps[-1]
        return {
            "held_end_bytes": last["held"],
            "held_max_bytes": max(step["held"] for step in self.steps),
            "storage_end_bytes": last["storage"],
            "storage_max_bytes": max(step["storage"] for step in self.steps),
            "positions_end": last["positions"],
            "positions_max": max(step["positions"] for step in self.steps),
            "cache_layers": last["layer_kinds"],
            "forward_calls": len(self.steps),
        }


def window_plan(plan: Plan, window: int | None) -> Plan:
    """The plan of this section's decoder: `SHAPE`, and `window` on every layer (None: full attention)."""
    return dataclasses.replace(plan, **SHAPE, sliding_window=window, family_shapes={})


def decode(model: nn.Module, inputs: dict, new_tokens: int) -> tuple[torch.Tensor, dict, float]:
    """Greedy decoding of exactly `new_tokens` tokens: (the sequences, the cache probe's summary, seconds)."""
    probe = CacheProbe(model)
    try:
        start = time.perf_counter()
        tokens = model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
        seconds = time.perf_counter() - start
    finally:
        probe.remove()
    return tokens, probe.summary(), seconds


def held_bytes(positions: int) -> int:
    """Bytes of fp32 keys and values of `positions` positions in every layer of the decoder, at batch 1."""
    return 2 * SHAPE["layers"] * SHAPE["kv_heads"] * SHAPE["head_dim"] * positions * 4


def measure(plan: Plan, session: Session) -> list[dict]:
    if plan.window_size >= plan.window_prompt + plan.window_new:
        raise ValueError(
            f"window_cache: the window ({plan.window_size}) must be shorter than the decoded length "
            f"({plan.window_prompt} + {plan.window_new}), or there is nothing for it to bound"
        )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return decode_both_ways(plan, session)
    finally:
        torch.set_num_threads(threads)


def decode_both_ways(plan: Plan, session: Session) -> list[dict]:
    """The rows of `measure`: each side with the window, then both without it."""
    total = plan.window_prompt + plan.window_new
    rows = []
    for window in (plan.window_size, None):
        sized = window_plan(plan, window)
        pair = dict(
            zip(SIDES, make_generation_pair("mistral", sized, session.device, max_positions=total), strict=True)
        )
        prompt = random_ids(sized, 1, plan.window_prompt, session.device, seed=5)
        inputs = {"input_ids": prompt, "attention_mask": torch.ones_like(prompt)}
        decoded = {side: decode(model, inputs, plan.window_new) for side, model in pair.items()}
        same = bool(torch.equal(decoded["ours"][0], decoded["hf"][0]))
        assert same, (
            f"window_cache (window {window}): our {plan.window_new} greedy tokens differ from HF's; refusing to "
            "compare the caches of different generations"
        )
        # The cache after the last step holds every position but the last token's (generate() never feeds it back).
        expected = held_bytes((window - 1) if window else total - 1)
        for side, (_, probe, seconds) in decoded.items():
            row = {
                "model": "mistral",
                "side": side,
                "window": window,
                "prompt": plan.window_prompt,
                "new_tokens": plan.window_new,
                "shape": dict(SHAPE),
                "expected_held_bytes": expected,
                "same_tokens_as_hf": same,
                "seconds": seconds,
                "threads": torch.get_num_threads(),
                **probe,
            }
            rows.append(row)
            session.log(
                f"window_cache {side:4s} window {window}: held {row['held_end_bytes'] / 2**10:.1f} KiB at the end "
                f"(max {row['held_max_bytes'] / 2**10:.1f}), storage {row['storage_end_bytes'] / 2**10:.1f} KiB "
                f"(max {row['storage_max_bytes'] / 2**10:.1f}), {row['positions_end']} positions, "
                f"{plan.window_new} tokens in {seconds:.1f} s"
            )
        del pair
    return rows
