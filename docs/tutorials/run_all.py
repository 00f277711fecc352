"""Run every tutorial in full and then with --quick, one after another, and write how long each took.

    python docs/tutorials/run_all.py            # rewrites docs/figures (figures, NN_results.json, tutorial_times.json)
    python docs/tutorials/run_all.py --fresh    # first deletes the tutorials' own trained runs, as on a new clone

    python docs/tutorials/run_all.py --only 05 13  # those two; the others keep their times, machine and date

The full runs rewrite the committed figures and results; the quick runs write to a temporary folder. The times go to
docs/figures/tutorial_times.json, each with the machine and date it was measured on, and into docs/README.md's table of
tutorials and the sentence below it (a test checks that the two agree). Run nothing else meanwhile: the times are
wall-clock.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TIMES = ROOT / "docs" / "figures" / "tutorial_times.json"
README = ROOT / "docs" / "README.md"
OWN_RUNS = [ROOT / "outputs" / "tutorial_en_de", ROOT / "outputs" / "tutorial_en_de_quick"]


def cpu_name() -> str:
    """The CPU's model name and, on Linux, the vector extensions that decide how fast PyTorch runs on it."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or platform.machine()
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    extensions = [label for flag, label in (("avx512f", "AVX-512"), ("amx_tile", "AMX")) if flag in flags]
    if not extensions and "avx2" in flags:
        extensions = ["AVX2"]
    return f"{name} ({', '.join(extensions)})" if extensions else name


def duration(seconds: float) -> str:
    """38 s, 2.3 min: how docs/README.md writes a time."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def machine_groups(record: dict) -> list[tuple[list[str], dict]]:
    """The tutorials grouped by the run that timed them (CPU, cores, date), in order of their first tutorial."""
    groups: dict[tuple, list[str]] = {}
    for name, times in sorted(record["tutorials"].items()):
        groups.setdefault((times["cpu"], times["cores"], times["date"]), []).append(name)
    return [(names, dict(zip(("cpu", "cores", "date"), key, strict=True))) for key, names in groups.items()]


def names_of(names: list[str]) -> str:
    """01–12, or 02, 06 and 13: how the sentence lists a group of tutorials."""
    numbers = [int(name) for name in names]
    if len(numbers) > 2 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"{names[0]}–{names[-1]}"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def times_sentence(record: dict) -> str:
    """The sentence under docs/README.md's table: where and when each tutorial was timed, and the totals."""
    parts = []
    for names, machine in machine_groups(record):
        full = sum(record["tutorials"][name]["full_s"] for name in names)
        quick = sum(record["tutorials"][name]["quick_s"] for name in names)
        parts.append(
            f"{names_of(names)} on the {machine['cores']} cores of an {machine['cpu']} on {machine['date']} "
            f"({duration(full)} in full, {duration(quick)} with `--quick`)"
        )
    return (
        "The times were measured by `python docs/tutorials/run_all.py` (each tutorial in full and then with "
        f"`--quick`, one after another, with nothing else running): {'; '.join(parts)}."
    )


def write_readme_times(record: dict) -> None:
    """The "full / --quick" cell of each tutorial's row of docs/README.md's table, and the sentence under it."""
    text = README.read_text()
    for name, times in record["tutorials"].items():
        cell = f"{duration(times['full_s'])} / {duration(times['quick_s'])}"
        row = re.compile(rf"^(\| {name} \|(?:[^|]*\|){{2}}) [^|]* (\|.*)$", re.MULTILINE)
        text, count = row.subn(lambda match, cell=cell: f"{match.group(1)} {cell} {match.group(2)}", text)
        if count != 1:
            raise SystemExit(f"docs/README.md: no single table row for tutorial {name}")
    text, count = re.subn(
        r"^The times (?:are|were) .*?`--quick`.*?\.$", times_sentence(record), text, flags=re.M | re.S
    )
    if count != 1:
        raise SystemExit("docs/README.md: no sentence 'The times were measured ...' to rewrite")
    README.write_text(text)


def run(script: Path, *flags: str) -> float:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    started = time.perf_counter()
    subprocess.run([sys.executable, str(script), *flags], cwd=ROOT, check=True, env=environment)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", action="store_true", help="delete the tutorials' own trained runs first")
    parser.add_argument("--only", nargs="*", default=None, help="tutorial numbers to run (default: all)")
    args = parser.parse_args()
    if args.fresh:
        for folder in OWN_RUNS:
            shutil.rmtree(folder, ignore_errors=True)
    scripts = sorted(HERE.glob("[0-9][0-9]_*.py"))
    if args.only:
        scripts = [s for s in scripts if s.name[:2] in args.only]
    # With --only, the other tutorials keep the times (and the machine and date) of the run that measured them.
    times = json.loads(TIMES.read_text())["tutorials"] if TIMES.is_file() and args.only else {}
    full = {s.name[:2]: run(s) for s in scripts}
    with tempfile.TemporaryDirectory() as scratch:
        quick = {s.name[:2]: run(s, "--quick", "--figures", str(Path(scratch) / s.stem)) for s in scripts}
    machine = {"cpu": cpu_name(), "cores": os.cpu_count(), "date": date.today().isoformat()}
    for name in full:
        times[name] = {"full_s": round(full[name], 1), "quick_s": round(quick[name], 1), **machine}
    record = {
        "fresh": args.fresh,
        "tutorials": dict(sorted(times.items())),
        "full_total_s": round(sum(t["full_s"] for t in times.values()), 1),
        "quick_total_s": round(sum(t["quick_s"] for t in times.values()), 1),
    }
    TIMES.write_text(json.dumps(record, indent=2) + "\n")
    write_readme_times(record)
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
