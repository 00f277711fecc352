"""Fully sharded training (FSDP2) on CPUs, where Accelerate's FSDP plugin does not shard.

`accelerate launch --config_file training/accelerate_configs/fsdp.yaml` sets `ACCELERATE_USE_FSDP=true`. On GPUs
Accelerate shards the model itself. On a CPU it would not: its state becomes plain multi-process data parallelism and
every process keeps every parameter, silently. There this module shards the model with PyTorch's own
`torch.distributed.fsdp.fully_shard` (one unit per Transformer layer plus the root, over gloo), and provides the
full-state-dict saving and loading that checkpoints and the export need:

- every parameter becomes a DTensor holding 1/N of it; forward and backward all-gather a layer's parameters while it
  runs and reduce-scatter (average) its gradients, so N processes take the steps of one process with the same
  global batch;
- a checkpoint holds the full model (safetensors) and the full optimizer state, written by the main process, and each
  process's RNG state, so resuming it needs as many processes as wrote it (the weights load anywhere);
- the export, the final evaluation and generation use a plain copy of the model gathered from the shards.

Only the settings that mean something here are read: the layer classes to wrap and `reshard_after_forward`.
Parameter offloading, activation checkpointing and FSDP version 1 are refused rather than ignored.
"""

from __future__ import annotations

import os
import random

import numpy as np
import torch
from accelerate.utils import load as load_plain_data
from safetensors.torch import load_file, save_file

RNG_FILE = "random_states_{rank}.pkl"


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default).strip()


def cpu_fsdp_requested(use_cuda: bool) -> bool:
    """Whether the launcher asked for FSDP on a machine where it runs on the CPU (so this module must shard)."""
    return _env("ACCELERATE_USE_FSDP", "false").lower() == "true" and not use_cuda


def check_cpu_fsdp_settings() -> None:
    """Refuse FSDP settings that would not take effect on a CPU, naming each."""
    if _env("FSDP_VERSION", "1") != "2":
        raise ValueError(
            f"fsdp_version={_env('FSDP_VERSION', '1')} in the accelerate config: sharded training on "
            "CPUs uses FSDP2 (torch's fully_shard); set fsdp_version: 2."
        )
    for variable, field in (
        ("FSDP_OFFLOAD_PARAMS", "fsdp_offload_params"),
        ("FSDP_ACTIVATION_CHECKPOINTING", "fsdp_activation_checkpointing"),
    ):
        if _env(variable, "false").lower() == "true":
            raise ValueError(
                f"{field}: true in the accelerate config is not supported for sharded training on CPUs "
                "(it would be ignored); set it to false."
            )


def shard(model: torch.nn.Module) -> torch.nn.Module:
    """Shard `model` in place: one FSDP unit per layer of the classes named by `fsdp_transformer_layer_cls_to_wrap`,
    then the root (embeddings, tied lm_head, final norm), so a tied embedding stays in one unit."""
    from torch.distributed.fsdp import fully_shard

    names = {
        name.strip()
        for name in _env("FSDP_TRANSFORMER_CLS_TO_WRAP", "EncoderLayer,DecoderLayer,ParallelDecoderLayer").split(",")
        if name.strip()
    }
    reshard = _env("FSDP_RESHARD_AFTER_FORWARD", "true").lower() == "true"
    layers = [module for module in model.modules() if type(module).__name__ in names]
    if not layers:
        raise ValueError(
            f"fsdp_transformer_layer_cls_to_wrap names {sorted(names)}, but {type(model).__name__} has no module "
            "of those classes: name its layer classes (ours: EncoderLayer,DecoderLayer,ParallelDecoderLayer)."
        )
    for layer in layers:
        fully_shard(layer, reshard_after_forward=reshard)
    fully_shard(model, reshard_after_forward=reshard)
    return model


def _options(*, everywhere: bool):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    # everywhere: every process gets the full tensors; else only the main process, on the CPU
    return StateDictOptions(full_state_dict=True, cpu_offload=not everywhere)


def plain_copy(model: torch.nn.Module, model_class: type) -> torch.nn.Module:
    """An unsharded `model_class` with the full weights, on every process (called by all of them)."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    state = get_model_state_dict(model, options=_options(everywhere=True))
    copy = model_class(model.config)
    copy.load_state_dict(state)
    if getattr(model, "generation_config", None) is not None:
        copy.generation_config = model.generation_config
    return copy.train(model.training)


def save_sharded_state(directory, model, optimizer, *, is_main_process: bool, rank: int) -> None:
    """Write the full model, the full optimizer state (main process) and this process's RNG state to `directory`.
    Called by every process (gathering the shards is collective)."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, get_optimizer_state_dict

    model_state = get_model_state_dict(model, options=_options(everywhere=False))
    optimizer_state = get_optimizer_state_dict(model, optimizer, options=_options(everywhere=False))
    os.makedirs(directory, exist_ok=True)
    if is_main_process:
        seen, tensors = set(), {}
        for name, tensor in model_state.items():  # a tied weight appears under both names: store two copies
            tensors[name] = tensor.clone().contiguous() if tensor.data_ptr() in seen else tensor.contiguous()
            seen.add(tensor.data_ptr())
        save_file(tensors, os.path.join(directory, "model.safetensors"))
        torch.save(optimizer_state, os.path.join(directory, "optimizer.bin"))
    torch.save(
        {
            "random_state": random.getstate(),
            "numpy_random_seed": np.random.get_state(),
            "torch_manual_seed": torch.get_rng_state(),
        },
        os.path.join(directory, RNG_FILE.format(rank=rank)),
    )


def load_sharded_state(directory, model, optimizer, *, is_main_process: bool, rank: int) -> None:
    """Restore what `save_sharded_state` wrote: the main process reads the full states and broadcasts them into the
    shards. Everything is read as plain data (safetensors; `torch.load(weights_only=True)`)."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
    model_state = load_file(os.path.join(directory, "model.safetensors")) if is_main_process else {}
    set_model_state_dict(model, model_state, options=options)
    optimizer_state = load_plain_data(os.path.join(directory, "optimizer.bin")) if is_main_process else {}
    set_optimizer_state_dict(model, optimizer, optimizer_state, options=options)
    rng_file = os.path.join(directory, RNG_FILE.format(rank=rank))
    if not os.path.isfile(rng_file):
        raise ValueError(
            f"{rng_file} is missing: the checkpoint was written by fewer processes; resume it with as "
            "many processes as wrote it."
        )
    states = load_plain_data(rng_file)
    random.setstate(states["random_state"])
    np.random.set_state(states["numpy_random_seed"])
    torch.set_rng_state(states["torch_manual_seed"])
