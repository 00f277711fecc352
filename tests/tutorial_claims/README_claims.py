"""docs/README.md's section on the tutorials: the times of its table and of the sentence below it are those of
docs/figures/tutorial_times.json (`r`), which docs/tutorials/run_all.py measured and wrote into the table."""

import re

ROWS = [f"| {n:02d} | [" for n in range(1, 13)]


def duration(seconds: float) -> list[str]:
    """The number of "38 s" or "2.3 min", as docs/tutorials/run_all.py writes a time."""
    return [f"{seconds:.0f}"] if seconds < 90 else [f"{seconds / 60:.1f}"]


def cell_numbers(times: dict) -> list[str]:
    return duration(times["full_s"]) + duration(times["quick_s"])


CLAIMS = [
    ('23.0 min / 45 s | <img src="figures/01_length.png"', lambda r, fig: cell_numbers(r["tutorials"]["01"])),
    ('64 s / 57 s | <img src="figures/02_similarity.png"', lambda r, fig: cell_numbers(r["tutorials"]["02"])),
    ('27 s / 16 s | <img src="figures/03_fits.png"', lambda r, fig: cell_numbers(r["tutorials"]["03"])),
    ('18 s / 13 s | <img src="figures/04_scaling.png"', lambda r, fig: cell_numbers(r["tutorials"]["04"])),
    ('56 s / 23 s | <img src="figures/05_schemes.png"', lambda r, fig: cell_numbers(r["tutorials"]["05"])),
    ('18 s / 17 s | <img src="figures/06_cross_attention.png"', lambda r, fig: cell_numbers(r["tutorials"]["06"])),
    ('2.1 min / 40 s | <img src="figures/07_block_diagram.png"', lambda r, fig: cell_numbers(r["tutorials"]["07"])),
    ('13 s / 14 s | <img src="figures/08_attention_cost.png"', lambda r, fig: cell_numbers(r["tutorials"]["08"])),
    ('14 s / 16 s | <img src="figures/09_greedy_steps.png"', lambda r, fig: cell_numbers(r["tutorials"]["09"])),
    ('4.3 min / 30 s | <img src="figures/10_families.png"', lambda r, fig: cell_numbers(r["tutorials"]["10"])),
    ('77 s / 21 s | <img src="figures/11_cross_attention.png"', lambda r, fig: cell_numbers(r["tutorials"]["11"])),
    ('1.7 min / 30 s | <img src="figures/12_sliding.png"', lambda r, fig: cell_numbers(r["tutorials"]["12"])),
    (
        "of all 12 (`python docs/tutorials/run_all.py`",
        lambda r, fig: str(len(r["tutorials"])),
    ),
    (
        "on the 2 cores of an Intel(R) Xeon(R) Processor (AVX-512, AMX)",
        lambda r, fig: [str(r["cores"]), *re.findall(r"(?<![\w.])\d+(?!\w)", r["cpu"])],
    ),
    (
        " with nothing else running, on 2026-11-28: 35.8 min in full, 5.4 min with `--quick`.",
        lambda r, fig: r["date"].split("-") + duration(r["full_total_s"]) + duration(r["quick_total_s"]),
    ),
]
GIVEN = [
    *[(row, "the tutorial's number") for row in ROWS],
    ('width="240">', "the thumbnails' width", 12),
    ("tokens per word at 600 / 2,000 / 8,000", "tutorial 02's vocabulary sizes"),
    ("noisy 1-D function", "a name"),
    ("a 24-layer stack", "tutorial 07's setting"),
    ("| 07's encoder block and 10's decoder block", "cross-references"),
    ("YaRN, Llama 3)", "a name"),
    ("Tutorials 02, 06 and 09 reused", "cross-references"),
    ("Tutorials 02, 06 and 09 read", "cross-references"),
]
