"""The registry of standard architectures (hf_attention/architectures/) is the one list: each module declares its
classes, its tiny test references and its docs row, and the pages that list architectures say what the registry
holds. Adding an architecture is its module and one registry line; these tests then say which page to update."""

import re
from pathlib import Path

import pytest

from hf_attention.architectures import REGISTRY
from hf_attention.architectures.base import Architecture

ROOT = Path(__file__).resolve().parents[1]
CONVERSION = ROOT / "docs" / "conversion.md"
README = ROOT / "README.md"


def test_every_architecture_has_a_docs_row_and_each_case_of_its_own_classes():
    for architecture in REGISTRY.values():
        assert isinstance(architecture, Architecture)
        assert architecture.docs is not None, f"{architecture.name}: give it a ConversionRow (docs=)"
        for name, reference in architecture.tiny_references.items():
            assert reference.model_class in architecture.classes.values(), (architecture.name, name)


def test_case_names_are_unique_across_the_registry():
    names = [name for architecture in REGISTRY.values() for name in architecture.tiny_references]
    assert len(names) == len(set(names))


def _table_rows(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| architecture (classes)"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("| "):
            break
        rows.append(line)
    return rows


def test_the_conversion_table_is_the_registrys():
    expected = [architecture.docs.markdown() for architecture in REGISTRY.values()]
    assert _table_rows(CONVERSION.read_text()) == expected, "docs/conversion.md's table should read:\n" + "\n".join(
        expected
    )


def _listed(titles: list[str]) -> str:
    return ", ".join(titles[:-1]) + " or " + titles[-1]


def test_the_conversion_page_opens_with_every_architecture():
    text = " ".join(CONVERSION.read_text().split())
    titles = [architecture.docs.title for architecture in REGISTRY.values()]
    assert f"`hf-attention convert` turns a {_listed(titles)} checkpoint into" in text


@pytest.mark.parametrize("architecture", list(REGISTRY.values()), ids=lambda architecture: architecture.name)
def test_the_code_map_names_each_architecture(architecture):
    code_map = README.read_text().split("## Code map", 1)[1].split("```", 2)[1]
    line = " ".join(re.search(r"  architectures/ (.*?)\n  \w", code_map, flags=re.DOTALL).group(1).split())
    assert architecture.docs.title in line, "README.md's code map line of architectures/ does not name it"
