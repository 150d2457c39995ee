"""Table features lakeops honours for log maintenance only: ``variantType`` and ``icebergCompatV2``.

Their rules bind the data a writer adds (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#variant-data-type,
#writer-requirements-for-icebergcompatv2), so checkpoints, log expiry and VACUUM run on such tables,
while compaction (and, for variant values, change capture) is refused by name. Fixtures: a delta-rs
table with a ``variant`` column and a Spark table with IcebergCompatV2, copied to ``tmp_path``.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable
from lakeops_testdata import TESTDATA
from refused_runs import failed_run_records

from lakeops import api
from lakeops.delta.schema import parse_schema, to_arrow_schema
from lakeops.delta.snapshot import load_snapshot
from lakeops.errors import UnsupportedFeature
from lakeops.ops.cdc import CdcOptions
from lakeops.ops.checkpoint import CheckpointOptions
from lakeops.ops.compaction import CompactionOptions
from lakeops.ops.expiry import ExpiryOptions
from lakeops.ops.orphans import OrphansOptions
from lakeops.storage import open_storage

MODERN = TESTDATA / "modern" / "delta"
VARIANT = "spark-variant-stable-feature-checkpoint"
ICEBERG_COMPAT = "table-with-icebegCompatV2Enabled"


def _copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(MODERN / name, target)
    old = time.time() - 30 * 86_400  # old enough for every retention floor
    for path in [target, *target.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
        os.utime(path, (old, old))
    return target


def _files(root: Path) -> list[str]:
    return sorted(DeltaTable(str(root)).file_uris())


@pytest.mark.parametrize(
    ("name", "feature", "refused"),
    [
        (VARIANT, "variantType", {"compact", "cdc", "write", "commit"}),
        (ICEBERG_COMPAT, "icebergCompatV2", {"compact", "write", "commit"}),
    ],
)
def test_inspect_names_the_feature_and_the_refused_operations(
    name: str, feature: str, refused: set[str], tmp_path: Path
) -> None:
    report = api.inspect(str(_copy(name, tmp_path)))
    assert feature in report.features
    assert set(report.refused_operations) == refused
    assert {"read", "checkpoint", "expire", "vacuum"} <= set(report.supported_operations)
    for operation in refused:
        assert (
            f"table feature {feature} is not supported by lakeops {operation} yet"
            in report.refused_operations[operation]
        )


def test_a_variant_table_is_checkpointed_expired_and_vacuumed_and_delta_rs_reads_the_same_files(tmp_path: Path) -> None:
    root = _copy(VARIANT, tmp_path)
    before = _files(root)
    api.checkpoint(str(root), CheckpointOptions())
    expired = api.expire(str(root), ExpiryOptions(older_than="1d", force=True))
    vacuumed = api.orphans(str(root), OrphansOptions(older_than="0s", force_short_retention=True))

    assert (root / "_delta_log" / "00000000000000000001.checkpoint.parquet").exists()
    assert expired.deleted_files == 1 and not (root / "_delta_log" / "00000000000000000000.json").exists()
    assert vacuumed.deleted_files == 0
    assert _files(root) == before
    assert DeltaTable(str(root)).version() == 1


def test_variant_columns_parse_to_the_unshredded_struct(tmp_path: Path) -> None:
    root = _copy(VARIANT, tmp_path)
    snapshot = load_snapshot(open_storage(str(root)), str(root))
    arrow = to_arrow_schema(parse_schema(snapshot.metadata.schema_string))
    variant = arrow.field("v").type
    assert [(f.name, str(f.type), f.nullable) for f in variant] == [
        ("value", "binary", False),
        ("metadata", "binary", False),
    ]


def test_compaction_and_change_capture_refuse_variant_by_name_and_change_nothing(tmp_path: Path) -> None:
    root = _copy(VARIANT, tmp_path)
    listing = sorted(p.name for p in (root / "_delta_log").iterdir())
    with pytest.raises(UnsupportedFeature, match="table feature variantType is not supported by lakeops compact yet"):
        api.compact(str(root), CompactionOptions())
    with pytest.raises(UnsupportedFeature, match="table feature variantType is not supported by lakeops cdc yet"):
        api.cdc(str(root), CdcOptions(from_version=0, output=str(tmp_path / "changes")))
    assert sorted(p.name for p in (root / "_delta_log").iterdir()) == listing
    assert failed_run_records(tmp_path / "changes") == 1  # the refused run's record, no change table


def test_an_iceberg_compat_table_is_maintained_and_its_changes_read(tmp_path: Path) -> None:
    root = _copy(ICEBERG_COMPAT, tmp_path)
    rows = DeltaTable(str(root)).to_pyarrow_table().num_rows
    with pytest.raises(UnsupportedFeature, match="icebergCompatV2 is not supported by lakeops compact yet"):
        api.compact(str(root), CompactionOptions())
    api.checkpoint(str(root), CheckpointOptions())
    api.orphans(str(root), OrphansOptions(older_than="0s", force_short_retention=True))
    report = api.cdc(str(root), CdcOptions(from_version=0, output=str(tmp_path / "changes")))

    assert (root / "_delta_log" / "00000000000000000000.checkpoint.parquet").exists()
    assert DeltaTable(str(root)).to_pyarrow_table().num_rows == rows == 6
    assert report.rows_written == rows
    assert DeltaTable(str(tmp_path / "changes")).to_pyarrow_table().num_rows == rows
