"""Fine-tuning with 🤗 Trainer / Seq2SeqTrainer (training/finetune.py), LoRA, gradient accumulation, pipelines and
the accelerate launch configs. Tiny models and a few catalogs, so the whole file runs in well under 90 s."""

import math
import re
from pathlib import Path

import pytest
import torch
import yaml
from datasets import Dataset
from transformers import Trainer, TrainingArguments, pipeline

import hf_attention
from training import finetune

LANGUAGES = "de,fr,es,it,nl,sv"
TINY_MODEL = (
    '{"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64, '
    '"hidden_dropout_prob": 0.0}'
)
CONFIG_DIR = Path(__file__).resolve().parents[1] / "training" / "accelerate_configs"


@pytest.fixture(scope="module")
def language_id_run(tmp_path_factory):
    """One end-to-end run of `python -m training.finetune` (YAML config + CLI overrides) on a tiny model."""
    out = tmp_path_factory.mktemp("lid")
    config = out / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "task": "language_id",
                "languages": LANGUAGES,
                "max_per_language": 80,
                "max_catalogs": 3,
                "vocab_size": 400,
                "max_length": 32,
                "per_device_train_batch_size": 16,
                "learning_rate": 3e-3,
                "warmup_steps": 0,
                "logging_steps": 5,
                "max_steps": 100,
                "disable_tqdm": True,
                "model_config": {"hidden_size": 16},  # overridden by --model_config below
            }
        )
    )
    results = finetune.main(
        [
            "--config",
            str(config),
            "--output_dir",
            str(out / "model"),
            "--max_steps",
            "40",
            "--model_config",
            TINY_MODEL,
            "--seed",
            "0",
        ]
    )
    return results, out / "model"


def test_trainer_finetunes_classifier(language_id_run):
    results, _ = language_id_run
    assert results["global_step"] == 40  # the CLI flag won over the YAML value
    losses = results["loss_history"]
    assert len(losses) == 8 and all(map(math.isfinite, losses))
    assert sum(losses[-2:]) < sum(losses[:2])  # the loss goes down
    assert 0.0 <= results["test_accuracy"] <= 1.0 and math.isfinite(results["test_loss"])
    assert results["labels"] == LANGUAGES.split(",")
    assert set(results["rows"]) == {"train", "validation", "test"} and results["rows"]["test"] > 0
    assert re.fullmatch(r"[0-9a-f]{64}", results["corpus_sha256"])  # which rows were read, comparable across machines


def test_saved_classifier_loads_in_pipeline(language_id_run):
    _, directory = language_id_run
    assert (directory / "model.safetensors").is_file() and (directory / "tokenizer.json").is_file()
    classify = pipeline("text-classification", model=str(directory), device="cpu")
    assert type(classify.model).__name__ == "HFAttentionForSequenceClassification"
    predictions = classify(["Datei konnte nicht geöffnet werden", "Impossible d'ouvrir le fichier"], top_k=None)
    for scores in predictions:
        assert {row["label"] for row in scores} == set(LANGUAGES.split(","))
        assert abs(sum(row["score"] for row in scores) - 1) < 1e-4


def test_parse_args_yaml_overrides_and_cpu(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("task: translation\nmax_steps: 7\nlearning_rate: 0.01\nmodel_config:\n  hidden_size: 48\n")
    ft_args, training_args, model_config = finetune.parse_args(
        [
            "--config",
            str(config),
            "--max_steps",
            "3",
            "--model_config",
            '{"encoder_layers": 1}',
            "--output_dir",
            str(tmp_path / "o"),
        ]
    )
    assert ft_args.task == "translation" and type(training_args).__name__ == "Seq2SeqTrainingArguments"
    assert training_args.max_steps == 3 and training_args.learning_rate == 0.01
    assert model_config == {"hidden_size": 48, "encoder_layers": 1}
    assert training_args.use_cpu == (not torch.cuda.is_available())
    config.write_text("not_a_field: 1\n")
    with pytest.raises(ValueError, match="not_a_field"):
        finetune.parse_args(["--config", str(config)])
    with pytest.raises(ValueError, match="task="):
        finetune.parse_args(["--task", "summarization", "--output_dir", str(tmp_path / "o")])


def test_parse_lora():
    assert finetune.parse_lora("r=4,alpha=8,dropout=0,targets=q_proj+v_proj") == {
        "r": 4,
        "lora_alpha": 8.0,
        "lora_dropout": 0.0,
        "target_modules": ["q_proj", "v_proj"],
    }
    with pytest.raises(ValueError, match="rank"):
        finetune.parse_lora("rank=4")


def _tiny_classifier(num_labels=3, **overrides):
    config = hf_attention.HFAttentionEncoderConfig(
        vocab_size=50,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=32,
        hidden_dropout_prob=0.0,
        num_labels=num_labels,
        **overrides,
    )
    return hf_attention.HFAttentionForSequenceClassification(config)


def test_lora_wraps_saves_and_merges(tmp_path):
    model = _tiny_classifier()
    total = sum(p.numel() for p in model.parameters())
    peft_model = finetune.apply_lora(model, "r=2,alpha=4,dropout=0", task="language_id")
    trainable = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    # LoRA A and B (r=2) on q/k/v/o_proj of 2 layers: 8 x 2 x (32 + 32) = 1024, plus the classifier head (99)
    assert 0 < trainable < 0.15 * total
    names = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert any("lora_A" in n for n in names) and any("classifier" in n for n in names)
    assert not any("fc1" in n or "embed" in n for n in names)
    with torch.no_grad():  # make the adapter do something (B starts at zero)
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5)
    peft_model.eval()
    ids = torch.randint(5, 50, (3, 9))
    mask = torch.ones_like(ids)
    mask[0, 6:] = 0
    with torch.no_grad():
        wrapped = peft_model(input_ids=ids, attention_mask=mask).logits
    peft_model.save_pretrained(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_model.safetensors").is_file()
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()
    merged = peft_model.merge_and_unload()
    assert type(merged) is hf_attention.HFAttentionForSequenceClassification
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=ids, attention_mask=mask).logits, wrapped, atol=1e-5, rtol=1e-5)


def _grad_norm(tmp_path, batch_size, accumulation, rows):
    torch.manual_seed(0)
    model = _tiny_classifier()
    args = TrainingArguments(
        output_dir=str(tmp_path / f"ga{accumulation}"),
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulation,
        max_steps=1,
        logging_steps=1,
        learning_rate=1e-3,
        max_grad_norm=1e9,
        use_cpu=True,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        dataloader_drop_last=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=rows)
    trainer.train()
    return next(row["grad_norm"] for row in trainer.state.log_history if "grad_norm" in row)


def test_gradient_accumulation_matches_full_batch(tmp_path):
    """GA=2 x 4 rows gives the gradient of one batch of 8 rows: the classifier honours num_items_in_batch (the
    Trainer passes it because forward takes **kwargs, and then skips its own division by the GA steps)."""
    torch.manual_seed(1)
    rows = Dataset.from_dict(
        {
            "input_ids": torch.randint(5, 50, (8, 10)).tolist(),
            "attention_mask": [[1] * 10] * 8,
            "labels": [0, 1, 2, 0, 1, 2, 2, 1],
        }
    )
    full = _grad_norm(tmp_path, 8, 1, rows)
    accumulated = _grad_norm(tmp_path, 4, 2, rows)
    assert full > 0
    assert accumulated == pytest.approx(full, rel=1e-4)


def test_seq2seq_trainer_generates_and_scores_bleu(tmp_path):
    results = finetune.main(
        [
            "--task",
            "translation",
            "--target_lang",
            "de",
            "--system_catalogs",
            "true",
            "--max_catalogs",
            "2",
            "--max_train_samples",
            "64",
            "--max_eval_samples",
            "8",
            "--max_test_samples",
            "8",
            "--vocab_size",
            "300",
            "--max_source_length",
            "16",
            "--max_target_length",
            "16",
            "--max_steps",
            "3",
            "--per_device_train_batch_size",
            "8",
            "--per_device_eval_batch_size",
            "8",
            "--predict_with_generate",
            "true",
            "--generation_num_beams",
            "2",
            "--model_config",
            '{"hidden_size": 32, "encoder_layers": 1, "decoder_layers": 1, "num_attention_heads": 2, '
            '"intermediate_size": 64}',
            "--output_dir",
            str(tmp_path / "mt"),
            "--disable_tqdm",
            "true",
        ]
    )
    assert results["global_step"] == 3
    assert math.isfinite(results["test_bleu"]) and 0 <= results["test_bleu"] <= 100
    assert math.isfinite(results["test_chrf"]) and 0 <= results["test_chrf"] <= 100
    assert (tmp_path / "mt" / "model.safetensors").is_file() and (tmp_path / "mt" / "tokenizer.json").is_file()


# ------------------------------------------------------------------------------------------ accelerate configs

ACCELERATE_FILES = ("single_gpu", "multi_gpu_ddp", "fsdp", "deepspeed_zero2", "multi_node", "cpu_2proc")


@pytest.mark.parametrize("name", ACCELERATE_FILES)
def test_accelerate_configs_parse(name):
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
    from accelerate.utils import DistributedType

    path = CONFIG_DIR / f"{name}.yaml"
    raw = yaml.safe_load(path.read_text())
    config = load_config_from_file(str(path))  # raises on keys ClusterConfig does not know
    assert isinstance(config, ClusterConfig)
    for key in (
        "compute_environment",
        "distributed_type",
        "mixed_precision",
        "num_processes",
        "num_machines",
        "machine_rank",
        "use_cpu",
    ):
        assert key in raw, key
    assert config.num_processes >= 1 and config.num_machines >= 1
    expected = {
        "single_gpu": DistributedType.NO,
        "multi_gpu_ddp": DistributedType.MULTI_GPU,
        "fsdp": DistributedType.FSDP,
        "deepspeed_zero2": DistributedType.DEEPSPEED,
        "multi_node": DistributedType.MULTI_GPU,
        "cpu_2proc": DistributedType.MULTI_GPU,
    }[name]
    assert config.distributed_type == expected
    if name == "fsdp":
        fsdp = config.fsdp_config
        assert fsdp["fsdp_version"] == 2 and fsdp["fsdp_auto_wrap_policy"] == "TRANSFORMER_BASED_WRAP"
        for cls in fsdp["fsdp_transformer_layer_cls_to_wrap"].split(","):
            assert hasattr(hf_attention.modeling.layers, cls)  # the wrap policy names real layer classes
    if name == "deepspeed_zero2":
        assert config.deepspeed_config["zero_stage"] == 2
    if name == "multi_node":
        assert config.num_machines == 2 and config.main_process_ip and config.main_process_port
    if name == "cpu_2proc":
        assert config.num_processes == 2 and config.gpu_ids == "all"
