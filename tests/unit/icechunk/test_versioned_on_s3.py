"""Every operation that writes an Icechunk format 2 repository, on S3 (moto's server on 127.0.0.1).

The repo object is replaced by ``If-Match`` on its ETag there (:meth:`S3Storage.replace_if_match`), where
the local file system moves it aside to compare it; compaction, expiry and garbage collection must leave every array
reading the same chunks as before, through lakeops' own reader over S3.
"""

from __future__ import annotations

from typing import Any

import pytest
from lakeops_testdata import TESTDATA

from lakeops import api
from lakeops.icechunk.repo_update import OVERWRITTEN_DIR
from lakeops.icechunk.versioned import VersionedRepository
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.icechunk.compaction import IcechunkCompactionReport
from lakeops.ops.orphans import OrphansOptions
from lakeops.storage import open_storage, relative_to
from lakeops.storage.s3 import shared_client

FIXTURE = TESTDATA / "modern" / "icechunk" / "split-repo-v2"


def _upload(bucket: Any) -> str:
    client = shared_client(endpoint_url=bucket.options.endpoint_url)
    for path in sorted(p for p in FIXTURE.rglob("*") if p.is_file()):
        client.put_object(Bucket=bucket.name, Key=f"repo/{path.relative_to(FIXTURE)}", Body=path.read_bytes())
    return f"{bucket.uri}/repo"


def _arrays(root: str, options: Any) -> dict[str, dict[tuple[int, ...], bytes]]:
    """main's arrays, chunk by chunk, as lakeops reads them over S3."""
    storage = open_storage(root, options)
    repo = VersionedRepository(storage, root)
    tip = repo.info.branches["main"]
    arrays: dict[str, dict[tuple[int, ...], bytes]] = {}
    for node in repo.snapshot(tip).nodes:
        if node.is_array:
            arrays[node.path] = {
                indices: storage.read_range(f"{root}/chunks/{ref.chunk_id}", ref.offset, ref.length)
                for indices, ref in repo.chunk_refs(tip, node.path).items()
                if ref.kind == "native"
            }
    return arrays


@pytest.mark.s3
def test_compaction_expiry_and_gc_of_a_format_2_repository_on_s3(s3_bucket: Any) -> None:
    root, options = _upload(s3_bucket), s3_bucket.options
    before = _arrays(root, options)
    assert sum(map(len, before.values())) > 10

    packed = api.compact(root, CompactionOptions(min_input_files=2), storage_options=options)
    assert isinstance(packed, IcechunkCompactionReport) and packed.chunks_packed > 10
    assert _arrays(root, options) == before

    expired = api.expire(root, ExpiryOptions(older_than="1d", force=True), storage_options=options)
    assert expired.snapshots_expired > 0
    collected = api.orphans(root, OrphansOptions(older_than="0s", force_short_retention=True), storage_options=options)
    assert collected.deleted_files > 0
    assert _arrays(root, options) == before

    storage = open_storage(root, options)
    info = VersionedRepository(storage, root).info
    assert info.branches["main"] == packed.committed_snapshot
    assert info.snapshots[packed.committed_snapshot].parent_id is not None
    backups = [relative_to(root, f.path) for f in storage.list(f"{root}/{OVERWRITTEN_DIR}")]
    fixture_backups = {f"{OVERWRITTEN_DIR}/{p.name}" for p in (FIXTURE / OVERWRITTEN_DIR).iterdir()}
    assert len(set(backups) - fixture_backups) == 2  # one backup per repo object update: compaction, expiry
