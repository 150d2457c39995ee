"""When a lakeops task is tried again: after a transient storage error only, with exponential backoff.

Airflow's own retry policy (``retry_policy``, an ``ExceptionRetryPolicy`` evaluated on the worker with the
exception itself) carries the rule of :mod:`lakeops.errors`: :data:`~lakeops.errors.PERMANENT` errors
(``CommitStateUnknown`` above all: a commit whose outcome is unknown is read back by the next scheduled run,
never re-sent by a retry) fail at once, :data:`~lakeops.errors.TRANSIENT` ones are retried, everything else
(a refused option, a safety refusal, a failed check) fails at once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import ExceptionRetryPolicy, RetryAction, RetryRule

from lakeops.errors import PERMANENT, TRANSIENT

__all__ = ["RETRY_ARGS", "transient_only"]


def transient_only() -> ExceptionRetryPolicy:
    """The policy: permanent first (a permanent error may subclass a transient one), then transient."""
    return ExceptionRetryPolicy(
        rules=[
            RetryRule(exception=list(PERMANENT), action=RetryAction.FAIL, reason="not transient: never retried"),
            RetryRule(exception=list(TRANSIENT), action=RetryAction.RETRY, reason="transient storage error"),
        ],
        default=RetryAction.FAIL,
    )


#: Every lakeops task's retry settings: three more tries after 30 s, 60 s, 120 s (at most 10 minutes apart).
RETRY_ARGS: dict[str, Any] = {
    "retries": 3,
    "retry_delay": timedelta(seconds=30),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=10),
}
