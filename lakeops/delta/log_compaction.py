"""Reading a log compaction file (``x.y.compacted.json``) so it replays as the commits it covers.

https://github.com/delta-io/delta/blob/master/PROTOCOL.md#log-compaction-files says the file holds the
commits ``x..y`` after Action Reconciliation: one action per logical file, transaction, domain. The
files delta-kernel-rs writes (``compacted-log-files-table``) are not reconciled: they hold the commits'
actions newest commit first, so a file re-added with a new deletion vector appears as its latest
add, then the older remove and add. Taking the *first* action of each key gives the reconciled
content for both layouts (a reconciled file has one action per key), so that is what replay applies.
"""

from __future__ import annotations

import json

from lakeops.delta.log_segment import read_log_file
from lakeops.storage import FileInfo, Storage

__all__ = ["is_compaction_file", "read_replay_file", "reconcile_compaction"]


def is_compaction_file(path: str) -> bool:
    return path.endswith(".compacted.json")


def _key(line: bytes) -> tuple[str, ...] | None:
    """What a line's action reconciles by, or None for a line to keep as it is (blank, not JSON,
    an action without a key)."""
    try:
        parsed = json.loads(line)
        ((kind, body),) = parsed.items()
    except (ValueError, AttributeError, RecursionError):
        return None  # parse_commit reports it, with its line number
    if not isinstance(body, dict):
        return None
    if kind in ("add", "remove"):
        dv = body.get("deletionVector") or {}
        offset = dv.get("offset") if isinstance(dv, dict) else None
        unique = f"{dv.get('storageType')}{dv.get('pathOrInlineDv')}" if dv else ""
        return ("file", str(body.get("path")), unique + (f"@{offset}" if offset is not None else ""))
    if kind == "txn":
        return ("txn", str(body.get("appId")))
    if kind == "domainMetadata":
        return ("domain", str(body.get("domain")))
    if kind in ("protocol", "metaData"):
        return (kind,)
    return None


def reconcile_compaction(raw: bytes) -> bytes:
    """The compaction file with only the first action of each key (later ones become blank lines, so
    the numbers of the lines kept stay those of the file)."""
    seen: set[tuple[str, ...]] = set()
    kept = []
    for line in raw.split(b"\n"):
        key = _key(line) if line.strip() else None
        if key is not None and key in seen:
            kept.append(b"")
            continue
        if key is not None:
            seen.add(key)
        kept.append(line)
    return b"\n".join(kept)


def read_replay_file(storage: Storage, info: FileInfo) -> bytes:
    """A commit's bytes, or a compaction file's reconciled (:func:`reconcile_compaction`)."""
    raw = read_log_file(storage, info)
    return reconcile_compaction(raw) if is_compaction_file(info.path) else raw
