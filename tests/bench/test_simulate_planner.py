"""bench/simulate_planner.py at a small size: every policy runs on the same modelled estate through
the real planner and cost model, and the results table replaces the one between the README's markers."""

from __future__ import annotations

from pathlib import Path

from bench.simulate_planner import END, START, every_operation_policy, main, planner_policy, simulate


def test_results_table_replaces_the_readme_block(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# kept\n\n{START}\nold\n{END}\n\nafter\n")
    assert main(["--tables", "20", "--days", "3", "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("# kept\n") and text.endswith(f"{END}\n\nafter\n") and "\nold\n" not in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| policy")]
    policies = [row.split(" | ")[0].removeprefix("| ") for row in rows]
    assert policies[:2] == ["cron (every operation, nightly)", "threshold sensors + nightly expiry/orphans"]
    assert [p.split(",")[0] for p in policies[2:]] == ["planner nightly"] * 3 + ["planner hourly"] * 2
    assert all(row.count("|") == 9 for row in rows)  # eight columns


def test_a_planner_at_half_the_budget_spends_about_half() -> None:
    """The planner keeps to its predictions, and its predictions learn the runs' true cost: what it
    spends at half of cron's budget stays near that half (the hidden truth has ±30 % noise)."""
    run = {"tables": 40, "days": 4, "seed": 3}
    operations = {"compaction", "checkpoint", "expiry", "orphans"}
    cron = simulate("cron", lambda rng: every_operation_policy(rng, operations), **run)
    half = cron.core_minutes / run["days"] / 2
    planner = simulate("planner", lambda rng: planner_policy(rng, half, 24), **run)
    assert planner.runs > 0 and planner.points > 0
    assert planner.core_minutes <= 1.5 * half * run["days"]
