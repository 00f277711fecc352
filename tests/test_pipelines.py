"""Pipelines from saved folders (model + trained tokenizer): the built-in tasks and our seq2seq pipeline."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import pipeline

from hf_attention import (
    HFAttentionEncoderModel,
    HFAttentionForCausalLM,
    HFAttentionForMaskedLM,
    HFAttentionForSeq2SeqLM,
    HFAttentionForSequenceClassification,
    HFAttentionForTokenClassification,
)
from hf_attention.pipelines import TASK, save_translation_pipeline

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


def test_translation_pipeline_shipped_with_the_checkpoint_in_a_fresh_process(translation_folder, tmp_path):
    """`pipeline("translation", model=DIR, trust_remote_code=True)` without hf_attention, as on the Hub."""
    (tmp_path / "remote.py").write_text(REMOTE_SCRIPT)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
        "HF_MODULES_CACHE": str(tmp_path / "modules"),
    }
    result = subprocess.run(
        [sys.executable, "remote.py", str(translation_folder), PROMPT],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    remote = json.loads(result.stdout.strip().splitlines()[-1])
    local = pipeline(TASK, model=str(translation_folder))([PROMPT, "x"], max_new_tokens=5, num_beams=2)
    assert remote == [{"translation_text": o["generated_text"]} for o in local]
