"""The training script (training/train.py) on tiny models: each objective learns and exports a folder the Auto
classes and pipelines load; resume is exact; accumulation and 2 processes take the same steps as one big batch;
push_to_hub uploads the export (fake HfApi); bad inputs fail with clear errors before any training step."""

import json
import math
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import safetensors.torch
import torch
import yaml
from conftest import export_candidates

from hf_attention import HFAttentionForCausalLM
from training.args import parse_args
from training.finish import export as export_lib
from training.run.checkpoint import LATEST, Progress, resolve_checkpoint, save_checkpoint
from training.run.metrics_log import read_metrics
from training.train import main, run

REPO = Path(__file__).resolve().parents[1]


def free_port() -> str:
    """A TCP port nothing listens on now, for one multi-process launch: two launches that run at the same time (on two
    pytest-xdist workers) would otherwise both rendezvous on accelerate's default port, 29500, and one would fail."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


CONFIGS = [
    REPO / "training" / "configs" / f"{name}.yaml"
    for name in (
        "translation_en_de",
        "translation_en_de_long",
        "translation_en_de_bart",
        "translation_en_de_sinusoidal",
        "causal_lm_pydoc",
        "masked_lm_pydoc",
    )
]

TINY_MODEL = {
    "hidden_size": 32,
    "num_attention_heads": 4,
    "intermediate_size": 64,
    "hidden_dropout_prob": 0.0,
    "max_position_embeddings": 64,
}
TINY = {
    "causal_lm": ["--max_topics", "40", "--block_size", "32", "--vocab_size", "350"],
    "masked_lm": ["--max_topics", "40", "--max_length", "48", "--vocab_size", "350"],
    "translation": [
        "--system_catalogs",  # any corpus will do for these runs: the machine's few catalogs are fast
        "true",
        "--max_catalogs",
        "5",
        "--max_source_length",
        "24",
        "--max_target_length",
        "24",
        "--vocab_size",
        "350",
        "--bleu_samples",
        "16",
    ],
}
LAYERS = {
    "causal_lm": {"num_hidden_layers": 2},
    "masked_lm": {"num_hidden_layers": 2},
    "translation": {"encoder_layers": 1, "decoder_layers": 1},
}


def argv(objective: str, output_dir, *extra, model: dict | None = None) -> list[str]:
    """Command-line arguments of a tiny run of `objective` (extra flags override these)."""
    model_config = {**TINY_MODEL, **LAYERS[objective], **(model or {})}
    return [
        "--objective",
        objective,
        "--output_dir",
        str(output_dir),
        *tiny_corpus_flags(objective, extra),
        "--max_train_samples",
        "256",
        "--max_eval_samples",
        "32",
        "--max_test_samples",
        "32",
        "--per_device_train_batch_size",
        "16",
        "--learning_rate",
        "3e-3",
        "--warmup_steps",
        "2",
        "--max_steps",
        "24",
        "--logging_steps",
        "1",
        "--eval_steps",
        "12",
        "--save_steps",
        "0",
        "--report_to",
        "none",
        "--disable_tqdm",
        "true",
        "--model_config",
        json.dumps(model_config),
        *extra,
    ]


def tiny_corpus_flags(objective: str, extra) -> list[str]:
    """TINY's flags of `objective`, less those that choose its built-in corpus when the run reads a --dataset (which
    replaces that corpus, so training.train refuses them beside it)."""
    from training.objectives import OBJECTIVES

    flags = TINY[objective]
    if "--dataset" not in extra:
        return flags
    corpus_options = OBJECTIVES[objective].corpus_options
    pairs = zip(flags[::2], flags[1::2], strict=True)
    return [item for flag, value in pairs if flag[2:] not in corpus_options for item in (flag, value)]


def train_losses(output_dir) -> list[float]:
    return [m["train/loss"] for m in read_metrics(Path(output_dir) / "metrics.jsonl") if "train/loss" in m]


class FakeHfApi:
    """Records what `push_to_hub` would upload."""

    calls: list = []

    def create_repo(self, repo_id, **kwargs):
        FakeHfApi.calls.append(("create_repo", repo_id, kwargs))
        return SimpleNamespace(repo_id=repo_id)

    def upload_folder(self, *, repo_id, folder_path, **kwargs):
        files = sorted(str(p.relative_to(folder_path)) for p in Path(folder_path).rglob("*") if p.is_file())
        FakeHfApi.calls.append(("upload_folder", repo_id, files))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One tiny run per objective (translation also pushes to a fake Hub); {objective: (output_dir, results)}."""
    runs = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(export_lib, "HfApi", FakeHfApi)
        for objective in ("causal_lm", "masked_lm", "translation"):
            output_dir = tmp_path_factory.mktemp(objective)
            extra = (
                ["--push_to_hub", "true", "--hub_model_id", "someone/tiny-en-de"] if objective == "translation" else []
            )
            results = run(*parse_args(argv(objective, output_dir, *extra)))
            runs[objective] = (output_dir, results)
    return runs


@pytest.mark.parametrize("objective", ["causal_lm", "masked_lm", "translation"])
def test_objective_loss_decreases(trained, objective):
    output_dir, results = trained[objective]
    losses = train_losses(output_dir)
    assert len(losses) == 24
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 - 0.3, losses
    assert results["steps"] == 24 and results["test_loss"] > 0
    metrics = read_metrics(output_dir / "metrics.jsonl")
    assert any("eval/perplexity" in m for m in metrics)
    assert (output_dir / "loss_curve.png").stat().st_size > 1000
    if objective == "translation":
        assert {"bleu", "chrf"} <= set(results)


def test_export_loads_with_auto_classes_and_pipelines(trained):
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

    for objective, auto in (
        ("causal_lm", AutoModelForCausalLM),
        ("masked_lm", AutoModelForMaskedLM),
        ("translation", AutoModelForSeq2SeqLM),
    ):
        final = trained[objective][0] / "final"
        assert (final / "model.safetensors").is_file()
        # Every file gets what open() gives under the umask (safetensors alone would make the weights 0600).
        usual = stat.S_IMODE(final.stat().st_mode) & 0o666
        assert {stat.S_IMODE(p.stat().st_mode) for p in final.rglob("*") if p.is_file()} == {usual}
        assert (final / "generation_config.json").is_file() == (objective != "masked_lm")  # encoders do not generate
        model = auto.from_pretrained(final)
        assert model.config.vocab_size == len(AutoTokenizer.from_pretrained(final))
    generated = pipeline("text-generation", model=str(trained["causal_lm"][0] / "final"))("The", max_new_tokens=5)
    assert isinstance(generated[0]["generated_text"], str)
    filled = pipeline("fill-mask", model=str(trained["masked_lm"][0] / "final"))("The <mask> statement.")
    assert len(filled) == 5
    translate = pipeline("translation", model=str(trained["translation"][0] / "final"), trust_remote_code=True)
    assert isinstance(translate("Open file")[0]["translation_text"], str)
    assert (trained["translation"][0] / "final" / "cross_attention.png").is_file()
    page = (trained["translation"][0] / "final" / "attention.html").read_text()
    assert '<script type="application/json" id="attention-data">' in page and "cross-attention" in page


def test_model_card_metadata_and_sections(trained):
    card = (trained["translation"][0] / "final" / "README.md").read_text()
    _, front, body = card.split("---\n", 2)
    metadata = yaml.safe_load(front)
    assert metadata["library_name"] == "transformers" and metadata["language"] == ["en", "de"]
    assert metadata["license"] == "apache-2.0" and metadata["datasets"] and "bleu" in metadata["metrics"]
    assert "hf-attention" in metadata["tags"]
    bleu = trained["translation"][1]["bleu"]
    results = metadata["model-index"][0]["results"][0]["metrics"]
    assert {"type": "bleu", "value": bleu, "name": "test bleu"} in results
    validation = metadata["model-index"][0]["results"][1]
    assert validation["dataset"]["split"] == "validation"
    assert {
        "type": "perplexity",
        "value": trained["translation"][1]["validation_perplexity"],
        "name": "validation perplexity",
    } in validation["metrics"]
    for section in (
        "## Intended use",
        "## Training data",
        "## Training procedure",
        "## Evaluation results",
        "## Limitations",
        "| learning rate | 0.003 |",
        "loss_curve.png",
    ):
        assert section in body
    assert "$" not in body.replace("$ ", "")  # every template field was filled
    # The usage snippet is already as the project's formatter writes it (cards are copied into model_cards/).
    snippet = body.split("```python\n", 1)[1].split("```", 1)[0]
    formatted = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", "snippet.py", "-"],
        input=snippet,
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    assert snippet == formatted
    masked = yaml.safe_load((trained["masked_lm"][0] / "final" / "README.md").read_text().split("---\n")[1])
    assert masked["pipeline_tag"] == "fill-mask" and masked["language"] == ["en"]


SHIPPED_CARDS = sorted(p.name for p in (REPO / "model_cards").glob("*.md") if p.name != "TEMPLATE.md")


@pytest.mark.parametrize("card", SHIPPED_CARDS)
def test_shipped_model_cards_have_hub_metadata(card):
    """The cards in model_cards/ (one per shipped configuration) carry parseable metadata with measured results."""
    text = (REPO / "model_cards" / card).read_text()
    metadata = yaml.safe_load(text.split("---\n")[1])
    assert metadata["license"] and metadata["language"] and metadata["pipeline_tag"]
    metrics = metadata["model-index"][0]["results"][0]["metrics"]
    assert metrics and all(isinstance(m["value"], float) for m in metrics)
    for section in ("## Intended use", "## Training data", "## Evaluation results", "## Limitations"):
        assert section in text


def test_push_to_hub_uploads_the_export(trained):
    calls = [c for c in FakeHfApi.calls if c[1] == "someone/tiny-en-de"]
    assert [c[0] for c in calls] == ["create_repo", "upload_folder"]
    files = calls[1][2]
    for name in (
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "README.md",
        "generation_config.json",
        "modeling_hf_attention.py",
        "pipelines.py",
        "loss_curve.png",
    ):
        assert name in files, files
    config = json.loads((trained["translation"][0] / "final" / "config.json").read_text())
    assert config["auto_map"]["AutoModelForSeq2SeqLM"].endswith("HFAttentionForSeq2SeqLM")


def test_gradient_accumulation_matches_one_big_batch(tmp_path):
    """Token-normalised loss: 2 micro-batches of 8 (accumulated) take the same steps as one batch of 16, although
    the two micro-batches hold different numbers of target tokens."""
    common = ("--max_train_samples", "64", "--max_steps", "6", "--eval_steps", "0", "--bleu_samples", "4")
    run(*parse_args(argv("translation", tmp_path / "big", *common, "--per_device_train_batch_size", "16")))
    run(
        *parse_args(
            argv(
                "translation",
                tmp_path / "acc",
                *common,
                "--per_device_train_batch_size",
                "8",
                "--gradient_accumulation_steps",
                "2",
            )
        )
    )
    big, accumulated = train_losses(tmp_path / "big"), train_losses(tmp_path / "acc")
    assert len(big) == 6
    torch.testing.assert_close(accumulated, big, rtol=1e-5, atol=0)


def test_resume_reproduces_the_uninterrupted_run(tmp_path):
    """Stop-and-resume from a mid-epoch checkpoint gives exactly the losses of the run that never stopped
    (dropout on: the RNG state is restored; token batching; accumulation; an epoch boundary after the resume)."""
    extra = (
        "--max_train_samples",
        "60",
        "--per_device_train_batch_size",
        "8",
        "--max_tokens_per_batch",
        "160",
        "--gradient_accumulation_steps",
        "2",
        "--max_steps",
        "10",
        "--save_steps",
        "3",
        "--eval_steps",
        "4",
        "--save_total_limit",
        "5",
        "--bleu_samples",
        "4",
    )
    full = tmp_path / "full"
    run(*parse_args(argv("translation", full, *extra, model={"hidden_dropout_prob": 0.1})))
    reference = train_losses(full)
    checkpoint = full / "checkpoints" / "step_00006"
    progress = json.loads((checkpoint / "progress.json").read_text())
    assert progress["epoch"] >= 1 and progress["batches_in_epoch"] > 0  # a mid-epoch checkpoint after an epoch
    resumed = tmp_path / "resumed"
    run(
        *parse_args(
            argv(
                "translation",
                resumed,
                *extra,
                "--resume_from_checkpoint",
                str(checkpoint),
                model={"hidden_dropout_prob": 0.1},
            )
        )
    )
    assert train_losses(resumed) == reference[6:]
    # `latest` in the same folder continues too (here: from step 9 to 10).
    run(
        *parse_args(
            argv("translation", full, *extra, "--resume_from_checkpoint", "latest", model={"hidden_dropout_prob": 0.1})
        )
    )
    assert train_losses(full) == reference


@pytest.mark.slow
def test_two_processes_match_one_process(tmp_path):
    """`accelerate launch --multi_gpu --num_processes 2` on CPU: 2 × 8 rows per step gives the losses of
    1 process × 8 rows × 2 accumulation steps (same global batch) to 1e-4."""
    common = (
        "--max_train_samples",
        "96",
        "--max_steps",
        "5",
        "--eval_steps",
        "0",
        "--bleu_samples",
        "4",
        "--per_device_train_batch_size",
        "8",
    )
    run(*parse_args(argv("translation", tmp_path / "one", *common, "--gradient_accumulation_steps", "2")))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    command = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--main_process_port",
        free_port(),
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "-m",
        "training.train",
        *argv("translation", tmp_path / "two", *common),
    ]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 process(es)" in done.stdout
    torch.testing.assert_close(train_losses(tmp_path / "two"), train_losses(tmp_path / "one"), rtol=1e-4, atol=0)


@pytest.mark.slow
def test_torch_compile_run_matches_eager_and_exports(tmp_path):
    """--torch_compile (Accelerate's TorchDynamoPlugin, Inductor): the same losses as the eager run to float
    rounding, and an export that loads as the plain model class."""
    common = ("--max_steps", "4", "--eval_steps", "0", "--max_train_samples", "64")
    run(*parse_args(argv("causal_lm", tmp_path / "eager", *common)))
    torch._dynamo.reset()
    results = run(*parse_args(argv("causal_lm", tmp_path / "compiled", *common, "--torch_compile", "true")))
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] > 0  # it really ran compiled
    torch.testing.assert_close(
        train_losses(tmp_path / "compiled"), train_losses(tmp_path / "eager"), rtol=1e-4, atol=0
    )
    assert math.isfinite(results["test_loss"])
    config = json.loads((tmp_path / "compiled" / "final" / "config.json").read_text())
    assert config["architectures"] == ["HFAttentionForCausalLM"]
    weights = safetensors.torch.load_file(tmp_path / "compiled" / "final" / "model.safetensors")
    assert not any(name.startswith("_orig_mod") for name in weights)


# ------------------------------------------------------------------------------------------------- arguments


def test_yaml_config_with_command_line_overrides(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "objective": "masked_lm",
                "max_steps": 100,
                "learning_rate": 1e-4,
                "model_config": {"hidden_size": 64, "num_hidden_layers": 2},
            }
        )
    )
    model_args, data_args, train_args, model_config = parse_args(
        ["--config", str(config), "--max_steps", "50", "--model_config", '{"num_hidden_layers": 3}']
    )
    assert model_args.objective == "masked_lm" and train_args.max_steps == 50 and train_args.learning_rate == 1e-4
    assert model_config == {"hidden_size": 64, "num_hidden_layers": 3}
    config.write_text(yaml.safe_dump({"objective": "masked_lm", "hidden_size": 64}))
    with pytest.raises(ValueError, match="Unknown keys.*hidden_size.*model_config"):
        parse_args(["--config", str(config)])
    with pytest.raises(ValueError, match="Config file not found"):
        parse_args(["--config", str(tmp_path / "missing.yaml")])
    with pytest.raises(ValueError, match="objective='summarize' is not supported"):
        parse_args(["--objective", "summarize"])


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_shipped_configs_parse_and_match_their_objective(path):
    from training.objectives import objective_for
    from training.run.models import check_export_target, check_model_type

    model_args, _, train_args, model_config = parse_args(["--config", str(path)])
    objective = objective_for(model_args.objective)
    model_type = check_model_type(objective, model_args.model_type)
    assert model_config and train_args.max_steps > 0
    check_export_target(objective, model_type, model_config, train_args.export_to)  # a shipped export target fits


# ------------------------------------------------------------------------------------------------------ loss


@pytest.mark.parametrize(
    ("name", "objective", "own_loss"),
    [
        ("ours_decoder", "causal_lm", True),
        ("ours_encoder", "masked_lm", True),
        ("ours_seq2seq", "translation", True),
        ("gpt2", "causal_lm", True),
        ("llama", "causal_lm", True),
        ("bert_mlm", "masked_lm", False),
        ("bart", "translation", False),
        ("marian", "translation", False),
        ("t5", "translation", False),
    ],
)
def test_the_training_loss_is_token_normalised_for_every_architecture(name, objective, own_loss):
    """The loss of a batch is its summed cross-entropy divided by the window's count of target tokens: the model's
    own loss where it honours `num_items_in_batch`, else computed from the logits (BART, Marian, BERT and T5 return
    a mean that would ignore the count)."""
    from conftest import build
    from test_parity_hf import build_reference

    from hf_attention import HFAttentionForCausalLM, HFAttentionForMaskedLM, HFAttentionForSeq2SeqLM
    from training.objectives import OBJECTIVES
    from training.run.losses import loss_takes_num_items, per_token_sum, token_loss

    ours = {
        "ours_decoder": (HFAttentionForCausalLM, "decoder"),
        "ours_encoder": (HFAttentionForMaskedLM, "encoder"),
        "ours_seq2seq": (HFAttentionForSeq2SeqLM, "seq2seq"),
    }
    model = build(*ours[name]) if name in ours else build_reference(name)
    objective = OBJECTIVES[objective]
    ids = torch.randint(3, 90, (2, 7), generator=torch.Generator().manual_seed(3))
    labels = ids.clone()
    labels[0, :3] = -100
    batch = {"input_ids": ids, "labels": labels}
    if objective.model.encoder_decoder:  # as DataCollatorForSeq2Seq(model=...) makes them
        batch["decoder_input_ids"] = model.prepare_decoder_input_ids_from_labels(labels=labels)
    num_items = torch.tensor(23.0)  # more than this batch holds: the count of a whole accumulation window
    assert loss_takes_num_items(model) == own_loss
    with torch.no_grad():
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
        expected = per_token_sum(objective, logits, labels).sum() / num_items
        torch.testing.assert_close(token_loss(objective, model, batch, num_items), expected)


# ---------------------------------------------------------------------------------------------------- errors


# Catalog-like pairs with a placeholder of every syntax, the same ones on both sides (named ones reordered).
PLACEHOLDER_PAIRS = [
    ("Delete %(name)s from folder {i}", "%(name)s aus Ordner {i} löschen"),
    ("Copy %s to page {i}", "%s auf Seite {i} kopieren"),
    ("Move %(a)s to %(b)s in window {i}", "%(b)s: %(a)s in Fenster {i} verschieben"),
    ("Open {{0}} in tab {i}", "{{0}} in Reiter {i} öffnen"),
    ("<b>Warning</b> number {i}", "<b>Warnung</b> Nummer {i}"),
    ("Save &amp; close document {i}", "Dokument {i} speichern &amp; schließen"),
    ("Item %1 of list {i}", "Element %1 der Liste {i}"),
    ('Read <a href="%s">the page</a> {i}', 'Die <a href="%s">Seite</a> {i} lesen'),
]


def test_protected_placeholders_train_and_are_scored_per_syntax(tmp_path):
    """protect_placeholders: the tokenizer holds the sentinels, the features are protected pairs, and the results,
    metrics.jsonl and the model card count the placeholders kept per syntax and the sentinels that went wrong."""
    from transformers import AutoTokenizer

    from hf_attention.modeling.placeholders import SYNTAXES, tokenizer_protects

    data = tmp_path / "pairs.jsonl"
    rows = [{"source": s.format(i=i), "target": t.format(i=i)} for i in range(40) for s, t in PLACEHOLDER_PAIRS]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    output_dir = tmp_path / "run"
    flags = ("--dataset", str(data), "--protect_placeholders", "true", "--markup_augmentation", "0.2")
    results = run(*parse_args(argv("translation", output_dir, *flags, "--max_steps", "12", "--eval_steps", "0")))
    by_syntax = results["placeholders_by_syntax"]
    assert by_syntax and set(by_syntax) <= set(SYNTAXES)
    assert all(0 <= counts["kept"] <= counts["total"] for counts in by_syntax.values())
    assert all(isinstance(results[f"sentinels_{kind}"], int) for kind in ("lost", "invented", "duplicated"))
    # Decoded under the sentinel constraint: no sentinel invented or repeated (one is lost only if the output ran out
    # of max_new_tokens first).
    assert results["sentinels_invented"] == results["sentinels_duplicated"] == 0
    (final_record,) = [m for m in read_metrics(output_dir / "metrics.jsonl") if "test/placeholders_by_syntax" in m]
    assert final_record["test/placeholders_by_syntax"] == by_syntax
    final = output_dir / "final"
    tokenizer = AutoTokenizer.from_pretrained(final)
    assert tokenizer_protects(tokenizer) and len(tokenizer) <= 350
    card = (final / "README.md").read_text()
    assert "| syntax | test |" in card and "Translations whose sentinels were lost / invented / duplicated" in card
    assert "Placeholders were protected" in card
    assert (final / "placeholders.py").is_file()


def _fails_before_training(args, match, output_dir):
    with pytest.raises(ValueError, match=match):
        main(args)
    assert not (Path(output_dir) / "checkpoints").exists() and not (Path(output_dir) / "metrics.jsonl").exists()


def test_error_missing_dataset_file(tmp_path):
    _fails_before_training(
        argv("causal_lm", tmp_path / "o", "--dataset", str(tmp_path / "nope.txt")),
        "Data file not found",
        tmp_path / "o",
    )


def test_error_missing_column(tmp_path):
    data = tmp_path / "pairs.csv"
    data.write_text("en,de\nOpen file,Datei öffnen\nSave,Speichern\n")
    _fails_before_training(
        argv("translation", tmp_path / "o", "--dataset", str(data)),
        "Column 'source' not found.*'en', 'de'",
        tmp_path / "o",
    )
    _fails_before_training(
        argv("causal_lm", tmp_path / "o", "--dataset", str(data)), "Column 'text' not found", tmp_path / "o"
    )


def test_error_empty_corpus_after_filtering(tmp_path):
    data = tmp_path / "short.txt"
    data.write_text("a\nbb\nccc\n")
    _fails_before_training(
        argv("masked_lm", tmp_path / "o", "--dataset", str(data), "--min_chars", "100"),
        "empty after filtering",
        tmp_path / "o",
    )


@pytest.mark.parametrize(
    "objective,model_type,match",
    [
        ("masked_lm", "hf_attention_decoder", "cannot be trained for objective 'masked_lm'"),
        ("masked_lm", "gpt2", "cannot be trained for objective 'masked_lm'"),
        ("translation", "hf_attention_decoder", "cannot be trained for objective 'translation'"),
        ("translation", "gpt2", "cannot be trained for objective 'translation'"),
        ("causal_lm", "hf_attention_encoder", "cannot be trained for objective 'causal_lm'"),
        ("causal_lm", "bart", "needs a decoder-only config"),
        ("translation", "no_such_model", "Unknown model_type"),
    ],
)
def test_error_config_does_not_match_objective(tmp_path, objective, model_type, match):
    _fails_before_training(argv(objective, tmp_path / "o", "--model_type", model_type), match, tmp_path / "o")


def test_error_resume_path_is_not_a_checkpoint(tmp_path):
    not_a_checkpoint = tmp_path / "somewhere"
    not_a_checkpoint.mkdir()
    _fails_before_training(
        argv("causal_lm", tmp_path / "o", "--resume_from_checkpoint", str(not_a_checkpoint)),
        "is not a training checkpoint",
        tmp_path / "o",
    )
    _fails_before_training(
        argv("causal_lm", tmp_path / "o", "--resume_from_checkpoint", "latest"), "no checkpoint in", tmp_path / "o"
    )


def test_error_output_folder_holds_another_run(tmp_path):
    output_dir = tmp_path / "o"
    output_dir.mkdir()
    (output_dir / "run_config.json").write_text("{}")
    _fails_before_training(argv("causal_lm", output_dir), "already holds files.*--overwrite_output_dir", output_dir)


# ----------------------------------------------------------------------------------------------- checkpoints


class _FakeAccelerator:
    """Writes the files `accelerator.save_state` writes; `fail` makes the model write crash half-way."""

    is_main_process = True
    fail = False

    def wait_for_everyone(self):
        pass

    def save_state(self, directory):
        Path(directory).mkdir(parents=True, exist_ok=True)
        (Path(directory) / "model.safetensors").write_bytes(b"weights")
        if self.fail:
            raise RuntimeError("disk full")
        (Path(directory) / "optimizer.bin").write_bytes(b"state")


class _FakeScheduler:
    def state_dict(self):
        return {"last_epoch": 1}


def test_crash_during_save_keeps_latest_on_the_previous_checkpoint(tmp_path):
    accelerator = _FakeAccelerator()
    save_checkpoint(accelerator, tmp_path, Progress(step=5), scheduler=_FakeScheduler())
    assert (tmp_path / "checkpoints" / LATEST).read_text() == "step_00005"
    accelerator.fail = True
    with pytest.raises(RuntimeError, match="disk full"):
        save_checkpoint(accelerator, tmp_path, Progress(step=10), scheduler=_FakeScheduler())
    assert resolve_checkpoint("latest", tmp_path) == tmp_path / "checkpoints" / "step_00005"
    assert not (tmp_path / "checkpoints" / "step_00010").exists()
    with pytest.raises(ValueError, match="not a training checkpoint"):
        resolve_checkpoint(str(tmp_path / "checkpoints" / ".tmp_step_00010"), tmp_path)
    accelerator.fail = False
    save_checkpoint(accelerator, tmp_path, Progress(step=10), scheduler=_FakeScheduler(), keep=1)
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["latest", "step_00010"]


@pytest.mark.parametrize(
    ("requested", "fast_bf16", "cuda", "expected"),
    [
        ("auto", True, False, "bf16"),
        ("auto", False, False, "no"),
        ("no", True, False, "no"),
        ("bf16", True, False, "bf16"),
        ("fp16", False, True, "fp16"),
        ("auto", False, True, "bf16"),
    ],
)
def test_mixed_precision_auto_follows_the_hardware(requested, fast_bf16, cuda, expected, monkeypatch):
    from training import train as train_module

    monkeypatch.setattr(train_module, "cpu_has_fast_bf16", lambda: fast_bf16)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert train_module.resolve_mixed_precision(requested, use_cuda=cuda) == expected


def test_mixed_precision_bf16_on_a_cpu_without_bf16_warns_and_bad_values_fail(monkeypatch):
    from training import train as train_module

    monkeypatch.setattr(train_module, "cpu_has_fast_bf16", lambda: False)
    with pytest.warns(UserWarning, match="without native bf16"):
        assert train_module.resolve_mixed_precision("bf16", use_cuda=False) == "bf16"
    with pytest.raises(ValueError, match="mixed_precision='fp8'.*'auto'"):
        parse_args(["--objective", "causal_lm", "--mixed_precision", "fp8"])


@pytest.mark.parametrize(
    ("requested", "cuda", "expected"),
    [(None, True, True), (None, False, False), (False, True, False), (True, False, True)],
)
def test_torch_compile_defaults_to_compiling_on_a_gpu_only(requested, cuda, expected):
    from training import train as train_module

    assert train_module.resolve_torch_compile(requested, use_cuda=cuda) is expected


def test_torch_compile_flag_parses_unset_true_and_false():
    flags = {
        value: parse_args(["--objective", "causal_lm", *value])[2].torch_compile
        for value in [(), ("--torch_compile", "true"), ("--torch_compile", "false")]
    }
    assert list(flags.values()) == [None, True, False]


def test_cpu_bf16_detection_says_no_below_avx512():
    from hf_attention.runtime.hardware import cpu_has_fast_bf16

    fast = cpu_has_fast_bf16()
    assert isinstance(fast, bool)
    if torch.backends.cpu.get_cpu_capability() in ("DEFAULT", "AVX2"):  # no bf16 instructions at all
        assert not fast


# ------------------------------------------------------------------------------------- standard architectures

LLAMA_SHAPE = {
    "position_encoding": "rotary",
    "norm_position": "pre",
    "norm_type": "rmsnorm",
    "hidden_act": "swiglu",
    "scale_embeddings": False,
    "attention_bias": False,
    "mlp_bias": False,
    "hidden_dropout_prob": 0.1,  # Llama has no such dropout: training-only, so the export still matches
}


def test_export_to_writes_the_standard_checkpoint_beside_ours(tmp_path):
    from transformers import AutoModelForCausalLM

    output_dir = tmp_path / "run"
    run(*parse_args(argv("causal_lm", output_dir, "--export_to", "auto", "--max_steps", "6", model=LLAMA_SHAPE)))
    ours = AutoModelForCausalLM.from_pretrained(output_dir / "final").eval()
    standard = AutoModelForCausalLM.from_pretrained(output_dir / "final-llama").eval()
    assert type(standard).__name__ == "LlamaForCausalLM"
    ids = torch.randint(5, 300, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(standard(ids).logits, ours(ids).logits, rtol=0, atol=1e-6)
    assert "It is also a standard `llama` model" in (output_dir / "final" / "README.md").read_text()
    card = (output_dir / "final-llama" / "README.md").read_text()
    assert "AutoModelForCausalLM.from_pretrained" in card and "Evaluation results" in card


BERT_UNTIED_SHAPE = {
    "position_encoding": "learned",
    "scale_embeddings": False,
    "embedding_norm": True,
    "hidden_act": "gelu",
    "lm_head_transform": True,
    "lm_head_bias": True,
    "tie_word_embeddings": False,  # BERT then holds its output matrix and its two bias names as tensors of their own
}


def test_export_to_writes_an_untied_masked_lm_as_bert(tmp_path):
    from transformers import AutoModelForMaskedLM

    output_dir = tmp_path / "run"
    flags = ("--export_to", "bert", "--max_steps", "2", "--eval_steps", "0")
    run(*parse_args(argv("masked_lm", output_dir, *flags, model=BERT_UNTIED_SHAPE)))
    ours = AutoModelForMaskedLM.from_pretrained(output_dir / "final").eval()
    standard = AutoModelForMaskedLM.from_pretrained(output_dir / "final-bert").eval()
    assert type(standard).__name__ == "BertForMaskedLM" and not standard.config.tie_word_embeddings
    ids = torch.randint(5, 300, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(standard(ids).logits, ours(ids).logits, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "extra,model,match",
    [
        (
            ["--export_to", "llama"],
            {"position_encoding": "alibi"},
            r"position_encoding='alibi' \(llama needs 'rotary'\)",
        ),
        (
            ["--export_to", "auto"],
            {"attention_score": "additive"},
            f"No standard architecture among {export_candidates(HFAttentionForCausalLM)} has",
        ),
        (["--export_to", "gpt3"], {}, r"--export_to='gpt3' is not supported"),
        (
            ["--export_to", "gpt2", "--model_type", "gpt2", "--model_config", '{"n_embd": 32, "n_layer": 1}'],
            {},
            "already is one",
        ),
    ],
)
def test_error_export_target_is_checked_before_training(tmp_path, extra, model, match):
    _fails_before_training(argv("causal_lm", tmp_path / "o", *extra, model=model), match, tmp_path / "o")
