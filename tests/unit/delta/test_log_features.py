"""Delta log features of Spark 4 / Databricks tables: V2 checkpoints with sidecars, log compaction
files, version checksum files and domain metadata (issue 22, part B).

Fixtures are the real tables under ``tests/data/modern/delta`` (and ``delta-rs/checkpoint-v2-table``),
copied to ``tmp_path`` before anything writes. delta-rs is the oracle wherever it reads the table: after
every lakeops operation it must read exactly the rows lakeops reads.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from lakeops_testdata import TESTDATA

from lakeops import api
from lakeops.delta.actions import DomainMetadata
from lakeops.delta.commit import commit
from lakeops.delta.commit_file import CommitActions, parse_commit
from lakeops.delta.features import ALL_OPERATIONS, FEATURES
from lakeops.delta.last_checkpoint import LastCheckpoint, parse_last_checkpoint, render_last_checkpoint
from lakeops.delta.log_segment import list_log, segment_for_version
from lakeops.delta.maintenance.checkpoint import CheckpointOptions as DeltaCheckpointOptions
from lakeops.delta.maintenance.checkpoint import CheckpointPlan, finalize_checkpoint, plan_checkpoint, write_part
from lakeops.delta.scan import read_snapshot
from lakeops.delta.snapshot import DeltaSnapshot, load_snapshot
from lakeops.errors import CommitConflict, CorruptFile
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.checkpoint import CheckpointOptions
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.orphans import OrphansOptions
from lakeops.ops.target import CatalogOptions, resolve_target
from lakeops.ops.verify import checkpoint_matches_log
from lakeops.storage import StorageOptions, normalize, open_storage

MODERN = TESTDATA / "modern" / "delta"
DAY = 86_400.0
UUID_CHECKPOINT = re.compile(r"^\d{20}\.checkpoint\.[0-9a-f-]{36}\.parquet$")
V2_TABLES = [
    "v2-checkpoint-json",
    "v2-checkpoint-parquet",
    "v2-checkpoints-json-with-sidecars.tar.zst",
    "v2-checkpoints-parquet-without-sidecars.tar.zst",
    "../../delta-rs/checkpoint-v2-table",
]


def _fixture(name: str, tmp_path: Path) -> Path:
    """A writable copy of a fixture (an archive unpacked: these hold the table as ``<name>/``)."""
    source = MODERN / name
    if name.endswith(".tar.zst"):
        subprocess.run(["tar", "--zstd", "-xf", str(source), "-C", str(tmp_path)], check=True)
        return tmp_path / name.removesuffix(".tar.zst")
    target = tmp_path / source.name
    shutil.copytree(source, target)
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    return target


def _snapshot(root: Path, **kwargs: object) -> DeltaSnapshot:
    return load_snapshot(open_storage(str(root)), str(root), **kwargs)  # type: ignore[arg-type]


def _lakeops_rows(root: Path) -> list[str]:
    snapshot = _snapshot(root)
    return sorted(
        json.dumps(row, sort_keys=True, default=str)
        for row in read_snapshot(snapshot, open_storage(str(root))).to_pylist()
    )


def _delta_rs_rows(root: Path) -> list[str]:
    table = QueryBuilder().register("t", DeltaTable(str(root))).execute("select * from t").read_all()
    rows = pa.table(table).to_pylist()
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in rows)


def _same_rows(root: Path) -> list[str]:
    """The rows, asserting lakeops and delta-rs read the same ones and the same live files."""
    rows = _lakeops_rows(root)
    assert rows == _delta_rs_rows(root)
    live = sorted(_snapshot(root).file_location(a.path) for a in _snapshot(root).files.values())
    assert live == sorted(normalize(uri) for uri in DeltaTable(str(root)).file_uris())
    return rows


def _log(root: Path) -> Path:
    return root / "_delta_log"


def _age(root: Path, days: float) -> None:
    """Date every file of the log (sidecars too) ``days`` ago: commits are dated by modification time."""
    stamp = time.time() - days * DAY
    for path in _log(root).rglob("*"):
        if path.is_file():
            os.utime(path, (stamp, stamp))


# --- v2Checkpoint: reading --------------------------------------------------------------------------


@pytest.mark.parametrize("name", V2_TABLES)
def test_v2_checkpoint_tables_read_as_delta_rs_reads_them(name: str, tmp_path: Path) -> None:
    """JSON and Parquet UUID-named checkpoints, with and without sidecars, give delta-rs's rows; so do
    they alone, with every commit up to the checkpoint deleted."""
    root = _fixture(name, tmp_path)
    snapshot = _snapshot(root)
    assert snapshot.segment.checkpoint is not None
    checkpoint = snapshot.segment.checkpoint
    assert re.match(r"^\d{20}\.checkpoint\.[0-9a-f-]{36}\.(json|parquet)$", Path(checkpoint.files[0].path).name)
    rows = _same_rows(root)
    assert rows
    for version in range(checkpoint.version + 1):
        (_log(root) / f"{version:020d}.json").unlink(missing_ok=True)
    assert _lakeops_rows(root) == rows


def test_a_classic_checkpoint_following_the_v2_spec_is_read_with_its_sidecars(tmp_path: Path) -> None:
    """ "Classic checkpoint" may follow the V2 spec: checkpointMetadata and sidecar rows in
    ``n.checkpoint.parquet``."""
    root = _fixture("v2-checkpoint-parquet", tmp_path)
    rows = _same_rows(root)
    (uuid_named,) = _log(root).glob("*.checkpoint.*-*.parquet")
    uuid_named.rename(_log(root) / f"{2:020d}.checkpoint.parquet")
    (_log(root) / "_last_checkpoint").unlink()
    for version in range(3):
        (_log(root) / f"{version:020d}.json").unlink()
    snapshot = _snapshot(root)
    assert snapshot.segment.checkpoint is not None
    assert Path(snapshot.segment.checkpoint.files[0].path).name == f"{2:020d}.checkpoint.parquet"
    assert _lakeops_rows(root) == rows


def test_a_missing_sidecar_is_a_corrupt_checkpoint_naming_it(tmp_path: Path) -> None:
    root = _fixture("v2-checkpoint-json", tmp_path)
    sidecar = sorted((_log(root) / "_sidecars").glob("*.parquet"))[0]
    sidecar.unlink()
    with pytest.raises(CorruptFile, match=re.escape(sidecar.name)):
        _snapshot(root)


@pytest.mark.parametrize("path", ["../00000000000000000000.json", "/etc/hostname", "file:///etc/hostname"])
def test_a_sidecar_outside_the_sidecar_directory_is_refused(path: str, tmp_path: Path) -> None:
    """ "Sidecar File Information": sidecars live in the table's own ``_delta_log/_sidecars``."""
    root = _fixture("v2-checkpoint-json", tmp_path)
    (checkpoint,) = _log(root).glob("*.checkpoint.*.json")
    lines = checkpoint.read_text().splitlines()
    sidecar = json.loads(lines[1])
    sidecar["sidecar"]["path"] = path
    checkpoint.write_text("\n".join([lines[0], json.dumps(sidecar), *lines[2:]]) + "\n")
    with pytest.raises(CorruptFile, match=f"sidecar path {re.escape(repr(path))} is outside"):
        _snapshot(root)


# --- v2Checkpoint: writing and maintenance --------------------------------------------------------


def test_checkpoint_of_a_v2_table_is_one_uuid_named_v2_spec_file(tmp_path: Path) -> None:
    """Never classic, never multi-part (``part_size=1``), checkpointMetadata first, pointer checked;
    delta-rs reads the table from it alone."""
    root = _fixture("v2-checkpoint-json", tmp_path)
    rows = _same_rows(root)
    before = {p.name for p in _log(root).iterdir()}
    report = api.checkpoint(str(root), CheckpointOptions(force=True, part_size=1))
    assert report.status == "written"
    (written,) = {p.name for p in _log(root).iterdir()} - before
    assert UUID_CHECKPOINT.match(written)
    table = pq.read_table(_log(root) / written)
    assert table.column("checkpointMetadata").to_pylist()[0] == {"version": 2, "tags": None}
    assert table.column("protocol").to_pylist()[1]["writerFeatures"] == ["v2Checkpoint", "appendOnly", "invariants"]
    assert sum(1 for a in table.column("add").to_pylist() if a) == 4
    pointer = parse_last_checkpoint((_log(root) / "_last_checkpoint").read_bytes(), "pointer")
    assert (pointer.version, pointer.size, pointer.parts) == (2, table.num_rows, None)
    # Only the new checkpoint and the commits after it: readers must use lakeops's file.
    (_log(root) / "00000000000000000002.checkpoint.6374b053-df23-479b-b2cf-c9c550132b49.json").unlink()
    shutil.rmtree(_log(root) / "_sidecars")
    for version in range(3):
        (_log(root) / f"{version:020d}.json").unlink()
    assert _same_rows(root) == rows


def test_compact_checkpoint_expire_and_vacuum_on_a_v2_table(tmp_path: Path) -> None:
    """The whole maintenance cycle on a table with six V2 checkpoints and their sidecars: every step
    leaves delta-rs reading the same rows, expiry keeps exactly the sidecars retained checkpoints name."""
    root = _fixture("v2-checkpoints-json-with-sidecars.tar.zst", tmp_path)
    rows = _same_rows(root)
    compacted = api.compact(str(root), CompactionOptions(target_file_size=1 << 20))
    assert compacted.committed_version == 7 and compacted.files_removed == 101
    assert api.inspect(str(root)).checksum == "matches"  # lakeops's 7.crc (test_written_checksums.py)
    assert _same_rows(root) == rows
    assert api.checkpoint(str(root)).status == "written"
    (new_checkpoint,) = _log(root).glob(f"{7:020d}.checkpoint.*.parquet")
    assert UUID_CHECKPOINT.match(new_checkpoint.name)
    assert not list(_log(root).glob(f"{7:020d}.checkpoint.parquet"))

    _age(root, 40)
    fresh = _log(root) / "_sidecars" / "not-yet-referenced.parquet"  # an in-progress checkpoint's
    fresh.write_bytes(b"PAR1")
    expired = api.expire(str(root), ExpiryOptions(older_than="30d"))
    assert expired.checkpoint_kept == 7
    names = {p.name for p in _log(root).iterdir() if p.is_file()}
    assert {n for n in names if not n.startswith(".")} == {
        new_checkpoint.name,
        f"{7:020d}.json",
        f"{7:020d}.crc",
        "_last_checkpoint",
    }
    assert [p.name for p in (_log(root) / "_sidecars").iterdir()] == [fresh.name]  # none is named by 7
    assert expired.deleted_checkpoint_files == 6 and expired.deleted_commits == 7
    assert _same_rows(root) == rows

    stray = root / "stray.parquet"
    stray.write_bytes(b"x")
    old = time.time() - 30 * DAY
    os.utime(stray, (old, old))
    api.orphans(str(root), OrphansOptions(older_than="7d"))
    assert not stray.exists() and fresh.exists() and new_checkpoint.exists()
    assert _same_rows(root) == rows


def test_expire_keeps_the_sidecar_of_the_checkpoint_it_keeps(tmp_path: Path) -> None:
    """delta-rs's checkpoint-v2-table: V2 checkpoints at 6 and 8, one sidecar each. Cutting at 8 deletes
    6 and its sidecar (older than a day), keeps 8's, whichever checkpoint of 8 replay picks."""
    root = _fixture("../../delta-rs/checkpoint-v2-table", tmp_path)
    rows = _same_rows(root)
    sidecars = {p.name: p for p in (_log(root) / "_sidecars").iterdir()}
    # A second checkpoint of 8 (lakeops's, without sidecars): the fixture's stays, and so does its sidecar.
    assert api.checkpoint(str(root), CheckpointOptions(version=8, force=True)).status == "written"
    _age(root, 40)
    expired = api.expire(str(root), ExpiryOptions(older_than="30d"))
    assert expired.checkpoint_kept == 8
    kept = [p.name for p in (_log(root) / "_sidecars").iterdir()]
    assert kept == [n for n in sidecars if n.endswith("d55fb2cb-b8d3-4362-8572-c52142a9da1f.parquet")]
    assert not list(_log(root).glob(f"{6:020d}.*")) and not list(_log(root).glob(f"{0:020d}.*"))
    assert (_log(root) / f"{8:020d}.crc").exists()  # checksum files go with their commits only
    assert _same_rows(root) == rows


def test_expire_repoints_a_dangling_pointer_at_a_json_v2_checkpoint(tmp_path: Path) -> None:
    """A pointer naming the expiring checkpoint 6 is rewritten to 8: its size counts the JSON
    checkpoint's lines and its sidecar's rows."""
    root = _fixture("../../delta-rs/checkpoint-v2-table", tmp_path)
    pointer = _log(root) / "_last_checkpoint"
    pointer.write_bytes(render_last_checkpoint(LastCheckpoint(version=6, size=1)))
    _age(root, 40)
    assert api.expire(str(root), ExpiryOptions(older_than="30d")).last_checkpoint_rewritten
    (checkpoint,) = _log(root).glob(f"{8:020d}.checkpoint.*.json")
    (sidecar,) = (_log(root) / "_sidecars").glob("*.parquet")
    lines = len(checkpoint.read_bytes().splitlines())
    rewritten = parse_last_checkpoint(pointer.read_bytes(), str(pointer))
    assert (rewritten.version, rewritten.size) == (8, lines + pq.read_metadata(sidecar).num_rows)
    assert rewritten.size_in_bytes == checkpoint.stat().st_size


def test_change_data_of_a_v2_table(tmp_path: Path) -> None:
    """cdc reads a V2-checkpointed source: every row of the table is an insert of its log."""
    root = _fixture("v2-checkpoints-json-with-sidecars.tar.zst", tmp_path)
    rows = _same_rows(root)
    output = tmp_path / "changes"
    report = api.cdc(str(root), CdcOptions(from_version=0, output=str(output)))
    assert (report.from_version, report.to_version, report.rows_insert, report.rows_delete) == (0, 6, len(rows), 0)
    assert DeltaTable(str(output)).to_pyarrow_table().num_rows == len(rows)


# --- log compaction files -----------------------------------------------------------------------------


def test_log_compaction_files_give_the_state_the_commits_give(tmp_path: Path) -> None:
    """Every version of the kernel table: the same state with and without its compaction files."""
    root = _fixture("compacted-log-files-table.tar.zst", tmp_path)
    storage = open_storage(str(root))
    listing = list_log(storage, str(root))
    assert sorted(listing.compactions) == [(0, 5), (6, 10), (6, 15)]
    latest = segment_for_version(listing, str(root))
    assert [(a, b) for a, b, _ in latest.compactions] == [(0, 5), (6, 15)]
    without = replace(listing, compactions={})
    for version in range(listing.latest_version + 1):  # type: ignore[operator]
        used = load_snapshot(storage, str(root), version=version, listing=listing)
        plain = load_snapshot(storage, str(root), version=version, listing=without)
        assert plain.segment.compactions == () and (version < 5 or used.segment.compactions)
        assert dict(used.files) == dict(plain.files), version
        assert used.tombstones == plain.tombstones and used.txns == plain.txns, version
        assert (used.protocol, used.metadata, used.domains) == (plain.protocol, plain.metadata, plain.domains)
    assert _same_rows(root)


def test_expiry_deletes_compaction_files_starting_at_or_before_the_kept_checkpoint(tmp_path: Path) -> None:
    """ "Metadata Cleanup" step 3: compaction files with startVersion <= the cutoff checkpoint go."""
    root = _fixture("compacted-log-files-table.tar.zst", tmp_path)
    rows = _same_rows(root)
    api.checkpoint(str(root), CheckpointOptions(version=6))
    _age(root, 40)
    for version in range(7, 26):
        stamp = time.time()
        os.utime(_log(root) / f"{version:020d}.json", (stamp, stamp))
    expired = api.expire(str(root), ExpiryOptions(older_than="30d"))
    assert expired.checkpoint_kept == 6 and expired.deleted_other_files == 3
    assert not list(_log(root).glob("*.compacted.json"))
    assert _same_rows(root) == rows


# --- version checksum files -----------------------------------------------------------------------------


def test_inspect_checks_the_version_checksum_against_the_replay(tmp_path: Path) -> None:
    consistent = _fixture("v2-checkpoints-parquet-without-sidecars.tar.zst", tmp_path)
    report = api.inspect(str(consistent))
    assert (report.checksum, report.checksum_mismatches) == ("matches", None)

    crc = _log(consistent) / f"{2:020d}.crc"
    doctored = json.loads(crc.read_text())
    doctored["numFiles"] += 1
    crc.write_text(json.dumps(doctored))
    report = api.inspect(str(consistent))
    assert report.checksum == "mismatch"
    assert report.checksum_mismatches == [
        f"numFiles: recorded {doctored['numFiles']}, replayed {doctored['numFiles'] - 1}"
    ]

    # crc-full records ten files its log never adds: a log modified against the append-only rule.
    full = api.inspect(str(_fixture("crc-full", tmp_path)))
    assert full.checksum == "mismatch"
    assert full.checksum_mismatches is not None
    assert full.checksum_mismatches[:2] == [
        "tableSizeBytes: recorded 5259, replayed 0",
        "numFiles: recorded 10, replayed 0",
    ]
    assert api.inspect(str(_fixture("v2-checkpoint-json", tmp_path))).checksum == "absent"


# --- domainMetadata -------------------------------------------------------------------------------------


def _domain_table(root: Path) -> None:
    """A delta-rs table upgraded by hand to writer 7 with ``domainMetadata`` and two domains, one then
    removed (a tombstone)."""
    for value in range(6):
        write_deltalake(str(root), pa.table({"id": [value]}), mode="append")
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["domainMetadata"]}
    lines = [
        {"protocol": protocol},
        {"domainMetadata": {"domain": "app.kept", "configuration": '{"a":1}', "removed": False}},
        {"domainMetadata": {"domain": "app.gone", "configuration": '{"b":2}', "removed": False}},
    ]
    (_log(root) / f"{6:020d}.json").write_text("".join(json.dumps(line) + "\n" for line in lines))
    gone = {"domainMetadata": {"domain": "app.gone", "configuration": '{"b":2}', "removed": True}}
    (_log(root) / f"{7:020d}.json").write_text(json.dumps(gone) + "\n")


def test_domains_survive_compaction_and_checkpoint_tombstones_excluded(tmp_path: Path) -> None:
    root = tmp_path / "domains"
    _domain_table(root)
    rows = _same_rows(root)
    assert {d.domain for d in _snapshot(root).domains.values()} == {"app.kept"}
    assert api.compact(str(root)).committed_version == 8
    assert api.checkpoint(str(root)).status == "written"
    (checkpoint,) = _log(root).glob("*.checkpoint.parquet")
    domains = [d for d in pq.read_table(checkpoint).column("domainMetadata").to_pylist() if d]
    assert domains == [{"domain": "app.kept", "configuration": '{"a":1}', "removed": False}]
    for version in range(9):
        (_log(root) / f"{version:020d}.json").unlink()
    assert _snapshot(root).domains == {"app.kept": DomainMetadata(domain="app.kept", configuration='{"a":1}')}
    assert _same_rows(root) == rows


def test_verify_finds_a_checkpoint_that_dropped_a_domain(tmp_path: Path) -> None:
    root = tmp_path / "domains"
    _domain_table(root)
    report = api.checkpoint(str(root))
    target = resolve_target(str(root), CatalogOptions(), StorageOptions())
    assert checkpoint_matches_log(target, report).passed
    (path,) = _log(root).glob("*.checkpoint.parquet")
    pq.write_table(pq.read_table(path).drop_columns(["domainMetadata"]), path)
    broken = checkpoint_matches_log(target, report)
    assert not broken.passed and "metadata domains differ" in broken.summary


def _task_checkpoint(root: Path, part_size: int) -> list[str]:
    """A checkpoint written as Spark writes it: every part by its task, from the plan alone."""
    storage = open_storage(str(root))
    plan = plan_checkpoint(_snapshot(root), DeltaCheckpointOptions(part_size=part_size), StorageOptions())
    shipped = CheckpointPlan.model_validate_json(plan.model_dump_json())  # no snapshot on the executors
    finalize_checkpoint(shipped, [write_part(part) for part in shipped.parts], StorageOptions())
    assert storage.exists(str(_log(root) / "_last_checkpoint"))
    return [Path(part.location).name for part in shipped.parts]


def test_part_tasks_keep_domains_in_part_one(tmp_path: Path) -> None:
    root = tmp_path / "domains"
    _domain_table(root)
    rows = _same_rows(root)
    names = _task_checkpoint(root, part_size=3)
    assert len(names) > 1
    domains = [[d for d in pq.read_table(_log(root) / n).column("domainMetadata").to_pylist() if d] for n in names]
    assert domains[0] == [{"domain": "app.kept", "configuration": '{"a":1}', "removed": False}]
    assert not any(domains[1:])
    for version in range(8):
        (_log(root) / f"{version:020d}.json").unlink()
    assert list(_snapshot(root).domains) == ["app.kept"]
    assert _same_rows(root) == rows


def test_a_part_task_writes_the_v2_checkpoint_of_a_v2_table(tmp_path: Path) -> None:
    """However small the part size, one task writes the one UUID-named V2 file."""
    root = _fixture("v2-checkpoint-parquet", tmp_path)
    rows = _same_rows(root)
    shutil.rmtree(_log(root) / "_sidecars")
    for path in [*_log(root).glob("*.checkpoint.*"), _log(root) / "_last_checkpoint"]:
        path.unlink()
    (name,) = _task_checkpoint(root, part_size=1)
    assert UUID_CHECKPOINT.match(name)
    assert pq.read_table(_log(root) / name).column("checkpointMetadata").to_pylist()[0] == {"version": 2, "tags": None}
    for version in range(3):
        (_log(root) / f"{version:020d}.json").unlink()
    assert _same_rows(root) == rows


def test_a_concurrent_commit_changing_a_domain_ours_writes_is_a_conflict(tmp_path: Path) -> None:
    root = tmp_path / "domains"
    _domain_table(root)
    storage = open_storage(str(root))

    def land(domain: str) -> None:
        version = list_log(storage, str(root)).latest_version + 1  # type: ignore[operator]
        line = {"domainMetadata": {"domain": domain, "configuration": "{}", "removed": False}}
        (_log(root) / f"{version:020d}.json").write_text(json.dumps(line) + "\n")

    def ours(read_version: int) -> int:
        return commit(
            storage,
            str(root),
            read_version=read_version,
            actions=[DomainMetadata(domain="app.kept", configuration='{"a":2}')],
            operation="SET DOMAIN",
            operation_parameters={},
            conflict_rule=lambda winner: None,  # nothing but the domain rule
            backoff_s=0.0,
        ).version

    land("app.other")  # version 8: another domain, no conflict
    assert ours(7) == 9
    land("app.kept")  # version 10
    with pytest.raises(CommitConflict, match=r"version 10 changed metadata domain app\.kept that this commit writes"):
        ours(9)
    assert _snapshot(root).domains["app.kept"].configuration == "{}"


def test_the_databricks_domain_table_checkpoints_with_its_row_ids_and_domains(tmp_path: Path) -> None:
    """delta-rs's table-with-domain-metadata is a checkpoint only: its three domains are the
    snapshot's; it enables rowTracking and clustering, so a new checkpoint must keep every file's
    baseRowId/defaultRowCommitVersion ("Writer Requirements for Row Tracking") and the domains."""
    root = _fixture("table-with-domain-metadata", tmp_path)
    snapshot = _snapshot(root)
    assert sorted(snapshot.domains) == ["com.databricks.liquid", "delta.clustering", "delta.rowTracking"]
    assert json.loads(snapshot.domains["delta.rowTracking"].configuration)["rowIdHighWaterMark"] == 435
    checkpoint = root / "_delta_log" / "00000000000000000108.checkpoint.parquet"

    def row_fields() -> dict[str, tuple[int, int]]:
        adds = [r["add"] for r in pq.read_table(checkpoint, columns=["add"]).to_pylist() if r["add"]]
        return {a["path"]: (a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds}

    before, spark_bytes = row_fields(), checkpoint.read_bytes()
    assert len(before) == 109 and all(base is not None for base, _ in before.values())
    report = api.checkpoint(str(root), CheckpointOptions(force=True))
    assert report.status == "written" and report.version == 108
    assert checkpoint.read_bytes() != spark_bytes  # lakeops rewrote it
    assert row_fields() == before
    assert _snapshot(root).domains == snapshot.domains


def test_v2_and_domain_features_are_honoured_by_every_operation() -> None:
    assert FEATURES["v2Checkpoint"].reader and FEATURES["v2Checkpoint"].operations == ALL_OPERATIONS
    assert not FEATURES["domainMetadata"].reader and FEATURES["domainMetadata"].operations == ALL_OPERATIONS


def test_a_json_v2_checkpoint_keeps_its_v2_actions_apart(tmp_path: Path) -> None:
    """checkpointMetadata and sidecar lines are parsed, kept apart from what replay applies."""
    root = _fixture("v2-checkpoint-json", tmp_path)
    (path,) = _log(root).glob("*.checkpoint.*.json")
    actions: CommitActions = parse_commit(path.read_bytes(), 2, str(path))
    assert actions.checkpoint_metadata is not None and actions.checkpoint_metadata.version == 2
    assert len(actions.sidecars) == 2 and not actions.adds
