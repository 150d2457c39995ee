"""Hostile and broken Icechunk repositories (issue 10): ref JSON, snapshot and manifest MessagePack.

Sources: the seed-format repository Icechunk 0.1.0-alpha wrote (``icechunk-seed-format/test-repo``).
Snapshot and manifest files are fed to the decoders as damaged bytes and as decoded trees with one
node replaced by a hostile value (any MessagePack type, bytes included) and re-packed; ref files as
bytes and mutated JSON. End to end, a copy of the repository with one hostile snapshot is
garbage-collection planned and none of its files disappears. Budget: ``LAKEOPS_FUZZ_EXAMPLES``.
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lakeops_testdata import TESTDATA
from reliability.hostile import (
    FUZZ,
    NASTY_JSON,
    json_bytes,
    json_scalars,
    must_hold,
    mutated_bytes,
    mutated_tree,
    names,
)

from lakeops.errors import LakeopsError
from lakeops.icechunk.maintenance.orphans import plan_gc
from lakeops.icechunk.manifest import decode_manifest
from lakeops.icechunk.refs import parse_ref
from lakeops.icechunk.snapshot import decode_snapshot
from lakeops.storage import LocalStorage, StorageOptions

REPO = TESTDATA / "icechunk-seed-format" / "test-repo"
SNAPSHOTS = sorted((REPO / "snapshots").iterdir())
MANIFESTS = sorted((REPO / "manifests").iterdir())
REFS = sorted(REPO.glob("refs/*/*.json"))
STORAGE = LocalStorage()

#: MessagePack leaves (JSON scalars within MessagePack's 64-bit integers, plus binary) and nested
#: arrays and maps.
msgpack_values = st.recursive(
    json_scalars.filter(lambda v: not isinstance(v, int) or -(2**63) <= v < 2**64) | st.binary(max_size=24),
    lambda inner: st.lists(inner, max_size=4).map(tuple) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


def _hostile_msgpack(data: st.DataObject, source: Path) -> bytes:
    raw = source.read_bytes()
    if data.draw(st.booleans()):
        return data.draw(mutated_bytes(raw))
    tree = msgpack.unpackb(raw, raw=False, use_list=False, strict_map_key=False)
    return bytes(msgpack.packb(data.draw(mutated_tree(tree, msgpack_values)), use_bin_type=True))


@pytest.mark.parametrize("raw", NASTY_JSON, ids=range(len(NASTY_JSON)))
def test_pathological_json_refs(raw: bytes) -> None:
    result = must_hold(lambda: parse_ref(raw, "/repo/refs/branch.main/ZZZZZZZZ.json"), "parse_ref")
    assert names(result, "ZZZZZZZZ.json")


@FUZZ
@given(data=st.data())
def test_hostile_ref_files(data: st.DataObject) -> None:
    source = data.draw(st.sampled_from(REFS)).read_bytes()
    raw = (
        data.draw(mutated_bytes(source))
        if data.draw(st.booleans())
        else json_bytes(data.draw(mutated_tree(json.loads(source))))
    )
    result = must_hold(lambda: parse_ref(raw, "/repo/refs/branch.main/ZZZZZZZY.json"), "parse_ref")
    assert not isinstance(result, LakeopsError) or names(result, "ZZZZZZZY.json")


@FUZZ
@given(data=st.data())
def test_hostile_snapshot_files(data: st.DataObject) -> None:
    raw = _hostile_msgpack(data, data.draw(st.sampled_from(SNAPSHOTS)))
    result = must_hold(lambda: decode_snapshot(raw, "/repo/snapshots/HOSTILE"), "decode_snapshot")
    assert not isinstance(result, LakeopsError) or names(result, "HOSTILE")


@FUZZ
@given(data=st.data())
def test_hostile_manifest_files(data: st.DataObject) -> None:
    raw = _hostile_msgpack(data, data.draw(st.sampled_from(MANIFESTS)))
    result = must_hold(lambda: decode_manifest(raw, "/repo/manifests/HOSTILE"), "decode_manifest")
    assert not isinstance(result, LakeopsError) or names(result, "HOSTILE")


@FUZZ
@given(data=st.data())
def test_repository_with_a_hostile_file_is_planned_without_deleting(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("repo") / "r"
    shutil.copytree(REPO, root)
    victim = root / data.draw(st.sampled_from([p.relative_to(REPO) for p in [*SNAPSHOTS, *MANIFESTS]]))
    victim.write_bytes(_hostile_msgpack(data, victim))
    before = sorted(root.rglob("*"))
    must_hold(
        lambda: plan_gc(STORAGE, str(root), StorageOptions(), retention=timedelta(0), force=True, now_ms=2**41),
        "plan_gc",
    )
    assert sorted(root.rglob("*")) == before
