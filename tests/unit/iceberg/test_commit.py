"""The commit loop: retries on conflict while the change applies, ``commit.retry.*`` honoured,
``metadata-log`` kept and trimmed, and files kept or removed by outcome."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from iceberg_fixtures import minimal_metadata

from lakeops.errors import CommitConflict, CommitStateUnknown, StorageError
from lakeops.iceberg.catalog import FileSystemCatalog
from lakeops.iceberg.commit import RetryPolicy, commit_change
from lakeops.iceberg.metadata import TableMetadata
from lakeops.iceberg.table import IcebergTable, TableRef, load_table
from lakeops.storage import StorageOptions
from lakeops.storage.local import LocalStorage


def _table(tmp_path: Path, properties: dict[str, str] | None = None) -> IcebergTable:
    location = tmp_path / "t"
    (location / "metadata").mkdir(parents=True)
    metadata = minimal_metadata(location=str(location), properties=properties)
    (location / "metadata" / "v1.metadata.json").write_text(json.dumps(metadata))
    return load_table(TableRef(location=str(location)), StorageOptions())


@dataclass
class SetProperty:
    """A change that sets one property, refusing to apply once ``forbidden`` is set by someone else."""

    key: str
    value: str
    forbidden: str | None = None
    applied: list[int] = field(default_factory=list)
    abandoned: list[TableMetadata | None] = field(default_factory=list)

    def validate(self, start: IcebergTable, current: IcebergTable) -> None:
        if self.forbidden is not None and self.forbidden in current.metadata.properties:
            raise CommitConflict(f"{current.name}: {self.forbidden} was set concurrently")

    def apply(self, current: IcebergTable) -> TableMetadata:
        self.applied.append(current.metadata.last_updated_ms)
        return current.metadata.model_copy(update={"properties": {**current.metadata.properties, self.key: self.value}})

    def abandon(self, committed: TableMetadata | None) -> None:
        self.abandoned.append(committed)


def _concurrent_commit(table: IcebergTable, key: str) -> None:
    """Another writer (its own catalog client) commits a property between our read and our swap."""
    commit_change(load_table(table.ref, StorageOptions()), SetProperty(key, "theirs"))


def test_commit_writes_next_version_with_history(tmp_path: Path) -> None:
    table = _table(tmp_path)
    change = SetProperty("a", "1")
    outcome = commit_change(table, change)
    assert outcome.attempts == 1
    assert outcome.table.metadata_location.endswith("/metadata/v2.metadata.json")
    fresh = table.refresh()
    assert fresh.metadata.properties == {"a": "1"}
    assert [e.metadata_file for e in fresh.metadata.metadata_log] == [table.metadata_location]
    assert fresh.metadata.last_updated_ms > table.metadata.last_updated_ms
    assert change.abandoned == [outcome.metadata]  # told which metadata won, so it keeps its files


def test_conflict_retries_on_the_new_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(tmp_path)
    catalog = table.catalog
    real_swap = catalog.swap
    calls = []

    def racing_swap(expected: str, new: str, payload: bytes) -> str:
        calls.append(new)
        if len(calls) == 1:
            _concurrent_commit(table, "b")
        return real_swap(expected, new, payload)

    monkeypatch.setattr(catalog, "swap", racing_swap)
    sleeps: list[float] = []
    outcome = commit_change(table, SetProperty("a", "1"), sleep=sleeps.append)
    assert outcome.attempts == 2 and len(sleeps) == 1
    assert table.refresh().metadata.properties == {"a": "1", "b": "theirs"}
    assert outcome.table.metadata_location.endswith("v3.metadata.json")


def test_change_that_no_longer_applies_is_abandoned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(tmp_path)
    catalog = table.catalog
    real_swap = catalog.swap

    def racing_swap(expected: str, new: str, payload: bytes) -> str:
        _concurrent_commit(table, "b")
        return real_swap(expected, new, payload)

    monkeypatch.setattr(catalog, "swap", racing_swap)
    change = SetProperty("a", "1", forbidden="b")
    with pytest.raises(CommitConflict, match="b was set concurrently"):
        commit_change(table, change, sleep=lambda s: None)
    assert change.abandoned == [None]
    assert "a" not in table.refresh().metadata.properties


def test_retries_are_bounded_by_the_table_property(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(tmp_path, {"commit.retry.num-retries": "2", "commit.retry.min-wait-ms": "5"})
    catalog = table.catalog
    real_swap = catalog.swap
    counter = iter(range(100))

    def always_racing(expected: str, new: str, payload: bytes) -> str:
        _concurrent_commit(table, f"other-{next(counter)}")
        return real_swap(expected, new, payload)

    monkeypatch.setattr(catalog, "swap", always_racing)
    sleeps: list[float] = []
    change = SetProperty("a", "1")
    with pytest.raises(CommitConflict):
        commit_change(table, change, sleep=sleeps.append)
    assert len(change.applied) == 3 and len(sleeps) == 2  # first try + 2 retries
    assert 0.005 <= sleeps[0] <= 0.0055 and 0.010 <= sleeps[1] <= 0.011  # doubling backoff, 10% jitter
    assert change.abandoned == [None]


def test_unknown_outcome_deletes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = _table(tmp_path)

    def lost_answer(expected: str, new: str, payload: bytes) -> None:
        raise CommitStateUnknown(f"{table.name}: the answer to creating {new} was lost")

    monkeypatch.setattr(table.catalog, "swap", lost_answer)
    change = SetProperty("a", "1")
    with pytest.raises(CommitStateUnknown):
        commit_change(table, change)
    assert change.abandoned == []


def test_metadata_log_is_trimmed_and_old_files_deleted_when_asked(tmp_path: Path) -> None:
    table = _table(
        tmp_path,
        {"write.metadata.previous-versions-max": "2", "write.metadata.delete-after-commit.enabled": "true"},
    )
    for i in range(4):
        table = commit_change(table, SetProperty("n", str(i))).table
    log = [Path(e.metadata_file).name for e in table.metadata.metadata_log]
    assert log == ["v3.metadata.json", "v4.metadata.json"]
    remaining = sorted(p.name for p in (tmp_path / "t" / "metadata").glob("v*.metadata.json"))
    assert remaining == ["v3.metadata.json", "v4.metadata.json", "v5.metadata.json"]


def test_retry_policy_defaults_and_cap() -> None:
    policy = RetryPolicy(min_wait_ms=100, max_wait_ms=300)
    assert RetryPolicy().num_retries == 4
    assert 300 <= policy.wait_ms(5) <= 330


class _LostAnswer(LocalStorage):
    """put-if-absent of a metadata file whose answer is lost, once: the store first holds what
    ``lands`` makes of our payload (None: nothing), then the call fails as an unanswered request does."""

    def __init__(self, lands: Callable[[bytes], bytes | None]) -> None:
        self.lands: Callable[[bytes], bytes | None] | None = lands

    def put_if_absent(self, path: str, data: bytes) -> None:
        if self.lands is None or not path.endswith(".metadata.json"):
            return super().put_if_absent(path, data)
        landed, self.lands = self.lands(data), None
        if landed is not None:
            super().put_if_absent(path, landed)
        raise StorageError(f"cannot create {path!r}: Connection was closed before we received a valid response")


def _rival(data: bytes) -> bytes:
    metadata = json.loads(data)
    return json.dumps({**metadata, "properties": {"rival": "1"}}).encode()


@pytest.mark.parametrize(
    ("lands", "attempts", "properties"),
    [(lambda data: data, 1, {"a": "1"}), (_rival, 2, {"a": "1", "rival": "1"}), (lambda data: None, None, {})],
    ids=["ours", "a rival's", "nothing"],
)
def test_a_lost_answer_is_settled_by_the_table_read_back(
    tmp_path: Path, lands: Callable[[bytes], bytes | None], attempts: int | None, properties: dict[str, str]
) -> None:
    """Creating ``vN.metadata.json`` is the commit, and its answer was lost: our bytes there mean
    committed, once; a rival's bytes a conflict, retried on top of it; nothing there an unknown
    outcome (the request may still land), with nothing abandoned."""
    created = _table(tmp_path)
    catalog = FileSystemCatalog(_LostAnswer(lands), str(tmp_path / "t"))
    table = IcebergTable(created.ref, catalog, StorageOptions(), created.metadata_location, created.metadata)
    change = SetProperty("a", "1")

    if attempts is None:
        with pytest.raises(
            CommitStateUnknown, match="v2.metadata.json .*the commit may still land; nothing is deleted"
        ):
            commit_change(table, change, sleep=lambda s: None)
        assert change.abandoned == [] and table.refresh().metadata_location == created.metadata_location
        return
    outcome = commit_change(table, change, sleep=lambda s: None)
    assert outcome.attempts == attempts and len(change.applied) == attempts
    assert change.abandoned == [outcome.metadata]
    assert table.refresh().metadata.properties == properties == outcome.metadata.properties


def test_a_swap_that_landed_and_answered_conflict_is_not_sent_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A catalog that applied the swap and then said it conflicted (a gateway that re-sent a request
    that had landed): the table read back holds our metadata, so it is committed, once."""
    table = _table(tmp_path)
    real_swap = table.catalog.swap

    def applied_then_refused(expected: str, new: str, payload: bytes) -> str:
        real_swap(expected, new, payload)
        raise CommitConflict(f"{table.name}: requirement failed: the table changed")

    monkeypatch.setattr(table.catalog, "swap", applied_then_refused)
    change = SetProperty("a", "1")
    outcome = commit_change(table, change, sleep=lambda s: None)
    assert outcome.attempts == 1 and len(change.applied) == 1 and change.abandoned == [outcome.metadata]
    assert outcome.table.metadata_location.endswith("/metadata/v2.metadata.json")
    assert table.refresh().metadata_location == outcome.table.metadata_location
