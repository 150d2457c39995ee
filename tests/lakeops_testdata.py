"""Where the shared fixtures live: ``$LAKEOPS_TESTDATA``, else ``shared/testdata`` beside the checkout
(the layout of a developer machine and of CI), else the workplace's ``/work/shared/testdata``."""

from __future__ import annotations

import os
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]


def _locate() -> Path:
    if env := os.environ.get("LAKEOPS_TESTDATA"):
        return Path(env).resolve()
    for candidate in (_REPO.parent / "shared" / "testdata", Path("/work/shared/testdata")):
        if candidate.is_dir():
            return candidate.resolve()
    raise RuntimeError(f"shared test data not found beside {_REPO} nor at /work/shared/testdata; set LAKEOPS_TESTDATA")


TESTDATA = _locate()
