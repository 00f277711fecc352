"""The KV cache argument under its two names: `cache` (transformers ≥ 5.24) and `past_key_values` (before).

transformers 5.24 renamed the cache that `generate()` passes to `forward` and that model outputs carry from
`past_key_values` to `cache`. The code of a checkpoint runs on whatever release its user has installed, so the models
take the cache under either name and return it under the name of the installed release, as transformers' own models
do on each release:

- `forward(..., cache=...)` is the argument; `past_key_values=` is still accepted (on ≥ 5.24 with the same
  `FutureWarning` as transformers' models, through Python's `warnings`, so `-W error::FutureWarning` and
  `warnings.catch_warnings` see it; on 5.23 the old name is the name and nothing is said); passing two different
  caches, to `forward` or to `generate()`, is an error.
- outputs are built with the field the installed output classes declare (`CACHE_FIELD`), so `generate()` finds the
  cache for the next step on either release, without the renaming warning of ≥ 5.24.

Continuous batching (`generate_batch`, `transformers serve`) hands the model a `PagedAttentionCache`, which is not a
`Cache`: its `update` also needs the batch layout the scheduler passes as keyword arguments (`is_paged`).
"""

import warnings
from dataclasses import fields

import torch
from transformers.cache_utils import Cache
from transformers.modeling_outputs import BaseModelOutputWithPast

try:  # present in every release we support; guarded so that a future move only disables continuous batching
    from transformers.generation.continuous_batching.cache import PagedAttentionCache
except ImportError:  # pragma: no cover
    PagedAttentionCache = None


# The name under which this release's model outputs (and generate()) carry the cache.
CACHE_FIELD = "cache" if "cache" in {field.name for field in fields(BaseModelOutputWithPast)} else "past_key_values"
RENAMED = CACHE_FIELD == "cache"


def cache_from_arguments(cache, past_key_values):
    """The cache a forward was given, under either name; ValueError when both names carry one, TypeError when it is
    not a cache object."""
    if past_key_values is None:
        return _checked(cache, "cache")
    check_one_cache(cache, past_key_values)
    if RENAMED and not torch.compiler.is_compiling():  # (a warning inside a compiled graph would break it)
        # As transformers' `deprecate_kwarg` warns for its own models: a FutureWarning (DeprecationWarning is hidden
        # by default), shown once per calling line under Python's default filter.
        warnings.warn(
            "`past_key_values` is deprecated since transformers 5.24 for hf-attention models; use `cache` instead.",
            FutureWarning,
            stacklevel=2,
        )
    return _checked(past_key_values, "past_key_values")


def check_one_cache(cache, past_key_values) -> None:
    """ValueError when `cache` and `past_key_values` carry two different objects: one of them would be ignored."""
    if cache is not None and past_key_values is not None and cache is not past_key_values:
        raise ValueError(
            "Both `cache` and `past_key_values` were passed: they are two names of the same argument "
            "(transformers 5.24 renamed past_key_values to cache); pass the cache once, as `cache`."
        )


def _checked(cache, name: str):
    """`cache` if it is None, a transformers Cache or continuous batching's paged cache; else a TypeError."""
    if cache is None or isinstance(cache, Cache) or is_paged(cache):
        return cache
    legacy = (
        " (tuples of key/value tensors are not supported since transformers 5)" if isinstance(cache, tuple) else ""
    )
    raise TypeError(
        f"{name} must be a transformers Cache (DynamicCache, EncoderDecoderCache, StaticCache), got "
        f"{type(cache).__name__}{legacy}."
    )


def with_cache(output_class: type, cache, **values):
    """`output_class(**values)` with the cache under this release's field name."""
    return output_class(**values, **{CACHE_FIELD: cache})


def cache_of(output):
    """The cache an output carries (None when it has none), on every release."""
    return getattr(output, CACHE_FIELD, None)


def is_paged(cache) -> bool:
    """Whether `cache` is continuous batching's paged cache (one sequence of all requests' tokens, no batch axis)."""
    return PagedAttentionCache is not None and isinstance(cache, PagedAttentionCache)
