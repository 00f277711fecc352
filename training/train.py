"""Train an hf-attention model (or a Hugging Face reference architecture) with Accelerate.

    python -m training.train --config training/configs/translation_en_de.yaml            # one process
    accelerate launch --multi_gpu --num_processes 2 -m training.train --config ...        # two CPU processes
    python -m training.train --config ... --max_steps 50 --output_dir /tmp/run          # flags override YAML
    python -m training.train --config ... --resume_from_checkpoint latest               # exact resume

Objectives: causal LM (decoder), masked LM (encoder), translation (encoder-decoder, teacher forcing). See
training/args.py for every argument and training/objectives.py for what each objective does.

The step. One optimizer step consumes a window of `gradient_accumulation_steps` micro-batches on every process.
The loss is the summed cross-entropy of the window's target tokens divided by their count over the window *and all
processes* (`num_items_in_batch`), so each token weighs the same however the batch is split. Accelerate divides the
loss by the accumulation steps and DDP averages gradients over processes; the loss handed to `backward` is
multiplied by both to undo that. Result: 1 process with accumulation 2 and 2 processes without accumulation take the
same steps (tests/test_training.py checks it).
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import sys
import time
import warnings
from dataclasses import asdict
from pathlib import Path

import datasets
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState
from accelerate.utils import GradientAccumulationPlugin, TorchDynamoPlugin, set_seed
from torch.utils.data import DataLoader
from tqdm.auto import tqdm
from transformers import AutoTokenizer, get_cosine_schedule_with_warmup

from hf_attention.hardware import cpu_has_fast_bf16
from training import objectives as obj
from training.args import DataArguments, ModelArguments, TrainArguments, parse_args
from training.checkpoint import Progress, load_checkpoint, resolve_checkpoint, save_checkpoint, write_atomically
from training.evaluate import bleu_chrf, evaluate_loss, translate
from training.sharding import check_cpu_fsdp_settings, cpu_fsdp_requested, plain_copy, shard

METRICS_FILE = "metrics.jsonl"
RUN_FILES = ("checkpoints", "final", "final.partial", "final.previous", "tokenizer", "tensorboard", METRICS_FILE,
             "run_config.json", "loss_curve.png")


# ----------------------------------------------------------------------------------------------- batching

class LengthBatchSampler:
    """Shuffled batches, reshuffled every epoch from `seed + epoch` (so a resumed run sees the same order).

    With `max_tokens`, rows of similar length are grouped (shuffle, sort within chunks of 100 batches, cut batches
    whose padded size rows × longest ≤ max_tokens, shuffle the batches): little padding, similar tokens per step.
    Without it, plain batches of `batch_size` rows. Accelerate shards the batches across processes.
    """

    def __init__(self, lengths: list[int], *, batch_size: int, max_tokens: int | None = None, seed: int = 0):
        self.lengths, self.batch_size, self.max_tokens, self.seed = lengths, batch_size, max_tokens, seed
        self.epoch = 0
        self.drop_last = False
        self._batches = None

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self._batches = epoch, None

    def batches(self) -> list[list[int]]:
        if self._batches is None:
            rng = random.Random(self.seed + self.epoch)
            order = list(range(len(self.lengths)))
            rng.shuffle(order)
            if self.max_tokens is None:
                self._batches = [order[i:i + self.batch_size] for i in range(0, len(order), self.batch_size)]
            else:
                self._batches = self._token_batches(order, rng)
        return self._batches

    def _token_batches(self, order: list[int], rng: random.Random) -> list[list[int]]:
        batches, chunk = [], self.batch_size * 100
        for start in range(0, len(order), chunk):
            rows = sorted(order[start:start + chunk], key=lambda i: self.lengths[i])
            batch, longest = [], 0
            for row in rows:
                width = max(longest, self.lengths[row])
                if batch and width * (len(batch) + 1) > self.max_tokens:
                    batches.append(batch)
                    batch, width = [], self.lengths[row]
                batch.append(row)
                longest = width
            if batch:
                batches.append(batch)
        rng.shuffle(batches)
        return batches

    def __iter__(self):
        return iter(self.batches())

    def __len__(self) -> int:
        return len(self.batches())


# ------------------------------------------------------------------------------------------------ logging

class MetricsLogger:
    """Metrics to `metrics.jsonl` (always) and TensorBoard (optional), on the main process only."""

    def __init__(self, output_dir: Path, *, enabled: bool, tensorboard: bool, resume_step: int | None):
        self.path, self.enabled, self.writer = output_dir / METRICS_FILE, enabled, None
        if not enabled:
            return
        if resume_step is not None and self.path.is_file():  # drop what was logged after the checkpoint
            from training.export import read_metrics

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


# --------------------------------------------------------------------------------------------------- setup

def prepare_output_dir(train_args: TrainArguments, resuming: bool) -> Path:
    """Refuse to mix two runs in one folder; with --overwrite_output_dir remove the previous run's files."""
    output_dir = Path(train_args.output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise ValueError(f"--output_dir={str(output_dir)!r} is a file; it must be a folder (new or empty, or holding "
                         "a run of this script).")
    if output_dir.is_dir() and any(output_dir.iterdir()) and not resuming and not train_args.overwrite_output_dir:
        names = ", ".join(sorted(p.name for p in output_dir.iterdir())[:5])
        raise ValueError(
            f"Output folder {output_dir} already holds files ({names}, ...). Pass --overwrite_output_dir to replace "
            "that run, --resume_from_checkpoint latest to continue it, or choose another --output_dir."
        )
    return output_dir


def clear_previous_run(output_dir: Path) -> None:
    for name in RUN_FILES:
        path = output_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def resolve_mixed_precision(requested: str, use_cuda: bool) -> str:
    """The mixed-precision mode to run: `auto` picks what the device computes fast; an explicit bf16 on a CPU
    without native bf16 is kept (it was asked for) but warned about."""
    if requested == "auto":
        if use_cuda:
            return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        return "bf16" if cpu_has_fast_bf16() else "no"
    if requested == "bf16" and not use_cuda and not cpu_has_fast_bf16():
        warnings.warn("mixed_precision='bf16' on a CPU without native bf16 matmuls (no AVX512-BF16/AMX): bf16 "
                      "autocast is many times slower than fp32 here; use --mixed_precision auto or no.", stacklevel=2)
    return requested


def make_accelerator(train_args: TrainArguments) -> Accelerator:
    """One Accelerator per run. CPU-only machines opt into CPU so 2 launched processes form one DDP group."""
    AcceleratorState._reset_state()  # another run earlier in this Python process (tests) must not leak settings
    GradientState._reset_state()
    plugin = GradientAccumulationPlugin(num_steps=train_args.gradient_accumulation_steps,
                                        sync_with_dataloader=False)  # windows are whole: see `train_window`
    # --torch_compile: Accelerate compiles the model in `prepare`; exports and generation use the unwrapped eager
    # module. Resume a compiled run with the same flag (resume is tested for eager runs only).
    dynamo = TorchDynamoPlugin(backend="inductor") if train_args.torch_compile else None
    use_cuda = torch.cuda.is_available()
    # Resolved in place, so that run_config.json and the model card record the precision that really ran.
    train_args.mixed_precision = resolve_mixed_precision(train_args.mixed_precision, use_cuda)
    return Accelerator(cpu=not use_cuda, mixed_precision=train_args.mixed_precision,
                       gradient_accumulation_plugin=plugin, dynamo_plugin=dynamo)


def load_tokenizer_and_features(accelerator, splits, model_args: ModelArguments, data_args: DataArguments,
                                output_dir: Path, resuming: bool):
    """Tokenizer (trained on the train split by the main process, or reloaded when resuming) → features."""
    objective = model_args.objective
    tokenizer_dir = output_dir / "tokenizer"
    max_length = {"causal_lm": data_args.block_size, "masked_lm": data_args.max_length,
                  "translation": max(data_args.max_source_length, data_args.max_target_length)}[objective]
    if accelerator.is_main_process and not (resuming and tokenizer_dir.is_dir()):
        obj.make_tokenizer(objective, splits["train"], model_args, max_length).save_pretrained(tokenizer_dir)
    accelerator.wait_for_everyone()
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    features = {name: obj.featurize(objective, split, tokenizer, data_args) for name, split in splits.items()}
    return tokenizer, features


def make_optimizer(model, train_args: TrainArguments, device_type: str = "cpu") -> torch.optim.Optimizer:
    """AdamW; matrices decay, biases / norms / 1-D parameters do not. Tied weights appear once.

    On CPU and CUDA it is torch's fused kernel (HF Trainer's default, `adamw_torch_fused`): one pass over all
    parameters instead of a dozen for-each passes (27 → 6 ms per step for a 5M-parameter model on this CPU).
    """
    decay, no_decay = [], []
    for parameter in model.parameters():
        if parameter.requires_grad:
            (decay if parameter.dim() >= 2 else no_decay).append(parameter)
    groups = [{"params": decay, "weight_decay": train_args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=train_args.learning_rate, betas=(train_args.adam_beta1, train_args.adam_beta2),
                             eps=train_args.adam_epsilon, fused=device_type in ("cpu", "cuda"))


# ---------------------------------------------------------------------------------------------------- run

def run(model_args: ModelArguments, data_args: DataArguments, train_args: TrainArguments,
        model_config: dict | None = None) -> dict:
    """Train, evaluate and export; returns the final metrics (also printed and written to the model card)."""
    started = time.time()
    objective, ga = model_args.objective, train_args.gradient_accumulation_steps
    # Everything that can be wrong with the inputs fails here, before data is read or a step is taken.
    model_type = obj.check_model_type(objective, model_args.model_type)
    obj.check_model_config(model_type, model_config or {})
    sharding = cpu_fsdp_requested(torch.cuda.is_available())
    if sharding:
        check_cpu_fsdp_settings()
    resume_path = (resolve_checkpoint(train_args.resume_from_checkpoint, train_args.output_dir)
                   if train_args.resume_from_checkpoint else None)
    output_dir = prepare_output_dir(train_args, resuming=resume_path is not None)

    accelerator = make_accelerator(train_args)
    if train_args.disable_tqdm:
        datasets.disable_progress_bars()
    if train_args.num_threads:
        torch.set_num_threads(train_args.num_threads)
    # A missing dataset or column, or a corpus emptied by the filters, fails here, before anything is written.
    splits = obj.split_corpus(objective, obj.load_corpus(objective, data_args), data_args)
    if accelerator.is_main_process:
        if train_args.overwrite_output_dir and resume_path is None:
            clear_previous_run(output_dir)
        output_dir.mkdir(parents=True, exist_ok=True)
        (output_dir / "run_config.json").write_text(json.dumps(
            {"model": asdict(model_args), "data": asdict(data_args), "train": asdict(train_args),
             "model_config": model_config or {}}, indent=2))
    set_seed(train_args.seed)
    tokenizer, features = load_tokenizer_and_features(accelerator, splits, model_args, data_args, output_dir,
                                                      resuming=resume_path is not None)
    set_seed(train_args.seed)  # the same initial weights whatever the data step consumed
    model = obj.build_model(objective, model_type, model_config or {}, tokenizer)
    collator = obj.make_collator(objective, tokenizer, model, data_args)

    sampler = LengthBatchSampler(obj.length_of(objective, features["train"]),
                                 batch_size=train_args.per_device_train_batch_size,
                                 max_tokens=train_args.max_tokens_per_batch, seed=train_args.seed)
    # A generator of its own: starting an iterator draws a seed from it, and a draw from the global RNG would shift
    # the dropout stream of a resumed run (which starts an iterator right after restoring the RNG).
    train_loader = DataLoader(features["train"], batch_sampler=sampler, collate_fn=collator,
                              generator=torch.Generator().manual_seed(train_args.seed))
    eval_loader, test_loader = (DataLoader(features[name], batch_size=train_args.per_device_eval_batch_size,
                                           collate_fn=collator) for name in ("validation", "test"))
    model_class, sharded = type(model), None
    if sharding:  # FSDP on CPUs: torch's fully_shard here, since Accelerate would silently replicate the model
        shard(model)
        optimizer = make_optimizer(model, train_args, accelerator.device.type)
        optimizer, train_loader, eval_loader, test_loader = accelerator.prepare(
            optimizer, train_loader, eval_loader, test_loader)
        sharded = (model, optimizer.optimizer)
        accelerator.print(f"Sharded the model with FSDP2 (fully_shard) over {accelerator.num_processes} CPU "
                          "processes.")
    else:
        optimizer = make_optimizer(model, train_args, accelerator.device.type)
        model, optimizer, train_loader, eval_loader, test_loader = accelerator.prepare(
            model, optimizer, train_loader, eval_loader, test_loader)
    windows_per_epoch = len(train_loader) // ga
    if windows_per_epoch == 0:
        raise ValueError(f"The training split gives {len(train_loader)} batches per process, fewer than "
                         f"gradient_accumulation_steps={ga}; use more data or smaller batches.")
    total_steps = (train_args.max_steps if train_args.max_steps > 0
                   else math.ceil(train_args.num_train_epochs * windows_per_epoch))
    # Stepped by hand on optimizer steps only (a prepared scheduler steps once per process per step).
    scheduler = get_cosine_schedule_with_warmup(optimizer, train_args.warmup_steps, total_steps)

    progress = Progress()
    if resume_path is not None:
        progress = load_checkpoint(accelerator, resume_path, scheduler=scheduler, sharded=sharded)
        accelerator.print(f"Resumed from {resume_path} at step {progress.step} (epoch {progress.epoch}, "
                          f"{progress.batches_in_epoch} batches into it).")
    logger = MetricsLogger(output_dir, enabled=accelerator.is_main_process,
                           tensorboard=train_args.report_to == "tensorboard",
                           resume_step=progress.step if resume_path is not None else None)
    core = accelerator.unwrap_model(model, keep_torch_compile=False)
    n_params = sum(p.numel() for p in core.parameters())
    accelerator.print(f"{objective}: {type(core).__name__} ({n_params / 1e6:.2f}M "
                      f"parameters), {len(features['train'])} training rows, {len(train_loader)} batches per "
                      f"process per epoch, {accelerator.num_processes} process(es), {total_steps} steps; data and "
                      f"tokenizer took {time.time() - started:.1f}s.")

    def train_window(window: list[dict]) -> tuple[float, int, float | None] | None:
        """One optimizer step over `window` micro-batches; returns (loss, global target tokens, grad norm), or None
        when the window holds no target token on any process (e.g. no token was masked): it then takes no step.

        A loss or gradient that is not finite stops the run before the optimizer applies it, so the weights, the
        checkpoints and the export keep the last finite state.
        """
        local = sum(obj.count_targets(objective, batch) for batch in window)
        num_items = accelerator.reduce(torch.tensor(float(local), device=accelerator.device), "sum")
        if num_items.item() == 0:  # 0/0 would be NaN: this window has nothing to learn from
            return None
        total, grad_norm = torch.zeros((), device=accelerator.device), None
        for batch in window:
            with accelerator.accumulate(model), accelerator.autocast():  # (a sharded model is not wrapped)
                loss = obj.token_loss(objective, model, batch, num_items)
                accelerator.backward(loss * accelerator.num_processes * ga)
                total += loss.detach()
        # The last micro-batch left `sync_gradients` on: the gradients are complete (and averaged over processes).
        loss = accelerator.reduce(total, "sum").item()
        if train_args.max_grad_norm:
            grad_norm = float(accelerator.clip_grad_norm_(model.parameters(), train_args.max_grad_norm))
        # Under fp16 the gradient scaler expects overflowing gradients now and then: it skips those steps itself.
        bad_gradient = grad_norm is not None and not math.isfinite(grad_norm) and accelerator.scaler is None
        if not math.isfinite(loss) or bad_gradient:
            raise FloatingPointError(
                f"Step {progress.step + 1}: the training loss is {loss} and the gradient norm {grad_norm}; stopping "
                "before the optimizer applies them (checkpoints and the export keep the last finite weights). "
                "Lower --learning_rate, keep --max_grad_norm on, or use --mixed_precision no.")
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        return loss, int(num_items.item()), grad_norm

    history = {"losses": [], "tokens": 0, "time": time.time()}
    bar = tqdm(total=total_steps, initial=progress.step, desc="train",
               disable=train_args.disable_tqdm or not accelerator.is_local_main_process, dynamic_ncols=True)
    train_started = time.time()
    skipped_windows = 0  # windows without a target token (masked LM with few masks): no step taken
    model.train()
    while progress.step < total_steps:
        steps_before_epoch = progress.step
        loader = (accelerator.skip_first_batches(train_loader, progress.batches_in_epoch)
                  if progress.batches_in_epoch else train_loader)
        # Accelerate's loaders re-announce their own iteration count as the epoch when iterated: set both.
        loader.set_epoch(progress.epoch)
        sampler.set_epoch(progress.epoch)
        window = []
        for batch in loader:
            window.append(batch)
            if len(window) < ga:
                continue
            stepped = train_window(window)
            window = []
            progress.batches_in_epoch += ga
            if stepped is None:
                skipped_windows += 1
                continue
            loss, tokens, grad_norm = stepped
            progress.step += 1
            history["losses"].append(loss)
            history["tokens"] += tokens
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", lr=f"{scheduler.get_last_lr()[0]:.2e}")
            step = progress.step
            if step % train_args.logging_steps == 0 or step == total_steps:
                elapsed = time.time() - history["time"]
                values = {"train/loss": sum(history["losses"]) / len(history["losses"]),
                          "train/lr": scheduler.get_last_lr()[0],
                          "train/tokens_per_second": history["tokens"] / elapsed,
                          "train/epoch": progress.epoch + progress.batches_in_epoch / max(len(train_loader), 1)}
                if grad_norm is not None:
                    values["train/grad_norm"] = grad_norm
                logger.log(step, values)
                history.update(losses=[], tokens=0, time=time.time())
            if train_args.eval_steps and step % train_args.eval_steps == 0 and step < total_steps:
                metrics = evaluate_loss(accelerator, model, eval_loader, objective, seed=train_args.seed,
                                        max_batches=train_args.max_eval_batches)
                if objective == "translation" and train_args.eval_bleu_during_training:
                    # generate() runs a different number of steps per process: not with a sharded model
                    generator = plain_copy(model, model_class) if sharded else model
                    metrics.update(_bleu(accelerator, generator, tokenizer, splits["validation"], data_args,
                                         train_args, limit=200)[0])
                logger.log(step, {f"eval/{k}": v for k, v in metrics.items()})
                accelerator.print(f"step {step}: " + ", ".join(f"eval {k} {v:.4g}" for k, v in metrics.items()))
            if train_args.save_steps and step % train_args.save_steps == 0:
                save_checkpoint(accelerator, output_dir, progress, scheduler=scheduler,
                                keep=train_args.save_total_limit, sharded=sharded)
            if step >= total_steps:
                break
        else:  # the epoch ran out (a trailing partial window is dropped)
            if progress.step == steps_before_epoch and skipped_windows:
                raise ValueError(f"A whole epoch gave no target token to train on ({skipped_windows} windows "
                                 "skipped): raise --mlm_probability or --max_length, or use larger batches.")
            progress.epoch += 1
            progress.batches_in_epoch = 0
    bar.close()
    if skipped_windows:
        warnings.warn(f"{skipped_windows} accumulation window(s) held no target token (e.g. no token was masked) "
                      "and were skipped without an optimizer step.", stacklevel=2)
    train_seconds = time.time() - train_started
    if sharded:  # evaluation, generation and the export use the gathered weights
        model = plain_copy(model, model_class)

    results = finish(accelerator, model, tokenizer, splits, eval_loader, test_loader, objective, model_args,
                     data_args, train_args, model_config or {}, logger, progress, started, train_seconds)
    logger.close()
    return results


def _bleu(accelerator, model, tokenizer, split, data_args, train_args, limit=None):
    rows = split.select(range(min(limit or len(split), len(split))))
    sources, references = list(rows["source"]), list(rows["target"])
    hypotheses = translate(accelerator, model, tokenizer, sources, batch_size=train_args.per_device_eval_batch_size,
                           num_beams=train_args.generation_num_beams,
                           max_new_tokens=train_args.generation_max_new_tokens or data_args.max_target_length,
                           max_source_length=data_args.max_source_length)
    return bleu_chrf(hypotheses, references), list(zip(sources, references, hypotheses, strict=True))


def finish(accelerator, model, tokenizer, splits, eval_loader, test_loader, objective, model_args, data_args,
           train_args, model_config, logger, progress, started, train_seconds) -> dict:
    """Final validation and test evaluation, the loss plot, the export and the optional upload."""
    from training.export import card_fields, export_model, plot_losses, push_to_hub, read_metrics

    output_dir = Path(train_args.output_dir)
    validation = evaluate_loss(accelerator, model, eval_loader, objective, seed=train_args.seed)
    logger.log(progress.step, {f"eval/{k}": v for k, v in validation.items()})
    test = evaluate_loss(accelerator, model, test_loader, objective, seed=train_args.seed)
    results = {"validation_loss": round(validation["loss"], 4),
               "validation_perplexity": round(validation["perplexity"], 2),
               "test_loss": round(test["loss"], 4), "test_perplexity": round(test["perplexity"], 2)}
    samples = []
    if objective == "translation":
        scores, triples = _bleu(accelerator, model, tokenizer, splits["test"], data_args, train_args,
                                limit=train_args.bleu_samples)
        results.update(scores)
        samples = triples[:5]
    logger.log(progress.step, {f"test/{k.removeprefix('test_')}": v for k, v in results.items()
                               if not k.startswith("validation_")})
    total_seconds = time.time() - started
    if accelerator.is_main_process:
        plot = plot_losses(read_metrics(output_dir / METRICS_FILE), output_dir / "loss_curve.png")
        unwrapped = accelerator.unwrap_model(model, keep_torch_compile=False)
        _set_generation_defaults(unwrapped, tokenizer, data_args, train_args, objective)
        model_name = train_args.hub_model_id or output_dir.name
        data_description = _describe_data(objective, data_args, splits)
        hyperparameters = {
            "objective": objective, "steps": progress.step, "processes": accelerator.num_processes,
            "per-device batch": (f"≤{train_args.max_tokens_per_batch} tokens" if train_args.max_tokens_per_batch
                                 else train_args.per_device_train_batch_size),
            "gradient accumulation": train_args.gradient_accumulation_steps,
            "learning rate": train_args.learning_rate, "warmup steps": train_args.warmup_steps,
            "schedule": "linear warmup, cosine decay", "weight decay": train_args.weight_decay,
            "AdamW betas": (train_args.adam_beta1, train_args.adam_beta2), "max grad norm": train_args.max_grad_norm,
            "mixed precision": train_args.mixed_precision, "vocabulary": len(tokenizer),
            "seed": train_args.seed, "model config": json.dumps(model_config, sort_keys=True) or "{}",
        }
        timing = (f"{progress.step} steps on {accelerator.num_processes} process(es) "
                  f"({accelerator.device.type}); training took {train_seconds / 60:.1f} min, the whole run "
                  f"(data, tokenizer, training, evaluation) {total_seconds / 60:.1f} min.")
        language = ([data_args.source_lang, data_args.target_lang] if objective == "translation"
                    else [data_args.source_lang])
        datasets = [data_args.dataset or ("gettext-catalogs" if objective == "translation" else "python-docs")]
        card = card_fields(objective=objective, model=unwrapped, model_name=model_name,
                           data_description=data_description, datasets=datasets, language=language,
                           license=train_args.license, hyperparameters=hyperparameters, results=results,
                           samples=samples, timing=timing)
        final = export_model(unwrapped, tokenizer, output_dir / "final", objective=objective, card=card,
                             loss_plot=plot, heatmap_text=samples[0][0] if samples else None)
        if train_args.push_to_hub:
            push_to_hub(final, train_args.hub_model_id, private=train_args.hub_private)
            accelerator.print(f"Uploaded {final} to https://huggingface.co/{train_args.hub_model_id}")
        report = ", ".join(f"{k} {v}" for k, v in results.items())
        print(f"Finished {progress.step} steps in {total_seconds / 60:.1f} min (training {train_seconds:.0f}s). "
              f"Results: {report}. Exported to {final}.")
        for source, reference, hypothesis in samples:
            print(f"  EN:  {source}\n  REF: {reference}\n  OUT: {hypothesis}\n")
    accelerator.wait_for_everyone()
    return {**results, "steps": progress.step, "seconds": round(total_seconds, 1),
            "train_seconds": round(train_seconds, 1)}


def _set_generation_defaults(model, tokenizer, data_args, train_args, objective) -> None:
    config = getattr(model, "generation_config", None)
    if config is None:  # encoders do not generate
        return
    config.pad_token_id, config.eos_token_id = tokenizer.pad_token_id, tokenizer.eos_token_id
    if objective == "translation":
        config.decoder_start_token_id = model.config.decoder_start_token_id
        config.num_beams = train_args.generation_num_beams
        config.max_new_tokens = train_args.generation_max_new_tokens or data_args.max_target_length
        config.max_length = None
    elif objective == "causal_lm":
        config.bos_token_id = tokenizer.bos_token_id
        config.max_new_tokens = 50


def _describe_data(objective, data_args, splits) -> str:
    sizes = ", ".join(f"{name} {len(split)}" for name, split in splits.items())
    if data_args.dataset:
        source = f"`{data_args.dataset}`"
    elif objective == "translation":
        source = (f"English → `{data_args.target_lang}` user-interface strings from the gettext catalogs installed "
                  "on the training machine (`/usr/share/locale/<lang>/LC_MESSAGES/*.mo`, the kind of data in the "
                  "OPUS GNOME/KDE/Ubuntu corpora): single-line, not format-only, translated, de-duplicated pairs "
                  f"of at most {data_args.max_chars} characters")
    else:
        source = "Paragraphs of the Python documentation topics shipped with CPython (`pydoc_data.topics`)"
    return (f"{source}. Split by a stable hash of the (source) text, so no string is in two splits: rows {sizes}. "
            "A byte-level BPE tokenizer was trained on the training split.")


def main(argv: list[str] | None = None) -> int:
    model_args, data_args, train_args, model_config = parse_args(argv)
    run(model_args, data_args, train_args, model_config)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
