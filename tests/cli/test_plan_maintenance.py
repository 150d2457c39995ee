"""``lakeops plan-maintenance`` on a registry of real small tables of all three formats (a Delta
table written by delta-rs, an Iceberg table by PyIceberg, an Icechunk repository by lakeops' writer):
the plan ranks the table with the most small files first for compaction and says why, runs
nothing, and — once the tables' own runs are in their audit logs — predicts each compaction within
:data:`FACTOR` of what the run then takes (run through ``lakeops.api``)."""

from __future__ import annotations

import os
import random
import re
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from glue_tables import glue_table
from icechunk_repos import LINE, build_history
from lakeops_cli import run_json
from pyiceberg_tables import PyIcebergTable, batch, small_file_table
from registry_samples import REFUSED

from lakeops import api
from lakeops.audit import read_records
from lakeops.icechunk.writer import ChangeSet, commit
from lakeops.ops.options import CatalogOptions, CdcOptions, CheckpointOptions, CompactionOptions
from lakeops.planning.cost import work_of_run
from lakeops.storage import open_storage
from spark_jobs.cli import main as lakeops

#: How far a prediction learnt from the table's earlier runs may be from the run, either way. Runs of
#: these tables take tens of milliseconds, where a shared test machine's scheduling alone varies
#: durations by a factor of two or three.
#: Seconds predicted against seconds run: a stated factor wide enough for a loaded CI machine.
FACTOR = 10.0


def _delta_appends(location: Path, count: int, first: int = 0) -> None:
    for i in range(first, first + count):
        write_deltalake(
            str(location), pa.table({"id": pa.array(range(i * 50, i * 50 + 50), pa.int64())}), mode="append"
        )


def _icechunk_commits(root: str, count: int, seed: int) -> None:
    rng = random.Random(seed)
    storage = open_storage(root)
    for k in range(count):
        changes = ChangeSet().set_chunk("/data/line", (rng.randrange(LINE.shape[0]),), rng.randbytes(6))
        commit(storage, root, changes, message=f"more {k}")


@pytest.fixture
def estate(tmp_path: Path) -> dict[str, Any]:
    events, arrays = tmp_path / "events", tmp_path / "arrays"
    _delta_appends(events, 45)
    orders = small_file_table(tmp_path, appends=6)
    build_history(open_storage(str(arrays)), str(arrays), commits=12)
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        f"""
maintenance_budget: {{window: "0 1 * * *", core_minutes: 120}}
tables:
  - name: events
    location: {events}
    compaction: {{min_input_files: 2}}
  - name: orders
    catalog: {{uri: "{orders.catalog_uri}"}}
    identifier: {orders.identifier}
    compaction: {{min_input_files: 2}}
  - name: arrays
    location: {arrays}
    compaction: {{min_input_files: 2}}
"""
    )
    return {"registry": registry, "events": events, "orders": orders, "arrays": arrays}


def _plan(capsys: pytest.CaptureFixture[str], registry: Path) -> dict[str, Any]:
    return run_json(capsys, "plan-maintenance", "--registry", str(registry), "--budget", "120m")


def _compactions(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [d for d in plan["decisions"] if d["action"]["operation"] == "compaction"]


def test_ranks_the_table_with_most_small_files_first_and_runs_nothing(
    estate: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    version = DeltaTable(str(estate["events"])).version()
    plan = _plan(capsys, estate["registry"])
    compactions = _compactions(plan)
    assert [d["action"]["table"] for d in compactions] == ["events", "arrays", "orders"]
    first = compactions[0]
    assert first["chosen"] and first["benefit"]["files_removed"] == 45
    assert "45 small files in the table merge into 1: a full scan opens 44 fewer files" in first["reason"]
    assert first["cost"]["basis"] == "default"  # no run in the audit logs yet
    assert plan["budget_core_minutes"] == 120
    assert plan["predicted_core_minutes"] <= 120
    assert not plan["unreadable"]
    # A plan, not a run: the tables are as they were, and no audit record was written.
    assert DeltaTable(str(estate["events"])).version() == version
    assert read_records(str(estate["events"])) == []


def test_the_table_view_explains_each_decision(
    estate: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # one line per decision
    assert lakeops(["plan-maintenance", "--registry", str(estate["registry"])]) == 0
    out = capsys.readouterr().out
    ranks = re.findall(r"#(\d+) (\w+):compaction", out)
    assert [table for _, table in ranks] == ["events", "arrays", "orders"]
    assert "45 small files in the table merge" in out


def _compact(address: str, catalog: CatalogOptions, root: str) -> tuple[float, int]:
    """Run compaction as the plan would (``min_input_files`` of the registry) and return its
    audited duration and work in bytes, what the cost model learns from."""
    api.compact(address, CompactionOptions(**catalog.model_dump(), min_input_files=2))
    record = read_records(root)[-1]
    return record.duration_s, work_of_run("compaction", record.metrics)[0]


def test_estimates_learnt_from_earlier_runs_are_within_a_factor(
    estate: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    orders: PyIcebergTable = estate["orders"]
    catalog = CatalogOptions(catalog_uri=orders.catalog_uri)
    targets = {
        "events": (str(estate["events"]), CatalogOptions(), str(estate["events"])),
        "orders": (orders.identifier, catalog, orders.table.location().removeprefix("file://")),
        "arrays": (str(estate["arrays"]), CatalogOptions(), str(estate["arrays"])),
    }
    # Two rounds of compaction, each after new small files landed, as ingestion goes on; their runs are
    # audited. The first run in a process also pays its imports: the second corrects it half-way.
    for rounds in range(2):
        for target in targets.values():
            _compact(*target)
        _delta_appends(estate["events"], 30, first=45 + 30 * rounds)
        for i in range(5):
            orders.table.append(batch(1000 + rounds * 100 + i * 20, 20))
        _icechunk_commits(str(estate["arrays"]), 20, seed=9 + rounds)

    predicted = {d["action"]["table"]: d["cost"] for d in _compactions(_plan(capsys, estate["registry"]))}
    assert set(predicted) == set(targets)
    for name, (address, options, root) in targets.items():
        cost = predicted[name]
        assert cost["basis"] == "table" and cost["samples"] == 2, name
        actual, work = _compact(address, options, root)
        # The work is known from the plan (what is written only estimated); the seconds carry the load.
        assert cost["bytes"] / 2 <= work <= cost["bytes"] * 2, f"{name}: planned {cost['bytes']} B, did {work} B"
        ratio = actual / cost["seconds"]
        assert 1 / FACTOR <= ratio <= FACTOR, f"{name}: predicted {cost['seconds']:.3f} s, ran {actual:.3f} s"


def test_without_a_budget_anywhere_it_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = tmp_path / "lakeops.yaml"
    registry.write_text("tables: []\n")
    assert lakeops(["plan-maintenance", "--registry", str(registry)]) == 2  # as every usage error (README)
    assert f"registry {registry}: no maintenance_budget, and no budget given" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="2"):
        lakeops(["plan-maintenance", "--registry", str(registry), "--budget", "soon"])
    assert "argument --budget: bad duration 'soon'" in capsys.readouterr().err
    assert run_json(capsys, "plan-maintenance", "--registry", str(registry), "--budget", "5")["decisions"] == []


def test_a_consumer_watermark_blocks_expiry_until_the_consumer_catches_up(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Twelve commits, all past the 30-day log retention, a checkpoint at the last; the CDC output
    has extracted through version 3, so expiry may not remove a version the consumer still reads
    (with no checkpoint at or before 3, that is every one): expiry is deferred with that reason and
    the consumer's extraction is planned instead."""
    source, output = tmp_path / "source", tmp_path / "changes"
    _delta_appends(source, 12)
    api.checkpoint(str(source), CheckpointOptions())
    month_ago = time.time() - 40 * 86400
    for commit_file in (source / "_delta_log").glob("*.json"):
        os.utime(commit_file, (month_ago, month_ago))
    api.cdc(str(source), CdcOptions(from_version=0, to_version=3, output=str(output)))
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        f"tables:\n  - name: source\n    location: {source}\n"
        f"    cdc: {{enabled: true, output: {output}, start_date: 2020-01-01}}\n"
    )
    decisions = {d["action"]["operation"]: d for d in _plan(capsys, registry)["decisions"]}
    expiry = decisions["expiry"]
    assert not expiry["chosen"] and expiry["blocked"]
    assert expiry["reason"] == (
        "consumer watermark: the CDC output still needs all 11 versions past the retention floor"
    )
    assert decisions["cdc"]["chosen"] and decisions["cdc"]["benefit"]["cdc_versions_closed"] == 8
    assert "8 commits the CDC output does not hold yet" in decisions["cdc"]["reason"]


@pytest.mark.parametrize(("text", "named"), list(REFUSED.values()), ids=list(REFUSED))
def test_a_registry_the_dagster_loader_refuses_is_a_usage_error_naming_the_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, named: str
) -> None:
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(text)

    assert lakeops(["plan-maintenance", "--registry", str(registry), "--budget", "120m"]) == 2
    err = capsys.readouterr().err
    assert f"RegistryError: {registry}: " in err and named in " ".join(err.split()), err
    assert "observing" not in err  # refused before any table is read


@pytest.mark.s3
def test_a_table_of_a_glue_catalog_is_observed_through_its_catalog(
    glue_endpoint: str, s3_bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The planner read an entry's catalog as a SQL one (its uri and name only): a Glue table was
    unreadable. It now takes the entry's whole address, as the assets do."""
    table = glue_table(glue_endpoint, s3_bucket)
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        f"tables:\n  - name: events\n    identifier: {table.identifier}\n"
        f"    catalog: {{type: glue, endpoint_url: '{table.catalog_uri}'}}\n"
    )

    plan = run_json(
        capsys, "plan-maintenance", "--registry", str(registry), "--budget", "120m", "--endpoint-url", glue_endpoint
    )

    assert plan["unreadable"] == {}
    assert {d["action"]["table"] for d in plan["decisions"]} == {"events"}


def test_a_registry_that_is_not_utf8_is_a_usage_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = tmp_path / "lakeops.yaml"
    registry.write_bytes(b"tables:\n  - {name: ev\xff, location: /t}\n")
    monkeypatch.setenv("LAKEOPS_REGISTRY", str(registry))
    for argv in (["plan-maintenance", "--registry", str(registry), "--budget", "1"], ["inspect", "events"]):
        assert lakeops(argv) == 2
        assert f"RegistryError: registry {registry}: not UTF-8 text (byte 21: invalid start byte)" in " ".join(
            capsys.readouterr().err.split()
        )


def test_an_empty_plan_says_why_nothing_was_chosen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A registry whose tables need nothing: the plan names the tables it observed and why none has an
    action, in the terminal and in the Markdown the Dagster plan asset shows, instead of empty columns."""
    location = tmp_path / "events"
    write_deltalake(str(location), pa.table({"id": pa.array([1, 2], pa.int64())}))
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        f"maintenance_budget: {{core_minutes: 30}}\ntables:\n  - name: events\n    location: {location}\n"
        f"  - name: gone\n    location: {tmp_path / 'missing'}\n    format: delta\n"
    )
    plan = run_json(capsys, "plan-maintenance", "--registry", str(registry))
    assert (plan["decisions"], plan["observed"], list(plan["unreadable"])) == ([], ["events"], ["gone"])
    from lakeops.planning.models import MaintenancePlan

    text = MaintenancePlan.model_validate(plan).markdown()
    assert "**Nothing to do: none of the 1 tables observed (events) has small files to merge" in text
    assert "- unreadable `gone`: NotATable" in text
    assert lakeops(["plan-maintenance", "--registry", str(registry)]) == 0
    assert "nothing to do: none of the 1 tables observed (events)" in " ".join(capsys.readouterr().out.split())
