"""Planning at 1 M to 10 M Iceberg manifest entries (issue 23 part 4): ``python -m bench.scale_iceberg
--entries 1000000,3000000,10000000 [--workdir DIR] [--ops compact,orphans,expire] [--keep]``.

For each size, :func:`bench.workloads.iceberg_manifests.manifest_set` writes a metadata-only table
(manifests of 10,000 entries, two snapshots); then compaction, orphan removal and snapshot expiry are
each planned (``dry_run``, through :mod:`lakeops.api`, in driver threads) in a fresh child process
(``python -m bench.scale_iceberg --child OP TABLE``), which reports its wall time around the call and
its peak RSS (``VmHWM``, exact). One JSON line per run goes to stdout and ``--out``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.child import MARKER, _peak_mb

OPS = ("compact", "orphans", "expire")


def _plan(op: str, table: str) -> dict[str, object]:
    """Plan ``op`` on ``table`` (dry run) and return the figures that show the work was done."""
    from lakeops import api
    from lakeops.ops.options import CompactionOptions, ExpiryOptions, OrphansOptions
    from lakeops.ops.report import Report

    report: Report
    if op == "compact":
        report = api.compact(table, CompactionOptions(), dry_run=True)
    elif op == "orphans":
        report = api.orphans(table, OrphansOptions(), dry_run=True)
    else:
        report = api.expire(table, ExpiryOptions(older_than="0s", retain_last=1, force=True), dry_run=True)
    metrics = report.metrics()
    return {k: v for k, v in metrics.items() if isinstance(v, int | float | str) and not isinstance(v, bool)}


def _child(op: str, table: str) -> None:
    started = time.perf_counter()
    info = _plan(op, table)
    seconds = time.perf_counter() - started
    print(MARKER + json.dumps({"seconds": seconds, "driver_peak_mb": _peak_mb(), "info": info}), flush=True)


def _measure(op: str, table: str, limit_gb: float | None) -> dict[str, object]:
    command = [sys.executable, "-m", "bench.scale_iceberg", "--child", op, table]
    if limit_gb:  # an address-space cap, so a run that would exhaust the shared machine fails instead
        command = ["prlimit", f"--as={int(limit_gb * (1 << 30))}", *command]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(MARKER)]
    if done.returncode != 0 or not lines:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return json.loads(lines[-1][len(MARKER) :])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scale_iceberg")
    parser.add_argument("--entries", default="1000000,3000000,10000000")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    parser.add_argument("--limit-gb", type=float, default=None, help="address-space cap of each child")
    parser.add_argument("--keep", action="store_true", help="keep the generated tables")
    parser.add_argument("--child", nargs=2, metavar=("OP", "TABLE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(*args.child)
        return
    from bench.workloads.iceberg_manifests import manifest_set

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="scale-iceberg-"))
    for entries in (int(e) for e in args.entries.split(",")):
        root = workdir / f"entries-{entries}"
        if not (root / "table" / "metadata" / "v1.metadata.json").exists():
            shutil.rmtree(root, ignore_errors=True)
            started = time.perf_counter()
            manifest_set(root, entries=entries)
            print(f"# generated {entries:,} entries in {time.perf_counter() - started:.1f} s", flush=True)
        for op in args.ops.split(","):
            result = {"entries": entries, "op": op, **_measure(op, str(root / "table"), args.limit_gb)}
            line = json.dumps(result)
            print(line, flush=True)
            if args.out:
                with open(args.out, "a") as out:
                    out.write(line + "\n")
        if not args.keep:
            shutil.rmtree(root)


if __name__ == "__main__":
    main()
