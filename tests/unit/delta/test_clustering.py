"""Compaction of clustered tables built by the specification
(https://github.com/delta-io/delta/blob/master/PROTOCOL.md#clustered-table): delta-rs writes the data,
the test adds the ``clustering`` feature and the ``delta.clustering`` domain by hand. lakeops clusters
along the Hilbert curve of the clustering columns, marks its files ``clusteringProvider: lakeops-hilbert``, leaves
files another implementation clustered alone, keeps the domain, and refuses a user's own order.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from delta_json_log import commit_next, live_adds, log_commits
from deltalake import DeltaTable, write_deltalake

from lakeops import api
from lakeops.delta.actions import DomainMetadata
from lakeops.delta.clustering import clustering_columns
from lakeops.delta.schema import parse_schema
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import UnsupportedFeature
from lakeops.ops.compaction import CompactionOptions
from lakeops.storage import open_storage

PROTOCOL = {
    "minReaderVersion": 1,
    "minWriterVersion": 7,
    "writerFeatures": ["appendOnly", "invariants", "domainMetadata", "clustering"],
}
#: As Delta writes it: each column a path.
DOMAIN = {"domain": "delta.clustering", "configuration": json.dumps({"clusteringColumns": [["y"]]}), "removed": False}


def _clustered_table(tmp_path: Path, provider: str = "liquid") -> tuple[str, str]:
    """Eight delta-rs appends of rows scattered over y in 0..63, then a commit making the table
    clustered by ``y``, in which the first file is recommitted as clustered by ``provider`` (another
    implementation's by default); returns the location and that file's path."""
    location = str(tmp_path / "t")
    for append in range(8):
        ys = list(range(append, 64, 8))
        write_deltalake(
            location,
            pa.table({"x": pa.array([y * 10 for y in ys], pa.int64()), "y": pa.array(ys, pa.int64())}),
            mode="append",
        )
    first = next(iter(live_adds(location).values()))
    commit_next(
        location,
        {"protocol": PROTOCOL},
        {"domainMetadata": DOMAIN},
        {"add": {**first, "dataChange": False, "clusteringProvider": provider}},
    )
    return location, first["path"]


def _rows(location: str) -> list[tuple[int, int]]:
    table = DeltaTable(location).to_pyarrow_table()
    return sorted(zip(table["x"].to_pylist(), table["y"].to_pylist(), strict=True))


def test_compaction_clusters_by_the_clustering_columns(tmp_path: Path) -> None:
    location, liquid = _clustered_table(tmp_path)
    rows = _rows(location)  # delta-rs reads the table built by the spec
    assert len(rows) == 64

    report = api.compact(location, CompactionOptions(min_input_files=2, target_file_size=1500))

    assert report.committed_version == 9
    assert _rows(location) == rows
    live = live_adds(location)
    assert live[liquid].get("clusteringProvider") == "liquid"  # another implementation's: left alone
    ours = [a for path, a in live.items() if path != liquid]
    assert len(ours) > 1 and all(a["clusteringProvider"] == "lakeops-hilbert" for a in ours)
    ranges = sorted((json.loads(a["stats"])["minValues"]["y"], json.loads(a["stats"])["maxValues"]["y"]) for a in ours)
    assert all(high < low for (_, high), (low, _) in zip(ranges, ranges[1:], strict=False))  # disjoint y ranges
    info = log_commits(location)[-1][1][0]["commitInfo"]
    assert info["operationParameters"]["clusterBy"] == '["y"]'
    snapshot = load_snapshot(open_storage(location), location)
    assert snapshot.domains["delta.clustering"].configuration == DOMAIN["configuration"]

    again = api.compact(location, CompactionOptions(min_input_files=2, target_file_size=1500))
    assert again.committed_version is None  # already clustered by lakeops


@pytest.mark.parametrize("option", [{"zorder_by": ["x"]}, {"sort_by": ["x"]}])
def test_a_users_order_is_refused_on_a_clustered_table(tmp_path: Path, option: dict[str, list[str]]) -> None:
    location, _ = _clustered_table(tmp_path)
    flag = "--zorder-by" if "zorder_by" in option else "--sort-by"
    with pytest.raises(UnsupportedFeature, match=f"table feature clustering: {flag} is refused on a clustered table"):
        api.compact(location, CompactionOptions(min_input_files=2, **option))
    assert len(log_commits(location)) == 9


def test_clustering_columns_are_physical_names_under_column_mapping() -> None:
    """The spec's example: physical names, listed flat; mapped back to the logical columns."""
    schema = parse_schema(
        {
            "type": "struct",
            "fields": [
                {
                    "name": name,
                    "type": "long",
                    "nullable": True,
                    "metadata": {"delta.columnMapping.id": i, "delta.columnMapping.physicalName": f"col-{i}"},
                }
                for i, name in enumerate(["a", "b", "c"], start=1)
            ],
        }
    )
    domain = DomainMetadata(
        domain="delta.clustering", configuration=json.dumps({"clusteringColumns": ["col-3", "col-1"]})
    )
    assert clustering_columns({"delta.clustering": domain}, schema, "name", "t") == ["c", "a"]
    nested = DomainMetadata(domain="delta.clustering", configuration=json.dumps({"clusteringColumns": [["s", "f"]]}))
    with pytest.raises(UnsupportedFeature, match="clustering on nested column s.f"):
        clustering_columns({"delta.clustering": nested}, schema, "name", "t")


def test_files_of_the_superseded_zorder_provider_are_reclustered(tmp_path: Path) -> None:
    location, earlier = _clustered_table(tmp_path, provider="lakeops-zorder")
    rows = _rows(location)

    report = api.compact(location, CompactionOptions(min_input_files=2, target_file_size=1500))

    assert report.files_removed == 8 and _rows(location) == rows
    live = live_adds(location)
    assert earlier not in live and all(a["clusteringProvider"] == "lakeops-hilbert" for a in live.values())
