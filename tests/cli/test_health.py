"""``lakeops health`` (issue 36, item 2): every registered table's verdict observed now, for the on-call
engineer outside the Dagster UI — a Delta table written by delta-rs, an Iceberg table of PyIceberg's SQL
catalog, an Icechunk repository and a table that is gone, in one registry. The verdicts are the ones the
Dagster checks give (same signals, same thresholds); a run of ``lakeops compact`` shows as the table's
last compaction and clears its warning; ``--html`` writes a page with each table's plots."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from icechunk_repos import build_history
from lakeops_cli import run_json
from pyiceberg_tables import small_file_table

from lakeops.storage import open_storage
from spark_jobs.cli import main as lakeops


def _registry(root: Path) -> Path:
    events, arrays = root / "events", root / "arrays"
    for i in range(30):
        write_deltalake(str(events), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    build_history(open_storage(str(arrays)), str(arrays), commits=4)
    (root / "sql").mkdir()
    orders = small_file_table(root / "sql", appends=3, rows=5)
    registry = root / "lakeops.yaml"
    registry.write_text(
        f"""
tables:
  - name: events
    location: {events}
    compaction: {{min_input_files: 2}}
    checkpoint: {{interval: 100}}
    health: {{small_files: {{warn: 20}}}}
  - name: orders
    catalog: {{uri: "{orders.catalog_uri}"}}
    identifier: {orders.identifier}
  - name: arrays
    location: {arrays}
    compaction: {{small_file_trigger: 100}}
  - name: gone
    location: {root / "missing"}
    format: delta
"""
    )
    return registry


def test_every_table_gets_its_verdict_and_a_run_shows_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = _registry(tmp_path)
    health = run_json(capsys, "health", "--registry", str(registry))
    tables = {t["table"]: t for t in health["tables"]}
    assert [t["table"] for t in health["tables"]][:2] == ["gone", "events"]  # worst first
    assert (health["healthy"], health["warn"], health["error"]) == (2, 1, 1)

    gone = tables["gone"]
    assert (gone["status"], gone["severity"]) == ("error reading", "error") and "NotATable" in gone["error"]
    events = tables["events"]
    assert (events["format"], events["status"], events["severity"]) == ("delta", "needs compaction", "warn")
    assert (events["worst"], events["value"], events["threshold"]) == ("small_files", "30", "warn 20 / error 100")
    assert events["action"] == "run compaction" and events["last_runs"]["compaction"] is None
    assert {tables["orders"]["format"], tables["arrays"]["format"]} == {"iceberg", "icechunk"}
    assert tables["orders"]["status"] == tables["arrays"]["status"] == "healthy"
    assert "cdc" not in events["last_runs"]  # no CDC configured: no such operation to report

    assert lakeops(["compact", str(tmp_path / "events"), "--min-input-files", "2"]) == 0
    capsys.readouterr()
    after = {t["table"]: t for t in run_json(capsys, "health", "--registry", str(registry))["tables"]}
    assert after["events"]["status"] == "healthy" and after["events"]["last_runs"]["compaction"] is not None
    assert after["events"]["last_runs"]["compaction"] >= events["observed_at"]


def test_the_terminal_view_names_each_table_its_status_and_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "400")  # a wide terminal: one line per table
    registry = _registry(tmp_path)
    assert lakeops(["health", "--registry", str(registry)]) == 0
    lines = capsys.readouterr().out.splitlines()

    def row(table: str) -> list[str]:
        (line,) = [line for line in lines if re.match(rf"\W*{table}\s", line)]
        return [cell.strip() for cell in re.split(r"[│┃|]", line) if cell.strip()]

    events = row("events")
    assert events[:6] == ["events", "delta", "needs compaction (WARN)", "small_files", "30", "warn 20 / error 100"]
    assert events[6] == "run compaction"
    assert events[7] == "compaction never, checkpoint never, expiry never, orphans never"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", events[8])
    assert row("gone")[:3] == ["gone", "delta", "error reading (ERROR)"] and "NotATable" in row("gone")[3]
    order = [next(i for i, line in enumerate(lines) if re.match(rf"\W*{t}\s", line)) for t in ("gone", "events")]
    assert order == sorted(order)  # worst first


def test_html_writes_a_self_contained_page_with_plots(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = _registry(tmp_path)
    assert lakeops(["compact", str(tmp_path / "events"), "--min-input-files", "2"]) == 0
    capsys.readouterr()
    page = tmp_path / "health.html"
    report = run_json(capsys, "health", "--registry", str(registry), "--html", str(page))
    assert {t["table"] for t in report["tables"]} == {"events", "orders", "arrays", "gone"}
    text = page.read_text()
    assert text.count("<svg") == 3  # one figure per readable table; the gone one says why instead
    fetches = re.findall(r"<script|<link|<img|(?:src|href)=\"https?:|url\(https?:", text)
    assert fetches == []  # nothing to fetch: it opens offline
    assert '<section id="gone"><h2>gone</h2><p>NotATable' in text
    events = next(t for t in report["tables"] if t["table"] == "events")
    (run,) = events["runs"]
    assert (run["operation"], run["status"], run["files_before"], run["files_after"]) == (
        "compaction",
        "succeeded",
        30,
        1,
    )


def test_a_missing_registry_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert lakeops(["health", "--registry", str(tmp_path / "nope.yaml")]) == 2
    assert str(tmp_path / "nope.yaml") in capsys.readouterr().err


@pytest.mark.parametrize("under", ["no/such/dir", "a-file"], ids=["missing folder", "under a file"])
def test_an_html_path_that_cannot_be_written_is_named(
    under: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    registry = _registry(tmp_path)
    (tmp_path / "a-file").write_text("")
    target = tmp_path / under / "health.html"
    assert lakeops(["health", "--registry", str(registry), "--html", str(target)]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"InvalidArgument: --html {target}: cannot write the report" in err
    assert not (tmp_path / "no").exists()  # nothing half-written anywhere
