"""The shipped model code is the folder hf_attention/modeling/, and nothing else: `save_pretrained` copies exactly its
files, they import only the standard library, torch, transformers and each other, and their imports reach exactly the
folder. Checkpoints saved before the code had a folder of its own (tests/fixtures/before_the_shipped_folder) load with
the installed package and as their own remote code, and compute what they computed then; `refresh-code` upgrades one.
The module paths of that layout (`hf_attention.convert`, `hf_attention.attention`, ...) still import, as the very
modules of today's paths."""

import ast
import importlib
import json
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import build
from test_save_load import remote_code_env
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

import hf_attention
from hf_attention.commands.cli import main
from hf_attention.modeling.closure import ENTRY_FILES, PACKAGE, closure_files, import_closure
from hf_attention.moved_modules import MOVED

FIXTURES = Path(__file__).parent / "fixtures" / "before_the_shipped_folder"
AUTO = {"decoder": AutoModelForCausalLM, "seq2seq": AutoModelForSeq2SeqLM}
FAMILIES = {
    "encoder": hf_attention.HFAttentionForMaskedLM,
    "decoder": hf_attention.HFAttentionForCausalLM,
    "seq2seq": hf_attention.HFAttentionForSeq2SeqLM,
    "recurrent": hf_attention.HFAttentionRecurrentForSeq2SeqLM,
}


def test_the_shipped_folder_is_the_modeling_package():
    assert Path(hf_attention.__file__).resolve().parent / "modeling" == PACKAGE
    on_disk = sorted(path.name for path in PACKAGE.iterdir() if path.suffix == ".py" and path.name != "__init__.py")
    assert closure_files() == on_disk
    assert not [path.name for path in PACKAGE.iterdir() if path.is_dir() and path.name != "__pycache__"]


def test_the_entry_files_import_exactly_the_folder():
    """Following `from .x import y` from the configurations, the model families and the pipeline reaches every file of
    the folder: none is shipped that nothing imports, and a checkpoint's own code is read the same way."""
    assert sorted(import_closure(PACKAGE, ENTRY_FILES)) == closure_files()


def test_the_shipped_files_import_only_the_standard_library_torch_transformers_and_each_other():
    allowed = {"torch", "transformers", "__future__", *sys.stdlib_module_names}
    for name in closure_files():
        for node in ast.walk(ast.parse((PACKAGE / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                # transformers copies a checkpoint's code flat and follows only `from .module import Name`
                assert node.level == 1 and node.module and "." not in node.module, (name, ast.dump(node))
                assert (PACKAGE / f"{node.module}.py").is_file(), (name, node.module)
            elif isinstance(node, ast.ImportFrom):
                assert node.module.split(".")[0] in allowed, (name, node.module)
            elif isinstance(node, ast.Import):
                assert all(alias.name.split(".")[0] in allowed for alias in node.names), (name, ast.dump(node))


@pytest.mark.parametrize("family", FAMILIES)
def test_save_pretrained_copies_exactly_the_shipped_folder(tmp_path, family):
    build(FAMILIES[family], family).save_pretrained(tmp_path)
    saved = sorted(path.name for path in tmp_path.glob("*.py"))
    assert saved == closure_files()
    assert all((tmp_path / name).read_bytes() == (PACKAGE / name).read_bytes() for name in saved)


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_imports_the_module_of_its_new_path(old):
    module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])
    assert module.__name__ == MOVED[old] and module.__spec__.name == MOVED[old]


def test_the_converters_are_public_names_of_the_package():
    from hf_attention.convert import from_hf as old_from_hf
    from hf_attention.to_hf import to_hf as old_to_hf  # binds the module of the old path to nothing of the package

    assert hf_attention.from_hf is old_from_hf and callable(hf_attention.from_hf)
    assert hf_attention.to_hf is old_to_hf and callable(hf_attention.to_hf)
    assert {"from_hf", "to_hf"} <= set(hf_attention.__all__)


def test_the_old_command_module_runs_as_a_script():
    completed = subprocess.run(
        [sys.executable, "-m", "hf_attention.cli", "--help"], capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "refresh-code" in completed.stdout


def test_a_monkeypatch_through_an_old_path_is_seen_through_the_new_one(monkeypatch):
    import hf_attention.modeling.linear_products as new

    old = importlib.import_module("hf_attention.linear_products")
    monkeypatch.setattr(old, "VOCABULARY_BLOCK_BYTES", 123)
    assert new.VOCABULARY_BLOCK_BYTES == 123


# --- checkpoints saved before the move -------------------------------------------------------------------------------


def _expected() -> dict:
    return json.loads((FIXTURES / "expected.json").read_text())


def _unpack(family: str, into: Path) -> Path:
    with tarfile.open(FIXTURES / f"{family}.tar.gz") as archive:
        archive.extractall(into, filter="data")
    return into / family


def _inputs(family: str) -> dict:
    return {name: torch.tensor(value) for name, value in _expected()[family]["inputs"].items()}


@pytest.mark.parametrize("family", ["decoder", "seq2seq"])
def test_a_checkpoint_saved_before_the_move_loads_and_computes_the_same(tmp_path, family):
    folder = _unpack(family, tmp_path)
    expected = _expected()[family]
    model = AUTO[family].from_pretrained(folder).eval()
    assert type(model).__module__.startswith("hf_attention.modeling.")
    with torch.no_grad():
        logits = model(**_inputs(family)).logits
    torch.testing.assert_close(logits, torch.tensor(expected["logits"]), rtol=0, atol=1e-5)
    prompt = {key: value for key, value in _inputs(family).items() if key != "decoder_input_ids"}
    greedy = model.generate(**prompt, max_new_tokens=8, eos_token_id=None, do_sample=False, num_beams=1)
    assert greedy.tolist() == expected["greedy"]


REMOTE_SCRIPT = textwrap.dedent("""
    import json, sys, torch
    sys.modules["hf_attention"] = None  # make the package unimportable: only the checkpoint's code may be used
    import transformers
    folder, family, out = sys.argv[1:4]
    auto = transformers.AutoModelForCausalLM if family == "decoder" else transformers.AutoModelForSeq2SeqLM
    model = auto.from_pretrained(folder, trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
    expected = json.load(open(sys.argv[4]))[family]
    inputs = {name: torch.tensor(value) for name, value in expected["inputs"].items()}
    with torch.no_grad():
        torch.save(model(**inputs).logits, out)
""")


def _remote_logits(tmp_path: Path, folder: Path, family: str) -> torch.Tensor:
    (tmp_path / "remote.py").write_text(REMOTE_SCRIPT)
    completed = subprocess.run(
        [sys.executable, "remote.py", str(folder), family, "logits.pt", str(FIXTURES / "expected.json")],
        cwd=tmp_path,
        env=remote_code_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return torch.load(tmp_path / "logits.pt")


@pytest.mark.slow
@pytest.mark.parametrize("family", ["decoder", "seq2seq"])
def test_a_checkpoint_saved_before_the_move_runs_its_own_code_and_after_refresh_code_the_new(tmp_path, family, capsys):
    folder = _unpack(family, tmp_path)
    expected = torch.tensor(_expected()[family]["logits"])
    old_code = {path.name: path.read_bytes() for path in folder.glob("*.py")}
    torch.testing.assert_close(_remote_logits(tmp_path, folder, family), expected, rtol=0, atol=1e-5)

    assert main(["refresh-code", str(folder)]) == 0
    assert str(folder) in capsys.readouterr().out
    for name in closure_files():
        assert (folder / name).read_bytes() == (PACKAGE / name).read_bytes(), name
    new_code = {path.name: path.read_bytes() for path in folder.glob("*.py")}
    assert sorted(new_code) == closure_files()  # signatures.py, which the new code no longer has, is gone
    assert any(old_code[name] != new_code.get(name) for name in old_code)  # the code did change
    (tmp_path / "modules").rename(tmp_path / "modules-before")  # the new code, not a cached copy of the old
    torch.testing.assert_close(_remote_logits(tmp_path, folder, family), expected, rtol=0, atol=1e-5)
