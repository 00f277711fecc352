"""The run's metrics: one JSON record per line in `metrics.jsonl` (always), and TensorBoard scalars (optional)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from training.run.checkpoint import write_atomically

METRICS_FILE = "metrics.jsonl"


class MetricsLogger:
    """Metrics to `metrics.jsonl` (always) and TensorBoard (optional), on the main process only."""

    def __init__(self, output_dir: Path, *, enabled: bool, tensorboard: bool, resume_step: int | None):
        self.path, self.enabled, self.writer = output_dir / METRICS_FILE, enabled, None
        if not enabled:
            return
        if resume_step is not None and self.path.is_file():  # drop what was logged after the checkpoint
            kept = [record for record in read_metrics(self.path) if record["step"] <= resume_step]
            # replaced in one rename: a kill while rewriting must not lose the records of the steps kept
            write_atomically(self.path, "".join(json.dumps(record) + "\n" for record in kept))
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(output_dir / "tensorboard"))

    def log(self, step: int, values: dict) -> None:
        if not self.enabled:
            return
        with open(self.path, "a") as f:
            f.write(json.dumps({"step": step, **values}) + "\n")
        if self.writer is not None:
            for key, value in values.items():
                if isinstance(value, (int, float)):
                    self.writer.add_scalar(key, value, step)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def read_metrics(path: str | Path) -> list[dict]:
    """The records of a `metrics.jsonl` file ([] if there is none).

    A crash while a record was being appended leaves a torn last line: it is dropped with a warning. Anything else
    that is not a JSON object with an integer "step" is damage, reported with the file and line number.
    """
    path = Path(path)
    if not path.is_file():
        return []
    lines = [
        (number, line) for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if line.strip()
    ]
    records = []
    for index, (number, line) in enumerate(lines):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            if index == len(lines) - 1:
                warnings.warn(f"{path}, line {number}: dropped a record torn by an interrupted write.", stacklevel=2)
                break
            raise ValueError(
                f"{path}, line {number}: not a JSON record ({error}). Remove or repair that line."
            ) from error
        if not isinstance(record, dict) or not isinstance(record.get("step"), int):
            raise ValueError(
                f'{path}, line {number}: expected a JSON object with an integer "step", got '
                f"{line[:80]!r}. Remove or repair that line."
            )
        records.append(record)
    return records
