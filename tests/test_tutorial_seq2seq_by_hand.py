"""Tutorial 11 (an encoder-decoder built by hand) runs in its --quick mode: the hand-built model trains, its logits
and greedy tokens are those of the library's HFAttentionForSeq2SeqLM with the same weights, and it draws its
figures."""

import numpy as np
import pytest
from test_tutorials import assert_figures, run_tutorial

# One worker runs this module's tests, so its module-scoped run happens once (pyproject: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("tutorial11")


@pytest.fixture(scope="module")
def seq2seq(tmp_path_factory):
    numbers, figures, _ = run_tutorial("11_encoder_decoder_by_hand.py", tmp_path_factory.mktemp("tutorial11"))
    return numbers, figures


def test_library_computes_the_hand_built_logits(seq2seq):
    numbers, _ = seq2seq
    assert numbers["quick"] is True
    lengths = numbers["check_batch_source_lengths"]
    assert len(lengths) == numbers["check_batch"] and len(set(lengths)) > 1  # the batch is padded
    assert numbers["logits_max_abs_sdpa"] < 1e-5  # another order of sums: float rounding only
    # The eager backend runs the hand-written operations in the same order: the very same bits where the matrix
    # library runs the same kernels for both layouts (an Intel Xeon with AMX), float rounding where it picks other
    # kernels for the library's layout (1.4e-6 and 2.9e-6 on AVX2-only EPYCs, 2.6e-6 on a Zen 4 EPYC). What holds on
    # every CPU is float32 rounding, as for SDPA: logits up to ~10 after two layers each side; a wrong mask or a
    # missing term moves them by far more than 1e-3.
    assert numbers["logits_max_abs_eager"] < 1e-5
    assert numbers["cross_weights_max_abs_eager"] < 1e-6
    assert numbers["library_parameters"] == numbers["parameters"]  # tied: one embedding under four names


def test_generate_writes_the_hand_written_greedy_tokens(seq2seq):
    numbers, _ = seq2seq
    assert numbers["generate_shape_equal"] is True
    assert numbers["generate_identical_rows"] == numbers["test_size"]  # every row, padding included
    # generate()'s cached logits differ from the loop's by float32 rounding (< 1e-5, as the eager and SDPA logits
    # above): a gap between the best two logits above twice that keeps the argmax, so the tokens, the same on any CPU.
    assert numbers["smallest_margin"] > 2e-5


def test_training_lowers_the_loss(seq2seq):
    numbers, figures = seq2seq
    assert numbers["loss_last"] < 0.5 * numbers["loss_first"]
    assert numbers["exact_match_copy"] > 0.5  # copying comes first; reversing needs more steps than --quick's
    assert 0.0 <= numbers["exact_match_reverse"] <= 1.0
    with np.load(figures / "11_loss.npz") as data:
        assert data["losses"].shape == (numbers["steps"],)


def test_figures_and_the_cross_attention_map(seq2seq):
    numbers, figures = seq2seq
    assert_figures(figures, "11_")
    with np.load(figures / "11_cross_attention.npz") as data:
        weights = data["weights"]
        assert data["head"].tolist() == numbers["mirror_head"]
    assert weights.ndim == 2 and weights.shape[1] == weights.shape[0] + 1  # n + 1 queries, n + 2 source tokens
    np.testing.assert_allclose(weights.sum(1), 1.0, atol=1e-5)  # every query's weights over the real source
    mirror = np.array(numbers["weight_on_mirror"])
    assert mirror.shape == (numbers["sizes"]["layers"], numbers["sizes"]["heads"])
    assert mirror.max() == pytest.approx(mirror[tuple(numbers["mirror_head"])])


def test_the_paper_schedule_and_label_smoothing(seq2seq):
    numbers, figures = seq2seq
    # transformers' get_inverse_sqrt_schedule is the paper's formula (up to the constant factor of its peak)
    assert numbers["paper_schedule_vs_formula_max_relative"] < 1e-12
    steps, warmup, peak = numbers["paper_steps"], numbers["paper_warmup"], numbers["paper_peak_lr"]
    with np.load(figures / "11_warmup.npz") as data:
        warm, cold = data["lr_warm_up"], data["lr_no_warm_up"]
        assert data["loss_warm_up"].shape == data["loss_no_warm_up"].shape == (steps,)
    assert warm[0] == 0.0 and warm.max() == pytest.approx(peak) and int(warm.argmax()) == warmup  # rises, then falls
    assert cold[0] == pytest.approx(peak) and (np.diff(cold) < 0).all()  # the same peak from the first step
    # smoothed targets: the best a model can do is 1 - ε + ε/V on the right token, a cross-entropy of -ln of that
    best = 1 - numbers["label_smoothing"] + numbers["label_smoothing"] / numbers["vocabulary"]["tokens"]
    assert numbers["smoothing_best_confidence"] == pytest.approx(best)
    runs = numbers["paper_runs"]
    assert set(runs) == {"warm-up", "no warm-up", "warm-up, ε = 0.1"}
    for run in runs.values():
        assert len(run["loss_curve"]) == steps and 0.0 <= run["exact_match"] <= 1.0
    smoothed = runs["warm-up, ε = 0.1"]
    assert smoothed["cross_entropy"] > numbers["smoothing_floor_cross_entropy"]  # it cannot get below the floor
    assert smoothed["confidence"] < best + 0.02


def test_the_exercises_measured(seq2seq):
    numbers, _ = seq2seq
    # 1. Without source positions the memory of a string and of its reversal are the same rows in another order:
    # equal logits to float32 rounding, and exact matches far below the model's with positions
    first = numbers["exercise_1"]
    assert first["mirrored_logits_max_abs"] < 1e-4
    assert max(first["exact_match_copy"], first["exact_match_reverse"]) < 0.5 < numbers["exact_match_copy"]
    # 2. With the mask a string's logits are its own to float32 rounding; without it the `<pad>` keys move them by
    # far more, and the library without an attention_mask computes the unmasked ones
    second = numbers["exercise_2"]
    assert second["max_abs"]["masked"] < 1e-4 < 1e-2 < second["max_abs"]["unmasked"]
    assert second["library_without_attention_mask_max_abs"] < 1e-4
    # 3. The loop runs its whole prefix at each step, generate() one new position per step
    for row in numbers["exercise_3"]:
        n = row["tokens"]
        assert row["generate_tokens"] == n and row["greedy"] == n * (n + 1) // 2 and row["generate"] == n
    # 4. The pre-norm blocks by hand are the library's norm_position="pre" with final_norm=True
    fourth = numbers["exercise_4"]
    assert fourth["logits_max_abs"] < 1e-4 < 1e-2 < fourth["post_norm_blocks_max_abs"]
