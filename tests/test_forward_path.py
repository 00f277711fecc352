"""One decoder forward pass reads in the order it computes: head → base model → stack → layers → loss, hopping
between the package's files at most `MAX_TRANSITIONS` times (the counting rule is in forward_path.py)."""

from forward_path import decoder_forward_with_labels

# The tests' tiny causal LM, model(input_ids, labels=input_ids), which made 53 hops across 11 files before its
# forward pass was written out in the order it computes.
MAX_TRANSITIONS = 29


def test_a_decoder_forward_with_labels_stays_within_its_hop_budget():
    path = decoder_forward_with_labels()
    assert path.transitions <= MAX_TRANSITIONS, path.describe()
