"""Elementwise regions of a layer, compiled into fused kernels while training on a GPU.

Eager PyTorch runs every elementwise op as its own kernel, one pass over memory each: RMSNorm is a square, a mean, an
add, a reciprocal square root, two products and the casts around them, forward and again backward. On a GPU these
passes, not the matmuls, take most of the time of a small model's step. The modules that own such a region (the norm
in norms.py, the gated product in layers.py, the rotary rotation in attention.py) wrap its plain function in an
`ElementwiseRegion`; in a training step on a device of `ElementwiseRegion.device_types` (CUDA, where torch.compile
generates Triton kernels) their speed paths (speed_paths.py) call it, and it runs through
`torch.compile(dynamic=True)`, which fuses the region into one kernel forward and one or two backward, once for all
sequence lengths. Elsewhere (the CPU, inference, inside a model that is itself being compiled or exported) the modules
run their plain path, which the tests compare the compiled region with.

The first training step on a GPU compiles each region (seconds). `ElementwiseRegion.device_types = frozenset()` turns
the regions off; if compiling fails (no Triton for that GPU, say), the region warns once and runs its plain function
from then on. This file imports only torch: norms.py, which the configuration imports, uses it.
"""

import functools
import warnings
from collections.abc import Callable

import torch
from torch import Tensor

# Device types whose training steps run the compiled regions.
DEVICE_TYPES = frozenset({"cuda"})


class ElementwiseRegion:
    """A plain function of tensors (and constants), and its torch.compile'd twin for training on a GPU.

    `applies(*tensors)` says whether the owner should call the region instead of its own plain path; calling the
    region runs the compiled function (compiled on the first call), or `plain` once compiling has failed. Owners test
    `tensor.device.type in region.device_types` inline first, an attribute read: on the CPU the plain path then runs
    without a call into this file.
    """

    device_types: frozenset[str] = DEVICE_TYPES  # set on the class: every region follows

    def __init__(self, plain: Callable):
        functools.update_wrapper(self, plain)
        self.plain = plain
        self._compiled = None
        self._failed = False

    def applies(self, *tensors: Tensor) -> bool:
        """Training (a gradient will be needed) on a device of `device_types`, outside another compilation."""
        # Cheapest first: under no_grad (inference, every decoding step) only the first test runs; inside a compiled
        # model only the first two are traced.
        return (
            torch.is_grad_enabled()
            and not torch.compiler.is_compiling()
            and not self._failed
            and tensors[0].device.type in self.device_types
            and any(t.requires_grad for t in tensors)
        )

    def __call__(self, *args):
        if self._failed:
            return self.plain(*args)
        if self._compiled is None:
            self._compiled = torch.compile(self.plain, dynamic=True, fullgraph=True)
            try:
                return self._compiled(*args)
            except Exception as error:  # any compiler failure: the plain function gives the same result
                self._failed = True
                warnings.warn(
                    f"hf_attention: compiling {self.plain.__name__} failed ({type(error).__name__}: {error}); it runs "
                    "uncompiled from now on (the same results, more kernels).",
                    stacklevel=2,
                )
                return self.plain(*args)
        return self._compiled(*args)
