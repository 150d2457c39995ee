"""Regression (issue 22): an inline deletion vector whose last Z85 group Spark wrote above 2**32 - 1.

No fixture holds a Spark inline DV, so the real DV of ``delta-rs/table-with-dv-small`` (rows 0 and 9
of ten deleted) is moved inline into a copied log, its last group written as its value plus 2**32:
what Spark's ``Base85Codec`` may write and reads back (it keeps each group's low 32 bits). delta-rs
1.6 refuses that form ("Failed to decode DV"), so it is the oracle for the canonical encoding of the
same DV, which must give the rows lakeops reads from the overflowed one.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from delta_rs_sql import delta_rs_rows
from lakeops_testdata import TESTDATA

from lakeops import api
from lakeops.delta.deletion_vectors import Z85_ALPHABET, z85_decode, z85_encode
from lakeops.delta.scan import read_snapshot
from lakeops.delta.snapshot import load_snapshot
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.compaction import CompactionOptions
from lakeops.storage import open_storage

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
    assert z85_decode("##093", 2) == (4436439768 - 2**32).to_bytes(4, "big")[:2]  # the group


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
