"""Repositories in the ``icechunk`` package's own on-disk format (Icechunk 1.x and 2.x).

Beyond specs/icechunk-spec.md (the seed format lakeops implements itself), current Icechunk
releases write another format: binary files that start with the header ``ICE🧊CHUNK`` (then the
writer's name, the spec version and the file type), branches as a single mutable
``refs/branch.NAME/ref.json`` (spec version 1) or a repository-info object ``repo`` at the root
(spec version 2), and transaction logs in ``transactions/``. lakeops does not reimplement that
format: it detects it (:func:`is_package_format`) and delegates expiry and garbage collection to
the package's own ``Repository.expire_snapshots`` and ``Repository.garbage_collect``, installed as the
optional extra ``lakeops[icechunk]``. The package's rules apply (its expiry dates snapshots by
``written_at`` and always keeps the repository's initial snapshot); lakeops adds its retention
floor (:mod:`.retention`) and the same reports.

Only expiry has no dry run in the package: the dry run reports what the package would expire,
from the ancestry of every branch and tag (snapshots written before the cutoff that no ref names,
the initial snapshot excepted).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from lakeops.delta.retention import cutoff_ms as compute_cutoff
from lakeops.errors import LakeopsError, NotATable, UnsupportedFeature
from lakeops.icechunk.encoding import MAGIC_1X
from lakeops.icechunk.maintenance.retention import resolve_retention
from lakeops.icechunk.refs import BRANCH_PREFIX, REFS_DIR
from lakeops.icechunk.repository import SNAPSHOTS_DIR
from lakeops.storage import Storage, StorageOptions, join, relative_to, scheme

if TYPE_CHECKING:
    import icechunk

__all__ = [
    "INSTALL_HINT",
    "DelegatedOutcome",
    "DelegatedPlan",
    "expire_snapshots",
    "garbage_collect",
    "is_package_format",
    "plan_delegated",
]

INSTALL_HINT = "pip install 'lakeops[icechunk]'"
#: The spec-version-2 repository-info object at the root.
REPO_INFO = "repo"
#: Byte of the file header holding the spec version (after 12 magic and 24 writer-name bytes).
_SPEC_VERSION_BYTE = 36

Operation = Literal["expire", "orphans"]


def is_package_format(storage: Storage, root: str) -> bool:
    """Whether ``root`` holds a repository in the package's format rather than the seed format:
    a ``repo`` object, a branch held in ``ref.json``, or snapshot files with the binary header."""
    if storage.exists(join(root, REPO_INFO)):
        return True
    refs_dir = join(root, REFS_DIR)
    for info in storage.list(refs_dir):
        directory, _, name = relative_to(refs_dir, info.path).partition("/")
        if directory.startswith(BRANCH_PREFIX) and name == "ref.json":
            return True
    first = next(iter(storage.list(join(root, SNAPSHOTS_DIR))), None)
    return first is not None and storage.read_range(first.path, 0, len(MAGIC_1X)) == MAGIC_1X


def _spec_version(storage: Storage, root: str) -> int | None:
    first = next(iter(storage.list(join(root, SNAPSHOTS_DIR))), None)
    if first is None:
        return None
    header = storage.read_range(first.path, 0, _SPEC_VERSION_BYTE + 1)
    return header[_SPEC_VERSION_BYTE] if len(header) > _SPEC_VERSION_BYTE else None


class DelegatedPlan(BaseModel):
    """A run handed to the ``icechunk`` package: where, which window, which operation."""

    model_config = ConfigDict(frozen=True)

    table_root: str
    storage: StorageOptions
    operation: Operation
    retention: timedelta
    cutoff_ms: int
    spec_version: int | None
    package_version: str

    @property
    def cutoff(self) -> datetime:
        return datetime.fromtimestamp(self.cutoff_ms / 1000, UTC)


@dataclass(frozen=True)
class DelegatedOutcome:
    """What the package did (or, in a dry run, would do); counts default to 0 where it says nothing."""

    snapshots_expired: int = 0
    snapshots_deleted: int = 0
    manifests_deleted: int = 0
    chunks_deleted: int = 0
    attributes_deleted: int = 0
    transaction_logs_deleted: int = 0
    bytes_deleted: int = 0


def _package() -> Any:
    try:
        import icechunk
    except ImportError as exc:
        raise UnsupportedFeature(
            f"this repository is in the Icechunk 1.x/2.x format, maintained through the icechunk package, which "
            f"is not installed ({exc}); install it with: {INSTALL_HINT}"
        ) from exc
    return icechunk


def plan_delegated(
    storage: Storage,
    root: str,
    storage_options: StorageOptions,
    *,
    operation: Operation,
    retention: timedelta | None,
    force: bool,
    now_ms: int,
) -> DelegatedPlan:
    """Check the extra is installed and the retention allowed; nothing is read through the package yet."""
    package = _package()
    flag = "--force" if operation == "expire" else "--force-short-retention"
    window = resolve_retention(root, retention, override=force, override_flag=flag)
    return DelegatedPlan(
        table_root=root,
        storage=storage_options,
        operation=operation,
        retention=window,
        cutoff_ms=compute_cutoff(window, now_ms),
        spec_version=_spec_version(storage, root),
        package_version=str(getattr(package, "__version__", "?")),
    )


def _package_storage(package: Any, root: str, options: StorageOptions) -> icechunk.Storage:
    if scheme(root) == "s3":
        bucket, _, prefix = root.removeprefix("s3://").partition("/")
        endpoint = options.endpoint_url
        return package.s3_storage(
            bucket=bucket,
            prefix=prefix or None,
            region=options.region,
            endpoint_url=endpoint,
            allow_http=bool(endpoint and endpoint.startswith("http://")),
            force_path_style=options.force_path_style if options.force_path_style is not None else bool(endpoint),
            from_env=True,
        )
    if scheme(root) == "file":
        return package.local_filesystem_storage(root)
    raise UnsupportedFeature(f"{root}: the icechunk package is driven on local paths and s3:// only")


def _open(plan: DelegatedPlan) -> Any:
    package = _package()
    try:
        return package.Repository.open(_package_storage(package, plan.table_root, plan.storage))
    except LakeopsError:
        raise
    except Exception as exc:  # the package raises its own IcechunkError / ValueError
        raise NotATable(f"{plan.table_root}: the icechunk package cannot open this repository ({exc})") from exc


def _heads(repo: Any) -> tuple[set[str], list[Any]]:
    """Snapshot ids the refs name, and the ancestries (newest first) of every branch and tag."""
    heads: set[str] = set()
    lines: list[Any] = []
    for branch in sorted(repo.list_branches()):
        heads.add(repo.lookup_branch(branch))
        lines.append(list(repo.ancestry(branch=branch)))
    for tag in sorted(repo.list_tags()):
        heads.add(repo.lookup_tag(tag))
        lines.append(list(repo.ancestry(tag=tag)))
    return heads, lines


def _call(plan: DelegatedPlan, what: str, action: Any) -> Any:
    try:
        return action()
    except LakeopsError:
        raise
    except Exception as exc:
        raise LakeopsError(f"{plan.table_root}: icechunk {plan.package_version} {what} failed: {exc}") from exc


def expire_snapshots(plan: DelegatedPlan, *, dry_run: bool) -> DelegatedOutcome:
    """``Repository.expire_snapshots(cutoff)``, or what it would expire (module docs)."""
    repo = _open(plan)
    heads, lines = _call(plan, "reading refs", lambda: _heads(repo))
    if dry_run:
        older = {
            info.id for line in lines for info in line[:-1] if info.written_at < plan.cutoff
        }  # line[-1]: the initial snapshot, which the package keeps
        return DelegatedOutcome(snapshots_expired=len(older - heads))
    expired = _call(plan, "expire_snapshots", lambda: repo.expire_snapshots(plan.cutoff))
    return DelegatedOutcome(snapshots_expired=len(set(expired) - heads))


def garbage_collect(plan: DelegatedPlan, *, dry_run: bool) -> DelegatedOutcome:
    """``Repository.garbage_collect(cutoff, dry_run=...)`` and its summary."""
    repo = _open(plan)
    summary = _call(plan, "garbage_collect", lambda: repo.garbage_collect(plan.cutoff, dry_run=dry_run))
    return DelegatedOutcome(
        snapshots_deleted=summary.snapshots_deleted,
        manifests_deleted=summary.manifests_deleted,
        chunks_deleted=summary.chunks_deleted,
        attributes_deleted=summary.attributes_deleted,
        transaction_logs_deleted=summary.transaction_logs_deleted,
        bytes_deleted=summary.bytes_deleted,
    )
