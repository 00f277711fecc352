"""FSDP2 on CPUs: `accelerate launch --config_file training/accelerate_configs/fsdp.yaml` really shards the model
(Accelerate alone would replicate it with plain DDP), takes the steps of one process with the same global batch,
checkpoints and resumes exactly, and exports a full model that `from_pretrained` loads."""

import os
import subprocess
import sys

import pytest
import torch
from test_training import REPO, argv, free_port, train_losses
from transformers import AutoModelForCausalLM

from training.args import parse_args
from training.run.sharding import check_cpu_fsdp_settings, cpu_fsdp_requested
from training.train import run

COMMON = (
    "--max_train_samples",
    "96",
    "--max_steps",
    "6",
    "--eval_steps",
    "3",
    "--per_device_train_batch_size",
    "8",
    "--save_total_limit",
    "4",
)


def _launch_fsdp(output_dir, *extra) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(REPO / "training" / "accelerate_configs" / "fsdp.yaml"),
        "--num_processes",
        "2",
        "--main_process_port",
        free_port(),
        "--mixed_precision",
        "no",
        "-m",
        "training.train",
        *argv("causal_lm", output_dir, *COMMON, *extra),
    ]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_two_sharded_processes_match_one_process_and_resume_exactly(tmp_path):
    run(
        *parse_args(
            argv("causal_lm", tmp_path / "one", *COMMON, "--gradient_accumulation_steps", "2", "--save_steps", "0")
        )
    )
    done = _launch_fsdp(tmp_path / "two", "--save_steps", "2")
    assert "Sharded the model with FSDP2 (fully_shard) over 2 CPU processes" in done.stdout
    assert "2 process(es)" in done.stdout
    one, two = train_losses(tmp_path / "one"), train_losses(tmp_path / "two")
    assert len(two) == 6
    torch.testing.assert_close(two, one, rtol=1e-4, atol=0)

    exported = AutoModelForCausalLM.from_pretrained(tmp_path / "two" / "final")
    reference = AutoModelForCausalLM.from_pretrained(tmp_path / "one" / "final")
    for (name, ours), theirs in zip(exported.state_dict().items(), reference.state_dict().values(), strict=True):
        torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-5, msg=name)

    # A sharded checkpoint (full weights and optimizer state, per-process RNG) resumes to the same steps.
    _launch_fsdp(
        tmp_path / "resumed",
        "--save_steps",
        "2",
        "--resume_from_checkpoint",
        str(tmp_path / "two" / "checkpoints" / "step_00002"),
    )
    assert train_losses(tmp_path / "resumed") == two[2:]


@pytest.mark.parametrize(
    ("environment", "message"),
    [
        ({"FSDP_VERSION": "1"}, r"fsdp_version=1 .*set fsdp_version: 2"),
        ({"FSDP_VERSION": "2", "FSDP_OFFLOAD_PARAMS": "true"}, r"fsdp_offload_params: true .* not supported"),
        ({"FSDP_VERSION": "2", "FSDP_ACTIVATION_CHECKPOINTING": "true"}, r"fsdp_activation_checkpointing: true"),
    ],
)
def test_fsdp_settings_that_would_not_take_effect_on_a_cpu_are_refused(monkeypatch, environment, message):
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert cpu_fsdp_requested(use_cuda=False) and not cpu_fsdp_requested(use_cuda=True)
    with pytest.raises(ValueError, match=message):
        check_cpu_fsdp_settings()
