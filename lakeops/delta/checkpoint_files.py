"""Reading any checkpoint file: a classic or multi-part parquet part, or a V2 checkpoint in JSON or
parquet whose file actions may live in sidecar files.

Implements https://github.com/delta-io/delta/blob/master/PROTOCOL.md#v2-spec (a V2 spec checkpoint
holds one ``checkpointMetadata`` action, every non-file action, and either its add/remove actions or
``sidecar`` actions naming the parquet files under ``_delta_log/_sidecars`` that hold them),
"UUID-named checkpoint" (``n.checkpoint.<uuid>.json|parquet``: always V2 spec) and "Sidecar File
Information" (a sidecar's ``path`` is URI-encoded, usually a bare file name inside ``_sidecars``).
Classic checkpoints may follow the V2 spec too; the same reader handles both.
"""

from __future__ import annotations

from collections.abc import Iterator

from lakeops.delta.actions import Add, CheckpointMetadata, Remove, Sidecar
from lakeops.delta.checkpoint_reader import (
    AddColumn,
    CheckpointRowAction,
    read_checkpoint_part,
    read_checkpoint_part_columnar,
)
from lakeops.delta.commit_file import parse_commit
from lakeops.errors import CorruptFile, NotFound
from lakeops.storage import Storage
from lakeops.storage.uri import is_within, join, normalize, resolve

__all__ = ["SIDECAR_DIR", "is_uuid_named", "read_checkpoint_file", "sidecar_location", "sidecars_of"]

#: Where sidecar files live, inside ``_delta_log``.
SIDECAR_DIR = "_sidecars"


def is_uuid_named(path: str) -> bool:
    """Whether a checkpoint file name is UUID-named (``n.checkpoint.<uuid>.json|parquet``)."""
    name = path.rsplit("/", 1)[-1]
    parts = name.split(".")
    return len(parts) == 4 and len(parts[2]) == 36


def sidecar_location(log_dir: str, sidecar: Sidecar) -> str:
    """The absolute location of a sidecar: its URI-decoded path, joined to ``_delta_log/_sidecars``
    unless it is already absolute. "Sidecar File Information": sidecars "must always reside in the
    table's own _delta_log/_sidecars directory"; a path leading elsewhere is refused, never read."""
    directory = join(log_dir, SIDECAR_DIR)
    location = resolve(directory, sidecar.path)
    if not is_within(directory, location) or location == normalize(directory):
        raise CorruptFile(f"{log_dir}: sidecar path {sidecar.path!r} is outside {directory}")
    return location


def _json_checkpoint(storage: Storage, path: str) -> list[CheckpointRowAction]:
    actions = parse_commit(storage.read(path), -1, path)
    head: list[CheckpointRowAction] = [actions.checkpoint_metadata] if actions.checkpoint_metadata else []
    head += [a for a in (actions.protocol, actions.metadata) if a is not None]
    return [*head, *actions.txns, *actions.domains, *actions.sidecars, *actions.adds, *actions.removes]


def _read(
    storage: Storage, path: str, *, columnar: bool, counts_only: bool, keys_only: bool
) -> Iterator[CheckpointRowAction | AddColumn]:
    if columnar:
        return read_checkpoint_part_columnar(storage, path, counts_only=counts_only, keys_only=keys_only)
    return read_checkpoint_part(storage, path)


def read_checkpoint_file(
    storage: Storage,
    log_dir: str,
    path: str,
    *,
    columnar: bool = False,
    counts_only: bool = False,
    keys_only: bool = False,
) -> Iterator[CheckpointRowAction | AddColumn]:
    """Every action of the checkpoint file at ``path``, then every action of the sidecars it names
    (``columnar``: adds as :class:`AddColumn` where they can be, with ``counts_only`` their stats
    cut to row counts as they are read, with ``keys_only`` cut to their keys and row numbers). A
    UUID-named checkpoint without its ``checkpointMetadata`` action, or a sidecar holding other
    than file actions, is corrupt."""
    sidecars: list[Sidecar] = []
    has_metadata = False
    main = (
        iter(_json_checkpoint(storage, path))
        if path.endswith(".json")
        else _read(storage, path, columnar=columnar, counts_only=counts_only, keys_only=keys_only)
    )
    for action in main:
        if isinstance(action, Sidecar):
            sidecars.append(action)
        has_metadata = has_metadata or isinstance(action, CheckpointMetadata)
        yield action
    if is_uuid_named(path) and not has_metadata:
        raise CorruptFile(f"{path}: UUID-named (V2) checkpoint has no checkpointMetadata action")
    if sidecars and not has_metadata:
        raise CorruptFile(f"{path}: checkpoint names sidecar files but has no checkpointMetadata (not V2 spec)")
    for sidecar in sidecars:
        location = sidecar_location(log_dir, sidecar)
        try:
            for action in _read(storage, location, columnar=columnar, counts_only=counts_only, keys_only=keys_only):
                if not isinstance(action, AddColumn | Add | Remove):
                    raise CorruptFile(f"{location}: sidecar file of {path} holds a {type(action).__name__} action")
                yield action
        except NotFound as exc:
            raise CorruptFile(f"{path}: checkpoint names sidecar {location}, which is missing") from exc


def sidecars_of(storage: Storage, path: str) -> list[Sidecar]:
    """The ``sidecar`` actions of one checkpoint file (its own rows only, no sidecar is opened)."""
    if path.endswith(".json"):
        return parse_commit(storage.read(path), -1, path).sidecars
    return [a for a in read_checkpoint_part(storage, path, ("sidecar",)) if isinstance(a, Sidecar)]
