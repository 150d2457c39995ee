"""``_last_checkpoint``: the JSON checksum rules, parsing, and the real files of other writers."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from lakeops_testdata import TESTDATA

from lakeops.delta.last_checkpoint import (
    LastCheckpoint,
    canonicalize,
    checksum,
    parse_last_checkpoint,
    render_last_checkpoint,
)
from lakeops.errors import CorruptFile

SPEC_SAMPLE = (
    '{"k0":"\'v 0\'", "checksum": "adsaskfljadfkjadfkj", "k1":{"k2": 2, "k3": ["v3", [1, 2], '
    '{"k4": "v4", "k5": ["v5", "v6", "v7"]}]}}'
)
SPEC_CANONICAL = (
    '"k0"="%27v%200%27","k1"+"k2"=2,"k1"+"k3"+0="v3","k1"+"k3"+1+0=1,"k1"+"k3"+1+1=2,'
    '"k1"+"k3"+2+"k4"="v4","k1"+"k3"+2+"k5"+0="v5","k1"+"k3"+2+"k5"+1="v6","k1"+"k3"+2+"k5"+2="v7"'
)


def test_spec_sample_canonical_form_and_checksum() -> None:
    parsed = json.loads(SPEC_SAMPLE)
    assert canonicalize(parsed) == SPEC_CANONICAL
    assert checksum(parsed) == "6a92d155a59bf2eecbd4b4ec7fd1f875"


def test_spec_rule_examples() -> None:
    assert canonicalize({"a": 10, "b": {"y": None, "x": "https://delta.io"}}) == (
        '"a"=10,"b"+"x"="https%3A%2F%2Fdelta.io","b"+"y"=null'
    )
    assert canonicalize([None, "hi ho", 2.71]) == '0=null,1="hi%20ho",2=2.71'
    assert canonicalize({"k1": "v1", "checksum": "<anything>", "k3": 23}) == '"k1"="v1","k3"=23'
    assert canonicalize({"t": True, "f": False}) == '"f"=false,"t"=true'


def test_url_encoding_is_strict() -> None:
    # unreserved kept, everything else %XX in uppercase over UTF-8, including in keys
    assert canonicalize({"a-._~Z9": ">é/ +*"}) == '"a-._~Z9"="%3E%C3%A9%2F%20%2B%2A"'
    assert canonicalize({"k y": 1}) == '"k%20y"=1'


def test_paths_sort_by_bytes_so_index_10_precedes_2() -> None:
    text = canonicalize({"a": list(range(11))})
    paths = [pair.split("=")[0] for pair in text.split(",")]
    assert paths[:4] == ['"a"+0', '"a"+1', '"a"+10', '"a"+2']


def test_nested_checksum_key_is_not_ignored() -> None:
    assert canonicalize({"x": {"checksum": "c"}}) == '"x"+"checksum"="c"'


def test_number_keeps_its_written_form_when_parsed() -> None:
    # The digest is over "1E+2" as written, not over Python's re-rendering "100.0".
    digest = hashlib.md5(b'"ratio"=1E+2,"size"=2,"version"=1').hexdigest()
    raw = f'{{"version":1,"size":2,"ratio":1E+2,"checksum":"{digest}"}}'.encode()
    parsed = parse_last_checkpoint(raw, "/t/_delta_log/_last_checkpoint")
    assert parsed.version == 1
    assert parsed.model_extra == {"ratio": 100.0}


def test_render_then_parse_round_trip() -> None:
    model = LastCheckpoint(
        version=10,
        size=13,
        parts=2,
        sizeInBytes=14800,
        numOfAddFiles=1,
        checkpointSchema={"type": "struct", "fields": []},
        tags={"k": "v"},
    )
    raw = render_last_checkpoint(model)
    body = json.loads(raw)
    assert body["checksum"] == checksum(body)
    assert set(body) == {
        "version",
        "size",
        "parts",
        "sizeInBytes",
        "numOfAddFiles",
        "checkpointSchema",
        "tags",
        "checksum",
    }
    again = parse_last_checkpoint(raw, "mem://_last_checkpoint")
    assert again.version == 10 and again.parts == 2 and again.size_in_bytes == 14800
    assert again.model_extra == {"tags": {"k": "v"}}
    # rendering a parsed file replaces a stale checksum
    assert json.loads(render_last_checkpoint(again))["checksum"] == body["checksum"]


def test_minimal_pointer_without_checksum() -> None:
    parsed = parse_last_checkpoint(b'{"version":3,"size":10}', "loc")
    assert (parsed.version, parsed.size, parsed.parts, parsed.checksum) == (3, 10, None, None)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "is empty"),
        (b"   \n", "is empty"),
        (b'{"version":1,', "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b'{"version":1,"size":2,"version":3}', "duplicate key 'version'"),
        (b'{"version":1,"size":2,"x":{"a":1,"a":2}}', "duplicate key 'a'"),
        (b'{"version":1,"size":NaN}', "not valid JSON"),
        (b"[1,2]", "not an object"),
        (b'{"size":2}', "'version'"),
        (b'{"version":1,"size":2,"checksum":"00000000000000000000000000000000"}', "checksum mismatch"),
        (b'{"version":1,"size":2,"checksum":5}', "not a string"),
    ],
)
def test_bad_pointers_are_corrupt_and_named(raw: bytes, message: str) -> None:
    location = "s3://b/t/_delta_log/_last_checkpoint"
    with pytest.raises(CorruptFile, match=message) as info:
        parse_last_checkpoint(raw, location)
    assert location in str(info.value)


def test_tampered_value_fails_the_checksum() -> None:
    raw = render_last_checkpoint(LastCheckpoint(version=10, size=13))
    with pytest.raises(CorruptFile, match="checksum mismatch"):
        parse_last_checkpoint(raw.replace(b'"version":10', b'"version":11'), "loc")


# --- real files ------------------------------------------------------------------------------


def _real_pointers() -> list[Path]:
    return sorted(TESTDATA.glob("*/*/_delta_log/_last_checkpoint"))


@pytest.mark.parametrize("path", _real_pointers(), ids=lambda p: p.parent.parent.name)
def test_real_pointers_parse_and_validate(path: Path) -> None:
    raw = path.read_bytes()
    parsed = parse_last_checkpoint(raw, str(path))
    body = json.loads(raw)
    assert parsed.version == body["version"]
    if "checksum" in body:
        assert checksum(body) == body["checksum"]
        # rendering the model loses nothing the checksum covers
        assert json.loads(render_last_checkpoint(parsed))["checksum"] == body["checksum"]


def test_table_with_deletion_logs_carries_a_valid_checksum() -> None:
    path = TESTDATA / "delta-rs" / "table_with_deletion_logs" / "_delta_log" / "_last_checkpoint"
    parsed = parse_last_checkpoint(path.read_bytes(), str(path))
    assert parsed.checksum == "70106c08f4f476c901a8e97cd5c36265"
    assert (parsed.version, parsed.size, parsed.num_of_add_files) == (20, 5, 1)
    assert parsed.checkpoint_schema is not None


def test_old_delta_rs_snake_case_size_in_bytes_is_accepted() -> None:
    path = TESTDATA / "delta-rs" / "table_failed_last_checkpoint_update" / "_delta_log" / "_last_checkpoint"
    parsed = parse_last_checkpoint(path.read_bytes(), str(path))
    assert parsed.version == 1 and parsed.size_in_bytes == 23521


@pytest.fixture(scope="module")
def kernel_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    archives = sorted((TESTDATA / "delta-kernel").glob("*.tar.zst"))
    assert archives, f"no golden tables in {TESTDATA / 'delta-kernel'}"
    target = tmp_path_factory.mktemp("kernel")
    for archive in archives:
        command = ["tar", "--zstd", "-xf", str(archive), "-C", str(target)]
        result = subprocess.run(command, capture_output=True)
        if result.returncode != 0:
            pytest.skip(f"cannot unpack {archive.name}")
    return target


def test_kernel_golden_pointers(kernel_tables: Path) -> None:
    pointers = sorted(kernel_tables.glob("*/delta/_delta_log/_last_checkpoint"))
    validated = 0
    for path in pointers:
        if path.parent.parent.parent.name == "corrupted-last-checkpoint-kernel":
            continue
        parsed = parse_last_checkpoint(path.read_bytes(), str(path))
        validated += parsed.checksum is not None
    assert validated >= 6


def test_kernel_corrupted_pointer_is_an_empty_file(kernel_tables: Path) -> None:
    path = kernel_tables / "corrupted-last-checkpoint-kernel" / "delta" / "_delta_log" / "_last_checkpoint"
    assert path.read_bytes() == b""
    with pytest.raises(CorruptFile, match="is empty") as info:
        parse_last_checkpoint(path.read_bytes(), str(path))
    assert str(path) in str(info.value)
