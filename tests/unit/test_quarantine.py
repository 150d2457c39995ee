"""lakeops.quarantine: a batch with a quarantine run moves its files (manifest first), restore puts them
back byte-identical or refuses naming the file in the way, purge deletes only runs past the retention;
on local disk and on the moto S3 fixture."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lakeops import quarantine
from lakeops.deletion import Candidate, delete_batch, make_batches
from lakeops.errors import AlreadyExists, InvalidArgument, NotFound, StorageError, UnsafeOperation
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.s3 import shared_client

FILES = {"data/a.parquet": b"alpha", "data/p=1/b.parquet": b"bravo!", "c.parquet": b"charlie"}


def _table(root: str, options: StorageOptions) -> None:
    storage = open_storage(root, options)
    for relative, data in FILES.items():
        storage.write(f"{root}/{relative}", data)
    storage.write(f"{root}/keep.parquet", b"live")


def _quarantine(root: str, options: StorageOptions, run_id: str) -> None:
    candidates = [Candidate(path=f"{root}/{p}", size=len(d), kind="untracked") for p, d in FILES.items()]
    for batch in make_batches(root, options, candidates, 2):
        result = delete_batch(batch.model_copy(update={"quarantine_run": run_id, "operation": "orphans"}))
        assert result.files == len(batch.files)


def _contents(root: str, options: StorageOptions) -> dict[str, bytes]:
    storage = open_storage(root, options)
    return {f.path[len(root) + 1 :]: storage.read(f.path) for f in storage.list(root)}


def _move_and_restore(root: str, options: StorageOptions) -> None:
    _table(root, options)
    before = _contents(root, options)
    run_id = quarantine.new_run_id()

    _quarantine(root, options, run_id)

    after = _contents(root, options)
    assert set(after) & set(FILES) == set()
    assert {k: v for k, v in after.items() if not k.startswith("_lakeops_trash/")} == {"keep.parquet": b"live"}
    for relative, data in FILES.items():
        assert after[f"_lakeops_trash/{run_id}/{relative}"] == data
    entries = quarantine.read_manifest(root, run_id, options)
    assert [(e.path, e.size, e.kind, e.run_id, e.operation) for e in entries] == [
        (p, len(FILES[p]), "untracked", run_id, "orphans") for p in sorted(FILES)
    ]
    assert {k for k in after if k.endswith(".jsonl")} == {
        f"_lakeops_trash/{run_id}/_manifest-00000.jsonl",
        f"_lakeops_trash/{run_id}/_manifest-00001.jsonl",
    }

    result = quarantine.restore(root, run_id, options)

    assert (result.files, result.bytes, result.already_restored) == (3, sum(map(len, FILES.values())), 0)
    assert _contents(root, options) == before  # byte-identical, and the run's trash is gone
    assert quarantine.trash_runs(root, options) == {}


def test_quarantine_and_restore_local(tmp_path: Path) -> None:
    _move_and_restore(str(tmp_path / "t"), StorageOptions())


@pytest.mark.s3
def test_quarantine_and_restore_s3(s3_bucket: Any) -> None:
    _move_and_restore(f"{s3_bucket.uri}/warehouse/t", s3_bucket.options)


@pytest.mark.s3
def test_s3_moves_copy_server_side_and_never_overwrite(s3_bucket: Any) -> None:
    """No data file is read back through this process (a 1 GB file would be 1 GB of driver memory):
    the moves are server-side copies. A file already at its trash path is never overwritten: the move
    fails naming it and the table's file stays."""
    root, options = f"{s3_bucket.uri}/warehouse/t", s3_bucket.options
    _table(root, options)
    client = shared_client(endpoint_url=options.endpoint_url)  # the one open_storage hands out
    read: list[str] = []

    def record(params: dict[str, Any], **_: Any) -> None:
        read.append(params["Key"])

    client.meta.events.register("before-parameter-build.s3.GetObject", record)
    try:
        run_id = quarantine.new_run_id()
        _quarantine(root, options, run_id)
        quarantine.restore(root, run_id, options)
    finally:
        client.meta.events.unregister("before-parameter-build.s3.GetObject", record)
    assert read and all(key.endswith(".jsonl") for key in read)  # manifests only
    assert _contents(root, options) == {**FILES, "keep.parquet": b"live"}

    run_id = quarantine.new_run_id()
    storage = open_storage(root, options)
    storage.write(f"{root}/_lakeops_trash/{run_id}/c.parquet", b"already here")
    with pytest.raises(StorageError, match=r"cannot quarantine c.parquet .*c.parquet.* already exists"):
        _quarantine(root, options, run_id)
    assert storage.read(f"{root}/_lakeops_trash/{run_id}/c.parquet") == b"already here"
    assert storage.read(f"{root}/c.parquet") == FILES["c.parquet"]


def test_restore_refuses_to_overwrite_and_restores_nothing(tmp_path: Path) -> None:
    root, options = str(tmp_path / "t"), StorageOptions()
    _table(root, options)
    run_id = quarantine.new_run_id()
    _quarantine(root, options, run_id)
    (tmp_path / "t" / "data" / "p=1" / "b.parquet").write_bytes(b"a new writer's file")

    with pytest.raises(AlreadyExists, match=r"data/p=1/b.parquet exists again .* nothing was restored"):
        quarantine.restore(root, run_id, options)

    assert not (tmp_path / "t" / "c.parquet").exists()
    assert (tmp_path / "t" / "data" / "p=1" / "b.parquet").read_bytes() == b"a new writer's file"
    with pytest.raises(NotFound, match="no quarantine run"):
        quarantine.restore(root, quarantine.new_run_id(), options)
    with pytest.raises(InvalidArgument, match="not a lakeops run id"):
        quarantine.restore(root, "../../etc", options)


def test_interrupted_restore_can_be_rerun(tmp_path: Path) -> None:
    root, options = str(tmp_path / "t"), StorageOptions()
    _table(root, options)
    run_id = quarantine.new_run_id()
    _quarantine(root, options, run_id)
    trash = tmp_path / "t" / "_lakeops_trash" / run_id
    (trash / "c.parquet").rename(tmp_path / "t" / "c.parquet")  # a restore that died after one move

    result = quarantine.restore(root, run_id, options)

    assert (result.files, result.already_restored) == (2, 1)
    assert all((tmp_path / "t" / p).read_bytes() == d for p, d in FILES.items())


def test_batches_never_touch_the_trash_or_the_audit_log(tmp_path: Path) -> None:
    root, options = str(tmp_path / "t"), StorageOptions()
    for reserved in ("_lakeops_trash/20200101T000000Z-abcdef/x.parquet", "_lakeops_audit/r.json"):
        (tmp_path / "t" / reserved).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "t" / reserved).write_bytes(b"x")
        [batch] = make_batches(root, options, [Candidate(path=f"{root}/{reserved}", size=1, kind="untracked")], 10)
        with pytest.raises(UnsafeOperation, match=f"inside {reserved.split('/')[0]}"):
            delete_batch(batch)
        assert (tmp_path / "t" / reserved).exists()


def test_run_ids_sort_by_time_and_purge_deletes_only_old_runs(tmp_path: Path) -> None:
    root, options = str(tmp_path / "t"), StorageOptions()
    now = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
    old, recent = quarantine.new_run_id(now - timedelta(days=8)), quarantine.new_run_id(now - timedelta(days=6))
    assert sorted([recent, old]) == [old, recent] and quarantine.run_time(old) == now - timedelta(days=8)
    _table(root, options)
    _quarantine(root, options, old)
    open_storage(root).write(f"{root}/c.parquet", b"charlie again")
    open_storage(root).write(f"{root}/data/a.parquet", b"alpha again")
    open_storage(root).write(f"{root}/data/p=1/b.parquet", b"bravo again")
    _quarantine(root, options, recent)
    stranger = tmp_path / "t" / "_lakeops_trash" / "not-a-run" / "f"
    stranger.parent.mkdir()
    stranger.write_bytes(b"?")

    preview = quarantine.purge(root, timedelta(days=7), options, now=now, dry_run=True)
    assert preview.runs == [old] and (tmp_path / "t" / "_lakeops_trash" / old).exists()

    purged = quarantine.purge(root, timedelta(days=7), options, now=now)

    assert purged.runs == [old] and purged.files == 5  # three files and two manifests
    assert sorted(p.name for p in (tmp_path / "t" / "_lakeops_trash").iterdir()) == sorted([recent, "not-a-run"])
    assert set(quarantine.trash_runs(root, options)) == {recent, "not-a-run"}
    assert json.loads((tmp_path / "t" / "_lakeops_trash" / recent / "_manifest-00000.jsonl").read_text().split()[0])
    with pytest.raises(InvalidArgument, match="negative"):
        quarantine.purge(root, timedelta(days=-1), options)
    forever = quarantine.purge(root, timedelta(days=739_951), options, now=now)  # before year 1: none that old
    assert forever.runs == [] and (tmp_path / "t" / "_lakeops_trash" / recent).exists()


def test_a_retried_batch_finishes_the_moves_of_the_failed_attempt(tmp_path: Path) -> None:
    root, options = str(tmp_path / "t"), StorageOptions()
    _table(root, options)
    run_id = quarantine.new_run_id()
    candidates = [Candidate(path=f"{root}/{p}", size=len(d), kind="untracked") for p, d in FILES.items()]
    [batch] = make_batches(root, options, candidates, 10)
    batch = batch.model_copy(update={"quarantine_run": run_id, "operation": "orphans"})
    (tmp_path / "t" / "_lakeops_trash" / run_id).mkdir(parents=True)
    (tmp_path / "t" / "c.parquet").rename(tmp_path / "t" / "_lakeops_trash" / run_id / "c.parquet")
    manifest = tmp_path / "t" / "_lakeops_trash" / run_id / "_manifest-00000.jsonl"
    manifest.write_text("".join(json.dumps({"path": p}) + "\n" for p in sorted(FILES)))  # the first attempt's

    assert delete_batch(batch).files == 3  # the Spark task's retry

    assert {k for k in _contents(root, options) if not k.startswith("_lakeops_trash/")} == {"keep.parquet"}
    manifest.write_text(json.dumps({"path": "other.parquet"}) + "\n")
    with pytest.raises(StorageError, match="already lists other files"):
        delete_batch(batch)
