"""The markers of a folder reach every test in it (``MARKERS_BY_PATH`` in tests/conftest.py), so that
``-m orchestration`` selects every Dagster test and ``-m "not integration"`` skips every integration
test, whether or not a module declares the marker itself."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PLUGIN = """
def pytest_collection_finish(session):
    for item in session.items:
        print("MARKS", item.nodeid, ",".join(sorted({m.name for m in item.iter_markers()})), sep="\\t")
"""


def _markers(tmp_path: Path, *paths: str) -> dict[str, set[str]]:
    """Test id -> the names of its markers, as a collection of ``paths`` sees them."""
    (tmp_path / "markers_probe.py").write_text(_PLUGIN)
    collect = ["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "markers_probe"]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *collect, *paths],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))},
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = [line.split("\t")[1:] for line in run.stdout.splitlines() if line.startswith("MARKS\t")]  # ids hold spaces
    return {nodeid: set(names.split(",")) for nodeid, names in lines}


def test_each_folder_marks_every_test_in_it(tmp_path: Path) -> None:
    # Every Dagster test; of the other folders, modules that declare no marker and one that declares another.
    spark = ["tests/spark/test_spark_tasks.py", "tests/spark/test_orchestration_partitions.py"]
    integration = ["tests/integration/test_deploy_files.py", "tests/integration/test_s3_endpoint.py"]
    markers = _markers(tmp_path, "tests/orchestration", *spark, *integration)
    by_folder: dict[str, list[set[str]]] = {}
    for nodeid, names in markers.items():
        by_folder.setdefault(nodeid.split("/")[1], []).append(names)
    assert set(by_folder) == {"orchestration", "spark", "integration"}
    for folder, tests in by_folder.items():
        assert len(tests) > 10 and all(folder in names for names in tests), folder
    dagster_on_spark = [names for test, names in markers.items() if test.startswith("tests/spark/test_orchestration_")]
    assert dagster_on_spark and all({"spark", "orchestration"} <= names for names in dagster_on_spark)
    # Beside the folder's marker, a module's own stay (dagster dev's checks are long, the endpoint's on S3).
    for module, marker in (("tests/orchestration/test_ui.py", "long"), ("tests/integration/test_s3_endpoint.py", "s3")):
        tests = [names for nodeid, names in markers.items() if nodeid.startswith(module + "::")]
        assert tests and all(marker in names for names in tests), module
