"""The Dagster UI in a real browser: Debian's Chromium, driven by Playwright, against ``dagster dev``
on 127.0.0.1 (webserver and daemon, the shipped ``dagster.yaml``). What a user sees is asserted on
the page, and what a click did is asserted again in the instance.

- the demo registry (the tables ``make demo`` builds): every group's asset graph renders, the
  Concurrency page lists each table's pool with limit 1, and "Materialize" on a maintenance asset
  runs it, with its check passing;
- two CDC tables with different start dates (which once failed the whole code location): both graphs
  render, and "Materialize…" of the latest CDC day extracts it, with its check passing.

Run by ``make test-ui`` (which installs Chromium and Playwright first); excluded from ``make test``.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakeops.registry import load_registry
from orchestration import demo
from orchestration.ui import PAGES, PROJECT, chromium_page, dagster_dev, open_ui, screenshots

pytest.importorskip("playwright", reason="make test-ui installs it (the screenshot extra)")
from playwright.sync_api import Page, expect  # noqa: E402

pytestmark = pytest.mark.ui

#: Seconds a launched maintenance run may take (its own processes and Spark session on a busy CI box).
RUN_TIMEOUT_S = 240


@contextmanager
def _served(registry: Path, home: Path) -> Iterator[tuple[str, Page, dg.DagsterInstance]]:
    """``dagster dev`` on ``registry``, a fresh Chromium page and the instance the UI writes to."""
    home.mkdir()
    shutil.copy(PROJECT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    with (
        dagster_dev(registry, home) as url,
        chromium_page(size=(1600, 1000)) as page,
        dg.DagsterInstance.from_config(str(home)) as instance,
    ):
        page.set_default_timeout(60_000)
        expect.set_options(timeout=60_000)  # a busy machine renders slowly; waits end at the first match
        open_ui(page, url)
        yield url, page, instance


def _assert_graph(page: Page, url: str, group: str, names: list[str]) -> None:
    """The group's asset graph shows a node for each asset name."""
    page.goto(f"{url}/locations/orchestration.definitions:defs/asset-groups/{group}")
    nodes = page.locator("foreignObject")
    for name in names:
        expect(nodes.get_by_text(name, exact=True).first).to_be_visible()
    expect(nodes).to_have_count(len(names))


def _assert_pools(page: Page, url: str, pools: list[str]) -> None:
    """The Concurrency page lists each pool (once the ``lakeops_pools`` sensor's first tick wrote
    them), and each pool's page says: run granularity, limit 1 from the instance's default."""
    deadline = time.monotonic() + 90
    while True:
        page.goto(f"{url}/deployment/concurrency")
        links = page.get_by_role("link", name=re.compile(r"^lakeops_"))
        page.wait_for_load_state("networkidle")
        if sorted(links.all_inner_texts()) == pools or time.monotonic() > deadline:
            break
        time.sleep(3)
    expect(links).to_have_text(pools)
    for pool in pools:
        page.goto(f"{url}/deployment/concurrency/{pool}")
        expect(page.get_by_role("row", name="Granularity Run")).to_be_visible()
        expect(page.get_by_role("row", name=re.compile(r"^Limit 1 \(default\)"))).to_be_visible()


def _launch(page: Page, url: str, asset: str, *, latest_partition: bool = False) -> str:
    """Click the asset page's launch button: "Materialize", "Observe" for the table (its health
    checks run with the observation), "Materialize…" for a partitioned asset, then its latest
    partition. Returns the launched run's id prefix, from the UI's toast."""
    page.goto(f"{url}/assets/{asset}")
    button = page.get_by_role("button", name=re.compile(r"(Materialize…?|Observe)$"))
    expect(button).to_be_enabled()
    button.click()
    if latest_partition:
        dialog = page.get_by_role("dialog")
        dialog.get_by_role("button", name="Latest", exact=True).click()
        dialog.get_by_role("button", name="Launch 1 run").click()
    toast = page.get_by_text(re.compile(r"^Launched run [0-9a-f]{8}$"))
    expect(toast).to_be_visible()
    return toast.inner_text().split()[-1]


def _succeeded(page: Page, url: str, instance: dg.DagsterInstance, prefix: str) -> dict[str, bool]:
    """The run the UI launched succeeded, in the instance and on its page; returns its checks'
    outcomes (name: passed) as the instance recorded them."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not (
        (runs := [r for r in instance.get_runs(limit=20) if r.run_id.startswith(prefix)]) and runs[0].is_finished
    ):
        assert time.monotonic() < deadline, f"run {prefix} did not finish within {RUN_TIMEOUT_S} s"
        time.sleep(2)
    run = runs[0]
    assert run.is_success, [e.message for e in instance.all_logs(run.run_id)][-20:]
    page.goto(f"{url}/runs/{run.run_id}")
    expect(page.get_by_text("Success", exact=True).first).to_be_visible()
    evaluations = instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
    return {
        e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data.passed for e in evaluations
    }


def _assert_check(page: Page, url: str, asset: str, check: str, status: str, result: str | re.Pattern[str]) -> None:
    """The asset's Checks tab, with ``check`` selected, shows ``status`` (Passed, Failed) as its
    latest evaluation, and the evaluation's ``result`` text."""
    page.goto(f"{url}/assets/{asset}?view=checks&checkDetail={check}")
    expect(page.get_by_title(check, exact=True).first).to_be_visible()
    evaluation = page.get_by_text("Evaluation result", exact=True).locator("..")
    expect(evaluation.get_by_text(status, exact=True)).to_be_visible()
    expect(page.get_by_text(result)).to_be_visible()


def _png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's header (its IHDR chunk); fails on anything else."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    return int.from_bytes(header[16:20]), int.from_bytes(header[20:24])


def test_the_demo_registry_in_a_browser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo, "DEMO", tmp_path / "demo")
    registry = demo.build_warehouse()
    with _served(registry, tmp_path / "dagster_home") as (url, page, instance):
        maintenance = ["table", "compaction", "checkpoint", "expiry", "orphans"]
        _assert_graph(page, url, "events", [*maintenance, "cdc"])
        _assert_graph(page, url, "orders", [*maintenance, "cdc"])
        _assert_graph(page, url, "arrays", maintenance)

        _assert_pools(page, url, ["lakeops_arrays", "lakeops_events", "lakeops_orders"])

        # Health: the demo's appends left small files; the table's non-blocking small_files check fails.
        checks = _succeeded(page, url, instance, _launch(page, url, "events/table"))
        assert checks["small_files"] is False, checks
        needs_compaction = re.compile(r"^small_files \d+ \(warn 10 / error 100\): run compaction$")
        _assert_check(page, url, "events/table", "small_files", "Failed", needs_compaction)

        # The compaction run records the table's health as it left it: its small_files check passes
        # with no observation launched after it.
        checks = _succeeded(page, url, instance, _launch(page, url, "events/compaction"))
        assert checks["rows_kept"] is True and checks["small_files"] is True, checks
        rewritten = re.compile(r"replaced \d+ files holding \d+ live rows by \d+ files that read back \d+ rows")
        _assert_check(page, url, "events/compaction", "rows_kept", "Passed", rewritten)
        _assert_check(page, url, "events/table", "small_files", "Passed", re.compile(r"^small_files 0\b"))

        # The overview the compaction rebuilt agrees with the table's latest observation.
        (observed,) = instance.fetch_observations(dg.AssetKey(["events", "table"]), limit=1).records
        assert observed.asset_observation is not None
        status = observed.asset_observation.metadata["health_status"].value
        when = datetime.fromtimestamp(observed.timestamp, UTC).strftime("%Y-%m-%d %H:%M")
        page.goto(f"{url}/assets/lakeops/overview")
        row = page.get_by_role("row", name=re.compile(r"^events delta "))
        expect(row).to_contain_text(str(status))
        expect(row).to_contain_text(when)

        # The Runs page names each run's table and operation.
        page.goto(f"{url}/runs")
        expect(page.get_by_text("events / compaction").first).to_be_visible()

        # The planner's plan (as its sensor records it), listing its chosen actions.
        demo.record_plan(load_registry(registry), instance, datetime.now(UTC), None)
        page.goto(f"{url}/assets/lakeops/maintenance_plan")
        expect(page.get_by_role("row", name=re.compile(r"^chosen materialization .* [1-9]\d*$"))).to_be_visible()
        page.get_by_text("[Show Markdown]").first.click()  # the plan's table, listing the chosen actions
        expect(page.get_by_text(re.compile(r"chosen [1-9]\d* actions")).first).to_be_visible()
        expect(page.get_by_text("events:cdc").first).to_be_visible()

        # The overview, materialized from the UI, shows each table's verdict: events' worst signal is
        # now its CDC lag (no extraction ran), the others were never observed.
        assert _succeeded(page, url, instance, _launch(page, url, "lakeops/overview")) == {}
        page.goto(f"{url}/assets/lakeops/overview")
        expect(
            page.get_by_role("row", name=re.compile(r"^events delta CDC lag \(ERROR\) cdc_lag_time "))
        ).to_be_visible()
        for table in ("arrays", "orders"):
            expect(page.get_by_role("row", name=f"{table} auto not observed yet none yet", exact=True)).to_be_visible()

        # make screenshot's pages, taken as it takes them.
        (tmp_path / "docs").mkdir()
        written = screenshots(page, url, "events", tmp_path / "docs")
    assert [png.name for png in written] == list(PAGES)
    assert [_png_size(png) for png in written] == [(1600, 1000)] * len(PAGES)


def test_two_cdc_tables_with_different_start_dates_in_a_browser(tmp_path: Path) -> None:
    for name in ("events", "clicks"):
        for i in range(4):
            rows = pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())})
            write_deltalake(str(tmp_path / name), rows, mode="append")
    today = datetime.now(UTC).date()
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        f"""
spark: {{master: "local[1]"}}
tables:
  - name: events
    location: {tmp_path / "events"}
    cdc: {{enabled: true, output: {tmp_path / "events_changes"}, start_date: {today - timedelta(days=20)}}}
  - name: clicks
    location: {tmp_path / "clicks"}
    cdc: {{enabled: true, output: {tmp_path / "clicks_changes"}, start_date: {today}}}
"""
    )
    with _served(registry, tmp_path / "dagster_home") as (url, page, instance):
        for table in ("events", "clicks"):
            _assert_graph(page, url, table, ["table", "compaction", "checkpoint", "expiry", "orphans", "cdc"])
        prefix = _launch(page, url, "clicks/cdc", latest_partition=True)
        checks = _succeeded(page, url, instance, prefix)
        assert checks["no_duplicate_changes"] is True and "small_files" in checks  # and the table's health after it
        _assert_check(
            page,
            url,
            "clicks/cdc",
            "no_duplicate_changes",
            "Passed",
            re.compile(r"40 change rows keyed by .*: each key once"),
        )
    assert (tmp_path / "clicks_changes" / "_delta_log").is_dir()
