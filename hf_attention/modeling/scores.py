"""Attention scores: how well a query matches a key, before the softmax. The `SCORES` registry of them by name.

Notation: B batch, H heads, T query length, S key length, D head dim.

The classic variants of attention differ in this function only: scaled dot product q·k/√D (Vaswani 2017), plain dot
product (T5), additive wᵀtanh(W_q q + W_k k) (Bahdanau 2015), or a Gaussian kernel −‖q − k‖²/(2σ²) (Nadaraya–Watson
regression). Each registered class says what the rest of the library needs to know about it:
- `dot_product`: the score is q·k times `scaling(head_dim)`. No module is built; the attention backends multiply q and
  k themselves, so fused kernels such as SDPA can run it. Any other score needs the eager backend.
- `build(num_heads=, head_dim=)`: the module the backends call as `score(query, key)` (None for dot products);
- `init_weights(std)`: the initial values of the module's own parameters (the models' `_init_weights` calls it).

The config validates `attention_score` against `SCORES`, so this file imports only torch (which transformers loads
anyway) and transformers' init functions: nothing heavy, since the config file loads it.
"""

import math

import torch
from torch import Tensor, nn
from transformers import initialization as init


class DotProductScore:
    """Plain q·k (T5, whose initialisation absorbs the 1/√D): no module, the backend multiplies q and k."""

    dot_product = True

    @staticmethod
    def scaling(head_dim: int) -> float:
        """The factor on q·k."""
        return 1.0

    @classmethod
    def build(cls, *, num_heads: int, head_dim: int) -> None:
        """No module: the backends compute the dot product (and SDPA fuses it with the softmax)."""
        return None


class ScaledDotProductScore(DotProductScore):
    """q·k/√D (Vaswani 2017 §3.2.1): the scale keeps the logits' variance near 1 whatever the head width."""

    @staticmethod
    def scaling(head_dim: int) -> float:
        return head_dim**-0.5


class ScoreModule(nn.Module):
    """Base of the scores that are not a dot product: `forward(query, key)` returns the scores themselves.

    query (B, H, T, D), key (B, H, S, D) → scores (B, H, T, S). Only the eager backend can call such a module.
    """

    dot_product = False

    @staticmethod
    def scaling(head_dim: int) -> float:
        """1: the module's output is the score (the backends pass it on as `scaling` and never apply it here)."""
        return 1.0

    @classmethod
    def build(cls, *, num_heads: int, head_dim: int) -> "ScoreModule":
        """The module for an attention layer of `num_heads` heads of width `head_dim`."""
        raise NotImplementedError(f"{cls.__name__} must say how it is built from the heads' shape.")

    def init_weights(self, std: float) -> None:
        """Initial values of the parameters this module holds directly; nn.Linear children are initialised by the
        models' `_init_weights` (normal(0, std)) like every other linear layer."""


class AdditiveScore(ScoreModule):
    """Bahdanau's additive score: score(q, k) = wᵀ tanh(W_q q + W_k k), one small MLP shared by all heads.

    Args:
        head_dim: D, the width of q and k.
        attention_dim: Width A of the hidden tanh layer (default D).
    """

    def __init__(self, *, head_dim: int, attention_dim: int | None = None):
        super().__init__()
        attention_dim = attention_dim or head_dim
        self.query_proj = nn.Linear(head_dim, attention_dim, bias=False)
        self.key_proj = nn.Linear(head_dim, attention_dim, bias=False)
        self.energy = nn.Linear(attention_dim, 1, bias=False)

    @classmethod
    def build(cls, *, num_heads: int, head_dim: int) -> "AdditiveScore":
        return cls(head_dim=head_dim)

    def forward(self, query: Tensor, key: Tensor) -> Tensor:
        """(B, H, T, D), (B, H, S, D) → (B, H, T, S). Memory grows as T·S·A: a teaching variant for short inputs."""
        hidden = torch.tanh(self.query_proj(query)[:, :, :, None] + self.key_proj(key)[:, :, None])  # (B, H, T, S, A)
        return self.energy(hidden).squeeze(-1)  # (B, H, T, S)


class GaussianScore(ScoreModule):
    """Gaussian-kernel score of Nadaraya–Watson regression: score(q, k) = −‖q − k‖² / (2σ_h²), σ_h learned per head.

    Expanded as 2q·k − ‖q‖² − ‖k‖² so that it costs one matmul, like the dot product.

    Args:
        num_heads: H (one width per head).
        head_dim: D; σ² starts at √D so initial scores have the scale of the scaled dot product.
    """

    def __init__(self, *, num_heads: int, head_dim: int):
        super().__init__()
        self.head_dim = head_dim
        self.log_width = nn.Parameter(torch.empty(num_heads))  # log σ²
        self.reset_parameters()

    @classmethod
    def build(cls, *, num_heads: int, head_dim: int) -> "GaussianScore":
        return cls(num_heads=num_heads, head_dim=head_dim)

    def reset_parameters(self) -> None:
        """σ² = √D for every head (a fixed start, not drawn from the models' initializer_range)."""
        # transformers' init functions leave a value loaded from a checkpoint alone (`_is_hf_initialized`)
        init.constant_(self.log_width, 0.5 * math.log(self.head_dim))

    def init_weights(self, std: float) -> None:
        self.reset_parameters()

    def forward(self, query: Tensor, key: Tensor) -> Tensor:
        """(B, H, T, D), (B, H, S, D) → (B, H, T, S)."""
        squared_distance = (
            query.square().sum(-1, keepdim=True)  # (B, H, T, 1)
            + key.square().sum(-1)[:, :, None]  # (B, H, 1, S)
            - 2 * torch.matmul(query, key.transpose(-1, -2))  # (B, H, T, S)
        )
        variance = self.log_width.exp().to(query.dtype)[None, :, None, None]
        return -squared_distance / (2 * variance)


# name → score class; the config accepts exactly these names (the first is its default). Adding a score = one class
# here (a dot product, or a ScoreModule) + one entry.
SCORES: dict[str, type[DotProductScore] | type[ScoreModule]] = {
    "scaled_dot": ScaledDotProductScore,
    "dot": DotProductScore,
    "additive": AdditiveScore,
    "gaussian": GaussianScore,
}


def dot_product_scores() -> tuple[str, ...]:
    """The registered scores that fused kernels such as SDPA can compute (q·k times a factor)."""
    return tuple(name for name, score in SCORES.items() if score.dot_product)


def make_score(name: str, *, num_heads: int, head_dim: int) -> tuple[nn.Module | None, float]:
    """Score module and scale for a registered name; dot-product scores need no module (the backends do the matmul)."""
    if name not in SCORES:
        raise ValueError(
            f"attention_score={name!r} is not supported; allowed values are {', '.join(map(repr, SCORES))}."
        )
    score = SCORES[name]
    return score.build(num_heads=num_heads, head_dim=head_dim), score.scaling(head_dim)
