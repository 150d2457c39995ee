"""Branches and tags (spec "Reference Files", "Creating and Updating Branches", "Tags").

A branch is a directory ``refs/branch.NAME/`` of sequence files: commit number ``seq`` is
``refs/branch.NAME/<Crockford base32 of 1099511627775 - seq, 8 characters>.json``, so the newest
file sorts first (seq 0 = ``ZZZZZZZZ.json``, seq 100 = ``ZZZZZZWV.json``). A tag is the single
immutable file ``refs/tag.NAME/ref.json``. Both hold ``{"snapshot":"<20-character id>"}``. Names
may contain anything but ``/`` (the test repository has the tag ``it works!``).

Moving a branch means creating the next sequence file with put-if-absent: of two writers that
read the same tip, exactly one creates file ``N + 1``; the other gets
:class:`~lakeops.errors.AlreadyExists` and must re-read, reconcile and retry (or abort). lakeops
reads tags but never creates one (the tests' repositories do, ``tests/icechunk_repos.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from lakeops.errors import AlreadyExists, CorruptFile, InvalidArgument, NotFound, ProtocolError, VersionNotFound
from lakeops.icechunk.ids import decode_int, encode_int, validate_id
from lakeops.storage import Storage, join, relative_to
from lakeops.storage.local import is_abandoned_temp

REFS_DIR = "refs"
BRANCH_PREFIX = "branch."
TAG_PREFIX = "tag."
TAG_FILE = "ref.json"
MAX_SEQUENCE = 1099511627775  # 2**40 - 1: the largest number 8 base32 characters hold
_SEQUENCE_WIDTH = 8

RefKind = Literal["branch", "tag"]


@dataclass(frozen=True, slots=True)
class BranchVersion:
    """One sequence file of a branch: the branch pointed at ``snapshot_id`` after commit ``sequence``."""

    branch: str
    sequence: int
    snapshot_id: str
    path: str


@dataclass(frozen=True, slots=True)
class Tag:
    name: str
    snapshot_id: str
    path: str


def validate_ref_name(name: str, kind: RefKind) -> str:
    """``name`` if it can name a branch or tag: not empty and without ``/``; else InvalidArgument."""
    if not name or "/" in name:
        raise InvalidArgument(f"{kind} name {name!r} is invalid: it must be non-empty and must not contain '/'")
    return name


def branch_file_name(sequence: int) -> str:
    """``ZZZZZZZZ.json`` for sequence 0, ``ZZZZZZWV.json`` for 100."""
    if not 0 <= sequence <= MAX_SEQUENCE:
        raise InvalidArgument(f"branch sequence number {sequence} is outside 0..{MAX_SEQUENCE}")
    return encode_int(MAX_SEQUENCE - sequence, _SEQUENCE_WIDTH) + ".json"


def parse_branch_file_name(name: str) -> int:
    """The sequence number a branch file name encodes; InvalidArgument for anything else."""
    stem, dot, ext = name.partition(".")
    if ext != "json" or not dot or len(stem) != _SEQUENCE_WIDTH:
        raise InvalidArgument(f"{name!r} is not a branch file name (8 Crockford base32 characters + '.json')")
    return MAX_SEQUENCE - decode_int(stem)


def render_ref(snapshot_id: str) -> bytes:
    """The ref file body, byte-for-byte as Icechunk writes it: ``{"snapshot":"<id>"}``."""
    return json.dumps({"snapshot": validate_id(snapshot_id, "snapshot id")}, separators=(",", ":")).encode()


def parse_ref(data: bytes, path: str) -> str:
    """The snapshot id in a ref file; :class:`~lakeops.errors.CorruptFile` naming ``path`` otherwise."""
    try:
        body = json.loads(data)
    except (ValueError, RecursionError) as exc:  # also over-long integers and too deep nesting
        raise CorruptFile(f"{path}: ref file is not valid JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(body, dict) or "snapshot" not in body:
        raise CorruptFile(f"{path}: ref file must be a JSON object with key 'snapshot', got {body!r}")
    try:
        return validate_id(body["snapshot"], "snapshot id")
    except InvalidArgument as exc:
        raise CorruptFile(f"{path}: {exc}") from None


def _refs_root(root: str) -> str:
    return join(root, REFS_DIR)


def _ref_dirs(storage: Storage, root: str, prefix: str) -> list[str]:
    """Names of the ``refs/<prefix>NAME/`` directories that hold at least one file, sorted."""
    refs = _refs_root(root)
    names = set()
    for info in storage.list(refs):
        if is_abandoned_temp(info.path):
            continue  # a killed write's staging file does not make a ref
        directory = relative_to(refs, info.path).split("/", 1)[0]
        if directory.startswith(prefix):
            names.add(directory[len(prefix) :])
    return sorted(names)


def list_branches(storage: Storage, root: str) -> list[str]:
    """Every branch name, sorted."""
    return _ref_dirs(storage, root, BRANCH_PREFIX)


def list_tags(storage: Storage, root: str) -> list[str]:
    """Every tag name, sorted."""
    return _ref_dirs(storage, root, TAG_PREFIX)


def branch_dir(root: str, branch: str) -> str:
    return join(root, REFS_DIR, BRANCH_PREFIX + validate_ref_name(branch, "branch"))


def tag_path(root: str, tag: str) -> str:
    return join(root, REFS_DIR, TAG_PREFIX + validate_ref_name(tag, "tag"), TAG_FILE)


def _branch_files(storage: Storage, root: str, branch: str) -> list[tuple[int, str]]:
    """(sequence, path) of every file of the branch, in listing order: newest first."""
    directory = branch_dir(root, branch)
    files = []
    for info in storage.list(directory):
        name = relative_to(directory, info.path)
        if is_abandoned_temp(name):
            continue  # a killed local write's staging file; garbage collection removes it
        try:
            files.append((parse_branch_file_name(name), info.path))
        except InvalidArgument as exc:
            raise ProtocolError(f"{info.path}: unexpected file in branch {branch!r} of {root}: {exc}") from None
    return files


def _read_version(storage: Storage, branch: str, sequence: int, path: str) -> BranchVersion:
    return BranchVersion(branch, sequence, parse_ref(storage.read(path), path), path)


def branch_history(storage: Storage, root: str, branch: str) -> list[BranchVersion]:
    """Every sequence file of ``branch``, newest first. Empty if the branch does not exist."""
    return [_read_version(storage, branch, seq, path) for seq, path in _branch_files(storage, root, branch)]


def branch_tip(storage: Storage, root: str, branch: str) -> BranchVersion:
    """The latest sequence file: the first in the sorted listing (spec "Read from Repository").

    Raises :class:`~lakeops.errors.VersionNotFound` if the branch has no files.
    """
    files = _branch_files(storage, root, branch)
    if not files:
        raise VersionNotFound(f"branch {branch!r} does not exist in Icechunk repository {root}")
    sequence, path = files[0]
    return _read_version(storage, branch, sequence, path)


def read_tag(storage: Storage, root: str, name: str) -> Tag:
    """The tag's snapshot; :class:`~lakeops.errors.VersionNotFound` if there is no such tag."""
    path = tag_path(root, name)
    try:
        data = storage.read(path)
    except NotFound:
        raise VersionNotFound(f"tag {name!r} does not exist in Icechunk repository {root}") from None
    return Tag(name, parse_ref(data, path), path)


def resolve_ref(storage: Storage, root: str, name: str, kind: RefKind | None = None) -> str:
    """The snapshot id a branch (its tip) or tag points at.

    With ``kind=None`` the name is looked up as a branch and as a tag; a name that is both is
    ambiguous (:class:`~lakeops.errors.InvalidArgument`), one that is neither is
    :class:`~lakeops.errors.VersionNotFound`.
    """
    if kind == "branch":
        return branch_tip(storage, root, name).snapshot_id
    if kind == "tag":
        return read_tag(storage, root, name).snapshot_id
    is_branch = bool(_branch_files(storage, root, name))
    is_tag = storage.exists(tag_path(root, name))
    if is_branch and is_tag:
        raise InvalidArgument(f"{name!r} is both a branch and a tag in Icechunk repository {root}; say which")
    if is_branch:
        return branch_tip(storage, root, name).snapshot_id
    if is_tag:
        return read_tag(storage, root, name).snapshot_id
    raise VersionNotFound(f"{name!r} is neither a branch nor a tag in Icechunk repository {root}")


def create_next_branch_file(
    storage: Storage, root: str, branch: str, snapshot_id: str, expected_seq: int | None
) -> BranchVersion:
    """Move ``branch`` to ``snapshot_id`` by creating sequence file ``expected_seq + 1``.

    ``expected_seq`` is the tip sequence the caller based its commit on (``None``: the branch must
    not exist yet, and sequence 0 is created). Raises :class:`~lakeops.errors.AlreadyExists` when
    another writer created that file first: the caller re-reads the tip and retries or aborts.
    """
    sequence = 0 if expected_seq is None else expected_seq + 1
    path = join(branch_dir(root, branch), branch_file_name(sequence))
    try:
        storage.put_if_absent(path, render_ref(snapshot_id))
    except AlreadyExists:
        raise AlreadyExists(
            f"{path}: branch {branch!r} of {root} already has sequence {sequence} (a concurrent commit won)"
        ) from None
    return BranchVersion(branch, sequence, snapshot_id, path)
