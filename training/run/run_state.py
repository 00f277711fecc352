"""The state of one run of `training.train`: what its set-up produced and what the loop and the end of the run read.

`train.run` fills it stage by stage: `configure` settles a `RunSetup` (the checked inputs, the accelerator, the
output folder); `set_up_training` extends it into a `TrainingRun` (the data, the model and its optimizer), which
`loop.train_loop` and `finish.finish` read. Only `progress` changes after that (and the weights, inside the model
and optimizer).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    import torch
    from accelerate import Accelerator
    from datasets import DatasetDict
    from transformers import PreTrainedTokenizerBase

    from training.args import DataArguments, ModelArguments, TrainArguments
    from training.data.batching import Loaders
    from training.objective import Objective
    from training.run.averaging import WeightAverage
    from training.run.checkpoint import Progress
    from training.run.metrics_log import MetricsLogger


@dataclass(frozen=True)
class RunArguments:
    """The parsed arguments of a run (training/args.py) and the model-config fields."""

    model: ModelArguments
    data: DataArguments
    train: TrainArguments
    model_config: dict


@dataclass(frozen=True)
class RunSetup:
    """What `configure` settled: the checked inputs, the accelerator and the output folder."""

    args: RunArguments
    objective: Objective
    model_type: str
    accelerator: Accelerator
    output_dir: Path
    resume_path: Path | None  # the checkpoint to resume from
    sharding: bool  # FSDP2 on CPUs (training/run/sharding.py)
    started: float  # time.time() when the run began: the card reports the whole run's duration


@dataclass(frozen=True)
class TrainingRun(RunSetup):
    """A run, set up: its `RunSetup`, and the data, the model and its optimizer, and where the run is."""

    splits: DatasetDict  # the texts: BLEU translates the validation and test sources
    tokenizer: PreTrainedTokenizerBase
    model: torch.nn.Module  # prepared by Accelerate, or sharded in place
    model_class: type  # the model's class before sharding: what a plain copy of a sharded model is built as
    sharded: tuple | None  # (model, optimizer) when FSDP2 shards the model on CPUs: checkpoints gather them
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    loaders: Loaders
    total_steps: int
    progress: Progress
    logger: MetricsLogger
    average: WeightAverage | None = None  # the mean of the last steps' weights (--average_last_steps)

    @classmethod
    def from_setup(cls, setup: RunSetup, **set_up) -> TrainingRun:
        """`setup` with what `set_up_training` built (the fields of this class that `RunSetup` lacks)."""
        return cls(**{field.name: getattr(setup, field.name) for field in fields(RunSetup)}, **set_up)
