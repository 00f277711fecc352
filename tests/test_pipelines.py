"""Pipelines from saved folders (model + trained tokenizer): the built-in tasks and our seq2seq pipeline."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from test_save_load import thread_env
from transformers import pipeline

import hf_attention
from hf_attention import (
    HFAttentionEncoderModel,
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionForSequenceClassification,
    HFAttentionForTokenClassification,
)
from hf_attention.modeling.pipelines import TASK, save_translation_pipeline

PROMPT = "The list of built-in functions"


def test_text_generation_from_a_folder(saved_checkpoint):
    generator = pipeline("text-generation", model=str(saved_checkpoint(HFAttentionForCausalLM, "decoder")))
    outputs = generator(PROMPT, max_new_tokens=5, do_sample=False)
    assert len(outputs) == 1 and set(outputs[0]) == {"generated_text"}
    assert outputs[0]["generated_text"].startswith(PROMPT)
    assert len(outputs[0]["generated_text"]) > len(PROMPT)


def test_text_generation_batch_with_left_padding_equals_one_by_one(saved_checkpoint):
    generator = pipeline("text-generation", model=str(saved_checkpoint(HFAttentionForCausalLM, "decoder")))
    assert generator.tokenizer.padding_side == "left"
    prompts = [PROMPT, "x", "Return the value of a named attribute of an object"]
    batched = generator(prompts, max_new_tokens=4, do_sample=False, batch_size=3)
    alone = [generator(prompt, max_new_tokens=4, do_sample=False) for prompt in prompts]
    assert batched == alone


def test_fill_mask_top_k(saved_checkpoint):
    fill = pipeline("fill-mask", model=str(saved_checkpoint(HFAttentionForMaskedLM, "encoder")))
    outputs = fill(f"The list {fill.tokenizer.mask_token} empty.", top_k=3)
    assert len(outputs) == 3
    assert all(set(o) == {"score", "token", "token_str", "sequence"} for o in outputs)
    scores = [o["score"] for o in outputs]
    assert scores == sorted(scores, reverse=True) and 0 < sum(scores) <= 1 + 1e-6
    assert all(o["token"] != fill.tokenizer.mask_token_id for o in outputs)


def test_text_classification(saved_checkpoint):
    classify = pipeline(
        "text-classification", model=str(saved_checkpoint(HFAttentionForSequenceClassification, "encoder"))
    )
    top = classify(PROMPT)
    assert len(top) == 1 and top[0]["label"] in {"O", "B-NAME", "I-NAME"} and 0 < top[0]["score"] <= 1
    every = classify(PROMPT, top_k=None)
    assert {o["label"] for o in every} == {"O", "B-NAME", "I-NAME"}
    assert sum(o["score"] for o in every) == pytest.approx(1.0, abs=1e-5)


def test_token_classification(saved_checkpoint):
    tag = pipeline(
        "token-classification",
        model=str(saved_checkpoint(HFAttentionForTokenClassification, "encoder")),
        ignore_labels=[],
    )
    outputs = tag(PROMPT)
    real_tokens = len(tag.tokenizer(PROMPT, add_special_tokens=False)["input_ids"])
    assert len(outputs) == real_tokens  # one entry per token, special tokens excluded
    for entity in outputs:
        assert {"entity", "score", "index", "word", "start", "end"} <= set(entity)
        # Offsets point at the token's characters in the text (byte-level "Ġ" = a leading space, trimmed).
        word = tag.tokenizer.convert_tokens_to_string([entity["word"]])
        assert PROMPT[entity["start"] : entity["end"]] == word.strip()


def test_feature_extraction(saved_checkpoint):
    extract = pipeline("feature-extraction", model=str(saved_checkpoint(HFAttentionEncoderModel, "encoder")))
    features = extract(PROMPT, return_tensors=True)
    length = len(extract.tokenizer(PROMPT)["input_ids"])
    assert features.shape == (1, length, extract.model.config.hidden_size)
    nested = extract(PROMPT)
    assert len(nested[0]) == length and len(nested[0][0]) == extract.model.config.hidden_size


@pytest.fixture(scope="module")
def translation_folder(trained_tokenizer, tmp_path_factory):
    from conftest import tiny_config

    tokenizer = trained_tokenizer("seq2seq")
    model = HFAttentionForSeq2SeqLM(
        tiny_config("seq2seq", vocab_size=len(tokenizer), position_encoding="learned", max_position_embeddings=32)
    ).eval()
    return save_translation_pipeline(model, tokenizer, tmp_path_factory.mktemp("translation"))


def test_seq2seq_pipeline_in_process(translation_folder):
    translate = pipeline(TASK, model=str(translation_folder))
    one = translate(PROMPT, max_new_tokens=5)
    assert len(one) == 1 and set(one[0]) == {"generated_text"} and isinstance(one[0]["generated_text"], str)
    many = translate([PROMPT, "x"], max_new_tokens=5, batch_size=2)
    assert many == [translate(PROMPT, max_new_tokens=5)[0], translate("x", max_new_tokens=5)[0]]
    beams = translate(PROMPT, max_new_tokens=5, num_beams=3, num_return_sequences=2)
    assert len(beams) == 2
    ids = translate(PROMPT, max_new_tokens=5, return_tensors=True)[0]["generated_token_ids"]
    assert isinstance(ids, torch.Tensor) and ids.shape[0] <= 6


def test_seq2seq_pipeline_bad_input(translation_folder):
    translate = pipeline(TASK, model=str(translation_folder))
    with pytest.raises(ValueError, match="Unknown option.*'beam_count'"):
        translate(PROMPT, beam_count=3)
    with pytest.raises(ValueError, match="empty"):
        translate("   ")
    with pytest.raises(ValueError, match="at most 32"):
        translate(" ".join(["attribute"] * 40))
    assert len(translate(" ".join(["attribute"] * 40), truncation=True, max_new_tokens=2)) == 1


def test_translation_pipeline_needs_an_encoder_decoder(saved_checkpoint, trained_tokenizer, tmp_path):
    model = HFAttentionForCausalLM.from_pretrained(saved_checkpoint(HFAttentionForCausalLM, "decoder"))
    with pytest.raises(ValueError, match="encoder-decoder"):
        save_translation_pipeline(model, trained_tokenizer("decoder"), tmp_path)


REMOTE_SCRIPT = textwrap.dedent("""
    import sys, json
    sys.modules["hf_attention"] = None  # the package is unimportable: only the checkpoint's code may run
    from transformers import pipeline
    translate = pipeline("translation", model=sys.argv[1], trust_remote_code=True)
    assert type(translate).__module__.startswith("transformers_modules"), type(translate).__module__
    print(json.dumps(translate([sys.argv[2], "x"], max_new_tokens=5, num_beams=2)))
""")


def run_shipped_pipeline(folder, text: str, tmp_path) -> list:
    """The pipeline shipped in `folder` run on [text, "x"] in a fresh process where hf_attention cannot be imported."""
    (tmp_path / "remote.py").write_text(REMOTE_SCRIPT)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "HF_HUB_OFFLINE": "1", **thread_env()}
    env["HF_MODULES_CACHE"] = str(tmp_path / "modules")
    result = subprocess.run(
        [sys.executable, "remote.py", str(folder), text],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_translation_pipeline_shipped_with_the_checkpoint_in_a_fresh_process(translation_folder, tmp_path):
    """`pipeline("translation", model=DIR, trust_remote_code=True)` without hf_attention, as on the Hub."""
    remote = run_shipped_pipeline(translation_folder, PROMPT, tmp_path)
    local = pipeline(TASK, model=str(translation_folder))([PROMPT, "x"], max_new_tokens=5, num_beams=2)
    assert remote == [{"translation_text": o["generated_text"]} for o in local]


# --- Placeholder protection: a tokenizer that holds the sentinels makes the pipeline protect and restore ---

SOURCE = "Cannot delete %(name)s: <b>%s</b>"


@pytest.fixture(scope="module")
def protected_folder(tmp_path_factory):
    """A tiny random translation model whose tokenizer was trained on protected pairs (it holds the sentinels)."""
    from conftest import tiny_config

    from hf_attention.modeling.placeholders import protect_pair
    from training.data.tokenizer import train_tokenizer

    words = ["file", "folder", "name", "page", "item", "Datei", "Ordner", "Seite", "löschen", "öffnen"]
    pairs = [
        protect_pair(f"Delete %(name)s in the {w} <b>%s</b>", f"%(name)s im {w} löschen <b>%s</b>") for w in words
    ]
    texts = [text for source, target, _ in pairs for text in (source, target)] * 10
    tokenizer = train_tokenizer(texts, 320, kind="seq2seq", placeholder_sentinels=True, min_frequency=1)
    model = HFAttentionForSeq2SeqLM(
        tiny_config("seq2seq", vocab_size=len(tokenizer), position_encoding="learned", max_position_embeddings=32)
    ).eval()
    return save_translation_pipeline(model, tokenizer, tmp_path_factory.mktemp("protected"))


def _expected(translate, source, constrained: bool = True, **generate_kwargs):
    """What the pipeline must give, computed by hand: protect, generate (constrained to the source's sentinels, as the
    pipeline does by default), decode, restore."""
    from hf_attention.modeling.placeholder_constraint import sentinel_constraint
    from hf_attention.modeling.placeholders import protect, restore

    masked, originals = protect(source)
    inputs = translate.tokenizer(masked, return_tensors="pt")
    if constrained:
        eos = translate.model.generation_config.eos_token_id
        limit = generate_kwargs.get("max_new_tokens")
        generate_kwargs["logits_processor"] = sentinel_constraint(translate.tokenizer, inputs["input_ids"], eos, limit)
    ids = translate.model.generate(**inputs, **generate_kwargs)[0]
    text, problems = restore(translate.tokenizer.decode(ids, skip_special_tokens=True), originals)
    return {"translation_text": text, "placeholder_problems": [problem._asdict() for problem in problems]}


def test_translation_pipeline_protects_and_restores_end_to_end(protected_folder):
    """pipeline("translation", ...) on a random model: each output is the hand-made protect → generate → restore."""
    translate = pipeline("translation", model=str(protected_folder), trust_remote_code=True)
    assert translate.protects_placeholders
    one = translate(SOURCE, max_new_tokens=8)
    assert one == [_expected(translate, SOURCE, max_new_tokens=8)]
    batch = translate([SOURCE, "Open %s"], max_new_tokens=8, batch_size=2)  # the originals travel through batching
    assert batch == [translate(SOURCE, max_new_tokens=8)[0], translate("Open %s", max_new_tokens=8)[0]]
    beams = translate(SOURCE, max_new_tokens=8, num_beams=3, num_return_sequences=2)
    assert len(beams) == 2 and all("placeholder_problems" in record for record in beams)
    ids = translate(SOURCE, max_new_tokens=8, return_tensors=True, return_text=False)[0]
    assert set(ids) == {"translation_token_ids"}  # the model's own ids, sentinels included: nothing restored


def _answering(translate, monkeypatch, output: str):
    """Make the model's generate() answer `output` (its tokens after the start token) whatever the source."""
    ids = [translate.model.config.decoder_start_token_id, *translate.tokenizer(output)["input_ids"]]
    monkeypatch.setattr(translate.model, "generate", lambda **kwargs: torch.tensor([ids]))


def test_a_translation_that_keeps_its_sentinels_gets_the_source_placeholders_back(protected_folder, monkeypatch):
    translate = pipeline(TASK, model=str(protected_folder))
    _answering(translate, monkeypatch, "⟦ph_0⟧ kann nicht gelöscht werden: ⟦ph_1⟧⟦ph_2⟧⟦ph_3⟧")
    assert translate(SOURCE, strict_placeholders=True) == [
        {"generated_text": "%(name)s kann nicht gelöscht werden: <b>%s</b>", "placeholder_problems": []}
    ]


def test_a_translation_that_loses_or_invents_a_sentinel_is_reported(protected_folder, monkeypatch, caplog):
    translate = pipeline(TASK, model=str(protected_folder))
    _answering(translate, monkeypatch, "Kann nicht löschen: ⟦ph_1⟧⟦ph_2⟧⟦ph_3⟧ ⟦ph_9⟧")
    with caplog.at_level("WARNING", logger="hf_attention.modeling.pipelines"):
        result = translate(SOURCE)
    assert result == [
        {
            "generated_text": "Kann nicht löschen: <b>%s</b> ⟦ph_9⟧",
            "placeholder_problems": [
                {"kind": "lost", "sentinel": "⟦ph_0⟧", "placeholder": "%(name)s", "count": 0},
                {"kind": "invented", "sentinel": "⟦ph_9⟧", "placeholder": None, "count": 1},
            ],
        }
    ]
    (record,) = caplog.records
    assert record.levelname == "WARNING"
    assert f"{SOURCE!r} has placeholder problems: lost %(name)s; invented ⟦ph_9⟧" in record.getMessage()
    with pytest.raises(ValueError, match=r"has placeholder problems: lost %\(name\)s; invented ⟦ph_9⟧.*strict"):
        translate(SOURCE, strict_placeholders=True)


def test_without_sentinels_in_the_tokenizer_nothing_changes(translation_folder):
    translate = pipeline(TASK, model=str(translation_folder))
    assert not translate.protects_placeholders
    plain = translate(SOURCE, max_new_tokens=5)
    assert set(plain[0]) == {"generated_text"}
    # The placeholder options cannot act without sentinels: refused, rather than promising a check that never runs.
    for option in ("strict_placeholders", "constrain_placeholders"):
        with pytest.raises(ValueError, match=rf"{option}=True needs placeholder protection, .* leave the option out"):
            translate(SOURCE, max_new_tokens=5, **{option: True})
        with pytest.raises(ValueError, match=rf"{option}=True needs placeholder protection"):
            pipeline(TASK, model=str(translation_folder), **{option: True})
    assert translate(SOURCE, max_new_tokens=5, strict_placeholders=False, constrain_placeholders=False) == plain
    ids = translate.model.generate(**translate.tokenizer(SOURCE, return_tensors="pt"), max_new_tokens=5)[0]
    assert plain[0]["generated_text"] == translate.tokenizer.decode(ids, skip_special_tokens=True)


def test_the_protected_pipeline_ships_with_its_placeholders_module(protected_folder, tmp_path):
    """Without hf_attention, the shipped pipeline protects and restores exactly as the installed one."""
    assert (protected_folder / "placeholders.py").read_bytes() == (
        Path(hf_attention.__file__).parent / "modeling" / "placeholders.py"
    ).read_bytes()
    remote = run_shipped_pipeline(protected_folder, SOURCE, tmp_path)
    local = pipeline(TASK, model=str(protected_folder))([SOURCE, "x"], max_new_tokens=5, num_beams=2)
    assert remote == [{"translation_text": o.pop("generated_text"), **o} for o in local]
    assert all("placeholder_problems" in record for record in remote)


def test_refresh_code_writes_the_pipeline_and_its_placeholders_module(protected_folder, tmp_path):
    from hf_attention.commands.cli import main
    from hf_attention.modeling.pipelines import pipeline_files

    folder = tmp_path / "checkpoint"
    shutil.copytree(protected_folder, folder)
    (folder / "placeholders.py").unlink()  # a checkpoint saved before the pipeline imported it
    assert main(["refresh-code", str(folder)]) == 0
    shipped = Path(hf_attention.__file__).parent / "modeling"
    for name in pipeline_files():
        assert (folder / name).read_bytes() == (shipped / name).read_bytes(), name
