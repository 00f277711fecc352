"""Tutorial 10 (a decoder-only language model, built up step by step) runs in its --quick mode and its numbers are
what its text says: the averaging trick three ways, each step of the model better than the one before, the hand-built
model equal to hf-attention's decoder family, one forward pass traced, what each family's outputs depend on, and the
explorer page written next to the figures. The committed full-run figures show what the text reads off them."""

import json
import math

import numpy as np
import pytest
from test_tutorials import FIGURES, assert_figures, run_tutorial

# One worker runs this module's tests, so its module-scoped run happens once (pyproject: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("tutorial10")


@pytest.fixture(scope="module")
def language_model(tmp_path_factory):
    numbers, figures, _ = run_tutorial("10_decoder_only_language_model.py", tmp_path_factory.mktemp("tutorial10"))
    return numbers, figures


def test_the_text_and_its_floor(language_model):
    numbers, _ = language_model
    text = numbers["text"]
    assert text["vocab_size"] == 27 and text["first_line"] == "gus has a pink box. the box of gus is pink."
    # ln 288 nats of choice per held-out sentence, spread over its characters (the newline included)
    assert text["names_colours_things"] == [8, 6, 6] and text["choices"] == 288
    assert abs(numbers["loss_floor"] - 200 * math.log(288) / text["validation_characters"]) < 1e-9
    # How far back the second half's words were first written: the thing "xyz. the " (3 or 4 letters + 6) back; the
    # colour and the name further, by the lengths of the words between.
    assert text["copy_distance_range"] == {"thing": [9, 10], "colour": [26, 31], "name": [29, 34]}


def test_averaging_the_past_three_ways(language_model):
    numbers, _ = language_model
    assert numbers["averaging_matrix_vs_loop"] < 1e-6 and numbers["averaging_softmax_vs_loop"] < 1e-6


def test_each_step_does_better(language_model):
    numbers, _ = language_model
    models = numbers["models"]
    names = ("bigram", "averaging", "single head", "blocks")
    # the same budget for every model: the same steps of the same batch
    assert {models[name]["steps"] for name in names} == {numbers["settings"]["budget_steps"]}
    losses = [models[name]["last_fifth"]["loss"][0] for name in names]  # the mean of the last fifth's evaluations
    assert losses == sorted(losses, reverse=True) and losses[-1] > numbers["loss_floor"]
    for name in names:
        mean, lowest, highest = models[name]["last_fifth"]["loss"]
        assert lowest <= mean <= highest and models[name]["last_fifth"]["evaluations"] >= 2
    # each step's loss drop is clear (the new model's worst evaluation below the old one's best), already in 400 steps
    assert list(numbers["gains"]) == ["bigram → averaging", "averaging → single head", "single head → blocks"]
    assert all(gain["loss_clear"] and gain["loss_drop"] > 0 for gain in numbers["gains"].values())
    assert numbers["gains"]["single head → blocks"]["copy_gain"] > 0
    assert models["bigram"]["copy_accuracy"] < 0.2  # the words of the second half: a guess from one letter back
    assert models["blocks"]["copy_accuracy"] > 2 * numbers["copy_chance"]  # already in the quick run's 400 steps
    samples = numbers["samples"]
    assert samples["bigram"]["pattern"] == 0 and samples["blocks"]["pattern"] >= 1


def test_the_library_computes_the_same_model(language_model):
    numbers, _ = language_model
    assert numbers["library_class"] == "HFAttentionForCausalLM"
    # The eager backend runs the same operations in the same order: the same bits on the committed run's CPU, float32
    # rounding where the matrix library picks other kernels for the library's layout (as SDPA's bound below).
    assert numbers["library_eager_vs_hand_logits_max_abs"] < 1e-5
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


def test_the_trace_figure_draws_the_traced_shapes(language_model):
    numbers, figures = language_model
    with np.load(figures / "10_trace.npz") as drawn:
        names, shapes, ys = list(drawn["names"]), list(drawn["shapes"]), drawn["y"]
    assert names == [name for name, _ in numbers["trace"]]
    assert shapes == [str(tuple(shape)) for _, shape in numbers["trace"]]
    assert names[0] == "input ids" and shapes[0] == "(1, 43)" and shapes[-1] == "(1, 43, 27)"
    split = names.index("block 1: LayerNorm")  # the second column starts with block 1, each column drawn downwards
    assert (np.diff(ys[:split]) < 0).all() and (np.diff(ys[split:]) < 0).all()


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
    assert families["encoder-decoder: encoder"]["final LayerNorm"] == "(1, 18, 32)"


def test_the_families_figure_draws_pre_norm_blocks(language_model):
    """Each stack is drawn as the library builds it for the tutorial's pre-norm configs: per sublayer a LayerNorm, the
    sublayer and the residual add; a final LayerNorm; cross-attention between the decoder's two other sublayers."""
    numbers, figures = language_model
    with np.load(figures / "10_families.npz") as drawn:
        data = {key: drawn[key] for key in drawn.files}
    assert list(data["families"]) == list(numbers["families"])
    block = ["norm", "attention", "add", "norm", "feed-forward", "add"]
    with_cross = ["norm", "attention", "add", "norm", "attention", "add", "norm", "feed-forward", "add"]
    expected = [
        ["ids", "embedding", *block, "norm", "head"],
        ["ids", "embedding", *block, "norm", "head"],
        ["ids", "embedding", *block, "norm"],
        ["ids", "embedding", *with_cross, "norm", "head"],
    ]
    for i, (family, boxes) in enumerate(numbers["families"].items()):
        assert list(data[f"kinds_{i}"]) == expected[i], family
        assert [[str(a), str(b)] for a, b in zip(data[f"labels_{i}"], data[f"shapes_{i}"], strict=True)] == boxes
        assert (np.diff(data[f"positions_{i}"][:, 1]) < 0).all()  # drawn top to bottom
    decoder = list(data["labels_3"])
    assert decoder.index("causal self-attention: weights") < decoder.index("cross-attention: weights")
    assert decoder.index("cross-attention: weights") < decoder.index("feed-forward")
    assert data["shapes_3"][decoder.index("cross-attention: weights")] == "(1, 4, 15, 18)"
    assert data["mask_cross"].shape == (15, 18) and (np.triu(data["mask_decoder"], 1) == 0).all()


def test_the_answers_are_measured(language_model):
    numbers, _ = language_model
    answers, models = numbers["answers"], numbers["models"]
    assert answers["choice_nats"] == {"name": math.log(8), "colour": math.log(6), "thing": math.log(6)}
    assert answers["one block"]["steps"] == answers["no positions"]["steps"] <= models["blocks"]["steps"]
    assert answers["one block"]["parameters"] < models["blocks"]["parameters"]  # one block fewer
    assert answers["no positions"]["parameters"] == models["blocks"]["parameters"]  # the table kept, at zero
    for variant in ("one block", "no positions"):
        assert numbers["loss_floor"] < answers[variant]["validation_loss"] < models["bigram"]["validation_loss"]
    for temperature in ("0.5", "2.0"):
        sampled = answers[f"temperature {temperature}"]
        assert 0 <= sampled["different_consistent"] <= sampled["consistent"] <= sampled["sentences"]


def test_explorer_page_next_to_the_figures(language_model):
    numbers, figures = language_model
    assert (figures / numbers["explorer_page"]).is_file() and numbers["explorer_page"] == "10_explorer.html"
    assert numbers["explorer_layers_heads"] == [2, 4]
    assert numbers["explorer_vs_hand_weights_max_abs"] < 1e-5  # the page shows the model's own weights
    assert_figures(figures, "10_")


def test_committed_full_run():
    """The full run's data behind the committed figures, as the text describes it."""
    with np.load(FIGURES / "10_training.npz") as data:
        copy = data["copy_last_fifth"][:, 0]  # per model, the mean copy accuracy of the last fifth of training
        blocks = data["curve_3"]  # (evaluations, [step, validation loss, copy accuracy])
        floor = float(data["loss_floor"])
        steps = [data[f"curve_{i}"][-1, 0] for i in range(4)]
    assert steps == [steps[0]] * 4  # the same budget for the four models
    assert copy[-1] > 0.95 and copy[0] < 0.2 and copy[2] < 0.75
    assert blocks[-1, 1] < 2 * floor
    assert (FIGURES / "10_explorer.html").is_file()
    full_run = json.loads((FIGURES / "10_results.json").read_text())
    # block 0 fetches the word to copy, block 1 looks at the landmarks (full stops, "the", "of", "is")
    on_word, on_landmarks = np.array(full_run["weight_on_word_to_copy"]), np.array(full_run["weight_on_landmarks"])
    assert on_word[0].max() > on_word[1].max() and on_landmarks[1].min() > on_landmarks[0].max()
    with np.load(FIGURES / "10_trace.npz") as drawn:
        assert list(drawn["shapes"]) == [str(tuple(shape)) for _, shape in full_run["trace"]]
    # the exercises' variants train as long as the two blocks they are compared with
    assert full_run["answers"]["one block"]["steps"] == full_run["models"]["blocks"]["steps"]
    assert full_run["answers"]["no positions"]["steps"] == full_run["models"]["blocks"]["steps"]
