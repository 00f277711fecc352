"""docs/README.md's section on the tutorials: the times of its table and of the sentence below it are those of
docs/figures/tutorial_times.json (`r`), which docs/tutorials/run_all.py measured and wrote into the table.

The snippets of the times are built from that file (a tutorial's cell, the sentence of the machines that timed them),
so a time edited in docs/README.md is a snippet no longer found, and the functions read the numbers back from it."""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "tutorials"))
from run_all import duration, machine_groups, times_sentence  # noqa: E402

TIMES = json.loads((ROOT / "docs" / "figures" / "tutorial_times.json").read_text())
THUMBNAILS = {
    "01": "01_length.png",
    "02": "02_similarity.png",
    "03": "03_fits.png",
    "04": "04_scaling.png",
    "05": "05_schemes.png",
    "06": "06_cross_attention.png",
    "07": "07_block_diagram.png",
    "08": "08_attention_cost.png",
    "09": "09_greedy_steps.png",
    "10": "10_families.png",
    "11": "11_cross_attention.png",
    "12": "12_sliding.png",
    "13": "13_sink.png",
}
ROWS = [f"| {name} | [" for name in THUMBNAILS]


def minutes_or_seconds(seconds: float) -> float:
    """The number of "38 s" or "2.3 min" as a value: the prose's digits round it."""
    return seconds if seconds < 90 else seconds / 60


def cell(name: str) -> str:
    times = TIMES["tutorials"][name]
    return f'{duration(times["full_s"])} / {duration(times["quick_s"])} | <img src="figures/{THUMBNAILS[name]}"'


def cell_numbers(name: str):
    return lambda r, fig: [minutes_or_seconds(r["tutorials"][name][key]) for key in ("full_s", "quick_s")]


def sentence_numbers(r, fig) -> list:
    """The numbers of the sentence under the table, group by group: which tutorials, the cores, the CPU's digits, the
    date, the time in full and with --quick."""
    numbers = []
    for names, machine in machine_groups(r):
        if len(names) > 2 and [int(n) for n in names] == list(range(int(names[0]), int(names[-1]) + 1)):
            numbers += [names[0], names[-1]]
        else:
            numbers += names
        numbers += [str(machine["cores"]), *re.findall(r"(?<![\w.])\d+(?!\w)", machine["cpu"])]
        numbers += machine["date"].split("-")
        for key in ("full_s", "quick_s"):
            numbers.append(minutes_or_seconds(sum(r["tutorials"][name][key] for name in names)))
    return numbers


CLAIMS = [
    *[(cell(name), cell_numbers(name)) for name in THUMBNAILS],
    (times_sentence(TIMES), sentence_numbers),
    ("Thirteen short tutorials", lambda r, fig: len(r["tutorials"])),
]
GIVEN = [
    *[(row, "the tutorial's number") for row in ROWS],
    ('width="240">', "the thumbnails' width", len(THUMBNAILS)),
    ("the first two are the road to attention", "the reading order"),
    ("the next five take attention apart", "the reading order"),
    ("the next two weigh its cost", "the reading order"),
    ("the next two build a decoder-only", "the reading order"),
    ("The tests check the text in two ways", "what the tests do, described"),
    ("ties every number of every tutorial's prose", "what the test checks, described"),
    ("fails until the two agree again", "what the test does, described"),
    ("run every tutorial with `--quick`", "what the tests do, described"),
    ("the softmax Jacobian's rise and fall with the spread", "tutorial 04's measured claim, checked in its prose"),
    ("extrapolates to inputs longer than trained on", "what extrapolating means"),
    ("the four terms of (X+P)W(X+P)ᵀ", "the terms of the product"),
    ("drawn with every tensor's shape", "what the figure draws"),
    ("tokens per word at 600 / 2,000 / 8,000", "tutorial 02's vocabulary sizes"),
    ("noisy 1-D function", "a name"),
    ("a 24-layer stack", "tutorial 07's setting"),
    ("| 07's encoder block and 10's decoder block", "cross-references"),
    ("YaRN, Llama 3)", "a name"),
    ("Tutorials 02, 06 and 09 reused", "cross-references"),
    ("Tutorials 02, 06 and 09 read", "cross-references"),
    ("(tutorial 06 measures it)", "a cross-reference"),
    ("the same on every machine", "the pinned data and recipe"),
]
