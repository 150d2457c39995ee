"""``python -m bench.scale --actions 1000000,3000000,10000000``: Delta at 10 M files (issue 23 part 4).

For each size, a log-only table (:func:`bench.workloads.delta_scale.scale_log`) is generated once
under ``--workdir`` (kept for later runs), then each operation runs through :mod:`lakeops.api` in a
fresh child process: compaction planning (dry run), VACUUM planning (dry run) and a checkpoint of
the latest version, in that order (the checkpoint is removed again afterwards, so the table is the
same for the next run). Each child reports its wall time around the call and its peak RSS
(``VmHWM``, exact). Prints a Markdown table and writes ``bench/results/scale-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.child import MARKER, _peak_mb

HERE = Path(__file__).resolve().parent
OPERATIONS = ("compact_plan", "vacuum_plan", "checkpoint")


def _operation(name: str, root: str) -> dict[str, object]:
    from lakeops import api
    from lakeops.ops.report import Report

    report: Report
    if name == "compact_plan":
        report = api.compact(root, dry_run=True)
    elif name == "vacuum_plan":
        report = api.orphans(root, dry_run=True)
    else:
        report = api.checkpoint(root)
    metrics = report.metrics()
    return {k: v for k, v in metrics.items() if isinstance(v, int | float | str) and not isinstance(v, bool)}


def child(name: str, root: str) -> None:
    started = time.perf_counter()
    info = _operation(name, root)
    seconds = time.perf_counter() - started
    print(MARKER + json.dumps({"seconds": seconds, "driver_peak_mb": _peak_mb(), "info": info}), flush=True)


def _measure(name: str, root: Path, limit_gb: float) -> dict[str, object]:
    """One child run; stopped once its RSS passes ``limit_gb`` (the machine is shared: an
    unbounded run must not take the others' memory), which is reported as its result."""
    command = [sys.executable, "-m", "bench.scale", "--child", name, str(root)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as child:
        while child.poll() is None:
            if _rss_gb(child.pid) > limit_gb:
                child.kill()
                child.communicate()
                return {"error": f"stopped: driver RSS above {limit_gb} GB", "above_gb": limit_gb}
            time.sleep(0.2)
        stdout, stderr = child.communicate()
    lines = [line for line in stdout.splitlines() if line.startswith(MARKER)]
    if child.returncode or not lines:
        return {"error": (stderr or stdout)[-2000:]}
    return json.loads(lines[-1][len(MARKER) :])


def _rss_gb(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    return next((int(line.split()[1]) / 2**20 for line in status.splitlines() if line.startswith("VmRSS:")), 0.0)


def _table(root: Path, actions: int) -> Path:
    from bench.workloads.delta_scale import scale_log

    table = root / f"delta-{actions}"
    if not (table / "_delta_log" / "_last_checkpoint").exists():
        started = time.perf_counter()
        scale_log(table, actions=actions)
        print(f"generated {actions:,} actions in {time.perf_counter() - started:.1f} s", flush=True)
    return table


def _reset(table: Path, before: set[str], pointer: bytes) -> None:
    """Remove what a checkpoint run wrote, so every run starts from the generated table."""
    log = table / "_delta_log"
    for path in log.iterdir():
        if path.name not in before:
            path.unlink()
    (log / "_last_checkpoint").write_bytes(pointer)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    parser.add_argument("--actions", default="1000000,3000000,10000000", help="comma-separated sizes")
    parser.add_argument("--operation", action="append", choices=OPERATIONS, help="only these (repeatable)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lakeops-bench-scale"))
    parser.add_argument("--limit-gb", type=float, default=6.0, help="stop a run whose driver RSS passes this")
    parser.add_argument("--label", default="", help="recorded with the results (e.g. the code's commit)")
    parser.add_argument("--child", nargs=2, metavar=("OPERATION", "ROOT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    rows = []
    print("| actions | operation | wall s | driver peak MB |\n|---:|---|---:|---:|", flush=True)
    for actions in (int(a) for a in args.actions.split(",")):
        table = _table(args.workdir, actions)
        log = table / "_delta_log"
        before, pointer = {p.name for p in log.iterdir()}, (log / "_last_checkpoint").read_bytes()
        for name in args.operation or OPERATIONS:
            result = _measure(name, table, args.limit_gb)
            _reset(table, before, pointer)
            rows.append({"actions": actions, "operation": name, **result})
            if "error" in result:
                print(f"| {actions:,} | {name} | failed | {str(result['error'])[-300:]!r} |", flush=True)
            else:
                print(
                    f"| {actions:,} | {name} | {result['seconds']:.1f} | {result['driver_peak_mb']:,.0f} |", flush=True
                )
    stamp = datetime.now(UTC)
    out = HERE / "results" / f"scale-{stamp:%Y-%m-%dT%H%M}.json"
    out.write_text(json.dumps({"time": stamp.isoformat(), "label": args.label, "runs": rows}, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
