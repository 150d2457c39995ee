"""Snapshot and manifest MessagePack layouts (spec "Snapshot Files", "Chunk Manifest Files"),
checked against every file of the real test repository."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import msgpack
import pytest
from lakeops_testdata import TESTDATA

from lakeops.errors import CorruptFile, InvalidArgument, UnsupportedFeature
from lakeops.icechunk.encoding import format_timestamp, parse_timestamp
from lakeops.icechunk.manifest import (
    ChunkRef,
    InlineChunk,
    Manifest,
    VirtualChunkRef,
    decode_manifest,
    encode_manifest,
)
from lakeops.icechunk.snapshot import (
    ArrayData,
    AttributeFileInfo,
    Codec,
    FillValue,
    GroupData,
    InlineUserAttributes,
    ManifestFileInfo,
    ManifestRef,
    NodeSnapshot,
    Snapshot,
    SnapshotMetadata,
    UserAttributesRef,
    ZarrArrayMetadata,
    decode_snapshot,
    encode_snapshot,
)

REPO = TESTDATA / "icechunk-seed-format" / "test-repo"
SNAPSHOT_FILES = sorted((REPO / "snapshots").iterdir())
MANIFEST_FILES = sorted((REPO / "manifests").iterdir())
T0 = datetime(2024, 10, 13, 18, 53, 45, 425022, tzinfo=UTC)
META = ("1H3ZMQ27T6XPD5CGK1DG", "2024-10-13T18:53:45Z", "m")  # a SnapshotMetadata as MessagePack sees it


@pytest.mark.parametrize("path", SNAPSHOT_FILES, ids=lambda p: p.name)
def test_snapshots_round_trip_byte_for_byte(path: Path) -> None:
    data = path.read_bytes()
    assert encode_snapshot(decode_snapshot(data, str(path))) == data


@pytest.mark.parametrize("path", MANIFEST_FILES, ids=lambda p: p.name)
def test_manifests_round_trip_byte_for_byte(path: Path) -> None:
    data = path.read_bytes()
    assert encode_manifest(decode_manifest(data, str(path))) == data


def test_plain_msgpack_repacking_would_not_round_trip() -> None:
    """Why encoding needs :class:`Single`: the float32 NaN fill value is a MessagePack float 32."""
    data = (REPO / "snapshots" / "J4DQH8NAGRYC10YGT7F0").read_bytes()
    assert bytes.fromhex("a7466c6f61743332ca7fc00000") in data  # {"Float32": f32 NaN}
    assert msgpack.packb(msgpack.unpackb(data, strict_map_key=False)) != data


def test_initial_snapshot_layout() -> None:
    path = REPO / "snapshots" / "WT2Z2GQ09G0RTAEQ3D70"
    snap = decode_snapshot(path.read_bytes(), str(path))
    assert snap == Snapshot(
        format_version=0,
        format_flags={},
        manifest_files=(),
        attribute_files=(),
        total_parents=0,
        short_term_parents=0,
        short_term_history=(),
        metadata=SnapshotMetadata("6W05WADKS87N84AMH5KG", T0, "Repository initialized"),
        started_at=datetime(2024, 10, 13, 18, 53, 45, 425069, tzinfo=UTC),
        properties={},
        nodes={},
    )
    assert snap.id == "6W05WADKS87N84AMH5KG"  # not the file name: the quirk
    assert snap.parent_id is None


def test_tip_snapshot_layout() -> None:
    path = REPO / "snapshots" / "0XEZMR4J7SJ5QBWAYBE0"
    snap = decode_snapshot(path.read_bytes(), str(path))
    assert snap.manifest_files == (ManifestFileInfo("BNV9Q6Q9Y9VKYT45MHJG", 0),)
    assert (snap.total_parents, snap.short_term_parents) == (5, 5)
    assert [m.message for m in snap.short_term_history] == [
        "delete a chunk",
        "set virtual chunk",
        "fill data",
        "empty structure",
        "Repository initialized",
    ]
    assert snap.parent_id == "QVY2RGJBE9DX8E525CA0"
    assert snap.short_term_history[-1] == SnapshotMetadata("6W05WADKS87N84AMH5KG", T0, "Repository initialized")
    assert list(snap.nodes)[:4] == ["/", "/group1", "/group1/big_chunks", "/group1/small_chunks"]
    assert snap.nodes["/"] == NodeSnapshot(1, "/", InlineUserAttributes({}), GroupData())
    assert snap.nodes["/group1"].user_attributes == InlineUserAttributes(
        {"icechunk": 1, "size": 42.0, "this": "is a nice group"}
    )
    small = snap.nodes["/group1/small_chunks"]
    assert small.id == 4
    assert small.node_data == ArrayData(
        ZarrArrayMetadata(
            shape=(5,),
            data_type="int8",
            chunk_shape=(1,),
            chunk_key_encoding="Slash",
            fill_value=FillValue("Int8", 8),
            codecs=(Codec("bytes", {"endian": "little"}),),
            storage_transformers=(),
            dimension_names=None,
        ),
        (ManifestRef("BNV9Q6Q9Y9VKYT45MHJG", ()),),
    )
    big = snap.nodes["/group1/big_chunks"].node_data
    assert isinstance(big, ArrayData)
    assert big.metadata.fill_value.kind == "Float32" and math.isnan(big.metadata.fill_value.value)
    assert big.metadata.chunk_grid == (2, 2)


def test_manifest_layout() -> None:
    path = REPO / "manifests" / "Z77TTBHNH7GG72HRTXN0"  # "delete a chunk"
    manifest = decode_manifest(path.read_bytes(), str(path))
    assert (manifest.format_version, manifest.format_flags) == (0, {})
    assert manifest.chunks[(3, (0, 0))] == VirtualChunkRef("s3://testbucket/path/to/python/chunk-1", 0, 100)
    assert manifest.chunks[(3, (0, 1))] == ChunkRef("HDRYBA66N2Z6YEV174D0", 0, 100)
    assert dict(manifest.chunks_of(4)) == {(i,): InlineChunk(b"T") for i in range(4)}  # chunk 4 deleted
    assert list(manifest.chunks)[:3] == [(3, (0,)), (3, (0, 0)), (3, (0, 1))]  # BTreeMap order


def test_every_fill_value_kind_and_optional_field_round_trips() -> None:
    fills = [
        ("bool", FillValue("Bool", True)),
        ("int64", FillValue("Int64", -(2**40))),
        ("uint64", FillValue("UInt64", 2**64 - 1)),
        ("float16", FillValue("Float16", 0.5)),
        ("float64", FillValue("Float64", -1.25)),
        ("complex64", FillValue("Complex64", (1.5, -2.0))),
        ("complex128", FillValue("Complex128", (0.1, 0.2))),
        ("r16", FillValue("RawBits", b"\x01\x02")),
    ]
    nodes = {"/": NodeSnapshot(1, "/", None, GroupData())}
    for i, (dtype, fill) in enumerate(fills, start=2):
        meta = ZarrArrayMetadata(
            shape=(4, 6),
            data_type=dtype,
            chunk_shape=(2, 3),
            fill_value=fill,
            chunk_key_encoding="Dot",
            codecs=(Codec("bytes", {"endian": "big"}), Codec("gzip", None)),
            storage_transformers=None,
            dimension_names=("x", None),
        )
        path = f"/a{i}"
        nodes[path] = NodeSnapshot(i, path, UserAttributesRef("1H3ZMQ27T6XPD5CGK1DG", 7), ArrayData(meta))
    snap = Snapshot(
        format_version=0,
        format_flags={"z": 1, "a": [1, 2]},
        manifest_files=(),
        attribute_files=(AttributeFileInfo("1H3ZMQ27T6XPD5CGK1DG", 0),),
        total_parents=0,
        short_term_parents=0,
        short_term_history=(),
        metadata=SnapshotMetadata("1H3ZMQ27T6XPD5CGK1DG", T0, "all kinds"),
        started_at=T0.replace(microsecond=0),
        properties={"k": "v"},
        nodes=nodes,
    )
    data = encode_snapshot(snap)
    decoded = decode_snapshot(data, "mem")
    assert decoded == snap
    assert encode_snapshot(decoded) == data
    assert list(decoded.format_flags) == ["a", "z"]  # BTreeMap: sorted


def test_nodes_are_written_in_rust_path_order() -> None:
    """Component-wise order: ``/a/b`` before ``/a-c``, although ``-`` sorts before ``/`` as text."""
    nodes = {p: NodeSnapshot(i, p, None, GroupData()) for i, p in enumerate(["/a-c", "/a/b", "/a", "/"])}
    snap = decode_snapshot(
        encode_snapshot(
            Snapshot(0, {}, (), (), 0, 0, (), SnapshotMetadata("1H3ZMQ27T6XPD5CGK1DG", T0, "m"), T0, {}, nodes)
        ),
        "mem",
    )
    assert list(snap.nodes) == ["/", "/a", "/a/b", "/a-c"]


def test_manifest_entries_are_written_sorted() -> None:
    chunks = {(2, (0,)): InlineChunk(b"b"), (1, (1, 0)): InlineChunk(b"a"), (1, (0, 5)): InlineChunk(b"c")}
    decoded = decode_manifest(encode_manifest(Manifest(0, {}, chunks)), "mem")
    assert list(decoded.chunks) == [(1, (0, 5)), (1, (1, 0)), (2, (0,))]


@pytest.mark.parametrize(
    ("text", "micros", "canonical"),
    [
        ("2024-10-13T18:53:45.425022Z", 425022, "2024-10-13T18:53:45.425022Z"),
        ("2024-10-13T18:53:45.425Z", 425000, "2024-10-13T18:53:45.425Z"),
        ("2024-10-13T18:53:45Z", 0, "2024-10-13T18:53:45Z"),
        ("2024-10-13T18:53:45.425022123Z", 425022, "2024-10-13T18:53:45.425022Z"),  # ns dropped
        ("2024-10-13T20:53:45.5+02:00", 500000, "2024-10-13T18:53:45.500Z"),
    ],
)
def test_timestamps_follow_chrono(text: str, micros: int, canonical: str) -> None:
    parsed = parse_timestamp(text)
    assert parsed.microsecond == micros and parsed.tzinfo == UTC
    assert format_timestamp(parsed) == canonical


# -- bad input -------------------------------------------------------------------------------------


def test_truncated_snapshot_is_corrupt_naming_the_file() -> None:
    data = (REPO / "snapshots" / "0XEZMR4J7SJ5QBWAYBE0").read_bytes()
    with pytest.raises(CorruptFile, match=r"^/r/snapshots/X: snapshot is not valid MessagePack"):
        decode_snapshot(data[:700], "/r/snapshots/X")


def test_truncated_manifest_is_corrupt_naming_the_file() -> None:
    data = (REPO / "manifests" / "BNV9Q6Q9Y9VKYT45MHJG").read_bytes()
    with pytest.raises(CorruptFile, match=r"^/r/manifests/M: manifest is not valid MessagePack"):
        decode_manifest(data[:-3], "/r/manifests/M")
    with pytest.raises(CorruptFile, match="not valid MessagePack"):
        decode_manifest(data + b"\x00", "/r/manifests/M")  # trailing bytes


@pytest.mark.parametrize("version", [1, 7])
def test_unknown_format_versions_are_refused_naming_the_version(version: int) -> None:
    data = bytearray((REPO / "snapshots" / "WT2Z2GQ09G0RTAEQ3D70").read_bytes())
    assert data[1] == 0  # [array header, version, ...]
    data[1] = version
    with pytest.raises(UnsupportedFeature, match=f"snapshot format version {version} is not supported"):
        decode_snapshot(bytes(data), "/r/snapshots/WT2Z2GQ09G0RTAEQ3D70")
    manifest = bytearray((REPO / "manifests" / "BNV9Q6Q9Y9VKYT45MHJG").read_bytes())
    manifest[1] = version
    with pytest.raises(UnsupportedFeature, match=f"manifest format version {version} is not supported"):
        decode_manifest(bytes(manifest), "/r/manifests/BNV9Q6Q9Y9VKYT45MHJG")


def test_icechunk_1x_files_are_refused_as_unsupported() -> None:
    header = "ICE🧊CHUNK".encode() + b"ic-1.0.0".ljust(24) + bytes([1, 1, 1])
    with pytest.raises(UnsupportedFeature, match="Icechunk 1.x binary format .* spec version 1"):
        decode_snapshot(header + b"\x00" * 10, "/r/snapshots/X")


@pytest.mark.parametrize(
    ("tree", "problem"),
    [
        ({"a": 1}, "field Snapshot: expected an array, got dict"),
        ((0, {}, (), ()), "expected an array of 11 elements, got 4"),
        (
            (0, {}, (("NOT-AN-ID", 0),), (), 0, 0, (), META, "x", {}, {}),
            r"manifest_files\[0\]\.id: manifest id 'NOT-AN-ID' has 9 characters",
        ),
        (
            (0, {}, (), (), 0, 0, (), ("1H3ZMQ27T6XPD5CGK1DG", "yesterday", "m"), "x", {}, {}),
            "metadata.written_at: 'yesterday' is not an RFC 3339 timestamp",
        ),
        (
            (0, {}, (), (), "1", 0, (), META, "2024-10-13T18:53:45Z", {}, {}),
            "total_parents: expected an integer, got '1'",
        ),
    ],
)
def test_malformed_snapshot_structures_name_the_field(tree: object, problem: str) -> None:
    with pytest.raises(CorruptFile, match=problem) as info:
        decode_snapshot(msgpack.packb(tree), "/r/snapshots/X")
    assert str(info.value).startswith("/r/snapshots/X: snapshot")


def test_unsupported_data_type_is_named() -> None:
    data = (REPO / "snapshots" / "J4DQH8NAGRYC10YGT7F0").read_bytes()
    bad = data.replace(b"\xa4int8", b"\xa4int9")
    with pytest.raises(UnsupportedFeature, match="data_type 'int9'"):
        decode_snapshot(bad, "/r/snapshots/J4DQH8NAGRYC10YGT7F0")


def test_bad_chunk_payload_is_corrupt() -> None:
    bad = msgpack.packb([0, {}, {(3, (0,)): {"Zipped": b"x"}}])
    with pytest.raises(CorruptFile, match=r"chunks\[\(3, \(0,\)\)\]: unknown chunk payload variant 'Zipped'"):
        decode_manifest(bad, "/r/manifests/M")
    bad = msgpack.packb([0, {}, {(3, (0,)): {"Ref": ["HDRYBA66N2Z6YEV174D1", 0, 100]}}])
    with pytest.raises(CorruptFile, match="chunk id 'HDRYBA66N2Z6YEV174D1' is invalid"):
        decode_manifest(bad, "/r/manifests/M")


@pytest.mark.parametrize("text", ["2024-13-01T00:00:00Z", "2024-02-30T00:00:00Z", "2024-01-01T25:00:00Z"])
def test_a_timestamp_the_calendar_rejects_is_invalid_not_a_crash(text: str) -> None:
    with pytest.raises(InvalidArgument, match="is not a valid timestamp"):
        parse_timestamp(text)
