"""The attention-map core shared by the heatmaps and the explorer: the import direction (each front end imports
attention_maps, neither the other), the explorer's page template shipped as package data and self-contained, and the
checks both front ends now run the same way."""

import ast
import fnmatch
import re
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from hf_attention import HFAttentionForCausalLM
from hf_attention.commands.refresh_code import closure_files
from hf_attention.inspection.attention_maps import load_model_and_tokenizer
from hf_attention.inspection.explorer import PAGE_FOLDER, explore, page_template
from hf_attention.inspection.heatmaps import attention_weights, plot_attention

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "hf_attention" / "inspection"
PAGE_FILES = ("page.html", "style.css", "explorer.js")
TEXT = "Return the value of the named attribute"


def sibling_imports(module: str) -> set[str]:
    """The sibling modules `hf_attention/inspection/<module>.py` imports (`from .x import ...`) anywhere in it."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text(encoding="utf-8"))
    return {
        node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
    }


def test_each_front_end_imports_the_core_and_not_the_other():
    assert "attention_maps" in sibling_imports("heatmaps") and "attention_maps" in sibling_imports("explorer")
    assert not {"heatmaps", "explorer"} & sibling_imports("attention_maps")
    assert "heatmaps" not in sibling_imports("explorer") and "explorer" not in sibling_imports("heatmaps")


@pytest.mark.parametrize(("module", "other"), [("visualize", "explorer"), ("explorer", "visualize")])
def test_importing_one_front_end_does_not_load_the_other(module, other):
    code = f"import sys, hf_attention.{module}; print('hf_attention.{other}' in sys.modules)"
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert completed.stdout.strip() == "False"


def test_the_attention_code_stays_outside_the_remote_code_closure():
    assert not {"attention_maps.py", "heatmaps.py", "explorer.py"} & set(closure_files())


def test_page_files_are_package_data():
    folder = resources.files("hf_attention.inspection").joinpath(PAGE_FOLDER)
    assert sorted(f.name for f in folder.iterdir()) == sorted(PAGE_FILES)
    # What a wheel (a non-editable install) takes along. (tomllib is Python 3.11+; the project supports 3.10.)
    section = (ROOT / "pyproject.toml").read_text().split("[tool.setuptools.package-data]", 1)[1]
    patterns = re.findall(
        r'"([^"]+)"', re.search(r'^"hf_attention.inspection" = \[(.*?)\]', section, re.M | re.S).group(1)
    )
    for name in PAGE_FILES:
        assert any(fnmatch.fnmatch(f"{PAGE_FOLDER}/{name}", p) for p in patterns), name


def test_page_template_is_one_self_contained_file():
    template = page_template()
    folder = resources.files("hf_attention.inspection").joinpath(PAGE_FOLDER)
    for name in ("style.css", "explorer.js"):  # put inline whole
        assert folder.joinpath(name).read_text(encoding="utf-8") in template
    assert re.findall(r"__[A-Z]+__", template) == ["__TITLE__", "__DATA__"]  # what explore fills in
    assert not re.search(r"""\b(src|href)\s*=""", template) and "<link" not in template  # nothing loaded
    assert "@import" not in template and "url(" not in template and "fetch(" not in template


# ------------------------------------------------------------------------ checks the two front ends now share


@pytest.fixture
def short_positions(saved_checkpoint):
    """A decoder with a learned table of 4 positions, and its tokenizer."""
    folder = saved_checkpoint(
        HFAttentionForCausalLM, "decoder", position_encoding="learned", max_position_embeddings=4
    )
    return load_model_and_tokenizer(folder)


def test_the_heatmap_refuses_a_text_longer_than_the_positions_as_the_explorer_does(short_positions):
    model, tokenizer = short_positions
    for draw in (plot_attention, attention_weights, explore):
        with pytest.raises(ValueError, match=r"more than the model's 4 positions \(max_position_embeddings=4\)"):
            draw(model, tokenizer, TEXT)
    assert plot_attention(model, tokenizer, TEXT, head="mean", truncate=True).weights.shape == (4, 4)


@pytest.mark.parametrize("max_new_tokens", [0, -1, 2.5, True])
def test_max_new_tokens_is_checked_by_both(short_positions, max_new_tokens):
    model, tokenizer = short_positions
    for draw in (plot_attention, explore):
        with pytest.raises(ValueError, match=re.escape(f"max_new_tokens={max_new_tokens!r} must be a positive")):
            draw(model, tokenizer, TEXT, max_new_tokens=max_new_tokens)
