"""The README's quick start runs as written: its Python blocks, in order, as one script in an empty folder."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def test_readme_quick_start_runs(tmp_path):
    blocks = PYTHON_BLOCK.findall((ROOT / "README.md").read_text())
    assert len(blocks) >= 2, "the quick start has a model block and a heatmap block"
    script = tmp_path / "quick_start.py"
    script.write_text("\n".join(blocks))
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "TOKENIZERS_PARALLELISM": "false"}
    completed = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600, env=environment
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    assert (tmp_path / "ckpt" / "config.json").is_file()
    assert (tmp_path / "attention_map.png").stat().st_size > 0
    assert "(4, 6, 6)" in completed.stdout  # what the README's comment says the heatmap holds
