"""Every relative link of README.md and docs/*.md points at a file that exists, and every #anchor at a heading of
its target, as GitHub renders it (so a renamed heading or a moved page cannot leave a dead link behind)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
# [text](target) and ![alt](target), with an optional "title"; <img src="target">.
LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)|\bsrc=\"([^\"]+)\"")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
EXTERNAL = ("http://", "https://", "mailto:")


def prose(markdown: str) -> str:
    """The text without fenced code blocks and inline code, where brackets and '#' are not Markdown."""
    return INLINE_CODE.sub("", FENCE.sub("", markdown))


def github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation (and emoji) dropped, spaces turned into hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of a Markdown page; a repeated heading gets -1, -2, … as on GitHub."""
    seen: dict[str, int] = {}
    result = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        anchor = github_anchor(heading)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        result.add(anchor if count == 0 else f"{anchor}-{count}")
    return result


def broken_links(page: Path) -> list[str]:
    broken = []
    for match in LINK.finditer(prose(page.read_text())):
        target = match.group(1) or match.group(2)
        if target.startswith(EXTERNAL):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{target}: no heading with the anchor #{anchor}")
    return broken


def test_the_anchor_rule_is_githubs():
    assert github_anchor("Fine-tuning (🤗 Trainer)") == "fine-tuning--trainer"
    assert github_anchor("`torch.compile` and bf16") == "torchcompile-and-bf16"
    assert github_anchor("The families and their knobs") == "the-families-and-their-knobs"


def test_links_are_found_outside_code_only(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        '# Title\n\n[here](#title) [gone](missing.md) ![figure](page.md#nowhere) <img src="lost.png">\n'
        "`[not](a-link.md)`\n\n```python\nx = [1](2)\n```\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "page.md#nowhere: no heading with the anchor #nowhere",
        "lost.png: no such file",
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve(page):
    assert broken_links(page) == []
