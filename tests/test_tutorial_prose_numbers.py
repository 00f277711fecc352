"""Every number a tutorial's text states is checked against what its full run measured.

A tutorial's full run writes the numbers it reasons about to docs/figures/NN_results.json and the data of each figure
to docs/figures/NAME.npz (both committed). `tests/tutorial_claims/NN_claims.py` ties each number of the tutorial's
prose (its markdown cells) to them:

    CLAIMS = [
        # (a piece of the prose, exactly as written; what its numbers must read, computed from the run's results)
        ("the cosine reaches 0.91 (post-norm)", lambda r, fig: f"{fig('07_depth')['cosine'][0, -1]:.2f}"),
        ("7.05× the last one's", lambda r, fig: f"{r['reach_ratio']:.2f}", 2),  # a third entry: how often it occurs
    ]
    GIVEN = [
        # numbers that are not measured: a definition, a setting of the script, a cross-reference, arithmetic
        ("tutorial 05", "cross-reference", 3),
        ("24 layers", "the depth the script sets"),
    ]

The test fails when a number of the prose is in no entry, when an entry's piece of prose is not there exactly as often
as it says, or when a claim's numbers are not what its function computes. So a rerun that changes a measured number
fails until the prose says the new one, and so does a number edited in the prose (a second test changes each number
of each tutorial in turn and checks that the first would catch it). docs/README.md's tutorial section is checked the
same way against the times docs/tutorials/run_all.py measured.

Whitespace is normalised (the prose's line breaks are spaces). A number is a run of digits with optional thousands
commas, a decimal part and an exponent (1,500 / 0.91 / 43 / 1.6e-5); a sign, a unit, a superscript or a letter
around it is not part of it, so "−0.5" is the number "0.5" and "10⁻⁵" the number "10".
"""

from __future__ import annotations

import importlib.util
import json
import re
from functools import cache
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
TUTORIALS = ROOT / "docs" / "tutorials"
FIGURES = ROOT / "docs" / "figures"
CLAIMS = Path(__file__).resolve().parent / "tutorial_claims"
NAMES = sorted(p.name[:2] for p in TUTORIALS.glob("[0-9][0-9]_*.py"))

# Digits not glued to a letter, an underscore or a dot before them (W_2, h1, x.5 are not numbers of the prose).
# Atomic, so that 1.6e-5 is one number and not "1" then "5".
NUMBER = re.compile(r"(?<![\w.])(?>\d+(?:,\d{3})*(?:\.\d+)?(?:e[-−]?\d+)?)(?!\w)")


def prose_of(script: Path) -> tuple[str, list[int]]:
    """The markdown cells of a jupytext percent script as one string (whitespace runs → one space), and for each
    character the script line it comes from."""
    text, lines = [], []
    in_markdown = False
    for number, line in enumerate(script.read_text().splitlines(), start=1):
        if line.startswith("# %%"):
            in_markdown = line.startswith("# %% [markdown]")
            continue
        if not in_markdown:
            continue
        body = line[2:] if line.startswith("# ") else line.lstrip("#")
        for char in body + " ":
            text.append(char)
            lines.append(number)
    collapsed, collapsed_lines = [], []
    for char, number in zip(text, lines, strict=True):
        if char.isspace():
            if collapsed and collapsed[-1] == " ":
                continue
            char = " "
        collapsed.append(char)
        collapsed_lines.append(number)
    return "".join(collapsed), collapsed_lines


def section_of(markdown: Path, heading: str, next_heading: str) -> tuple[str, list[int]]:
    """The part of a markdown file from `heading` to `next_heading`, whitespace runs → one space, with line numbers."""
    all_lines = markdown.read_text().splitlines()
    first = all_lines.index(heading)
    last = all_lines.index(next_heading, first)
    chars, numbers = [], []
    for number, line in enumerate(all_lines[first:last], start=first + 1):
        for char in line + " ":
            if char.isspace() and chars and chars[-1] == " ":
                continue
            chars.append(" " if char.isspace() else char)
            numbers.append(number)
    return "".join(chars), numbers


def normalised(snippet: str) -> str:
    return re.sub(r"\s+", " ", snippet).strip()


def load_claims(name: str):
    path = CLAIMS / f"{name}_claims.py"
    spec = importlib.util.spec_from_file_location(f"tutorial_claims_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CLAIMS, module.GIVEN


@cache
def results_of(name: str) -> dict:
    return json.loads((FIGURES / f"{name}_results.json").read_text())


@cache
def figure_data(figure: str) -> dict:
    with np.load(FIGURES / f"{figure}.npz", allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


def occurrences(prose: str, snippet: str) -> list[int]:
    starts, at = [], prose.find(snippet)
    while at != -1:
        starts.append(at)
        at = prose.find(snippet, at + len(snippet))
    return starts


def problems(prose: str, lines: list[int], claims, given, results: dict) -> list[str]:
    """What is wrong with the numbers of `prose` against `claims`, `given` and `results` (empty when nothing)."""
    found: list[str] = []
    covered = np.zeros(len(prose) + 1, dtype=bool)
    entries = [(entry, True) for entry in claims] + [(entry, False) for entry in given]
    for entry, is_claim in entries:
        snippet, what = normalised(entry[0]), entry[1]
        expected_count = entry[2] if len(entry) > 2 else 1
        starts = occurrences(prose, snippet)
        numbers = NUMBER.findall(snippet)
        if not numbers:
            found.append(f"{snippet!r} holds no number: leave it out of the claims")
            continue
        if len(starts) != expected_count:
            found.append(f"{snippet!r} is in the prose {len(starts)} time(s), the claims say {expected_count}")
            continue
        for start in starts:
            covered[start : start + len(snippet)] = True
        if not is_claim:
            continue
        try:
            measured = what(results, figure_data)
        except Exception as error:  # noqa: BLE001 - reported with the snippet, so a missing key names its claim
            found.append(f"{snippet!r}: computing its numbers failed: {type(error).__name__}: {error}")
            continue
        measured = [measured] if isinstance(measured, str) else list(measured)
        if measured != numbers:
            line = lines[starts[0]]
            found.append(
                f"line {line}: the prose says {numbers} in {snippet!r}; the full run's results give {measured}"
            )
    for match in NUMBER.finditer(prose):
        if not covered[match.start() : match.end()].all():
            context = prose[max(0, match.start() - 50) : match.end() + 30]
            found.append(f"line {lines[match.start()]}: {match.group()!r} is checked by nothing: …{context}…")
    return found


def test_every_tutorial_has_its_claims_and_its_results():
    assert NAMES, "no tutorial found"
    for name in NAMES:
        assert (CLAIMS / f"{name}_claims.py").is_file(), f"tests/tutorial_claims/{name}_claims.py is missing"
        assert (FIGURES / f"{name}_results.json").is_file(), f"docs/figures/{name}_results.json: run the tutorial"
        assert results_of(name)["quick"] is False, f"docs/figures/{name}_results.json is not a full run's"


def tutorial_script(name: str) -> Path:
    (script,) = TUTORIALS.glob(f"{name}_*.py")
    return script


@pytest.mark.parametrize("name", NAMES)
def test_every_number_of_the_prose_is_what_the_full_run_measured(name):
    prose, lines = prose_of(tutorial_script(name))
    claims, given = load_claims(name)
    found = problems(prose, lines, claims, given, results_of(name))
    assert not found, f"{tutorial_script(name).name}:\n" + "\n".join(found)


def unnoticed_changes(prose: str, lines: list[int], claims, given, results: dict) -> list[str]:
    """Each number of `prose` changed in turn (its last digit + 1): the changes `problems` does not notice."""
    missed = []
    for match in NUMBER.finditer(prose):
        digit = match.end() - 1
        changed = prose[:digit] + str((int(prose[digit]) + 1) % 10) + prose[digit + 1 :]
        if not problems(changed, lines, claims, given, results):
            context = prose[max(0, match.start() - 40) : match.end() + 20]
            missed.append(f"line {lines[match.start()]}: {match.group()!r} in …{context}…")
    return missed


@pytest.mark.parametrize("name", NAMES)
def test_a_number_changed_anywhere_in_the_prose_is_caught(name):
    """Each number of the prose, changed in turn, makes the check above fail."""
    prose, lines = prose_of(tutorial_script(name))
    claims, given = load_claims(name)
    missed = unnoticed_changes(prose, lines, claims, given, results_of(name))
    assert not missed, "changing these numbers goes unnoticed:\n" + "\n".join(missed)


README = ROOT / "docs" / "README.md"
README_SECTION = ("## Learn attention with hf-attention", "### The attention explorer")


def test_the_documentation_quotes_the_measured_times_of_the_tutorials():
    """docs/README.md's tutorial table: its times are those of docs/figures/tutorial_times.json (written by
    docs/tutorials/run_all.py), and every other number of that section is accounted for."""
    prose, lines = section_of(README, *README_SECTION)
    claims, given = load_claims("README")
    times = json.loads((FIGURES / "tutorial_times.json").read_text())
    assert set(times["tutorials"]) == set(NAMES), "run docs/tutorials/run_all.py: tutorial_times.json lacks some"
    found = problems(prose, lines, claims, given, times)
    assert not found, "docs/README.md:\n" + "\n".join(found)
    missed = unnoticed_changes(prose, lines, claims, given, times)
    assert not missed, "changing these numbers goes unnoticed:\n" + "\n".join(missed)


def test_the_checker_reads_numbers_as_the_prose_writes_them():
    assert NUMBER.findall("1,500 steps, 0.91 and 43; W_2, h1, 3D, (1, 4, 43, 8), 10⁻⁵, −0.5, 7.05×, 1.6e-5.") == [
        "1,500",
        "0.91",
        "43",
        "1",
        "4",
        "43",
        "8",
        "10",
        "0.5",
        "7.05",
        "1.6e-5",
    ]
    prose = "the cosine reaches 0.91 at layer 24 and 3 of 6 steps"
    lines = [1] * len(prose)
    claims = [("reaches 0.91 at layer 24", lambda r, fig: [f"{r['cos']:.2f}", "24"])]
    given = [("3 of 6 steps", "counted by hand")]
    assert problems(prose, lines, claims, given, {"cos": 0.914}) == []
    assert "results give ['0.92', '24']" in problems(prose, lines, claims, given, {"cos": 0.92})[0]
    assert "checked by nothing" in problems(prose + " and 5 more", lines + [1] * 11, claims, given, {"cos": 0.91})[0]
    assert "0 time(s)" in problems(prose.replace("3 of", "4 of"), lines, claims, given, {"cos": 0.91})[0]
