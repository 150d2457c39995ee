"""The benchmark harness at ``tiny`` size: it generates, runs every contender on identical copies
and writes a results document and a README table. No timing is asserted, only the shape of the
results and that each contender did the work (the same files and rows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.__main__ import main
from bench.harness import run
from bench.report import END, START
from spark_jobs.spark_settings import DRIVER_MAX_BYTES_ENV

# ours runs on a local Spark session; long: CI runs it as its own stage (make test-long)
pytestmark = [pytest.mark.spark, pytest.mark.long]


@pytest.fixture(scope="module")
def outcome(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], str]:
    out = tmp_path_factory.mktemp("bench")
    readme = out / "README.md"
    readme.write_text(f"# notes kept\n\n{START}\nold table\n{END}\n\nafter the table\n")
    with pytest.MonkeyPatch.context() as patch:
        # The default runs a tiny plan on the driver; Spark here, so the JVM sampling is exercised.
        patch.setenv(DRIVER_MAX_BYTES_ENV, "0")
        main(["--size", "tiny", "--case", "delta_compaction", "--case", "delta_checkpoint", "--workdir", str(out),
              "--results", str(out / "results"), "--readme", str(readme)])  # fmt: skip
    [results] = (out / "results").glob("*-tiny.json")
    return json.loads(results.read_text()), readme.read_text()


def test_results_hold_every_case_with_positive_ratios(outcome: tuple[dict[str, object], str]) -> None:
    document, _ = outcome
    assert document["size"] == "tiny" and document["repeats"] == 1 and document["scales"] == [1]
    assert document["complete"] is True
    results = document["results"]
    assert isinstance(results, list)
    assert [r["case"] for r in results] == ["delta_compaction", "delta_checkpoint"]
    for result in results:
        assert set(result["contenders"]) == {"ours", "peer", "limit"}
        for contender in result["contenders"].values():
            assert contender["median_s"] > 0 and len(contender["seconds"]) == 1
            assert contender["driver_peak_mb"] > 0
        for name in ("ours_over_peer", "ours_over_limit"):
            assert isinstance(result["ratios"][name], float) and result["ratios"][name] > 0


def test_each_contender_did_the_same_work(outcome: tuple[dict[str, object], str]) -> None:
    document, _ = outcome
    compaction, checkpoint = document["results"]  # type: ignore[misc]
    ours, peer, limit = (compaction["contenders"][role]["info"] for role in ("ours", "peer", "limit"))
    assert compaction["workload"]["size"] == 10
    assert ours["files_removed"] == peer["files_removed"] == limit["files_read"] == 10
    assert ours["files_added"] == peer["files_added"] == limit["files_written"] == 2  # one file per day
    assert ours["rows_written"] == limit["rows"] == 20_000
    assert checkpoint["contenders"]["ours"]["info"]["add_files"] == 2_000
    assert compaction["contenders"]["ours"]["jvm_peak_mb"] > 0  # Spark's JVM, sampled in the run's process tree


def test_the_readme_table_replaces_only_the_marked_block(outcome: tuple[dict[str, object], str]) -> None:
    _, readme = outcome
    assert readme.startswith("# notes kept\n") and readme.endswith("after the table\n")
    assert "old table" not in readme
    block = readme.split(START)[1].split(END)[0]
    assert "| Delta compaction (small files by day) | 10 files |" in block
    assert "| Delta checkpoint (log-only adds) | 2,000 add actions |" in block


def test_scale_runs_a_multiple_of_the_base_size(tmp_path: Path) -> None:
    """``--scale 4`` of the tiny vacuum: four times the tombstones, every one deleted by ours and delta-rs."""
    main(["--size", "tiny", "--case", "delta_vacuum", "--scale", "4", "--workdir", str(tmp_path),
          "--results", str(tmp_path / "results"), "--readme", str(tmp_path / "README.md")])  # fmt: skip
    [results] = (tmp_path / "results").glob("*-tiny.json")
    document = json.loads(results.read_text())
    [result] = document["results"]
    assert document["scales"] == [4] and result["scale"] == 4 and result["workload"]["size"] == 800
    ours, peer, limit = (result["contenders"][role]["info"] for role in ("ours", "peer", "limit"))
    assert ours["deleted_files"] == peer["deleted_files"] == limit["deleted_files"] == 800
    assert "800 tombstoned files (x4)" in (tmp_path / "README.md").read_text()


def test_a_long_run_hands_over_each_result_as_it_comes(tmp_path: Path) -> None:
    """What a run measured survives it: after each case and scale but the last, the document so far."""
    seen: list[dict[str, object]] = []
    final = run("tiny", cases=["delta_vacuum"], scales=[1, 2], base=tmp_path, log=lambda _: None, partial=seen.append)
    [partial] = seen
    assert partial["complete"] is False and [r["scale"] for r in partial["results"]] == [1]  # type: ignore[union-attr]
    assert final["complete"] is True and [r["workload"]["size"] for r in final["results"]] == [200, 400]
    assert set(final["slopes"]["delta_vacuum"]) == {"ours", "peer", "limit"}


def test_the_cdc_and_expiry_peers_do_what_ours_does(tmp_path: Path) -> None:
    """The like-for-like peers: delta-rs writes as many change rows as ours does, and PyIceberg's expiry
    then deletes the same manifest lists ours deletes (issue 24)."""
    document = run("tiny", cases=["delta_cdc", "iceberg_expiry"], base=tmp_path, log=lambda _: None)
    cdc, expiry = document["results"]  # type: ignore[misc]
    ours, peer = (cdc["contenders"][role]["info"] for role in ("ours", "peer"))
    assert ours["rows_written"] == peer["change_rows"] == cdc["workload"]["size"]
    ours, peer = (expiry["contenders"][role]["info"] for role in ("ours", "peer"))
    assert ours["deleted_manifest_lists"] == peer["deleted_files"] == peer["expired_snapshots"] == 4
