"""Forward signatures computed once, when each model class is made.

generate() asks at every step whether a remote-code model's forward takes `cache_position` (and registered Auto
classes count as remote code), which `inspect.signature` answers by parsing the function each time: a signature
stored on the function (`__signature__`, which inspect returns as is) makes that question a lookup. The base of every
model class stores it (`HFAttentionPreTrainedModel.__init_subclass__`), so a class loaded as remote code from its
family's module alone gets it too.
"""

import inspect


def store_forward_signature(model_class: type) -> None:
    """Store the signature of the `forward` that `model_class` defines on the function itself (an inherited one got
    it with the class that defines it)."""
    forward = model_class.__dict__.get("forward")
    if forward is not None:
        forward.__signature__ = inspect.signature(forward)
