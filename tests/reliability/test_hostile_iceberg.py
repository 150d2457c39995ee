"""Hostile and broken Iceberg metadata (issue 10): metadata JSON, manifest lists and manifests.

The sources are the files PyIceberg writes for a small partitioned table (metadata JSON, an Avro
manifest list, Avro manifests with partition values and column metrics). Each property feeds the
lakeops readers damaged bytes, structurally mutated JSON, and Avro files rewritten with hostile
record values (same Avro types, other values: paths, counts, ids) or hostile key-value metadata
(the ``schema`` and ``partition-spec`` JSON a manifest carries), and asserts
:func:`hostile.must_hold`. Budget: ``LAKEOPS_FUZZ_EXAMPLES`` (see :mod:`hostile`).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import given, reject
from hypothesis import strategies as st
from iceberg_manifests import read_manifest_metadata
from pyiceberg_tables import small_file_table
from reliability.hostile import FUZZ, NASTY_JSON, json_bytes, json_values, must_hold, mutated_bytes, mutated_tree, names

from lakeops.errors import LakeopsError
from lakeops.iceberg.manifest import read_manifest
from lakeops.iceberg.manifest_list import ManifestFile, manifest_paths_of, read_manifest_list
from lakeops.iceberg.metadata import Snapshot, parse_metadata
from lakeops.storage import LocalStorage

STORAGE = LocalStorage()


@dataclass(frozen=True)
class Sources:
    metadata: bytes
    manifest_list: bytes
    manifest: bytes
    listed: ManifestFile


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Sources:
    table = small_file_table(tmp_path_factory.mktemp("iceberg"), "identity", appends=2, rows=6)
    snapshot = table.table.current_snapshot()
    assert snapshot is not None and snapshot.manifest_list is not None
    list_path = snapshot.manifest_list.removeprefix("file://")
    listed = read_manifest_list(STORAGE, list_path)[0]
    return Sources(
        metadata=Path(table.table.metadata_location.removeprefix("file://")).read_bytes(),
        manifest_list=Path(list_path).read_bytes(),
        manifest=Path(listed.manifest_path.removeprefix("file://")).read_bytes(),
        listed=listed,
    )


def _like(value: Any) -> st.SearchStrategy[Any]:
    """Hostile values of the same Avro-encodable kind as ``value`` (so the file stays writable)."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(-(2**63), 2**63 - 1) | st.sampled_from([0, -1, 2**31 - 1, -(2**31)])
    if isinstance(value, float):
        return st.floats()
    if isinstance(value, str):
        return st.text(max_size=20) | st.sampled_from(["", "../outside.parquet", "/etc/passwd", "s3://other/x"])
    if isinstance(value, bytes):
        return st.binary(max_size=20)
    return st.none()


@st.composite
def _typed_mutation(draw: st.DrawFn, record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with one leaf replaced by a hostile value of its own type."""
    leaves: list[tuple[Any, ...]] = []

    def walk(value: Any, path: tuple[Any, ...]) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*path, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, (*path, index))
        else:
            leaves.append(path)

    walk(record, ())
    path = draw(st.sampled_from(leaves))
    out = _deep_copy(record)
    target = out
    for step in path[:-1]:
        target = target[step]
    original = target[path[-1]]
    target[path[-1]] = draw(_like(original))
    return out


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _avro_parts(raw: bytes) -> tuple[dict[str, Any], dict[str, str], list[dict[str, Any]]]:
    reader = fastavro.reader(io.BytesIO(raw))
    metadata = {k: v for k, v in reader.metadata.items() if not k.startswith("avro.")}
    return reader.writer_schema, metadata, list(reader)


def _rewrite_avro(data: st.DataObject, raw: bytes) -> bytes:
    """The Avro file with one record value, or one key-value metadata JSON, made hostile."""
    schema, metadata, records = _avro_parts(raw)
    if data.draw(st.booleans()) and records:
        index = data.draw(st.integers(0, len(records) - 1))
        records[index] = data.draw(_typed_mutation(records[index]))
    else:
        key = data.draw(st.sampled_from(sorted(metadata)))
        try:
            parsed = json.loads(metadata[key])
        except ValueError:
            parsed = metadata[key]
        mutated = data.draw(mutated_tree(parsed))
        metadata[key] = mutated if isinstance(mutated, str) else json.dumps(mutated)
    sink = io.BytesIO()
    try:
        fastavro.writer(sink, fastavro.parse_schema(schema), records, metadata=metadata)
    except (ValueError, TypeError, OverflowError):
        reject()  # fastavro cannot encode it: no writer could produce such a file
    return sink.getvalue()


@pytest.mark.parametrize("raw", NASTY_JSON, ids=range(len(NASTY_JSON)))
def test_pathological_json_metadata(raw: bytes) -> None:
    result = must_hold(lambda: parse_metadata(raw, "/wh/t/metadata/00001-x.metadata.json"), "parse_metadata")
    assert names(result, "00001-x.metadata.json")


#: Fields that the v1 → v2 upgrade (Appendix E) reads before field validation, in shapes it did not
#: expect: refs, specs' fields and v1 partition-spec entries of the wrong type crashed with a TypeError
#: instead of a ProtocolError (the fuzzing below found the first).
WRONG_SHAPES = [
    {"refs": 1},
    {"partition-specs": [{"spec-id": 0, "fields": 5}], "last-partition-id": None},
    {"partition-specs": [7]},
    {"schemas": None, "schema": "not a schema"},
    {"partition-specs": None, "partition-spec": [1, 2]},
]


@pytest.mark.parametrize("change", WRONG_SHAPES, ids=range(len(WRONG_SHAPES)))
def test_fields_of_the_wrong_shape_are_named_not_crashed_on(change: dict[str, Any], sources: Sources) -> None:
    document = {**json.loads(sources.metadata), **change}
    document = {k: v for k, v in document.items() if v is not None}
    result = must_hold(lambda: parse_metadata(json_bytes(document), "/wh/t/metadata/00002-y.metadata.json"), "parse")
    assert names(result, "00002-y.metadata.json")


@FUZZ
@given(data=st.data())
def test_hostile_metadata_json(data: st.DataObject, sources: Sources) -> None:
    if data.draw(st.booleans()):
        raw = data.draw(mutated_bytes(sources.metadata))
    else:
        raw = json_bytes(data.draw(mutated_tree(json.loads(sources.metadata), json_values)))
    result = must_hold(lambda: parse_metadata(raw, "/wh/t/metadata/00002-y.metadata.json"), "parse_metadata")
    assert not isinstance(result, LakeopsError) or names(result, "00002-y.metadata.json")


@FUZZ
@given(data=st.data())
def test_hostile_manifest_list(data: st.DataObject, sources: Sources, tmp_path: Path) -> None:
    raw = data.draw(mutated_bytes(sources.manifest_list)) if data.draw(st.booleans()) else None
    path = tmp_path / "snap-1-1-hostile.avro"
    path.write_bytes(raw if raw is not None else _rewrite_avro(data, sources.manifest_list))
    result = must_hold(lambda: read_manifest_list(STORAGE, str(path)), "read_manifest_list")
    assert not isinstance(result, LakeopsError) or names(result, path.name)
    listing = Snapshot.model_validate({"snapshot-id": 1, "timestamp-ms": 0, "manifest-list": str(path)})
    paths = must_hold(lambda: manifest_paths_of(STORAGE, listing), "manifest_paths_of")
    assert not isinstance(paths, LakeopsError) or names(paths, path.name)
    if not isinstance(result, LakeopsError) and not isinstance(paths, LakeopsError):
        assert paths == [m.manifest_path for m in result]  # the cheap reading agrees with the full one


@FUZZ
@given(data=st.data())
def test_hostile_manifest(data: st.DataObject, sources: Sources, tmp_path: Path) -> None:
    raw = data.draw(mutated_bytes(sources.manifest)) if data.draw(st.booleans()) else None
    path = tmp_path / "hostile-m0.avro"
    path.write_bytes(raw if raw is not None else _rewrite_avro(data, sources.manifest))
    listed = sources.listed.model_copy(update={"manifest_path": str(path)})
    entries = must_hold(lambda: read_manifest(STORAGE, listed, include_deleted=True), "read_manifest")
    assert not isinstance(entries, LakeopsError) or names(entries, path.name)
    header = must_hold(lambda: read_manifest_metadata(STORAGE, str(path)), "read_manifest_metadata")
    assert not isinstance(header, LakeopsError) or names(header, path.name)


def test_a_nested_record_without_fields_is_a_corrupt_manifest(sources: Sources, tmp_path: Path) -> None:
    """Found by the long fuzzing budget: fastavro reads the data_file record misspelt ``gields`` as a record
    with no fields, and the manifest reader raised a KeyError far from the file."""
    misspelt = b'"data_file", "field-id": 2, "type": {"type": "record", "gields"'
    raw = sources.manifest.replace(misspelt.replace(b"gields", b"fields"), misspelt)
    assert raw != sources.manifest
    path = tmp_path / "hostile-m0.avro"
    path.write_bytes(raw)
    listed = sources.listed.model_copy(update={"manifest_path": str(path)})
    error = must_hold(lambda: read_manifest(STORAGE, listed, include_deleted=True), "read_manifest")
    assert isinstance(error, LakeopsError) and names(error, path.name) and "'r2'" in str(error)
