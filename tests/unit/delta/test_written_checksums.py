"""Version checksum files lakeops writes after its commits (issue 22): exact, never overwriting, and
never failing a commit (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#version-checksum-file).

Every ``.crc`` written is checked twice: by lakeops's own checker against the replay, and against
delta-rs's view of the same version (its live ``add`` actions, metadata and protocol, transactions,
and the rows its deletion vectors hide), with the commit's ``txnId``. Fixtures are copied to
``tmp_path`` before anything writes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from delta_rs_sql import delta_rs_rows
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from lakeops_testdata import TESTDATA

from lakeops import api
from lakeops.delta.snapshot import load_snapshot
from lakeops.delta.version_checksum import check_version_checksum
from lakeops.errors import StorageError
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.checkpoint import CheckpointOptions
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.orphans import OrphansOptions
from lakeops.ops.trash import RestoreOptions
from lakeops.storage import open_storage
from lakeops.storage.local import LocalStorage

#: Spark-written (Delta 3.4), a ``.crc`` beside each of its commits 0..6, a V2 checkpoint at each.
SPARK_TABLE = TESTDATA / "modern" / "delta" / "v2-checkpoints-json-with-sidecars.tar.zst"
#: Spark-written, a checkpoint at 10; in partitions 6 and 8 one row each hidden by a deletion vector.
DV_TABLE = TESTDATA / "delta-kernel" / "dv-partitioned-with-checkpoint.tar.zst"


def _unpack(archive: Path, tmp_path: Path, inner: str = "") -> Path:
    subprocess.run(["tar", "--zstd", "-xf", str(archive), "-C", str(tmp_path)], check=True)
    return tmp_path / archive.name.removesuffix(".tar.zst") / inner


def _log(root: Path) -> Path:
    return root / "_delta_log"


def _crc_files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(_log(root).glob("*.crc")) if not p.name.startswith(".")}


def _rows(root: Path) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in delta_rs_rows(root).to_pylist())


def _written_checksum(root: Path, version: int) -> dict[str, Any]:
    """The ``.crc`` of ``version``: it matches lakeops's replay and delta-rs's view of that version."""
    crc: dict[str, Any] = json.loads((_log(root) / f"{version:020d}.crc").read_text())
    storage = open_storage(str(root))
    assert check_version_checksum(storage, load_snapshot(storage, str(root), version=version)).status == "matches"
    table = DeltaTable(str(root), version=version)
    adds = table.get_add_actions(flatten=True)
    assert (crc["numFiles"], crc["tableSizeBytes"]) == (adds.num_rows, sum(adds.column("size_bytes").to_pylist()))
    assert (crc["numMetadata"], crc["numProtocol"], crc["metadata"]["id"]) == (1, 1, table.metadata().id)
    protocol = table.protocol()
    assert (crc["protocol"]["minReaderVersion"], crc["protocol"]["minWriterVersion"]) == (
        protocol.min_reader_version,
        protocol.min_writer_version,
    )
    for txn in crc.get("setTransactions", []):
        assert table.transaction_version(txn["appId"]) == txn["version"]
    commit_info = json.loads((_log(root) / f"{version:020d}.json").read_text().splitlines()[0])["commitInfo"]
    assert crc["txnId"] == commit_info["txnId"]
    assert "allFiles" not in crc and "fileSizeHistogram" not in crc
    return crc


def test_compaction_continues_a_spark_tables_checksum_chain(tmp_path: Path) -> None:
    """After a lakeops OPTIMIZE of a Spark table, every version has a matching ``.crc``: Spark's kept
    byte for byte, lakeops's for 7. Checkpoint, expiry, VACUUM and a trash restore commit nothing,
    so they write none; expiry takes checksums only with their commits."""
    root = _unpack(SPARK_TABLE, tmp_path)
    rows, spark_crcs = _rows(root), _crc_files(root)
    assert len(spark_crcs) == 7

    report = api.compact(str(root), CompactionOptions(target_file_size=1 << 20))

    assert (report.committed_version, report.files_removed, report.warnings) == (7, 101, [])
    crc = _written_checksum(root, 7)
    assert (crc["numFiles"], crc["setTransactions"], crc["domainMetadata"]) == (1, [], [])
    assert (crc["numDeletionVectorsOpt"], crc["numDeletedRecordsOpt"]) == (0, 0)
    assert "inCommitTimestampOpt" not in crc  # the table does not enable in-commit timestamps
    assert {n: b for n, b in _crc_files(root).items() if n != f"{7:020d}.crc"} == spark_crcs
    storage = open_storage(str(root))
    for version in range(8):
        assert check_version_checksum(storage, load_snapshot(storage, str(root), version=version)).status == "matches"
    assert _rows(root) == rows

    ours = _crc_files(root)[f"{7:020d}.crc"]
    assert api.checkpoint(str(root), CheckpointOptions()).status == "written"
    old = time.time() - 40 * 86_400
    for path in root.rglob("*"):
        os.utime(path, (old, old))
    expired = api.expire(str(root), ExpiryOptions(older_than="30d"), quarantine=True)
    assert expired.deleted_commits == 7 and expired.quarantine_run is not None
    assert _crc_files(root) == {f"{7:020d}.crc": ours}  # the commits' checksums went with them
    api.orphans(str(root), OrphansOptions(older_than="7d"))
    api.restore(str(root), RestoreOptions(run_id=expired.quarantine_run))
    assert _crc_files(root) == {**spark_crcs, f"{7:020d}.crc": ours}
    assert not (_log(root) / f"{8:020d}.json").exists() and not (_log(root) / f"{8:020d}.crc").exists()
    assert _rows(root) == rows


@pytest.mark.parametrize(("dv_purge_ratio", "vectors"), [(1.0, 2), (0.1, 0)])
def test_compaction_of_a_deletion_vector_table_counts_the_vectors_left(
    tmp_path: Path, dv_purge_ratio: float, vectors: int
) -> None:
    """The rows deletion vectors hide after the commit are what delta-rs hides: its files' records
    minus the rows it reads. Kept vectors (purge ratio 1) are counted; purged ones are gone."""
    root = _unpack(DV_TABLE, tmp_path, "delta")
    rows = _rows(root)

    report = api.compact(str(root), CompactionOptions(min_input_files=2, dv_purge_ratio=dv_purge_ratio))

    assert report.committed_version == 16 and report.warnings == []
    crc = _written_checksum(root, 16)
    records = sum(DeltaTable(str(root)).get_add_actions(flatten=True).column("num_records").to_pylist())
    assert crc["numDeletionVectorsOpt"] == vectors
    assert crc["numDeletedRecordsOpt"] == records - len(rows) == vectors
    assert _rows(root) == rows


def test_change_table_commits_record_their_transaction(tmp_path: Path) -> None:
    """cdc's output table: the commit creating it and each append carry a ``.crc`` whose
    ``setTransactions`` holds the source's progress marker, as delta-rs reads it."""
    source, output = tmp_path / "source", tmp_path / "changes"
    write_deltalake(str(source), pa.table({"id": pa.array([1, 2], pa.int64())}))
    api.cdc(str(source), CdcOptions(from_version=0, output=str(output)))
    write_deltalake(str(source), pa.table({"id": pa.array([3], pa.int64())}), mode="append")

    report = api.cdc(str(source), CdcOptions(from_version=1, output=str(output)))

    assert report.committed_version == 1 and report.warnings == []
    created, appended = _written_checksum(output, 0), _written_checksum(output, 1)
    assert [t["version"] for t in created["setTransactions"]] == [0]
    assert [t["version"] for t in appended["setTransactions"]] == [1]
    assert appended["numFiles"] == created["numFiles"] + 1
    assert sorted(DeltaTable(str(output)).to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3]


def test_transactions_a_table_expires_are_neither_recorded_nor_checked(tmp_path: Path) -> None:
    """With ``delta.setTransactionRetentionDuration`` which transactions are live depends on the
    reader's clock, so the checksum leaves ``setTransactions`` out, and inspect does not judge it."""
    root = tmp_path / "t"
    for version in range(2):
        write_deltalake(
            str(root),
            pa.table({"id": pa.array([version], pa.int64())}),
            mode="append",
            configuration={"delta.setTransactionRetentionDuration": "interval 1 days"},
            commit_properties=CommitProperties(app_transactions=[Transaction("loader", version)]),
        )

    assert api.compact(str(root), CompactionOptions(min_input_files=2)).committed_version == 2
    crc = _written_checksum(root, 2)
    assert "setTransactions" not in crc and DeltaTable(str(root)).transaction_version("loader") == 1
    # Another writer's list (here: none live) is not judged either.
    (_log(root) / f"{2:020d}.crc").write_text(json.dumps({**crc, "setTransactions": []}))
    assert api.inspect(str(root)).checksum == "matches"


def test_an_existing_checksum_file_is_never_overwritten(tmp_path: Path) -> None:
    """A ``.crc`` already at the version lakeops commits (left by a crashed writer) stays byte for
    byte; the report says it disagrees with the committed state, and inspect finds the mismatch."""
    root = _unpack(SPARK_TABLE, tmp_path)
    stale = _log(root) / f"{7:020d}.crc"
    shutil.copyfile(_log(root) / f"{6:020d}.crc", stale)
    before = stale.read_bytes()

    report = api.compact(str(root), CompactionOptions(target_file_size=1 << 20))

    assert report.committed_version == 7 and stale.read_bytes() == before
    (warning,) = report.warnings
    assert str(stale) in warning and "kept (never overwritten)" in warning
    assert "numFiles: recorded 101, replayed 1" in warning
    inspected = api.inspect(str(root))
    assert inspected.checksum == "mismatch" and inspected.checksum_mismatches is not None
    assert "numFiles: recorded 101, replayed 1" in inspected.checksum_mismatches


def test_a_checksum_the_store_refuses_leaves_the_commit_and_is_reported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store fails every ``.crc`` write: the compaction still commits (delta-rs reads the same
    rows at the new version), no checksum is left, and the report names the file and the failure."""
    root = _unpack(SPARK_TABLE, tmp_path)
    rows = _rows(root)
    put_if_absent = LocalStorage.put_if_absent

    def failing(self: LocalStorage, path: str, data: bytes) -> None:
        if path.endswith(".crc"):
            raise StorageError(f"{path}: disk quota exceeded")
        put_if_absent(self, path, data)

    monkeypatch.setattr(LocalStorage, "put_if_absent", failing)

    report = api.compact(str(root), CompactionOptions(target_file_size=1 << 20))

    assert report.committed_version == 7 and DeltaTable(str(root)).version() == 7
    (warning,) = report.warnings
    assert f"{7:020d}.crc" in warning and "was not written" in warning and "disk quota exceeded" in warning
    assert not (_log(root) / f"{7:020d}.crc").exists()
    assert api.inspect(str(root)).checksum == "absent"
    assert _rows(root) == rows
