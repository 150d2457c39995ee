"""The fast paths of log replay give exactly what validation gives (issue 9).

Checkpoint ``add``/``remove`` columns of the protocol's types are built without validation
(:func:`lakeops.delta.checkpoint_reader._columnar_actions`); these tests build every fixture
checkpoint both ways and compare the models field by field, including which fields were set and the
undeclared fields kept. Commit lines are parsed by pydantic-core straight into the models; those tests
pin the errors a damaged line gives.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from lakeops_testdata import TESTDATA

from lakeops.delta.actions import ACTION_KEYS, Add, Remove
from lakeops.delta.checkpoint_reader import _BUILDERS, _action_fields, _columnar_actions, read_checkpoint_part
from lakeops.delta.commit_file import parse_commit
from lakeops.errors import CorruptFile
from lakeops.storage import LocalStorage

CHECKPOINTS = sorted(TESTDATA.rglob("*.checkpoint*.parquet"))


def _validated(column: str, array: pa.ChunkedArray) -> list[Any]:
    rows = array.filter(pc.is_valid(array)).to_pylist()
    return [_BUILDERS[column].model_validate(_action_fields(column, row)) for row in rows]


def _same(fast: list[Any], slow: list[Any]) -> None:
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow, strict=True):
        assert a == b
        assert a.__dict__ == b.__dict__
        assert a.model_fields_set == b.model_fields_set
        assert (a.model_extra or {}) == (b.model_extra or {})
        assert a.to_json_dict() == b.to_json_dict()


def test_fixtures_have_checkpoints() -> None:
    assert len(CHECKPOINTS) >= 10


@pytest.mark.parametrize("path", CHECKPOINTS, ids=[str(p.relative_to(TESTDATA)) for p in CHECKPOINTS])
def test_columnar_checkpoint_actions_equal_validated_ones(path: Path) -> None:
    table = pq.read_table(path)
    built = 0
    for column in ("add", "remove"):
        if column not in table.column_names:
            continue
        array = table.column(column)
        fast = _columnar_actions(column, array.filter(pc.is_valid(array)))
        if fast is not None:
            _same(fast, _validated(column, array))
            built += len(fast)
    # A V2 checkpoint whose file actions are in sidecars (swept here too) holds none itself.
    assert built or table.num_rows < 5 or "sidecar" in table.column_names


def _checkpoint(tmp_path: Path, rows: list[dict[str, Any]], schema: pa.Schema) -> Path:
    path = tmp_path / "00000000000000000001.checkpoint.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)
    return path


_MAP = pa.map_(pa.string(), pa.string())
_DV = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
_ADD = pa.struct(
    [
        ("path", pa.string()),
        ("partitionValues", _MAP),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
        ("tags", _MAP),
        ("deletionVector", _DV),
        ("baseRowId", pa.int64()),
        ("stats_parsed", pa.struct([("numRecords", pa.int64())])),
    ]
)


def test_every_field_kind_and_null_pattern_round_trips(tmp_path: Path) -> None:
    """Maps with 0, 1 and 2 entries and null values, a null map, DVs, extras, stats only as a struct."""
    dv = {
        "storageType": "u",
        "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": 2,
    }
    adds = [
        {
            "path": "a",
            "partitionValues": [("d", "1")],
            "size": 1,
            "modificationTime": 5,
            "dataChange": True,
            "stats": '{"numRecords":3}',
        },
        {
            "path": "b",
            "partitionValues": [],
            "size": 2,
            "modificationTime": 5,
            "dataChange": False,
            "tags": [("k", "v"), ("n", None)],
            "deletionVector": dv,
            "baseRowId": 7,
        },
        {
            "path": "c",
            "partitionValues": [("d", None), ("e", "x")],
            "size": 3,
            "modificationTime": 6,
            "dataChange": True,
            "stats_parsed": {"numRecords": 9},
        },
        {"path": "d", "partitionValues": None, "size": 4, "modificationTime": 6, "dataChange": True},
    ]
    schema = pa.schema([("add", _ADD), ("remove", pa.struct([("path", pa.string()), ("dataChange", pa.bool_())]))])
    rows: list[dict[str, Any]] = [{"add": a, "remove": None} for a in adds]
    rows.insert(2, {"add": None, "remove": {"path": "z", "dataChange": True}})
    path = _checkpoint(tmp_path, rows, schema)
    table = pq.read_table(path)
    for column in ("add", "remove"):
        array = table.column(column)
        fast = _columnar_actions(column, array.filter(pc.is_valid(array)))
        assert fast is not None
        _same(fast, _validated(column, array))
    actions = list(read_checkpoint_part(LocalStorage(), str(path)))
    by_path = {a.path: a for a in actions if isinstance(a, Add | Remove)}
    assert by_path["c"].stats == '{"numRecords":9}'
    assert by_path["b"].deletion_vector is not None and by_path["b"].model_extra == {"baseRowId": 7}
    assert by_path["d"].partition_values == {}


def test_a_column_of_another_type_takes_the_validating_path(tmp_path: Path) -> None:
    schema = pa.schema(
        [
            (
                "add",
                pa.struct(
                    [
                        ("path", pa.string()),
                        ("size", pa.string()),
                        ("modificationTime", pa.int64()),
                        ("dataChange", pa.bool_()),
                    ]
                ),
            )
        ]
    )
    path = _checkpoint(
        tmp_path, [{"add": {"path": "a", "size": "12", "modificationTime": 1, "dataChange": True}}], schema
    )
    assert _columnar_actions("add", pq.read_table(path).column("add")) is None
    (add,) = read_checkpoint_part(LocalStorage(), str(path))
    assert isinstance(add, Add) and add.size == 12  # lax validation, as before


def test_a_null_required_field_is_refused_naming_the_file(tmp_path: Path) -> None:
    schema = pa.schema([("add", _ADD)])
    path = _checkpoint(
        tmp_path, [{"add": {"path": None, "size": 1, "modificationTime": 1, "dataChange": True}}], schema
    )
    with pytest.raises(CorruptFile, match="00000000000000000001.checkpoint.parquet: invalid add action"):
        list(read_checkpoint_part(LocalStorage(), str(path)))


LOCATION = "/t/_delta_log/00000000000000000003.json"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"add":{"path":"a"', r"line 1 is not valid JSON \(EOF while parsing"),
        (b'{"commitInfo":{}}\n[1, 2]', "line 2 is not a single action object"),
        (b"{}", "line 1 is not a single action object"),
        (b'{"txn":{"appId":"a","version":1},"commitInfo":{}}', "line 1 is not a single action object"),
        (b'{"add":null}', "line 1: invalid add action: .* at $"),
        (
            b'{"add":{"path":"a","size":"x","modificationTime":1,"dataChange":true}}',
            "line 1: invalid add action: .* at size",
        ),
        (
            b'{"remove":{"path":"a","dataChange":true,"deletionVector":{"storageType":"q"}}}',
            "line 1: invalid remove action: .* at deletionVector.storageType",
        ),
        (b"[" * 300 + b"]" * 300, "line 1 is not valid JSON"),
        (b'{"add":{"path":"a","size":' + b"9" * 5000 + b"}}", "line 1 is not valid JSON"),
        (
            b'{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}\n'
            b'{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}',
            "more than one protocol action",
        ),
        (b"\xff", "not UTF-8"),
    ],
)
def test_damaged_commit_lines_are_named(raw: bytes, message: str) -> None:
    with pytest.raises(CorruptFile, match=message) as info:
        parse_commit(raw, 3, LOCATION)
    assert str(info.value).startswith(LOCATION)


def test_unknown_action_kinds_and_blank_lines_are_ignored() -> None:
    raw = b'\n{"futureAction":{"domain":"x"}}\n  \n{"txn":{"appId":"a","version":4}}\r\n'
    commit = parse_commit(raw, 3, LOCATION)
    assert [t.version for t in commit.txns] == [4]
    assert not commit.adds and commit.protocol is None


def test_parse_commit_keeps_what_json_loads_and_validation_kept() -> None:
    """Every fixture commit: the same actions as json.loads + model_validate, line by line."""
    commits = sorted(TESTDATA.rglob("_delta_log/*.json"))
    assert len(commits) > 20
    for path in commits:
        raw = path.read_bytes()
        commit = parse_commit(raw, 0, str(path))
        expected: list[Any] = []
        for line in raw.decode().split("\n"):
            if line.strip():
                ((key, body),) = json.loads(line).items()
                if key in ACTION_KEYS:
                    expected.append(ACTION_KEYS[key].model_validate(body))
        got = [
            commit.protocol,
            commit.metadata,
            commit.commit_info,
            *commit.adds,
            *commit.removes,
            *commit.cdcs,
            *commit.txns,
            *commit.domains,
            *commit.sidecars,
            commit.checkpoint_metadata,
        ]
        got = [a for a in got if a is not None]
        assert sorted(map(repr, got)) == sorted(map(repr, expected)), path
