"""Faults of the training job, each kept fixed: nothing executed from a checkpoint, no silent NaN or no-op run, no
flag that quietly does nothing, no lost checkpoint or export at any crash point, and errors that name the problem."""

import json
import math
import os
import shutil
from pathlib import Path

import pytest
import safetensors.torch
import torch
from test_training import _fails_before_training, _FakeAccelerator, _FakeScheduler, argv, train_losses

from hf_attention.commands import destinations
from training import objectives
from training.args import parse_args
from training.finish import export as export_lib
from training.run import losses
from training.run.checkpoint import LATEST, Progress, is_checkpoint, resolve_checkpoint, save_checkpoint
from training.run.metrics_log import read_metrics
from training.train import main, run


class _RunsCode:
    """A pickle that creates a file when unpickled without restriction."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


# ------------------------------------------------------------------------------------------------- security


def test_resume_never_unpickles_code_from_a_checkpoint(tmp_path, monkeypatch):
    out = tmp_path / "run"
    common = ("--max_train_samples", "64", "--save_steps", "2", "--eval_steps", "0")
    run(*parse_args(argv("causal_lm", out, *common, "--max_steps", "2")))
    checkpoint = out / "checkpoints" / "step_00002"
    assert (checkpoint / "scheduler.json").is_file()
    assert sorted(p.name for p in checkpoint.glob("*.pkl")) == ["random_states_0.pkl"]  # loaded weights_only
    marker = tmp_path / "PWNED"
    loads = []
    real_load = torch.load

    def recording_load(*args, **kwargs):
        loads.append(kwargs.get("weights_only"))
        return real_load(*args, **kwargs)

    monkeypatch.setattr(torch, "load", recording_load)
    run(*parse_args(argv("causal_lm", out, *common, "--max_steps", "3", "--resume_from_checkpoint", "latest")))
    assert loads and all(flag is True for flag in loads), loads  # optimizer and RNG: plain data only

    # What older versions wrote and Accelerate loads with weights_only=False: refused before anything is loaded.
    torch.save(_RunsCode(marker), checkpoint / "custom_checkpoint_0.pkl")
    for resume in (str(checkpoint), "latest"):
        with pytest.raises(ValueError, match=r"holds custom_checkpoint_0.pkl, a pickle that Accelerate would load"):
            run(*parse_args(argv("causal_lm", out, *common, "--max_steps", "4", "--resume_from_checkpoint", resume)))
    assert not marker.exists()


# ------------------------------------------------------------------------------------------ silent results


def test_masked_lm_windows_without_masked_tokens_are_skipped_not_nan(tmp_path):
    """Rows of 8 tokens, one per batch: many batches get no masked token (0/0 = NaN in the old loop)."""
    out = tmp_path / "mlm"
    with pytest.warns(UserWarning, match="held no target token"):
        results = run(
            *parse_args(
                argv(
                    "masked_lm",
                    out,
                    "--max_length",
                    "8",
                    "--per_device_train_batch_size",
                    "1",
                    "--max_steps",
                    "20",
                    "--eval_steps",
                    "0",
                )
            )
        )
    assert results["steps"] == 20 and math.isfinite(results["test_loss"])
    assert all(math.isfinite(loss) for loss in train_losses(out))
    weights = safetensors.torch.load_file(out / "final" / "model.safetensors")
    assert all(torch.isfinite(tensor).all() for tensor in weights.values())


def test_a_non_finite_loss_stops_the_run_before_it_is_applied_or_saved(tmp_path, monkeypatch):
    real_loss, calls = losses.token_loss, {"n": 0}

    def loss_that_overflows_at_step_3(*args, **kwargs):
        calls["n"] += 1
        loss = real_loss(*args, **kwargs)
        return loss * float("inf") if calls["n"] == 3 else loss

    monkeypatch.setattr(losses, "token_loss", loss_that_overflows_at_step_3)
    out = tmp_path / "run"
    with pytest.raises(FloatingPointError, match="Step 3: the training loss is"):
        run(
            *parse_args(
                argv(
                    "causal_lm",
                    out,
                    "--max_train_samples",
                    "64",
                    "--max_steps",
                    "6",
                    "--save_steps",
                    "1",
                    "--eval_steps",
                    "0",
                )
            )
        )
    assert not (out / "final").exists()
    assert resolve_checkpoint("latest", out).name == "step_00002"
    weights = safetensors.torch.load_file(out / "checkpoints" / "step_00002" / "model.safetensors")
    assert all(torch.isfinite(tensor).all() for tensor in weights.values())


# --------------------------------------------------------------------------------------------------- flags


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--max_steps", "0", "--num_train_epochs", "0"],
            r"--max_steps=0 and --num_train_epochs=0.0 would train no step",
        ),
        (["--max_steps", "-5", "--num_train_epochs", "-1"], r"would train no step"),
        (["--eval_steps", "-1"], r"--eval_steps=-1 is not allowed: eval_steps must be at least 0"),
        (["--save_steps", "-1"], r"--save_steps=-1 is not allowed"),
        (["--logging_steps", "0"], r"--logging_steps=0 is not allowed: logging_steps must be at least 1"),
        (["--save_total_limit", "0"], r"--save_total_limit=0 is not allowed"),
        (["--report_to", "wandb"], r"--report_to='wandb' is not supported; allowed values are 'tensorboard', 'none'"),
        (["--per_device_train_batch_size", "0"], r"--per_device_train_batch_size=0 is not allowed"),
        (["--per_device_eval_batch_size", "-4"], r"--per_device_eval_batch_size=-4 is not allowed"),
        (["--max_tokens_per_batch", "0"], r"--max_tokens_per_batch=0 is not allowed"),
        (["--learning_rate", "0"], r"--learning_rate=0.0 is not allowed: learning_rate must be in \(0.0, inf\)"),
        (["--adam_beta2", "1.0"], r"--adam_beta2=1.0 is not allowed"),
        (["--mlm_probability", "0"], r"--mlm_probability=0.0 is not allowed: mlm_probability must be in \(0.0, 1.0\]"),
        (["--mlm_probability", "1.5"], r"--mlm_probability=1.5 is not allowed"),
        (["--block_size", "1"], r"--block_size=1 is not allowed"),
        (["--vocab_size", "0"], r"--vocab_size=0 is not allowed"),
        (["--model_config", "{hidden_size: 64}"], r"--model_config must be a JSON object such as .* is not JSON"),
        (["--model_config", "[1, 2]"], r"--model_config must be a JSON object"),
    ],
)
def test_flags_that_would_do_nothing_or_the_wrong_thing_are_refused(flags, message):
    with pytest.raises(ValueError, match=message):
        parse_args(["--objective", "masked_lm", *flags])


@pytest.mark.parametrize(
    ("objective", "flags", "message"),
    [
        (
            "translation",
            ["--vocab_size", "99999999999999999999"],
            r"--vocab_size=99999999999999999999 is not "
            r"allowed: vocab_size must be at least 1 and at most 2147483647",
        ),
        ("causal_lm", ["--vocab_size", "100"], r"vocab_size=100 is too small: byte-level BPE needs 256 byte symbols"),
        ("causal_lm", ["--seed", "-1"], r"--seed=-1 is not allowed: seed must be at least 0"),
        ("causal_lm", ["--seed", "4294967296"], r"--seed=4294967296 is not allowed"),
        ("causal_lm", ["--num_threads", "4294967296"], r"--num_threads=4294967296 is not allowed"),
        ("causal_lm", ["--max_steps", "99999999999"], r"--max_steps=99999999999 is not allowed"),
        ("causal_lm", ["--average_last_steps", "-1"], r"--average_last_steps=-1 is not allowed"),
        ("causal_lm", ["--weight_decay", "inf"], r"--weight_decay=inf is not allowed"),
        ("causal_lm", ["--max_grad_norm", "nan"], r"--max_grad_norm=nan is not allowed"),
        ("causal_lm", ["--num_train_epochs", "inf"], r"--num_train_epochs=inf is not allowed: .* a finite number"),
        ("translation", ["--generation_length_penalty", "nan"], r"--generation_length_penalty=nan is not allowed"),
    ],
)
def test_numbers_out_of_reach_are_refused_before_anything_is_written(tmp_path, objective, flags, message):
    """A huge integer or a non-finite float would pass a check of its sign only and end in an OverflowError (or a
    diverged loss) after run_config.json and the tokenizer were written, and then the next run in the same folder
    is refused as 'already holds files'."""
    _fails_before_training(argv(objective, tmp_path / "o", *flags), message, tmp_path / "o")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("setting", ["unlikelihood_weight", "label_smoothing"])
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_non_finite_loss_option_of_a_hugging_face_model_is_refused(tmp_path, setting, value):
    """BART's config does not check the options it carries for our loss; NaN or infinity would stop the run at
    step 1 with advice to lower the learning rate."""
    bart = {"d_model": 32, "encoder_layers": 1, "decoder_layers": 1, setting: value}
    _fails_before_training(
        ["--objective", "translation", "--model_type", "bart", "--model_config", json.dumps(bart)]
        + ["--output_dir", str(tmp_path / "o")],
        rf"model_config {setting}={value!r} must be a",
        tmp_path / "o",
    )
    assert not (tmp_path / "o").exists()


def test_averaging_a_sharded_model_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_VERSION", "2")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    _fails_before_training(
        argv("causal_lm", tmp_path / "o", "--average_last_steps", "4"),
        r"--average_last_steps is not supported with a sharded model",
        tmp_path / "o",
    )
    assert not (tmp_path / "o").exists()


def test_a_typo_in_model_config_is_refused_before_any_data_is_read(tmp_path):
    _fails_before_training(
        argv("translation", tmp_path / "o", model={"hiden_size": 64}),
        r"model_config has keys that HFAttentionSeq2SeqConfig does not know: 'hiden_size' "
        r"\(did you mean 'hidden_size'",
        tmp_path / "o",
    )
    _fails_before_training(
        argv("translation", tmp_path / "o", "--model_type", "bart", model={"d_modle": 64}),
        r"BartConfig does not know: 'd_modle' \(did you mean 'd_model'",
        tmp_path / "o",
    )


@pytest.mark.parametrize(
    ("objective", "flags", "message"),
    [
        (
            "causal_lm",
            ["--markup_augmentation", "0.4"],
            r"--markup_augmentation=0.4 does not act in objective "
            r"'causal_lm': it applies to 'translation'\. Remove it \(its default is 0\.0\)",
        ),
        (
            "masked_lm",
            ["--block_size", "64"],
            r"--block_size=64 does not act in objective 'masked_lm': it applies "
            r"to 'causal_lm'",
        ),
        ("causal_lm", ["--max_length", "64"], r"--max_length=64 .* applies to 'masked_lm', 'language_id'"),
        ("translation", ["--mlm_probability", "0.3"], r"--mlm_probability=0.3 .* applies to 'masked_lm'"),
        ("translation", ["--max_topics", "5"], r"--max_topics=5 .* applies to 'causal_lm', 'masked_lm'"),
        ("masked_lm", ["--max_chars", "50"], r"--max_chars=50 .* applies to 'language_id', 'translation'"),
        ("causal_lm", ["--languages", "de,fr"], r"--languages='de,fr' .* applies to 'language_id'"),
        ("causal_lm", ["--generation_num_beams", "4"], r"--generation_num_beams=4 .* applies to 'translation'"),
        ("masked_lm", ["--bleu_samples", "8"], r"--bleu_samples=8 .* applies to 'translation'"),
        ("causal_lm", ["--system_catalogs", "true"], r"--system_catalogs=True .* applies to 'translation'"),
        (
            "causal_lm",
            ["--protect_placeholders", "true"],
            r"--protect_placeholders=True does not act in objective 'causal_lm': it applies to 'translation'\. "
            r"Remove it \(its default is False\)",
        ),
    ],
)
def test_an_argument_the_objective_does_not_read_is_refused(tmp_path, objective, flags, message):
    """Each objective reads its own corpus, row and generation arguments; one set for another objective would be
    accepted, written to run_config.json and ignored."""
    _fails_before_training(argv(objective, tmp_path / "o", *flags), message, tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_every_objective_option_is_read_by_some_objective_and_defaults_are_accepted():
    from training.args import DataArguments, TrainArguments
    from training.argument_checks import OBJECTIVE_OPTIONS, check_objective_options

    declared = {name for objective in objectives.OBJECTIVES.values() for name in objective.options}
    assert declared == set(OBJECTIVE_OPTIONS)  # no objective names an argument that is not one, none is unread
    for objective in objectives.OBJECTIVES.values():
        check_objective_options(objective, DataArguments(), TrainArguments())
    # the default, given explicitly, asks for nothing (the tutorials pass --markup_augmentation 0 to translation)
    check_objective_options(objectives.OBJECTIVES["causal_lm"], DataArguments(markup_augmentation=0), TrainArguments())


@pytest.mark.parametrize("model_type", ["hf_attention_encoder", "bert"])
def test_an_unlikelihood_weight_a_masked_lm_would_ignore_is_refused(tmp_path, model_type):
    """The unlikelihood term is for models that write their labels left to right; a masked LM (ours or BERT) never
    gets it, so a weight for one would be stored, shown on the card and ignored."""
    _fails_before_training(
        argv("masked_lm", tmp_path / "o", "--model_type", model_type, model={"unlikelihood_weight": 2.0}),
        r"model_config unlikelihood_weight=2.0 does not act in objective 'masked_lm': the unlikelihood term applies "
        r"to models that write their labels left to right",
        tmp_path / "o",
    )
    assert not (tmp_path / "o").exists()


def test_the_card_lists_only_the_settings_that_acted():
    from training.run.models import acting_model_config, check_loss_options

    settings = {"hidden_size": 32, "label_smoothing": 0.1, "unlikelihood_weight": 0.0}
    check_loss_options(objectives.OBJECTIVES["masked_lm"], settings)  # 0 asks for nothing
    assert acting_model_config(objectives.OBJECTIVES["masked_lm"], settings) == {
        "hidden_size": 32,
        "label_smoothing": 0.1,
    }
    translation = {**settings, "unlikelihood_weight": 2.0}
    check_loss_options(objectives.OBJECTIVES["translation"], translation)
    assert acting_model_config(objectives.OBJECTIVES["translation"], translation) == translation
    masked_lm = _card_hyperparameters("masked_lm", settings)
    assert json.loads(masked_lm["model config"]) == {"hidden_size": 32, "label_smoothing": 0.1}
    assert "generation" not in masked_lm  # it does not generate
    assert _card_hyperparameters("causal_lm", settings)["generation"] == "greedy"


def _card_hyperparameters(objective: str, model_config: dict) -> dict:
    """The hyperparameter table of the model card of a one-step run of `objective`."""
    from types import SimpleNamespace

    from training.args import TrainArguments
    from training.finish.end_of_run import _hyperparameters

    run = SimpleNamespace(
        objective=objectives.OBJECTIVES[objective],
        args=SimpleNamespace(train=TrainArguments(), model_config=model_config),
        progress=SimpleNamespace(step=1),
        accelerator=SimpleNamespace(num_processes=1),
        average=None,
        tokenizer=range(300),
    )
    return _hyperparameters(run)


def test_a_model_config_value_the_config_refuses_fails_before_any_data_is_read(tmp_path):
    _fails_before_training(
        argv("causal_lm", tmp_path / "o", model={"hidden_size": 30, "num_attention_heads": 4}),
        r"Invalid model_config for model_type='hf_attention_decoder': hidden_size=30 is not "
        r"divisible by num_attention_heads=4",
        tmp_path / "o",
    )
    assert not (tmp_path / "o" / "tokenizer").exists()


def test_output_dir_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("not a folder")
    with pytest.raises(ValueError, match=r"--output_dir=.*out.txt' is a file; it must be a folder"):
        main(argv("causal_lm", target))
    assert target.read_text() == "not a folder"


def test_shipped_configs_never_delete_a_previous_run_by_default():
    for path in (Path(__file__).resolve().parents[1] / "training" / "configs").glob("*.yaml"):
        if path.stem.startswith("finetune"):
            continue
        assert parse_args(["--config", str(path)])[2].overwrite_output_dir is False, path.name


# ------------------------------------------------------------------------------------------ checkpoint crashes


class _Crash(BaseException):
    """Stands for the process dying at that instant: nothing after it runs, no handler catches it."""


def _crash_at_operation(monkeypatch, number: int) -> dict:
    """Make the `number`-th rename, exchange of two folders' names or folder removal (counted from 1) die before it
    happens."""
    calls = {"n": 0}

    def dying(real):
        def operation(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == number:
                raise _Crash
            return real(*args, **kwargs)

        return operation

    monkeypatch.setattr(os, "replace", dying(os.replace))
    monkeypatch.setattr(os, "rename", dying(os.rename))
    monkeypatch.setattr(destinations, "_exchange", dying(destinations._exchange))
    monkeypatch.setattr(shutil, "rmtree", dying(shutil.rmtree))
    return calls


def _operations_of(function) -> int:
    with pytest.MonkeyPatch.context() as patch:
        calls = _crash_at_operation(patch, number=10**6)
        function()
    return calls["n"]


@pytest.mark.parametrize("scenario", ["new_step", "step_left_by_an_abandoned_run", "prune"])
def test_latest_names_a_complete_checkpoint_whatever_instant_a_save_dies(tmp_path, scenario):
    """Resuming from an older checkpoint and saving a step whose folder an abandoned run left (which `latest`
    names) used to remove that folder before the new one replaced it: a kill there left `latest` dangling."""
    accelerator, scheduler = _FakeAccelerator(), _FakeScheduler()

    def prepare(root):
        shutil.rmtree(root, ignore_errors=True)
        for step in (5, 10):
            save_checkpoint(accelerator, root, Progress(step=step), scheduler=scheduler)

    step, keep = {"new_step": (15, None), "step_left_by_an_abandoned_run": (10, None), "prune": (15, 1)}[scenario]
    prepare(tmp_path / "probe")
    total = _operations_of(
        lambda: save_checkpoint(accelerator, tmp_path / "probe", Progress(step=step), scheduler=scheduler, keep=keep)
    )
    assert total >= 3
    for number in range(1, total + 1):
        root = tmp_path / f"crash_{number}"
        prepare(root)
        with pytest.MonkeyPatch.context() as patch:
            _crash_at_operation(patch, number)
            with pytest.raises(_Crash):
                save_checkpoint(accelerator, root, Progress(step=step), scheduler=scheduler, keep=keep)
        path = resolve_checkpoint(LATEST, root)
        assert is_checkpoint(path), (number, path)
        # ... and the next save recovers a tidy folder.
        save_checkpoint(accelerator, root, Progress(step=20), scheduler=scheduler, keep=keep)
        assert resolve_checkpoint(LATEST, root).name == "step_00020"
        assert not list((root / "checkpoints").glob(".tmp_*"))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", r"progress.json is not readable JSON"),
        ('{"step": 3', r"progress.json is not readable JSON"),
        ('{"step": -1, "epoch": 0, "batches_in_epoch": 0}', r"progress.json holds .*should hold"),
        ('{"step": "3"}', r"progress.json holds .*should hold"),
    ],
)
def test_a_damaged_progress_file_is_named(tmp_path, content, message):
    save_checkpoint(_FakeAccelerator(), tmp_path, Progress(step=3), scheduler=_FakeScheduler())
    (tmp_path / "checkpoints" / "step_00003" / "progress.json").write_text(content)
    with pytest.raises(ValueError, match=message):
        resolve_checkpoint(LATEST, tmp_path)


def test_a_damaged_latest_pointer_is_named(tmp_path):
    save_checkpoint(_FakeAccelerator(), tmp_path, Progress(step=3), scheduler=_FakeScheduler())
    (tmp_path / "checkpoints" / LATEST).write_text("../../etc")
    with pytest.raises(ValueError, match=r"latest should name a checkpoint folder .* holds '../../etc'"):
        resolve_checkpoint(LATEST, tmp_path)


def test_a_torn_metrics_line_is_dropped_on_resume_and_other_damage_is_named(tmp_path):
    extra = ("--max_train_samples", "64", "--max_steps", "4", "--save_steps", "2", "--eval_steps", "0")
    out = tmp_path / "run"
    run(*parse_args(argv("causal_lm", out, *extra)))
    reference = train_losses(out)
    metrics = out / "metrics.jsonl"
    kept = [line for line in metrics.read_text().splitlines() if json.loads(line)["step"] <= 2]
    metrics.write_text("\n".join(kept) + '\n{"step": 3, "train/lo')  # killed while appending step 3
    with pytest.warns(UserWarning, match=r"metrics.jsonl, line \d+: dropped a record torn"):
        run(
            *parse_args(
                argv("causal_lm", out, *extra, "--resume_from_checkpoint", str(out / "checkpoints" / "step_00002"))
            )
        )
    assert train_losses(out) == reference
    metrics.write_text('{"step": 1}\nnot json\n{"step": 2}\n')
    with pytest.raises(ValueError, match=r"metrics.jsonl, line 2: not a JSON record"):
        read_metrics(metrics)


# ---------------------------------------------------------------------------------------------- the export


def test_the_export_is_never_lost_whatever_instant_it_dies(tmp_path, monkeypatch):
    """The previous export stays whole until the new one is complete (it used to be deleted first), and the next
    export removes what a crash left beside it."""

    def write_version(version):
        def write(model, tokenizer, directory, **kwargs):
            (directory / "model.safetensors").write_text("half")
            if version == "dies-while-writing":
                raise _Crash
            (directory / "config.json").write_text(json.dumps({"model_type": "hf_attention_decoder", "v": version}))

        return write

    def export(root, version):
        monkeypatch.setattr(export_lib, "_write_export", write_version(version))
        return export_lib.export_model(
            None, None, root / "final", objective=objectives.OBJECTIVES["causal_lm"], card={}
        )

    def complete_export(root):
        """The version of the export at final/, or in the hidden folder of the old one during a swap."""
        for folder in [root / "final", *root.glob(".final.*.previous")]:
            if (folder / "config.json").is_file():
                return json.loads((folder / "config.json").read_text())["v"]
        return None

    root = tmp_path / "probe"
    export(root, "1")
    total = _operations_of(lambda: export(root, "2"))
    assert total >= 2
    for number in range(1, total + 1):
        root = tmp_path / f"crash_{number}"
        export(root, "1")
        with pytest.MonkeyPatch.context() as patch:
            _crash_at_operation(patch, number)
            with pytest.raises(_Crash):
                export(root, "2")
        assert complete_export(root) in ("1", "2"), number
        export(root, "3")  # the next export finds its way back to one tidy folder
        assert json.loads((root / "final" / "config.json").read_text())["v"] == "3"
        assert sorted(p.name for p in root.iterdir()) == ["final"], number
    root = tmp_path / "while_writing"
    export(root, "1")
    with pytest.raises(_Crash):
        export(root, "dies-while-writing")
    assert json.loads((root / "final" / "config.json").read_text())["v"] == "1"
    assert sorted(p.name for p in root.iterdir()) == ["final"]


# ------------------------------------------------------------------------------------------- opaque errors


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", r"Data file .*data.txt is empty"),
        ("Grüße aus Köln\n".encode("latin-1"), r"Data file .*data.txt, line 1, is not UTF-8 text"),
    ],
)
def test_unreadable_data_files_are_named(tmp_path, content, message):
    data = tmp_path / "data.txt"
    data.write_bytes(content)
    _fails_before_training(argv("causal_lm", tmp_path / "o", "--dataset", str(data)), message, tmp_path / "o")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--languages", "de"], r"--languages='de': language identification needs at least two language codes"),
        (["--lora", "r=abc"], r"Bad --lora item 'r=abc': r must be a whole number >= 1"),
        (["--lora", "r=0"], r"Bad --lora value r=0"),
        (["--lora", "dropout=1.5"], r"Bad --lora value lora_dropout=1.5"),
        (["--model_name_or_path", "./no/such/run"], r"--model_name_or_path='./no/such/run': no such folder"),
        (["--model_name_or_path", "runs/missing/final"], r"no such folder"),
        (["--model_config", "not json"], r"--model_config must be a JSON object"),
        (["--max_length", "0"], r"--max_length=0 is not allowed"),
    ],
)
def test_finetune_flags_are_checked_before_work(flags, message):
    from training.finetune import parse_args as parse_finetune_args

    with pytest.raises(ValueError, match=message):
        parse_finetune_args(["--task", "language_id", *flags])


def test_finetune_model_folder_without_config_is_named(tmp_path):
    from training.finetune import parse_args as parse_finetune_args

    with pytest.raises(ValueError, match=r"is not a model folder: it has no config.json"):
        parse_finetune_args(["--model_name_or_path", str(tmp_path)])


@pytest.mark.parametrize("module", ["training.train", "training.finetune"])
def test_help_lists_every_option(module, capsys):
    """`--help` formats every option's help with argparse's %-formatting: a literal `%(name)s` in a help text (the
    placeholder examples) raised KeyError('name') instead of printing the usage."""
    import importlib

    entry = importlib.import_module(module)
    with pytest.raises(SystemExit) as exit:
        entry.main(["--help"])
    assert exit.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and "--output_dir" in out
    if module == "training.train":  # the help text that held the literal placeholder
        assert "(%(name)s, {0}, <b>, &amp;)" in " ".join(out.split())
