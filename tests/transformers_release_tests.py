"""transformers' own model tests, from the source distribution of the installed release.

Every model added to transformers passes `ModelTesterMixin` (tests/test_modeling_common.py of its repository): a few
hundred checks of the contract a model keeps with the library (saving and loading, resizing embeddings, attention
backends, gradient checkpointing, the loss, `torch.export`, ...). A new release brings new checks, so the suite runs
the mixin of the release that is installed, the day it is out: its source distribution is fetched once from the
package registry (the only network the tests use) with pip, checked against its SHA-256 where this file pins it, and
cached. Set HF_ATTENTION_TRANSFORMERS_TESTS to a folder holding a `tests/` tree of the same release (a git checkout
of its tag) to use that instead.

The source distribution ships tests/test_modeling_common.py but not the two folders it imports mixins from
(tests/exporters/ and tests/generation/): `ExportTesterMixin` (`torch.export` of each model class) and
`GenerationTesterMixin` (the `generate()` checks) are replaced by empty classes when those files are absent, and
`SOURCE_HAS_GENERATION_TESTS` says so. The project's own generation tests (tests/test_generation.py and the parity
suites) compare `generate()` with HF's models instead.
"""

import hashlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tarfile
import tempfile
import types
from pathlib import Path

# SHA-256 of the source distributions of the releases pyproject.toml admits today, as PyPI serves them. A release
# not listed is checked by pip against the digest the registry publishes.
SDIST_SHA256 = {
    "5.23.0": "19d647a4d5d903a7c644ca5cde2d86efc3dde7d8c687ae7988806ff2205efa71",
    "5.24.0": "906cb8c3cb2123575e263962586a4d21a979ce97feeb95fe6aaf66fe6ae88bf3",
    "5.25.0": "9120226c6bf170d69abc3029036799bb5d48e552f7127646a529a5c9309812e2",
}

# The name the release's tests/ folder is imported under (not this module's: its subpackages must resolve there).
PACKAGE = "transformers_tests_of_the_release"


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "hf-attention" / "transformers-tests"


def _fetch(version: str) -> Path:
    """The release's tests/ folder, extracted from its source distribution into the cache (fetched the first time)."""
    target = _cache_root() / version / "tests"
    if (target / "test_modeling_common.py").is_file():
        return target
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent.parent) as scratch:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        command += ["--dest", scratch, f"transformers=={version}"]
        # The release asked for, whatever a constraints file of the machine says about transformers.
        environment = {**os.environ, "PIP_CONSTRAINT": "", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        done = subprocess.run(command, capture_output=True, text=True, env=environment, timeout=600)
        archives = sorted(Path(scratch).glob("transformers-*.tar.gz"))
        if done.returncode != 0 or not archives:
            raise RuntimeError(
                f"could not download the source distribution of transformers {version} from the package registry "
                f"(pip said: {done.stderr.strip()[-500:]}); the model tests of transformers need it once, then it is "
                f"cached in {_cache_root()}."
            )
        archive = archives[0]
        pinned = SDIST_SHA256.get(version)
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        if pinned and digest != pinned:
            raise RuntimeError(f"{archive.name} has SHA-256 {digest}, expected {pinned}: not the published release.")
        prefix = f"transformers-{version}/tests/"
        unpacked = Path(scratch, "unpacked")
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(prefix) and (m.isfile() or m.isdir())]
            tar.extractall(unpacked, members=members, filter="data")
        staged = unpacked / prefix.rstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(staged, target)  # atomic: a second process finds either nothing or the whole folder
        except OSError:
            if not (target / "test_modeling_common.py").is_file():
                raise
    return target


def tests_folder() -> Path:
    """The tests/ folder of the installed transformers release (HF_ATTENTION_TRANSFORMERS_TESTS, or the cached
    source distribution)."""
    given = os.environ.get("HF_ATTENTION_TRANSFORMERS_TESTS")
    if given:
        folder = Path(given) / "tests"
        if not (folder / "test_modeling_common.py").is_file():
            raise RuntimeError(
                f"HF_ATTENTION_TRANSFORMERS_TESTS={given}: {folder}/test_modeling_common.py is missing."
            )
        return folder
    return _fetch(importlib.metadata.version("transformers"))


def _stand_in(name: str, mixin: str) -> None:
    module = types.ModuleType(f"{PACKAGE}.{name}")
    setattr(module, mixin, type(mixin, (), {"__doc__": "Not in the release's source distribution: no tests."}))
    sys.modules[module.__name__] = module


def _import_release_tests() -> tuple[types.ModuleType, bool]:
    folder = tests_folder()
    package = types.ModuleType(PACKAGE)
    package.__path__ = [str(folder)]
    sys.modules.setdefault(PACKAGE, package)
    has_generation = (folder / "generation" / "test_utils.py").is_file()
    if not (folder / "exporters" / "test_export.py").is_file():
        _stand_in("exporters", "ExportTesterMixin")
        _stand_in("exporters.test_export", "ExportTesterMixin")
    if not has_generation:
        _stand_in("generation", "GenerationTesterMixin")
        _stand_in("generation.test_utils", "GenerationTesterMixin")
    name = f"{PACKAGE}.test_modeling_common"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, folder / "test_modeling_common.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name], has_generation


common, SOURCE_HAS_GENERATION_TESTS = _import_release_tests()
ModelTesterMixin = common.ModelTesterMixin
GenerationTesterMixin = sys.modules[f"{PACKAGE}.generation.test_utils"].GenerationTesterMixin
ids_tensor = common.ids_tensor
random_attention_mask = common.random_attention_mask
floats_tensor = common.floats_tensor
_config_zero_init = common._config_zero_init
