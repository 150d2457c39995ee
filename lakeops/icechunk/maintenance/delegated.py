"""Repositories in the ``icechunk`` package's own on-disk format (Icechunk 1.x and later).

The Icechunk spec of the seed format (docs/architecture.md, "Specifications") describes the format
lakeops reads and writes itself ("File Formats": plain MessagePack; "Reference Files": one new file
per branch version). Current Icechunk releases
write another format: binary files that start with the header ``ICE🧊CHUNK`` (then the writer's
name padded to 24 bytes, the spec version and the file type), branches held in one mutable
``refs/branch.NAME/ref.json``, a repository-info object ``repo`` at the root in later spec
versions, and transaction logs in ``transactions/``. lakeops reads that format itself
(:mod:`lakeops.icechunk.versioned`) but does not write it yet, so it detects it
(:func:`is_package_format`) and delegates expiry of format 1 (which rewrites snapshot files) to the
package's own ``Repository.expire_snapshots``, installed as the optional extra ``lakeops[icechunk]``
(icechunk 1.x reads format 1 only; format 2 is refused before this). Garbage collection, which only
deletes, lakeops does itself (:mod:`.versioned_gc`).

The package's rules apply: expiry dates snapshots by ``written_at``, keeps every ref's tip and the
repository's initial snapshot, and never deletes a branch or tag. lakeops adds its retention floor
(:mod:`.retention`, a week unless overridden) and the same report.
The package has no expiry dry run: the dry run counts what it would expire from the ancestry of
every branch and tag (snapshots written before the cutoff, neither a ref's tip nor the initial one).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict

from lakeops.errors import CommitStateUnknown, LakeopsError, NotATable, UnsupportedFeature
from lakeops.icechunk.encoding import MAGIC_1X
from lakeops.icechunk.maintenance.retention import resolve_retention
from lakeops.icechunk.refs import BRANCH_PREFIX, REFS_DIR
from lakeops.icechunk.repository import SNAPSHOTS_DIR
from lakeops.storage import Storage, StorageOptions, join, normalize, relative_to, scheme
from lakeops.units import cutoff_ms as compute_cutoff
from lakeops.units import instant

if TYPE_CHECKING:
    import icechunk

__all__ = [
    "INSTALL_HINT",
    "PACKAGE_FORMAT",
    "DelegatedPlan",
    "expire_snapshots",
    "is_package_format",
    "plan_delegated",
]

INSTALL_HINT = "pip install 'lakeops[icechunk]'"
#: How reports name the format of such a repository.
PACKAGE_FORMAT = "icechunk (package format)"
#: The repository-info object later spec versions keep at the root.
REPO_INFO = "repo"
#: The file holding a branch's tip in the package's format (the seed format has one file per version).
BRANCH_FILE = "ref.json"
#: Byte of the file header holding the spec version (after the 12 magic and 24 writer-name bytes).
_SPEC_VERSION_BYTE = len(MAGIC_1X) + 24

_T = TypeVar("_T")


def is_package_format(storage: Storage, root: str) -> bool:
    """Whether ``root`` holds a repository in the package's format rather than the seed format:
    a ``repo`` object, a branch held in ``ref.json``, or a snapshot file with the binary header."""
    if storage.exists(join(root, REPO_INFO)):
        return True
    refs_dir = join(root, REFS_DIR)
    for info in storage.list(refs_dir):
        directory, _, name = relative_to(refs_dir, info.path).partition("/")
        if directory.startswith(BRANCH_PREFIX) and name == BRANCH_FILE:
            return True
    first = next(iter(storage.list(join(root, SNAPSHOTS_DIR))), None)
    return first is not None and storage.read_range(first.path, 0, len(MAGIC_1X)) == MAGIC_1X


def _spec_version(storage: Storage, root: str) -> int | None:
    """The spec version in the header of the first snapshot file (None without one)."""
    first = next(iter(storage.list(join(root, SNAPSHOTS_DIR))), None)
    if first is None:
        return None
    header = storage.read_range(first.path, 0, _SPEC_VERSION_BYTE + 1)
    return header[_SPEC_VERSION_BYTE] if len(header) > _SPEC_VERSION_BYTE and header.startswith(MAGIC_1X) else None


class DelegatedPlan(BaseModel):
    """An expiry handed to the ``icechunk`` package: where and which window."""

    model_config = ConfigDict(frozen=True)

    format: ClassVar[str] = PACKAGE_FORMAT
    #: The package deletes the files itself: lakeops cannot move them into a trash run.
    can_quarantine: ClassVar[bool] = False

    table_root: str
    storage: StorageOptions
    retention: timedelta
    cutoff_ms: int
    spec_version: int | None
    package_version: str

    @property
    def cutoff(self) -> datetime:
        return instant(self.cutoff_ms)

    @property
    def delegated_to(self) -> str:
        return f"icechunk {self.package_version}"

    def expire(self, storage_options: StorageOptions, *, dry_run: bool, quarantine_run: str | None) -> dict[str, Any]:
        """:func:`expire_snapshots`; the expiry report's figures, named as its fields. The package removes
        what it expires, so ``quarantine_run`` is never given (``can_quarantine``)."""
        outcome = expire_snapshots(self, dry_run=dry_run)
        return {"snapshots_expired": outcome.snapshots_expired, "delegated_to": self.delegated_to}


class DelegatedOutcome(BaseModel):
    """What the package did (or, in a dry run, would do): ``snapshots_expired`` counts snapshots
    dropped from every ref's history that no ref names."""

    model_config = ConfigDict(frozen=True)

    snapshots_expired: int = 0


def _package() -> Any:
    try:
        import icechunk
    except ImportError as exc:
        raise UnsupportedFeature(
            f"this repository is in the format of the icechunk package (Icechunk 1.x), maintained through that "
            f"package, which is not installed ({exc}); install it with: {INSTALL_HINT}"
        ) from exc
    return icechunk


def plan_delegated(
    storage: Storage,
    root: str,
    storage_options: StorageOptions,
    *,
    retention: timedelta | None,
    force: bool,
    now_ms: int,
) -> DelegatedPlan:
    """Check the extra is installed and the retention allowed; nothing is read through the package yet."""
    package = _package()
    window = resolve_retention(root, retention, override=force, override_flag="--force")
    return DelegatedPlan(
        table_root=normalize(root),
        storage=storage_options,
        retention=window,
        cutoff_ms=compute_cutoff(window, now_ms),
        spec_version=_spec_version(storage, root),
        package_version=str(getattr(package, "__version__", "?")),
    )


def _package_storage(package: Any, root: str, options: StorageOptions) -> icechunk.Storage:
    """The package's storage for ``root``: credentials from the environment, as lakeops' own S3 client."""
    if scheme(root) == "s3":
        bucket, _, prefix = root.removeprefix("s3://").partition("/")
        endpoint = options.endpoint_url
        path_style = options.force_path_style if options.force_path_style is not None else endpoint is not None
        return package.s3_storage(
            bucket=bucket,
            prefix=prefix or None,
            region=options.region,
            endpoint_url=endpoint,
            allow_http=endpoint is not None and endpoint.startswith("http://"),
            force_path_style=path_style,
            from_env=True,
        )
    if scheme(root) == "file":
        return package.local_filesystem_storage(root)
    raise UnsupportedFeature(f"{root}: the icechunk package is driven on local paths and s3:// only")


def _open(plan: DelegatedPlan) -> Any:
    package = _package()
    storage = _package_storage(package, plan.table_root, plan.storage)
    try:
        return package.Repository.open(storage)
    except Exception as exc:  # the package raises its own IcechunkError / ValueError
        raise NotATable(f"{plan.table_root}: the icechunk package cannot open this repository ({exc})") from exc


def _call(plan: DelegatedPlan, what: str, action: Callable[[], _T], error: type[LakeopsError] = LakeopsError) -> _T:
    """``action()``, the package's own errors raised as ``error`` naming the repository and the step."""
    try:
        return action()
    except LakeopsError:
        raise
    except Exception as exc:
        raise error(f"{plan.table_root}: icechunk {plan.package_version} {what} failed: {exc}") from exc


def _refs(repo: Any) -> tuple[set[str], list[list[Any]]]:
    """Snapshot ids the refs name, and the ancestry (newest first) of every branch and tag."""
    tips: set[str] = set()
    lines: list[list[Any]] = []
    for branch in sorted(repo.list_branches()):
        tips.add(repo.lookup_branch(branch))
        lines.append(list(repo.ancestry(branch=branch)))
    for tag in sorted(repo.list_tags()):
        tips.add(repo.lookup_tag(tag))
        lines.append(list(repo.ancestry(tag=tag)))
    return tips, lines


def expire_snapshots(plan: DelegatedPlan, *, dry_run: bool) -> DelegatedOutcome:
    """``Repository.expire_snapshots(cutoff)`` (refs kept), or in a dry run what it would expire.

    The package returns every snapshot it dropped from some ref's history, ref tips included; a
    tip is still retained, so the count leaves the tips out. A failure part-way leaves the history
    in an unknown state: it is raised as :class:`~lakeops.errors.CommitStateUnknown`."""
    repo = _open(plan)
    tips, lines = _call(plan, "reading branches and tags", lambda: _refs(repo))
    if dry_run:
        # line[-1] is the initial snapshot, which the package never expires
        older = {info.id for line in lines for info in line[:-1] if info.written_at < plan.cutoff}
        return DelegatedOutcome(snapshots_expired=len(older - tips))
    expired = _call(plan, "expire_snapshots", lambda: repo.expire_snapshots(plan.cutoff), CommitStateUnknown)
    return DelegatedOutcome(snapshots_expired=len(set(expired) - tips))
