"""Forward signatures computed once, at import.

generate() asks at every step whether a remote-code model's forward takes `cache_position` (and registered Auto
classes count as remote code), which `inspect.signature` answers by parsing the function each time: a signature
stored on the function (`__signature__`, which inspect returns as is) makes that question a lookup.
"""

import inspect


def store_forward_signatures(model_classes) -> None:
    """Store each class's `forward` signature on the function itself."""
    for model_class in model_classes:
        model_class.forward.__signature__ = inspect.signature(model_class.forward)
