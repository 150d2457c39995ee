"""lakeops.arrays builds exactly what ``pa.array`` would, without importing pandas."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeops.arrays import int_array, lookup_array, string_array


@settings(deadline=None)  # the first pa.array call imports pandas
@given(st.lists(st.text()))
def test_strings_equal_pyarrows_conversion(values: list[str]) -> None:
    built = string_array(values)
    assert built.type == pa.string()
    assert built.equals(pa.array(values, type=pa.string()))


@pytest.mark.parametrize("type_", [pa.int8(), pa.int16(), pa.int32(), pa.int64()])
@settings(deadline=None)
@given(values=st.lists(st.integers(min_value=-128, max_value=127)))
def test_integers_equal_pyarrows_conversion(type_: pa.DataType, values: list[int]) -> None:
    assert int_array(values, type_).equals(pa.array(values, type=type_))


def test_only_signed_integers() -> None:
    with pytest.raises(TypeError, match="signed integers, not double"):
        int_array([1], pa.float64())


def test_building_imports_no_pandas() -> None:
    code = (
        "import sys; from lakeops.arrays import int_array, lookup_array, string_array; import pyarrow as pa; "
        "string_array(['a', 'é']); int_array(range(3), pa.int64()); print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


#: Text as ``os.fsdecode`` gives file names: any code point, lone surrogates (undecodable bytes) included.
_NAMES = st.text(st.characters(exclude_categories=()))


@settings(deadline=None)
@given(st.lists(st.none() | _NAMES))
def test_lookups_are_the_utf8_strings_and_nulls_for_the_rest(values: list[str | None]) -> None:
    def utf8(value: str | None) -> bool:
        return value is not None and not any(0xD800 <= ord(c) <= 0xDFFF for c in value)

    built = lookup_array(values)
    assert built.equals(pa.array([v if utf8(v) else None for v in values], type=pa.string()))
    assert built.null_count == sum(not utf8(v) for v in values)


def test_a_name_that_is_not_utf8_is_found_in_no_column() -> None:
    column = pa.array(["a.parquet", "\ufffd.parquet", "b"])
    asked = lookup_array([os.fsdecode(b"\xff.parquet"), "a.parquet", None])
    assert pc.is_in(asked, value_set=column).to_pylist() == [False, True, False]
    with pytest.raises(UnicodeEncodeError):
        string_array([os.fsdecode(b"\xff.parquet")])  # a builder's input must be UTF-8
