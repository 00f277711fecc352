"""Tutorial 07 (a Transformer block by hand) runs in its --quick mode and its numbers are what its text says: the
block diagram, the worked example of one query, the hand-written pieces against the library's modules, dropout on the
attention weights, the tied-projection algebra, the deep-stack measurements and the trained ablations on the reverse
and mirror-sum tasks."""

import math

import numpy as np
import pytest
from test_tutorials import assert_figures, run_tutorial

# One worker runs this module's tests, so its module-scoped run happens once (pyproject: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("tutorial07")


@pytest.fixture(scope="module")
def block(tmp_path_factory):
    numbers, figures, _ = run_tutorial("07_transformer_block_by_hand.py", tmp_path_factory.mktemp("tutorial07"))
    return numbers, figures


def test_block_diagram_draws_the_layers_in_their_order(block):
    _, figures = block
    assert (figures / "07_block_diagram.png").is_file()
    with np.load(figures / "07_block_diagram.npz") as data:
        drawn = {key: data[key].tolist() for key in data.files}
    post, pre, decoder = drawn["labels_0"], drawn["labels_1"], drawn["labels_2"]
    assert post == ["embeddings + positions", "self-attention", "Add & Norm", "feed-forward", "Add & Norm"]
    # Pre-norm: a LayerNorm before each sublayer, the residual sum after it, one more LayerNorm at the very end.
    assert pre == [
        "embeddings + positions",
        "LayerNorm",
        "self-attention",
        "Add",
        "LayerNorm",
        "feed-forward",
        "Add",
        "final LayerNorm",
    ]
    # Decoder: cross-attention between the (masked) self-attention and the FFN, fed by the encoder's output.
    assert decoder[0] == "embeddings + positions" and decoder[-1] == "Add & Norm"
    assert decoder.index("masked self-attention") < decoder.index("cross-attention") < decoder.index("feed-forward")
    assert drawn["encoder_into_2"] == decoder.index("cross-attention")
    assert drawn["encoder_into_0"] == drawn["encoder_into_1"] == -1
    for i, labels in enumerate((post, pre, decoder)):
        heights = drawn[f"heights_{i}"]
        assert heights == sorted(heights) and len(set(heights)) == len(labels)  # drawn bottom to top, in order
        # Every residual connection ends at an Add and starts at the block's input: the embeddings or the last Add.
        assert [labels[j] for j in drawn[f"residual_to_{i}"]] == [label for label in labels if label.startswith("Add")]
        assert drawn[f"residual_from_{i}"] == [0] + drawn[f"residual_to_{i}"][:-1]


def test_one_query_by_hand_equals_the_library(block):
    numbers, _ = block
    example = numbers["example"]
    assert example["dots"] == [4.0, 1.0, 3.0] and example["scaled"] == [2.0, 0.5, 1.5]  # q·k, then / √4
    exact = [math.exp(s) / sum(math.exp(t) for t in example["scaled"]) for s in example["scaled"]]
    assert np.allclose(example["weights"], exact, atol=1e-6)
    assert np.allclose(example["output"], np.array(example["weights"]) @ np.array(example["values"]), atol=1e-6)
    for key in ("example_eager_output_max_abs", "example_eager_weights_max_abs", "example_sdpa_output_max_abs"):
        assert numbers[key] < 1e-6, key


def test_attention_dropout(block):
    numbers, figures = block
    dropout = numbers["dropout"]
    p = dropout["p"]
    # Eval mode: dropout does nothing, bit for bit.
    assert dropout["eval_output_max_abs"] == 0.0 and dropout["eval_weights_max_abs"] == 0.0
    # Training mode: a share p of the weights is dropped, the kept ones are scaled by 1/(1 - p) ...
    assert abs(dropout["dropped_share"] - p) < 0.02
    assert dropout["kept_rescaled_max_abs"] < 1e-6
    # ... so the rows no longer sum to 1: 1/(1 - p) when nothing was dropped, less otherwise, 1 on average.
    assert abs(dropout["row_sum_max"] - 1 / (1 - p)) < 1e-5
    assert dropout["row_sum_min"] < 0.9 and dropout["row_sum_std"] > 0.05
    assert abs(dropout["row_sum_mean"] - 1) < 0.01
    assert abs(dropout["rows_without_drop"] - (1 - p) ** numbers["single_head_size"]["T"]) < 0.03
    # The output is right on average, noisy for one mask.
    assert dropout["output_mean_max_abs"] < dropout["output_one_copy_mean_abs"]
    with np.load(figures / "07_dropout.npz") as data:
        assert abs(data["row_sums"].mean() - dropout["row_sum_mean"]) < 1e-5
        assert abs(data["eval_row"].sum() - 1) < 1e-5 and (data["train_row"] == 0).any()
    # Trained with dropout on its attention weights, the reverse model still learns the task.
    assert min(numbers["reverse"]["attention dropout"]["token"]) > 0.9


def test_hand_written_pieces_equal_the_library(block):
    numbers, _ = block
    # The same operations in the same order as the eager backend, nn.Linear and EncoderLayer: the same bits on the
    # committed run's CPU, but the library's layout of the same products (a batch of one, nn.Linear's bias added inside
    # the product) may take other kernels on another CPU. What holds everywhere is float32 rounding: outputs of order 1
    # after sums over D = 16 and 4·D = 64 terms, a few 1e-7; a wrong mask, scale or missing term moves them by > 1e-3.
    for key in (
        "single_head_eager_max_abs",
        "multi_head_eager_max_abs",
        "ffn_max_abs",
        "post_norm_layer_torch_norm_max_abs",
        "pre_norm_layer_torch_norm_max_abs",
    ):
        assert numbers[key] < 5e-6, key
    assert numbers["single_head_weights_max_abs"] < 1e-6  # softmax weights, each in [0, 1]
    # Another order of additions (fused SDPA, strided slices, one row at a time, LayerNorm's kernel): rounding only.
    for key in (
        "single_head_sdpa_max_abs",
        "multi_head_sdpa_max_abs",
        "multi_head_strided_slices_max_abs",
        "ffn_row_by_row_max_abs",
        "layer_norm_max_abs",
        "post_norm_layer_max_abs",
        "pre_norm_layer_max_abs",
    ):
        assert numbers[key] < 5e-6, key


def test_multi_head_attention_and_convolutions(block):
    numbers, _ = block
    assert numbers["conv_1x1_vs_projection_max_abs"] < 1e-6  # a projection is a 1 × 1 convolution
    # A 3-tap convolution is a 3-head attention whose heads each see the key at one offset (zero rows: zero padding).
    assert numbers["conv_3_vs_three_head_attention_max_abs"] < 1e-5 and numbers["conv_edge_rows_are_zero"]
    # ... but not the other way: attention's mixing depends on the input, and it is blind to order without positions.
    assert numbers["attention_weights_two_inputs_max_abs"] > 0.05
    assert numbers["attention_permuted_max_abs"] < 1e-5 < 0.1 < numbers["convolution_permuted_max_abs"]


def test_layer_norm_per_token_not_per_sentence(block):
    numbers, _ = block
    effects = numbers["norm_dependence"]
    assert all(value == 0.0 for value in effects["per token"].values())  # padding, future, length, batch: nothing
    assert all(effects["per sentence"][key] > 0.05 for key in ("padding", "future_token", "appended_token"))
    assert effects["BatchNorm (training)"]["other_sentence"] > 0.1


def test_attention_is_a_convex_combination(block):
    numbers, _ = block
    assert numbers["weights_row_sum_error"] < 1e-6
    assert numbers["weights_negative"] == 0 and numbers["outside_value_range"] == 0


def test_tied_query_and_key_projections(block):
    numbers, _ = block
    assert numbers["tied_symmetry_max_abs"] < 1e-5 < 0.1 < numbers["untied_symmetry_max_abs"]
    assert numbers["tied_smallest_eigenvalue"] > -1e-5 and numbers["untied_smallest_eigenvalue"] < -0.1
    assert numbers["tied_argmax_on_self"] > 0.7  # tokens favour themselves
    assert abs(numbers["untied_argmax_on_self"] - numbers["uniform_weight"]) < 0.03  # chance: 1/T
    assert numbers["tied_mean_self_weight"] > 1.5 * numbers["untied_mean_self_weight"]
    assert numbers["tied_mutual_favourites"] == 0.0 < numbers["untied_mutual_favourites"]


def test_deep_stack_at_initialisation(block):
    numbers, _ = block
    depth = numbers["depth"]
    with_residual = ("post-norm", "pre-norm", "residual, no norm")
    without_residual = ("post-norm, no residual", "pre-norm, no residual")
    for name in without_residual:
        assert depth[name]["similarity"][-1] > 0.999, name  # every position holds the same vector
    for name in with_residual:
        assert depth[name]["similarity"][-1] < 0.95, name
    assert all(abs(s - 1) < 0.02 for s in depth["post-norm"]["std"][1:])  # post-norm: unit scale after every layer
    assert depth["pre-norm"]["std"][-1] > 1.5  # pre-norm: the stream grows
    assert depth["residual, no norm"]["std"][-1] > 1.3 * depth["pre-norm"]["std"][-1]  # no norm: faster still
    ratio = {name: d["gradient_first_over_last"] for name, d in depth.items()}
    assert ratio["pre-norm"] > 1 > 0.5 > ratio["post-norm"]  # even vs top-heavy gradients (Xiong et al. 2020)
    # "they vary less than post-norm's": the largest layer's gradient over the smallest layer's, in each stack.
    spread = {name: max(d["gradient"]) / min(d["gradient"]) for name, d in depth.items()}
    assert spread["pre-norm"] < 0.5 * spread["post-norm"]
    assert max(depth["post-norm"]["gradient"]) == depth["post-norm"]["gradient"][-1]  # largest at the top
    assert ratio["post-norm, no residual"] < 0.5 * ratio["post-norm"]
    assert ratio["pre-norm, no residual"] < 0.25 * ratio["pre-norm"]
    unnormalised = min(depth["residual, no norm"]["gradient"])
    assert unnormalised > 10 * max(depth["post-norm"]["gradient"] + depth["pre-norm"]["gradient"])


def test_reverse_ablations(block):
    numbers, figures = block
    reverse, ceiling = numbers["reverse"], numbers["bag_of_tokens_ceiling"]
    assert 0.25 < ceiling < 0.32  # the most frequent of the other nine digits
    assert min(reverse["full"]["token"]) > 0.99 and min(reverse["full"]["sequence"]) > 0.97
    # No positions: order-blind, so exactly at the bag-of-tokens ceiling, never a whole sequence right.
    assert all(abs(t - ceiling) < 0.02 for t in reverse["no positions"]["token"])
    assert max(reverse["no positions"]["sequence"]) < 0.01
    assert max(reverse["no residuals"]["token"]) < 0.6 and max(reverse["no residuals"]["sequence"]) < 0.01
    # In the --quick budget the model without FFN is still behind on whole sequences; the other two make it.
    assert max(reverse["no feed-forward"]["sequence"]) < 0.9
    assert min(reverse["no LayerNorm"]["token"]) > 0.97
    assert min(reverse["W_q = W_k"]["token"]) > 0.97
    assert_figures(figures, "07_")


def test_mirror_sum_needs_the_feed_forward_network(block):
    numbers, _ = block
    mirror_sum = numbers["mirror_sum"]
    full, without = mirror_sum["full"]["token"], mirror_sum["no feed-forward"]["token"]
    assert min(full) > max(without) + 0.15
    assert max(without) < 0.9
