"""Counting how often a call finds and reads a table: target resolutions (``resolve_target``), format
detections (``detect_format``) and reads of a table's latest state (a Delta snapshot replayed at the
latest version, an Iceberg table's metadata loaded, an Icechunk repository's format and refs read),
each recorded with the table it was for."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

import lakeops.delta.snapshot
import lakeops.iceberg.table
import lakeops.icechunk.versioned
import lakeops.ops.detect
import lakeops.ops.target
from lakeops.storage.uri import normalize


@dataclass
class Reads:
    """Per table (its normalised location, or a catalog table's identifier): how often it was found,
    detected and read."""

    found: Counter[str] = field(default_factory=Counter)
    detected: Counter[str] = field(default_factory=Counter)
    loaded: Counter[str] = field(default_factory=Counter)

    def of(self, table: str) -> tuple[int, int, int]:
        """``(found, detected, loaded)`` of ``table``."""
        return self.found[table], self.detected[table], self.loaded[table]


def _name(table: object) -> str:
    text = str(table)
    return text if "://" not in text and "/" not in text else normalize(text)


def count_reads(monkeypatch: pytest.MonkeyPatch) -> Reads:
    """Wrap the three functions wherever lakeops, spark_jobs and orchestration bound them, and return
    the counts they keep from now on."""
    reads = Reads()
    resolve_target = lakeops.ops.target.resolve_target
    detect_format = lakeops.ops.detect.detect_format
    load_snapshot = lakeops.delta.snapshot.load_snapshot
    load_table = lakeops.iceberg.table.load_table
    load_repository_state = lakeops.icechunk.versioned.load_repository_state

    def counted_resolve(table: str, catalog: Any, storage_options: Any) -> Any:
        reads.found[table if catalog.catalogued else normalize(table)] += 1
        return resolve_target(table, catalog, storage_options)

    def counted_detect(storage: Any, location: str) -> Any:
        reads.detected[normalize(location)] += 1
        return detect_format(storage, location)

    def counted_snapshot(storage: Any, table_root: str, **kwargs: Any) -> Any:
        if kwargs.get("version") is None and kwargs.get("timestamp") is None:
            reads.loaded[normalize(table_root)] += 1
        return load_snapshot(storage, table_root, **kwargs)

    def counted_table(ref: Any, storage_options: Any, **kwargs: Any) -> Any:
        reads.loaded[ref.identifier or normalize(ref.location)] += 1
        return load_table(ref, storage_options, **kwargs)

    def counted_repository(storage: Any, root: str) -> Any:
        reads.loaded[normalize(root)] += 1
        return load_repository_state(storage, root)

    wrappers = {
        "resolve_target": (resolve_target, counted_resolve),
        "detect_format": (detect_format, counted_detect),
        "load_snapshot": (load_snapshot, counted_snapshot),
        "load_table": (load_table, counted_table),
        "load_repository_state": (load_repository_state, counted_repository),
    }
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith(("lakeops", "spark_jobs", "orchestration")):
            continue
        for attribute, (original, wrapper) in wrappers.items():
            if getattr(module, attribute, None) is original:
                monkeypatch.setattr(module, attribute, wrapper)
    return reads
