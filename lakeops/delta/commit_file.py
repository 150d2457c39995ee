"""Reading one commit file (``n.json``): newline-delimited JSON, one action per line ("Delta Log Entries").

Each line is parsed and validated in one pass by pydantic-core (``validate_json`` of a line type whose
keys are the action keys): no intermediate Python ``dict`` per action, which made ``json.loads`` +
``model_validate`` about twice as slow on large logs.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pydantic import ConfigDict, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

from lakeops.delta.actions import (
    Add,
    AddCDCFile,
    CheckpointMetadata,
    CommitInfo,
    DomainMetadata,
    Metadata,
    Protocol,
    Remove,
    Sidecar,
    Txn,
    bulk_load,
)
from lakeops.errors import CorruptFile
from lakeops.integer_types import BOUNDS


@dataclass
class CommitActions:
    """The actions of one version, grouped by kind. Unknown action kinds are ignored, as the protocol says."""

    version: int
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    commit_info: CommitInfo | None = None
    adds: list[Add] = field(default_factory=list)
    removes: list[Remove] = field(default_factory=list)
    cdcs: list[AddCDCFile] = field(default_factory=list)
    txns: list[Txn] = field(default_factory=list)
    domains: list[DomainMetadata] = field(default_factory=list)
    #: V2 checkpoint actions: read from a JSON checkpoint, ignored in commits ("Action Reconciliation").
    sidecars: list[Sidecar] = field(default_factory=list)
    checkpoint_metadata: CheckpointMetadata | None = None


@with_config(ConfigDict(extra="allow"))
class _Line(TypedDict, total=False):
    """One log line ``{"<key>": {...}}``: each action key validated by its model (an explicit ``null``
    body is refused like any other invalid body); unknown keys are kept so a line's key count can be
    checked. A TypedDict, not a model: one object less per line."""

    add: Add
    remove: Remove
    cdc: AddCDCFile
    txn: Txn
    protocol: Protocol
    metaData: Metadata
    commitInfo: CommitInfo
    domainMetadata: DomainMetadata
    sidecar: Sidecar
    checkpointMetadata: CheckpointMetadata


_LINE = TypeAdapter(_Line)


def _action_path(line: str, key: object) -> str | None:
    """The ``path`` of the line's action, for messages (the line is known to be JSON)."""
    try:
        path = json.loads(line)[key]["path"]
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    return path if isinstance(path, str) else None


def _line_error(location: str, number: int, exc: ValidationError, line: str) -> CorruptFile:
    first = exc.errors(include_url=False)[0]
    loc = first["loc"]
    if first["type"] == "json_invalid":
        problem = first.get("ctx", {}).get("error", first["msg"])
        return CorruptFile(
            f"{location}: line {number} is not valid JSON ({problem}); the commit file is truncated or corrupt"
        )
    if not loc:  # the line is JSON but not an object
        return CorruptFile(f"{location}: line {number} is not a single action object")
    key, field = loc[0], ".".join(str(p) for p in loc[1:])
    path = _action_path(line, key)
    of = f" (path {path})" if path is not None else ""
    bound = first.get("ctx", {}).get("le", first.get("ctx", {}).get("ge"))
    kind = next((name for name, limits in BOUNDS.items() if bound in limits), None)
    if kind is not None and first["type"] in ("less_than_equal", "greater_than_equal"):
        return CorruptFile(
            f"{location}: line {number}: invalid {key} action{of}: {field} {first['input']} is outside the "
            f"protocol's {kind} range ({first['msg']})"
        )
    return CorruptFile(f"{location}: line {number}: invalid {key} action: {first['msg']} at {field}{of}")


def parse_commit(raw: bytes, version: int, location: str) -> CommitActions:
    """Decode a commit file; a truncated or malformed line raises :class:`CorruptFile` naming it."""
    result = CommitActions(version)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptFile(f"{location}: commit file is not UTF-8 ({exc})") from exc
    # Split on "\n" only: str.splitlines() also breaks at U+2028/U+2029/U+0085, which JSON allows
    # unescaped inside strings (stats, partition values), and would turn a valid line into two bad ones.
    with bulk_load():
        for number, line in enumerate(text.split("\n"), start=1):
            if not line or line.isspace():
                continue
            try:
                parsed = _LINE.validate_json(line)
            except ValidationError as exc:
                raise _line_error(location, number, exc, line) from None
            except (ValueError, RecursionError) as exc:  # defensive: the parser's own limits
                raise CorruptFile(
                    f"{location}: line {number} is not valid JSON ({type(exc).__name__}: {exc}); "
                    "the commit file is truncated or corrupt"
                ) from None
            _collect(result, parsed, location, number)
    return result


def _collect(result: CommitActions, line: _Line, location: str, number: int) -> None:
    if len(line) != 1:  # the keys the line gave, unknown ones included
        raise CorruptFile(f"{location}: line {number} is not a single action object")
    ((_, action),) = line.items()
    match action:
        case Add():
            result.adds.append(action)
        case Remove():
            result.removes.append(action)
        case AddCDCFile():
            result.cdcs.append(action)
        case Txn():
            result.txns.append(action)
        case Protocol():
            if result.protocol is not None:
                raise CorruptFile(f"{location}: more than one protocol action in one version")
            result.protocol = action
        case Metadata():
            if result.metadata is not None:
                raise CorruptFile(f"{location}: more than one metaData action in one version")
            result.metadata = action
        case CommitInfo():
            result.commit_info = action
        case DomainMetadata():
            result.domains.append(action)
        case Sidecar():
            result.sidecars.append(action)
        case CheckpointMetadata():
            result.checkpoint_metadata = action
