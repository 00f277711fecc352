"""Tutorial 01 (the road to attention) runs in its quick mode and measures what its text says: the plain recurrent
encoder-decoder falls off with source length and the attention one does not, the attention weights align, the
gradient reaching the first source token vanishes without attention, and a recurrent layer takes one sequential
step per token. The committed full-run figures show the same."""

import numpy as np
from test_tutorials import FIGURES, assert_figures, run_tutorial


def test_01_road_to_attention(tmp_path):
    numbers, figures, _ = run_tutorial("01_road_to_attention.py", tmp_path)
    plain, attention = numbers["sequence_accuracy"]["rnn"], numbers["sequence_accuracy"]["attention"]
    # Bahdanau et al.'s figure 2 in miniature: attention copies every length, the fixed vector only short ones.
    assert min(attention) >= 0.95, attention
    assert plain[0] >= 0.8 and plain[-1] <= 0.3, plain
    assert attention[-1] - plain[-1] > 0.6
    # The learned weights are the copy's alignment: most of each row on the diagonal.
    assert numbers["alignment_diagonal_mean"] > 0.5
    # At initialisation, the loss reaches the first source token ~2 orders of magnitude weaker without attention.
    untrained = numbers["gradient_first_over_last_untrained"]
    assert untrained["rnn"] < 0.1 and untrained["attention"] > 0.5, untrained
    # One sequential step per token in a recurrent layer; the same operations for any length in a Transformer layer.
    assert numbers["rnn_sequential_steps"] == numbers["sequence_lengths"]
    assert len(set(numbers["transformer_layer_operations"])) == 1
    assert numbers["parameters"]["attention"] > numbers["parameters"]["rnn"]
    assert_figures(figures, "01_")


def test_01_committed_figures_show_the_effect_at_full_length():
    """The full run's data behind the committed figure (what the text describes)."""
    length = np.load(FIGURES / "01_length.npz")
    assert length["lengths"][-1] >= 20
    assert length["attention_sequences"].min() >= 0.9
    assert length["rnn_sequences"][0] >= 0.9 and length["rnn_sequences"][-1] <= 0.2
    sequential = np.load(FIGURES / "01_sequential.npz")
    assert np.array_equal(sequential["rnn_steps"], sequential["lengths"])
    reach = np.load(FIGURES / "01_gradient_reach.npz")
    assert reach["rnn_untrained"][0] / reach["rnn_untrained"][-1] < 0.01
    assert reach["attention_untrained"][0] / reach["attention_untrained"][-1] > 0.3
