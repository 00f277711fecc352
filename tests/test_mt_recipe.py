"""The translation recipe around the model: catalogs read from PyPI wheels (a fake wheel here, no network), the
out-of-domain split, the QA figures of the evaluation (placeholders kept, stuttering outputs, the copy baseline),
checkpoint averaging (exact mean, exact resume, used by the export) and beam settings carried into the export."""

import json
import re
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest
import torch
from test_training import argv
from torch import nn

from training.args import parse_args
from training.data import catalogs
from training.finish.metrics import placeholder_accuracy, placeholders, repeat_rate, stutters, translation_scores
from training.objectives.translation import held_out_translation_set, translation_corpus
from training.run.averaging import AVERAGE_FILE, WeightAverage
from training.train import run


def mo_bytes(pairs: dict[str, str]) -> bytes:
    """A compiled gettext catalog (GNU .mo, little-endian, no hash table) holding `pairs` and a UTF-8 header."""
    entries = sorted({"": "Content-Type: text/plain; charset=UTF-8\n", **pairs}.items())
    ids = [k.encode() for k, _ in entries]
    strs = [v.encode() for _, v in entries]
    n = len(entries)
    start = 28 + 16 * n
    table, blob = [], b""
    for data in ids + strs:
        table.append((len(data), start + len(blob)))
        blob += data + b"\0"
    header = struct.pack("<7I", 0x950412DE, 0, n, 28, 28 + 8 * n, 0, start + len(blob))
    return header + b"".join(struct.pack("<2I", *t) for t in table) + blob


def fake_wheel(directory: Path, name: str, version: str, members: dict[str, dict[str, str]], licence="MIT") -> Path:
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(
            f"{name}-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.4\nName: {name}\nVersion: {version}\nLicense-Expression: {licence}\n",
        )
        for member, pairs in members.items():
            archive.writestr(member, mo_bytes(pairs))
    return path


APP = {
    "Open the file": "Datei öffnen",
    "Save %s as": "%s speichern unter",
    "Quit": "Beenden",
}


@pytest.fixture
def wheel_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ATTENTION_CACHE", str(tmp_path))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    fake_wheel(
        wheels,
        "some_app",
        "1.0",
        {
            "some_app/locale/de/LC_MESSAGES/some_app.mo": APP,
            "some_app/locale/fr/LC_MESSAGES/some_app.mo": {"Quit": "Quitter"},
        },
        licence="GPL-3.0-or-later",
    )
    fake_wheel(
        wheels,
        "other_app",
        "2.1",
        {"other/i18n/de_DE/LC_MESSAGES/other.mo": {"Delete {name}?": "{name} löschen?", "Quit": "Verlassen"}},
    )
    return wheels


def test_package_catalogs_are_read_from_the_cached_wheel(wheel_cache, monkeypatch):
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("a cached wheel is not downloaded again"))
    found = catalogs.package_catalogs("some-app==1.0", "de")
    assert found.licence == "GPL-3.0-or-later"
    assert found.catalogs == ("some_app/locale/de/LC_MESSAGES/some_app.mo",)
    assert sorted(found.pairs) == sorted(APP.items())
    regional = catalogs.package_catalogs("other_app==2.1", "de")  # de_DE, the main regional variant
    assert dict(regional.pairs) == {"Delete {name}?": "{name} löschen?", "Quit": "Verlassen"}


def test_translation_corpus_adds_package_pairs_after_the_machines(wheel_cache, monkeypatch):
    machine = translation_corpus("de", max_catalogs=2, machine=True)
    both = translation_corpus("de", max_catalogs=2, packages=["some_app==1.0"], machine=True)
    assert both["source"][: len(machine)] == machine["source"]
    added = dict(zip(both["source"][len(machine) :], both["target"][len(machine) :], strict=True))
    assert added == {k: v for k, v in APP.items() if k not in set(machine["source"])}
    only = translation_corpus("de", packages=["some_app==1.0"], machine=False)
    assert sorted(only["source"]) == sorted(APP)


def test_held_out_set_never_holds_a_seen_source(wheel_cache):
    held_out = held_out_translation_set("de", ["some_app==1.0", "other_app==2.1"], seen=["Quit", "Open the file"])
    assert sorted(held_out["source"]) == ["Delete {name}?", "Save %s as"]
    assert len(held_out_translation_set("de", ["some_app==1.0", "other_app==2.1"], seen=[], max_rows=2)) == 2
    with pytest.raises(ValueError, match="no pair whose source is not in the training data"):
        held_out_translation_set("de", ["some_app==1.0"], seen=list(APP))


def test_catalog_package_errors_name_the_problem(wheel_cache, monkeypatch):
    with pytest.raises(ValueError, match=r"'some_app' must be pinned as 'name==version'"):
        catalogs.package_catalogs("some_app", "de")
    with pytest.raises(ValueError, match="holds no gettext catalog for language 'it'"):
        catalogs.package_catalogs("some_app==1.0", "it")

    def offline(command, **kwargs):
        assert command[1:4] == ["-m", "pip", "download"] and "--no-deps" in command
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution found for missing==9")

    monkeypatch.setattr(subprocess, "run", offline)
    with pytest.raises(RuntimeError, match="Could not fetch the wheel of 'missing==9'.*No matching distribution"):
        catalogs.package_catalogs("missing==9", "de")
    assert not list(wheel_cache.glob("missing*"))  # nothing half-written in the cache


def test_placeholder_accuracy_counts_each_placeholder_of_the_source():
    assert placeholders("Value %(value)r is not %s, {0} <b>x</b> &amp; 50% done <none> <file>...") == {
        "%(value)r": 1,
        "%s": 1,
        "{0}": 1,
        "<b>": 1,
        "</b>": 1,
        "&amp;": 1,
    }
    sources = ["Value %(value)r is not a valid choice.", "Copy %s to %s", "No placeholder"]
    assert placeholder_accuracy(sources, ["Wert %(value)r ist ungültig.", "%s nach %s kopieren", "Kein"]) == 100.0
    # The mangled output of an undertrained model keeps one of three: "%s(Wert)" is not "%(value)r".
    assert placeholder_accuracy(sources, ["Wert %s(Wert) ist ungültig.", "%s nach kopieren", "Kein"]) == 33.33
    assert placeholder_accuracy(["No placeholder"], ["Kein"]) is None


def test_stuttering_outputs_are_counted():
    assert stutters("Ihr Passwort wurde noch noch noch eingegeben.")
    assert stutters("Wert ist kein gültiger gültiger Wert.")
    assert stutters("ist ein ist ein Wert")
    assert not stutters("Die Datei, die Sie öffnen")  # "Datei, die" then "die Sie": no repeat
    assert not stutters("- - 1 1")  # no word in it
    assert not stutters("Die Verwendung von %s %s %s wird empfohlen")  # placeholders are not words
    assert repeat_rate(["a b", "noch noch", "c", "d"]) == 25.0


def test_translation_scores_report_the_copy_baseline():
    sources = ["Open the file %s in a new window", "Quit the program now"]
    references = ["Die Datei %s in einem neuen Fenster öffnen", "Das Programm jetzt beenden"]
    scores = translation_scores(sources, references, references)
    assert scores["bleu"] == 100.0 and scores["placeholders"] == 100.0 and scores["repeats"] == 0.0
    assert scores["copy_bleu"] < 100.0 and scores["copy_chrf"] < scores["chrf"]


def test_weight_average_is_the_mean_of_the_window():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    average = WeightAverage(model, first_step=3)
    seen = []
    for step in range(1, 6):
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(torch.randn_like(parameter))
        average.update(model, step)
        if step >= 3:
            seen.append([p.detach().clone() for p in model.parameters()])
    assert average.steps == 3
    target = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    average.copy_into(target)
    for index, parameter in enumerate(target.parameters()):
        torch.testing.assert_close(parameter, sum(s[index] for s in seen) / 3, rtol=1e-6, atol=1e-6)


def test_averaging_resumes_exactly_and_the_export_holds_the_mean(tmp_path):
    """A run resumed inside the averaging window exports the same weights as the uninterrupted one, and those are
    the mean of the window (not the last step's)."""
    extra = ("--max_steps", "8", "--save_steps", "3", "--save_total_limit", "5", "--average_last_steps", "4")
    extra += ("--bleu_samples", "4", "--eval_steps", "0")
    full = tmp_path / "full"
    results = run(*parse_args(argv("translation", full, *extra)))
    assert results["steps"] == 8
    checkpoint = full / "checkpoints" / "step_00006"  # inside the window (steps 5-8): the mean of 5 and 6 so far
    assert (checkpoint / AVERAGE_FILE).is_file() and not (full / "checkpoints" / "step_00003" / AVERAGE_FILE).exists()
    resumed = tmp_path / "resumed"
    run(*parse_args(argv("translation", resumed, *extra, "--resume_from_checkpoint", str(checkpoint))))
    import safetensors.torch

    exported = safetensors.torch.load_file(full / "final" / "model.safetensors")
    again = safetensors.torch.load_file(resumed / "final" / "model.safetensors")
    assert exported.keys() == again.keys()
    assert all(torch.equal(exported[k], again[k]) for k in exported)
    last = safetensors.torch.load_file(full / "checkpoints" / "step_00006" / "model.safetensors")
    assert any(not torch.equal(exported[k], last[k]) for k in exported if k in last)
    card = (full / "final" / "README.md").read_text()
    assert "mean of the last 4 steps' (checkpoint averaging)" in card
    # A checkpoint from inside the window without the mean cannot be resumed silently with a different mean.
    (checkpoint / AVERAGE_FILE).unlink()
    with pytest.raises(ValueError, match="inside the averaging window"):
        run(*parse_args(argv("translation", tmp_path / "again", *extra, "--resume_from_checkpoint", str(checkpoint))))


def test_beam_settings_reach_the_export_and_the_scores(tmp_path, wheel_cache, capsys):
    """Beams and the length penalty become the export's generation defaults; the held-out catalogs are scored as
    the 'ood' split beside the test split, each with its copy baseline; training.score rebuilds the same splits
    (the training split with its markup-augmented pairs, which the card reports)."""
    extra = ("--generation_num_beams", "3", "--generation_length_penalty", "0.6", "--bleu_samples", "4")
    extra += ("--heldout_catalog_packages", "some_app==1.0", "other_app==2.1", "--eval_steps", "0")
    extra += ("--max_steps", "6", "--markup_augmentation", "0.5")
    results = run(*parse_args(argv("translation", tmp_path / "run", *extra)))
    for key in ("bleu", "chrf", "placeholders", "repeats", "copy_bleu", "copy_chrf"):
        assert key in results and f"ood_{key}" in results
    card = (tmp_path / "run" / "final" / "README.md").read_text()
    assert "0.5 × the training pairs again with the same HTML tags or format placeholders" in card
    # The card names where the pairs came from and the checksum that tells whether another run read the same data.
    assert "from the catalogs installed on the training machine" in card and "differ from machine to machine" in card
    assert re.search(r"SHA-256 of the rows of every split: `[0-9a-f]{64}`", card)
    generation = json.loads((tmp_path / "run" / "final" / "generation_config.json").read_text())
    assert generation["num_beams"] == 3 and generation["length_penalty"] == 0.6
    assert generation["early_stopping"] is True  # the beams CTranslate2 searches: done when 3 hypotheses are
    config = tmp_path / "config.yaml"
    config.write_text(
        "objective: translation\nsystem_catalogs: true\nmax_catalogs: 5\nbleu_samples: 4\nmax_source_length: 24\n"
        "max_target_length: 24\n"
        "heldout_catalog_packages: [some_app==1.0, other_app==2.1]\ngeneration_num_beams: 3\n"
        "generation_length_penalty: 0.6\n"
    )
    from training.score import main as score

    capsys.readouterr()
    assert score([str(tmp_path / "run" / "final"), "--config", str(config)]) == 0
    scored = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert scored["num_beams"] == 3 and scored["length_penalty"] == 0.6
    for key in ("bleu", "chrf", "placeholders", "repeats", "copy_bleu"):
        assert scored[f"test_{key}"] == results[key] and scored[f"ood_{key}"] == results[f"ood_{key}"]


def test_label_smoothing_reaches_a_hugging_face_model_through_the_training_loss():
    """BART computes a mean loss of its own; training.train's loss takes its logits, and smooths them as the
    model config's label_smoothing says, exactly as F.cross_entropy(label_smoothing=...)."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM

    from training.objectives import objective_for
    from training.run.losses import token_loss
    from training.run.models import check_model_config

    fields = {"d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2}
    fields |= {"decoder_attention_heads": 2, "encoder_ffn_dim": 32, "decoder_ffn_dim": 32, "vocab_size": 50}
    check_model_config("bart", {**fields, "label_smoothing": 0.1})
    with pytest.raises(ValueError, match=r"label_smoothing=1.5 must be a number in \[0, 1\)"):
        check_model_config("bart", {**fields, "label_smoothing": 1.5})
    torch.manual_seed(0)
    model = AutoModelForSeq2SeqLM.from_config(AutoConfig.for_model("bart", **fields, label_smoothing=0.1)).eval()
    batch = {"input_ids": torch.randint(4, 50, (2, 5)), "labels": torch.randint(4, 50, (2, 4))}
    batch["labels"][1, 3] = -100
    batch["decoder_input_ids"] = model.prepare_decoder_input_ids_from_labels(labels=batch["labels"])  # the collator's
    loss = token_loss(objective_for("translation"), model, batch, torch.tensor(7.0))
    logits = model(input_ids=batch["input_ids"], decoder_input_ids=batch["decoder_input_ids"]).logits
    expected = nn.functional.cross_entropy(
        logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=-100, reduction="sum", label_smoothing=0.1
    )
    torch.testing.assert_close(loss, expected / 7.0)


def test_a_length_penalty_with_greedy_decoding_does_not_break_the_export(tmp_path):
    """GenerationConfig refuses to save a beam-only setting with num_beams=1: the export sets it only for beams."""
    from types import SimpleNamespace

    from transformers import GenerationConfig

    from training.finish.evaluate import GenerationSettings
    from training.objectives import objective_for

    set_defaults = objective_for("translation").evaluation.set_generation_defaults
    model = SimpleNamespace(config=SimpleNamespace(decoder_start_token_id=1))
    for beams, expected, stops_early in ((1, None, None), (4, 0.6, True)):  # None: generate()'s default
        config = GenerationConfig()
        set_defaults(config, model, None, GenerationSettings(num_beams=beams, length_penalty=0.6))
        config.save_pretrained(tmp_path / str(beams))
        assert (config.num_beams, config.length_penalty, config.early_stopping) == (beams, expected, stops_early)


# Python web frameworks and their plugins: their catalogs are kept out of every corpus we train on, so that their
# strings (dense in %(name)s placeholders and markup) stay unseen text to test a model on.
WEB_FRAMEWORKS = re.compile(r"(django|flask|wtforms|wagtail|pyramid|plone|zope|odoo|tornado|bottle|web2py)", re.I)


def test_no_shipped_config_trains_on_a_web_frameworks_catalogs():
    import yaml

    configs = sorted((Path(__file__).resolve().parents[1] / "training" / "configs").glob("*.yaml"))
    read = 0
    for path in configs:
        config = yaml.safe_load(path.read_text())
        for key in ("catalog_packages", "heldout_catalog_packages"):
            for requirement in config.get(key) or []:
                name, _ = catalogs.parse_pin(requirement)
                assert not WEB_FRAMEWORKS.search(name), f"{path.name} {key} reads {requirement}"
                read += 1
    assert read >= 14 * 4, "the translation configs' pinned wheels were not found"


def test_score_refuses_an_objective_scored_by_its_loss_only(tmp_path):
    """training.score asks the config's objective how to score its outputs; a language model has no such scoring
    (its loss is the run's score), and the error names it and the objectives training.score scores."""
    from training.score import main as score

    config = tmp_path / "config.yaml"
    config.write_text("objective: causal_lm\n")
    with pytest.raises(ValueError, match=r"cannot score objective 'causal_lm'.*loss only.*scores: 'translation'"):
        score([str(tmp_path), "--config", str(config)])


def test_pairs_whose_target_invents_a_sentinel_are_dropped_from_the_corpus(caplog, monkeypatch):
    """A target that writes a sentinel string its source lacks (a protected model's output leaked into the corpus)
    would teach the model to invent sentinels: the corpus drops it with a warning; the rest is kept in order."""
    from types import SimpleNamespace

    from datasets import Dataset

    from training.objectives import translation
    from training.objectives.translation import without_stray_sentinels

    corpus = Dataset.from_dict(
        {
            "source": ["Open %s", "Open ⟦ph_0⟧", "Delete %s", "Save"],
            "target": ["%s öffnen", "⟦ph_0⟧ öffnen", "⟦ph_1⟧ %s löschen", "Speichern"],
        }
    )
    with caplog.at_level("WARNING", logger="training.objectives.translation"):
        kept = without_stray_sentinels(corpus)
    assert kept["source"] == ["Open %s", "Open ⟦ph_0⟧", "Save"]
    assert "Dropped 1 pair(s) whose target holds a placeholder sentinel string its source does not" in caplog.text
    assert "'⟦ph_1⟧ %s löschen'" in caplog.text
    assert without_stray_sentinels(kept) is kept  # nothing to drop: the same dataset
    # the corpus that both entry points load drops them, before any split
    monkeypatch.setattr(translation, "translation_corpus", lambda *args, **kwargs: corpus)
    options = {"target_lang": "de", "max_chars": 100, "max_catalogs": None, "catalog_packages": ["x==1"]}
    loaded = translation.parallel_corpus(SimpleNamespace(dataset=None, system_catalogs=False, **options))
    assert loaded["source"] == kept["source"]
