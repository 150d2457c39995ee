"""A change export's new output location: empty, or holding only what a killed first export left."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeops.changefeed.table import require_empty_or_abandoned
from lakeops.errors import InvalidArgument
from lakeops.storage import open_storage


def test_leftovers_of_a_killed_first_export_are_accepted(tmp_path: Path) -> None:
    (tmp_path / "part-0001-6f1c.zstd.parquet").write_bytes(b"data of an uncommitted export")
    (tmp_path / "_delta_log").mkdir()
    (tmp_path / "_delta_log" / ".00000000000000000000.json.x1y2.lakeops-tmp").write_bytes(b"{")
    require_empty_or_abandoned(open_storage(str(tmp_path)), str(tmp_path))


@pytest.mark.parametrize("name", ["notes.txt", "sub/part-0001.zstd.parquet", "_delta_log/00000000000000000000.json"])
def test_anything_else_is_refused_and_named(tmp_path: Path, name: str) -> None:
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_bytes(b"someone's data")
    with pytest.raises(InvalidArgument, match=f"holds files but no Delta table \\({name}\\)"):
        require_empty_or_abandoned(open_storage(str(tmp_path)), str(tmp_path))
    assert (tmp_path / name).read_bytes() == b"someone's data"
