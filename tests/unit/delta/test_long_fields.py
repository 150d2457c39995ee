"""The protocol's ``long`` and ``int`` fields hold what those types hold (issue 19, "Unclear crashes").

An ``add.size`` of 10^30 was accepted when the log was read and failed at checkpoint time with
``ProtocolError ... Python int too large to convert to C long``, naming no file; a commit file named
``99999999999999999999.json`` made every command allocate a list of every missing version (the
process was killed). Each is now a :class:`CorruptFile` when the log is read, naming the commit file,
the line, the action's path and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lakeops.delta.actions import Add
from lakeops.delta.commit_file import parse_commit
from lakeops.delta.log_segment import list_log, segment_for_version
from lakeops.errors import CorruptFile, VersionNotFound
from lakeops.storage import open_storage

LOCATION = "/t/_delta_log/00000000000000000003.json"
LONG = 2**63
INT = 2**31
DV = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 1, "sizeInBytes": 36, "cardinality": 2}
ACTIONS: dict[str, dict[str, Any]] = {
    "add": {"path": "part-0.parquet", "partitionValues": {}, "size": 10, "modificationTime": 1, "dataChange": True},
    "remove": {"path": "part-1.parquet", "deletionTimestamp": 1, "dataChange": True, "size": 10},
    "cdc": {"path": "_change_data/c-0.parquet", "partitionValues": {}, "size": 10, "dataChange": False},
    "txn": {"appId": "app", "version": 1, "lastUpdated": 1},
    "metaData": {"id": "m", "format": {"provider": "parquet"}, "schemaString": "{}", "createdTime": 1},
    "protocol": {"minReaderVersion": 1, "minWriterVersion": 2},
    "commitInfo": {"timestamp": 1},
}


def _line(key: str, **changes: Any) -> bytes:
    return json.dumps({key: {**ACTIONS[key], **changes}}).encode()


@pytest.mark.parametrize(
    ("key", "field", "value", "kind"),
    [
        ("add", "size", 10**30, "long"),
        ("add", "size", -LONG - 1, "long"),
        ("add", "modificationTime", LONG, "long"),
        ("remove", "deletionTimestamp", 10**30, "long"),
        ("remove", "size", LONG, "long"),
        ("cdc", "size", 10**30, "long"),
        ("txn", "version", LONG, "long"),
        ("txn", "lastUpdated", LONG, "long"),
        ("metaData", "createdTime", LONG, "long"),
        ("commitInfo", "timestamp", LONG, "long"),
        ("protocol", "minReaderVersion", INT, "int"),
        ("protocol", "minWriterVersion", -INT - 1, "int"),
    ],
)
def test_a_field_outside_its_type_names_the_file_the_line_the_path_and_the_field(
    key: str, field: str, value: int, kind: str
) -> None:
    raw = _line("commitInfo") + b"\n" + _line(key, **{field: value})
    with pytest.raises(CorruptFile) as caught:
        parse_commit(raw, 3, LOCATION)
    message = str(caught.value)
    assert LOCATION in message and "line 2" in message and field in message and str(value) in message
    assert f"the protocol's {kind}" in message
    if "path" in ACTIONS[key]:
        assert ACTIONS[key]["path"] in message


def test_a_deletion_vector_cardinality_outside_a_long_is_named() -> None:
    with pytest.raises(CorruptFile, match=r"part-0\.parquet.*deletionVector\.cardinality"):
        parse_commit(_line("add", deletionVector={**DV, "cardinality": LONG}), 3, LOCATION)


def test_the_extremes_of_a_long_are_accepted() -> None:
    actions = parse_commit(_line("add", size=LONG - 1, modificationTime=-LONG), 3, LOCATION)
    assert actions.adds[0].size == LONG - 1


def test_num_records_outside_a_long_names_the_file() -> None:
    add = Add.model_validate({**ACTIONS["add"], "stats": json.dumps({"numRecords": 10**30})})
    with pytest.raises(CorruptFile, match=r"part-0\.parquet.*numRecords"):
        _ = add.num_records


def test_a_commit_file_whose_version_is_not_a_long_is_named(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / f"{0:020d}.json").write_bytes(_line("protocol") + b"\n" + _line("metaData"))
    (log / "99999999999999999999.json").write_bytes(_line("commitInfo"))
    with pytest.raises(CorruptFile, match=r"99999999999999999999\.json.*long"):
        list_log(open_storage(str(tmp_path)), str(tmp_path))


def test_a_huge_gap_in_versions_is_reported_without_listing_every_missing_version(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    (log / f"{0:020d}.json").write_bytes(_line("protocol") + b"\n" + _line("metaData"))
    (log / f"{LONG - 1:020d}.json").write_bytes(_line("commitInfo"))  # a list of its predecessors: exabytes
    listing = list_log(open_storage(str(tmp_path)), str(tmp_path))
    with pytest.raises(VersionNotFound, match=f"{1:020d}.json is missing"):
        segment_for_version(listing, str(tmp_path))
