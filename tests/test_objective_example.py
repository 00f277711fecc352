"""A new objective is one module (tests/toy_objective.py): registered, it trains through training.train's own code
(splits, tokenizer, loop, evaluation, export) and learns its task."""

import json

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

import hf_attention  # noqa: F401  (registers our model types with the Auto classes)
from training.args import parse_args
from training.objectives import OBJECTIVES
from training.train import run


@pytest.fixture
def alphabet():
    import toy_objective

    yield toy_objective.OBJECTIVE
    OBJECTIVES.pop("alphabet")  # the registry is global: leave it as the other tests expect it


def test_a_registered_objective_trains_through_the_shared_front_end(alphabet, tmp_path):
    model_config = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 128,
        "hidden_dropout_prob": 0.0,
        "max_position_embeddings": 64,
        "tie_word_embeddings": False,  # tied, a model this small stays on letter frequencies for longer
    }
    flags = "--objective alphabet --block_size 32 --vocab_size 300 --per_device_train_batch_size 16"
    flags += " --learning_rate 3e-3 --warmup_steps 10 --max_steps 200 --logging_steps 20 --eval_steps 0"
    flags += " --save_steps 0 --report_to none --disable_tqdm true"
    argv = [*flags.split(), "--output_dir", str(tmp_path), "--model_config", json.dumps(model_config)]
    results = run(*parse_args(argv))
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "final")
    # Chance is one letter in 26; the next letter is certain except where a run ends.
    assert results["steps"] == 200 and results["test_perplexity"] < 2.0, results
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "final").eval()
    inputs = tokenizer("c d e f", return_tensors="pt")
    output = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    continuation = tokenizer.decode(output[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
    assert continuation.split()[:2] == ["g", "h"], continuation
    assert "alphabet" in (tmp_path / "final" / "README.md").read_text()  # the card names the objective
