"""Attention backends by name: ours, and any function registered with `transformers.AttentionInterface`.

A model's `config._attn_implementation` names the function its attention layers run and, through the mask builder
transformers registers under the same name, the form of mask the stack makes for it. Our own functions are registered
in `ATTENTION_BACKENDS` by attention.py, which defines them, when it is imported (every model imports it, and the
stack reads this table through it); other names resolve through transformers' registries (`get_attention_backend`).
"""

from collections.abc import Callable
from typing import NamedTuple

from transformers.masking_utils import (
    ALL_MASK_ATTENTION_FUNCTIONS,
    eager_mask,
    flash_attention_mask,
    flex_attention_mask,
    sdpa_mask,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS


class AttentionBackend(NamedTuple):
    """An attention function and the form of mask it takes.

    mask_format: "bool" ((B|1, 1, T, S), True = attend), "additive" (0 where allowed, the dtype's minimum elsewhere),
        "block" (a FlexAttention BlockMask), or None (the function gets no mask: it attends to everything it is
        given, as a serving stack's own attention does).
    implicit_causal: The function applies a causal stack's mask itself when nothing else restricts the keys (it
        reads `module.is_causal`, as SDPA's causal flag), so the stack may pass no mask then.
    """

    function: Callable
    mask_format: str | None
    implicit_causal: bool = False


# Our backends by name ("eager", "sdpa", "flex_attention"), registered by attention.py, which defines them.
ATTENTION_BACKENDS: dict[str, AttentionBackend] = {}

# The mask builders transformers registers in its AttentionMaskInterface, by the form of mask they make: a function
# registered with one of them gets its masks from the stack in that form, as it would from transformers' models.
_MASK_FORMATS = ((sdpa_mask, "bool", True), (eager_mask, "additive", False), (flex_attention_mask, "block", False))


def get_attention_backend(name: str) -> AttentionBackend:
    """The backend for an `attn_implementation` name: ours, or a function registered with
    `transformers.AttentionInterface.register(name, fn)`, whose mask form follows the mask builder registered under
    the same name with `transformers.AttentionMaskInterface` (none registered: no mask, as in transformers)."""
    if name in ATTENTION_BACKENDS:
        return ATTENTION_BACKENDS[name]
    if name not in ALL_ATTENTION_FUNCTIONS:
        raise ValueError(
            f"attn_implementation={name!r} is not available; use 'eager', 'sdpa', 'flex_attention' or a name "
            "registered with transformers.AttentionInterface.register()."
        )
    function = ALL_ATTENTION_FUNCTIONS[name]
    if name not in ALL_MASK_ATTENTION_FUNCTIONS:
        return AttentionBackend(function, None)
    builder = ALL_MASK_ATTENTION_FUNCTIONS[name]
    for known, mask_format, implicit_causal in _MASK_FORMATS:
        if builder is known:
            return AttentionBackend(function, mask_format, implicit_causal)
    if builder is flash_attention_mask:
        raise ValueError(
            f"attn_implementation={name!r} takes flash attention's masks; hf-attention models add position biases "
            "and custom scores that flash kernels cannot take: use 'sdpa', 'eager' or 'flex_attention'."
        )
    return AttentionBackend(function, "bool")  # a mask builder of the user's own: our boolean masks


def get_attention_function(name: str) -> Callable:
    """Backend function for an `attn_implementation` name."""
    return get_attention_backend(name).function
