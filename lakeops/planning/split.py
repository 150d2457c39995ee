"""A compaction too large for one window, cut into pieces that each fit it.

A piece is the run's ``max_rewrite_bytes`` (:mod:`lakeops.ops.bounded`): the compaction rewrites its
first groups up to that many input bytes and leaves the rest, still small files, for the next run.
The planner offers only the first piece a window; the table's next observation offers what is left,
so a table of any size proceeds a piece per window instead of waiting for a budget it never gets.
The pieces share the files, bytes and output files of the whole evenly (each writes at least one
file), so together they cover exactly what the whole compaction would merge.
"""

from __future__ import annotations

from lakeops.planning.benefit import Candidate, compaction_candidate
from lakeops.planning.cost import CostModel
from lakeops.planning.models import CompactionWork

__all__ = ["first_piece", "split"]


def _share(total: int, done: int, count: int, of: int) -> int:
    """What of ``total`` the items ``done`` .. ``done + count`` of ``of`` hold (shares sum to ``total``)."""
    return total * (done + count) // of - total * done // of


def split(work: CompactionWork, pieces: int) -> list[CompactionWork]:
    """``work`` in ``pieces`` (at most one per two files: a piece merges at least two)."""
    pieces = max(1, min(pieces, work.files_removed // 2))
    result, done = [], 0
    for i in range(pieces):
        files = work.files_removed // pieces + (i < work.files_removed % pieces)
        result.append(
            CompactionWork(
                partition=work.partition,
                files_removed=files,
                bytes_removed=_share(work.bytes_removed, done, files, work.files_removed),
                files_added=max(1, _share(work.files_added, done, files, work.files_removed)),
            )
        )
        done += files
    return result


def first_piece(candidate: Candidate, costs: CostModel, core_minutes: float) -> tuple[Candidate, int] | None:
    """The first piece of ``candidate``'s compaction in the fewest pieces whose predicted cost fits
    ``core_minutes``, and how many pieces; None: not a compaction, or not even two files fit."""
    work = candidate.compaction
    if work is None or work.files_removed < 4:
        return None

    def piece(n: int) -> Candidate | None:
        first = split(work, n)[0]
        return compaction_candidate(candidate.action.table, first, max_bytes=max(first.bytes_removed, 1))

    def fits(c: Candidate | None) -> bool:
        if c is None:
            return False
        return costs.estimate(c.action.table, "compaction", c.work_bytes, c.work_files).core_minutes <= core_minutes

    low, high = 2, work.files_removed // 2  # cost falls as the pieces grow in number
    if not fits(piece(high)):
        return None
    while low < high:
        middle = (low + high) // 2
        if fits(piece(middle)):
            high = middle
        else:
            low = middle + 1
    found = piece(low)
    return (found, low) if found is not None else None
