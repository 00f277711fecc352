"""Where the modules of the flat layout live now, so that every import path of earlier releases keeps working.

Until the shipped model code got a folder of its own, every module sat at the top of the package
(`hf_attention.attention`, `hf_attention.convert`, `hf_attention.visualize`, ...). `MOVED` maps each of those paths to
today's, and `install()` puts a finder on `sys.meta_path` that answers an old path with the very module object of
the new one: `import hf_attention.attention` and `from hf_attention.convert import from_hf` work, and a monkeypatch
through either name is seen through the other. Pickles that name an old path (a training run's saved state) load too.
"""

import importlib
import importlib.abc
import importlib.util
import sys

_MODELING = [
    "activations",
    "attention",
    "auto_classes",
    "builders",
    "cache_argument",
    "closure",
    "compiled_regions",
    "configuration_hf_attention",
    "decoder_family",
    "decoding",
    "encoder_decoder_family",
    "encoder_family",
    "flex",
    "generation_mixin",
    "input_checks",
    "kv_cache",
    "layers",
    "linear_products",
    "losses",
    "masks",
    "modeling_hf_attention",
    "norms",
    "positional",
    "pretrained",
    "recurrent",
    "scores",
    "stack",
    "pipelines",
    "placeholder_constraint",
    "placeholders",
]

MOVED = {
    **{f"hf_attention.{name}": f"hf_attention.modeling.{name}" for name in _MODELING},
    "hf_attention.signatures": "hf_attention.modeling.pretrained",  # its one function lives there now
    "hf_attention.convert": "hf_attention.conversion.from_hf",
    "hf_attention.to_hf": "hf_attention.conversion.to_hf",
    "hf_attention.attention_maps": "hf_attention.inspection.attention_maps",
    "hf_attention.visualize": "hf_attention.inspection.heatmaps",
    "hf_attention.explorer": "hf_attention.inspection.explorer",
    "hf_attention.cli": "hf_attention.commands.cli",
    "hf_attention.demo": "hf_attention.commands.demo",
    "hf_attention.destinations": "hf_attention.commands.destinations",
    "hf_attention.paths": "hf_attention.commands.paths",
    "hf_attention.checkpoint_files": "hf_attention.commands.checkpoint_files",
    "hf_attention.shipped_code": "hf_attention.commands.refresh_code",
    "hf_attention.generation": "hf_attention.runtime.compiled_generation",
    "hf_attention.hardware": "hf_attention.runtime.hardware",
}


class _OldPathFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old module path and loads it as the module of its new path."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in MOVED else None

    def create_module(self, spec):
        module = importlib.import_module(MOVED[spec.name])
        self._spec = module.__spec__  # the import system overwrites __spec__ with the old path's: put it back
        return module

    def exec_module(self, module):
        module.__spec__ = self._spec

    def get_code(self, name):
        """`python -m hf_attention.cli` runs the new module as `__main__` (in its own package, for its imports)."""
        return compile(
            f"import runpy\nrunpy.run_module({MOVED[name]!r}, run_name='__main__', alter_sys=True)\n", name, "exec"
        )


def install() -> None:
    if not any(isinstance(finder, _OldPathFinder) for finder in sys.meta_path):
        sys.meta_path.append(_OldPathFinder())
