"""The training loop: optimizer steps over accumulation windows, epoch after epoch, with the metrics records,
periodic evaluations and checkpoints.

The step. One optimizer step consumes a window of `gradient_accumulation_steps` micro-batches on every process.
The loss is the summed cross-entropy of the window's target tokens divided by their count over the window *and all
processes* (`num_items_in_batch`), so each token weighs the same however the batch is split. Accelerate divides the
loss by the accumulation steps and DDP averages gradients over processes; the loss handed to `backward` is
multiplied by both to undo that. Result: 1 process with accumulation 2 and 2 processes without accumulation take the
same steps (tests/test_training.py checks it).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from tqdm.auto import tqdm

from training.finish.evaluate import GenerationSettings, evaluate_loss
from training.run import losses
from training.run.checkpoint import save_checkpoint
from training.run.run_state import TrainingRun
from training.run.sharding import plain_copy


class Step(NamedTuple):
    """One optimizer step: its loss, the target tokens it learnt from (all processes), the gradient norm."""

    loss: float
    tokens: int
    grad_norm: float | None


@dataclass
class StepLog:
    """The steps since the last training record (their losses, tokens and start), and the windows skipped so far."""

    losses: list[float] = field(default_factory=list)
    tokens: int = 0
    since: float = field(default_factory=time.time)
    skipped_windows: int = 0  # windows without a target token (masked LM with few masks): no step taken


def train_loop(run: TrainingRun) -> float:
    """Optimizer steps from where the run is to `total_steps`; returns the seconds they took."""
    log = StepLog()
    bar = tqdm(
        total=run.total_steps,
        initial=run.progress.step,
        desc="train",
        dynamic_ncols=True,
        disable=run.args.train.disable_tqdm or not run.accelerator.is_local_main_process,
    )
    started = time.time()
    run.model.train()
    while run.progress.step < run.total_steps:
        train_epoch(run, log, bar)
    bar.close()
    if log.skipped_windows:
        warnings.warn(
            f"{log.skipped_windows} accumulation window(s) held no target token (e.g. no token was "
            "masked) and were skipped without an optimizer step.",
            stacklevel=2,
        )
    return time.time() - started


def train_epoch(run: TrainingRun, log: StepLog, bar: tqdm) -> None:
    """The rest of the current epoch (a resumed run starts where its checkpoint was), or up to the last step."""
    progress = run.progress
    steps_before_epoch = progress.step
    for window in _windows(_epoch_batches(run), run.args.train.gradient_accumulation_steps):
        step = train_window(run, window)
        progress.batches_in_epoch += len(window)
        if step is None:
            log.skipped_windows += 1
            continue
        _after_step(run, step, log, bar)
        if progress.step >= run.total_steps:
            return
    # The epoch ran out (a trailing partial window is dropped).
    if progress.step == steps_before_epoch and log.skipped_windows:
        raise ValueError(
            f"A whole epoch gave no target token to train on ({log.skipped_windows} windows "
            "skipped): raise --mlm_probability or --max_length, or use larger batches."
        )
    progress.epoch += 1
    progress.batches_in_epoch = 0


def _epoch_batches(run: TrainingRun) -> Iterable[dict]:
    """The training batches of the current epoch that the run has not consumed yet."""
    progress, loaders = run.progress, run.loaders
    loader = (
        run.accelerator.skip_first_batches(loaders.train, progress.batches_in_epoch)
        if progress.batches_in_epoch
        else loaders.train
    )
    # Accelerate's loaders re-announce their own iteration count as the epoch when iterated: set both.
    loader.set_epoch(progress.epoch)
    loaders.sampler.set_epoch(progress.epoch)
    return loader


def _windows(batches: Iterable[dict], size: int) -> Iterator[list[dict]]:
    """Consecutive groups of `size` batches, pulled one batch at a time as the loop needs them (collation draws
    MLM masks from the global RNG, as dropout does: their order must not change); a partial last group is dropped."""
    window = []
    for batch in batches:
        window.append(batch)
        if len(window) == size:
            yield window
            window = []


def train_window(run: TrainingRun, window: list[dict]) -> Step | None:
    """One optimizer step over `window` micro-batches, or None when the window holds no target token on any process
    (e.g. no token was masked): it then takes no step.

    A loss or gradient that is not finite stops the run before the optimizer applies it, so the weights, the
    checkpoints and the export keep the last finite state.
    """
    accelerator, model, ga = run.accelerator, run.model, run.args.train.gradient_accumulation_steps
    local = sum(losses.count_targets(run.objective, batch) for batch in window)
    num_items = accelerator.reduce(torch.tensor(float(local), device=accelerator.device), "sum")
    if num_items.item() == 0:  # 0/0 would be NaN: this window has nothing to learn from
        return None
    total, grad_norm = torch.zeros((), device=accelerator.device), None
    for batch in window:
        with accelerator.accumulate(model), accelerator.autocast():  # (a sharded model is not wrapped)
            loss = losses.token_loss(run.objective, model, batch, num_items)
            accelerator.backward(loss * accelerator.num_processes * ga)
            total += loss.detach()
    # The last micro-batch left `sync_gradients` on: the gradients are complete (and averaged over processes).
    loss = accelerator.reduce(total, "sum").item()
    if run.args.train.max_grad_norm:
        grad_norm = float(accelerator.clip_grad_norm_(model.parameters(), run.args.train.max_grad_norm))
    # Under fp16 the gradient scaler expects overflowing gradients now and then: it skips those steps itself.
    bad_gradient = grad_norm is not None and not math.isfinite(grad_norm) and accelerator.scaler is None
    if not math.isfinite(loss) or bad_gradient:
        raise FloatingPointError(
            f"Step {run.progress.step + 1}: the training loss is {loss} and the gradient norm {grad_norm}; stopping "
            "before the optimizer applies them (checkpoints and the export keep the last finite weights). "
            "Lower --learning_rate, keep --max_grad_norm on, or use --mixed_precision no."
        )
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad(set_to_none=True)
    return Step(loss, int(num_items.item()), grad_norm)


def _after_step(run: TrainingRun, step: Step, log: StepLog, bar: tqdm) -> None:
    """Count the step, then what falls due at it: the training record, an evaluation, a checkpoint."""
    progress, train_args = run.progress, run.args.train
    progress.step += 1
    if run.average is not None:
        run.average.update(run.model, progress.step)
    log.losses.append(step.loss)
    log.tokens += step.tokens
    bar.update(1)
    bar.set_postfix(loss=f"{step.loss:.3f}", lr=f"{run.scheduler.get_last_lr()[0]:.2e}")
    number = progress.step
    if number % train_args.logging_steps == 0 or number == run.total_steps:
        _record_training(run, log, step.grad_norm)
    if train_args.eval_steps and number % train_args.eval_steps == 0 and number < run.total_steps:
        _evaluate(run)
    if train_args.save_steps and number % train_args.save_steps == 0:
        save_checkpoint(
            run.accelerator,
            run.output_dir,
            progress,
            scheduler=run.scheduler,
            keep=train_args.save_total_limit,
            sharded=run.sharded,
            average=run.average,
        )


def _record_training(run: TrainingRun, log: StepLog, grad_norm: float | None) -> None:
    """The training record of the steps since the last one (the gradient norm is the last step's)."""
    progress = run.progress
    elapsed = time.time() - log.since
    values = {
        "train/loss": sum(log.losses) / len(log.losses),
        "train/lr": run.scheduler.get_last_lr()[0],
        "train/tokens_per_second": log.tokens / elapsed,
        "train/epoch": progress.epoch + progress.batches_in_epoch / max(len(run.loaders.train), 1),
    }
    if grad_norm is not None:
        values["train/grad_norm"] = grad_norm
    run.logger.log(progress.step, values)
    log.losses, log.tokens, log.since = [], 0, time.time()


def _evaluate(run: TrainingRun) -> None:
    """A periodic evaluation: the validation loss (on at most `max_eval_batches`), and BLEU / chrF if asked for."""
    train_args = run.args.train
    metrics = evaluate_loss(
        run.accelerator,
        run.model,
        run.loaders.eval,
        run.objective,
        seed=train_args.seed,
        max_batches=train_args.max_eval_batches,
    )
    if run.objective.evaluation.scores_translations and train_args.eval_bleu_during_training:
        # generate() runs a different number of steps per process: not with a sharded model
        generator = plain_copy(run.model, run.model_class) if run.sharded else run.model
        scores, _ = run.objective.evaluation.score_outputs(
            run.accelerator,
            generator,
            run.tokenizer,
            run.splits["validation"],
            GenerationSettings.from_args(run.args.data, train_args),
            limit=200,
        )
        metrics.update(bleu=scores["bleu"], chrf=scores["chrf"])
    run.logger.log(run.progress.step, {f"eval/{k}": v for k, v in metrics.items()})
    run.accelerator.print(f"step {run.progress.step}: " + ", ".join(f"eval {k} {v:.4g}" for k, v in metrics.items()))
