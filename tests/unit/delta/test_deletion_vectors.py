"""Deletion vectors: Z85, both bitmap layouts, DV file framing and checks, against real tables."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np
import pytest
from delta_deletion_vectors import encode_dv_file, inline_dv_descriptor, new_dv_descriptor, write_dv_file
from lakeops_testdata import TESTDATA
from pyroaring import BitMap, BitMap64

from lakeops.delta.actions import Add, DeletionVectorDescriptor
from lakeops.delta.deletion_vectors import (
    MAGIC_LEGACY,
    decode_bitmap_array,
    dv_absolute_path,
    encode_bitmap_array,
    read_deletion_vector,
    read_deletion_vector_rows,
    row_indexes,
    uuid_to_z85,
    z85_decode,
    z85_encode,
    z85_to_uuid,
)
from lakeops.errors import CorruptFile, InvalidArgument, NotFound
from lakeops.storage import Storage, open_storage

DV_SMALL = TESTDATA / "delta-rs" / "table-with-dv-small"
SPEC_INLINE = "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L"


def _dv_adds(table: Path) -> list[Add]:
    adds = []
    for log in sorted((table / "_delta_log").glob("*.json")):
        for line in log.read_text().splitlines():
            action = json.loads(line)
            if "add" in action and action["add"].get("deletionVector"):
                adds.append(Add.model_validate(action["add"]))
    return adds


def _storage(root: Path | str) -> Storage:
    return open_storage(str(root))


# --- Z85 -------------------------------------------------------------------------------------


def test_z85_matches_the_zeromq_reference_vector() -> None:
    # RFC 32 test vector
    data = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_encode(data) == "HelloWorld"
    assert z85_decode("HelloWorld") == data


def test_z85_pads_to_four_bytes_and_size_drops_the_padding() -> None:
    data = bytes(range(7))
    text = z85_encode(data)
    assert len(text) == 10
    assert z85_decode(text, 7) == data
    assert z85_decode(text) == data + b"\x00"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("abcd", "length 4 is not a multiple of 5"),
        ("abcd~", "character '~' at 0 is not Z85"),
        ("%%%%%00000", "Z85 group '%%%%%' at 0 exceeds 32 bits"),  # only the last group may overflow
    ],
)
def test_z85_rejects_bad_text(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        z85_decode(text)


def test_uuid_z85_round_trip_from_spec_notes() -> None:
    expected = UUID("61d16c75-6994-46b7-a15b-8b538852e50e")
    assert z85_to_uuid("vBn[lx{q8@P<9BNH/isA") == expected
    assert uuid_to_z85(expected) == "vBn[lx{q8@P<9BNH/isA"


# --- paths -----------------------------------------------------------------------------------


def test_u_path_with_random_prefix_from_the_protocol_example() -> None:
    descriptor = DeletionVectorDescriptor(
        storageType="u", pathOrInlineDv="ab^-aqEH.-t@S}K{vb[*k^", offset=4, sizeInBytes=40, cardinality=6
    )
    assert (
        dv_absolute_path(descriptor, "s3://mytable/")
        == "s3://mytable/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    )


def test_p_path_is_uri_decoded_once() -> None:
    def p(path: str) -> DeletionVectorDescriptor:
        return DeletionVectorDescriptor(storageType="p", pathOrInlineDv=path, offset=1, sizeInBytes=40, cardinality=6)

    assert dv_absolute_path(p("s3a://b/t/a%20b/dv.bin"), "/ignored") == "s3://b/t/a b/dv.bin"
    assert dv_absolute_path(p("file:///tmp/a%2520b/dv.bin"), "/ignored") == "/tmp/a%20b/dv.bin"


def test_inline_has_no_path() -> None:
    descriptor = DeletionVectorDescriptor(storageType="i", pathOrInlineDv=SPEC_INLINE, sizeInBytes=40, cardinality=6)
    with pytest.raises(InvalidArgument):
        dv_absolute_path(descriptor, "/t")


def test_u_path_too_short_is_corrupt() -> None:
    descriptor = DeletionVectorDescriptor(
        storageType="u", pathOrInlineDv="short", offset=1, sizeInBytes=40, cardinality=6
    )
    with pytest.raises(CorruptFile, match="shorter than a Z85 UUID"):
        dv_absolute_path(descriptor, "/t")


# --- bitmap layouts --------------------------------------------------------------------------


def test_protocol_inline_example_decodes_to_its_rows(tmp_path: Path) -> None:
    descriptor = DeletionVectorDescriptor(storageType="i", pathOrInlineDv=SPEC_INLINE, sizeInBytes=40, cardinality=6)
    bitmap = read_deletion_vector(descriptor, _storage(tmp_path), str(tmp_path))
    assert list(bitmap) == [3, 4, 7, 11, 18, 29]
    rows = read_deletion_vector_rows(descriptor, _storage(tmp_path), str(tmp_path))
    assert rows.dtype == np.uint64
    assert rows.tolist() == [3, 4, 7, 11, 18, 29]
    # ...and that example is the legacy big-endian layout
    assert struct.unpack(">I", z85_decode(SPEC_INLINE)[:4])[0] == MAGIC_LEGACY


def test_legacy_layout_maps_bitmap_index_to_high_bits() -> None:
    low, high = BitMap([1, 2]), BitMap([5])
    parts = [struct.pack(">II", MAGIC_LEGACY, 3)]
    for bitmap in (low, BitMap(), high):
        raw = bitmap.serialize()
        parts.append(struct.pack(">I", len(raw)) + raw)
    decoded = decode_bitmap_array(b"".join(parts), "test")
    assert list(decoded) == [1, 2, (2 << 32) + 5]


def test_legacy_layout_trailing_bytes_are_corrupt() -> None:
    raw = z85_decode(SPEC_INLINE) + b"\x00"
    with pytest.raises(CorruptFile, match="trailing"):
        decode_bitmap_array(raw, "inline")


def test_encode_writes_the_portable_layout_round_trip_above_2_32() -> None:
    rows = [0, 7, 2**32 - 1, 2**32, 2**32 + 9, 2**40 + 3, 2**62]
    bitmap = BitMap64(rows)
    bitmap.add_range(1000, 70000)  # a run container
    raw = encode_bitmap_array(bitmap)
    assert raw[:4] == bytes.fromhex("d1d33964")
    decoded = decode_bitmap_array(raw, "test")
    assert decoded == bitmap
    indexes = row_indexes(decoded)
    assert indexes.dtype == np.uint64
    assert np.all(np.diff(indexes.astype(np.int64)) > 0)
    assert set(rows) <= set(indexes.tolist())


def test_unknown_magic_and_garbage_are_corrupt() -> None:
    with pytest.raises(CorruptFile, match="magic"):
        decode_bitmap_array(b"\x00\x01\x02\x03rest", "dv.bin")
    with pytest.raises(CorruptFile, match="portable"):
        decode_bitmap_array(bytes.fromhex("d1d33964") + b"\xff" * 12, "dv.bin")
    with pytest.raises(CorruptFile, match="too short"):
        decode_bitmap_array(b"\xd1", "dv.bin")


def test_row_index_above_2_63_is_refused() -> None:
    with pytest.raises(InvalidArgument):
        encode_bitmap_array(BitMap64([2**63]))


# --- the real on-disk DV ---------------------------------------------------------------------


def test_real_u_dv_of_table_with_dv_small() -> None:
    (add,) = _dv_adds(DV_SMALL)
    descriptor = add.deletion_vector
    assert descriptor is not None
    path = dv_absolute_path(descriptor, str(DV_SMALL))
    assert path == str(DV_SMALL / "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin")
    raw = Path(path).read_bytes()
    assert raw[0] == 1 and struct.unpack(">I", raw[1:5])[0] == descriptor.size_in_bytes == 36
    assert zlib.crc32(raw[5:41]) == struct.unpack(">I", raw[41:45])[0] == 0x2A671846

    bitmap = read_deletion_vector(descriptor, _storage(DV_SMALL), str(DV_SMALL), data_file=add.path)
    assert len(bitmap) == descriptor.cardinality == 2
    assert list(bitmap) == [0, 9]


@pytest.mark.parametrize("table", ["table-with-dv-small", "table_with_deletion_logs", "cdf-table-with-cdc-and-dvs"])
def test_every_dv_of_real_tables_verifies(table: str) -> None:
    root = TESTDATA / "delta-rs" / table
    storage = _storage(root)
    adds = _dv_adds(root)
    assert adds
    for add in adds:
        assert add.deletion_vector is not None
        bitmap = read_deletion_vector(add.deletion_vector, storage, str(root), data_file=add.path)
        assert len(bitmap) == add.deletion_vector.cardinality
        assert add.num_records is None or bitmap.max() < add.num_records


@pytest.fixture(scope="module")
def kernel_dv_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    archive = TESTDATA / "delta-kernel" / "dv-partitioned-with-checkpoint.tar.zst"
    target = tmp_path_factory.mktemp("kernel")
    result = subprocess.run(["tar", "--zstd", "-xf", str(archive), "-C", str(target)], capture_output=True)
    if result.returncode != 0:
        pytest.skip(f"cannot unpack {archive.name}: {result.stderr.decode(errors='replace')}")
    return target / "dv-partitioned-with-checkpoint" / "delta"


def test_every_dv_of_kernel_partitioned_table_verifies(kernel_dv_table: Path) -> None:
    storage = _storage(kernel_dv_table)
    adds = _dv_adds(kernel_dv_table)
    assert len(adds) >= 10
    for add in adds:
        assert add.deletion_vector is not None
        bitmap = read_deletion_vector(add.deletion_vector, storage, str(kernel_dv_table), data_file=add.path)
        assert len(bitmap) == add.deletion_vector.cardinality


# --- corruption ------------------------------------------------------------------------------


@pytest.fixture
def dv_copy(tmp_path: Path) -> tuple[Path, Add]:
    root = tmp_path / "table"
    shutil.copytree(DV_SMALL, root)
    (add,) = _dv_adds(root)
    return root, add


def _flip(path: Path, position: int) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("position", "message"),
    [
        (0, "format version"),
        (4, "dataSize"),
        (20, "CRC-32 mismatch"),  # inside the bitmap bytes
        (44, "CRC-32 mismatch"),  # inside the stored CRC
    ],
)
def test_flipped_byte_is_corrupt_and_named(dv_copy: tuple[Path, Add], position: int, message: str) -> None:
    root, add = dv_copy
    assert add.deletion_vector is not None
    dv_path = Path(dv_absolute_path(add.deletion_vector, str(root)))
    _flip(dv_path, position)
    with pytest.raises(CorruptFile, match=message) as info:
        read_deletion_vector(add.deletion_vector, _storage(root), str(root), data_file=add.path)
    assert str(dv_path) in str(info.value)
    assert add.path in str(info.value)


def test_truncated_file_is_corrupt(dv_copy: tuple[Path, Add]) -> None:
    root, add = dv_copy
    assert add.deletion_vector is not None
    dv_path = Path(dv_absolute_path(add.deletion_vector, str(root)))
    dv_path.write_bytes(dv_path.read_bytes()[:-2])
    with pytest.raises(CorruptFile, match="file ends"):
        read_deletion_vector(add.deletion_vector, _storage(root), str(root))


def test_cardinality_mismatch_is_corrupt(dv_copy: tuple[Path, Add]) -> None:
    root, add = dv_copy
    assert add.deletion_vector is not None
    wrong = add.deletion_vector.model_copy(update={"cardinality": 3})
    with pytest.raises(CorruptFile, match="cardinality 3"):
        read_deletion_vector(wrong, _storage(root), str(root), data_file=add.path)


def test_missing_dv_file_is_not_found(dv_copy: tuple[Path, Add]) -> None:
    root, add = dv_copy
    assert add.deletion_vector is not None
    Path(dv_absolute_path(add.deletion_vector, str(root))).unlink()
    with pytest.raises(NotFound, match="does not exist"):
        read_deletion_vector(add.deletion_vector, _storage(root), str(root))


def test_bad_magic_with_valid_crc_is_corrupt(tmp_path: Path) -> None:
    payload = b"\x00\x00\x00\x00" + BitMap64([1]).serialize()
    framed = b"\x01" + struct.pack(">I", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))
    file_uuid = UUID(int=7)
    (tmp_path / f"deletion_vector_{file_uuid}.bin").write_bytes(framed)
    descriptor = new_dv_descriptor(BitMap64([1]), file_uuid=file_uuid, offset=1, size_in_bytes=len(payload))
    with pytest.raises(CorruptFile, match="magic"):
        read_deletion_vector(descriptor, _storage(tmp_path), str(tmp_path))


def test_corrupt_inline_text_is_corrupt(tmp_path: Path) -> None:
    descriptor = DeletionVectorDescriptor(
        storageType="i", pathOrInlineDv=SPEC_INLINE[:-1] + "~", sizeInBytes=40, cardinality=6
    )
    with pytest.raises(CorruptFile, match="inline"):
        read_deletion_vector(descriptor, _storage(tmp_path), str(tmp_path), data_file="part-0.parquet")


# --- writing ---------------------------------------------------------------------------------


def test_encode_dv_file_framing_and_offsets() -> None:
    bitmaps = [BitMap64([0, 9]), BitMap64([1, 2**33])]
    data, places = encode_dv_file(bitmaps)
    assert data[0] == 1
    assert places[0][0] == 1
    assert places[1][0] == 1 + 4 + places[0][1] + 4
    assert len(data) == places[1][0] + 4 + places[1][1] + 4
    for offset, size in places:
        assert struct.unpack(">I", data[offset : offset + 4])[0] == size
        payload = data[offset + 4 : offset + 4 + size]
        assert struct.unpack(">I", data[offset + 4 + size : offset + 8 + size])[0] == zlib.crc32(payload)


@pytest.mark.parametrize("prefix", ["", "ab"])
def test_write_then_read_round_trip(tmp_path: Path, prefix: str) -> None:
    bitmaps = [BitMap64([0, 9]), BitMap64([3, 2**32 + 1, 2**45]), BitMap64(range(0, 200000, 3))]
    storage = _storage(tmp_path)
    descriptors = write_dv_file(storage, str(tmp_path), bitmaps, prefix=prefix)
    assert len({d.path_or_inline_dv for d in descriptors}) == 1
    assert len({d.unique_id for d in descriptors}) == 3
    for bitmap, descriptor in zip(bitmaps, descriptors, strict=True):
        assert descriptor.storage_type == "u"
        assert descriptor.cardinality == len(bitmap)
        path = dv_absolute_path(descriptor, str(tmp_path))
        assert Path(path).parent == (tmp_path / prefix if prefix else tmp_path)
        assert read_deletion_vector(descriptor, storage, str(tmp_path)) == bitmap
        # the descriptor survives the log's JSON
        again = DeletionVectorDescriptor.model_validate(json.loads(json.dumps(descriptor.to_json_dict())))
        assert read_deletion_vector(again, storage, str(tmp_path)) == bitmap


def test_write_refuses_a_non_alphanumeric_prefix(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument):
        write_dv_file(_storage(tmp_path), str(tmp_path), [BitMap64([1])], prefix="../x")


def test_inline_round_trip_with_unaligned_size(tmp_path: Path) -> None:
    bitmap = BitMap64([5, 7, 2**35])
    descriptor = inline_dv_descriptor(bitmap)
    assert descriptor.size_in_bytes % 4 != 0  # Z85 needed padding; the reader must drop it again
    assert len(descriptor.path_or_inline_dv) == (descriptor.size_in_bytes + 3) // 4 * 5
    assert read_deletion_vector(descriptor, _storage(tmp_path), str(tmp_path)) == bitmap


@pytest.mark.s3
def test_real_dv_read_through_s3(s3_bucket: Any) -> None:
    """The same DV through S3 ranged GETs (moto over HTTP)."""
    root = f"{s3_bucket.uri}/table-with-dv-small"
    storage = open_storage(root, s3_bucket.options)
    for name in os.listdir(DV_SMALL):
        if name.endswith(".bin"):
            storage.write(f"{root}/{name}", (DV_SMALL / name).read_bytes())
    (add,) = _dv_adds(DV_SMALL)
    assert add.deletion_vector is not None
    assert dv_absolute_path(add.deletion_vector, root).startswith(root + "/deletion_vector_")
    assert list(read_deletion_vector(add.deletion_vector, storage, root, data_file=add.path)) == [0, 9]


@pytest.mark.parametrize(("offset", "size"), [(2**63, 40), (1, 2**40)])
def test_an_offset_or_size_beyond_the_descriptors_int_is_corrupt(tmp_path: Path, offset: int, size: int) -> None:
    """Both are an ``Int`` in the protocol; larger values once reached ``seek`` as a ValueError. A log
    line holding one is refused when it is read (``tests/unit/delta/test_long_fields.py``): the reader's
    own check is for descriptors built without validation."""
    (tmp_path / "dv.bin").write_bytes(b"\x01" + bytes(64))
    descriptor = DeletionVectorDescriptor.model_construct(
        storage_type="p", path_or_inline_dv=str(tmp_path / "dv.bin"), offset=offset, size_in_bytes=size, cardinality=1
    )
    with pytest.raises(CorruptFile, match="impossible offset"):
        read_deletion_vector(descriptor, _storage(tmp_path), str(tmp_path))
