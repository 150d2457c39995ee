"""Reading one commit file (``n.json``): newline-delimited JSON, one action per line ("Delta Log Entries")."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pydantic import ValidationError

from lakeops.delta.actions import (
    ACTION_KEYS,
    Add,
    AddCDCFile,
    CommitInfo,
    Metadata,
    Protocol,
    Remove,
    Txn,
)
from lakeops.errors import CorruptFile


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


def parse_commit(raw: bytes, version: int, location: str) -> CommitActions:
    """Decode a commit file; a truncated or malformed line raises :class:`CorruptFile` naming it."""
    result = CommitActions(version)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptFile(f"{location}: commit file is not UTF-8 ({exc})") from exc
    # Split on "\n" only: str.splitlines() also breaks at U+2028/U+2029/U+0085, which JSON allows
    # unescaped inside strings (stats, partition values), and would turn a valid line into two bad ones.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply; ValueError: huge ints
            problem = exc.msg if isinstance(exc, json.JSONDecodeError) else f"{type(exc).__name__}: {exc}"
            raise CorruptFile(
                f"{location}: line {number} is not valid JSON ({problem}); the commit file is truncated or corrupt"
            ) from None
        if not isinstance(obj, dict) or len(obj) != 1:
            raise CorruptFile(f"{location}: line {number} is not a single action object")
        ((key, body),) = obj.items()
        model = ACTION_KEYS.get(key)
        if model is None:
            continue
        try:
            action = model.model_validate(body)
        except ValidationError as exc:
            raise CorruptFile(
                f"{location}: line {number}: invalid {key} action: {exc.errors()[0]['msg']} "
                f"at {'.'.join(str(p) for p in exc.errors()[0]['loc'])}"
            ) from exc
        _collect(result, action, location)
    return result


def _collect(result: CommitActions, action: object, location: str) -> None:
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
