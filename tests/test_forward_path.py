"""One decoder forward pass reads in the order it computes: head → base model → stack → layers → loss, hopping
between the package's files at most a budget of times (the counting rule is in forward_path.py)."""

from forward_path import LLAMA_CHOICES, decoder_forward_with_labels

# The tests' tiny causal LM, model(input_ids, labels=input_ids), which made 53 hops across 11 files before its
# forward pass was written out in the order it computes, and 29 before the speed paths left the plain one.
MAX_TRANSITIONS = 20
# The same with Llama's choices (pre-norm RMSNorm, rotary, grouped heads, gated FFN, sdpa), which made 58 before its
# speed paths (fused and stacked projections, compiled regions) stepped off the plain path.
MAX_LLAMA_TRANSITIONS = 28


def test_a_decoder_forward_with_labels_stays_within_its_hop_budget():
    path = decoder_forward_with_labels()
    assert path.transitions <= MAX_TRANSITIONS, path.describe()


def test_a_llama_shaped_forward_with_labels_stays_within_its_hop_budget():
    path = decoder_forward_with_labels(**LLAMA_CHOICES)
    assert path.transitions <= MAX_LLAMA_TRANSITIONS, path.describe()
