"""Optimistic commits with put-if-absent, on local disk and on S3 (moto over HTTP)
("Creation of New Log Entries", "Delta Log Entries", "Action Reconciliation")."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from lakeops.delta.actions import Add, Remove, action_to_line
from lakeops.delta.commit import ENGINE_INFO, STREAM_ACTIONS, CommitResult, ConflictRule, commit
from lakeops.delta.commit_file import CommitActions
from lakeops.delta.snapshot import load_snapshot
from lakeops.delta.version_checksum import read_version_checksum
from lakeops.errors import CommitConflict, CommitStateUnknown, StorageError
from lakeops.storage import Storage, join, s3
from lakeops.storage.confined import ConfinedStorage

SCHEMA_STRING = json.dumps(
    {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
)


def _add(path: str) -> Add:
    return Add(path=path, partition_values={}, size=10, modification_time=1, data_change=True)


def _remove(path: str) -> Remove:
    return Remove(path=path, deletion_timestamp=2, data_change=False, size=10)


def _rewrites(*paths: str) -> ConflictRule:
    """The rule of a rewrite of ``paths``: a winner that removed one of them conflicts."""

    def rule(winner: CommitActions) -> str | None:
        hit = next((r.path for r in winner.removes if r.path in paths), None)
        return None if hit is None else f"version {winner.version} removed {hit}"

    return rule


def _commit_path(root: str, version: int) -> str:
    return join(root, "_delta_log", f"{version:020d}.json")


def _lines(storage: Storage, root: str, version: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in storage.read(_commit_path(root, version)).decode().splitlines()]


def _create_table(storage: Storage, root: str, files: list[str]) -> None:
    lines = [
        json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
        json.dumps(
            {
                "metaData": {
                    "id": "t-1",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": SCHEMA_STRING,
                    "partitionColumns": [],
                    "configuration": {},
                }
            }
        ),
        *(action_to_line(_add(f)) for f in files),
    ]
    storage.put_if_absent(_commit_path(root, 0), ("\n".join(lines) + "\n").encode())


def _other_writer(storage: Storage, root: str, version: int, *actions: Add | Remove) -> bytes:
    """Another engine's commit landing at ``version`` first."""
    raw = (
        "\n".join(
            [
                json.dumps({"commitInfo": {"operation": "OTHER", "txnId": "someone-else"}}),
                *(action_to_line(a) for a in actions),
            ]
        )
        + "\n"
    ).encode()
    storage.put_if_absent(_commit_path(root, version), raw)
    return raw


def _append(storage: Storage, root: str, read_version: int, path: str, **kwargs: Any) -> CommitResult:
    return commit(
        storage,
        root,
        read_version=read_version,
        actions=[_add(path)],
        operation="WRITE",
        operation_parameters={"mode": "Append"},
        conflict_rule=lambda winner: None,
        backoff_s=0.001,
        **kwargs,
    )


def test_commit_writes_the_next_version_with_commit_info_first(any_storage_root: tuple[str, Storage]) -> None:
    root, storage = any_storage_root
    _create_table(storage, root, ["file0.parquet"])
    result = commit(
        storage,
        root,
        read_version=0,
        actions=[_remove("file0.parquet"), _add("file1.parquet")],
        operation="OPTIMIZE",
        operation_parameters={"predicate": "[]"},
        operation_metrics={"numAddedFiles": 1},
        conflict_rule=_rewrites("file0.parquet"),
    )
    assert (result.version, result.attempts) == (1, 1)
    lines = _lines(storage, root, 1)
    assert [next(iter(line)) for line in lines] == ["commitInfo", "remove", "add"]
    info = lines[0]["commitInfo"]
    assert info["operation"] == "OPTIMIZE"
    assert info["txnId"] == result.txn_id
    assert info["engineInfo"] == ENGINE_INFO and ENGINE_INFO.startswith("lakeops/")
    assert info["readVersion"] == 0
    assert info["operationMetrics"] == {"numAddedFiles": 1}
    snapshot = load_snapshot(storage, root)
    assert snapshot.version == 1
    assert {a.path for a in snapshot.files.values()} == {"file1.parquet"}
    assert {r.path for r in snapshot.tombstones.values()} == {"file0.parquet"}


def test_concurrent_append_first_our_commit_lands_at_the_next_version(any_storage_root: tuple[str, Storage]) -> None:
    root, storage = any_storage_root
    _create_table(storage, root, ["file0.parquet"])
    theirs = _other_writer(storage, root, 1, _add("appended.parquet"))
    result = commit(
        storage,
        root,
        read_version=0,
        actions=[_remove("file0.parquet"), _add("compacted.parquet")],
        operation="OPTIMIZE",
        operation_parameters={},
        conflict_rule=_rewrites("file0.parquet"),
        backoff_s=0.001,
    )
    assert (result.version, result.attempts) == (2, 2)
    assert storage.read(_commit_path(root, 1)) == theirs  # the winner's commit is untouched
    assert _lines(storage, root, 2)[0]["commitInfo"]["txnId"] == result.txn_id
    assert {a.path for a in load_snapshot(storage, root).files.values()} == {"appended.parquet", "compacted.parquet"}


def test_concurrent_remove_of_a_rewritten_file_is_a_conflict_naming_it(any_storage_root: tuple[str, Storage]) -> None:
    root, storage = any_storage_root
    _create_table(storage, root, ["file0.parquet", "file1.parquet"])
    _other_writer(storage, root, 1, _remove("file1.parquet"))
    with pytest.raises(CommitConflict) as info:
        commit(
            storage,
            root,
            read_version=0,
            actions=[_remove("file0.parquet"), _remove("file1.parquet"), _add("compacted.parquet")],
            operation="OPTIMIZE",
            operation_parameters={},
            conflict_rule=_rewrites("file0.parquet", "file1.parquet"),
            backoff_s=0.001,
        )
    message = str(info.value)
    assert "file1.parquet" in message
    assert "version 1" in message
    assert not storage.exists(_commit_path(root, 2))  # nothing was committed after the winner


@pytest.mark.parametrize("threads", [8])
def test_concurrent_appends_all_land_at_distinct_versions(any_storage_root: tuple[str, Storage], threads: int) -> None:
    root, storage = any_storage_root
    _create_table(storage, root, ["file0.parquet"])
    start = threading.Barrier(threads)
    results: dict[int, CommitResult] = {}
    errors: list[BaseException] = []

    def run(index: int) -> None:
        try:
            start.wait()
            results[index] = _append(storage, root, 0, f"thread-{index}.parquet", max_attempts=threads + 5)
        except BaseException as exc:  # reported below; a thread's exception would otherwise vanish
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not errors
    assert sorted(r.version for r in results.values()) == list(range(1, threads + 1))
    assert max(r.attempts for r in results.values()) > 1  # they really raced
    for index, result in results.items():
        lines = _lines(storage, root, result.version)
        assert lines[0]["commitInfo"]["txnId"] == result.txn_id  # nobody overwrote the winner's file
        assert [line["add"]["path"] for line in lines[1:]] == [f"thread-{index}.parquet"]
    snapshot = load_snapshot(storage, root)
    assert snapshot.version == threads
    assert {a.path for a in snapshot.files.values()} == {"file0.parquet"} | {
        f"thread-{i}.parquet" for i in range(threads)
    }


class _LostAnswer:
    """A storage whose first put-if-absent lands but reports a failure (the answer was lost)."""

    def __init__(self, inner: Storage, *, reads_fail: bool = False) -> None:
        self._inner = inner
        self._reads_fail = reads_fail
        self.puts = 0

    def put_if_absent(self, path: str, data: bytes) -> None:
        self.puts += 1
        self._inner.put_if_absent(path, data)
        raise StorageError(f"connection reset while writing {path}")

    def read(self, path: str) -> bytes:
        if self._reads_fail:
            raise StorageError(f"cannot read {path}: store unavailable")
        return self._inner.read(path)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_lost_answer_is_resolved_by_reading_the_txn_id_back(any_storage_root: tuple[str, Storage]) -> None:
    root, storage = any_storage_root
    _create_table(storage, root, ["file0.parquet"])
    flaky = _LostAnswer(storage)
    result = _append(flaky, root, 0, "new.parquet")  # type: ignore[arg-type]
    # The commit's put, then its checksum file's, whose lost answer is resolved by reading it back too.
    assert (result.version, result.attempts, flaky.puts, result.warnings) == (1, 1, 2, ())
    crc = read_version_checksum(storage, root, 1)
    assert crc is not None and crc.txn_id == result.txn_id
    assert not storage.exists(_commit_path(root, 2))


def test_lost_answer_that_cannot_be_checked_is_commit_state_unknown(any_storage_root: tuple[str, Storage]) -> None:
    root, storage = any_storage_root
    _create_table(storage, root, ["file0.parquet"])
    with pytest.raises(CommitStateUnknown, match="reading the table back failed .*nothing is deleted"):
        _append(_LostAnswer(storage, reads_fail=True), root, 0, "new.parquet")  # type: ignore[arg-type]


def test_a_commit_of_many_actions_is_streamed_and_rebased_like_any_other(
    any_storage_root: tuple[str, Storage], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above STREAM_ACTIONS the commit file is written piece by piece (on S3, 8 MB here: a multipart upload
    completed only if the version is still free): a version another writer took first is refused as
    with a single put, and the commit lands at the next one, whole."""
    monkeypatch.setattr(s3, "STREAM_PART_SIZE", 5 * 1024 * 1024)
    streamed: list[str] = []
    put_stream = ConfinedStorage.put_if_absent_stream

    def spy(self: ConfinedStorage, path: str, chunks: Any) -> None:
        streamed.append(path.rsplit("/", 1)[-1])
        put_stream(self, path, chunks)

    monkeypatch.setattr(ConfinedStorage, "put_if_absent_stream", spy)
    root, storage = any_storage_root
    old = [f"part-{i:05d}-{'x' * 300}.parquet" for i in range(STREAM_ACTIONS)]
    _create_table(storage, root, old)
    _other_writer(storage, root, 1, _add("appended.parquet"))
    result = commit(
        storage,
        root,
        read_version=0,
        actions=[*(_remove(p) for p in old), _add("compacted.parquet")],
        operation="OPTIMIZE",
        operation_parameters={"predicate": "[]"},
        conflict_rule=_rewrites(*old),
        backoff_s=0.001,
    )
    assert (result.version, result.attempts) == (2, 2)
    assert streamed == [f"{1:020d}.json", f"{2:020d}.json"]
    lines = _lines(storage, root, 2)
    assert len(lines) == 1 + STREAM_ACTIONS + 1 and lines[0]["commitInfo"]["txnId"] == result.txn_id
    assert {a.path for a in load_snapshot(storage, root).files.values()} == {"appended.parquet", "compacted.parquet"}
    assert storage.exists(_commit_path(root, 1)) and not storage.exists(_commit_path(root, 3))
