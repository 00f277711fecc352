"""The checks a configuration runs on each field whenever it is set (in `__init__`, when a config.json is loaded, and
on assignment, as transformers' own configs validate on assignment), and the check of special token ids against the
vocabulary. Each check takes the field's name and value and raises a ValueError that names both and says what is
allowed: a typo in a hand-edited config.json fails on load with the words it would have failed with in Python.

`CheckedFields` is the one `__setattr__` that runs them, for every configuration of the package (each lists its
checks in `_field_checks`). This file is shipped with every checkpoint (remote code): it imports the standard library
only.
"""

import math


def check_choice(field: str, value, allowed: tuple) -> None:
    if value not in allowed:
        raise ValueError(f"{field}={value!r} is not supported; allowed values are {', '.join(map(repr, allowed))}.")


def is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value) -> bool:
    """A finite int or float (not a bool, not a string such as "0.1")."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_positive(field: str, value) -> None:
    if not is_int(value) or value <= 0:
        raise ValueError(f"{field}={value!r} must be a positive integer.")


def check_non_negative(field: str, value) -> None:
    if not is_int(value) or value < 0:
        raise ValueError(f"{field}={value!r} must be an integer >= 0.")


def check_probability(field: str, value) -> None:
    if not is_number(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"{field}={value!r} must be a probability: a number in [0, 1).")


def check_greater_than_zero(field: str, value) -> None:
    if not is_number(value) or value <= 0:
        raise ValueError(f"{field}={value!r} must be a finite number > 0.")


def check_at_least_zero(field: str, value) -> None:
    if not is_number(value) or value < 0:
        raise ValueError(f"{field}={value!r} must be a finite number >= 0.")


def check_at_most_zero(field: str, value) -> None:
    if not is_number(value) or value > 0:
        raise ValueError(f"{field}={value!r} must be a finite number <= 0.")


def check_bool(field: str, value) -> None:
    if not isinstance(value, bool):
        raise ValueError(
            f"{field}={value!r} must be True or False (a boolean: true or false in config.json), "
            f"not a {type(value).__name__}."
        )


def check_optional_bool(field: str, value) -> None:
    if value is not None and not isinstance(value, bool):
        raise ValueError(
            f"{field}={value!r} must be True, False or None (true, false or null in config.json), "
            f"not a {type(value).__name__}."
        )


def check_fraction(field: str, value) -> None:
    if not is_number(value) or not 0.0 < value <= 1.0:
        raise ValueError(f"{field}={value!r} must be a number in (0, 1].")


def check_options(field: str, value) -> None:
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        raise ValueError(f"{field}={value!r} must be a dict of named options (a JSON object).")


def check_layer_indices(field: str, value) -> None:
    if not isinstance(value, (list, tuple)) or not all(is_int(index) and index >= 0 for index in value):
        raise ValueError(f"{field}={value!r} must be a list of layer indices (integers >= 0).")
    # A layer is in the set or not: a repeated index is a typo (an index meant for another layer, say) to name.
    repeated = sorted({index for index in value if list(value).count(index) > 1})
    if repeated:
        raise ValueError(
            f"{field}={value!r} names layer{'s' if len(repeated) > 1 else ''} {', '.join(map(str, repeated))} more "
            "than once; give each layer index once (a list of distinct integers >= 0)."
        )


def optional(check):
    def check_unless_none(field: str, value) -> None:
        if value is not None:
            check(field, value)

    return check_unless_none


def check_token_id_type(field: str, value) -> None:
    ids = value if field == "eos_token_id" and isinstance(value, (list, tuple)) else [value]
    if value is not None and not all(is_int(token) for token in ids):
        allowed = (
            "None, an integer token id or a list of them"
            if field == "eos_token_id"
            else ("None or an integer token id")
        )
        raise ValueError(f"{field}={value!r} must be {allowed}.")


TOKEN_ID_FIELDS = (
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "decoder_start_token_id",
    "cls_token_id",
    "sep_token_id",
)


def id_outside_vocabulary(ids, vocab_size: int) -> int | None:
    """An id of `ids` outside the vocabulary [0, vocab_size): the largest if one is too large, else the smallest;
    None when all are inside.

    Args:
        ids: A tensor of token ids (its min and max: a device sync off the CPU), or a sequence of ints (None entries,
            unset ids, are skipped).
        vocab_size: The vocabulary's size.
    """
    if hasattr(ids, "numel"):  # a tensor (this module does not import torch)
        if not ids.numel():
            return None
        low, high = int(ids.min()), int(ids.max())
    else:
        known = [token for token in ids if token is not None]
        if not known:
            return None
        low, high = min(known), max(known)
    if high >= vocab_size:
        return high
    return low if low < 0 else None


def check_token_ids(config) -> None:
    """Special token ids must be None or in [0, vocab_size): each one is embedded or compared with the logits."""
    for field in TOKEN_ID_FIELDS:
        value = getattr(config, field, None)
        ids = value if isinstance(value, (list, tuple)) else [value]
        if id_outside_vocabulary(ids, config.vocab_size) is not None:
            raise ValueError(
                f"{field}={value!r} is outside the vocabulary: token ids must be None or in "
                f"[0, vocab_size={config.vocab_size})."
            )


class CheckedFields:
    """Runs the class's `_field_checks[name]` on every assignment of a field that has one (a mixin for the configs:
    put it before `PretrainedConfig` among the bases)."""

    _field_checks: dict = {}

    def __setattr__(self, key, value):
        check = self._field_checks.get(key)
        if check is not None:
            check(key, value)
        super().__setattr__(key, value)
