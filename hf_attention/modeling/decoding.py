"""`DecodingState`: what a module keeps for one `generate()` call, made when the call starts, seen only by that call,
and dropped when it ends.

The decoding speed-ups are states of the modules they change: `MultiHeadAttention.stack_projections()` (q, k and v
from one stacked product on one-token steps), `MultiHeadAttention.pin_backend()` (the attention backend looked up
once) and `TransformerPreTrainedModel.block_vocabulary_projection()` (the LM head of a few rows in cache-sized
blocks). `generate()` switches them on for its call and off when it returns (generation_mixin.py); each holds its
value in a `DecodingState`.

A value belongs to the call that made it, never to the module at large: the module's code reads the value of the
innermost call running in its own thread. So a call that starts while another is in flight makes its own value from
the weights and the backend of that moment, a forward() run meanwhile in another thread reads none (the plain path),
and a nested call (a generate() inside a generate() callback) has its own until it returns, when the outer call's
comes back. No call reads a value made before it started, so whatever changed before then, between calls or while
another call ran, is seen: an in-place weight update (an optimizer step, `load_state_dict`, `param.data.copy_`, a
merged LoRA adapter) or `set_attn_implementation`. A copy of weights is also checked, at each use, against the
version counters of the weights it copied, so that an in-place update during its own call is seen by that call's
later steps, provided autograd sees it (an update through `param.data` bypasses the counters: it is seen from the
next call on; see `speed_paths.StackedProjections`).

This module is inside the remote-code closure: it imports only the standard library.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class DecodingState(Generic[T]):
    """The value of each generation in progress, per thread: `enter` makes one and makes it the thread's `value`,
    the matching `leave` drops it and brings back the value of the call it was nested in (None outside calls).

    A thread-local holds the values (torch.compile reads it as a plain attribute and guards on it). `users` counts
    the calls in progress in every thread, under a lock of this state's own (another module's generations never
    wait for it): it is what checks that every call left, and what a module reads first (a plain attribute, where
    `value` is a call) so that a forward() while no generation runs anywhere costs nothing more. `value` is None
    also inside a call when `make` found nothing to make (the module is not eligible). A copied or pickled owner
    gets a fresh, empty state: a copy carries no generation in progress (and no lock or thread-local, which cannot
    be pickled).
    """

    def __init__(self):
        self.users = 0
        self._lock = threading.Lock()
        self._calls = threading.local()  # .value: this thread's innermost call's; .outer: those of the calls around it

    @property
    def value(self) -> T | None:
        """The value of the innermost call running in this thread, or None."""
        return getattr(self._calls, "value", None)

    def enter(self, make: Callable[[], T | None]) -> None:
        """One more generation in this thread, with a value of its own from `make`."""
        value = make()  # first: a `make` that raises enters nothing (and so is never left)
        calls = self._calls
        calls.outer = [*getattr(calls, "outer", ()), self.value]
        calls.value = value
        with self._lock:
            self.users += 1

    def leave(self) -> None:
        """The end of this thread's innermost generation: its value is dropped, the enclosing call's is back."""
        calls = self._calls
        outer = getattr(calls, "outer", None)
        if outer:  # (empty only if a call left from another thread than the one it entered in)
            calls.value = outer.pop()
        with self._lock:
            self.users -= 1

    def __reduce__(self):
        return DecodingState, ()
