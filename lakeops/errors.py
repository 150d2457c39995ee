"""The one exception hierarchy of lakeops.

Every error a user can see is a :class:`LakeopsError`. Messages name the table, the file and the
problem, so an on-call engineer can act on the message alone — and never a secret: the root masks
URL passwords and secret parameters in its message (:mod:`lakeops.redaction`), so no raise site that
quotes a catalog URI or an endpoint can forget to.
"""

from __future__ import annotations

from typing import Any

from lakeops.redaction import mask_text


class LakeopsError(Exception):
    """Root of every error lakeops raises on purpose."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*(mask_text(arg) if isinstance(arg, str) else arg for arg in args))


class StorageError(LakeopsError):
    """An object store or file system operation failed."""


class NotFound(StorageError):
    """The object or file does not exist."""


class AlreadyExists(StorageError):
    """A put-if-absent lost: the object already exists."""


class Superseded(StorageError):
    """A conditional replace lost: the object changed (or vanished) since the version it was read at."""


class NotATable(LakeopsError):
    """The location holds no table of a format lakeops knows."""


class ProtocolError(LakeopsError):
    """Table metadata violates its format specification (corrupt, truncated, inconsistent)."""


class CorruptFile(ProtocolError):
    """A file's bytes cannot be decoded or fail their checksum."""


class UnsupportedFeature(LakeopsError):
    """The table uses a format feature or version lakeops does not implement."""


class VersionNotFound(LakeopsError):
    """The requested table version, snapshot or timestamp cannot be reconstructed."""


class CommitConflict(LakeopsError):
    """A concurrent commit changed the table so that this plan no longer applies."""


class CommitStateUnknown(LakeopsError):
    """A commit was sent but its outcome is unknown: nothing may be deleted."""


class CommitPending(CommitStateUnknown):
    """The table read back does not hold a commit that could still land there: the request may be in
    flight. Sending the same conditional write again is safe (it lands at most once)."""


class PartiallyCommitted(LakeopsError):
    """A run that commits in batches failed after some batches committed: those stay in the table.
    ``report`` is the operation's report of what did commit; ``__cause__`` is the failure."""

    def __init__(self, message: str, report: object) -> None:
        super().__init__(message)
        self.report = report


class UnsafeOperation(LakeopsError):
    """An operation would violate a safety rule (retention floor, deleting outside the root)."""


class OutsideRoot(UnsafeOperation):
    """A path resolves outside the root an operation is confined to (lexically or through a symlink).

    Not a :class:`StorageError`: a refusal is a verdict, never an outcome to retry or to read back."""


class InvalidArgument(LakeopsError):
    """An option or argument has a bad value."""


class UsageError(InvalidArgument):
    """An option the command cannot take, found only once the table or the registry is read: a value
    malformed for the table's format (a Delta ``--from`` that is no version number), an option its
    format does not have, a registry name of the wrong kind. The command line exits 2 for it, as for
    a malformed value it catches while parsing."""


#: Errors another attempt may not meet: a storage or catalog call that failed (a timeout, a 5xx, a lost
#: connection). An orchestrator retries these, with backoff, and nothing else.
TRANSIENT: tuple[type[LakeopsError], ...] = (StorageError,)

#: Storage errors that are answers, not failures: a missing object, a lost put-if-absent or conditional
#: replace say what the store holds, and another attempt meets the same. Never retried, nor is
#: :class:`CommitStateUnknown` (its outcome must be read back, not re-sent blindly), nor any other error.
PERMANENT: tuple[type[LakeopsError], ...] = (CommitStateUnknown, NotFound, AlreadyExists, Superseded)

