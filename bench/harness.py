"""One benchmark run: for each case and scale, generate the workload once, then run the contenders
``repeats`` times on identical copies, alternating their order (ours, peer, limit; then reversed) so
that drift in a shared machine's load falls on each alike; medians, ratios and peaks per case."""

from __future__ import annotations

import datetime as dt
import os
import platform
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.cases import BY_NAME, CASES, Case
from bench.measure import Measurement, measure
from bench.stats import median, ratio, slope
from bench.workspace import Workspace

#: Scales and repeats per tier.
TIERS: dict[str, tuple[tuple[int, ...], int]] = {"tiny": ((1,), 1), "quick": ((1,), 3), "full": ((1, 4, 16), 3)}
#: Where ours runs: as the CLI does with no master configured (spark_jobs.spark_settings.SparkSettings).
EXECUTION = "ours: on the driver unless a plan of more than 16 units without a byte figure starts Spark local[*]"
PACKAGES = ("deltalake", "pyiceberg", "pyarrow", "pyspark", "icechunk")


def _versions() -> dict[str, str]:
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def _order(contenders: dict[str, str], repeat: int) -> list[tuple[str, str]]:
    items = list(contenders.items())
    return items if repeat % 2 == 0 else items[::-1]


def _summary(runs: list[Measurement]) -> dict[str, Any]:
    return {
        "seconds": [round(r.seconds, 4) for r in runs],
        "median_s": round(median([r.seconds for r in runs]), 4),
        "median_process_s": round(median([r.process_s for r in runs]), 4),
        "driver_peak_mb": round(max(r.driver_peak_mb for r in runs), 1),
        "jvm_peak_mb": round(max(r.jvm_peak_mb for r in runs), 1),
        "worker_peak_mb": round(max(r.worker_peak_mb for r in runs), 1),
        "tree_peak_mb": round(max(r.tree_peak_mb for r in runs), 1),
        "info": runs[-1].info,
    }


def run_case(case: Case, tier: str, scale: int, repeats: int, base: Path, log: Callable[[str], None]) -> dict[str, Any]:
    space = Workspace(base / f"{case.name}-x{scale}")
    started = time.perf_counter()
    workload = case.workload(space.work, tier, scale)
    log(f"{case.name} x{scale}: {workload.size:,} {workload.unit} generated in {time.perf_counter() - started:.1f}s")
    space.freeze()
    params = {"root": str(space.work), "target": workload.target, "scratch": str(space.scratch), **workload.params}
    contenders = case.contenders()
    runs: dict[str, list[Measurement]] = {role: [] for role in contenders}
    for repeat in range(repeats):
        for role, runner in _order(contenders, repeat):
            space.restore()
            result = measure(runner, params, space.spec_dir)
            runs[role].append(result)
            log(f"  {role:5} {runner:22} {result.seconds:8.2f}s  driver {result.driver_peak_mb:6.0f} MB")
    space.remove()
    summaries = {role: _summary(measured) for role, measured in runs.items()}
    medians = {role: s["median_s"] for role, s in summaries.items()}
    ratios = {
        "ours_over_peer": ratio(medians["ours"], medians.get("peer")),
        "ours_over_limit": ratio(medians["ours"], medians.get("limit")),
    }
    return {
        "case": case.name,
        "title": case.title,
        "scale": scale,
        "workload": {"size": workload.size, "unit": workload.unit, "bytes": workload.bytes},
        "contenders": {role: {"runner": contenders[role], **s} for role, s in summaries.items()},
        "ratios": {k: None if v is None else round(v, 3) for k, v in ratios.items()},
        "targets": dict(case.targets),
        "note": case.note,
    }


def _slopes(results: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for name in dict.fromkeys(r["case"] for r in results):
        rows = [r for r in results if r["case"] == name]
        roles = rows[0]["contenders"].keys()
        sizes = [r["workload"]["size"] for r in rows]
        out[name] = {}
        for role in roles:
            value = slope(sizes, [r["contenders"][role]["median_s"] for r in rows])
            out[name][role] = None if value is None else round(value, 3)
    return out


def run(
    tier: str,
    *,
    cases: Sequence[str] | None = None,
    repeats: int | None = None,
    scales: Sequence[int] | None = None,
    base: Path,
    log: Callable[[str], None] = print,
    partial: Callable[[dict[str, Any]], object] | None = None,
) -> dict[str, Any]:
    """Run ``cases`` (default: all) at ``tier`` and ``scales`` (default: the tier's); return the
    results document (see bench/README.md). ``partial`` receives the document so far after each case
    and scale (``complete`` false), so a long run that dies keeps what it measured."""
    tier_scales, default_repeats = TIERS[tier]
    scales = tuple(scales or tier_scales)
    repeats = repeats or default_repeats
    chosen = [BY_NAME[name] for name in cases] if cases else list(CASES)
    started = time.perf_counter()
    results: list[dict[str, Any]] = []

    def document(complete: bool) -> dict[str, Any]:
        return {
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "size": tier,
            "repeats": repeats,
            "scales": list(scales),
            "complete": complete,
            "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
            "versions": _versions(),
            "execution": EXECUTION,
            "total_s": round(time.perf_counter() - started, 1),
            "results": list(results),
            "slopes": _slopes(results) if len(scales) > 1 else {},
        }

    for case in chosen:
        for scale in scales:
            results.append(run_case(case, tier, scale, repeats, base, log))
            if partial is not None and len(results) < len(chosen) * len(scales):
                partial(document(complete=False))
    return document(complete=True)
