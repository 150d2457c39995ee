"""``run_operation``, the entry point Dagster uses: bad options are a clear ``InvalidArgument``
naming the table, the command and the option, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakeops.errors import InvalidArgument
from spark_jobs.operations import run_operation


def test_an_unknown_option_names_table_command_and_option(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument) as caught:
        run_operation("expire", str(tmp_path), {"older_than": "7d", "retain_lots": 3})
    assert str(caught.value) == f"{tmp_path}: lakeops expire: retain_lots: Extra inputs are not permitted"


def test_a_bad_value_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match=r": lakeops compact: min_input_files: Input should be a valid integer"):
        run_operation("compact", str(tmp_path), {"min_input_files": "many"})


def test_an_unknown_operation_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="unknown operation 'shrink'"):
        run_operation("shrink", str(tmp_path))
