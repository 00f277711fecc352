"""Train an hf-attention model (or a Hugging Face reference architecture) with Accelerate.

    python -m training.train --config training/configs/translation_en_de.yaml            # one process
    accelerate launch --multi_gpu --num_processes 2 -m training.train --config ...        # two CPU processes
    python -m training.train --config ... --max_steps 50 --output_dir /tmp/run          # flags override YAML
    python -m training.train --config ... --resume_from_checkpoint latest               # exact resume

Objectives: causal LM (decoder), masked LM (encoder), translation (encoder-decoder, teacher forcing). See
training/args.py for every argument and training/objectives/ for what each objective does.

A run has five stages, each reading what the previous ones set up: `configure` checks every input and makes the
accelerator and the output folder; `load_data` reads and splits the corpus, trains the tokenizer, tokenises and
checks what the token ids decide, and only then writes to the output folder; `set_up_training` builds the model,
the loaders, the optimizer and the schedule, and restores a checkpoint to resume from; `loop.train_loop` takes the
optimizer steps (training/run/loop.py describes one); `finish.finish` evaluates and exports.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import asdict
from pathlib import Path

import datasets
import torch
from accelerate import Accelerator
from accelerate.state import AcceleratorState, GradientState
from accelerate.utils import GradientAccumulationPlugin, TorchDynamoPlugin, broadcast_object_list, set_seed
from datasets import Dataset, DatasetDict
from transformers import AutoTokenizer, PreTrainedTokenizerBase, get_cosine_schedule_with_warmup

from hf_attention.commands.destinations import CHECKPOINT, Output
from hf_attention.conversion.to_hf import ARCHITECTURES
from hf_attention.runtime.hardware import cpu_has_fast_bf16
from training.args import DataArguments, ModelArguments, TrainArguments, parse_args
from training.argument_checks import check_objective_options
from training.data.batching import Loaders, make_loaders, train_sampler
from training.data.splits import split_corpus
from training.data.tokenizer import check_vocab_size, make_tokenizer, uses_sentinels
from training.finish.end_of_run import finish
from training.finish.export import TRAINING_EXPORT, export_destination
from training.objectives import objective_for
from training.run.averaging import WeightAverage
from training.run.checkpoint import Progress, load_checkpoint, resolve_checkpoint
from training.run.loop import train_loop
from training.run.metrics_log import METRICS_FILE, MetricsLogger
from training.run.models import (
    build_model,
    check_export_target,
    check_loss_options,
    check_model_config,
    check_model_type,
)
from training.run.run_state import RunArguments, RunSetup, TrainingRun
from training.run.sharding import check_cpu_fsdp_settings, cpu_fsdp_requested, shard

RUN_FILES = (
    "checkpoints",
    "tokenizer",
    "tensorboard",
    METRICS_FILE,
    "run_config.json",
    "loss_curve.png",
)


def run(
    model_args: ModelArguments, data_args: DataArguments, train_args: TrainArguments, model_config: dict | None = None
) -> dict:
    """Train, evaluate and export; returns the final metrics (also printed and written to the model card)."""
    setup = configure(RunArguments(model_args, data_args, train_args, model_config or {}))
    splits, tokenizer, features = load_data(setup)
    training = set_up_training(setup, splits, tokenizer, features)
    results = finish(training, train_seconds=train_loop(training))
    training.logger.close()
    return results


# ------------------------------------------------------------------------------------------ 1. configure


def configure(args: RunArguments) -> RunSetup:
    """Check every input (before data is read or anything is written), then make the accelerator."""
    started = time.time()
    objective, train_args = objective_for(args.model.objective), args.train
    check_objective_options(objective, args.data, args.train)
    if objective.data.check_arguments is not None:
        objective.data.check_arguments(args.data)
    model_type = check_model_type(objective, args.model.model_type)
    check_model_config(model_type, args.model_config)
    check_loss_options(objective, args.model_config)
    export_architecture = check_export_target(objective, model_type, args.model_config, train_args.export_to)
    check_vocab_size(
        args.model.vocab_size,
        objective.data.tokenizer_kind,
        placeholder_sentinels=uses_sentinels(objective, args.data),
    )
    sharding = cpu_fsdp_requested(torch.cuda.is_available())
    if sharding:
        check_cpu_fsdp_settings()
        check_no_average_when_sharded(train_args)
    resume_path = (
        resolve_checkpoint(train_args.resume_from_checkpoint, train_args.output_dir)
        if train_args.resume_from_checkpoint
        else None
    )
    output_dir = prepare_output_dir(train_args, resuming=resume_path is not None)
    check_export_folders(train_args, resuming=resume_path is not None, architecture=export_architecture)
    accelerator = make_accelerator(train_args)
    if train_args.disable_tqdm:
        datasets.disable_progress_bars()
    if train_args.num_threads:
        torch.set_num_threads(train_args.num_threads)
    return RunSetup(
        args=args,
        objective=objective,
        model_type=model_type,
        accelerator=accelerator,
        output_dir=output_dir,
        resume_path=resume_path,
        sharding=sharding,
        started=started,
    )


def prepare_output_dir(train_args: TrainArguments, resuming: bool) -> Path:
    """Refuse to mix two runs in one folder; with --overwrite_output_dir remove the previous run's files."""
    output_dir = Path(train_args.output_dir)
    if output_dir.exists() and not output_dir.is_dir():
        raise ValueError(
            f"--output_dir={str(output_dir)!r} is a file; it must be a folder (new or empty, or holding "
            "a run of this script)."
        )
    if output_dir.is_dir() and any(output_dir.iterdir()) and not resuming and not train_args.overwrite_output_dir:
        names = ", ".join(sorted(p.name for p in output_dir.iterdir())[:5])
        raise ValueError(
            f"Output folder {output_dir} already holds files ({names}, ...). Pass --overwrite_output_dir to replace "
            "that run, --resume_from_checkpoint latest to continue it, or choose another --output_dir."
        )
    return output_dir


def export_folders(output_dir: Path) -> dict[Path, Output]:
    """The folders a run exports to, with what each holds: final/, final-<architecture>/ (--export_to), and the
    final.partial/ and final.previous/ that an older release's export left when it was killed."""
    folders = {output_dir / name: TRAINING_EXPORT for name in ("final", "final.partial", "final.previous")}
    return folders | {output_dir / f"final-{architecture}": CHECKPOINT for architecture in ARCHITECTURES}


def check_export_folders(train_args: TrainArguments, resuming: bool, architecture: str | None) -> None:
    """Before training, what the export would refuse after it: a file of the user's in an export folder that the run
    replaces (final/, and final-<architecture>/ with --export_to) or, with --overwrite_output_dir, removes (every
    export of the replaced run); and a folder where the export cannot be written."""
    output_dir = Path(train_args.output_dir)
    written = {output_dir / "final": TRAINING_EXPORT}
    if architecture is not None:
        written[output_dir / f"final-{architecture}"] = CHECKPOINT
    removed = export_folders(output_dir) if train_args.overwrite_output_dir and not resuming else {}
    for path, output in {**removed, **written}.items():
        foreign = _not_an_export(path, output)
        if foreign:
            action = (
                f"The run replaces {path.name}/ with its export"
                if path in written
                else f"--overwrite_output_dir removes {path.name}/ of the run it replaces"
            )
            raise ValueError(
                f"--output_dir {output_dir}: {path} is not only {output.name}: {foreign}. {action}, and only when it "
                f"holds nothing else: your files are never deleted. Move them out of {path}, or choose another "
                "--output_dir. Nothing was written."
            )
    for path, output in written.items():
        export_destination(path, output)  # a folder that cannot be written, named


def _not_an_export(path: Path, output: Output) -> str | None:
    """What at `path` is not an export of ours, in words; None for nothing there, an empty folder or an export."""
    if not os.path.lexists(path):
        return None
    if path.is_symlink() or not path.is_dir():
        return "it is not a folder"
    return output.foreign(path) if any(path.iterdir()) else None


def resolve_mixed_precision(requested: str, use_cuda: bool) -> str:
    """The mixed-precision mode to run: `auto` picks what the device computes fast; an explicit bf16 on a CPU
    without native bf16 is kept (it was asked for) but warned about."""
    if requested == "auto":
        if use_cuda:
            return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        return "bf16" if cpu_has_fast_bf16() else "no"
    if requested == "bf16" and not use_cuda and not cpu_has_fast_bf16():
        warnings.warn(
            "mixed_precision='bf16' on a CPU without native bf16 matmuls (no AVX512-BF16/AMX): bf16 "
            "autocast is many times slower than fp32 here; use --mixed_precision auto or no.",
            stacklevel=2,
        )
    return requested


def resolve_torch_compile(requested: bool | None, use_cuda: bool) -> bool:
    """Whether to compile: as asked, or when unset, on a GPU (where the compiled step fuses the elementwise kernels
    around the matmuls) and not on the CPU (where the eager step is no slower in fp32: docs/performance.md)."""
    return use_cuda if requested is None else requested


def make_accelerator(train_args: TrainArguments) -> Accelerator:
    """One Accelerator per run. CPU-only machines opt into CPU so 2 launched processes form one DDP group."""
    AcceleratorState._reset_state()  # another run earlier in this Python process (tests) must not leak settings
    GradientState._reset_state()
    plugin = GradientAccumulationPlugin(
        num_steps=train_args.gradient_accumulation_steps, sync_with_dataloader=False
    )  # windows are whole: see `loop.train_window`
    use_cuda = torch.cuda.is_available()
    # Resolved in place, so that run_config.json and the model card record the precision that really ran.
    train_args.mixed_precision = resolve_mixed_precision(train_args.mixed_precision, use_cuda)
    # --torch_compile: Accelerate compiles the model in `prepare`; exports and generation use the unwrapped eager
    # module. Resume a compiled run with the same flag (resume is tested for eager runs only).
    train_args.torch_compile = resolve_torch_compile(train_args.torch_compile, use_cuda)
    dynamo = TorchDynamoPlugin(backend="inductor") if train_args.torch_compile else None
    return Accelerator(
        cpu=not use_cuda,
        mixed_precision=train_args.mixed_precision,
        gradient_accumulation_plugin=plugin,
        dynamo_plugin=dynamo,
    )


# ------------------------------------------------------------------------------------------------ 2. data


def load_data(setup: RunSetup) -> tuple[DatasetDict, PreTrainedTokenizerBase, dict[str, Dataset]]:
    """The corpus split into train / validation / test, the tokenizer, and the token ids of every split; nothing is
    written to output_dir before the data passed every check, those only the token ids answer included."""
    objective, args = setup.objective, setup.args
    # A missing dataset or column, or a corpus emptied by the filters, fails here, before anything is written.
    splits = split_corpus(objective, objective.data.load_corpus(args.data), args.data)
    set_seed(args.train.seed)
    features = tokenize_and_check(setup, splits)
    tokenizer = AutoTokenizer.from_pretrained(setup.output_dir / "tokenizer")
    if features is None:  # a process other than the main: the token ids of the tokenizer the main wrote
        features = featurize_splits(setup, splits, tokenizer)
    return splits, tokenizer, features


def tokenize_and_check(setup: RunSetup, splits: DatasetDict) -> dict[str, Dataset] | None:
    """The main process's token ids of every split, checked before anything is written; None on the other processes.

    The main process trains the tokenizer into a scratch folder, tokenises every split and checks what only the token
    ids tell (`check_batches`); only then does it start output_dir and put the tokenizer there. The others wait for
    its verdict, so every process raises the same error, and a run refused here leaves output_dir as it was (the
    files of a run that --overwrite_output_dir would replace included).
    """
    features, problem = None, None
    if setup.accelerator.is_main_process:
        with tempfile.TemporaryDirectory() as scratch:
            try:
                tokenizer_dir = tokenizer_folder(setup, splits["train"], Path(scratch))
                features = featurize_splits(setup, splits, AutoTokenizer.from_pretrained(tokenizer_dir))
                check_batches(setup, features["train"])
            except Exception as error:  # shared below, so the other processes do not wait for a main that stopped
                problem = error
            else:
                start_output_dir(setup)
                if tokenizer_dir != setup.output_dir / "tokenizer":
                    shutil.copytree(tokenizer_dir, setup.output_dir / "tokenizer", dirs_exist_ok=True)
    (problem,) = broadcast_object_list([problem])  # also the barrier: the others read the tokenizer after it
    if problem is not None:
        raise problem
    return features


def featurize_splits(setup: RunSetup, splits: DatasetDict, tokenizer: PreTrainedTokenizerBase) -> dict[str, Dataset]:
    return {name: setup.objective.data.featurize(split, tokenizer, setup.args.data) for name, split in splits.items()}


def check_batches(setup: RunSetup, train_features: Dataset) -> None:
    """What the tokenised training split decides: an epoch of each process must hold a whole accumulation window
    (`count_steps`), its batches counted as the loader cuts them and Accelerate shards them (ceil over processes)."""
    batches = len(train_sampler(train_features, setup.args.train))
    count_steps(setup.args.train, math.ceil(batches / setup.accelerator.num_processes))


def start_output_dir(setup: RunSetup) -> None:
    """The run's folder, with its arguments in run_config.json (main process); a replaced run's files go first."""
    args, output_dir = setup.args, setup.output_dir
    if args.train.overwrite_output_dir and setup.resume_path is None:
        clear_previous_run(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "run_config.json").write_text(
        json.dumps(
            {
                "model": asdict(args.model),
                "data": asdict(args.data),
                "train": asdict(args.train),
                "model_config": args.model_config,
            },
            indent=2,
        )
    )


def clear_previous_run(output_dir: Path) -> None:
    """Remove the files of the run that --overwrite_output_dir replaces; of its exports, only those that hold nothing
    but an export (`check_export_folders` refused any other before the run started)."""
    for name in RUN_FILES:
        path = output_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
    for path, output in export_folders(output_dir).items():
        if path.is_dir() and not path.is_symlink() and _not_an_export(path, output) is None:
            shutil.rmtree(path)


def tokenizer_folder(setup: RunSetup, train_split: Dataset, scratch: Path) -> Path:
    """The folder of the run's tokenizer: output_dir's when resuming a run that has one, else `scratch`, into which a
    new one trained on the training split is saved."""
    saved = setup.output_dir / "tokenizer"
    if setup.resume_path is not None and saved.is_dir():
        return saved
    model_args = setup.args.model
    make_tokenizer(
        setup.objective,
        train_split,
        setup.args.data,
        vocab_size=model_args.vocab_size,
        min_frequency=model_args.tokenizer_min_frequency,
        keep_placeholders=model_args.tokenizer_keep_placeholders,
    ).save_pretrained(scratch)
    return scratch


# ----------------------------------------------------------------------------------------------- 3. model


def set_up_training(
    setup: RunSetup, splits: DatasetDict, tokenizer: PreTrainedTokenizerBase, features: dict[str, Dataset]
) -> TrainingRun:
    """The model, loaders, optimizer and schedule, ready for the processes, and where the run starts."""
    args, accelerator = setup.args, setup.accelerator
    set_seed(args.train.seed)  # the same initial weights whatever the data step consumed
    model = build_model(setup.objective, setup.model_type, args.model_config, tokenizer)
    loaders = make_loaders(features, setup.objective.data.make_collator(tokenizer, model, args.data), args.train)
    model_class = type(model)
    model, optimizer, loaders, sharded = distribute(setup, model, loaders)
    total_steps = count_steps(args.train, len(loaders.train))
    # Stepped by hand on optimizer steps only (a prepared scheduler steps once per process per step).
    scheduler = get_cosine_schedule_with_warmup(optimizer, args.train.warmup_steps, total_steps)
    average = make_average(args.train, accelerator.unwrap_model(model), total_steps, sharded)
    progress = Progress()
    if setup.resume_path is not None:
        progress = load_checkpoint(accelerator, setup.resume_path, scheduler=scheduler, sharded=sharded)
        if average is not None:
            average.load(setup.resume_path, progress.step)
        accelerator.print(
            f"Resumed from {setup.resume_path} at step {progress.step} (epoch {progress.epoch}, "
            f"{progress.batches_in_epoch} batches into it)."
        )
    logger = MetricsLogger(
        setup.output_dir,
        enabled=accelerator.is_main_process,
        tensorboard=args.train.report_to == "tensorboard",
        resume_step=progress.step if setup.resume_path is not None else None,
    )
    training = TrainingRun.from_setup(
        setup,
        splits=splits,
        tokenizer=tokenizer,
        model=model,
        model_class=model_class,
        sharded=sharded,
        optimizer=optimizer,
        scheduler=scheduler,
        loaders=loaders,
        total_steps=total_steps,
        progress=progress,
        logger=logger,
        average=average,
    )
    print_summary(training, rows=len(features["train"]))
    return training


def check_no_average_when_sharded(train_args: TrainArguments) -> None:
    """Checkpoint averaging needs the whole weights at every step, which a sharded model does not hold."""
    if train_args.average_last_steps:
        raise ValueError(
            "--average_last_steps is not supported with a sharded model (FSDP on CPUs): the mean would need the "
            "gathered weights at every step. Set it to 0, or train without sharding."
        )


def make_average(train_args: TrainArguments, model, total_steps: int, sharded: tuple | None) -> WeightAverage | None:
    """The running mean of the last `average_last_steps` steps' weights, or None (averaging off)."""
    if not train_args.average_last_steps:
        return None
    if sharded is not None:  # refused by `configure` already
        check_no_average_when_sharded(train_args)
    return WeightAverage(model, first_step=max(1, total_steps - train_args.average_last_steps + 1))


def distribute(setup: RunSetup, model, loaders: Loaders):
    """(model, optimizer, loaders, sharded) ready for the processes: prepared by Accelerate, or with the model
    sharded by torch's fully_shard on CPUs, where Accelerate would silently replicate it (then `sharded` is the
    (model, optimizer) pair that checkpoints gather)."""
    accelerator, train_args = setup.accelerator, setup.args.train
    if setup.sharding:
        shard(model)
    optimizer = make_optimizer(model, train_args, accelerator.device.type)
    batches = (loaders.train, loaders.eval, loaders.test)
    if setup.sharding:
        optimizer, *batches = accelerator.prepare(optimizer, *batches)
        accelerator.print(
            f"Sharded the model with FSDP2 (fully_shard) over {accelerator.num_processes} CPU processes."
        )
        sharded = (model, optimizer.optimizer)
    else:
        model, optimizer, *batches = accelerator.prepare(model, optimizer, *batches)
        sharded = None
    train, evaluation, test = batches
    return model, optimizer, Loaders(train=train, sampler=loaders.sampler, eval=evaluation, test=test), sharded


def make_optimizer(model, train_args: TrainArguments, device_type: str = "cpu") -> torch.optim.Optimizer:
    """AdamW; matrices decay, biases / norms / 1-D parameters do not. Tied weights appear once.

    On CPU and CUDA it is torch's fused kernel (HF Trainer's default, `adamw_torch_fused`): one pass over all
    parameters instead of a dozen for-each passes, which are most of the optimizer step of a small model.
    """
    decay, no_decay = [], []
    for parameter in model.parameters():
        if parameter.requires_grad:
            (decay if parameter.dim() >= 2 else no_decay).append(parameter)
    groups = [{"params": decay, "weight_decay": train_args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(
        groups,
        lr=train_args.learning_rate,
        betas=(train_args.adam_beta1, train_args.adam_beta2),
        eps=train_args.adam_epsilon,
        fused=device_type in ("cpu", "cuda"),
    )


def count_steps(train_args: TrainArguments, batches_per_epoch: int) -> int:
    """The optimizer steps of the run: --max_steps, or --num_train_epochs of whole accumulation windows."""
    ga = train_args.gradient_accumulation_steps
    windows_per_epoch = batches_per_epoch // ga
    if windows_per_epoch == 0:
        raise ValueError(
            f"The training split gives {batches_per_epoch} batches per process, fewer than "
            f"gradient_accumulation_steps={ga}; use more data or smaller batches."
        )
    return (
        train_args.max_steps
        if train_args.max_steps > 0
        else math.ceil(train_args.num_train_epochs * windows_per_epoch)
    )


def print_summary(training: TrainingRun, *, rows: int) -> None:
    accelerator = training.accelerator
    core = accelerator.unwrap_model(training.model, keep_torch_compile=False)
    n_params = sum(p.numel() for p in core.parameters())
    accelerator.print(
        f"{training.objective.name}: {type(core).__name__} ({n_params / 1e6:.2f}M parameters), {rows} training "
        f"rows, {len(training.loaders.train)} batches per process per epoch, {accelerator.num_processes} "
        f"process(es), {training.total_steps} steps; data and tokenizer took {time.time() - training.started:.1f}s."
    )


def main(argv: list[str] | None = None) -> int:
    model_args, data_args, train_args, model_config = parse_args(argv)
    run(model_args, data_args, train_args, model_config)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        # Each process of a launched run ends its process group before the interpreter exits: otherwise gloo's
        # threads can race the exit ("terminate called without an active exception", SIGABRT after the export was
        # written; seen with two processes on a loaded 2-core machine).
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
