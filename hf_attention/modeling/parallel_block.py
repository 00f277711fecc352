"""The parallel block: attention and the feed-forward network side by side, `parallel_block=True`.

Notation: B batch, T new tokens, E model dim.

A sequential pre-norm layer computes h = x + Attn(Norm₁(x)), then h + MLP(Norm₂(h)): the feed-forward network reads
what attention wrote. The parallel block reads one norm of the layer's input in both sublayers and adds both outputs
to the residual stream at once, x + Attn(Norm(x)) + MLP(Norm(x)), with one norm per layer (GPT-J, Wang & Komatsuzaki
2021; PaLM, Chowdhery et al. 2022 §2 "Parallel Layers"; Cohere's Command R and Command A). Both sublayers' input
projections then read the same tensor, and the layer is one step deep instead of two. The layer plan gives this layer
to every layer of a decoder whose config sets the knob (layer_plan.py); its token mixer and feed-forward network are
the plan's as for any layer.
"""

from torch import Tensor

from .layers import DecoderLayer


class ParallelDecoderLayer(DecoderLayer):
    """x + Attn(Norm(x)) + MLP(Norm(x)): `self_attn_norm` is the layer's one norm, read by both sublayers (`mlp_norm`
    is None). Each output joins the residual as in a pre-norm layer (`add_residual`: residual dropout, a residual
    multiplier), attention's first, in transformers' Cohere order (x + attn) + mlp. A decoder-only layer: no
    cross-attention.

    Args:
        **kwargs: As `DecoderLayer`.
    """

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
    ) -> tuple[Tensor, Tensor | None, None]:
        """(B, T, E) → (B, T, E), the self-attention weights (eager backend) or None, and None (no cross-attention).

        Arguments as in `DecoderLayer.forward`; the encoder's are accepted (the stack passes them to every decoder
        layer) and are None in a decoder-only model."""
        normed = self.self_attn_norm(hidden_states)
        attended, weights = self.self_attn(
            normed,
            position_bias=position_bias,
            attention_mask=attention_mask,
            position_embeddings=position_embeddings,
            **kwargs,
        )
        hidden_states = self.add_residual(hidden_states, attended, self.self_attn_norm, None)
        return self.add_residual(hidden_states, self.mlp(normed), self.self_attn_norm, None), weights, None
