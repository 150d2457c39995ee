"""Which log files make up a version ("Delta Log Entries", "Checkpoints", "Last Checkpoint File",
"Log Compaction Files").

A snapshot at version ``v`` is the newest *complete* checkpoint at or below ``v`` plus every commit
JSON after it up to ``v``. The listing, not ``_last_checkpoint``, is the authority: the pointer is
only validated (checksum) so a corrupt one is reported rather than trusted or silently ignored.

A UUID-named V2 checkpoint is one file, complete as soon as it exists
(https://github.com/delta-io/delta/blob/master/PROTOCOL.md#uuid-named-checkpoint); its sidecars are
read with it (:mod:`lakeops.delta.checkpoint_files`). A log compaction file ``x.y.compacted.json``
may replace the commits ``x..y`` during replay
(https://github.com/delta-io/delta/blob/master/PROTOCOL.md#log-compaction-files); the commits must
still be listed, so using one is an optimisation only and never changes which versions exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from lakeops.delta.last_checkpoint import LastCheckpoint, parse_last_checkpoint
from lakeops.errors import CorruptFile, NotATable, NotFound, VersionNotFound
from lakeops.storage import FileInfo, Storage
from lakeops.storage.uri import join

LOG_DIR = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"

_COMMIT = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_SINGLE = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_CHECKPOINT_PART = re.compile(r"^(\d{20})\.checkpoint\.(\d{10})\.(\d{10})\.parquet$")
_CHECKPOINT_V2 = re.compile(r"^(\d{20})\.checkpoint\.[0-9a-fA-F-]{36}\.(json|parquet)$")
_COMPACTION = re.compile(r"^(\d{20})\.(\d{20})\.compacted\.json$")


def commit_file_name(version: int) -> str:
    return f"{version:020d}.json"


def checkpoint_file_names(version: int, parts: int) -> list[str]:
    """File names of a checkpoint of ``version`` in ``parts`` parts (1 = the single-file form)."""
    if parts == 1:
        return [f"{version:020d}.checkpoint.parquet"]
    return [f"{version:020d}.checkpoint.{i:010d}.{parts:010d}.parquet" for i in range(1, parts + 1)]


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint: its version and its part files in part order."""

    version: int
    files: tuple[FileInfo, ...]

    @property
    def parts(self) -> int:
        return len(self.files)


@dataclass(frozen=True)
class LogListing:
    """Everything in ``_delta_log`` that replay cares about, parsed from one listing."""

    log_dir: str
    commits: dict[int, FileInfo]
    checkpoints: dict[int, Checkpoint]
    incomplete_checkpoints: dict[int, list[FileInfo]]
    last_checkpoint: LastCheckpoint | None
    #: UUID-named (V2) checkpoint files, also in ``checkpoints`` (one per version) when chosen there.
    v2_checkpoints: list[FileInfo] = field(default_factory=list)
    #: Log compaction files by ``(start, end)`` version.
    compactions: dict[tuple[int, int], FileInfo] = field(default_factory=dict)

    @property
    def latest_version(self) -> int | None:
        candidates = list(self.commits) + list(self.checkpoints)
        return max(candidates) if candidates else None


@dataclass(frozen=True)
class LogSegment:
    """The files to replay for one version: a checkpoint (or none) and the commits after it, in order."""

    version: int
    checkpoint: Checkpoint | None
    commits: tuple[tuple[int, FileInfo], ...]
    #: Log compaction files ``(start, end, file)`` replay reads instead of the commits they cover.
    compactions: tuple[tuple[int, int, FileInfo], ...] = ()

    @property
    def checkpoint_version(self) -> int | None:
        return self.checkpoint.version if self.checkpoint else None

    def replay_files(self) -> list[tuple[int, FileInfo]]:
        """The JSON files to replay after the checkpoint, in order: a compaction file (given its end
        version) in place of the commits it covers, the other commits as they are."""
        starts = {start: (end, info) for start, end, info in self.compactions}
        files: list[tuple[int, FileInfo]] = []
        skip_to = -1
        for version, info in self.commits:
            if version <= skip_to:
                continue
            if version in starts:
                skip_to, compacted = starts[version]
                files.append((skip_to, compacted))
            else:
                files.append((version, info))
        return files


def _version(digits: str, path: str) -> int:
    """A log file's version: the protocol's versions are longs (20 digits hold more)."""
    version = int(digits)
    if version > 2**63 - 1:
        raise CorruptFile(f"{path}: version {version} is outside the protocol's long range; not a log file")
    return version


def list_log(storage: Storage, table_root: str) -> LogListing:
    """List ``_delta_log`` once and classify its files; raises :class:`NotATable` if there is no log."""
    log_dir = join(table_root, LOG_DIR)
    commits: dict[int, FileInfo] = {}
    singles: dict[int, FileInfo] = {}
    parts: dict[tuple[int, int], dict[int, FileInfo]] = {}
    v2: list[FileInfo] = []
    compactions: dict[tuple[int, int], FileInfo] = {}
    last_checkpoint_info: FileInfo | None = None
    prefix_len = len(log_dir) + 1
    for info in storage.list(log_dir):
        name = info.path[prefix_len:]
        if "/" in name:
            continue  # _sidecars/, _staged_commits/ and the like
        if match := _COMMIT.match(name):
            commits[_version(match.group(1), info.path)] = info
        elif match := _CHECKPOINT_SINGLE.match(name):
            singles[_version(match.group(1), info.path)] = info
        elif match := _CHECKPOINT_PART.match(name):
            version, index, total = _version(match.group(1), info.path), int(match.group(2)), int(match.group(3))
            parts.setdefault((version, total), {})[index] = info
        elif _CHECKPOINT_V2.match(name):
            v2.append(info)
        elif match := _COMPACTION.match(name):
            start, end = _version(match.group(1), info.path), _version(match.group(2), info.path)
            if end > start:  # "y must be greater than x": anything else is not a compaction file
                compactions[(start, end)] = info
        elif name == LAST_CHECKPOINT:
            last_checkpoint_info = info
    if not commits and not singles and not parts and not v2:
        raise NotATable(f"{table_root}: no Delta log (no commit or checkpoint files under {log_dir})")

    checkpoints = {v: Checkpoint(v, (info,)) for v, info in singles.items()}
    incomplete: dict[int, list[FileInfo]] = {}
    for (version, total), found in parts.items():
        if len(found) == total and set(found) == set(range(1, total + 1)):
            # A single-file and a multi-part checkpoint of one version are equivalent; keep either.
            checkpoints.setdefault(version, Checkpoint(version, tuple(found[i] for i in range(1, total + 1))))
        else:
            incomplete.setdefault(version, []).extend(found.values())
    for info in sorted(v2, key=lambda f: f.path):  # any of a version's checkpoints will do: pick one stably
        version = _version(info.path[prefix_len:][:20], info.path)
        checkpoints.setdefault(version, Checkpoint(version, (info,)))

    last_checkpoint = None
    if last_checkpoint_info is not None:
        last_checkpoint = parse_last_checkpoint(storage.read(last_checkpoint_info.path), last_checkpoint_info.path)
    return LogListing(log_dir, commits, checkpoints, incomplete, last_checkpoint, v2, compactions)


def first_missing(listing: LogListing, start: int, end: int) -> int | None:
    """The first version in ``start..end`` without a commit file, or None: found within the first
    ``len(commits) + 1`` versions, never by listing a gap (a doctored file name can open one of 2^63)."""
    return next((v for v in range(start, end + 1) if v not in listing.commits), None)


def segment_for_version(
    listing: LogListing, table_root: str, version: int | None = None, *, use_compactions: bool = True
) -> LogSegment:
    """The log segment reconstructing ``version`` (default: the latest), with the log compaction
    files that cover its commits (each starting where the previous file ends; the longest first)."""
    latest = listing.latest_version
    if latest is None:
        raise NotATable(f"{table_root}: the Delta log has no versions")
    target = latest if version is None else version
    if target < 0 or target > latest:
        raise VersionNotFound(f"{table_root}: version {target} does not exist (latest is {latest})")

    usable = [v for v in listing.checkpoints if v <= target]
    checkpoint = listing.checkpoints[max(usable)] if usable else None
    start = checkpoint.version + 1 if checkpoint else 0
    missing = first_missing(listing, start, target)
    if missing is not None:
        earliest = min(listing.commits) if listing.commits else None
        raise VersionNotFound(
            f"{table_root}: cannot reconstruct version {target}: commit {missing:020d}.json is missing "
            "and no complete checkpoint covers it "
            f"(the log was expired or is damaged; earliest commit kept: {earliest})"
        )
    commits = tuple((v, listing.commits[v]) for v in range(start, target + 1))
    chosen: list[tuple[int, int, FileInfo]] = []
    if use_compactions:
        ends: dict[int, int] = {}
        for first, last in listing.compactions:
            if last <= target:
                ends[first] = max(ends.get(first, last), last)
        position = start
        while position <= target:
            end = ends.get(position)
            if end is None:
                position += 1
                continue
            chosen.append((position, end, listing.compactions[(position, end)]))
            position = end + 1
    return LogSegment(target, checkpoint, commits, tuple(chosen))


def commit_timestamps(listing: LogListing) -> list[tuple[int, int]]:
    """``(version, timestamp_ms)`` for every listed commit, oldest first.

    The protocol dates a commit by its file's modification time. Clocks and copies can make those go
    backwards; as Delta's own readers do, a timestamp is raised to one past its predecessor's so
    versions stay totally ordered in time.
    """
    result: list[tuple[int, int]] = []
    previous = -1
    for version in sorted(listing.commits):
        ts = max(listing.commits[version].mtime_ms, previous + 1)
        result.append((version, ts))
        previous = ts
    return result


def no_version_at(table_root: str, when: datetime) -> VersionNotFound:
    return VersionNotFound(
        f"{table_root}: no version was committed at or before {when.isoformat()} "
        "(the timestamp is before the earliest retained commit)"
    )


def read_log_file(storage: Storage, info: FileInfo) -> bytes:
    try:
        return storage.read(info.path)
    except NotFound as exc:
        raise VersionNotFound(f"{info.path}: log file disappeared while reading (concurrent cleanup?)") from exc
