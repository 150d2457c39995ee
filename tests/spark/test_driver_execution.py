"""Plans run in threads on the driver, without Spark, when no master is asked for (``SparkSettings.run_units``).

The driver runs are real ``lakeops`` processes with a clean environment (no master, no session), and
each one reports whether it imported pyspark: a process that never imported pyspark cannot have
started a JVM. Their outcome is compared with the same operation on Spark (this process's session:
an active session keeps plans on Spark) on an identical table. Only one test starts Spark in a child
process: the one where a size cap (``$LAKEOPS_DRIVER_MAX_BYTES``) sends a plan there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pydantic import BaseModel
from pyiceberg_tables import small_file_table

from lakeops.executors import TaskFailed, run_on_driver
from spark_jobs.cli import main as lakeops
from spark_jobs.spark_settings import SparkSettings

ROOT = Path(__file__).resolve().parents[2]

#: Runs the CLI, then says on stderr whether anything imported pyspark.
_CLI = (
    "import sys\n"
    "from spark_jobs.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "print('pyspark imported:', 'pyspark' in sys.modules, file=sys.stderr)\n"
    "sys.exit(code)\n"
)

#: The report figures a driver run and a Spark run of the same plan must share.
_COMPACTION_FIGURES = (
    "live_files_before",
    "groups",
    "files_removed",
    "bytes_removed",
    "files_added",
    "rows_read",
    "rows_written",
    "live_files_after",
    "committed_version",
    "commits",
)


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without any master, Spark or lakeops setting, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAKEOPS_", "PYSPARK_", "SPARK_"))}
    return {**env, **extra}


def _child_lakeops(*argv: str, **env: str) -> tuple[int, dict[str, Any] | None, str]:
    """``lakeops ARGV --json`` in a child process: exit code, report (None on failure), stderr."""
    result = subprocess.run(
        [sys.executable, "-c", _CLI, *argv, "--json"],
        env=_clean_env(**env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(result.stdout) if result.returncode == 0 else None
    return result.returncode, report, result.stderr


def _on_driver(*argv: str) -> tuple[dict[str, Any], str]:
    code, report, err = _child_lakeops(*argv)
    assert code == 0, err
    assert report is not None
    assert "on the driver" in err and "pyspark imported: False" in err, err
    return report, err


def _on_spark(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, Any]:
    code = lakeops([*argv, "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "on Spark" in captured.err and "on the driver" not in captured.err, captured.err
    report: dict[str, Any] = json.loads(captured.out)
    return report


def _small_delta_table(location: str, appends: int = 30, **configuration: str) -> None:
    for i in range(appends):
        rows = pa.table(
            {
                "id": pa.array(range(i * 5, i * 5 + 5), pa.int64()),
                "name": [f"n{j % 7}" for j in range(5)],
                "day": [f"2026-11-0{1 + i % 3}"] * 5,
            }
        )
        write_deltalake(location, rows, mode="append", partition_by=["day"], configuration=configuration or None)


def _rows(location: str) -> list[dict[str, Any]]:
    return sorted(DeltaTable(location).to_pyarrow_table().to_pylist(), key=lambda row: repr(sorted(row.items())))


def _parquet_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*.parquet") if "_delta_log" not in p.parts}


# --- the same outcome as on Spark --------------------------------------------------------------------


def test_delta_compaction_on_the_driver_matches_spark(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    driver, on_spark = str(tmp_path / "driver"), str(tmp_path / "spark")
    _small_delta_table(driver)
    shutil.copytree(driver, on_spark)
    before = _rows(driver)

    report, err = _on_driver("compact", driver)
    expected = _on_spark(capsys, "compact", on_spark)

    assert "rewriting 3 groups on the driver" in err and "3/3 units done" in err
    assert _rows(driver) == _rows(on_spark) == before
    assert len(DeltaTable(driver).file_uris()) == 3
    assert {k: report[k] for k in _COMPACTION_FIGURES} == {k: expected[k] for k in _COMPACTION_FIGURES}
    assert report["files_removed"] == 30 and report["rows_written"] == 150


def test_delta_cdc_on_the_driver_matches_spark(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    driver, on_spark = str(tmp_path / "driver"), str(tmp_path / "spark")
    _small_delta_table(driver, appends=4, **{"delta.enableChangeDataFeed": "true"})
    DeltaTable(driver).update(predicate="id < 3", updates={"name": "'renamed'"})
    DeltaTable(driver).delete("id >= 18")
    shutil.copytree(driver, on_spark)

    report, err = _on_driver("cdc", driver, "--from", "1", "--output", str(tmp_path / "changes-driver"))
    expected = _on_spark(capsys, "cdc", on_spark, "--from", "1", "--output", str(tmp_path / "changes-spark"))

    assert "on the driver" in err
    changes = _rows(str(tmp_path / "changes-driver"))
    # Commit timestamps are the source's (copied), so the two outputs are equal row for row.
    assert changes == _rows(str(tmp_path / "changes-spark"))
    kinds = [row["_change_type"] for row in changes]
    assert kinds.count("update_preimage") == kinds.count("update_postimage") == 3 and kinds.count("delete") == 2
    figures = {k: v for k, v in report.items() if k.startswith("rows_") or k in ("committed_version", "source_files")}
    assert figures == {k: expected[k] for k in figures} and figures["committed_version"] == 0


def test_iceberg_compaction_on_the_driver_matches_spark(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    driver = small_file_table(tmp_path / "driver", "identity", appends=6, rows=20)
    on_spark = small_file_table(tmp_path / "spark", "identity", appends=6, rows=20)
    before = driver.rows()
    assert on_spark.rows() == before

    report, _ = _on_driver("compact", driver.identifier, "--catalog-uri", driver.catalog_uri)
    expected = _on_spark(capsys, "compact", on_spark.identifier, "--catalog-uri", on_spark.catalog_uri)

    assert driver.rows() == on_spark.rows() == before
    figures = tuple(k for k in _COMPACTION_FIGURES if k != "committed_version") + ("rows_deleted",)
    assert {k: report.get(k) for k in figures} == {k: expected.get(k) for k in figures}
    current = driver.reload().current_snapshot()
    assert current is not None and current.summary is not None and current.summary.operation.value == "replace"
    assert report["files_added"] < report["files_removed"]


# --- failures ----------------------------------------------------------------------------------------


class _Unit(BaseModel):
    n: int


class _Out(BaseModel):
    square: int


def test_results_come_in_unit_order_whatever_order_units_finish() -> None:
    last_done = threading.Event()

    def task(unit: _Unit) -> _Out:
        if unit.n == 0:  # the first unit finishes last
            assert last_done.wait(timeout=60)
        if unit.n == 3:
            last_done.set()
        return _Out(square=unit.n * unit.n)

    seen: list[tuple[int, int]] = []
    results = run_on_driver(
        [_Unit(n=n) for n in range(4)], task, _Out, threads=4, progress=lambda d, t: seen.append((d, t))
    )
    assert [r.square for r in results] == [0, 1, 4, 9]
    assert seen[-1] == (4, 4)


def test_a_failing_unit_raises_task_failed_with_the_completed_results() -> None:
    def task(unit: _Unit) -> _Out:
        if unit.n in (2, 4):
            raise ValueError(f"unit {unit.n} is broken")
        return _Out(square=unit.n * unit.n)

    with pytest.raises(TaskFailed) as failure:
        run_on_driver([_Unit(n=n) for n in range(6)], task, _Out, threads=2, description="squares")
    error = failure.value
    assert error.index == 2 and error.failed == (2, 4)
    assert error.error_type == "ValueError" and error.error_message == "unit 2 is broken"
    assert error.completed == {n: _Out(square=n * n) for n in (0, 1, 3, 5)}
    assert "squares: unit 2 failed: ValueError: unit 2 is broken (1 more of 6 units failed)" in str(error)
    assert error.remote_traceback is not None and "unit 2 is broken" in error.remote_traceback


def test_failed_compaction_on_the_driver_leaves_no_files_behind(tmp_path: Path) -> None:
    location = tmp_path / "t"
    _small_delta_table(str(location))
    broken = sorted((location / "day=2026-11-02").glob("*.parquet"))[0]
    broken.write_bytes(b"not parquet at all")
    files = _parquet_files(location)
    version = DeltaTable(str(location)).version()

    code, _, err = _child_lakeops("compact", str(location))

    assert code == 1 and "on the driver" in err and "pyspark imported: False" in err, err
    assert "TaskFailed" in err and "unit 1 failed" in " ".join(err.split()), err
    # The two other groups were rewritten, then their output deleted: nothing was committed.
    assert _parquet_files(location) == files
    assert DeltaTable(str(location)).version() == version


# --- where a plan runs ---------------------------------------------------------------------------------

#: Prints SparkSettings.runs_on_driver for each case; run in a child process with no Spark session.
_RULE = """
import json, os, sys
from lakeops.errors import InvalidArgument
from spark_jobs.spark_settings import SparkSettings

GiB = 1 << 30
def decide(settings=SparkSettings(), units=3, work_bytes=None, **env):
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        return settings.runs_on_driver(units, work_bytes)
    except InvalidArgument as exc:
        return str(exc)
    finally:
        os.environ.clear()
        os.environ.update(saved)

print(json.dumps({
    "small plan": decide(work_bytes=100 << 20),
    "large plan with bytes": decide(work_bytes=1024 * GiB),
    "at the env cap": decide(work_bytes=GiB, LAKEOPS_DRIVER_MAX_BYTES=str(GiB)),
    "above the env cap": decide(work_bytes=GiB + 1, LAKEOPS_DRIVER_MAX_BYTES=str(GiB)),
    "16 units without bytes": decide(units=16),
    "17 units without bytes": decide(units=17),
    "many small units with bytes": decide(units=5000, work_bytes=GiB),
    "master given": decide(SparkSettings(master="local[2]"), work_bytes=1),
    "master from the environment": decide(work_bytes=1, LAKEOPS_SPARK_MASTER="local[2]"),
    "master in conf": decide(SparkSettings(conf={"spark.master": "local[2]"}), work_bytes=1),
    "under spark-submit": decide(work_bytes=1, PYSPARK_GATEWAY_PORT="1234"),
    "env 0: always Spark": decide(work_bytes=1, LAKEOPS_DRIVER_MAX_BYTES="0"),
    "env 0 for unit plans too": decide(units=1, LAKEOPS_DRIVER_MAX_BYTES="0"),
    "env cap as a size": decide(work_bytes=3 * GiB, LAKEOPS_DRIVER_MAX_BYTES="2GB"),
    "units env 0": decide(units=1, LAKEOPS_DRIVER_MAX_UNITS="0"),
    "units env raised": decide(units=500, LAKEOPS_DRIVER_MAX_UNITS="1000"),
    "field wins over env": decide(SparkSettings(driver_max_bytes=0), work_bytes=1, LAKEOPS_DRIVER_MAX_BYTES="4GB"),
    "bad env": decide(work_bytes=1, LAKEOPS_DRIVER_MAX_BYTES="lots"),
    "pyspark imported": "pyspark" in sys.modules,
}))
"""


def test_where_a_plan_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _RULE], env=_clean_env(), cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    decided = json.loads(result.stdout)
    bad_env = decided.pop("bad env")
    assert decided == {
        "small plan": True,
        "large plan with bytes": True,
        "at the env cap": True,
        "above the env cap": False,
        "16 units without bytes": True,
        "17 units without bytes": False,
        "many small units with bytes": True,
        "master given": False,
        "master from the environment": False,
        "master in conf": False,
        "under spark-submit": False,
        "env 0: always Spark": False,
        "env 0 for unit plans too": False,
        "env cap as a size": False,
        "units env 0": False,
        "units env raised": True,
        "field wins over env": False,
        "pyspark imported": False,
    }
    assert "$LAKEOPS_DRIVER_MAX_BYTES" in bad_env and "'lots'" in bad_env


def test_an_active_session_keeps_plans_on_spark(spark: Any) -> None:
    assert not SparkSettings().runs_on_driver(1, 1)


def test_a_plan_above_the_size_cap_starts_spark(tmp_path: Path) -> None:
    """The one child process here that starts Spark: a cap below the plan's bytes."""
    location = str(tmp_path / "t")
    _small_delta_table(location)
    before = _rows(location)

    code, report, err = _child_lakeops("compact", location, LAKEOPS_DRIVER_MAX_BYTES="1KB")

    assert code == 0, err
    assert report is not None and report["files_removed"] == 30 and report["files_added"] == 3
    assert "on Spark (local[*])" in err and "on the driver" not in err and "pyspark imported: True" in err, err
    assert _rows(location) == before


#: Deletes one file per batch in ``sys.argv[1]`` (20 batches, more than DRIVER_DELETE_BATCHES) with the
#: default settings and prints where the deletes ran, what is left and whether pyspark was imported.
_DELETE = """
import io, json, os, sys
from rich.console import Console
from lakeops.deletion import Candidate, DeleteBatch
from lakeops.storage import StorageOptions
from spark_jobs.spark_settings import DRIVER_DELETE_BATCHES, SparkSettings

root = sys.argv[1]
names = sorted(os.listdir(root))
batches = [
    DeleteBatch(batch_id=i, table_root=root, storage=StorageOptions(),
                files=[Candidate(path=os.path.join(root, name), size=1, kind="test")])
    for i, name in enumerate(names)
]
out = io.StringIO()
done = SparkSettings().delete(batches, label="Deleting", description="test", progress=Console(file=out))
print(json.dumps({"batches": len(batches), "over": len(batches) > DRIVER_DELETE_BATCHES, "done": len(done),
                  "left": os.listdir(root), "progress": out.getvalue(), "pyspark": "pyspark" in sys.modules}))
"""


@pytest.mark.parametrize(("env", "on_driver"), [({}, True), ({"LAKEOPS_DRIVER_MAX_BYTES": "0"}, False)])
def test_many_deletion_batches_stay_on_the_driver_unless_spark_is_asked_for(
    tmp_path: Path, env: dict[str, str], on_driver: bool
) -> None:
    """Deleting is waiting on storage: with no master, threads do it without Spark's start-up at any
    number of batches; a driver cap of 0 still sends a large deletion to (local) Spark."""
    for i in range(20):
        (tmp_path / f"garbage-{i:02d}").write_bytes(b"x")
    result = subprocess.run(
        [sys.executable, "-c", _DELETE, str(tmp_path)],
        env=_clean_env(**env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["over"] and outcome["done"] == 20 and outcome["left"] == []
    assert ("on the driver" in outcome["progress"]) is on_driver, outcome["progress"]
    assert outcome["pyspark"] is not on_driver
