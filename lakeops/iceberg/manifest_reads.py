"""Data manifests read by a plan's executor, not the driver, when a plan would read many of them
(issue 23: a 10-million-entry table is planned within a bounded driver).

A unit is a few manifests with the :class:`~lakeops.iceberg.scan.FileSelection` to apply; its task
(:func:`read_manifest_unit`, pure, runs in a Spark task or a driver thread) returns only what
planning needs, compact: the chosen files' planning columns and every partition's file count and
bytes, as Arrow IPC streams. :func:`executor_reader` sends units to the executor
(:class:`lakeops.executors.Executor`: Spark tasks when a cluster is configured, driver threads when
Spark would only be a local session, as for every plan whose units read bytes) once a plan reads
more than ``threshold`` data manifests, and reads fewer in driver threads.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa
from pydantic import BaseModel, ConfigDict
from rich.console import Console

from lakeops.executors import Executor
from lakeops.iceberg.manifest_list import ManifestFile
from lakeops.iceberg.scan import FileSelection, ManifestReader, ManifestSelection, read_in_threads, select_from_manifest
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import normalize

__all__ = [
    "DEFAULT_MANIFEST_THRESHOLD",
    "MANIFESTS_PER_UNIT",
    "ManifestReadResult",
    "ManifestReadUnit",
    "executor_reader",
    "read_manifest_unit",
]

#: Data manifests a plan reads in driver threads; more go to the executor. A manifest of 10,000
#: entries takes about a tenth of a second of one core to decode: a few hundred are seconds.
DEFAULT_MANIFEST_THRESHOLD = 200
#: Manifests per unit: results of a few thousand entries' worth of selected rows at most.
MANIFESTS_PER_UNIT = 4


class ManifestReadUnit(BaseModel):
    """The data manifests one task reads (with their manifest-list records, for inheritance) under
    ``location``, and what to keep of them."""

    model_config = ConfigDict(frozen=True)

    unit_id: int
    table_location: str
    storage: StorageOptions
    manifests: list[ManifestFile]
    selection: FileSelection


class ManifestReadResult(BaseModel):
    """Per manifest of the unit, in order: its spec id, and its chosen rows and partition totals as
    Arrow IPC streams (:class:`~lakeops.iceberg.scan.ManifestSelection`)."""

    model_config = ConfigDict(frozen=True, ser_json_bytes="base64", val_json_bytes="base64")

    unit_id: int
    spec_ids: list[int]
    chosen: list[bytes]
    totals: list[bytes]

    def selections(self) -> list[ManifestSelection]:
        return [
            ManifestSelection(spec_id, _read_ipc(chosen), _read_ipc(totals))
            for spec_id, chosen, totals in zip(self.spec_ids, self.chosen, self.totals, strict=True)
        ]


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def _read_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


def read_manifest_unit(unit: ManifestReadUnit) -> ManifestReadResult:
    """Read the unit's manifests (a Spark task's or a driver thread's work)."""
    storage = open_storage(normalize(unit.table_location, literal=True), unit.storage)
    found = [select_from_manifest(storage, m, unit.selection) for m in unit.manifests]
    return ManifestReadResult(
        unit_id=unit.unit_id,
        spec_ids=[f.spec_id for f in found],
        chosen=[_ipc(f.chosen) for f in found],
        totals=[_ipc(f.totals) for f in found],
    )


def executor_reader(
    executor: Executor,
    *,
    location: str,
    storage_options: StorageOptions,
    threshold: int,
    label: str,
    progress: Console,
) -> ManifestReader:
    """A :data:`~lakeops.iceberg.scan.ManifestReader` that reads more than ``threshold`` manifests as
    units on ``executor`` (``work_bytes``: the manifests' lengths), fewer in driver threads."""

    def read(manifests: Sequence[ManifestFile], selection: FileSelection) -> Iterable[ManifestSelection]:
        if len(manifests) <= threshold:
            return read_in_threads(open_storage(normalize(location, literal=True), storage_options))(
                manifests, selection
            )
        units = [
            ManifestReadUnit(
                unit_id=i // MANIFESTS_PER_UNIT,
                table_location=location,
                storage=storage_options,
                manifests=list(manifests[i : i + MANIFESTS_PER_UNIT]),
                selection=selection,
            )
            for i in range(0, len(manifests), MANIFESTS_PER_UNIT)
        ]
        results = executor.run_units(
            units,
            read_manifest_unit,
            ManifestReadResult,
            label=f"reading {len(manifests)} manifests",
            description=f"{label}: reading manifests",
            progress=progress,
            work_bytes=sum(m.manifest_length for m in manifests),
        )
        return (selection for result in results for selection in result.selections())

    return read
