"""Real writers (delta-rs, PyIceberg) committing in a loop beside lakeops maintenance, and the checks
that the table stays whole while they do.

Each writer is a thread that commits one step at a time (append, delete, merge or predicate overwrite,
and a slow append whose data file waits a while before its commit) on rows with unique ids, back to
back or at a steady pace (``pace_s``: one step a second is steady ingestion), and keeps its own model
of the rows it committed: a step changes the model only once its commit returned, and a
commit that lost a conflict is retried on a re-read table or dropped. The maintenance loop pauses the
writer between two steps (:meth:`Writer.paused`) to compare the table with the model.

The checks read through the peers (delta-rs, PyIceberg), never through lakeops, so a lakeops bug cannot
hide itself: rows equal the model, every file a retained version references exists, and the change
feed lakeops wrote holds each change once and replays to the table.
"""

from __future__ import annotations

import io
import json
import random
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import AddAction
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.expressions import In

from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.uri import join, normalize

SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.int64()), ("step", pa.int64())])

#: A row as the model keeps it: id -> (value, step).
Rows = dict[int, tuple[int, int]]

#: The Delta table is partitioned by ``bucket`` = id // BUCKET; writers mostly change the newest
#: HOT_IDS ids, so compaction of the older buckets can commit while they write.
BUCKET = 50
HOT_IDS = 60
DELTA_SCHEMA = SCHEMA.append(pa.field("bucket", pa.int64()))

#: How often a writer retries a commit that lost a conflict before it drops the step.
MAX_WRITER_ATTEMPTS = 4


def rows_of(table: pa.Table) -> Rows:
    """The rows of ``table`` by id; a duplicated id fails (every writer step uses unique ids)."""
    ids, values, steps = (table.column(name).to_pylist() for name in ("id", "value", "step"))
    counts = Counter(ids)
    duplicated = sorted(i for i, n in counts.items() if n > 1)
    assert not duplicated, f"ids read more than once: {duplicated[:10]}"
    return {i: (v, s) for i, v, s in zip(ids, values, steps, strict=True)}


def _batch(rows: Rows) -> pa.Table:
    ids = sorted(rows)
    return pa.table({"id": ids, "value": [rows[i][0] for i in ids], "step": [rows[i][1] for i in ids]}, schema=SCHEMA)


def _delta_batch(rows: Rows) -> pa.Table:
    table = _batch(rows)
    return table.append_column("bucket", pa.array([i // BUCKET for i in table.column("id").to_pylist()], pa.int64()))


def _parquet(rows: Rows) -> bytes:
    sink = io.BytesIO()
    pq.write_table(_batch(rows), sink)
    return sink.getvalue()


@dataclass
class WriterStats:
    """What a writer did: steps committed by kind, lost conflicts, retries and dropped steps."""

    committed: Counter[str] = field(default_factory=Counter)
    conflicts: int = 0
    retries: int = 0
    dropped: int = 0
    in_flight_files: int = 0
    abandoned_files: list[str] = field(default_factory=list)


class Writer(threading.Thread, ABC):
    """A writer thread: :meth:`step` until stopped, a step every ``pace_s`` seconds (0: back to back);
    pausable between steps."""

    #: The step kinds, drawn uniformly (repeat one to make it likelier).
    kinds: tuple[str, ...] = ()
    #: What the peer raises when its commit lost a conflict (nothing was committed).
    conflict_errors: tuple[type[BaseException], ...] = ()

    def __init__(self, *, seed: int, hold_s: float, pace_s: float = 0.0) -> None:
        super().__init__(daemon=True, name=type(self).__name__)
        self.random = random.Random(seed)
        self.hold_s = hold_s
        self.pace_s = pace_s
        self.model: Rows = {}
        self.stats = WriterStats()
        self.error: BaseException | None = None
        self._next_id = 0
        self._step = 0
        self._stop_requested = threading.Event()
        self._pause_requested = threading.Event()
        self._paused = threading.Event()
        self._resume = threading.Event()

    # -- the loop ------------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            while not self._stop_requested.is_set():
                if self._pause_requested.is_set():
                    self._paused.set()
                    self._resume.wait()
                    self._resume.clear()
                    self._paused.clear()
                    continue
                self._step += 1
                started = time.monotonic()
                self.step(self.random.choice(self.kinds))
                self._stop_requested.wait(self.pace_s - (time.monotonic() - started))
        except BaseException as exc:  # reported by check_alive, in the test's thread
            self.error = exc
            self._paused.set()

    def stop(self) -> None:
        self._stop_requested.set()
        self._resume.set()
        self.join(timeout=120)
        self.check_alive()

    def check_alive(self) -> None:
        if self.error is not None:
            raise AssertionError(f"{self.name} failed at step {self._step}: {self.error!r}") from self.error

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The writer waits at a step boundary while the block runs (the model then is the table's)."""
        if not self.is_alive():  # not started, or stopped: already between two steps
            self.check_alive()
            yield
            return
        self._pause_requested.set()
        if not self._paused.wait(timeout=120):
            raise AssertionError(f"{self.name} did not reach a step boundary within 120 s")
        self.check_alive()
        try:
            yield
        finally:
            self._pause_requested.clear()
            self._resume.set()

    # -- steps ---------------------------------------------------------------------------------------
    def new_rows(self, count: int) -> Rows:
        start, self._next_id = self._next_id, self._next_id + count
        return {i: (self.random.randrange(1_000_000), self._step) for i in range(start, start + count)}

    def some_ids(self, count: int) -> list[int]:
        """Ids to change: mostly recent ones (:data:`HOT_IDS`), as real tables mostly update fresh data,
        sometimes any."""
        pool = sorted(self.model)
        hot = [i for i in pool if i >= self._next_id - HOT_IDS]
        if hot and self.random.random() < 0.85:
            pool = hot
        return sorted(self.random.sample(pool, min(count, len(pool))))

    def cold_bucket(self) -> int:
        """Buckets (ids // :data:`BUCKET`) below this one hold no recent ids."""
        return (self._next_id - HOT_IDS) // BUCKET

    def step(self, kind: str) -> None:
        """One step of ``kind``: commit it (retrying lost conflicts), then update the model."""
        for attempt in range(1, MAX_WRITER_ATTEMPTS + 1):
            try:
                change = self.commit(kind)
            except self.conflict_errors:
                self.stats.conflicts += 1
                if attempt == MAX_WRITER_ATTEMPTS:
                    self.stats.dropped += 1
                    return
                self.stats.retries += 1
                self.reload()
                continue
            if change is None:
                return
            removed, added = change
            for i in removed:
                del self.model[i]
            self.model.update(added)
            self.stats.committed[kind] += 1
            return

    @abstractmethod
    def commit(self, kind: str) -> tuple[list[int], Rows] | None:
        """Commit one step of ``kind``; returns (ids removed, rows added), or None if it had nothing to do."""

    def reload(self) -> None:
        """Re-read the table after a lost conflict."""

    def write_file(self, root: str, name: str, rows: Rows, options: StorageOptions) -> tuple[str, int]:
        """A data file written outside the table format's writer (a writer about to commit, or one that
        crashed): (its location, its size)."""
        location = join(root, name)
        data = _parquet(rows)
        open_storage(root, options).write(location, data)
        return location, len(data)

    def abandon_file(self, root: str, options: StorageOptions) -> None:
        """A crashed writer's data file: written, never committed; orphan removal must take it."""
        location, _ = self.write_file(root, f"abandoned-{uuid.uuid4().hex}.parquet", self.new_rows(3), options)
        self.stats.abandoned_files.append(location)


# ------------------------------------------------------------------------------------------------------
# delta-rs


def delta_rs_options(options: StorageOptions) -> dict[str, str]:
    """delta-rs storage options for ``options``; on S3, commits use conditional put (``If-None-Match``),
    which makes concurrent delta-rs and lakeops commits safe without a locking provider."""
    if options.endpoint_url is None:
        return {}
    return {"AWS_ENDPOINT_URL": options.endpoint_url, "AWS_ALLOW_HTTP": "true", "conditional_put": "etag"}


class DeltaWriter(Writer):
    """delta-rs: appends, predicate deletes, merges (update + insert), predicate overwrites, slow appends
    (a data file committed ``hold_s`` after it was written) and, now and then, an abandoned file."""

    kinds = ("append", "append", "delete", "merge", "overwrite", "slow_append", "abandon")
    conflict_errors = (CommitFailedError,)

    def __init__(self, uri: str, options: StorageOptions, *, seed: int, hold_s: float, pace_s: float = 0.0) -> None:
        super().__init__(seed=seed, hold_s=hold_s, pace_s=pace_s)
        self.uri = uri
        self.options = options
        self.rs_options = delta_rs_options(options)
        initial = self.new_rows(40)
        write_deltalake(
            uri,
            _delta_batch(initial),
            mode="error",
            partition_by=["bucket"],
            configuration={"delta.enableChangeDataFeed": "true"},
            storage_options=self.rs_options,
        )
        self.model.update(initial)
        self.table = DeltaTable(uri, storage_options=self.rs_options)

    def reload(self) -> None:
        self.table = DeltaTable(self.uri, storage_options=self.rs_options)

    def commit(self, kind: str) -> tuple[list[int], Rows] | None:
        self.table.update_incremental()
        if kind == "append":
            rows = self.new_rows(self.random.randint(5, 30))
            write_deltalake(self.table, _delta_batch(rows), mode="append")
            return [], rows
        if kind == "abandon":
            self.abandon_file(self.uri, self.options)
            return None
        if kind == "slow_append":
            return self._slow_append()
        ids = self.some_ids(self.random.randint(1, 8))
        if not ids:
            return None
        listed = ", ".join(map(str, ids))
        if kind == "delete":
            self.table.delete(f"id IN ({listed})")
            return ids, {}
        if kind == "merge":
            updated = {i: (self.model[i][0] + 1, self._step) for i in ids}
            source = {**updated, **self.new_rows(self.random.randint(1, 5))}
            (
                self.table.merge(_delta_batch(source), "t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
            return ids, source
        # overwrite: replace the rows of an id range (some deleted, the rest with new values)
        low, high = ids[0], ids[-1]
        replaced = [i for i in self.model if low <= i <= high]
        kept = {i: (self.model[i][0] + 7, self._step) for i in replaced if self.random.random() < 0.5}
        write_deltalake(self.table, _delta_batch(kept), mode="overwrite", predicate=f"id >= {low} AND id <= {high}")
        return replaced, kept

    def _slow_append(self) -> tuple[list[int], Rows]:
        rows = self.new_rows(self.random.randint(3, 10))
        actions = []
        for bucket in sorted({i // BUCKET for i in rows}):
            part = {i: row for i, row in rows.items() if i // BUCKET == bucket}
            name = f"bucket={bucket}/inflight-{uuid.uuid4().hex}.parquet"
            _, size = self.write_file(self.uri, name, part, self.options)
            stats = json.dumps({"numRecords": len(part)})
            actions.append(AddAction(name, size, {"bucket": str(bucket)}, int(time.time() * 1000), True, stats))
            self.stats.in_flight_files += 1
        time.sleep(self.hold_s)  # the files wait, unreferenced, while maintenance runs
        self.table.create_write_transaction(actions, mode="append", schema=DELTA_SCHEMA, partition_by=["bucket"])
        return [], rows


# ------------------------------------------------------------------------------------------------------
# PyIceberg


class IcebergWriter(Writer):
    """PyIceberg: appends, deletes with a filter, overwrites with a filter, slow ``add_files`` (a data file
    committed ``hold_s`` after it was written) and, now and then, an abandoned file."""

    kinds = ("append", "append", "delete", "overwrite", "slow_append", "abandon")
    #: A lost catalog race, or PyIceberg's own validation finding that a concurrent snapshot (our
    #: compaction's ``replace``) removed files its delete or overwrite read: nothing was committed.
    conflict_errors = (CommitFailedException, ValidationException)

    def __init__(
        self,
        catalog: SqlCatalog,
        identifier: str,
        options: StorageOptions,
        *,
        seed: int,
        hold_s: float,
        pace_s: float = 0.0,
    ) -> None:
        super().__init__(seed=seed, hold_s=hold_s, pace_s=pace_s)
        self.catalog = catalog
        self.identifier = identifier
        self.options = options
        self.table = catalog.create_table(identifier, schema=SCHEMA)
        initial = self.new_rows(40)
        self.table.append(_batch(initial))
        self.model.update(initial)
        self.location = self.table.location().removeprefix("file://")

    def reload(self) -> None:
        self.table = self.catalog.load_table(self.identifier)

    def commit(self, kind: str) -> tuple[list[int], Rows] | None:
        self.reload()
        if kind == "append":
            rows = self.new_rows(self.random.randint(5, 30))
            self.table.append(_batch(rows))
            return [], rows
        if kind == "abandon":
            self.abandon_file(join(self.location, "data"), self.options)
            return None
        if kind == "slow_append":
            rows = self.new_rows(self.random.randint(3, 10))
            name = f"inflight-{uuid.uuid4().hex}.parquet"
            location, _ = self.write_file(join(self.location, "data"), name, rows, self.options)
            self.stats.in_flight_files += 1
            time.sleep(self.hold_s)
            self.reload()
            self.table.add_files([location])
            return [], rows
        ids = self.some_ids(self.random.randint(1, 8))
        if not ids:
            return None
        if kind == "delete":
            self.table.delete(In("id", ids))
            return ids, {}
        kept = {i: (self.model[i][0] + 1, self._step) for i in ids if self.random.random() < 0.7}
        kept |= self.new_rows(self.random.randint(0, 4))
        self.table.overwrite(_batch(kept), overwrite_filter=In("id", ids))
        return ids, kept


# ------------------------------------------------------------------------------------------------------
# invariants, read through the peers


def listed(root: str, options: StorageOptions) -> set[str]:
    """Every object under ``root``, normalised."""
    return {normalize(info.path) for info in open_storage(root, options).list(root)}


def iso_ms(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1000)


@dataclass(frozen=True)
class FilesCheck:
    versions: int
    files: int
    #: Files of versions older than the vacuum horizon that VACUUM deleted, as Delta allows.
    vacuumed_old_files: int = 0


@dataclass
class RetainedFiles:
    """Checks that every file a retained version references exists. What it reads of immutable files
    (Delta commits, Iceberg manifest lists and manifests) is kept across checks: a check then reads
    only what is new, so it can run after every maintenance step."""

    options: StorageOptions
    _commits: dict[int, tuple[list[str], list[tuple[str, int]]]] = field(default_factory=dict)
    _manifests: dict[int, list[Any]] = field(default_factory=dict)
    _entries: dict[str, list[str]] = field(default_factory=dict)

    def delta(self, uri: str, vacuum_cutoff_ms: int | None) -> FilesCheck:
        """Every data file of every version still reconstructable from the log exists, except files a
        later version removed before the last vacuum's cutoff: Delta's VACUUM may delete those, making
        versions older than its retention unreadable (the "Data Files" and VACUUM rules) although the
        log still holds them. The versions' files are the oldest one's (as delta-rs loads it) plus every
        later commit's adds; the latest version, as delta-rs loads it, must be a subset of them."""
        present = listed(uri, self.options)
        names = [p.rsplit("/", 1)[-1] for p in present if "/_delta_log/" in p]
        commits = sorted(int(n[:20]) for n in names if n.endswith(".json") and n[:20].isdigit() and len(n) == 25)
        checkpoints = [int(n[:20]) for n in names if ".checkpoint." in n]
        oldest = 0 if commits and commits[0] == 0 else min(checkpoints, default=commits[-1])
        rs_options = delta_rs_options(self.options)
        first = DeltaTable(uri, version=oldest, storage_options=rs_options)
        referenced = {normalize(f): oldest for f in first.file_uris()}  # file -> first version naming it
        removed: dict[str, list[tuple[int, int]]] = {}
        for version in (v for v in commits if v > oldest):
            adds, removes = self._commit(uri, version)
            for path in adds:
                referenced.setdefault(path, version)
            for path, deleted_at in removes:
                removed.setdefault(path, []).append((version, deleted_at))
        latest = {normalize(f) for f in DeltaTable(uri, storage_options=rs_options).file_uris()}
        unknown = latest - set(referenced)
        assert not unknown, f"{uri}: delta-rs reads files the log replay does not: {sorted(unknown)[:5]}"
        vacuumed = 0
        for path, since in referenced.items():
            if path in present:
                continue
            vacuumable = vacuum_cutoff_ms is not None and any(
                v > since and ts < vacuum_cutoff_ms for v, ts in removed.get(path, [])
            )
            assert vacuumable, f"{uri}: version {since} and later reference {path}, which is missing (not vacuumable)"
            vacuumed += 1
        return FilesCheck(versions=commits[-1] - oldest + 1, files=len(referenced), vacuumed_old_files=vacuumed)

    def _commit(self, uri: str, version: int) -> tuple[list[str], list[tuple[str, int]]]:
        """A commit's added paths and (removed path, deletion timestamp) pairs."""
        if version not in self._commits:
            adds, removes = [], []
            text = open_storage(uri, self.options).read(join(uri, f"_delta_log/{version:020d}.json")).decode()
            for line in filter(str.strip, text.splitlines()):
                action = json.loads(line)
                if "add" in action:
                    adds.append(normalize(join(uri, unquote(action["add"]["path"]))))
                if "remove" in action:
                    path = normalize(join(uri, unquote(action["remove"]["path"])))
                    removes.append((path, action["remove"].get("deletionTimestamp") or 0))
            self._commits[version] = (adds, removes)
        return self._commits[version]

    def iceberg(self, table: Any) -> FilesCheck:
        """Every manifest list, manifest and live data or delete file (``ADDED``/``EXISTING`` entries) of
        every snapshot in the current metadata exists: what PyIceberg opens to read that snapshot."""
        present = listed(table.location(), self.options)
        referenced: set[str] = set()
        for snapshot in table.metadata.snapshots:
            where = f"{table.name()}: snapshot {snapshot.snapshot_id}"
            assert normalize(snapshot.manifest_list) in present, f"{where}: {snapshot.manifest_list} is missing"
            if snapshot.snapshot_id not in self._manifests:
                self._manifests[snapshot.snapshot_id] = snapshot.manifests(table.io)
            referenced.add(snapshot.manifest_list)
            for manifest in self._manifests[snapshot.snapshot_id]:
                path = manifest.manifest_path
                assert normalize(path) in present, f"{where}: manifest {path} is missing"
                if path not in self._entries:
                    entries = manifest.fetch_manifest_entry(table.io, discard_deleted=True)
                    self._entries[path] = [e.data_file.file_path for e in entries]
                missing = [p for p in self._entries[path] if normalize(p) not in present]
                assert not missing, f"{where}: manifest {path} names missing files {missing[:5]}"
                referenced |= {path, *self._entries[path]}
        return FilesCheck(versions=len(table.metadata.snapshots), files=len(referenced))


_ORDER = {"delete": 0, "update_preimage": 0, "insert": 1, "update_postimage": 1}


def replay_changes(changes: pa.Table, commit_column: str) -> tuple[Rows, int]:
    """The rows the change feed ``changes`` replays to, after checking each change is there once:
    (commit, id, change type) unique, a delete or pre-image removes a row that is there with those
    values, an insert or post-image adds one that is not. Returns the rows and the number of changes."""
    records = changes.select([commit_column, "_change_type", "id", "value", "step"]).to_pylist()
    keys = Counter((r[commit_column], r["id"], r["_change_type"]) for r in records)
    twice = [k for k, n in keys.items() if n > 1]
    assert not twice, f"changes extracted more than once: {twice[:5]}"
    state: Rows = {}
    for r in sorted(records, key=lambda r: (r[commit_column], _ORDER[r["_change_type"]], r["id"])):
        where = f"commit {r[commit_column]}: {r['_change_type']} of id {r['id']}"
        if _ORDER[r["_change_type"]] == 0:
            assert state.pop(r["id"], None) == (r["value"], r["step"]), f"{where} removes a row that is not there"
        else:
            assert r["id"] not in state, f"{where} adds a row that is already there"
            state[r["id"]] = (r["value"], r["step"])
    return state, len(records)
