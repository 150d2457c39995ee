r"""The shape every maintenance plan has, whatever the table format: units of work, the pure task that
turns a unit into a result, and the commit that makes the results part of the table.

A format's planner reads the table and returns a :class:`MaintenancePlan` (compaction, checkpoints
and manifest rewrites, change capture, Icechunk chunk packing); the format-neutral driver
(:func:`lakeops.ops.batches.run_batches`) sends its units to an executor (threads of this process, or
Spark tasks), commits each batch and, on failure, deletes exactly what the batch wrote. Each format
fills in the hooks it has, as PyIceberg's snapshot producers and delta-rs's operation builders do,
and the driver never asks which format a plan is. What format-neutral compaction
(:mod:`lakeops.ops.compaction`) reads of a compaction plan beyond these hooks is the
:class:`RewritePlan` protocol, which each format's compaction plan keeps. The deleting
operations (expiry, orphans, garbage collection) delete rather than write, so their plans are not
:class:`MaintenancePlan`\ s (docs/architecture.md, "One flow").

Units and results are pydantic models because they cross process boundaries as JSON (Spark tasks);
tasks are module-level functions so executors can import them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict

from lakeops.storage import StorageOptions

__all__ = ["CommitOutcome", "MaintenancePlan", "ResultT", "RewritePlan", "UnitT"]

UnitT = TypeVar("UnitT", bound=BaseModel)
ResultT = TypeVar("ResultT", bound=BaseModel)


class CommitOutcome(BaseModel):
    """What one commit of a plan did, in any format.

    ``version``: the table version the commit created (Delta: the log version; Iceberg: the new
    snapshot's sequence number; Icechunk: the branch's new sequence number), None when there was
    nothing to commit. ``snapshot_id``: Iceberg's new snapshot id or Icechunk's new snapshot.
    ``attempts``: puts it took (1 without a race). ``dropped``: index in the committed batch of each
    unit that a commit landing first invalidated, with why; their results are not part of the table.
    """

    model_config = ConfigDict(frozen=True)

    version: int | None = None
    snapshot_id: int | str | None = None
    attempts: int = 0
    dropped: Mapping[int, str] = {}
    #: Counts the commit itself decided, named as the operation's report fields (Iceberg compaction:
    #: ``delete_files_removed``, the dangling delete files it dropped).
    metrics: Mapping[str, int | bool] = {}
    #: What went wrong after the commit landed without undoing it (Delta: a version checksum file not written).
    warnings: tuple[str, ...] = ()

    @property
    def committed(self) -> bool:
        return self.attempts > 0


class MaintenancePlan(ABC, Generic[UnitT, ResultT]):
    """A planned maintenance operation on one table. Subclasses are the formats' pydantic plan models.

    Required: :meth:`table_label`, :meth:`work_units`, :meth:`task`, :meth:`result_type`,
    :meth:`commit`, :meth:`discard`.
    Hooks with defaults: :meth:`work_bytes`, :meth:`commit_batches`, :meth:`results_in_process`,
    :attr:`version_noun`.
    """

    @abstractmethod
    def table_label(self) -> str:
        """The table as reports and errors name it (a location or a catalog identifier)."""

    @abstractmethod
    def work_units(self) -> Sequence[UnitT]:
        """The independent pieces of work, each run by :meth:`task`."""

    @abstractmethod
    def task(self) -> Callable[[UnitT], ResultT]:
        """The pure, module-level function that carries out one unit (files it writes are new files)."""

    @abstractmethod
    def result_type(self) -> type[ResultT]:
        """The model :meth:`task` returns, to decode results sent back as JSON."""

    @abstractmethod
    def commit(
        self, units: Sequence[UnitT], results: Sequence[ResultT], storage_options: StorageOptions, *, final: bool
    ) -> CommitOutcome:
        """Make ``results`` (of ``units``, one batch of :meth:`commit_batches`) part of the table;
        ``final``: this commit completes the plan (the last batch, no units dropped before). Raises
        :class:`~lakeops.errors.CommitConflict` when the commit can definitely never land (nothing
        committed); any other error leaves the outcome unknown."""

    @abstractmethod
    def discard(self, results: Sequence[ResultT], storage_options: StorageOptions) -> int:
        """Delete the files ``results`` wrote, never anything else (a batch that did not commit, or
        units a commit dropped); the number deleted."""

    @property
    def version_noun(self) -> str:
        """What the format calls the states its commits make (``versions``, ``snapshots``), as the
        error of a run that committed part of the plan names them."""
        return "versions"

    def work_bytes(self, units: Sequence[UnitT]) -> int | None:
        """What ``units`` read, when the plan knows: executors place small work on the driver."""
        return None

    def commit_batches(self) -> list[list[UnitT]]:
        """The units in commit order, one commit per batch; by default one commit of everything (an
        empty batch still commits: some operations commit without units)."""
        return [list(self.work_units())]

    def results_in_process(self, driver: bool) -> list[ResultT] | None:
        """Results computed in this process from what the plan already holds, when that beats running
        :meth:`task` per unit (``driver``: the executor would run the units in this process anyway);
        None: run the units."""
        return None


class RewritePlan(Protocol):
    """What format-neutral compaction reads of a format's compaction plan, for its report and its
    errors (the plan is a :class:`MaintenancePlan` as well): what the plan read, rewrites and leaves."""

    @property
    def format(self) -> str:
        """The table format (``delta``, ``iceberg``), as reports name it."""

    @property
    def version_noun(self) -> str:
        """What the format calls the states its commits make (``versions``, ``snapshots``)."""

    @property
    def read_version(self) -> int | None:
        """The version (Iceberg: sequence number) the plan read."""

    @property
    def snapshot_id(self) -> int | None:
        """The snapshot the plan read; None for a format whose states have no id but their version."""

    @property
    def target_file_size(self) -> int: ...

    @property
    def live_files(self) -> int: ...

    @property
    def live_bytes(self) -> int: ...

    @property
    def candidate_files(self) -> int: ...

    @property
    def partitions_compacted(self) -> int: ...

    @property
    def groups(self) -> Sequence[object]:
        """The file groups to rewrite (the plan's units)."""

    @property
    def input_files(self) -> int: ...

    @property
    def input_bytes(self) -> int: ...

    @property
    def dangling_deletes(self) -> Sequence[object]:
        """Delete files the rewrite drops because nothing they apply to remains (none for a format without them)."""

    def table_label(self) -> str: ...
