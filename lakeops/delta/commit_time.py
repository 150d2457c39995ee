"""When each commit happened: file modification times, or In-Commit Timestamps where the table has them.

https://github.com/delta-io/delta/blob/master/PROTOCOL.md#in-commit-timestamps ("Recommendations for
Readers of Tables with In-Commit Timestamps"): with ``delta.enableInCommitTimestamps=true`` (and the
``inCommitTimestamp`` writer feature), versions from ``delta.inCommitTimestampEnablementVersion`` on
(every version when the property is absent: enabled at creation) are dated by their
``commitInfo.inCommitTimestamp``; earlier ones by their file's modification time, which copies and
clock skew can make go backwards, so each is raised to one past its predecessor (as Delta's readers
do). In-commit timestamps increase strictly, so a cutoff is found by binary search, reading a handful
of commit files instead of all of them. Time travel, log retention and VACUUM's change-data window
all date commits here.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from datetime import datetime

from lakeops.delta.actions import Metadata, Protocol
from lakeops.delta.commit_file import parse_commit
from lakeops.delta.features import enabled_features
from lakeops.delta.log_segment import LogListing, commit_timestamps, no_version_at, read_log_file
from lakeops.delta.properties import ENABLE_IN_COMMIT_TIMESTAMPS, IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION
from lakeops.errors import ProtocolError
from lakeops.integer_types import BOUNDS
from lakeops.storage import Storage
from lakeops.units import epoch_ms

__all__ = ["CommitClock", "ict_enabled", "ict_enablement_version", "next_in_commit_timestamp"]


def ict_enabled(metadata: Metadata) -> bool:
    """``delta.enableInCommitTimestamps`` is true."""
    return metadata.configuration.get(ENABLE_IN_COMMIT_TIMESTAMPS, "false").lower() == "true"


def ict_enablement_version(protocol: Protocol, metadata: Metadata) -> int | None:
    """The first version dated by its in-commit timestamp, or None when the table does not use them."""
    if "inCommitTimestamp" not in enabled_features(protocol) or not ict_enabled(metadata):
        return None
    return int(metadata.configuration.get(IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION, "0"))


def next_in_commit_timestamp(now_ms: int, previous: int | None, previous_path: str) -> int:
    """A new commit's ``inCommitTimestamp``: the later of now and one past the previous commit's
    (``previous``, read from ``previous_path``; None: it has none), per "Writer Requirements for In-Commit
    Timestamps" (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#writer-requirements-for-in-commit-timestamps).
    The field is a ``long``: after the largest one no commit can follow, which is refused naming the file."""
    if previous is None:
        return now_ms
    largest = BOUNDS["long"][1]
    if previous >= largest:
        raise ProtocolError(
            f"{previous_path}: commitInfo.inCommitTimestamp is {previous}, the largest long: no later commit "
            "can carry one past it, as the table's in-commit timestamps require"
        )
    return max(now_ms, previous + 1)


@dataclass
class CommitClock:
    """Commit times of the listed versions (``enablement``: see :func:`ict_enablement_version`)."""

    storage: Storage
    listing: LogListing
    enablement: int | None
    _file_times: dict[int, int] = field(init=False)
    _read: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._file_times = {
            v: ts for v, ts in commit_timestamps(self.listing) if self.enablement is None or v < self.enablement
        }

    def timestamp(self, version: int) -> int:
        """The commit time of listed ``version`` in milliseconds since the epoch."""
        if version in self._file_times:
            return self._file_times[version]
        if version not in self._read:
            info = self.listing.commits[version]
            commit_info = parse_commit(read_log_file(self.storage, info), version, info.path).commit_info
            if commit_info is None or commit_info.in_commit_timestamp is None:
                raise ProtocolError(
                    f"{info.path}: version {version} has no commitInfo.inCommitTimestamp, which the table's "
                    f"in-commit timestamps require from version {self.enablement}"
                )
            self._read[version] = commit_info.in_commit_timestamp
        return self._read[version]

    def all(self) -> list[tuple[int, int]]:
        """``(version, timestamp_ms)`` of every listed commit, oldest first (reads every ICT commit)."""
        return [(v, self.timestamp(v)) for v in sorted(self.listing.commits)]

    def latest_at_or_before(self, cutoff_ms: int) -> int | None:
        """The newest listed version committed at or before ``cutoff_ms``, or None."""
        versions = sorted(self.listing.commits)
        dated = [v for v in versions if v in self._file_times]
        stamped = versions[len(dated) :]
        # In-commit timestamps increase: the first one after the cutoff bounds the answer.
        after = bisect.bisect_right(range(len(stamped)), cutoff_ms, key=lambda i: self.timestamp(stamped[i]))
        if after:
            return stamped[after - 1]
        older = [v for v in dated if self._file_times[v] <= cutoff_ms]
        return max(older) if older else None

    def first_at_or_after(self, since_ms: int) -> int | None:
        """The oldest listed version committed at or after ``since_ms``, or None."""
        before = self.latest_at_or_before(since_ms - 1)
        return min((v for v in self.listing.commits if before is None or v > before), default=None)

    def version_at(self, table_root: str, when: datetime) -> int:
        """The latest version committed at or before ``when`` (time travel by timestamp)."""
        version = self.latest_at_or_before(epoch_ms(when))
        if version is None:
            raise no_version_at(table_root, when)
        return version
