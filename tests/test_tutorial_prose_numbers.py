"""Every number a tutorial's text states is checked against what its full run measured.

A tutorial's full run writes the numbers it reasons about to docs/figures/NN_results.json and the data of each figure
to docs/figures/NAME.npz (both committed). `tests/tutorial_claims/NN_claims.py` ties each number of the tutorial's
prose (its markdown cells) to them (and its words that are numbers or claims about the data, below):

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

Numbers written as words and words that state what the data does are checked like digits (WORDS below): quantities
("every", "all", "none", "never", "always", "twice", "half", "two" … "twenty", "hundred"), what a curve or a figure
does ("falls", "rises", "grows", "flat", "smooth", "staircase", "zigzag", …) and comparisons ("more … than", "better
than", "faster than", …). Each one must be in an entry: a claim's function returns it, computed from the results
("every" only if every case was right), or a GIVEN entry says why it is not a measurement (a definition, a setting).
A claim's function returns its snippet's numbers and words in the order they appear. A number is returned as the
value, not as a string: the test rounds it as the prose writes it (as many decimals as the prose shows, thousands
commas where it has them, the mantissa's decimals of 1.6e-5), so the prose declares each claim's rounding and no
function chooses its own; a negative value must be written with a minus sign before it. Only whole numbers (a count,
a date) may be returned as strings of digits.

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

# Words that state a quantity or what the data does, each with the word the mutation test puts in its place. They are
# checked only as whole words, in any case; a comparative only when "than" follows within three words.
QUANTITIES = {
    "every": "most", "all": "most", "none": "few", "never": "rarely", "always": "often", "twice": "thrice",
    "thrice": "twice", "half": "third", "two": "three", "three": "four", "four": "five", "five": "six", "six": "seven",
    "seven": "eight", "eight": "nine", "nine": "ten", "ten": "eleven", "eleven": "twelve", "twelve": "thirteen",
    "thirteen": "fourteen", "fourteen": "fifteen", "fifteen": "sixteen", "sixteen": "seventeen",
    "seventeen": "eighteen", "eighteen": "nineteen", "nineteen": "twenty", "twenty": "two",
    "dozen": "score", "hundred": "thousand", "thousand": "hundred", "million": "thousand",
}  # fmt: skip
TRENDS = {
    "staircase": "ramp", "zigzag": "line", "smooth": "jagged", "smoothly": "jaggedly", "jagged": "smooth",
    "fall": "rise", "falls": "rises", "falling": "rising", "fell": "rose", "rise": "fall", "rises": "falls",
    "rising": "falling", "rose": "fell", "drops": "climbs", "dropping": "climbing",
    "grow": "shrink", "grows": "shrinks", "growing": "shrinking", "grew": "shrank",
    "shrink": "grow", "shrinks": "grows", "shrinking": "growing", "increase": "decrease", "increases": "decreases",
    "increasing": "decreasing", "decrease": "increase", "decreases": "increases", "decreasing": "increasing",
    "flat": "steep", "steady": "erratic", "improve": "worsen", "improves": "worsens", "improving": "worsening",
    "plateau": "climb", "plateaus": "climbs",
}  # fmt: skip
COMPARATIVES = {
    "more": "fewer", "fewer": "more", "less": "more", "better": "worse", "worse": "better", "higher": "lower",
    "lower": "higher", "faster": "slower", "slower": "faster", "larger": "smaller", "smaller": "larger",
    "longer": "shorter", "shorter": "longer", "greater": "smaller",
}  # fmt: skip
REPLACEMENT = {**QUANTITIES, **TRENDS, **COMPARATIVES}
# A number word may be given as its value (the count it states).
NUMBER_WORDS = {
    **{word: value for value, word in enumerate(["two", "three", "four", "five", "six", "seven", "eight"], start=2)},
    **{"nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "dozen": 12, "hundred": 100, "thousand": 1000},
    **{word: value for value, word in enumerate(["thirteen", "fourteen", "fifteen", "sixteen"], start=13)},
    **{"seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20},
    **{"million": 1_000_000, "twice": 2, "thrice": 3},
}
WORD = re.compile(
    rf"(?<![\w-])(?:(?:{'|'.join(sorted({**QUANTITIES, **TRENDS}, key=len, reverse=True))})"
    rf"|(?:{'|'.join(sorted(COMPARATIVES, key=len, reverse=True))})(?=(?:\s+[\w'’-]+){{0,3}}\s+than\b))(?![\w-])",
    re.IGNORECASE,
)


CODE_SPAN = re.compile(r"`[^`]*`")


def checked_tokens(text: str) -> list[re.Match]:
    """The numbers and the checked words of `text`, in order. A word inside a code span (`train(None)`) is code, not
    a claim; a number there is still checked."""
    code = [span.span() for span in CODE_SPAN.finditer(text)]
    words = [word for word in WORD.finditer(text) if not any(a <= word.start() < b for a, b in code)]
    return sorted([*NUMBER.finditer(text), *words], key=lambda match: match.start())


def is_number(token: str) -> bool:
    return NUMBER.fullmatch(token) is not None


def as_written(value: float, token: str) -> str:
    """`value` rounded as the prose writes `token`: its decimals (of the mantissa, with an exponent), its commas."""
    token = token.replace("−", "-")
    mantissa, _, exponent = token.partition("e")
    decimals = len(mantissa.partition(".")[2])
    if exponent:
        text = f"{value:.{decimals}e}"
        head, _, power = text.partition("e")
        return f"{head}e{int(power)}"
    return f"{value:{',' if ',' in mantissa else ''}.{decimals}f}"


def compare(snippet: str, tokens: list[re.Match], measured: list) -> str | None:
    """Why the `measured` list does not read as the snippet's `tokens` (None when it does)."""
    written = [token.group() for token in tokens]
    if len(measured) != len(written):
        return f"the prose has {written}; the function gives {len(measured)} item(s): {measured}"
    for token, value in zip(tokens, measured, strict=True):
        text = token.group()
        if not is_number(text):
            if isinstance(value, int) and not isinstance(value, bool) and NUMBER_WORDS.get(text.lower()) == value:
                continue
            if not isinstance(value, str) or value.lower() != text.lower():
                return f"the prose says {text!r}; the full run's results give {value!r}"
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            return f"{text!r}: the function gives {value!r}, not a number"
        if isinstance(value, str):
            if not value.isdigit():
                return f"{text!r}: the function gives the string {value!r}: return the value, the prose rounds it"
            reads = value
        else:
            negative = value < 0
            # A minus sign: "−", or "-" that does not join two words or numbers ("16-63", "pre-norm" are hyphens).
            before = snippet[max(0, token.start() - 2) : token.start()].rjust(2)
            written_negative = before[1] == "−" or (before[1] == "-" and not before[0].isalnum())
            if negative != written_negative:
                sign = "negative" if negative else "positive"
                how = "without" if negative else "with"
                return f"{text!r}: the value {value!r} is {sign}, the prose writes it {how} a minus sign"
            reads = as_written(abs(value), text)
        if reads != text.replace("−", "-"):
            return f"the prose says {text!r}; the full run's results give {reads!r} ({value!r})"
    return None


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
    """What is wrong with the numbers and checked words of `prose` against `claims`, `given` and `results`."""
    found: list[str] = []
    covered = np.zeros(len(prose) + 1, dtype=bool)
    entries = [(entry, True) for entry in claims] + [(entry, False) for entry in given]
    for entry, is_claim in entries:
        snippet, what = normalised(entry[0]), entry[1]
        expected_count = entry[2] if len(entry) > 2 else 1
        starts = occurrences(prose, snippet)
        tokens = checked_tokens(snippet)
        if not tokens:
            found.append(f"{snippet!r} holds no number and no checked word: leave it out of the claims")
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
        measured = [measured] if isinstance(measured, (str, int, float)) else list(measured)
        wrong = compare(snippet, tokens, measured)
        if wrong is not None:
            found.append(f"line {lines[starts[0]]}: {snippet!r}: {wrong}")
    for match in checked_tokens(prose):
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


def mutated(prose: str, match: re.Match) -> str:
    """`prose` with one checked token changed: a number's last digit + 1, a word replaced by another."""
    token = match.group()
    if is_number(token):
        digit = match.end() - 1
        return prose[:digit] + str((int(prose[digit]) + 1) % 10) + prose[digit + 1 :]
    other = REPLACEMENT[token.lower()]
    other = other.capitalize() if token[0].isupper() else other
    return prose[: match.start()] + other + prose[match.end() :]


def unnoticed_changes(prose: str, lines: list[int], claims, given, results: dict) -> list[str]:
    """Each number and checked word of `prose` changed in turn: the changes `problems` does not notice."""
    missed = []
    for match in checked_tokens(prose):
        changed = mutated(prose, match)
        # (a replacement word of another length shifts the text after it: give it the line of the word it replaces)
        shift = len(changed) - len(prose)
        changed_lines = (
            lines[: match.end()] + [lines[match.end() - 1]] * max(shift, 0) + lines[match.end() - min(shift, 0) :]
        )
        if not problems(changed, changed_lines, claims, given, results):
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
    claims = [("reaches 0.91 at layer 24", lambda r, fig: [r["cos"], 24])]
    given = [("3 of 6 steps", "counted by hand")]
    assert problems(prose, lines, claims, given, {"cos": 0.914}) == []
    assert "give '0.92'" in problems(prose, lines, claims, given, {"cos": 0.92})[0]
    assert "checked by nothing" in problems(prose + " and 5 more", lines + [1] * 11, claims, given, {"cos": 0.91})[0]
    assert "0 time(s)" in problems(prose.replace("3 of", "4 of"), lines, claims, given, {"cos": 0.91})[0]


def test_the_prose_declares_the_rounding_of_a_number():
    """The value is rounded to the digits the prose shows: no function picks its own rounding."""
    assert as_written(0.914, "0.91") == "0.91"
    assert as_written(1499.6, "1,500") == "1,500"
    assert as_written(1.63e-5, "1.6e-5") == "1.6e-5"
    assert as_written(2.07, "2") == "2"
    prose = "up 2.07 times, a loss of −0.5"
    lines = [1] * len(prose)
    assert problems(prose, lines, [("up 2.07 times, a loss of −0.5", lambda r, fig: [2.07, -0.5])], [], {}) == []
    wrong_sign = problems(prose, lines, [("up 2.07 times, a loss of −0.5", lambda r, fig: [2.07, 0.5])], [], {})
    assert "minus sign" in wrong_sign[0]
    in_range = "between 0.05-0.08 and -0.5"
    assert problems(in_range, [1] * len(in_range), [(in_range, lambda r, fig: [0.05, 0.08, -0.5])], [], {}) == []
    as_string = problems(prose, lines, [("up 2.07 times, a loss of −0.5", lambda r, fig: ["2.07", -0.5])], [], {})
    assert "return the value" in as_string[0]


def test_words_that_are_numbers_or_claims_are_checked_like_digits():
    prose = "Every run falls, and the loss is lower than the baseline's in two of the three settings."
    lines = [1] * len(prose)
    assert [m.group() for m in checked_tokens(prose)] == ["Every", "falls", "lower", "two", "three"]
    assert [m.group() for m in checked_tokens("more layers, and more of them than that; all-in-one")] == ["more"]
    falls = ("Every run falls", lambda r, fig: ["every" if all(r["fell"]) else "not every", "falls"])
    lower = (
        "lower than the baseline's in two of the three",
        lambda r, fig: ["lower" if r["ours"] < r["base"] else "higher", sum(r["fell"]), len(r["fell"])],
    )
    results = {"fell": [True, True, True], "ours": 1.0, "base": 2.0}
    assert "'two'" in problems(prose, lines, [falls, lower], [], results)[0]  # 3 of 3 measured, the prose says two
    results["fell"] = [True, True]
    assert "'lower' is checked by nothing" in problems(prose, lines, [falls], [], results)[0]
    fine = problems(prose, lines, [falls, (lower[0], lambda r, fig: ["lower", 2, 3])], [], results)
    assert fine == []
    # A changed word is noticed like a changed digit: by the claim's function, or by a GIVEN snippet no longer found.
    claims = [falls, (lower[0], lambda r, fig: ["lower" if r["ours"] < r["base"] else "higher", 2, 3])]
    assert unnoticed_changes(prose, lines, claims, [], results) == []
    given = [("Every run falls", "a definition")]
    assert unnoticed_changes(prose, lines, claims[1:], given, results) == []
    constant = [(falls[0], lambda r, fig: ["every", "falls"]), claims[1]]
    assert unnoticed_changes(prose, lines, constant, [], results) == []  # the changed prose no longer reads "every"
