"""`DecodingState`: what a module keeps while `generate()` runs, made when the first generation starts and dropped
when the last one ends.

The decoding speed-ups are states of the modules they change: `MultiHeadAttention.stack_projections()` (q, k and v
from one stacked product on one-token steps) and `TransformerPreTrainedModel.block_vocabulary_projection()` (the LM
head of a few rows in cache-sized blocks). `generate()` switches them on for its call and off when it returns
(generation_mixin.py); each holds its state in a `DecodingState`, which counts the generations inside it, so that
nested generations (a generate() inside a generate() callback) and concurrent ones (several threads generating with
one model) share one state, and the last to leave drops it. Nothing is kept across calls that an in-place weight
update (an optimizer step, `param.data.copy_`, a merged LoRA adapter) could leave stale.

This module is inside the remote-code closure: it imports only the standard library.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class DecodingState(Generic[T]):
    """A value that lives while at least one generation uses it: made by the first `enter`, dropped by the last
    `leave`, under a lock of its own (another module's generations never wait for it).

    `value` is None outside generations, and inside them when `make` found nothing to make (the module is not
    eligible). A copied or pickled owner gets a fresh, empty state: a copy carries no generation in progress (and no
    lock, which cannot be pickled).
    """

    def __init__(self):
        self.value: T | None = None
        self.users = 0
        self._lock = threading.Lock()

    def enter(self, make: Callable[[], T | None]) -> None:
        """One more generation; the first one makes the value."""
        with self._lock:
            if self.users == 0:
                self.value = make()
            self.users += 1

    def leave(self) -> None:
        """One generation fewer; the last one drops the value."""
        with self._lock:
            self.users -= 1
            if self.users == 0:
                self.value = None

    def __reduce__(self):
        return DecodingState, ()
