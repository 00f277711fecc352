"""The position-wise feed-forward network, the LM head's transform, and the encoder and decoder layers.

Notation: B batch, T target length, S source length, E model dim, F feed-forward dim.

A layer is attention and a feed-forward network, each wrapped in a residual connection with a norm. "post" puts the
norm after the residual add, LayerNorm(x + Sublayer(x)) (Add & Norm, Vaswani 2017 §5.4); "pre" puts it before the
sublayer, x + Sublayer(Norm(x)) (GPT-2, Llama), which trains deep stacks without warm-up tricks (Xiong et al. 2020);
"sandwich" adds a second norm on the sublayer's output, x + Norm'(Sublayer(Norm(x))) (Gemma 2/3); "output" keeps only
that one, x + Norm(Sublayer(x)) (OLMo 2): the residual stream itself is never normalised, only what joins it.
Layers receive their submodules ready-made; they never see a config. Norms and activations are named in the tables
of norms.py and activations.py.
"""

import torch
from torch import Tensor, nn
from transformers.modeling_layers import GradientCheckpointingLayer

from .activations import GATED_ACTIVATIONS, activation_function
from .attention import MultiHeadAttention
from .compiled_regions import ElementwiseRegion
from .speed_paths import gated_product_for_training


def maybe_dropout(module: nn.Dropout, x: Tensor) -> Tensor:
    """`module(x)`, skipped when it would return x unchanged (p = 0 or eval mode): a module call per sub-layer is a
    measurable share of a one-token decoding step."""
    return module(x) if module.training and module.p > 0 else x


class FeedForward(nn.Module):
    """Position-wise feed-forward network FFN(x) = act(x W₁ + b₁) W₂ + b₂ (Vaswani 2017 §3.3).

    Args:
        hidden_size: E.
        intermediate_size: F.
        activation: A plain activation of `activations.PLAIN_ACTIVATIONS` ("relu", "gelu", "gelu_new", "silu"), or a
            learned one of `activations.LEARNED_ACTIVATIONS` ("xielu": Apertus's down(xIELU(up(x)))).
        bias: Biases on both projections.
        dropout: Dropout after the activation.
        activation_options: A learned activation's start values (`activations.activation_options`).
    """

    def __init__(
        self,
        *,
        hidden_size: int,
        intermediate_size: int,
        activation: str,
        bias: bool = True,
        dropout: float = 0.0,
        activation_options: dict | None = None,
    ):
        super().__init__()
        self.fc1 = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.act = activation_function(activation, activation_options)
        self.dropout = nn.Dropout(dropout)
        self.fc2 = nn.Linear(intermediate_size, hidden_size, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, E) → (B, T, E)."""
        return self.fc2(maybe_dropout(self.dropout, self.act(self.fc1(x))))


def _gated_product(gate: Tensor, up: Tensor, activation: nn.Module) -> Tensor:
    """act(gate) ⊙ up, the gated linear unit."""
    return activation(gate) * up


# Fused into one kernel forward and one backward while training on a GPU (see compiled_regions.py).
gated_product_region = ElementwiseRegion(_gated_product)


class GatedFeedForward(nn.Module):
    """Gated linear unit FFN (Shazeer 2020): (act(x W_gate) ⊙ x W_up) W_down; SwiGLU with SiLU, GEGLU with GELU.

    Args:
        hidden_size: E.
        intermediate_size: F.
        activation: Gate activation name in ACT2FN ("silu" for SwiGLU, "gelu" for GEGLU).
        bias: Biases on the three projections.
        dropout: Dropout on the gated product.
    """

    def __init__(
        self, *, hidden_size: int, intermediate_size: int, activation: str, bias: bool = False, dropout: float = 0.0
    ):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=bias)
        self.act = activation_function(activation)
        self.dropout = nn.Dropout(dropout)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, E) → (B, T, E)."""
        if self.training and torch.is_grad_enabled():  # a training step's speed paths (speed_paths.py)
            gated = gated_product_for_training(self, x, gated_product_region)
        else:
            gated = _gated_product(self.gate_proj(x), self.up_proj(x), self.act)
        return self.down_proj(maybe_dropout(self.dropout, gated))


def make_feed_forward(
    hidden_act: str,
    *,
    hidden_size: int,
    intermediate_size: int,
    bias: bool,
    dropout: float,
    activation_options: dict | None = None,
) -> nn.Module:
    """FeedForward, or GatedFeedForward for a gated `hidden_act` (`activations.GATED_ACTIVATIONS`);
    `activation_options`: a learned activation's start values."""
    if hidden_act in GATED_ACTIVATIONS:
        return GatedFeedForward(
            hidden_size=hidden_size,
            intermediate_size=intermediate_size,
            activation=GATED_ACTIVATIONS[hidden_act],
            bias=bias,
            dropout=dropout,
        )
    return FeedForward(
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        activation=hidden_act,
        bias=bias,
        dropout=dropout,
        activation_options=activation_options,
    )


class HeadTransform(nn.Module):
    """Dense → activation → norm on the last hidden state before the vocabulary projection (BERT's MLM head).

    Args:
        hidden_size: E.
        activation: Name in `transformers.activations.ACT2FN`, or a learned activation's (its own parameters).
        norm: The norm applied last.
        bias: A bias on the dense layer (ModernBERT's has none).
        activation_options: A learned activation's start values (`activations.activation_options`).
    """

    def __init__(
        self,
        *,
        hidden_size: int,
        activation: str,
        norm: nn.Module,
        bias: bool = True,
        activation_options: dict | None = None,
    ):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size, bias=bias)
        self.act = activation_function(activation, activation_options)
        self.norm = norm

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, E) → (B, T, E)."""
        return self.norm(self.act(self.dense(x)))


class EncoderLayer(GradientCheckpointingLayer):
    """Self-attention then feed-forward, each in a residual block with a norm (pre or post).

    Args:
        self_attn: The self-attention module.
        mlp: The feed-forward module.
        self_attn_norm: Norm of the attention block (nn.Identity where the input is normalised already).
        mlp_norm: Norm of the feed-forward block.
        norm_position: "post" (Add & Norm), "pre", "sandwich" or "output" (see the module docstring).
        dropout: Residual dropout on each sublayer output.
        self_attn_output_norm, mlp_output_norm: The norms on the sublayers' outputs of "sandwich" (None otherwise).
        residual_multiplier: Each sublayer's output times this before the residual add (µP; Granite).
    """

    def __init__(
        self,
        *,
        self_attn: MultiHeadAttention,
        mlp: nn.Module,
        self_attn_norm: nn.Module,
        mlp_norm: nn.Module,
        norm_position: str,
        dropout: float = 0.0,
        self_attn_output_norm: nn.Module | None = None,
        mlp_output_norm: nn.Module | None = None,
        residual_multiplier: float = 1.0,
    ):
        super().__init__()
        self.self_attn = self_attn
        self.self_attn_norm = self_attn_norm
        self.self_attn_output_norm = self_attn_output_norm
        self.mlp = mlp
        self.mlp_norm = mlp_norm
        self.mlp_output_norm = mlp_output_norm
        self.norm_position = norm_position
        self.pre_norm = norm_position == "pre"  # the two placements of the 2017 paper and GPT-2 (tutorial 07)
        self.norm_input = norm_position in ("pre", "sandwich")  # the sublayer reads Norm(x)
        self.dropout = nn.Dropout(dropout)
        self.residual_multiplier = residual_multiplier

    def forward(
        self, hidden_states: Tensor, position_bias: Tensor | None = None, **kwargs
    ) -> tuple[Tensor, Tensor | None]:
        """(B, T, E) → (B, T, E) and the self-attention weights (eager backend) or None.

        The inputs that may need gradients (the hidden states, a learned relative position bias) come positionally:
        reentrant activation checkpointing (`use_reentrant=True`) recomputes the layer from its positional arguments
        only, so a tensor with gradients passed by keyword would be backpropagated through twice. Keyword arguments
        (the mask, rotary tables, cache, ...) go to the self-attention module.
        """
        hidden_states, weights = self.attend_to_self(hidden_states, position_bias, **kwargs)
        return self.feed_forward(hidden_states), weights

    def attend_to_self(
        self, hidden_states: Tensor, position_bias: Tensor | None = None, **kwargs
    ) -> tuple[Tensor, Tensor | None]:
        """The self-attention block of encoder and decoder layers: x + dropout(attn(norm(x))) with pre-norm,
        norm(x + dropout(attn(x))) with post-norm (`add_residual` for the others). Returns the new states and the
        attention weights (or None)."""
        inputs = self.self_attn_norm(hidden_states) if self.norm_input else hidden_states
        output, weights = self.self_attn(inputs, position_bias=position_bias, **kwargs)
        return self.add_residual(hidden_states, output, self.self_attn_norm, self.self_attn_output_norm), weights

    def feed_forward(self, hidden_states: Tensor) -> Tensor:
        """The feed-forward block: x + dropout(mlp(norm(x))) with pre-norm, norm(x + dropout(mlp(x))) with
        post-norm (`add_residual` for the others)."""
        inputs = self.mlp_norm(hidden_states) if self.norm_input else hidden_states
        return self.add_residual(hidden_states, self.mlp(inputs), self.mlp_norm, self.mlp_output_norm)

    def add_residual(self, residual: Tensor, output: Tensor, norm: nn.Module, output_norm: nn.Module | None) -> Tensor:
        """A sublayer's output joins the residual stream: norm(x + dropout(out)) with post-norm; x + dropout(out)
        with pre-norm; the output normalised first with "sandwich" (its second norm) and "output" (its only one).
        A `residual_multiplier` m joins m·out, after its output norm (µP, Yang et al. 2022: Granite's x + m·out)."""
        if output_norm is not None:
            output = output_norm(output)
        elif self.norm_position == "output":
            output = norm(output)
        if self.residual_multiplier != 1.0:
            output = output * self.residual_multiplier
        if self.norm_position == "post":
            return norm(residual + maybe_dropout(self.dropout, output))
        return residual + maybe_dropout(self.dropout, output)


class DecoderLayer(EncoderLayer):
    """Masked self-attention, then cross-attention to the encoder output (when there is one), then feed-forward.

    Args:
        cross_attn: Cross-attention module, or None for a decoder-only model.
        cross_attn_norm: Its norm (None with no cross-attention).
        **kwargs: As `EncoderLayer`.
    """

    def __init__(
        self,
        *,
        cross_attn: MultiHeadAttention | None = None,
        cross_attn_norm: nn.Module | None = None,
        cross_attn_output_norm: nn.Module | None = None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.cross_attn = cross_attn
        self.cross_attn_norm = cross_attn_norm
        self.cross_attn_output_norm = cross_attn_output_norm

    def forward(
        self,
        hidden_states: Tensor,
        position_bias: Tensor | None = None,
        encoder_hidden_states: Tensor | None = None,
        *,
        attention_mask: Tensor | None = None,
        encoder_attention_mask: Tensor | None = None,
        position_embeddings: tuple[Tensor, Tensor] | None = None,
        **kwargs,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """(B, T, E) → (B, T, E), self-attention weights and cross-attention weights (eager backend) or None.

        Positional inputs as in `EncoderLayer.forward`, with the encoder output (which has gradients when the encoder
        trains) among them. The masks and rotary tables go to the attention module they are for, the other keyword
        arguments (the cache, ...) to both."""
        hidden_states, self_weights = self.attend_to_self(
            hidden_states,
            position_bias,
            attention_mask=attention_mask,
            position_embeddings=position_embeddings,
            **kwargs,
        )
        cross_weights = None
        if self.cross_attn is not None and encoder_hidden_states is not None:
            hidden_states, cross_weights = self.attend_to_encoder(
                hidden_states, encoder_hidden_states, attention_mask=encoder_attention_mask, **kwargs
            )
        return self.feed_forward(hidden_states), self_weights, cross_weights

    def attend_to_encoder(
        self, hidden_states: Tensor, encoder_hidden_states: Tensor, **kwargs
    ) -> tuple[Tensor, Tensor | None]:
        """The cross-attention block, with its norms placed as in `attend_to_self`: queries from the decoder, keys
        and values from the encoder output (`attention_mask` is the mask over it)."""
        inputs = self.cross_attn_norm(hidden_states) if self.norm_input else hidden_states
        output, weights = self.cross_attn(inputs, key_value_states=encoder_hidden_states, **kwargs)
        return self.add_residual(hidden_states, output, self.cross_attn_norm, self.cross_attn_output_norm), weights
