"""The one rule of a commit's outcome (``lakeops/commit_outcome.py``), case by case: which answer, what
the table read back holds, whether the write could still land there."""

from __future__ import annotations

import pytest

from lakeops.commit_outcome import Answer, Landmarks, settle
from lakeops.errors import CommitConflict, CommitPending, CommitStateUnknown, StorageError

LANDED = "landed"


def _landmarks(state: str, reads: list[str]) -> Landmarks[str]:
    """A table whose read back is ``state`` (``"unreadable"``: the read fails); ``"ours"`` holds the
    change, ``"free"`` does not but could still take it, anything else neither."""

    def read_back() -> str:
        reads.append(state)
        if state == "unreadable":
            raise StorageError("the store is down")
        return state

    return Landmarks(read_back=read_back, holds=lambda s: s == "ours", could_land=lambda s: s == "free")


@pytest.mark.parametrize(
    ("answer", "state", "outcome"),
    [
        (Answer.ACCEPTED, "ours", LANDED),
        (Answer.ACCEPTED, "free", CommitStateUnknown),  # the answer and the table disagree
        (Answer.ACCEPTED, "rival", CommitStateUnknown),
        (Answer.REFUSED, "ours", LANDED),  # a re-sent request that had landed, refused
        (Answer.REFUSED, "free", CommitConflict),
        (Answer.REFUSED, "rival", CommitConflict),
        (Answer.NO_VERDICT, "ours", LANDED),
        (Answer.NO_VERDICT, "free", CommitPending),  # still in flight, maybe
        (Answer.NO_VERDICT, "rival", CommitConflict),  # its condition no longer holds: it never lands
        (Answer.ACCEPTED, "unreadable", CommitStateUnknown),
        (Answer.REFUSED, "unreadable", CommitStateUnknown),
        (Answer.NO_VERDICT, "unreadable", CommitStateUnknown),
    ],
)
def test_every_answer_is_settled_by_the_table_read_back(
    answer: Answer, state: str, outcome: str | type[Exception]
) -> None:
    reads: list[str] = []
    failure = None if answer is Answer.ACCEPTED else StorageError("what the store said")
    if outcome == LANDED:
        assert settle("t", answer, _landmarks(state, reads), failure=failure) == "ours"
    else:
        assert isinstance(outcome, type)
        with pytest.raises(outcome, match="^t: the store ") as raised:
            settle("t", answer, _landmarks(state, reads), failure=failure)
        assert outcome is CommitPending or type(raised.value) is outcome
    assert reads == [state]


def test_an_accepted_answer_naming_a_state_that_holds_the_change_is_not_read_again() -> None:
    reads: list[str] = []
    assert settle("t", Answer.ACCEPTED, _landmarks("rival", reads), claimed="ours") == "ours" and reads == []
    with pytest.raises(CommitStateUnknown, match="the answer and the table disagree"):
        settle("t", Answer.ACCEPTED, _landmarks("rival", reads), claimed="stale")
    assert reads == ["rival"]
