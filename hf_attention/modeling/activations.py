"""Activations of the feed-forward network by `hidden_act` name: the one table that the config's validation, the
layers, the converters (from_hf, to_hf) and the LM head's transform all read.

A plain name runs one ACT2FN kernel, FFN(x) = act(x W₁) W₂; a gated name (Shazeer 2020) runs the gated network,
(act(x W_gate) ⊙ x W_up) W_down, with the plain activation it names as the gate. This file imports only
transformers' activation table, so the config (shipped alone with every checkpoint) can validate against it.
"""

from torch import nn
from transformers.activations import ACT2FN

# Plain `hidden_act` → the ACT2FN kernel that runs it. GPT-2's "gelu_new" runs as torch's fused tanh-GELU: both
# compute 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))); HF's "gelu_new" spells it out in six elementwise ops (each a
# pass over the (B, T, F) activations, forward and backward), the fused kernel in one. They agree to float rounding
# (|Δ| ≤ 5e-7 on N(0, 3²) inputs).
PLAIN_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_pytorch_tanh", "silu": "silu"}
# Gated `hidden_act` → the plain activation of its gate ("geglu_new": T5 v1.1's tanh-approximated GELU gate).
GATED_ACTIVATIONS = {"swiglu": "silu", "geglu": "gelu", "geglu_new": "gelu_new"}
# Every `hidden_act` the config accepts, plain ones first (the first is its default).
HIDDEN_ACTS = (*PLAIN_ACTIVATIONS, *GATED_ACTIVATIONS)
# ACT2FN names of other libraries' configs that are another name for one of ours.
ACTIVATION_SYNONYMS = {"swish": "silu", "gelu_pytorch_tanh": "gelu_new"}


def activation_function(name: str) -> nn.Module:
    """The module running plain activation `name` (any other ACT2FN name runs as ACT2FN has it)."""
    return ACT2FN[PLAIN_ACTIVATIONS.get(name, name)]


def gate_activation(hidden_act: str) -> str:
    """The plain activation of `hidden_act`: its gate's if it is gated, else itself."""
    return GATED_ACTIVATIONS.get(hidden_act, hidden_act)


def hidden_act_of(act2fn_name: str, *, gated: bool) -> str | None:
    """Our `hidden_act` for another model's ACT2FN name (the gate's, when its network is `gated`), or None."""
    plain = ACTIVATION_SYNONYMS.get(act2fn_name, act2fn_name)
    if plain not in PLAIN_ACTIVATIONS:
        return None
    if not gated:
        return plain
    return next((name for name, gate in GATED_ACTIVATIONS.items() if gate == plain), None)
