"""What every head shares, whatever its family: which positions get outputs, and the shape its labels must have.

Notation: B batch, T length.

The family head bases (`EncoderHead`, `DecoderHead`, `Seq2SeqHead`) run their stack and call the head's hooks; these
helpers let each of them check labels before the stack runs, against the positions whose outputs are computed.
"""

from torch import Tensor


def logit_slice(logits_to_keep: int | Tensor) -> slice | Tensor:
    """Positions whose logits are computed: generation needs only the last one (`logits_to_keep=1`)."""
    return slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep


def label_shape(inputs: Tensor | None, rank: int, logits_to_keep: int | Tensor = 0) -> tuple[int, ...] | None:
    """The (batch, length) a head's labels must have: one per position of `inputs` whose logits are computed.

    None when `inputs` is missing or malformed (2-D ids or 3-D embeddings expected): the stack reports that itself.
    """
    if not isinstance(inputs, Tensor) or inputs.dim() != rank:
        return None
    batch, length = inputs.shape[:2]
    kept = logit_slice(logits_to_keep)
    if isinstance(kept, slice):
        return (batch, len(range(length)[kept]))
    return (batch, *kept.shape)
