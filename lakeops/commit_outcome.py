"""The outcome of a commit is what the table says afterwards, never what an answer says.

Every format commits with one conditional write: a Delta log file created if absent ("Creation of New
Log Entries", https://github.com/delta-io/delta/blob/master/PROTOCOL.md), an Iceberg catalog's
compare-and-swap ("Optimistic Concurrency", https://iceberg.apache.org/spec/), an Icechunk ref moved
only if it still names the snapshot it was read at. The answer to that write is a hint, not a verdict:
a gateway that re-sent a request which had already landed answers 409, a server answers 200 naming the
metadata from before the commit or without part of the change, an S3 client that retried a
conditional put that had landed gets 412, a connection drops after the write. Acting on such an
answer deletes files a table references (abandoning a commit that landed) or files it still lists
(expiring snapshots a catalog kept).

So :func:`settle` is the one rule, for every format and catalog. Only an accepted answer whose
state, as read, holds the change is final (a caller that cannot name that state passes none, and the
table is read back). After any other answer the table is read back:

- it holds the change: landed, and what follows the commit is computed from the state read back;
- it does not, after an acceptance: the answer and the table disagree (a server that dropped part of
  the change, a writer that renamed over the new ref from an older read), and someone may have seen
  the change meanwhile: :class:`~lakeops.errors.CommitStateUnknown`, delete nothing;
- it does not, after a refusal, or after no verdict when the write's condition no longer holds there
  (the version is taken, the pointer or a ref moved): a conflict, and the caller re-validates,
  retries or abandons;
- it does not, after no verdict, and the condition still holds: a request in flight may still land,
  :class:`~lakeops.errors.CommitPending`, an unknown outcome (delete nothing) after which the same
  conditional write may be sent again.

Reading the table back failing is :class:`~lakeops.errors.CommitStateUnknown`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from lakeops.errors import CommitConflict, CommitPending, CommitStateUnknown, LakeopsError, NotFound

__all__ = ["Answer", "Landmarks", "created_file", "settle"]

S = TypeVar("S")


class Answer(enum.Enum):
    """What the store or catalog said to a conditional write."""

    ACCEPTED = "accepted"
    REFUSED = "refused"  # 409, 412, no row updated: the store says nothing changed
    NO_VERDICT = "no answer"  # 5xx, a timeout, a reset connection: anything may have happened


@dataclass(frozen=True)
class Landmarks(Generic[S]):
    """How a format tells, from one state of its table, whether a write landed and could still land."""

    read_back: Callable[[], S]
    holds: Callable[[S], bool]  # the state holds the change (our snapshot, our removals, our version)
    could_land: Callable[[S], bool]  # the write's condition still holds in the state


#: The state of a file a commit creates while no writer has created it.
ABSENT = object()


def created_file(read: Callable[[], bytes], mark: Callable[[bytes], object], ours: object) -> Landmarks[object]:
    """The landmarks of a commit that is the creation of one file, if absent (a Delta version, an
    Icechunk seed-format branch sequence file): the file read back holds the change when its ``mark``
    (the ``txnId`` it carries, the snapshot it names) is ``ours``; while it is absent, ours could
    still land."""

    def read_back() -> object:
        try:
            return mark(read())
        except NotFound:
            return ABSENT

    return Landmarks(read_back=read_back, holds=lambda found: found == ours, could_land=lambda found: found is ABSENT)


def settle(
    table: str,
    answer: Answer,
    landmarks: Landmarks[S],
    *,
    claimed: S | None = None,
    failure: BaseException | None = None,
) -> S:
    """The state the change landed in, decided as the module docstring says. ``claimed``: the state an
    accepted answer names (checked, never trusted); ``failure``: the refusal or error that came back.
    Raises :class:`CommitConflict`, :class:`CommitPending` or :class:`CommitStateUnknown`, chained to
    ``failure``."""
    if answer is Answer.ACCEPTED and claimed is not None and landmarks.holds(claimed):
        return claimed
    said = {Answer.ACCEPTED: "accepted the commit", Answer.REFUSED: "refused the commit"}.get(
        answer, "gave no answer to the commit"
    )
    if failure is not None:
        said += f" ({failure})"
    try:
        state = landmarks.read_back()
        held = landmarks.holds(state)
        possible = not held and landmarks.could_land(state)
    except LakeopsError as exc:
        raise CommitStateUnknown(
            f"{table}: the store {said} and reading the table back failed ({exc}); whether the commit "
            "landed is unknown, so nothing is deleted"
        ) from failure or exc
    if held:
        return state
    if answer is Answer.ACCEPTED:  # someone may have seen the change before it vanished: never abandon it
        raise CommitStateUnknown(
            f"{table}: the store {said} but the table read back does not hold the change; the answer and "
            "the table disagree, so nothing is deleted"
        ) from failure
    if answer is Answer.REFUSED or not possible:
        raise CommitConflict(f"{table}: the store {said} and the table read back does not hold the change") from (
            failure
        )
    raise CommitPending(
        f"{table}: the store {said} but the table read back does not hold the change, and the commit may "
        "still land; nothing is deleted"
    ) from failure
