"""Weight averaging: the run ends with the mean of the weights of its last N optimizer steps.

Averaging the last checkpoints of a run is part of the standard recipe of neural machine translation (Vaswani et al.
2017 averaged the last 5 or 20 checkpoints; fairseq's `average_checkpoints.py`, Marian's exponential smoothing): the
weights of the final steps scatter around a minimum, and their mean lies closer to it than any one of them. Here the
mean is kept while training, over every step from `total_steps − N + 1` on (as if a checkpoint were saved at each
step and averaged), with PyTorch's own `torch.optim.swa_utils.AveragedModel` (a uniform running mean, kept in the
parameters' dtype, fp32). The final evaluation and the export use the averaged weights.

A checkpoint saved inside the window stores the mean so far (`averaged.safetensors`), so a resumed run ends with
the same weights as an uninterrupted one.
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_model, save_model
from torch.optim.swa_utils import AveragedModel

AVERAGE_FILE = "averaged.safetensors"


class WeightAverage:
    """The running mean of a model's parameters over the optimizer steps `first_step` … the last."""

    def __init__(self, model: torch.nn.Module, *, first_step: int):
        self.first_step = first_step
        self.average = AveragedModel(model)  # a copy of the model: its parameters hold the mean

    def update(self, model: torch.nn.Module, step: int) -> None:
        """Count the weights `model` has after optimizer step `step` (1-based), if it is in the window."""
        if step >= self.first_step:
            self.average.update_parameters(model)

    @property
    def steps(self) -> int:
        """How many steps' weights are in the mean."""
        return int(self.average.n_averaged)

    @torch.no_grad()
    def copy_into(self, model: torch.nn.Module) -> None:
        """Replace `model`'s parameters by the mean (nothing changes before the first step of the window)."""
        if self.steps == 0:
            return
        for mean, parameter in zip(self.average.module.parameters(), model.parameters(), strict=True):
            parameter.copy_(mean)

    def save(self, directory: Path) -> None:
        """Write the mean so far into a checkpoint folder (safetensors; tied weights stored once)."""
        if self.steps:
            save_model(self.average, str(Path(directory) / AVERAGE_FILE))

    def load(self, directory: Path, step: int) -> None:
        """Restore the mean from the checkpoint of optimizer step `step`, which must hold one if `step` is inside
        the window."""
        path = Path(directory) / AVERAGE_FILE
        if path.is_file():
            load_model(self.average, str(path))
        elif step >= self.first_step:
            raise ValueError(
                f"{directory} is a checkpoint of step {step}, inside the averaging window (steps {self.first_step} "
                f"on), but holds no {AVERAGE_FILE}: it was saved without --average_last_steps, or with another "
                "value. Resume with the arguments of the run that saved it."
            )
