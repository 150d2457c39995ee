"""Delta VACUUM rules, planned and executed on the driver (the Spark path is in tests/spark).

A vacuum "run later" is simulated with ``now_ms``; file ages are set with ``os.utime``. Expected file
sets come from the log JSON read directly, not from lakeops' own replay.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake
from lakeops_testdata import TESTDATA

from lakeops import api
from lakeops.delta.deletion_vectors import dv_absolute_path
from lakeops.delta.maintenance.orphans import (
    Candidate,
    DeleteBatch,
    VacuumOptions,
    VacuumPlan,
    _batches,
    delete_batch,
    is_hidden,
    plan_vacuum,
    recheck,
)
from lakeops.delta.scan import read_snapshot
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import InvalidArgument, OutsideRoot, UnsafeOperation, UnsupportedFeature
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.inspect import InspectReport
from lakeops.ops.orphans import OrphansOptions
from lakeops.storage import StorageOptions, open_storage

DAY_MS = 86_400_000
NOW_MS = int(time.time() * 1000)
OLD = 1_500_000_000.0  # July 2017, before any fixture's commits: "a long time ago" for file ages


def _age_all(root: Path, stamp: float = OLD) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            os.utime(path, (stamp, stamp))


def _copy(name: str, tmp_path: Path, *, kernel: bool = False) -> Path:
    if kernel:
        import subprocess

        subprocess.run(
            ["tar", "--zstd", "-xf", str(TESTDATA / "delta-kernel" / f"{name}.tar.zst"), "-C", str(tmp_path)],
            check=True,
        )
        return tmp_path / name / "delta"
    target = tmp_path / name
    shutil.copytree(TESTDATA / "delta-rs" / name, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)  # the fixtures are read-only
    return target


def _plan(root: Path, *, now_ms: int = NOW_MS, **options: object) -> VacuumPlan:
    storage = open_storage(str(root))
    snapshot = load_snapshot(storage, str(root))
    return plan_vacuum(snapshot, storage, VacuumOptions.model_validate(options), StorageOptions(), now_ms=now_ms)


def _execute(plan: VacuumPlan) -> None:
    for batch in plan.batches:
        delete_batch(batch)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def _log_actions(root: Path, kind: str) -> list[dict[str, object]]:
    actions = []
    for commit in sorted((root / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            if line.strip() and kind in (obj := json.loads(line)):
                actions.append(obj[kind])
    return actions


def _rel(plan: VacuumPlan, root: Path, kind: str | None = None) -> set[str]:
    return {str(Path(c.path).relative_to(root)) for c in plan.candidates if kind is None or c.kind == kind}


@pytest.mark.parametrize(
    ("path", "hidden"),
    [
        ("part-0.parquet", False),
        ("day=1/part-0.parquet", False),
        ("_delta_log/00000000000000000000.json", True),
        ("_delta_log/_staged_commits/x.json", True),
        ("_tmp/part-0.parquet", True),
        (".hive-staging/part-0.parquet", True),
        ("day=1/.part-0.parquet.crc", True),
        ("day=1/_SUCCESS", True),
        ("_change_data/cdc-0.parquet", False),
        ("_change_data/day=1/cdc-0.parquet", False),
        ("_change_data/.cdc-0.parquet.crc", True),
        ("day=1/_change_data/cdc-0.parquet", True),  # only the top-level directory is change data
        ("_change_data", True),  # a file, not the directory
        ("_p=1/part-0.parquet", False),  # a partition directory of column "_p"
        ("_q=1/part-0.parquet", True),  # "_q" is not a partition column
    ],
)
def test_hidden_paths(path: str, hidden: bool) -> None:
    assert is_hidden(path, {"day", "_p"}) is hidden


def _overwritten_table(root: Path) -> pa.Table:
    """Three appends then an overwrite: three tombstoned files (removed now) and one live file."""
    for i in range(3):
        write_deltalake(str(root), pa.table({"id": [i]}), mode="append")
    write_deltalake(str(root), pa.table({"id": [10, 11]}), mode="overwrite")
    return DeltaTable(str(root)).to_pyarrow_table()


def test_expired_tombstones_and_old_untracked_files_go_everything_else_stays(tmp_path: Path) -> None:
    root = tmp_path / "t"
    rows = _overwritten_table(root)
    (root / "stray.parquet").write_bytes(b"untracked")
    for hidden in ("_tmp/x.parquet", ".hidden.parquet", "sub/_SUCCESS", "_delta_log/_staged_commits/x.json"):
        (root / hidden).parent.mkdir(parents=True, exist_ok=True)
        (root / hidden).write_bytes(b"hidden")
    for outside in (tmp_path / "t2" / "old.parquet", tmp_path / "elsewhere.parquet"):  # "t2" shares t's prefix
        outside.parent.mkdir(parents=True, exist_ok=True)
        outside.write_bytes(b"outside")
    _age_all(tmp_path)
    later = NOW_MS + 10 * DAY_MS  # the vacuum runs ten days after the overwrite
    fresh = (later - DAY_MS) / 1000  # written a day before that run: maybe a writer's uncommitted file
    (root / "fresh.parquet").write_bytes(b"new")
    os.utime(root / "fresh.parquet", (fresh, fresh))
    live = {a["path"] for a in _log_actions(root, "add")} - {r["path"] for r in _log_actions(root, "remove")}
    tombstoned = {r["path"] for r in _log_actions(root, "remove")}
    before = _files(root)

    plan = _plan(root, now_ms=later)

    assert _rel(plan, root, "tombstoned") == tombstoned and len(tombstoned) == 3
    assert _rel(plan, root, "untracked") == {"stray.parquet"}
    assert (plan.files_too_recent, plan.live_files, plan.tombstones_retained) == (1, 1, 0)
    assert plan.files_scanned == 6 and plan.directories_scanned == 1
    _execute(plan)
    assert _files(root) == before - tombstoned - {"stray.parquet"}
    assert live <= _files(root) and "fresh.parquet" in _files(root)
    assert (tmp_path / "t2" / "old.parquet").exists() and (tmp_path / "elsewhere.parquet").exists()
    assert DeltaTable(str(root)).to_pyarrow_table().equals(rows)


def test_unexpired_tombstones_are_kept(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _overwritten_table(root)
    _age_all(root)  # old files, but the tombstones are from just now

    plan = _plan(root)

    assert plan.candidates == [] and plan.tombstones_retained == 3


def test_tombstone_deletion_timestamp_decides_not_file_age(tmp_path: Path) -> None:
    root = _copy("simple_table", tmp_path)  # tombstones from April 2020
    _age_all(root)  # files from 2017: only the tombstones' age can protect them
    newest_tombstone = max(int(r["deletionTimestamp"]) for r in _log_actions(root, "remove"))  # type: ignore[call-overload]
    # Run as if just after the last removal: every tombstone is younger than the week of retention.
    named = {a["path"] for kind in ("add", "remove") for a in _log_actions(root, kind)}
    untracked = {f for f in _files(root) if f.endswith(".parquet")} - named

    plan = _plan(root, now_ms=newest_tombstone + DAY_MS)

    assert _rel(plan, root) == untracked and len(untracked) == 1
    assert plan.tombstones_retained == len({r["path"] for r in _log_actions(root, "remove")}) == 31


def test_percent_encoded_partition_paths_are_decoded(tmp_path: Path) -> None:
    root = tmp_path / "t"
    data = pa.table({"id": [1, 2, 3, 4], "p": ["a b", "100%", "x=y", "é"]})
    write_deltalake(str(root), data, partition_by=["p"])
    write_deltalake(str(root), data, partition_by=["p"], mode="append")
    DeltaTable(str(root)).delete("id = 2")
    rows = DeltaTable(str(root)).to_pyarrow_table().sort_by("id")
    encoded = [a["path"] for a in _log_actions(root, "add")]
    assert any("%" in str(p) for p in encoded)  # the log holds URL-encoded paths
    _age_all(root)

    plan = _plan(root, now_ms=NOW_MS + 10 * DAY_MS)

    assert {c.kind for c in plan.candidates} == {"tombstoned"} and len(plan.candidates) == 2
    _execute(plan)
    table = DeltaTable(str(root))
    assert all(Path(uri.removeprefix("file://")).exists() for uri in table.file_uris())
    assert table.to_pyarrow_table().sort_by("id").equals(rows)


@pytest.mark.parametrize("spelling", ["relative", "absolute", "file URI", "deletion vector"])
def test_an_action_path_whose_escapes_are_not_utf8_is_refused_naming_the_table(tmp_path: Path, spelling: str) -> None:
    """``%FF`` is the byte 0xFF, no UTF-8 text: delta-rs refuses such a path, Java reads it as U+FFFD, and
    ``unquote`` replaced it, so the file ``\\xff.parquet`` on disk looked untracked and VACUUM deleted a file
    the log names by its bytes (issue 34, nearby). Every spelling is refused, naming the table and the path."""
    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"id": [1]}))
    written = next(root.glob("*.parquet"))
    odd = os.fsencode(root) + b"/\xff.parquet"
    shutil.copy(written, os.fsdecode(odd))
    path = {"relative": "%FF.parquet", "absolute": f"{root}/%FF.parquet", "file URI": f"file://{root}/%FF.parquet"}
    add: dict[str, object] = {
        "path": path.get(spelling, written.name),
        "partitionValues": {},
        "size": os.path.getsize(odd),
        "modificationTime": 0,
        "dataChange": True,
    }
    if spelling == "deletion vector":
        add["deletionVector"] = {
            "storageType": "p",
            "pathOrInlineDv": f"{root}/%FF.bin",
            "offset": 1,
            "sizeInBytes": 1,
            "cardinality": 1,
        }
    (root / "_delta_log" / f"{1:020}.json").write_text(json.dumps({"add": add}) + "\n")
    _age_all(root)
    files = _files(root)

    with pytest.raises(InvalidArgument, match=rf"^{root}: .*%FF.* has percent-escapes that are not UTF-8"):
        _plan(root, now_ms=NOW_MS + 10 * DAY_MS)
    assert _files(root) == files


def test_absolute_file_uri_paths_are_decoded_exactly_once(tmp_path: Path) -> None:
    """Delta paths are URIs (PROTOCOL.md "Add File and Remove File"), absolute ones too: delta-rs
    writes the directory of ``a%20b`` as ``p=a%2520b`` and the path as ``p=a%252520b``; rewritten as
    ``file://<root>/p=a%252520b/…`` it still names that directory, decoded once, never twice."""
    root = tmp_path / "t"
    data = pa.table({"id": [1, 2, 3], "p": ["a%20b", "100%", "ü"]})
    write_deltalake(str(root), data, partition_by=["p"])
    write_deltalake(str(root), data, partition_by=["p"], mode="append")
    DeltaTable(str(root)).delete("id = 2")
    live = {Path(uri) for uri in DeltaTable(str(root)).file_uris()}
    for commit in (root / "_delta_log").glob("*.json"):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        for action in actions:
            for kind in ("add", "remove"):
                if kind in action:
                    action[kind]["path"] = f"file://{root}/{action[kind]['path']}"
        commit.write_text("".join(json.dumps(a) + "\n" for a in actions))
    _age_all(root)

    plan = _plan(root, now_ms=NOW_MS + 10 * DAY_MS)
    _execute(plan)

    assert {c.kind for c in plan.candidates} == {"tombstoned"} and len(plan.candidates) == 2
    assert all(path.exists() for path in live) and len(live) == 4
    assert {Path(c.path).parent.name for c in plan.candidates} == {"p=100%25"}


def test_deletion_vector_files_of_live_files_and_unexpired_tombstones_stay(tmp_path: Path) -> None:
    root = _copy("dv-partitioned-with-checkpoint", tmp_path, kernel=True)
    _age_all(root)
    storage = open_storage(str(root))
    snapshot = load_snapshot(storage, str(root))
    rows = read_snapshot(snapshot, storage).sort_by("col1")
    stamps = sorted({r.deletion_timestamp or 0 for r in snapshot.tombstones.values()})
    middle = stamps[len(stamps) // 2]

    def dv_files(actions: object) -> set[str]:
        return {
            str(Path(dv_absolute_path(a.deletion_vector, str(root))).relative_to(root))
            for a in actions  # type: ignore[attr-defined]
            if a.deletion_vector is not None and a.deletion_vector.storage_type == "u"
        }

    live_dvs = dv_files(snapshot.files.values())
    young_dvs = dv_files(r for r in snapshot.tombstones.values() if (r.deletion_timestamp or 0) >= middle)
    old_dvs = dv_files(r for r in snapshot.tombstones.values() if (r.deletion_timestamp or 0) < middle)
    on_disk = {f for f in _files(root) if f.startswith("deletion_vector_")}
    data_files = {f for f in _files(root) if f.endswith(".parquet") and not f.startswith("_delta_log")}

    plan = _plan(root, now_ms=middle + 7 * DAY_MS)  # tombstones older than `middle` have expired

    _execute(plan)
    left = {f for f in _files(root) if f.startswith("deletion_vector_")}
    assert left == live_dvs | young_dvs  # DV files named by nothing were old, so they went too
    assert old_dvs - left and old_dvs - left <= _rel(plan, root, "tombstoned")
    assert on_disk - left == _rel(plan, root) & on_disk
    assert data_files <= _files(root)  # every data file is live (DV updates keep the file)
    after = load_snapshot(storage, str(root))
    assert read_snapshot(after, storage).sort_by("col1").equals(rows)


def test_change_data_files_go_by_age_unless_a_commit_in_the_window_names_them(tmp_path: Path) -> None:
    root = _copy("cdf-table", tmp_path)
    _age_all(root)
    recent = (NOW_MS - DAY_MS) / 1000  # commit 3 was made yesterday, inside the week of retention
    os.utime(root / "_delta_log" / "00000000000000000003.json", (recent, recent))
    in_window = {
        json.loads(line)["cdc"]["path"]
        for line in (root / "_delta_log" / "00000000000000000003.json").read_text().splitlines()
        if '"cdc"' in line
    }
    change_data = {f for f in _files(root) if f.startswith("_change_data/") and "/." not in f}

    plan = _plan(root)

    assert _rel(plan, root, "change_data") == change_data - in_window
    assert plan.files_still_needed == len(in_window) == 1
    _execute(plan)
    assert {f for f in _files(root) if f.startswith("_change_data/") and "/." not in f} == in_window
    # delta-rs still reads the change feed from the kept version on.
    assert DeltaTable(str(root)).load_cdf(starting_version=3).read_all().num_rows > 0


def test_retention_checks(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_deltalake(
        str(root), pa.table({"id": [1]}), configuration={"delta.deletedFileRetentionDuration": "interval 2 days"}
    )
    assert _plan(root).retention == timedelta(days=2)
    with pytest.raises(
        UnsafeOperation, match=r"retention 1d is shorter than the table's .*\(2d\).*--force-short-retention"
    ):
        _plan(root, retention=timedelta(days=1))
    assert _plan(root, retention=timedelta(days=1), force_short_retention=True).retention == timedelta(days=1)
    assert _plan(root, retention=timedelta(0), force_short_retention=True).cutoff_ms == NOW_MS
    with pytest.raises(InvalidArgument, match="negative"):
        _plan(root, retention=timedelta(hours=-1), force_short_retention=True)


def test_vacuum_protocol_check_table_is_vacuumed(tmp_path: Path) -> None:
    """ "VACUUM Protocol Check": lakeops's vacuum checks the reader and the writer protocol of every
    table, so a table enabling the feature is vacuumed like any other. delta-rs 1.6 refuses the
    feature: the golden ``expected/`` rows are the oracle."""
    guarded = _copy("basic-with-vacuum-protocol-check-feature", tmp_path, kernel=True)
    expected = pq.read_table(guarded.parent / "expected").sort_by("id")
    assert expected.num_rows == 100
    (guarded / "stray.parquet").write_bytes(b"untracked")
    _age_all(guarded)
    live = _files(guarded) - {"stray.parquet"}

    plan = _plan(guarded)

    assert _rel(plan, guarded, "untracked") == {"stray.parquet"} and plan.live_files == 2
    _execute(plan)
    assert _files(guarded) == live
    storage = open_storage(str(guarded))
    assert read_snapshot(load_snapshot(storage, str(guarded)), storage).sort_by("id").equals(expected)


def test_vacuum_protocol_check_table_through_every_operation(tmp_path: Path) -> None:
    guarded = _copy("basic-with-vacuum-protocol-check-feature", tmp_path, kernel=True)
    expected = pq.read_table(guarded.parent / "expected").sort_by("id")
    storage = open_storage(str(guarded))

    def rows() -> pa.Table:
        return read_snapshot(load_snapshot(storage, str(guarded)), storage).sort_by("id")

    inspected = api.inspect(str(guarded))
    assert isinstance(inspected, InspectReport) and inspected.refused_operations == {}
    compacted = api.compact(str(guarded), CompactionOptions(min_input_files=2))
    assert (compacted.files_removed, compacted.files_added, compacted.rows_written) == (2, 1, 100)
    assert api.checkpoint(str(guarded)).status == "written"
    changes = api.cdc(str(guarded), CdcOptions(from_version=0, output=str(tmp_path / "changes")))
    assert (changes.rows_insert, changes.rows_delete) == (100, 0)  # OPTIMIZE (dataChange false) is no change
    _age_all(guarded)
    expired = api.expire(str(guarded), ExpiryOptions(older_than="1d", force=True))
    assert expired.deleted_files == 4  # commits 0 and 1 and their .crc files: the checkpoint at 2 replaces them
    vacuumed = api.orphans(str(guarded), OrphansOptions(older_than="0s", force_short_retention=True))
    assert vacuumed.deleted_files == 2  # the two compacted files
    assert rows().equals(expected)


def test_tables_vacuum_cannot_handle_are_refused(tmp_path: Path) -> None:
    guarded = _copy("basic-with-vacuum-protocol-check-feature", tmp_path, kernel=True)
    # A writer feature lakeops does not know, on a table readers may read: VACUUM must still refuse.
    (guarded / "_delta_log" / "00000000000000000002.json").write_text(
        '{"protocol":{"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["vacuumProtocolCheck"],'
        '"writerFeatures":["vacuumProtocolCheck","madeUpWriterFeature"]}}\n'
    )
    load_snapshot(open_storage(str(guarded)), str(guarded))  # readable
    with pytest.raises(UnsupportedFeature, match="writer feature madeUpWriterFeature not supported; refusing to write"):
        _plan(guarded)
    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"id": [1]}))
    (root / "_delta_log" / "00000000000000000001.json").write_text(
        '{"protocol":{"minReaderVersion":1,"minWriterVersion":7,"writerFeatures":["madeUpWriterFeature"]}}\n'
    )
    with pytest.raises(UnsupportedFeature, match="writer feature madeUpWriterFeature not supported"):
        _plan(root)


def test_recheck_keeps_a_file_restored_after_the_plan(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _overwritten_table(root)
    _age_all(root)
    plan = _plan(root, now_ms=NOW_MS + 10 * DAY_MS)
    restored = next(a for a in _log_actions(root, "add") if str(Path(plan.candidates[0].path).name) == a["path"])
    # A RESTORE lands between planning and deleting: it re-adds a tombstoned file (old mtime).
    (root / "_delta_log" / "00000000000000000004.json").write_text(json.dumps({"add": restored}) + "\n")

    checked = recheck(plan, open_storage(str(root)))

    assert checked.read_version == 4 and len(checked.candidates) == len(plan.candidates) - 1
    assert checked.files_still_needed == 1
    restored_ids = pq.read_table(root / str(restored["path"])).column("id").to_pylist()
    _execute(checked)
    assert (root / str(restored["path"])).exists()
    assert sorted(DeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist()) == sorted([*restored_ids, 10, 11])
    assert recheck(checked, open_storage(str(root))) is checked  # nothing new since: the plan stands


def test_a_name_that_is_not_utf8_is_untracked_on_a_checkpoint_before_and_after_a_recheck(tmp_path: Path) -> None:
    """The checkpoint's live files are Arrow rows, which the listed names are looked up in: a name that
    is not UTF-8 was a ``UnicodeEncodeError`` there (issue 34); it is untracked, as without a checkpoint."""
    root = tmp_path / "t"
    rows = _overwritten_table(root)
    DeltaTable(str(root)).create_checkpoint()
    odd = os.fsencode(root) + b"/day=\xfe/\xff.parquet"
    os.makedirs(os.path.dirname(odd))
    Path(os.fsdecode(odd)).write_bytes(b"x")
    _age_all(root)
    plan = _plan(root, now_ms=NOW_MS + 10 * DAY_MS)
    assert os.fsdecode(odd) in {c.path for c in plan.candidates if c.kind == "untracked"}
    write_deltalake(str(root), pa.table({"id": [12]}), mode="append")  # a commit since: the recheck replays

    checked = recheck(plan, open_storage(str(root)))

    assert checked.read_version == plan.read_version + 1 and checked.candidates == plan.candidates
    _execute(checked)
    assert not os.path.exists(odd)
    assert sorted(DeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist()) == [
        *rows.column("id").to_pylist(),
        12,
    ]


def test_delete_batch_refuses_paths_outside_the_root_or_in_the_log(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"id": [1]}))
    outside = tmp_path / "t2" / "x.parquet"
    outside.parent.mkdir()
    outside.write_bytes(b"x")

    def batch(path: Path) -> DeleteBatch:
        candidate = Candidate(path=str(path), size=1, kind="untracked")
        return _batches(str(root), StorageOptions(), [candidate], 10)[0]

    with pytest.raises(OutsideRoot):
        delete_batch(batch(outside))
    with pytest.raises(OutsideRoot):
        delete_batch(batch(root / ".." / "t2" / "x.parquet"))
    with pytest.raises(UnsafeOperation, match="inside _delta_log"):
        delete_batch(batch(root / "_delta_log" / "00000000000000000000.json"))
    assert outside.exists() and (root / "_delta_log" / "00000000000000000000.json").exists()


def test_lakeops_own_folders_are_never_vacuumed_not_even_their_abandoned_temp_files(tmp_path: Path) -> None:
    """A run killed while writing its audit record leaves a staging file in ``_lakeops_audit``; VACUUM
    used to plan it as an abandoned temp file, and the batch then refused it (every later VACUUM failed)."""
    root = tmp_path / "t"
    _overwritten_table(root)
    leftovers = [
        "_lakeops_audit/.20261126T1412Z-x.json.2pw7fafs.lakeops-tmp",
        "_lakeops_trash/r/.m.jsonl.ab.lakeops-tmp",
    ]
    for name in [*leftovers, "_delta_log/.00000000000000000009.json.ab12.lakeops-tmp"]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(b"half")
    _age_all(tmp_path)

    plan = _plan(root, now_ms=NOW_MS + 10 * DAY_MS)

    assert _rel(plan, root, "untracked") == {"_delta_log/.00000000000000000009.json.ab12.lakeops-tmp"}
    _execute(plan)
    assert all((root / name).exists() for name in leftovers)
