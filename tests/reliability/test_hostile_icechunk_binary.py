"""Hostile Icechunk format 1 and 2 files: repo objects, snapshots and manifests whose flatbuffers
payload is damaged (truncated, flipped, inserted or deleted bytes) must decode or fail as a
:class:`~lakeops.errors.LakeopsError` naming the file, never with another exception or a hang.

Sources: ``modern/icechunk/test-repo-v1``, ``test-repo-v2`` and ``split-repo-v2`` (icechunk 1.x and 2.x).
The payload is mutated after decompression and stored uncompressed (compression byte 0), so the
mutations reach the flatbuffers reader rather than only zstd's frame checks; the compressed files are
fed damaged as they are too. Budget: ``LAKEOPS_FUZZ_EXAMPLES``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import zstandard
from hypothesis import given
from hypothesis import strategies as st
from lakeops_testdata import TESTDATA
from reliability.hostile import FUZZ, must_hold, mutated_bytes, names

from lakeops.errors import LakeopsError
from lakeops.icechunk.binary import HEADER_SIZE
from lakeops.icechunk.objects import decode_manifest, decode_snapshot
from lakeops.icechunk.repo_info import SnapshotInfo, decode_repo_object

MODERN = TESTDATA / "modern" / "icechunk"
REPOS = [MODERN / name for name in ("test-repo-v1", "test-repo-v2", "split-repo-v2")]
SNAPSHOTS = sorted(path for repo in REPOS for path in (repo / "snapshots").iterdir())
MANIFESTS = sorted(path for repo in REPOS for path in (repo / "manifests").iterdir())


def _hostile(data: st.DataObject, source: Path) -> bytes:
    raw = source.read_bytes()
    if data.draw(st.booleans()):
        return data.draw(mutated_bytes(raw))
    payload = zstandard.ZstdDecompressor().decompressobj().decompress(raw[HEADER_SIZE:])
    header = raw[: HEADER_SIZE - 1] + b"\x00"
    return header + data.draw(mutated_bytes(payload))


def _check(call: Callable[[], object], what: str) -> None:
    result = must_hold(call, what)
    assert not isinstance(result, LakeopsError) or names(result, "HOSTILE")


@FUZZ
@given(data=st.data())
def test_hostile_snapshot_files(data: st.DataObject) -> None:
    raw = _hostile(data, data.draw(st.sampled_from(SNAPSHOTS)))
    _check(lambda: decode_snapshot(raw, "/repo/snapshots/HOSTILE"), "decode_snapshot")


@FUZZ
@given(data=st.data())
def test_hostile_manifest_files(data: st.DataObject) -> None:
    raw = _hostile(data, data.draw(st.sampled_from(MANIFESTS)))
    _check(lambda: decode_manifest(raw, "/repo/manifests/HOSTILE"), "decode_manifest")


@FUZZ
@given(data=st.data())
def test_hostile_repo_objects(data: st.DataObject) -> None:
    raw = _hostile(data, data.draw(st.sampled_from([repo / "repo" for repo in REPOS if (repo / "repo").exists()])))

    def read() -> list[list[SnapshotInfo]]:
        info = decode_repo_object(raw, "/repo/HOSTILE")
        return [info.ancestry(tip) for tip in [*info.branches.values(), *info.tags.values()]]

    _check(read, "decode_repo_object")
