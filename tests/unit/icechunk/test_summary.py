"""``inspect`` numbers (lakeops.icechunk.maintenance.summary): refs, objects, chunk counts by kind and
bytes, and the estimates that match what expire, orphans and compact then really do."""

from __future__ import annotations

from pathlib import Path

from icechunk_repos import build_history, days_from_now_ms, object_ids, run_expiry, run_gc

from lakeops.icechunk.maintenance.summary import summarize
from lakeops.storage import open_storage


def test_the_test_repository_in_numbers(repo_copy: Path) -> None:
    root, storage = str(repo_copy), open_storage(str(repo_copy))
    later = days_from_now_ms(30)
    main = summarize(storage, root, now_ms=later)
    assert (main.branch, main.snapshot, main.branches) == ("main", "RZD9SW6JJZHKA94VY1DG", ["main", "my-branch"])
    assert main.tags == ["it also works!", "it works!"]
    assert (main.branch_files, main.snapshots, main.manifests, main.attribute_files) == (7, 6, 4, 0)
    assert (main.ancestry_length, main.groups, main.arrays) == (4, 2, 2)
    assert (main.chunks_inline, main.chunks_virtual, main.chunks_native) == (5, 1, 3)
    assert (main.inline_bytes, main.virtual_bytes, main.native_bytes) == (5, 100, 300)
    assert (main.chunk_objects, main.chunk_object_bytes, main.packable_chunk_objects) == (4, 400, 3)
    # Every branch file still retains its snapshot: orphans alone reclaims nothing; expire would remove 5 files.
    assert (main.expirable_branch_files, main.reclaimable_objects, main.reclaimable_bytes) == (5, 0, 0)

    side = summarize(storage, root, branch="my-branch", now_ms=later)
    assert (side.snapshot, side.ancestry_length, side.groups, side.arrays) == ("0XEZMR4J7SJ5QBWAYBE0", 6, 6, 3)
    assert (side.chunks_inline, side.chunks_virtual, side.chunks_native) == (4, 1, 3)

    run_expiry(storage, root, later)
    expired = summarize(storage, root, now_ms=later)
    assert (expired.branch_files, expired.expirable_branch_files) == (2, 0)
    assert (expired.reclaimable_objects, expired.reclaimable_bytes) == (5, 111 + 594 + 723 + 215 + 100)
    gc = run_gc(storage, root, later)
    assert len(gc.candidates) == expired.reclaimable_objects
    collected = summarize(storage, root, now_ms=later)
    assert (collected.snapshots, collected.manifests, collected.chunk_objects, collected.reclaimable_objects) == (
        3,
        3,
        3,
        0,
    )
    assert collected.ancestry_length == 4  # the kept head's embedded history still reaches the root
    # Time travel reached the oldest snapshot until garbage collection deleted its file.
    assert main.oldest_snapshot_age_s == expired.oldest_snapshot_age_s > collected.oldest_snapshot_age_s > 30 * 86400


def test_estimates_within_the_window(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    storage = open_storage(root)
    build_history(storage, root, commits=5)
    now = summarize(storage, root, now_ms=days_from_now_ms(0))
    assert now.chunk_objects == len(object_ids(storage, root, "chunks"))
    assert now.snapshots == 1 + 1 + 5 + 2 and now.branch_files == 7 + 3
    assert (now.expirable_branch_files, now.reclaimable_objects) == (0, 0)  # everything is younger than 7 days
    assert now.chunks_virtual == 1 and now.chunks_inline == 1 and now.virtual_bytes == 4
    assert now.packable_chunk_objects == now.chunks_native > 0  # one array owns each object; all are small
