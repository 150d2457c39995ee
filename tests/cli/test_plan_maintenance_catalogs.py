"""``lakeops plan-maintenance`` over every kind of address a registry holds (issue 35, item 3): Iceberg
tables of a SQL, a Glue and a REST catalog, a Delta table and an Icechunk repository, in one registry.
The planner once kept only a catalog's ``uri`` and ``name``, so a REST table was ``unreadable: …
unknown database dialect 'http'``; now each is planned through the address the command line uses, and
each chosen action then runs by the table's registry name as an on-call engineer would run it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from glue_tables import glue_table
from icechunk_repos import build_history
from lakeops_cli import run_json
from pyiceberg_tables import small_file_table
from rest_catalog_server import appended_table, serve

from lakeops.planning.models import COMMANDS
from lakeops.storage import open_storage

SECRET = "sentinel-planner-secret"


@pytest.mark.s3
def test_every_kind_of_address_is_planned_and_its_chosen_actions_run(
    glue_endpoint: str,
    s3_bucket: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    events, arrays = tmp_path / "events", tmp_path / "arrays"
    for i in range(8):
        write_deltalake(str(events), pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())}), mode="append")
    build_history(open_storage(str(arrays)), str(arrays), commits=6)
    for folder in ("sql", "rest"):
        (tmp_path / folder).mkdir()
    sql = small_file_table(tmp_path / "sql", appends=5, rows=10)
    glue = glue_table(glue_endpoint, s3_bucket, appends=5)
    monkeypatch.setenv("ORDERS_CATALOG_CREDENTIAL", f"planner:{SECRET}")
    for server in serve(tmp_path / "rest", client_id="planner", client_secret=SECRET, token="sentinel-planner-token"):
        _catalog, rest = appended_table(server, "shop.orders", 5)
        registry = tmp_path / "lakeops.yaml"
        registry.write_text(
            f"""
tables:
  - name: events
    location: {events}
    compaction: {{min_input_files: 2}}
  - name: arrays
    location: {arrays}
    compaction: {{min_input_files: 2}}
  - name: sql_orders
    catalog: {{uri: "{sql.catalog_uri}"}}
    identifier: {sql.identifier}
    compaction: {{min_input_files: 2}}
  - name: glue_orders
    catalog: {{type: glue, endpoint_url: "{glue.catalog_uri}"}}
    identifier: {glue.identifier}
    compaction: {{min_input_files: 2}}
  - name: rest_orders
    catalog: {{type: rest, uri: "{server.url}", credential_env: ORDERS_CATALOG_CREDENTIAL}}
    identifier: shop.orders
    compaction: {{min_input_files: 2}}
"""
        )
        endpoint = ["--endpoint-url", glue_endpoint]

        plan = run_json(capsys, "plan-maintenance", "--registry", str(registry), "--budget", "120m", *endpoint)

        names = {"events", "arrays", "sql_orders", "glue_orders", "rest_orders"}
        assert plan["unreadable"] == {}
        chosen = [d["action"] for d in plan["decisions"] if d["chosen"]]
        assert {a["table"] for a in chosen if a["operation"] == "compaction"} == names, plan["decisions"]
        assert SECRET not in str(plan)

        monkeypatch.setenv("LAKEOPS_REGISTRY", str(registry))
        ran = []
        for action in chosen:
            policy = ["--min-input-files", "2"] if action["operation"] == "compaction" else []  # the registry's
            report = run_json(capsys, COMMANDS[action["operation"]], action["table"], *policy, *endpoint)
            ran.append((action, report))
            if action["operation"] == "compaction":
                assert report["files_added"] >= 1 and report["files_removed"] >= 2, (action, report)

        # The compactions committed, through each table's own catalog; every reader still sees every row.
        assert sorted(DeltaTable(str(events)).to_pyarrow_table().column("id").to_pylist()) == list(range(80))
        for table, rows in ((sql.table, 50), (glue.table, 50), (rest, 50)):
            table.refresh()
            assert table.scan().to_arrow().num_rows == rows
            assert table.current_snapshot().summary.operation.value == "replace"  # type: ignore[union-attr]
        replan = run_json(capsys, "plan-maintenance", "--registry", str(registry), "--budget", "120m", *endpoint)
        assert replan["unreadable"] == {}
        assert not [d for d in replan["decisions"] if d["chosen"] and d["action"]["operation"] == "compaction"], ran
