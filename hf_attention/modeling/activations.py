"""Activations of the feed-forward network by `hidden_act` name: the one table that the config's validation, the
layers, the converters (from_hf, to_hf) and the LM head's transform all read.

A plain name runs one ACT2FN kernel, FFN(x) = act(x W₁) W₂; a gated name (Shazeer 2020) runs the gated network,
(act(x W_gate) ⊙ x W_up) W_down, with the plain activation it names as the gate. A learned name
(`LEARNED_ACTIVATIONS`: xIELU) runs a module with parameters of its own in the plain network, started from the
config's knobs (`activation_options`). This file imports only torch and transformers' activation table, so the
config (shipped alone with every checkpoint) can validate against it.
"""

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from transformers.activations import ACT2FN

# Plain `hidden_act` → the ACT2FN kernel that runs it. GPT-2's "gelu_new" runs as torch's fused tanh-GELU: both
# compute 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))); HF's "gelu_new" spells it out in six elementwise ops (each a
# pass over the (B, T, F) activations, forward and backward), the fused kernel in one. They agree to float rounding
# (|Δ| ≤ 5e-7 on N(0, 3²) inputs).
PLAIN_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_pytorch_tanh", "silu": "silu"}
# Gated `hidden_act` → the plain activation of its gate ("geglu_new": T5 v1.1's tanh-approximated GELU gate).
GATED_ACTIVATIONS = {"swiglu": "silu", "geglu": "gelu", "geglu_new": "gelu_new"}


class XIELU(nn.Module):
    """xIELU (Huang & Schlag 2024, arXiv:2411.13010; Apertus): a learned activation, quadratic for positive inputs
    and exponential for negative ones, run in the plain network down(xIELU(up(x))),

        xIELU(x) = α_p·x² + β·x                        for x > 0
                   α_n·(expm1(min(x, ε)) − x) + β·x    for x ≤ 0

    with α_p = softplus(a_p) > 0 and α_n = β + softplus(a_n) > β, so that the learned a_p and a_n (the parameters
    `alpha_p`, `alpha_n`, one number each per layer) can take any value. β and ε are fixed: buffers `beta` and `eps`
    saved with the weights, as transformers' XIELUActivation holds them (a checkpoint may hold other values per
    layer); ε < 0 keeps the exponential's argument just below 0. The formula and its order of operations are
    transformers' Python path (its optional CUDA kernel is another implementation).

    Args:
        alpha_p_init: α_p at the start (> 0).
        alpha_n_init: α_n at the start (> beta).
        beta: β, the slope at 0 of both pieces.
        eps: ε, the largest argument of the exponential (≤ 0).
    """

    # The config knob each start value is read from (`activation_options`).
    CONFIG_FIELDS = {
        "alpha_p_init": "xielu_alpha_p_init",
        "alpha_n_init": "xielu_alpha_n_init",
        "beta": "xielu_beta",
        "eps": "xielu_eps",
    }

    def __init__(self, alpha_p_init: float = 0.8, alpha_n_init: float = 0.8, beta: float = 0.5, eps: float = -1e-6):
        super().__init__()
        # softplus⁻¹(a) = log(expm1(a)), computed as transformers computes it (the same start, bit for bit); float()
        # so that a whole number from config.json makes floating-point tensors too
        alpha_p, alpha_n = float(alpha_p_init), float(alpha_n_init - beta)
        self.alpha_p = nn.Parameter(torch.log(torch.expm1(torch.tensor(alpha_p))).unsqueeze(0))
        self.alpha_n = nn.Parameter(torch.log(torch.expm1(torch.tensor(alpha_n))).unsqueeze(0))
        self.register_buffer("beta", torch.tensor(float(beta)))
        self.register_buffer("eps", torch.tensor(float(eps)))

    def forward(self, x: Tensor) -> Tensor:
        """(…) → (…), elementwise."""
        alpha_p = F.softplus(self.alpha_p)
        alpha_n = self.beta + F.softplus(self.alpha_n)
        return torch.where(
            x > 0,
            alpha_p * x * x + self.beta * x,
            (torch.expm1(torch.min(x, self.eps)) - x) * alpha_n + self.beta * x,
        )


# Learned `hidden_act` → the module that runs it, with parameters of its own (plain networks only).
LEARNED_ACTIVATIONS = {"xielu": XIELU}
# Every `hidden_act` the config accepts, plain ones first (the first is its default).
HIDDEN_ACTS = (*PLAIN_ACTIVATIONS, *GATED_ACTIVATIONS, *LEARNED_ACTIVATIONS)
# ACT2FN names of other libraries' configs that are another name for one of ours.
ACTIVATION_SYNONYMS = {"swish": "silu", "gelu_pytorch_tanh": "gelu_new"}


def activation_function(name: str, options: dict | None = None) -> nn.Module:
    """The module running plain activation `name` (any other ACT2FN name runs as ACT2FN has it); a learned one
    (`LEARNED_ACTIVATIONS`) is a new module started from `options` (`activation_options`; None: its defaults)."""
    if name in LEARNED_ACTIVATIONS:
        return LEARNED_ACTIVATIONS[name](**(options or {}))
    return ACT2FN[PLAIN_ACTIVATIONS.get(name, name)]


def activation_options(config) -> dict:
    """The start values of `config.hidden_act`'s learned activation, read from the config's knobs ({} for the
    others): what the builders pass to `activation_function`."""
    learned = LEARNED_ACTIVATIONS.get(config.hidden_act)
    if learned is None:
        return {}
    return {option: getattr(config, field) for option, field in learned.CONFIG_FIELDS.items()}


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
