"""Acceptance of ``lakeops checkpoint`` on Delta tables.

The oracle: once a checkpoint is written, a copy of the table without the commits it covers must
look exactly like the table did before — to delta-rs (version, files, deletion vectors, app
transactions, rows) and to lakeops' own reader (live ``(path, DV)`` set with every field,
tombstones, protocol, metadata).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from lakeops_cli import run_json
from lakeops_testdata import TESTDATA

from lakeops.delta.last_checkpoint import parse_last_checkpoint
from lakeops.delta.log_segment import list_log
from lakeops.delta.maintenance.checkpoint import write_part
from lakeops.delta.scan import read_snapshot
from lakeops.delta.snapshot import load_snapshot
from lakeops.ops import checkpoint
from lakeops.ops.checkpoint import CheckpointOptions
from lakeops.storage import StorageOptions, open_storage
from spark_jobs.cli import main as lakeops

ROOT = Path(__file__).resolve().parents[2]
_CHECKPOINT_FILE = ".checkpoint."


def _batch(start: int, n: int, day: str) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(start, start + n), pa.int64()),
            "name": pa.array([f"n{i % 7}" for i in range(start, start + n)]),
            "day": pa.array([day] * n),
        }
    )


def _delta_rs_table(location: str, *, partitioned: bool, appends: int = 24) -> None:
    """Many small appends (two of them with app transactions), then deletes that leave tombstones."""
    for i in range(appends):
        properties = CommitProperties(app_transactions=[Transaction(app_id=f"app-{i % 2}", version=i)])
        write_deltalake(
            location,
            _batch(i * 5, 5, f"2026-11-0{1 + i % 3}"),
            mode="append",
            partition_by=["day"] if partitioned else None,
            commit_properties=properties if i >= appends - 2 else None,
        )
    table = DeltaTable(location)
    table.delete("id < 12")
    DeltaTable(location).delete("id = 40")


def _log_files(root: Path) -> dict[str, tuple[int, int]]:
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in (root / "_delta_log").iterdir()}


def _checkpoint_files(root: Path, version: int) -> list[str]:
    return sorted(n for n in _log_files(root) if n.startswith(f"{version:020d}{_CHECKPOINT_FILE}"))


def _without_covered_log(root: Path, version: int, target: Path) -> Path:
    """A copy of the table whose log holds only our checkpoint of ``version`` and what follows it:
    every commit (and its ``.crc``) up to ``version`` and every older checkpoint is gone."""
    shutil.copytree(root, target)
    for path in (target / "_delta_log").iterdir():
        name = path.name
        covered = name[:20].isdigit() and int(name[:20]) <= version
        if covered and (_CHECKPOINT_FILE not in name or int(name[:20]) < version):
            path.unlink()
    return target


def _lakeops_state(root: Path) -> dict[str, Any]:
    snapshot = load_snapshot(open_storage(str(root)), str(root))
    return {
        "version": snapshot.version,
        "protocol": snapshot.protocol.to_json_dict(),
        "metadata": snapshot.metadata.to_json_dict(),
        "files": {key: add.to_json_dict() for key, add in snapshot.files.items()},
        "tombstones": {key: remove.to_json_dict() for key, remove in snapshot.tombstones.items()},
        "txns": {app: txn.to_json_dict() for app, txn in snapshot.txns.items()},
    }


def _lakeops_rows(root: Path) -> list[dict[str, Any]]:
    storage = open_storage(str(root))
    table = read_snapshot(load_snapshot(storage, str(root)), storage)
    return sorted(table.to_pylist(), key=lambda row: json.dumps(row, sort_keys=True, default=str))


def _delta_rs_view(root: Path, app_ids: tuple[str, ...] = ()) -> dict[str, Any]:
    """What delta-rs sees: rows only when it can read them (it refuses deletion vectors)."""
    table = DeltaTable(str(root))
    prefix = str(root).rstrip("/") + "/"
    deleted = {
        row["filepath"].rsplit("/", 1)[-1]: row["selection_vector"]
        for row in pa.table(table.deletion_vectors()).to_pylist()
    }
    view: dict[str, Any] = {
        "version": table.version(),
        "files": sorted(uri.removeprefix("file://").removeprefix(prefix) for uri in table.file_uris()),
        "deletion_vectors": deleted,
        "txns": {app: table.transaction_version(app) for app in app_ids},
        "protocol": repr(table.protocol()),
        "schema": table.schema().to_json(),
    }
    if not deleted and "deletionVectors" not in (table.protocol().reader_features or []):
        rows = table.to_pyarrow_table()
        view["rows"] = rows.sort_by([(name, "ascending") for name in rows.column_names]).to_pylist()
    return view


def _pointer(root: Path) -> Any:
    path = root / "_delta_log" / "_last_checkpoint"
    return parse_last_checkpoint(path.read_bytes(), str(path))


@pytest.mark.parametrize(
    ("partitioned", "part_size"),
    [(False, None), (True, None), (True, 7)],
    ids=["unpartitioned", "partitioned", "partitioned-multi-part"],
)
def test_checkpoint_replaces_the_log_it_covers(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], partitioned: bool, part_size: int | None
) -> None:
    table = tmp_path / "events"
    _delta_rs_table(str(table), partitioned=partitioned)
    apps = ("app-0", "app-1")
    before_rs = _delta_rs_view(table, apps)
    before = _lakeops_state(table)
    assert before["tombstones"] and before["txns"] and before_rs["txns"] == {"app-0": 22, "app-1": 23}

    extra = ["--part-size", str(part_size), "--master", "local[2]"] if part_size else []
    report = run_json(capsys, "checkpoint", str(table), *extra)

    version = before["version"]
    parts = _checkpoint_files(table, version)
    assert report["status"] == "written" and report["version"] == version and report["parts"] == len(parts)
    assert report["add_files"] == len(before["files"]) and report["remove_tombstones"] == len(before["tombstones"])
    assert report["actions"] == 2 + 2 + len(before["files"]) + len(before["tombstones"])
    if part_size:
        assert len(parts) > 1 and parts == [
            f"{version:020d}.checkpoint.{i:010d}.{len(parts):010d}.parquet" for i in range(1, len(parts) + 1)
        ]
    else:
        assert parts == [f"{version:020d}.checkpoint.parquet"]
    pointer = _pointer(table)  # the checksum validates
    assert pointer.checksum is not None
    assert (pointer.version, pointer.size, pointer.num_of_add_files) == (
        version,
        report["actions"],
        report["add_files"],
    )
    assert pointer.parts == (len(parts) if part_size else None)
    assert pointer.size_in_bytes == sum((table / "_delta_log" / name).stat().st_size for name in parts)

    copy = _without_covered_log(table, version, tmp_path / "checkpoint-only")
    assert not (copy / "_delta_log" / f"{version:020d}.json").exists()
    assert _delta_rs_view(copy, apps) == before_rs
    assert _lakeops_state(copy) == before


def _unpacked(name: str, tmp_path: Path) -> Path:
    source, table = name.split("/", 1)
    plain = TESTDATA / source / table
    if plain.is_dir():
        target = tmp_path / table
        shutil.copytree(plain, target)
        return target
    subprocess.run(
        ["tar", "--zstd", "-xf", str(TESTDATA / source / f"{table}.tar.zst"), "-C", str(tmp_path)], check=True
    )
    return tmp_path / table / "delta"


@pytest.mark.parametrize(
    "name",
    [
        "delta-rs/table-with-dv-small",
        "delta-kernel/dv-partitioned-with-checkpoint",
        "delta-rs/table_with_deletion_logs",
    ],
)
def test_checkpoint_keeps_deletion_vectors_of_real_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    table = _unpacked(name, tmp_path)
    before_rs = _delta_rs_view(table)
    before = _lakeops_state(table)
    before_rows = _lakeops_rows(table)
    with_dv = [key for key, add in before["files"].items() if "deletionVector" in add]
    assert with_dv and before_rs["deletion_vectors"]

    # --force: table_with_deletion_logs already has a (Databricks) checkpoint at its latest version;
    # ours replaces it, so the copy below reads lakeops' file.
    report = run_json(capsys, "checkpoint", str(table), "--version", str(before["version"]), "--force")

    # Tombstones older than the default retention (one week) are not carried into the checkpoint.
    horizon_ms = (time.time() - 7 * 86_400) * 1000
    expired = {k for k, r in before["tombstones"].items() if r.get("deletionTimestamp", 0) < horizon_ms}
    before["tombstones"] = {k: r for k, r in before["tombstones"].items() if k not in expired}
    assert report["status"] == "written" and report["add_files"] == len(before["files"])
    assert report["expired_tombstones"] == len(expired)
    (part,) = _checkpoint_files(table, before["version"])
    adds = [a for a in pq.read_table(table / "_delta_log" / part, columns=["add"]).column("add").to_pylist() if a]
    assert sum(1 for a in adds if a["deletionVector"] is not None) == len(with_dv)
    copy = _without_covered_log(table, before["version"], tmp_path / "checkpoint-only")
    assert _delta_rs_view(copy) == before_rs
    assert _lakeops_state(copy) == before
    assert _lakeops_rows(copy) == before_rows


@pytest.mark.parametrize("stats_as_json", [True, False], ids=["json-and-struct", "struct-only"])
def test_stats_as_struct_are_typed_and_delta_rs_uses_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], stats_as_json: bool
) -> None:
    location = str(tmp_path / "typed")
    configuration = {"delta.checkpoint.writeStatsAsStruct": "true"}
    if not stats_as_json:
        configuration["delta.checkpoint.writeStatsAsJson"] = "false"
    for i in range(6):
        data = pa.table(
            {
                "id": pa.array([i * 10, i * 10 + 3], pa.int64()),
                "price": pa.array([1.5 * i, 2.5 * i], pa.float64()),
                "name": pa.array([f"a{i}", f"z{i}"]),
                "at": pa.array([i * 1_000_000, i * 2_000_000], pa.timestamp("us", tz="UTC")),
                "day": pa.array([f"2026-11-0{1 + i % 2}"] * 2).cast(pa.date32()),
                "bucket": pa.array([i % 3] * 2, pa.int32()),
            }
        )
        write_deltalake(location, data, mode="append", partition_by=["day", "bucket"], configuration=configuration)
    table = Path(location)
    before_actions = sorted(pa.table(DeltaTable(location).get_add_actions(flatten=True)).to_pylist(), key=str)
    before_rs = _delta_rs_view(table)

    report = run_json(capsys, "checkpoint", location)

    (part,) = _checkpoint_files(table, report["version"])
    add_type = pq.read_schema(table / "_delta_log" / part).field("add").type
    assert (add_type.get_field_index("stats") >= 0) is stats_as_json
    parsed_partitions = add_type.field(add_type.get_field_index("partitionValues_parsed")).type
    assert [(f.name, f.type) for f in parsed_partitions] == [("day", pa.date32()), ("bucket", pa.int32())]
    stats_type = add_type.field(add_type.get_field_index("stats_parsed")).type
    min_values = stats_type.field(stats_type.get_field_index("minValues")).type
    assert [(f.name, f.type) for f in min_values] == [
        ("id", pa.int64()),
        ("price", pa.float64()),
        ("name", pa.string()),
        ("at", pa.timestamp("us", tz="UTC")),
    ]
    copy = _without_covered_log(table, report["version"], tmp_path / "checkpoint-only")
    after = DeltaTable(str(copy))
    assert sorted(pa.table(after.get_add_actions(flatten=True)).to_pylist(), key=str) == before_actions
    assert _delta_rs_view(copy) == before_rs


def _write_log_only_table(root: Path, files: int, per_commit: int) -> int:
    """A log without data files (fast): protocol + metadata, then ``files`` adds with stats."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    schema["fields"].append({"name": "day", "type": "string", "nullable": True, "metadata": {}})
    head = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "big",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": ["day"],
                "configuration": {},
                "createdTime": 0,
            }
        },
    ]
    (log / f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in head) + "\n")
    version = 0
    for start in range(0, files, per_commit):
        version += 1
        lines = []
        for i in range(start, min(files, start + per_commit)):
            day = f"2026-01-{1 + i % 28:02d}"
            bounds = {"minValues": {"id": i * 10}, "maxValues": {"id": i * 10 + 9}, "nullCount": {"id": 0}}
            stats = json.dumps({"numRecords": 10, **bounds}, separators=(",", ":"))
            add = {
                "path": f"day={day}/part-{i:08d}.parquet",
                "partitionValues": {"day": day},
                "size": 1000 + i,
                "modificationTime": 1,
                "dataChange": True,
                "stats": stats,
            }
            lines.append(json.dumps({"add": add}, separators=(",", ":")))
        (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
    return version


def test_a_100k_file_log_checkpoints_in_parts(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "big"
    version = _write_log_only_table(table, 100_000, 5_000)

    report = run_json(capsys, "checkpoint", str(table), "--part-size", "40000", "--master", "local[2]")

    assert (report["version"], report["parts"], report["add_files"], report["actions"]) == (
        version,
        3,
        100_000,
        100_002,
    )
    for name in os.listdir(table / "_delta_log"):
        if name.endswith(".json"):
            (table / "_delta_log" / name).unlink()
    snapshot = load_snapshot(open_storage(str(table)), str(table))
    assert snapshot.version == version and snapshot.segment.checkpoint is not None
    assert snapshot.segment.checkpoint.parts == 3 and len(snapshot.files) == 100_000
    assert {add.path for add in snapshot.files.values()} == {
        f"day=2026-01-{1 + i % 28:02d}/part-{i:08d}.parquet" for i in range(100_000)
    }
    assert snapshot.files[("day=2026-01-01/part-00000000.parquet", None)].num_records == 10
    delta_rs = DeltaTable(str(table))
    assert delta_rs.version() == version and len(delta_rs.file_uris()) == 100_000


def test_an_interrupted_multi_part_checkpoint_is_invisible_and_a_rerun_completes(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "events"
    _delta_rs_table(str(table), partitioned=True, appends=12)
    before_rs = _delta_rs_view(table)
    before = _lakeops_state(table)
    plan = checkpoint.plan(str(table), CheckpointOptions(part_size=5), StorageOptions())
    assert plan is not None and len(plan.parts) >= 3
    # The run dies after two parts: no _last_checkpoint, an incomplete set.
    early = {part.location: write_part(part) for part in plan.parts[:2]}

    listing = list_log(open_storage(str(table)), str(table))
    assert plan.version in listing.incomplete_checkpoints and plan.version not in listing.checkpoints
    assert listing.last_checkpoint is None
    assert load_snapshot(open_storage(str(table)), str(table)).segment.checkpoint is None
    assert _lakeops_state(table) == before and _delta_rs_view(table) == before_rs
    written_early = {location: Path(location).read_bytes() for location in early}

    report = run_json(capsys, "checkpoint", str(table), "--part-size", "5", "--master", "local[2]")

    assert report["parts"] == len(plan.parts) and _pointer(table).parts == len(plan.parts)
    assert {location: Path(location).read_bytes() for location in early} == written_early  # same content
    copy = _without_covered_log(table, plan.version, tmp_path / "checkpoint-only")
    assert _delta_rs_view(copy) == before_rs
    assert _lakeops_state(copy) == before


def test_dry_run_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "events"
    _delta_rs_table(str(table), partitioned=False, appends=4)
    listed = _log_files(table)

    report = run_json(capsys, "checkpoint", str(table), "--dry-run", "--part-size", "3")

    assert report["dry_run"] and report["status"] == "planned" and report["parts"] >= 2 and report["bytes"] == 0
    assert _log_files(table) == listed


def test_an_existing_checkpoint_is_reported_and_kept_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = tmp_path / "events"
    _delta_rs_table(str(table), partitioned=False, appends=4)
    first = run_json(capsys, "checkpoint", str(table))
    listed = _log_files(table)

    again = run_json(capsys, "checkpoint", str(table))
    assert again["status"] == "already checkpointed" and again["parts"] == 0 and not again["last_checkpoint_updated"]
    assert _log_files(table) == listed

    forced = run_json(capsys, "checkpoint", str(table), "--force")
    assert forced["status"] == "written" and forced["version"] == first["version"]
    assert _log_files(table).keys() == listed.keys()


def test_unsupported_writer_features_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    protocol = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": [],
        "writerFeatures": ["madeUpWriterFeature"],
    }
    metadata = {
        "id": "x",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": '{"type":"struct","fields":[]}',
        "partitionColumns": [],
        "configuration": {},
    }
    (log / f"{0:020d}.json").write_text(json.dumps({"protocol": protocol}) + "\n" + json.dumps({"metaData": metadata}))

    code = lakeops(["checkpoint", str(tmp_path / "t")])

    err = capsys.readouterr().err
    assert code == 1 and "UnsupportedFeature" in err and "madeUpWriterFeature" in err
    assert sorted(os.listdir(log)) == [f"{0:020d}.json"]


def test_icechunk_has_no_checkpoints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A copy: the run leaves its audit record in the repository, and the fixtures are read-only.
    shutil.copytree(TESTDATA / "icechunk-seed-format" / "test-repo", tmp_path / "repo")
    report = run_json(capsys, "checkpoint", str(tmp_path / "repo"))
    assert (report["format"], report["status"], report["parts"]) == ("icechunk", "not applicable", 0)
    assert "there is no log to checkpoint" in report["reason"]

    assert lakeops(["checkpoint", str(tmp_path / "repo")]) == 0
    table = " ".join(capsys.readouterr().out.replace("│", " ").split())  # the words, however rich wraps them
    assert "no log to checkpoint" in table and "parts" not in table and "actions" not in table


def test_broken_iceberg_metadata_is_refused_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "v1.metadata.json").write_text("{}")
    assert lakeops(["checkpoint", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "ProtocolError" in err and "v1.metadata.json" in err and "format-version is missing" in err
    assert sorted(os.listdir(tmp_path / "metadata")) == ["v1.metadata.json"]
    # Nothing written to the table; the failed run leaves only its audit record (issue 10).
    assert sorted(os.listdir(tmp_path)) == ["_lakeops_audit", "metadata"]
    assert len(os.listdir(tmp_path / "_lakeops_audit")) == 1


@pytest.mark.s3
def test_multi_part_checkpoint_on_s3(
    spark: Any, s3_bucket: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local = tmp_path / "events"
    _delta_rs_table(str(local), partitioned=True, appends=6)
    uri = f"{s3_bucket.uri}/events"
    storage = open_storage(uri, s3_bucket.options)
    for path in local.rglob("*"):
        if path.is_file():
            storage.write(f"{uri}/{path.relative_to(local).as_posix()}", path.read_bytes())
    before = load_snapshot(storage, uri)

    report = run_json(capsys, "checkpoint", uri, "--endpoint-url", s3_bucket.options.endpoint_url, "--part-size", "4")

    assert report["parts"] >= 2
    storage.delete_many([info.path for info in storage.list(f"{uri}/_delta_log") if info.path.endswith(".json")])
    after = load_snapshot(storage, uri)
    assert after.segment.checkpoint is not None and after.segment.checkpoint.parts == report["parts"]
    assert {k: a.to_json_dict() for k, a in after.files.items()} == {
        k: a.to_json_dict() for k, a in before.files.items()
    }
    assert after.tombstones.keys() == before.tombstones.keys() and after.metadata == before.metadata


def test_spark_submit_entry_point_writes_a_multi_part_checkpoint(tmp_path: Path) -> None:
    table = tmp_path / "events"
    _delta_rs_table(str(table), partitioned=False, appends=4)
    before = _lakeops_state(table)
    spark_submit = Path(sys.executable).parent / "spark-submit"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    result = subprocess.run(
        [
            str(spark_submit),
            "--master",
            "local[1]",
            str(ROOT / "spark_jobs" / "checkpoint.py"),
            str(table),
            "--part-size",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["status"] == "written" and report["parts"] >= 2
    assert len(_checkpoint_files(table, before["version"])) == report["parts"]
    copy = _without_covered_log(table, before["version"], tmp_path / "checkpoint-only")
    assert _lakeops_state(copy) == before
    assert len(DeltaTable(str(copy)).file_uris()) == len(before["files"])
