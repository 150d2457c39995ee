"""Location normalisation and root confinement (lakeops.storage.uri)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeops.deletion import Candidate
from lakeops.errors import InvalidArgument, LakeopsError, OutsideRoot
from lakeops.storage import StorageOptions, open_storage
from lakeops.storage.local import LocalStorage
from lakeops.storage.s3 import S3Storage
from lakeops.storage.uri import (
    is_within,
    is_within_normalized,
    join,
    normalize,
    relative_to,
    require_within,
    resolve,
    scheme,
    unquote_utf8,
)


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("/tmp/t", "/tmp/t"),
        ("/tmp/t/", "/tmp/t"),
        ("/tmp//t/./x/../y", "/tmp/t/y"),
        ("//tmp/t", "/tmp/t"),
        ("/", "/"),
        ("file:///tmp/t/", "/tmp/t"),
        ("file:/tmp/t", "/tmp/t"),  # Hadoop / Spark spelling
        ("file://localhost/tmp/t", "/tmp/t"),
        ("file:///tmp/a%20b/c%25d", "/tmp/a b/c%d"),
        ("FILE:///tmp/t", "/tmp/t"),
        ("/tmp/a%20b", "/tmp/a%20b"),  # plain paths are not URIs: no decoding
        ("s3://bucket/key/", "s3://bucket/key"),
        ("s3a://bucket/key", "s3://bucket/key"),
        ("s3n://bucket/a/b//", "s3://bucket/a/b"),
        ("S3A://bucket/k", "s3://bucket/k"),
        ("s3://bucket", "s3://bucket"),
        ("s3://bucket/", "s3://bucket"),
        ("s3://bucket/a%20b", "s3://bucket/a%20b"),  # S3 keys are literal
    ],
)
def test_normalize(location: str, expected: str) -> None:
    assert normalize(location) == expected


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("file:///tmp/wh/data/s=a%2520b/f.parquet", "/tmp/wh/data/s=a%2520b/f.parquet"),
        ("file:/tmp/wh/data/s=%C3%BC/", "/tmp/wh/data/s=%C3%BC"),  # Hadoop spelling
        ("file://localhost/tmp/100%/x+y z:w", "/tmp/100%/x+y z:w"),
        ("file:///tmp/%ff/./a/../b", "/tmp/%ff/b"),  # not an escape at all: still no error
        ("/tmp/s=100%25", "/tmp/s=100%25"),
        ("s3a://bucket/s=a%2520b/", "s3://bucket/s=a%2520b"),
    ],
)
def test_normalize_literal_keeps_percent_signs(location: str, expected: str) -> None:
    """Iceberg paths are literal strings: PyIceberg writes a directory named ``s=%C3%BC``."""
    assert normalize(location, literal=True) == expected


def test_literal_and_decoded_differ_only_for_file_uris_with_escapes() -> None:
    for location in ("/tmp/a%20b", "s3://b/a%20b", "file:///tmp/plain"):
        assert normalize(location, literal=True) == normalize(location)
    assert normalize("file:///tmp/a%20b", literal=True) == "/tmp/a%20b" != normalize("file:///tmp/a%20b")


@pytest.mark.parametrize(("location", "needle"), [("file://otherhost/x", "otherhost"), ("file:x%20", "not absolute")])
def test_normalize_literal_rejects_like_normalize(location: str, needle: str) -> None:
    with pytest.raises(InvalidArgument, match=needle):
        normalize(location, literal=True)


def test_local_storage_refuses_a_file_uri_whose_escapes_are_ambiguous(tmp_path: Path) -> None:
    """Whether ``%2520`` in a ``file:`` URI is an escape depends on the format that wrote it, so the
    storage takes canonical paths and refuses to guess; a plain path is taken literally."""
    literal = tmp_path / "s=a%2520b" / "f.parquet"
    literal.parent.mkdir()
    literal.write_bytes(b"live")
    storage = LocalStorage()
    for call in (storage.read, storage.stat, storage.exists, lambda p: storage.delete_many([p])):
        with pytest.raises(InvalidArgument, match="percent"):
            call(f"file://{literal}")
    assert storage.read(str(literal)) == b"live" and literal.exists()
    assert [f.path for f in storage.list(f"file://{tmp_path}")] == [str(literal)]  # no escapes: fine
    with pytest.raises(InvalidArgument, match="percent"):
        open_storage(f"file://{literal.parent}")
    with pytest.raises(InvalidArgument, match="percent"):  # a delete batch would decode it in the task
        Candidate(path=f"file://{literal}", size=4, kind="untracked")
    assert Candidate(path=str(literal), size=4, kind="untracked").path == str(literal)


def test_normalize_relative_path_is_made_absolute() -> None:
    assert normalize("some/dir/") == os.path.join(os.getcwd(), "some/dir")


def test_s3_aliases_are_equal() -> None:
    assert normalize("s3a://b/t/") == normalize("s3n://b/t") == normalize("s3://b/t")


@pytest.mark.parametrize(
    ("location", "needle"),
    [
        ("", "empty"),
        ("gs://bucket/x", "'gs'"),
        ("file://otherhost/tmp/x", "otherhost"),
        ("s3://", "no bucket"),
        ("s3:///key", "no bucket"),
        ("file:///tmp/%ff", "UTF-8"),
    ],
)
def test_normalize_rejects(location: str, needle: str) -> None:
    with pytest.raises(InvalidArgument, match=needle):
        normalize(location)


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("/x", "file"),
        ("rel/x", "file"),
        ("file:/x", "file"),
        ("file:///x", "file"),
        ("s3://b/k", "s3"),
        ("s3a://b/k", "s3"),
        ("s3n://b", "s3"),
        ("GS://b/k", "gs"),
    ],
)
def test_scheme(location: str, expected: str) -> None:
    assert scheme(location) == expected


def test_join() -> None:
    assert join("s3a://b/t/", "_delta_log", "00.json") == "s3://b/t/_delta_log/00.json"
    assert join("s3://b", "x/") == "s3://b/x"
    assert join("file:///tmp/t", "a/b") == "/tmp/t/a/b"
    assert join("/tmp/t", "", "a") == "/tmp/t/a"
    assert join("/", "a") == "/a"


@pytest.mark.parametrize("part", ["/etc/passwd", "s3://other/x", "file:///etc"])
def test_join_refuses_absolute_parts(part: str) -> None:
    with pytest.raises(InvalidArgument, match="cannot join"):
        join("/tmp/t", part)


@pytest.mark.parametrize(
    ("root", "path", "expected"),
    [
        ("/a/b", "/a/b/c", True),
        ("/a/b", "/a/b", True),
        ("/a/b/", "file:///a/b/c%20d", True),
        ("/a/b", "/a/bc", False),
        ("/a/b", "/a/bc/d", False),
        ("/a/b", "/a", False),
        ("/a/b", "/a/b/../c", False),
        ("/a/b", "/a/b/c/../../b/d", True),
        ("/", "/anything", True),
        ("s3://b/t", "s3a://b/t/x", True),
        ("s3a://b/t/", "s3://b/t/x/y", True),
        ("s3://b/t", "s3://b/tx/y", False),
        ("s3://b/t", "s3://b2/t/x", False),
        ("s3://b/t", "s3://b/t/../x", False),
        ("s3://b/t", "s3://b/t/./x", False),
        ("s3://b", "s3://b/anything", True),
        ("s3://b/t", "/b/t/x", False),
        ("/b/t", "s3://b/t/x", False),
    ],
)
def test_is_within(root: str, path: str, expected: bool) -> None:
    assert is_within(root, path) is expected


def test_require_within_names_both() -> None:
    assert require_within("s3a://b/t", "s3://b/t/x/") == "s3://b/t/x"
    with pytest.raises(OutsideRoot) as info:
        require_within("/data/table", "/data/table2/part-0.parquet")
    assert "/data/table2/part-0.parquet" in str(info.value)
    assert "/data/table'" in str(info.value)
    assert isinstance(info.value, LakeopsError)


def test_relative_to() -> None:
    assert relative_to("s3a://b/t/", "s3://b/t/_delta_log/0.json") == "_delta_log/0.json"
    assert relative_to("/t", "/t") == ""
    assert relative_to("/", "/x/y") == "x/y"
    assert relative_to("s3://b", "s3://b/x") == "x"
    with pytest.raises(OutsideRoot):
        relative_to("/t", "/tt/x")


def test_open_storage_by_scheme_confined_to_the_location() -> None:
    assert isinstance(open_storage("/tmp/x").inner, LocalStorage)
    assert isinstance(open_storage("file:///tmp/x").inner, LocalStorage)
    assert open_storage("file:///tmp/x/", also=["/data"]).roots == ("/tmp/x", "/data")
    for location in ("s3://b/t", "s3a://b/t", "s3n://b/t"):
        assert isinstance(open_storage(location, StorageOptions(region="us-east-1")).inner, S3Storage)
    with pytest.raises(InvalidArgument, match="'abfss'"):
        open_storage("abfss://c@acct.dfs.core.windows.net/t")


def test_storage_options_are_small_frozen_json() -> None:
    options = StorageOptions(endpoint_url="http://127.0.0.1:9000", region="eu-west-1")
    assert StorageOptions.model_validate_json(options.model_dump_json()) == options
    assert hash(options) == hash(StorageOptions.model_validate_json(options.model_dump_json()))
    with pytest.raises(ValueError):
        StorageOptions(endpoint_url="127.0.0.1:9000")
    with pytest.raises(ValueError):
        StorageOptions.model_validate({"secret_access_key": "x"})


@settings(deadline=None, max_examples=400)
@given(
    base=st.sampled_from(["/tmp/t", "/tmp/t/", "/", "s3://b/t", "s3a://b/t/", "relative/root"]),
    segments=st.lists(
        st.one_of(
            st.sampled_from([".", "..", "", "a%20b", "x:y", "%2F", "day=2024-01-01", ".hidden", "..a"]),
            st.text(alphabet="ab.%:=é_ -", min_size=1, max_size=6),
        ),
        min_size=1,
        max_size=4,
    ),
)
def test_resolve_agrees_with_the_general_route_for_every_relative_path(base: str, segments: list[str]) -> None:
    """``resolve``'s shortcut for plain relative paths gives what decoding (escapes read as UTF-8) and
    joining segment by segment gives (``join``), errors included."""
    path = "/".join(segments)
    if path.startswith("/") or "://" in path or path.startswith("file:"):
        return
    outcomes = []
    for route in (lambda: resolve(base, path), lambda: join(base, *(unquote_utf8(p, path) for p in path.split("/")))):
        try:
            outcomes.append(route())
        except LakeopsError as exc:
            outcomes.append(type(exc).__name__)
    assert outcomes[0] == outcomes[1]


@settings(deadline=None, max_examples=400)
@given(
    segments=st.lists(
        st.one_of(st.sampled_from([".", "..", "", ".hidden", "..a", "a."]), st.text(alphabet="ab./%:é -", max_size=5)),
        max_size=5,
    ),
    trailing=st.booleans(),
)
def test_normalize_keeps_what_abspath_would_keep(segments: list[str], trailing: bool) -> None:
    """The shortcut for paths already canonical returns what the general route (``abspath``) returns."""
    path = "/" + "/".join(segments) + ("/" if trailing else "")
    expected = os.path.abspath(path)
    assert normalize(path) == ("/" + expected.lstrip("/") if expected.startswith("//") else expected)


def _within_by_segments(root: str, path: str) -> bool:
    """The rule as the protocol states it: same scheme and bucket, the root's segments first, no dot
    segment below it (local paths drop empty segments)."""

    def split(location: str) -> tuple[str, list[str]]:
        if location.startswith("s3://"):
            bucket, _, key = location[5:].partition("/")
            return f"s3:{bucket}", key.split("/") if key else []
        return "file", [s for s in location.split("/") if s]

    (r_where, r_parts), (p_where, p_parts) = split(root), split(path)
    below = p_parts[len(r_parts) :]
    return r_where == p_where and p_parts[: len(r_parts)] == r_parts and not {".", ".."} & set(below)


_SEGMENT = st.one_of(
    st.sampled_from([".", "..", "a", "ab", "b", ".h", "x=1"]), st.text(alphabet="ab.", min_size=1, max_size=3)
)


@settings(deadline=None, max_examples=500)
@given(
    base=st.sampled_from(["/", "s3://b", "s3://bc", "s3://b/k"]),
    root=st.lists(_SEGMENT, max_size=3),
    below=st.lists(_SEGMENT, max_size=3),
    other=st.sampled_from(["/", "s3://b", "s3://bc", "s3://b/k"]),
)
def test_is_within_normalized_agrees_with_the_segment_rule(
    base: str, root: list[str], below: list[str], other: str
) -> None:
    """The string-prefix check gives the segment comparison's verdict on normalised spellings (local paths
    as ``normalize`` leaves them; S3 keys literal, dot segments included)."""

    def spell(start: str, parts: list[str]) -> str:
        location = "/".join([start.rstrip("/"), *parts]) if parts else start
        return normalize(location) if start == "/" else location

    root_location = spell(base, root)
    for path in (spell(base, [*root, *below]), spell(other, [*root, *below]), spell(other, below)):
        expected = _within_by_segments(root_location, path)
        assert is_within_normalized(root_location, path) == expected, (root_location, path)
