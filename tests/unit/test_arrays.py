"""lakeops.arrays builds exactly what ``pa.array`` would, without importing pandas."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakeops.arrays import int_array, string_array


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
        "import sys; from lakeops.arrays import int_array, string_array; import pyarrow as pa; "
        "string_array(['a', 'é']); int_array(range(3), pa.int64()); print('pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
