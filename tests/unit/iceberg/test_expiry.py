"""Snapshot expiry: the spec's retention policy case by case on hand-built metadata, the metadata it
commits, and the files it frees on PyIceberg tables (reachability, conflicts, unknown outcomes)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from iceberg_fixtures import minimal_metadata
from pyiceberg_tables import PyIcebergTable, batch, small_file_table

from lakeops.deletion import delete_batch
from lakeops.errors import CommitStateUnknown, InvalidArgument, ProtocolError, UnsafeOperation
from lakeops.iceberg.maintenance.expiry import (
    DEFAULT_MAX_SNAPSHOT_AGE_MS,
    ExpireOptions,
    ExpireSnapshots,
    commit_expiry,
    decide_retention,
    expire_metadata,
    plan_expiry,
)
from lakeops.iceberg.metadata import TableMetadata, parse_metadata, serialize_metadata
from lakeops.iceberg.reachability import reachable_files
from lakeops.iceberg.sql_catalog import SqlCatalog
from lakeops.iceberg.table import IcebergTable, TableRef, load_table
from lakeops.storage import StorageOptions, normalize

DAY = 86_400_000
NOW = 1_000 * DAY

#: id -> (parent, age in days). main: 1 <- 2 <- 3 <- 4 <- 5; branch dev: 3 <- 6 <- 7; tag v1 -> 2;
#: 9 is on no ref's history (a dropped branch's head).
HISTORY = {1: (None, 30), 2: (1, 20), 3: (2, 10), 4: (3, 4), 5: (4, 1), 6: (3, 8), 7: (6, 6), 9: (1, 2)}


def _canonical(paths: set[str]) -> set[str]:
    """Metadata paths as deletion candidates name them (Iceberg paths are literal)."""
    return {normalize(p, literal=True) for p in paths}


def _metadata(
    refs: dict[str, dict[str, Any]] | None = None,
    *,
    properties: dict[str, str] | None = None,
    history: dict[int, tuple[int | None, int]] = HISTORY,
    **extra: Any,
) -> TableMetadata:
    refs = refs or {
        "main": {"snapshot-id": 5, "type": "branch"},
        "dev": {"snapshot-id": 7, "type": "branch"},
        "v1": {"snapshot-id": 2, "type": "tag"},
    }
    data = minimal_metadata(properties=properties)
    data.update(
        {
            "last-sequence-number": max(history),
            "current-snapshot-id": refs["main"]["snapshot-id"],
            "refs": refs,
            "snapshots": [
                {
                    "snapshot-id": snapshot_id,
                    **({"parent-snapshot-id": parent} if parent is not None else {}),
                    "sequence-number": snapshot_id,
                    "timestamp-ms": NOW - age * DAY,
                    "manifest-list": f"s3://b/wh/t/metadata/snap-{snapshot_id}.avro",
                    "summary": {"operation": "append"},
                }
                for snapshot_id, (parent, age) in history.items()
            ],
            **extra,
        }
    )
    return TableMetadata.model_validate(data)


def _expired(metadata: TableMetadata, **options: Any) -> tuple[int, ...]:
    return decide_retention(metadata, ExpireOptions(**options), now_ms=NOW).expired


def test_defaults_keep_heads_and_five_days_of_each_branch() -> None:
    decision = decide_retention(_metadata(), ExpireOptions(), now_ms=NOW)
    # main: 5 (1d), 4 (4d), then 3 is 10 days old; dev: its head 7 only (6 is 8 days old); tag v1: 2.
    assert decision.retained == (2, 4, 5, 7)
    assert decision.expired == (1, 3, 6, 9)  # 9 is on no ref's history: the spec expires it
    assert decision.dropped_refs == ()


def test_table_properties_set_age_and_count() -> None:
    fifteen_days = {"history.expire.max-snapshot-age-ms": str(15 * DAY)}
    assert _expired(_metadata(properties=fifteen_days)) == (1, 9)
    keep_three = {"history.expire.min-snapshots-to-keep": "3"}
    # main keeps 5, 4, 3; dev keeps 7, 6, 3 — the age no longer matters for the first three.
    assert _expired(_metadata(properties=keep_three)) == (1, 9)


def test_ancestors_kept_until_both_old_and_beyond_the_count() -> None:
    # Young enough but beyond the count: kept (age alone keeps it); within the count but old: kept.
    history = {1: (None, 40), 2: (1, 30), 3: (2, 3), 4: (3, 2)}
    metadata = _metadata({"main": {"snapshot-id": 4, "type": "branch"}}, history=history)
    assert _expired(metadata) == (1, 2)
    assert _expired(metadata, retain_last=3) == (1,)


def test_per_ref_fields_override_table_properties() -> None:
    refs = {
        "main": {"snapshot-id": 5, "type": "branch", "max-snapshot-age-ms": 25 * DAY},
        "dev": {"snapshot-id": 7, "type": "branch", "min-snapshots-to-keep": 4},
        "v1": {"snapshot-id": 2, "type": "tag"},
    }
    properties = {"history.expire.max-snapshot-age-ms": str(DAY), "history.expire.min-snapshots-to-keep": "1"}
    # main: 5, 4, 3, 2 are within 25 days; dev: 7, 6, 3, 2 by count; 1 (30d) goes.
    assert _expired(_metadata(refs, properties=properties)) == (1, 9)


def test_flags_override_refs_and_properties() -> None:
    refs = {
        "main": {"snapshot-id": 5, "type": "branch", "min-snapshots-to-keep": 5},
        "dev": {"snapshot-id": 7, "type": "branch", "max-snapshot-age-ms": 2 * DAY},
        "v1": {"snapshot-id": 2, "type": "tag"},
    }
    metadata = _metadata(refs, properties={"history.expire.min-snapshots-to-keep": "1"})
    # main keeps all five by its own count; dev's own 2 days let 6 (8d) go.
    assert _expired(metadata) == (6, 9)
    # --retain-last 1 (force: fewer than main's 5) and --older-than 7d for every branch: main keeps 5, 4.
    assert _expired(metadata, retain_last=1, older_than_ms=7 * DAY, force=True) == (1, 3, 6, 9)
    # --older-than 9d lengthens dev's 2 days: 6 (8d) stays, 3 (10d) does not.
    assert _expired(metadata, retain_last=1, older_than_ms=9 * DAY, force=True) == (1, 3, 9)


def test_keep_from_sequence_number_keeps_what_a_consumer_still_reads() -> None:
    everything = {"older_than_ms": 0, "retain_last": 1, "force": True}
    assert _expired(_metadata(), **everything) == (1, 3, 4, 6, 9)
    # Sequence numbers equal the ids here: from 4 on, whatever their age, on any branch.
    assert _expired(_metadata(), **everything, keep_from_sequence_number=4) == (1, 3)
    with pytest.raises(InvalidArgument, match="--snapshot-id 6 is kept: its sequence number is at least 4"):
        _expired(_metadata(), **everything, keep_from_sequence_number=4, snapshot_ids=(6,))


def test_tags_keep_only_their_head() -> None:
    refs = {
        "main": {"snapshot-id": 5, "type": "branch"},
        "v0": {"snapshot-id": 3, "type": "tag", "min-snapshots-to-keep": 9, "max-snapshot-age-ms": 99 * DAY},
    }
    assert _expired(_metadata(refs)) == (1, 2, 6, 7, 9)


def test_refs_older_than_max_ref_age_are_dropped_but_never_main() -> None:
    refs = {
        "main": {"snapshot-id": 1, "type": "branch"},
        "dev": {"snapshot-id": 7, "type": "branch", "max-ref-age-ms": 5 * DAY},
        "v1": {"snapshot-id": 2, "type": "tag"},
        "v2": {"snapshot-id": 4, "type": "tag"},
    }
    metadata = _metadata(refs, properties={"history.expire.max-ref-age-ms": str(7 * DAY)})
    decision = decide_retention(metadata, ExpireOptions(), now_ms=NOW)
    # main is 30 days old and stays; dev (6d, own limit 5d) and v1 (20d, table limit 7d) are dropped.
    assert decision.dropped_refs == ("dev", "v1")
    assert decision.retained == (1, 4)
    after = expire_metadata(metadata, decision)
    assert set(after.refs) == {"main", "v2"} and after.current_snapshot_id == 1


def test_refs_never_expire_by_default() -> None:
    refs = {"main": {"snapshot-id": 5, "type": "branch"}, "old": {"snapshot-id": 1, "type": "tag"}}
    decision = decide_retention(_metadata(refs), ExpireOptions(), now_ms=NOW)
    assert decision.dropped_refs == () and 1 in decision.retained


def test_shorter_retention_than_the_table_needs_force() -> None:
    metadata = _metadata()
    with pytest.raises(UnsafeOperation, match=r"--older-than 1d is shorter than .*max-snapshot-age-ms \(5d\)"):
        _expired(metadata, older_than_ms=DAY)
    assert _expired(metadata, older_than_ms=DAY, force=True) == (1, 3, 4, 6, 9)
    assert _expired(metadata, older_than_ms=DEFAULT_MAX_SNAPSHOT_AGE_MS) == (1, 3, 6, 9)  # not shorter: allowed
    refs = {"main": {"snapshot-id": 5, "type": "branch", "max-snapshot-age-ms": 30 * DAY}}
    with pytest.raises(UnsafeOperation, match="branch 'main' max-snapshot-age-ms"):
        _expired(_metadata(refs), older_than_ms=10 * DAY)
    with pytest.raises(UnsafeOperation, match="--retain-last 1 keeps fewer .*min-snapshots-to-keep \\(2\\)"):
        _expired(_metadata(properties={"history.expire.min-snapshots-to-keep": "2"}), retain_last=1)


def test_named_snapshots_expire_but_never_a_ref_head() -> None:
    metadata = _metadata()
    assert _expired(metadata, retain_last=5, snapshot_ids=(1,), force=True) == (1, 9)
    assert _expired(metadata, retain_last=5, snapshot_ids=(1,)) == (1, 9)  # 30 days old: no force needed
    with pytest.raises(InvalidArgument, match=r"--snapshot-id 7 is the head of branch 'dev'"):
        _expired(metadata, snapshot_ids=(7,), force=True)
    with pytest.raises(InvalidArgument, match=r"--snapshot-id 2 is the head of tag 'v1'"):
        _expired(metadata, snapshot_ids=(2,), force=True)
    with pytest.raises(InvalidArgument, match="--snapshot-id 42: the table has no such snapshot"):
        _expired(metadata, snapshot_ids=(42,))
    with pytest.raises(UnsafeOperation, match="--snapshot-id 4 is only 4d old"):
        _expired(metadata, snapshot_ids=(4,))
    assert _expired(metadata, snapshot_ids=(4,), force=True) == (1, 3, 4, 6, 9)


@pytest.mark.parametrize("value", ["0", "-5"])
def test_non_positive_properties_are_refused(value: str) -> None:
    with pytest.raises(ProtocolError, match=f"history.expire.min-snapshots-to-keep={value} must be a positive"):
        _expired(_metadata(properties={"history.expire.min-snapshots-to-keep": value}))


def test_expired_metadata_trims_snapshot_log_and_statistics() -> None:
    def stats(snapshot_id: int) -> dict[str, Any]:
        return {
            "snapshot-id": snapshot_id,
            "statistics-path": f"s3://b/wh/t/metadata/stats-{snapshot_id}.puffin",
            "file-size-in-bytes": 10,
            "file-footer-size-in-bytes": 5,
            "blob-metadata": [],
        }

    log = [{"snapshot-id": i, "timestamp-ms": NOW - HISTORY[i][1] * DAY} for i in (1, 2, 3, 4, 5)]
    metadata = _metadata(
        **{
            "snapshot-log": log,
            "statistics": [stats(3), stats(5)],
            "partition-statistics": [
                {"snapshot-id": i, "statistics-path": f"s3://b/wh/t/p{i}.parquet", "file-size-in-bytes": 1}
                for i in (1, 4)
            ],
        }
    )
    after = expire_metadata(metadata, decide_retention(metadata, ExpireOptions(), now_ms=NOW))
    assert [s.snapshot_id for s in after.snapshots] == [2, 4, 5, 7]
    # 3 expired: it and every entry before it leave the log, though 2 is still a snapshot.
    assert [e.snapshot_id for e in after.snapshot_log] == [4, 5]
    assert [s.snapshot_id for s in after.statistics] == [5]
    assert [s.snapshot_id for s in after.partition_statistics] == [4]
    reread = parse_metadata(serialize_metadata(after), "v2.metadata.json")
    assert reread.snapshot_log == after.snapshot_log and reread.refs == after.refs
    assert reread.current_snapshot_id == 5


# --- files freed, on PyIceberg tables ------------------------------------------------------------

EVERYTHING = ExpireOptions(older_than_ms=0, retain_last=1, force=True)


def _later() -> int:
    """A clock a minute ahead, so every snapshot just written is older than ``older_than_ms=0``."""
    return int(time.time() * 1000) + 60_000


def _table_with_history(tmp_path: Path) -> PyIcebergTable:
    """Appends, a copy-on-write delete and an overwrite; a branch and a tag on early snapshots."""
    table = small_file_table(tmp_path, "identity", appends=4, rows=12)
    first = table.table.snapshots()[1].snapshot_id
    table.table.manage_snapshots().create_tag(first, "v1").create_branch(first, "dev").commit()
    table.reload().delete("category == 'a'")
    table.reload().overwrite(batch(500, 9), overwrite_filter="id >= 40")
    table.reload()
    return table


def _ours(table: PyIcebergTable) -> IcebergTable:
    return load_table(TableRef(catalog_uri=table.catalog_uri, identifier=table.identifier), StorageOptions())


def _every_path_exists(table: IcebergTable) -> None:
    reached = reachable_files(table.storage, table.metadata, table.metadata.snapshots)
    missing = [p for p in reached.all() if not Path(p.removeprefix("file://")).is_file()]
    assert missing == []


def test_expiry_commits_then_frees_only_unreachable_files(tmp_path: Path) -> None:
    table = _table_with_history(tmp_path)
    ours = _ours(table)
    tag = ours.metadata.refs["v1"].snapshot_id
    rows = {tag: table.rows(tag), ours.metadata.current_snapshot_id: table.rows()}
    plan = plan_expiry(ours, EVERYTHING, now_ms=_later())
    assert plan.decision.retained == tuple(sorted({tag, ours.metadata.current_snapshot_id or 0}))
    kinds = {c.kind for c in plan.deletion.files}
    assert kinds == {"manifest-list", "manifest", "data"}

    committed = commit_expiry(plan, StorageOptions(), batch_size=7)
    assert committed.attempts == 1 and committed.decision == plan.decision
    assert committed.deletion == plan.deletion
    assert sum(len(b.files) for b in committed.batches) == len(plan.deletion.files)
    assert all(b.protected == [committed.metadata_location] for b in committed.batches)
    for unit in committed.batches:
        delete_batch(unit)

    after = _ours(table)
    assert after.metadata_location == committed.metadata_location
    assert sorted(s.snapshot_id for s in after.metadata.snapshots) == list(plan.decision.retained)
    _every_path_exists(after)
    assert not any(Path(c.path.removeprefix("file://")).exists() for c in plan.deletion.files)
    assert {sid: table.rows(sid) for sid in rows} == rows
    assert len(rows[tag]) == 24  # the tag still reads the table as of the second append


def test_conflict_reapplies_policy_and_keeps_the_new_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table_with_history(tmp_path)
    ours = _ours(table)
    plan = plan_expiry(ours, EVERYTHING, now_ms=_later())
    original = SqlCatalog.swap
    raced: list[int] = []

    def racing_swap(self: SqlCatalog, expected: str, new: str, payload: bytes) -> str:
        if not raced:
            table.reload().append(batch(900, 5))
            snapshot = table.reload().current_snapshot()
            assert snapshot is not None
            raced.append(snapshot.snapshot_id)
        return original(self, expected, new, payload)

    monkeypatch.setattr(SqlCatalog, "swap", racing_swap)
    committed = commit_expiry(plan, StorageOptions())
    assert committed.attempts == 2
    after = _ours(table)
    # The concurrent append is main's head now; the previous head is beyond --retain-last 1 and goes.
    assert after.metadata.current_snapshot_id == raced[0]
    assert raced[0] in committed.decision.retained
    assert set(plan.decision.retained) - set(committed.decision.retained) == {ours.metadata.current_snapshot_id}
    freed = {c.path for c in committed.deletion.files}  # canonical: Iceberg paths taken literally
    reached = _canonical(reachable_files(after.storage, after.metadata, after.metadata.snapshots).all())
    assert freed and not freed & reached


def test_a_commit_between_plan_and_expiry_recomputes_what_to_free(tmp_path: Path) -> None:
    """The plan's deletion set is reused only for a commit on the planned metadata: after another
    writer's append, the previous head expires too and its manifest list is freed as well."""
    table = _table_with_history(tmp_path)
    ours = _ours(table)
    plan = plan_expiry(ours, EVERYTHING, now_ms=_later())
    previous_head = ours.metadata.current_snapshot()
    assert previous_head is not None
    table.reload().append(batch(900, 5))
    committed = commit_expiry(plan, StorageOptions())
    assert committed.attempts == 1
    freed = {c.path for c in committed.deletion.files}
    assert _canonical({previous_head.manifest_list}) <= freed - {c.path for c in plan.deletion.files}
    after = _ours(table)
    assert not freed & _canonical(reachable_files(after.storage, after.metadata, after.metadata.snapshots).all())


def test_unknown_commit_outcome_frees_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table_with_history(tmp_path)
    plan = plan_expiry(_ours(table), EVERYTHING, now_ms=_later())
    before = _ours(table).metadata_location

    def lost_answer(self: SqlCatalog, expected: str, new: str, payload: bytes) -> None:
        raise CommitStateUnknown(f"{table.identifier}: the answer to creating {new} was lost")

    monkeypatch.setattr(SqlCatalog, "swap", lost_answer)
    with pytest.raises(CommitStateUnknown):
        commit_expiry(plan, StorageOptions())
    assert _ours(table).metadata_location == before
    assert all(Path(c.path.removeprefix("file://")).is_file() for c in plan.deletion.files)


def test_nothing_to_expire_commits_nothing(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=2, rows=5)
    ours = _ours(table)
    plan = plan_expiry(ours, ExpireOptions(), now_ms=_later())  # everything is younger than 5 days
    assert plan.decision.expired == () and plan.deletion.files == []
    committed = commit_expiry(plan, StorageOptions())
    assert committed.attempts == 0 and committed.batches == []
    assert _ours(table).metadata_location == ours.metadata_location


def test_change_records_the_base_it_applied_to(tmp_path: Path) -> None:
    table = small_file_table(tmp_path, appends=3, rows=5)
    ours = _ours(table)
    change = ExpireSnapshots(EVERYTHING, _later())
    new = change.apply(ours)
    assert change.base is ours.metadata
    assert change.decision is not None and len(change.decision.expired) == 2
    assert [s.snapshot_id for s in new.snapshots] == [ours.metadata.current_snapshot_id]
