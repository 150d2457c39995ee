"""What a refused ``lakeops cdc`` run leaves at an output it never created: no change table, only the
audit record of its failure (:mod:`lakeops.audit` records a cdc run under its output)."""

from __future__ import annotations

from pathlib import Path

from lakeops import audit


def failed_run_records(output: Path) -> int:
    """How many audit records of failed runs ``output`` holds, asserting it holds no other file and no
    record of a run that succeeded."""
    files = sorted(p for p in output.rglob("*") if p.is_file())
    assert all(p.parent == output / "_lakeops_audit" for p in files), f"{output} holds more than audit records: {files}"
    records = audit.read_records(str(output))
    assert len(records) == len(files) and all(r.status == "failed" for r in records), records
    return len(records)
