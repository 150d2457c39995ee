"""The FlatBuffers codec rewrites every Icechunk format 1 and 2 metadata file without losing a field.

Every snapshot, manifest, transaction log and repo object of the fixture repositories (written by
icechunk 1.x and 2.x) is decoded whole, encoded by lakeops, and decoded again: the records must be
equal, and lakeops' own readers must read the rewritten file as they read the original.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeops.errors import UnsupportedFeature
from lakeops.icechunk import fbs
from lakeops.icechunk.binary import WRITER_NAME, FileType, file_bytes, read_payload
from lakeops.icechunk.flatbuf import Table
from lakeops.icechunk.flatbuf_codec import decode, encode
from lakeops.icechunk.objects import decode_manifest, decode_snapshot
from lakeops.icechunk.repo_info import decode_repo_object

FIXTURES = Path(__file__).parents[2] / "data" / "modern" / "icechunk"

_KINDS = {
    "snapshots": (FileType.SNAPSHOT, fbs.SNAPSHOT),
    "manifests": (FileType.MANIFEST, fbs.MANIFEST),
    "transactions": (FileType.TRANSACTION_LOG, fbs.TRANSACTION_LOG),
}


def _metadata_files() -> list[Path]:
    files = []
    for repo in sorted(FIXTURES.iterdir()):
        for directory in _KINDS:
            files += sorted((repo / directory).glob("*"))
        files += [repo / "repo"] if (repo / "repo").exists() else []
        files += sorted((repo / "overwritten").glob("*")) if (repo / "overwritten").exists() else []
    return files


def _kind(path: Path) -> tuple[FileType, fbs.Schema]:
    if path.parent.name in _KINDS:
        return _KINDS[path.parent.name]
    return FileType.REPO_INFO, fbs.REPO


@pytest.mark.parametrize("path", _metadata_files(), ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}/{p.name}")
def test_every_fixture_file_round_trips(path: Path) -> None:
    file_type, schema = _kind(path)
    data = path.read_bytes()
    version, root = read_payload(data, str(path), file_type)
    record = decode(root, schema)
    rewritten = file_bytes(encode(record, schema), file_type, version)

    again_version, again = read_payload(rewritten, "rewritten", file_type)
    assert again_version == version
    assert decode(again, schema) == record
    assert rewritten[12:36].decode().rstrip() == WRITER_NAME
    readers = {
        FileType.SNAPSHOT: decode_snapshot,
        FileType.MANIFEST: decode_manifest,
        FileType.REPO_INFO: decode_repo_object,
    }
    if file_type in readers:
        assert readers[file_type](rewritten, str(path)) == readers[file_type](data, str(path))


def test_fixtures_cover_both_formats_and_every_file_type() -> None:
    seen = {(read_payload(p.read_bytes(), str(p), _kind(p)[0])[0], _kind(p)[0]) for p in _metadata_files()}
    assert {(1, FileType.SNAPSHOT), (1, FileType.MANIFEST), (1, FileType.TRANSACTION_LOG)} <= seen
    assert {(2, kind) for kind in FileType} <= seen


def test_a_field_unknown_to_the_schema_is_refused_not_dropped() -> None:
    repo = FIXTURES / "test-repo-v2" / "repo"
    _, root = read_payload(repo.read_bytes(), str(repo), FileType.REPO_INFO)
    older = fbs.Schema("Repo", fbs.REPO.fields[:5])  # as if written by a format lakeops knew less of
    with pytest.raises(UnsupportedFeature, match=r"/repo: Repo has field 5, which lakeops does not know"):
        decode(root, older)


def test_records_encode_to_what_the_readers_expect() -> None:
    snapshot_id, node_id = bytes(range(12)), bytes(range(8))
    record = {
        "id": snapshot_id,
        "nodes": [{"id": node_id, "path": "/", "user_data": b"{}", "node_data": (fbs.GROUP_NODE, {})}],
        "flushed_at": 1_700_000_000_000_000,
        "message": "made by lakeops",
        "metadata": [],
        "manifest_files": [],
        "manifest_files_v2": [],
    }
    payload = encode(record, fbs.SNAPSHOT)
    snapshot = decode_snapshot(file_bytes(payload, FileType.SNAPSHOT, 2), "s")
    assert snapshot.message == "made by lakeops"
    assert snapshot.flushed_at == 1_700_000_000_000_000
    assert [node.path for node in snapshot.nodes] == ["/"]
    assert decode(Table.root(payload, "s"), fbs.SNAPSHOT) == record
