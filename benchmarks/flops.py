"""Matmul FLOPs counted analytically from our models' modules (the same architecture as their references)."""

from torch import nn

from hf_attention.modeling.attention import MultiHeadAttention


def model_flops(
    model: nn.Module,
    *,
    batch: int,
    source_length: int,
    target_length: int,
    training: bool,
    labelled_fraction: float = 1.0,
) -> float:
    """Matmul FLOPs of one step of one of our models (the same architecture as its reference).

    Formula: every nn.Linear of W = in·out weights costs 2·W FLOPs per token it sees forward (encoder layers see the
    source tokens, decoder layers and the LM head the target tokens; an encoder-only model's are all source tokens),
    and each attention costs 2·2·T_q·T_k·(H·D) forward (QKᵀ and weights·V), halved for causal self-attention (the
    other half is masked out and skipped by the fused kernel). Training = 3 × forward (backward is twice the
    forward); i.e. 6·params·tokens + 12·T_q·T_k·(H·D)·B per attention (÷2 if causal). The LM head's backward needs
    only the rows that carry a label (`labelled_fraction`: 15% under masked LM), so it counts 2·W·tokens forward and
    4·W·tokens·labelled_fraction backward. Embedding lookups, norms, activations and the loss are not counted.
    """
    factor = 3.0 if training else 1.0
    is_seq2seq = getattr(model.config, "is_encoder_decoder", False)
    encoder_only = (
        not is_seq2seq
        and not getattr(model.config, "is_decoder", False)
        and hasattr(getattr(model, "model", model), "encoder")
    )
    total = head = 0.0
    for name, module in model.named_modules():
        in_encoder = ".encoder." in f".{name}." or encoder_only
        tokens = batch * (source_length if in_encoder else target_length)
        if isinstance(module, nn.Linear) and "score" not in name:
            forward = 2.0 * module.in_features * module.out_features * tokens
            if name == "lm_head" and training:  # forward + backward over the labelled rows
                head += forward * (1.0 + 2.0 * labelled_fraction)
            else:
                total += forward
        elif isinstance(module, MultiHeadAttention):
            queries = source_length if in_encoder else target_length
            keys = source_length if (in_encoder or module.is_cross_attention) else target_length
            attention = 2.0 * 2.0 * batch * queries * keys * module.num_heads * module.head_dim
            total += attention / 2.0 if (module.is_causal and not module.is_cross_attention) else attention
    return factor * total + head


def decode_step_flops(model: nn.Module, *, batch: int, context: float, source_length: int = 0) -> float:
    """Matmul FLOPs of one cached decoding step (one new token per sequence) of one of our generative models.

    Every decoder-side nn.Linear costs 2·W per sequence (the LM head included); cross-attention's key and value
    projections are not counted (they are computed once, before the first step, and cached); self-attention costs
    2·2·`context`·(H·D) per sequence (the new query against every cached key), cross-attention the same against the
    `source_length` encoder states. The encoder (run once per generate call) is not counted.
    """
    total = 0.0
    cached_projections = set()
    for name, module in model.named_modules():
        if ".encoder." in f".{name}.":
            continue
        if isinstance(module, MultiHeadAttention):
            keys = source_length if module.is_cross_attention else context
            total += 2.0 * 2.0 * batch * keys * module.num_heads * module.head_dim
            if module.is_cross_attention:
                cached_projections.update({module.k_proj, module.v_proj})
        elif isinstance(module, nn.Linear) and "score" not in name and module not in cached_projections:
            total += 2.0 * module.in_features * module.out_features * batch
    return total
