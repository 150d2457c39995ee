"""``lakeops health --html`` opened as its reader opens it: a file in Debian's Chromium, driven by
Playwright, offline (every request the page makes beyond its own file is refused and counted). The page
lists each table with its status, and each readable table's section holds its plots, drawn.

Run by ``make test-ui`` (which installs Chromium and Playwright first); excluded from ``make test``.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from icechunk_repos import build_history

from lakeops.storage import open_storage
from orchestration.ui import chromium_page
from spark_jobs.cli import main as lakeops

pytest.importorskip("playwright", reason="make test-ui installs it (the screenshot extra)")
from playwright.sync_api import Route, expect  # noqa: E402

pytestmark = pytest.mark.ui


def test_the_health_page_shows_every_table_and_its_plots_offline(tmp_path: Path) -> None:
    events, arrays = tmp_path / "events", tmp_path / "arrays"
    for i in range(30):
        write_deltalake(str(events), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    build_history(open_storage(str(arrays)), str(arrays), commits=4)
    registry = tmp_path / "lakeops.yaml"
    registry.write_text(
        f"tables:\n  - name: events\n    location: {events}\n    checkpoint: {{interval: 100}}\n"
        "    health: {small_files: {warn: 20}}\n"
        f"  - name: arrays\n    location: {arrays}\n  - name: gone\n    location: {tmp_path / 'missing'}\n"
        "    format: delta\n"
    )
    page_file = tmp_path / "health.html"
    assert lakeops(["health", "--registry", str(registry), "--html", str(page_file)]) == 0

    fetched: list[str] = []

    def refuse(route: Route) -> None:
        fetched.append(route.request.url)
        route.abort()

    with chromium_page(size=(1400, 1000)) as page:
        page.route("http*://**", refuse)
        page.goto(page_file.as_uri())
        expect(page.get_by_role("heading", name="lakeops health")).to_be_visible()
        rows = page.locator("table tr")
        expect(rows).to_have_count(4)  # the header and one row per table
        expect(rows.nth(1)).to_contain_text("gone")  # worst first
        expect(rows.nth(1)).to_contain_text("error reading")
        expect(page.locator("tr", has_text="events")).to_contain_text("needs compaction")
        for table in ("events", "arrays"):
            figure = page.locator(f"section#{table} svg")
            expect(figure).to_have_count(1)
            box = figure.bounding_box()
            assert box is not None and box["width"] > 600 and box["height"] > 150, (table, box)
            assert page.locator(f"section#{table} svg path").count() > 20  # axes, ticks and lines drawn
        expect(page.locator("section#gone")).to_contain_text("NotATable")
    assert fetched == []
