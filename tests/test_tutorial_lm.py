"""Tutorial 10 (a decoder-only language model, built up step by step) runs in its --quick mode and its numbers are
what its text says: the averaging trick three ways, each step of the model better than the one before, the hand-built
model equal to hf-attention's decoder family, one forward pass traced, what each family's outputs depend on, and the
explorer page written next to the figures. The committed full-run figures show what the text reads off them."""

import math

import numpy as np
import pytest
from test_tutorials import FIGURES, assert_figures, run_tutorial


@pytest.fixture(scope="module")
def language_model(tmp_path_factory):
    numbers, figures, _ = run_tutorial("10_decoder_only_language_model.py", tmp_path_factory.mktemp("tutorial10"))
    return numbers, figures


def test_the_text_and_its_floor(language_model):
    numbers, _ = language_model
    text = numbers["text"]
    assert text["vocab_size"] == 27 and text["first_line"] == "gus has a pink box. the box of gus is pink."
    # ln 288 nats of choice per held-out sentence, spread over its characters (the newline included)
    assert abs(numbers["loss_floor"] - 200 * math.log(288) / text["validation_characters"]) < 1e-9


def test_averaging_the_past_three_ways(language_model):
    numbers, _ = language_model
    assert numbers["averaging_matrix_vs_loop"] < 1e-6 and numbers["averaging_softmax_vs_loop"] < 1e-6


def test_each_step_does_better(language_model):
    numbers, _ = language_model
    models = numbers["models"]
    losses = [models[name]["validation_loss"] for name in ("bigram", "averaging", "single head", "blocks")]
    assert losses == sorted(losses, reverse=True) and losses[-1] > numbers["loss_floor"]
    assert models["bigram"]["copy_accuracy"] < 0.2  # the words of the second half: a guess from one letter back
    assert models["blocks"]["copy_accuracy"] > 2 * numbers["copy_chance"]  # already in the quick run's 400 steps
    samples = numbers["samples"]
    assert samples["bigram"]["pattern"] == 0 and samples["blocks"]["pattern"] >= 1


def test_the_library_computes_the_same_model(language_model):
    numbers, _ = language_model
    assert numbers["library_class"] == "HFAttentionForCausalLM"
    assert numbers["library_eager_vs_hand_logits_max_abs"] == 0.0  # the same operations in the same order
    assert numbers["library_vs_hand_logits_max_abs"] < 1e-5  # SDPA: another order of additions
    assert numbers["reloaded_vs_hand_logits_max_abs"] < 1e-5  # save_pretrained / from_pretrained
    assert numbers["greedy_by_hand"] == numbers["greedy_generate"]
    assert numbers["greedy_by_hand"].startswith("gus has a white kite. the ")


def test_one_forward_pass_traced(language_model):
    numbers, _ = language_model
    shapes = dict(numbers["trace"][:4]) | dict(numbers["trace"][-2:])
    assert shapes["input ids"] == [1, 43] and shapes["token embeddings"] == [1, 43, 32]
    assert shapes["position embeddings"] == [43, 32] and shapes["logits"] == [1, 43, 27]
    traced = dict(numbers["trace"])
    assert traced["block 1: scores q kᵀ / √d"] == [1, 4, 43, 43]
    assert traced["block 1: weights @ v"] == [1, 4, 43, 8] and traced["block 1: heads side by side"] == [1, 43, 32]
    assert traced["block 0: FFN inside: relu(x W_1 + b_1)"] == [1, 43, 128]
    assert len(numbers["trace"]) == 4 + 2 * 12 + 2


def test_what_each_family_sees(language_model):
    numbers, _ = language_model
    dependence = numbers["dependence"]
    assert dependence["encoder-only, source token 16 changed"] == list(range(18))  # bidirectional
    assert dependence["decoder-only, token 16 changed"] == [16, 17]  # causal: the earlier outputs do not move
    assert dependence["encoder-decoder, source token 16 changed"] == list(range(15))  # through cross-attention
    assert dependence["encoder-decoder, target token 7 changed"] == list(range(7, 15))
    families = {family: dict(boxes) for family, boxes in numbers["families"].items()}
    assert families["decoder-only (GPT)"]["causal self-attention: weights"] == "(1, 4, 18, 18)"
    assert families["decoder-only (GPT)"]["next-token logits"] == "(1, 18, 27)"
    assert families["encoder-decoder: decoder"]["cross-attention: weights"] == "(1, 4, 15, 18)"
    assert families["encoder-decoder: encoder"]["feed-forward: encoder output"] == "(1, 18, 32)"


def test_explorer_page_next_to_the_figures(language_model):
    numbers, figures = language_model
    assert (figures / numbers["explorer_page"]).is_file() and numbers["explorer_page"] == "10_explorer.html"
    assert numbers["explorer_layers_heads"] == [2, 4]
    assert numbers["explorer_vs_hand_weights_max_abs"] < 1e-5  # the page shows the model's own weights
    assert_figures(figures, "10_")


def test_committed_full_run():
    """The full run's data behind the committed figures, as the text describes it."""
    with np.load(FIGURES / "10_training.npz") as data:
        copy = data["copy_accuracy"]
        blocks = data["curve_3"]  # (evaluations, [step, validation loss, copy accuracy])
        floor = float(data["loss_floor"])
    assert copy[-1] > 0.95 and copy[0] < 0.2 and copy[2] < 0.5
    assert blocks[-1, 1] < 2 * floor
    assert (FIGURES / "10_explorer.html").is_file()
