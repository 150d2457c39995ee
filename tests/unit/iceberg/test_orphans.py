"""Iceberg orphan-file rules without Spark: what the metadata references (metadata log, snapshots of
older metadata files, statistics, version-hint), URI comparison and prefix mismatches, the age floor,
listing two levels deep with the rest as listing units, and the re-check before deleting."""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg_tables import PyIcebergTable, batch, small_file_table

from lakeops.errors import InvalidArgument, UnsafeOperation
from lakeops.iceberg.maintenance.orphans import (
    Listing,
    OrphanOptions,
    OrphanPlan,
    PrefixMismatchMode,
    ReferencedFiles,
    _plain_below,
    check_older_than,
    list_unit,
    plan_listing,
    plan_orphans,
    recheck,
    referenced_files,
)
from lakeops.iceberg.table import IcebergTable, TableRef, load_table
from lakeops.storage import StorageOptions
from lakeops.storage.local import TMP_SUFFIX
from lakeops.storage.uri import normalize

OLD = 1_500_000_000.0  # July 2017: older than any floor
NOW_MS = int(time.time() * 1000)


def _ref(table: PyIcebergTable) -> TableRef:
    return TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier)


def _load(table: PyIcebergTable) -> IcebergTable:
    return load_table(_ref(table), StorageOptions())


def _age(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (OLD, OLD))


def _plant(path: Path, *, old: bool) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"left behind by a failed writer")
    if old:
        os.utime(path, (OLD, OLD))
    return path


def _plan(table: PyIcebergTable, options: OrphanOptions | None = None) -> OrphanPlan:
    options = options or OrphanOptions()
    listing = plan_listing(_load(table), options)
    return plan_orphans(listing, [list_unit(u) for u in listing.units], options, now_ms=NOW_MS)


def _names(plan: OrphanPlan) -> set[str]:
    return {c.path.rsplit("/", 1)[-1] for c in plan.candidates}


# --- URIs and prefix mismatches ----------------------------------------------------------------------


def test_s3a_and_trailing_slash_spellings_are_the_same_file() -> None:
    referenced = ReferencedFiles.of(
        "db.t", "s3://bucket/t/", "s3://bucket/t/metadata/v1.metadata.json", ["s3a://bucket/t/data/a.parquet"]
    )
    assert referenced.foreign == {}
    assert referenced.keeps("s3://bucket/t/data/a.parquet", PrefixMismatchMode.ERROR)
    assert referenced.keeps("s3n://bucket/t/data/a.parquet/", PrefixMismatchMode.ERROR)
    assert not referenced.keeps("s3://bucket/t/data/b.parquet", PrefixMismatchMode.ERROR)


@pytest.mark.parametrize(
    ("location", "spellings", "listed"),
    [
        (
            "/t/loc",
            [
                "/t/loc/data/a.parquet",
                "/t/loc/data/a.parquet",
                "file:///t/loc/data/a.parquet",
                "file:///t/loc/data/b.parquet",
                "/t/loc//data/c.parquet",
                "/t/loc/data/./d.parquet",
                "/t/loc/x/../data/e.parquet",
                "/t/loc/data/f%20g.parquet",
                "/t/locx/data/h.parquet",
                "/t/loc/",
            ],
            [
                "/t/loc/data/a.parquet",
                "/t/loc/data/b.parquet",
                "/t/loc/data/c.parquet",
                "/t/loc/data/d.parquet",
                "/t/loc/data/e.parquet",
                "/t/loc/data/f%20g.parquet",
                "/t/loc/data/f g.parquet",
                "/t/locx/data/h.parquet",
                "/t/loc/data/h.parquet",
                "/t/loc/data",
                "/t/loc",
            ],
        ),
        (
            "s3a://bucket/t/",
            ["s3a://bucket/t/data/a.parquet", "s3://bucket/t/data/b.parquet", "s3n://bucket/t/data/c.parquet/"],
            [
                "s3://bucket/t/data/a.parquet",
                "s3://bucket/t/data/b.parquet",
                "s3://bucket/t/data/c.parquet",
                "s3://bucket/t/data/d.parquet",
            ],
        ),
    ],
)
def test_paths_below_the_location_in_arrow_match_one_by_one_normalisation(
    location: str, spellings: list[str], listed: list[str]
) -> None:
    """The Arrow route (plain spellings below the location kept relative) answers exactly as
    normalising every reference would."""
    prefixes = list(dict.fromkeys([f"{normalize(location, literal=True).rstrip('/')}/", f"{location.rstrip('/')}/"]))
    below, others = _plain_below(prefixes, pa.array(spellings, pa.string()))
    assert len(below) >= 2  # the usual spellings took the Arrow route
    referenced = ReferencedFiles.of("db.t", location, f"{location}/metadata/v1.metadata.json", others, below=[below])
    expected = {normalize(p, literal=True) for p in spellings}
    assert referenced.references(listed) == [normalize(p, literal=True) in expected for p in listed]
    assert referenced.count() == len(expected)


def test_a_reference_in_another_bucket_stops_the_run_unless_told() -> None:
    referenced = ReferencedFiles.of(
        "db.t", "s3://bucket/t", "s3://bucket/t/metadata/v1.metadata.json", ["s3://replica/t/data/a.parquet"]
    )
    with pytest.raises(UnsafeOperation, match=r"db\.t: s3://bucket/t/data/a\.parquet is referenced as s3://replica"):
        referenced.keeps("s3://bucket/t/data/a.parquet", PrefixMismatchMode.ERROR)
    assert referenced.keeps("s3://bucket/t/data/a.parquet", PrefixMismatchMode.IGNORE)
    assert not referenced.keeps("s3://bucket/t/data/a.parquet", PrefixMismatchMode.DELETE)
    # A listed file whose path no foreign reference shares is simply unreferenced, in every mode.
    assert not referenced.keeps("s3://bucket/t/data/b.parquet", PrefixMismatchMode.ERROR)


def test_schemes_lakeops_cannot_open_are_compared_too() -> None:
    referenced = ReferencedFiles.of(
        "t", "/wh/t", "/wh/t/metadata/v1.metadata.json", ["hdfs://namenode:8020/wh/t/data/a.parquet"]
    )
    assert referenced.foreign == {"wh/t/data/a.parquet": "hdfs://namenode:8020/wh/t/data/a.parquet"}
    with pytest.raises(UnsafeOperation, match="hdfs://namenode:8020"):
        referenced.keeps("file:///wh/t/data/a.parquet", PrefixMismatchMode.ERROR)


# --- age floor ---------------------------------------------------------------------------------------


def test_a_floor_under_three_days_needs_the_override() -> None:
    with pytest.raises(UnsafeOperation, match=r"db\.t: --older-than 1d is shorter than the 3d floor.*--force-short"):
        check_older_than(OrphanOptions(older_than=timedelta(days=1)), "db.t")
    check_older_than(OrphanOptions(older_than=timedelta(days=1), force_short_retention=True), "db.t")
    check_older_than(OrphanOptions(older_than=timedelta(days=3)), "db.t")
    with pytest.raises(InvalidArgument, match="negative"):
        check_older_than(OrphanOptions(older_than=timedelta(days=-1), force_short_retention=True), "db.t")


# --- referenced files ----------------------------------------------------------------------------------


def test_referenced_files_cover_the_metadata_log_and_its_snapshots(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "identity", appends=3, rows=9)
    first = table.table.snapshots()[0]
    first_files = {t.file.file_path for t in table.table.scan(snapshot_id=first.snapshot_id).plan_files()}
    table.table.delete("id < 9")  # copy-on-write: the first append's files leave the current snapshot
    table.reload()
    # A current metadata file that no longer lists the first snapshot, as after an expiry whose file
    # deletion never ran: only the metadata-log files still reach its manifest list and data files.
    loaded = _load(table)
    current = Path(loaded.metadata_location.removeprefix("file://"))
    document = json.loads(current.read_text())
    document["snapshots"] = [s for s in document["snapshots"] if s["snapshot-id"] != first.snapshot_id]
    document["snapshot-log"] = [s for s in document["snapshot-log"] if s["snapshot-id"] != first.snapshot_id]
    current.write_text(json.dumps(document))
    loaded = _load(table)

    referenced = referenced_files(loaded)

    paths = referenced.paths
    location = loaded.metadata.location.removeprefix("file://")
    assert loaded.metadata_location.removeprefix("file://") in paths
    assert f"{location}/metadata/version-hint.text" in paths
    assert {e.metadata_file.removeprefix("file://") for e in loaded.metadata.metadata_log} <= paths
    assert first.manifest_list.removeprefix("file://") in paths
    assert all(referenced.references(sorted(first_files)))  # data files: in the Arrow part, ``below``
    assert len(loaded.metadata.snapshots) == 3 and referenced.snapshots == 4  # three appends and the delete
    assert referenced.metadata_files == 1 + len(loaded.metadata.metadata_log)
    assert referenced.foreign == {}


def test_snapshots_of_older_metadata_files_whose_files_an_expiry_deleted_are_skipped(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "identity", appends=3, rows=9)
    appends = table.table.snapshots()
    table.table.delete("id < 9")  # copy-on-write: replaces the first append's manifest
    table.reload()
    # As after an expiry of the three appends: the current metadata no longer lists them, and the
    # first one's manifest list and the manifest only they named are deleted, while the metadata-log
    # files still name them (the concurrent-writers run found orphans failing on this after expiries).
    loaded = _load(table)
    current = Path(loaded.metadata_location.removeprefix("file://"))
    document = json.loads(current.read_text())
    gone = {s.snapshot_id for s in appends}
    document["snapshots"] = [s for s in document["snapshots"] if s["snapshot-id"] not in gone]
    document["snapshot-log"] = [s for s in document["snapshot-log"] if s["snapshot-id"] not in gone]
    current.write_text(json.dumps(document))
    loaded = _load(table)
    kept = {m.manifest_path for m in table.table.current_snapshot().manifests(table.table.io)}  # type: ignore[union-attr]
    only_expired = {m.manifest_path for s in appends for m in s.manifests(table.table.io)} - kept
    assert only_expired
    for path in [appends[0].manifest_list, *only_expired]:
        Path(path.removeprefix("file://")).unlink()

    referenced = referenced_files(loaded)

    live = {t.file.file_path.removeprefix("file://") for t in table.table.scan().plan_files()}
    assert {p.removeprefix("file://") for p in kept} <= referenced.paths
    assert all(referenced.references(sorted(live)))
    assert appends[1].manifest_list.removeprefix("file://") in referenced.paths  # still there: still referenced
    assert referenced.snapshots == 4


def test_missing_metadata_log_files_are_counted_not_fatal(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=3, rows=5)
    loaded = _load(table)
    oldest = loaded.metadata.metadata_log[0].metadata_file
    Path(oldest.removeprefix("file://")).unlink()

    referenced = referenced_files(loaded)

    assert referenced.missing_metadata_files == 1
    assert referenced.metadata_files == len(loaded.metadata.metadata_log)
    assert oldest.removeprefix("file://") in referenced.paths  # still named by the log: never an orphan


# --- planning ----------------------------------------------------------------------------------------------


def test_exactly_the_old_unreferenced_files_are_candidates(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "identity", appends=3, rows=9)
    location = Path(table.location)
    _age(location)
    hint = _plant(location / "metadata" / "version-hint.text", old=True)
    old = [
        _plant(location / "data" / "category=a" / "old-orphan.parquet", old=True),
        _plant(location / "data" / "old-orphan.parquet", old=True),
        _plant(location / "metadata" / "old-orphan-m0.avro", old=True),
        _plant(location / "stray" / "deep" / "old-orphan.txt", old=True),
        _plant(location / "metadata" / f".v9.metadata.json.k2x9q1{TMP_SUFFIX}", old=True),  # a killed local write
    ]
    _plant(location / "data" / "category=b" / "new-orphan.parquet", old=False)
    _plant(location / "metadata" / "new-orphan.metadata.json", old=False)
    _plant(tmp_path / "warehouse" / "db" / "events_old" / "old-outside.parquet", old=True)  # shares the prefix

    plan = _plan(table)

    assert sorted(c.path for c in plan.candidates) == sorted(str(p) for p in old)
    assert {c.kind for c in plan.candidates} == {"data", "metadata", "other"}
    assert plan.files_too_recent == 2 and plan.listing_tasks == 0
    assert plan.files_scanned == sum(1 for p in location.rglob("*") if p.is_file())
    protected = set(plan.batches[0].protected)
    assert {_load(table).metadata_location.removeprefix("file://"), str(hint)} <= protected
    assert str(hint) not in {c.path for c in plan.candidates}


def test_a_large_tree_becomes_listing_units_with_the_same_outcome(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, "identity", appends=2, rows=9)
    location = Path(table.location)
    _age(location)
    _plant(location / "data" / "category=zz" / "old-orphan.parquet", old=True)
    on_driver = _plan(table)

    listing = plan_listing(_load(table), OrphanOptions(listing_threshold=2))

    prefixes = sorted(u.prefix.rsplit("/", 1)[-1] for u in listing.units)
    assert prefixes == ["category=a", "category=b", "category=c", "category=null", "category=zz"]
    assert all(f.path.rsplit("/", 2)[-2] == "metadata" for f in listing.files)  # data/ files are all in units
    distributed = plan_orphans(listing, [list_unit(u) for u in listing.units], OrphanOptions(), now_ms=NOW_MS)
    assert distributed.candidates == on_driver.candidates and _names(distributed) == {"old-orphan.parquet"}
    assert distributed.files_scanned == on_driver.files_scanned and distributed.listing_tasks == 5
    with pytest.raises(InvalidArgument, match="listing results do not match"):
        plan_orphans(listing, [], OrphanOptions(), now_ms=NOW_MS)


def test_recheck_drops_a_candidate_a_later_commit_references(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=2, rows=5)
    location = Path(table.location)
    imported = location / "data" / "imported.parquet"
    pq.write_table(batch(500, 4), imported)
    other = _plant(location / "data" / "old-orphan.parquet", old=True)
    _age(location)
    plan = _plan(table)
    assert _names(plan) == {"imported.parquet", "old-orphan.parquet"}
    assert recheck(plan) is plan  # nothing committed meanwhile

    table.table.add_files([f"file://{imported}"])  # a commit adds the old file to the table
    checked = recheck(plan)

    assert [c.path for c in checked.candidates] == [str(other)]
    assert checked.files_still_needed == 1
    assert checked.metadata_location == table.reload().metadata_location
    assert checked.metadata_location.removeprefix("file://") in checked.batches[0].protected


def test_recheck_refuses_a_replaced_table(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=1, rows=5)
    _plant(Path(table.location) / "data" / "old-orphan.parquet", old=True)
    plan = _plan(table)
    table.table.append(batch(100, 3))
    replaced = plan.model_copy(update={"table_uuid": "00000000-0000-0000-0000-000000000000"})
    with pytest.raises(UnsafeOperation, match="the table was replaced since planning"):
        recheck(replaced)


def test_listing_keeps_the_table_pinned(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=1, rows=5)
    loaded = _load(table)
    listing = plan_listing(loaded, OrphanOptions())
    assert isinstance(listing, Listing) and listing.table is loaded and listing.units == []
    with pytest.raises(UnsafeOperation):
        plan_listing(loaded, OrphanOptions(older_than=timedelta(hours=1)))
