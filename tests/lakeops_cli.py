"""Running the ``lakeops`` command line in-process, as a user would, and reading its JSON report."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spark_jobs.cli import main as lakeops


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    """``lakeops ARGV --json``; asserts exit status 0 and returns the report."""
    code = lakeops([*argv, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    report: dict[str, Any] = json.loads(captured.out)
    return report
