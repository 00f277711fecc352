"""Side-by-side speed and memory benchmarks of hf_attention against the Hugging Face reference models.

    python -m benchmarks.run [--preset full|quick|tiny] [--sections ...] [--families ...] [--out DIR]
    python -m benchmarks.report RESULTS.json --docs docs/benchmarks.md    (re-render without re-measuring)

See `benchmarks/run.py` for the sections and the method.
"""

import os

# Python runs this file before any module of the package, so under `python -m benchmarks.run` this is set before
# torch is imported and starts its OpenMP pool: spinning workers avoid a sleep/wake per small op. The shell's value,
# if any, wins.
os.environ.setdefault("OMP_WAIT_POLICY", "ACTIVE")
