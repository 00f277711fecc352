"""Attention backends by name: ours, and any function registered with `transformers.AttentionInterface`.

A model's `config._attn_implementation` names the function its attention layers run and, through the mask builder
transformers registers under the same name, the form of mask the stack makes for it. Our own functions are registered
in `ATTENTION_BACKENDS` by attention.py, which defines them, when it is imported (every model imports it, and the
stack reads this table through it); other names resolve through transformers' registries (`get_attention_backend`).

A score cap (`attn_logit_softcapping`, Gemma 2's c·tanh(s / c)) reaches a registered function as the keyword
`softcap=c`, as transformers' Gemma 2 passes it to its attention functions (its eager function and transformers'
flex and paged-eager functions apply it); ours read it from the module. `softcap_refusal` names the backends that
cannot apply one: SDPA computes softmax(q·k) in one kernel and takes no cap. Attention sinks (`attention_sinks`,
GPT-OSS's learned softmax column) reach a registered function likewise as `s_aux=sinks`, as transformers' GPT-OSS
passes them (its flex and flash functions apply them); `sinks_refusal` names the backends that would ignore them:
transformers' SDPA functions (ours, "sdpa", adds them as one more key).
"""

import functools
from collections.abc import Callable
from typing import NamedTuple

from transformers.integrations.sdpa_attention import sdpa_attention_forward as transformers_sdpa
from transformers.masking_utils import (
    ALL_MASK_ATTENTION_FUNCTIONS,
    eager_mask,
    flash_attention_mask,
    flex_attention_mask,
    sdpa_mask,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

try:  # (transformers' SDPA for a paged cache; absent from some releases)
    from transformers.integrations.sdpa_paged import sdpa_attention_paged_forward as transformers_paged_sdpa
except ImportError:  # pragma: no cover - depends on the transformers release
    transformers_paged_sdpa = transformers_sdpa


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
    function = passing_softcap(ALL_ATTENTION_FUNCTIONS[name])
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


def passing_softcap(function: Callable) -> Callable:
    """`function` (one registered with `AttentionInterface`), called with the keyword `softcap=c` when the calling
    module caps its scores (`module.softcap`, from `attn_logit_softcapping`), as transformers' Gemma 2 calls its
    attention functions, and with `s_aux=sinks` when it has attention sinks (`module.sinks`), as transformers' GPT-OSS
    calls them; called exactly as before otherwise. One wrapper per function (cached): a backend looked up
    again is the same function."""
    try:
        return _cached_softcap_wrapper(function)
    except TypeError:  # a callable that cannot be a dict key: a wrapper of its own at each lookup
        return _softcap_wrapper(function)


@functools.cache
def _cached_softcap_wrapper(function: Callable) -> Callable:
    return _softcap_wrapper(function)


def _softcap_wrapper(function: Callable) -> Callable:
    @functools.wraps(function)
    def attend(module, query, key, value, attention_mask, **kwargs):
        softcap = getattr(module, "softcap", None)
        if softcap is not None:
            kwargs.setdefault("softcap", softcap)
        sinks = getattr(module, "sinks", None)
        if sinks is not None:  # GPT-OSS's name for them in transformers' attention functions
            kwargs.setdefault("s_aux", sinks)
        return function(module, query, key, value, attention_mask, **kwargs)

    return attend


# Backends that cannot cap the scores: ours by name, and transformers' SDPA functions registered under any name.
_SDPA_NAMES = ("sdpa", "paged|sdpa", "sdpa_paged")
_SDPA_FUNCTIONS = (transformers_sdpa, transformers_paged_sdpa)


def softcap_refusal(implementation: str, softcap: float | None) -> str | None:
    """Why the backend `implementation` cannot run attention layers whose scores are capped at `softcap` (a config's
    `attn_logit_softcapping`), as a message naming the field, the value, what is allowed and what to do; None when it
    can (or nothing is capped).

    Can: our eager (also under "paged|eager") and flex_attention, which read the module's cap, and a function
    registered with `transformers.AttentionInterface`, which receives it as `softcap=` (`passing_softcap`), as
    transformers' Gemma 2 functions do: applying it is that function's part, as in transformers. Cannot: SDPA (ours, or
    transformers' registered under another name), whose fused kernel computes softmax(q·k) without a cap.
    """
    if softcap is None or not _is_sdpa(implementation):
        return None
    return (
        f"attn_logit_softcapping={softcap} needs attn_implementation='eager', 'flex_attention' or a function "
        f"registered with transformers.AttentionInterface that applies its `softcap` keyword (got "
        f"{implementation!r}): SDPA's fused kernel computes softmax(q·k) itself and cannot cap the scores. Choose "
        "one of those, or set attn_logit_softcapping=None to run without the cap."
    )


def _is_sdpa(implementation: str) -> bool:
    """Whether `implementation` names an SDPA function: ours or transformers' by name, or transformers' registered
    under another name."""
    registered = ALL_ATTENTION_FUNCTIONS.get(implementation) if implementation not in ATTENTION_BACKENDS else None
    return implementation in _SDPA_NAMES or any(registered is function for function in _SDPA_FUNCTIONS)


def sinks_refusal(implementation: str, attention_sinks: bool) -> str | None:
    """Why the backend `implementation` cannot run attention layers with sinks (a config's `attention_sinks`), as a
    message naming the field, the value, what is allowed and what to do; None when it can (or there are none).

    Can: ours ("eager", "paged|eager", "sdpa", "flex_attention"), which read the module's `sinks`, and a function
    registered with `transformers.AttentionInterface`, which receives them as `s_aux=` (`passing_softcap`), as
    transformers' GPT-OSS functions do (its flex and flash functions apply them; applying them is that function's
    part). Cannot: transformers' SDPA functions ("paged|sdpa", or registered under another name), which take no sink
    and would drop it without a word.
    """
    # our backends by name, also before attention.py has registered them (a checkpoint's code checks its config
    # while transformers loads it, before the modeling module is imported)
    ours = ("eager", "paged|eager", "sdpa", "flex_attention")
    if not attention_sinks or implementation in ours or implementation in ATTENTION_BACKENDS:
        return None
    if not _is_sdpa(implementation):
        return None
    return (
        f"attention_sinks=True needs attn_implementation='sdpa', 'eager', 'flex_attention' or a function registered "
        f"with transformers.AttentionInterface that applies its `s_aux` keyword (got {implementation!r}): "
        "transformers' SDPA functions take no sink column. Choose one of those, or set attention_sinks=False."
    )
