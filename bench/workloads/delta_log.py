"""Delta logs written directly as JSON commits, for the operations that read the log, not the data.

A checkpoint only replays actions, so its workload is log-only: ``actions`` add actions (with
statistics, as real writers record them) spread over commits, and no data files. Vacuum needs the
files it deletes, so its workload writes tiny placeholder files for every tombstone, old enough
(file mtime and ``deletionTimestamp``) to be past the default 7-day retention.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from bench.workloads.model import Workload, tree_bytes

DAY_MS = 86_400_000
SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "amount", "type": "double", "nullable": True, "metadata": {}},
        {"name": "day", "type": "string", "nullable": True, "metadata": {}},
    ],
}


def _header(now_ms: int) -> list[str]:
    protocol = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}
    metadata = {
        "metaData": {
            "id": "5f6a3c1e-bench-0000-0000-000000000001",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(SCHEMA),
            "partitionColumns": ["day"],
            "configuration": {},
            "createdTime": now_ms,
        }
    }
    return [json.dumps(protocol), json.dumps(metadata)]


def _commit_info(now_ms: int, operation: str) -> str:
    return json.dumps({"commitInfo": {"timestamp": now_ms, "operation": operation, "engineInfo": "lakeops-bench"}})


def _file_action(kind: str, i: int, days: int, **fields: object) -> str:
    """An ``add`` or ``remove`` of placeholder file ``i`` (4 KiB, in day ``i % days``)."""
    day = f"2024-01-{1 + i % days:02d}"
    action = {"path": _path(i, days), "partitionValues": {"day": day}, "size": 4096, "dataChange": True, **fields}
    return json.dumps({kind: action})


def _path(i: int, days: int) -> str:
    return f"day=2024-01-{1 + i % days:02d}/part-{i:08d}-bench.snappy.parquet"


def _add(i: int, days: int, now_ms: int) -> str:
    stats = {
        "numRecords": 1000,
        "minValues": {"id": i * 1000, "amount": 0.0},
        "maxValues": {"id": i * 1000 + 999, "amount": 1.0},
        "nullCount": {"id": 0, "amount": 0},
    }
    return _file_action("add", i, days, modificationTime=now_ms, stats=json.dumps(stats))


def _remove(i: int, days: int, when_ms: int) -> str:
    return _file_action("remove", i, days, deletionTimestamp=when_ms, extendedFileMetadata=True)


def _write_commit(log: Path, version: int, lines: list[str]) -> None:
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def _write_adds(root: Path, actions: int, per_commit: int, days: int, now_ms: int) -> int:
    """Version 0 (protocol, metadata) then adds in commits of ``per_commit``; returns the last version."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    _write_commit(log, 0, [_commit_info(now_ms, "CREATE TABLE"), *_header(now_ms)])
    version = 0
    for start in range(0, actions, per_commit):
        version += 1
        adds = [_add(i, days, now_ms) for i in range(start, min(actions, start + per_commit))]
        _write_commit(log, version, [_commit_info(now_ms, "WRITE"), *adds])
    return version


def add_log(root: Path, *, actions: int, per_commit: int = 10_000, days: int = 30) -> Workload:
    """A log of ``actions`` live add actions and no data files (a checkpoint's input)."""
    now_ms = int(time.time() * 1000)
    version = _write_adds(root, actions, per_commit, days, now_ms)
    return Workload(
        root=root,
        target=str(root),
        size=actions,
        unit="add actions",
        bytes=tree_bytes(root),
        params={"version": version},
    )


def tombstones(root: Path, *, files: int, days: int = 30, age_days: int = 30) -> Workload:
    """``files`` files added then removed in one commit ``age_days`` ago (log and file mtimes), so
    every one is past the default retention; the garbage list is in ``params["garbage"]``."""
    now_ms = int(time.time() * 1000)
    then_ms = now_ms - age_days * DAY_MS
    version = _write_adds(root, files, 10_000, days, then_ms)
    _write_commit(
        root / "_delta_log",
        version + 1,
        [_commit_info(then_ms, "DELETE"), *(_remove(i, days, then_ms) for i in range(files))],
    )
    garbage = [_path(i, days) for i in range(files)]
    stamp = then_ms / 1000
    for relative in garbage:
        path = root / relative
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"PAR1")
        os.utime(path, (stamp, stamp))
    for commit in (root / "_delta_log").iterdir():
        os.utime(commit, (stamp, stamp))
    return Workload(
        root=root,
        target=str(root),
        size=files,
        unit="tombstoned files",
        bytes=tree_bytes(root),
        params={"garbage": garbage},
    )
