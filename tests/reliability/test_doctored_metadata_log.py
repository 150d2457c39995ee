"""A trimmed Iceberg ``metadata-log`` deletes only what it may (issue 19, "What broke" 2).

With ``write.metadata.delete-after-commit.enabled=true`` every commit deletes the metadata files
``write.metadata.previous-versions-max`` trims off the log. A hostile or broken writer controls the
log's entries, so a commit (here ``lakeops checkpoint --rewrite-all``) must delete only entries that
are metadata files of this table: a metadata file name, inside the table's metadata directory once
symlinks are resolved, and not referenced by the new metadata. Everything else a doctored log names
(a live data file, a file behind a link out of the table, another table's metadata, the current
metadata file itself) survives, and the commit still lands.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from lakeops_cli import run_json
from pyiceberg_tables import rows_of, small_file_table

TRIM_EVERYTHING = {"write.metadata.delete-after-commit.enabled": "true", "write.metadata.previous-versions-max": "1"}
OTHER_UUID = "0b5a8f6e-3c1d-4c2e-9a7b-5d6e7f8a9b0c"


def test_a_doctored_metadata_log_deletes_only_this_tables_old_metadata(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    table = small_file_table(tmp_path, appends=3, rows=5, properties=TRIM_EVERYTHING)
    rows = rows_of(table.table.scan().to_arrow())
    location = Path(table.location)
    current = Path(table.table.metadata_location.removeprefix("file://"))
    live_data = Path(next(iter(table.table.scan().plan_files())).file.file_path.removeprefix("file://"))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / f"00001-{OTHER_UUID}.metadata.json").write_text("{}")
    (location / "metadata" / "linked").symlink_to(outside)
    other_table = tmp_path / "other" / "metadata" / f"00001-{OTHER_UUID}.metadata.json"
    other_table.parent.mkdir(parents=True)
    other_table.write_text("{}")
    old = location / "metadata" / f"00000-{OTHER_UUID}.metadata.json"
    shutil.copy(current, old)  # an old metadata file of this table: the only entry that may go
    doctored = [
        str(old),
        f"file://{live_data}",
        str(location / "metadata" / "linked" / f"00001-{OTHER_UUID}.metadata.json"),
        f"{location}/metadata/../../other/metadata/00001-{OTHER_UUID}.metadata.json",
        str(other_table),
        str(current),
    ]
    document = json.loads(current.read_text())
    document["metadata-log"] = [{"metadata-file": f, "timestamp-ms": 1} for f in doctored]
    current.write_text(json.dumps(document))

    report = run_json(capsys, "checkpoint", table.identifier, "--catalog-uri", table.catalog_uri, "--rewrite-all")

    assert report["commit_attempts"] >= 1, report
    assert not old.exists()
    assert live_data.exists() and other_table.exists() and current.exists()
    assert (outside / f"00001-{OTHER_UUID}.metadata.json").exists()
    assert rows_of(table.reload().scan().to_arrow()) == rows
    skipped = [r.getMessage() for r in caplog.records if "is not deleted after the commit" in r.getMessage()]
    assert len(skipped) == len(doctored) - 1 and any(live_data.name in m for m in skipped), skipped
