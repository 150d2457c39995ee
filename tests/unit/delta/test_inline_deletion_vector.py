"""Inline deletion vectors as writers end them.

Issue 38: the descriptor ``^Bg9^0rr910000000000iXQKl0rr91000005c8Xg##093`` (34 bytes, one row) on a
10-row file; delta-rs and delta-kernel read it as deleting row 3, lakeops read row 28168 and refused
the file. Its last group is the Rust ``z85`` crate's short form (``##`` = two bytes short, ``093`` =
``03 00``), not an overflowed 32-bit group. The regression attaches exactly that descriptor to a file
delta-rs wrote, with delta-rs as the judge of every read, compaction and change feed.

Issue 22's form stays read too: the real DV of ``delta-rs/table-with-dv-small`` (rows 0 and 9 of ten
deleted) moved inline, its last group written as its value plus 2**32, which Spark's ``Base85Codec``
reads back by keeping each group's low 32 bits (delta-rs refuses it, so the canonical encoding of the
same DV is its oracle).
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pyarrow as pa
import pytest
from delta_rs_sql import delta_rs_rows
from deltalake import write_deltalake
from lakeops_testdata import TESTDATA

from lakeops import api
from lakeops.delta.deletion_vectors import Z85_ALPHABET, z85_decode, z85_encode
from lakeops.delta.scan import read_snapshot
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import InvalidArgument
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.compaction import CompactionOptions
from lakeops.storage import open_storage

#: Issue 38's descriptor, as its writer left it in the log.
ISSUE_38_DV = {
    "storageType": "i",
    "pathOrInlineDv": "^Bg9^0rr910000000000iXQKl0rr91000005c8Xg##093",
    "offset": None,
    "sizeInBytes": 34,
    "cardinality": 1,
}

SOURCE = TESTDATA / "delta-rs" / "table-with-dv-small"
DV_FILE = "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
LIVE_ROWS = [1, 2, 3, 4, 5, 6, 7, 8]  # values 0..9, rows 0 and 9 deleted


def _overflowed(text: str) -> str:
    value = sum(Z85_ALPHABET.index(c) * 85 ** (4 - i) for i, c in enumerate(text[-5:])) + 2**32
    assert value < 85**5
    return text[:-5] + "".join(Z85_ALPHABET[value // 85 ** (4 - i) % 85] for i in range(5))


def _inline_table(tmp_path: Path, name: str, *, overflow: bool) -> Path:
    """A copy of the table whose version-1 ``add`` carries its DV inline (the DV file removed)."""
    root = tmp_path / name
    shutil.copytree(SOURCE, root)
    framed = (root / DV_FILE).read_bytes()
    (size,) = struct.unpack_from(">I", framed, 1)  # version byte, then the big-endian dataSize
    text = z85_encode(framed[5 : 5 + size])
    (root / DV_FILE).unlink()
    log = root / "_delta_log" / "00000000000000000001.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    for action in actions:
        if "add" in action:
            action["add"]["deletionVector"] = {
                "storageType": "i",
                "pathOrInlineDv": _overflowed(text) if overflow else text,
                "sizeInBytes": size,
                "cardinality": 2,
            }
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    return root


def _lakeops_values(root: Path) -> list[int]:
    storage = open_storage(str(root))
    return sorted(read_snapshot(load_snapshot(storage, str(root)), storage).column("value").to_pylist())


def _delta_rs_values(root: Path, where: str = "") -> list[int]:
    return sorted(delta_rs_rows(root, where).column("value").to_pylist())


def test_z85_last_padded_group_keeps_its_low_32_bits() -> None:
    """Spark's ``Base85Codec.decodeBlocks`` keeps each group's low 32 bits; the padding is dropped."""
    data = bytes([5, 0])  # one padded group: 05 00 | 00 00
    text = _overflowed(z85_encode(data))
    assert text != z85_encode(data)
    assert z85_decode(text, 2) == data


def _short_form(data: bytes) -> str:
    """``data`` as the Rust ``z85`` crate encodes it: whole groups, then a short ``#``-marked last one."""
    whole = len(data) - len(data) % 4
    text = z85_encode(data[:whole])
    if whole == len(data):
        return text
    tail = data[whole:]
    value = int.from_bytes(tail, "big")
    digits = "".join(Z85_ALPHABET[value // 85**i % 85] for i in reversed(range(len(tail) + 1)))
    return text + "#" * (4 - len(tail)) + digits


@pytest.mark.parametrize("length", [1, 2, 3, 5, 34, 35])
def test_a_short_last_group_holds_as_many_bytes_as_its_hashes_say(length: int) -> None:
    data = bytes((i * 37 + 255) % 256 for i in range(length))
    assert z85_decode(_short_form(data), length) == data
    assert z85_decode("##093", 2) == b"\x03\x00"  # issue 38's last group


@pytest.mark.parametrize(
    ("text", "message"),
    [("####0", "is all padding"), ("##zzz", "exceeds 2 bytes"), ("0000##093", "not a multiple of 5")],
)
def test_a_malformed_short_group_is_refused(text: str, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        z85_decode(text)


def _issue_38_table(tmp_path: Path) -> Path:
    """Ten rows (``id`` 0..9) written by delta-rs, then a commit that gives the file issue 38's DV."""
    root = tmp_path / "issue38"
    write_deltalake(str(root), pa.table({"id": pa.array(range(10), pa.int64())}))
    log = root / "_delta_log" / "00000000000000000000.json"
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    for action in actions:
        if "protocol" in action:
            features = ["deletionVectors"]
            action["protocol"] = {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": features,
                "writerFeatures": features,
            }
        if "metaData" in action:
            action["metaData"]["configuration"]["delta.enableDeletionVectors"] = "true"
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    (add,) = [a["add"] for a in actions if "add" in a]
    remove = {k: add[k] for k in ("path", "partitionValues", "size")}
    remove |= {"deletionTimestamp": add["modificationTime"] + 1, "dataChange": True, "extendedFileMetadata": True}
    again = add | {"deletionVector": ISSUE_38_DV, "modificationTime": add["modificationTime"] + 1}
    commit = [{"remove": remove}, {"add": again}, {"commitInfo": {"timestamp": add["modificationTime"] + 1}}]
    (root / "_delta_log" / "00000000000000000001.json").write_text("".join(json.dumps(a) + "\n" for a in commit))
    return root


def _ids(rows: pa.Table) -> list[int]:
    return sorted(rows.column("id").to_pylist())


def test_issue_38_inline_dv_deletes_the_row_delta_rs_deletes(tmp_path: Path) -> None:
    root = _issue_38_table(tmp_path)
    storage = open_storage(str(root))
    expected = [0, 1, 2, 4, 5, 6, 7, 8, 9]
    assert _ids(delta_rs_rows(root)) == expected
    assert _ids(read_snapshot(load_snapshot(storage, str(root)), storage)) == expected


def test_issue_38_inline_dv_compacts_and_feeds_changes_as_delta_rs_reads_them(tmp_path: Path) -> None:
    root = _issue_38_table(tmp_path)
    changes = api.cdc(str(root), CdcOptions(from_version=0, output=str(tmp_path / "changes")))
    assert (changes.rows_insert, changes.rows_delete) == (10, 1)
    assert _ids(delta_rs_rows(tmp_path / "changes", "_change_type = 'delete'")) == [3]

    report = api.compact(str(root), CompactionOptions(min_input_files=1, dv_purge_ratio=0.05))
    assert (report.files_removed, report.files_added, report.rows_written) == (1, 1, 9)
    assert _ids(delta_rs_rows(root)) == [0, 1, 2, 4, 5, 6, 7, 8, 9]


@pytest.fixture
def inline(tmp_path: Path) -> Path:
    return _inline_table(tmp_path, "overflowed", overflow=True)


def test_overflowed_last_group_reads_the_rows_delta_rs_reads_from_the_canonical_form(
    tmp_path: Path, inline: Path
) -> None:
    canonical = _inline_table(tmp_path, "canonical", overflow=False)
    descriptor = json.loads((inline / "_delta_log" / "00000000000000000001.json").read_text().splitlines()[-1])
    assert descriptor["add"]["deletionVector"]["pathOrInlineDv"][-5:] == "%nSDa"  # 2304 + 2**32
    assert _delta_rs_values(canonical) == _lakeops_values(canonical) == LIVE_ROWS
    assert _lakeops_values(inline) == LIVE_ROWS


def test_compaction_purges_the_inline_dv(inline: Path) -> None:
    report = api.compact(str(inline), CompactionOptions(min_input_files=1, dv_purge_ratio=0.1))
    assert (report.files_removed, report.files_added, report.rows_written) == (1, 1, 8)
    after = load_snapshot(open_storage(str(inline)), str(inline))
    assert [a.deletion_vector for a in after.files.values()] == [None]
    assert _delta_rs_values(inline) == _lakeops_values(inline) == LIVE_ROWS


def test_cdc_extracts_the_rows_the_inline_dv_deleted(tmp_path: Path, inline: Path) -> None:
    output = tmp_path / "changes"
    report = api.cdc(str(inline), CdcOptions(from_version=0, output=str(output)))
    assert (report.rows_insert, report.rows_delete) == (10, 2)
    assert _delta_rs_values(output, "_change_type = 'delete'") == [0, 9]
    assert _delta_rs_values(output, "_change_type = 'insert'") == list(range(10))
