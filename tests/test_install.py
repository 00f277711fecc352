"""Installing hf-attention beside a torch in the declared range leaves that torch alone.

A GPU image ships its own CUDA build of torch (2.11 on the images of 2026-11); a requirement it does not meet would
make pip replace it with a multi-GB download. CI runs this file on the newest torch and on the floor
(`.ci/lowest-releases`), so both ends of the range are checked with the torch actually installed.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import tomllib
import torch
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]


def test_the_installed_torch_is_in_the_declared_range():
    (torch_requirement,) = (r for r in map(Requirement, PROJECT["dependencies"]) if r.name == "torch")
    assert torch_requirement.specifier.contains(Version(torch.__version__).base_version)


def test_pip_resolves_the_requirements_to_what_is_installed(tmp_path):
    """pip, offline, given the library's requirements: nothing to install, so an installed torch is never replaced.

    Without the machine's own pip settings (a configuration file capping torch, a folder of wheels): what is checked
    is the project's requirements against what is installed."""
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--quiet", "--report", str(report)]
    env = {name: value for name, value in os.environ.items() if not name.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # pip then reads no configuration file
    done = subprocess.run([*command, *PROJECT["dependencies"]], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    installs = [item["metadata"]["name"] for item in json.loads(report.read_text())["install"]]
    assert installs == [], f"pip would install {installs} beside torch {torch.__version__}"
