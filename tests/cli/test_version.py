"""``lakeops --version``: the installed distribution's version, as pip and the deployment lock name it."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path


def test_version_prints_the_installed_release_and_exits_0() -> None:
    lakeops = Path(sys.executable).with_name("lakeops")  # the console script pip installed
    done = subprocess.run([str(lakeops), "--version"], capture_output=True, text=True, timeout=120, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"lakeops {importlib.metadata.version('lakeops')}\n", "")
