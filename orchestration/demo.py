"""``make demo``: a demo warehouse of all three formats, maintained once by every Dagster asset.

Under ``./.lakeops-demo`` it builds what a data team's ingestion leaves behind after six weeks:

- ``events``, a Delta table of 120 small appends partitioned by day (written by delta-rs; a checkpoint
  every 100 commits) whose log is kept for 7 days (``delta.logRetentionDuration``);
- ``orders``, an Iceberg table in a SQLite catalog (written by PyIceberg: 60 appends and a delete),
  whose table properties keep snapshots for a week and at least ten of them;
- ``arrays``, an Icechunk repository (written by lakeops' own writer) of 40 commits of small chunks,
  one a day;
- in each, the leftover of a failed write: a file nothing references, ten days old.

The history is dated over the six weeks before today, in the fields each format dates it by, so that
every maintenance operation has work on its first run: a Delta commit's time is its log file's
modification time (also written into ``commitInfo.timestamp``, which delta-rs' history shows); an
Iceberg snapshot's is its ``timestamp-ms``, restamped after PyIceberg wrote the history (PyIceberg takes
the clock's time and has no parameter for it) consistently in every metadata file, with the
``snapshot-log``, ``metadata-log`` and ``last-updated-ms`` that follow from it; an Icechunk snapshot's is
the time lakeops' writer is given. Every file is dated as the commit it was written for.

It writes the registry ``.lakeops-demo/lakeops.yaml`` (CDC on ``events`` and ``orders``), prints each
table's health, materializes every maintenance asset once through Dagster — one run per operation,
in the nightly order (CDC first, so retention knows what the consumer has extracted) — into the
persistent Dagster instance ``.lakeops-demo/dagster_home`` (so ``make ui`` shows the runs, their
metadata and checks), and prints the health again.
"""

import json
import os
import shutil
import sys
from bisect import bisect_left
from collections.abc import Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pyarrow as pa

from lakeops.delta import properties as delta_properties
from lakeops.iceberg import properties as iceberg_properties
from lakeops.icechunk.ids import decode_int, new_id
from lakeops.icechunk.refs import MAX_SEQUENCE
from lakeops.icechunk.snapshot import FillValue, ZarrArrayMetadata
from lakeops.icechunk.writer import ChangeSet, commit, init_repository
from lakeops.registry import Registry, TableEntry, load_registry
from lakeops.storage import LocalStorage
from orchestration.assets import operation_key, table_key
from orchestration.health import OVERVIEW_KEY
from orchestration.operations import maintained
from orchestration.planning import evaluate_planner
from orchestration.pools import register_pools
from orchestration.registry_definitions import build_definitions
from orchestration.resources import StorageResource

DEMO = Path(".lakeops-demo").resolve()
NOW = datetime.now(UTC)
DAY = timedelta(days=1)
#: Dagster's console log at INFO: the operations' progress lines, not every engine event.
QUIET = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}
#: Health numbers printed before and after, as inspect names them.
HEALTH = (
    "live_files",
    "small_files",
    "commits_since_checkpoint",
    "reclaimable_tombstones",
    "snapshots",
    "manifests",
    "chunk_objects",
    "packable_chunk_objects",
    "branch_files",
)


def _backdate(path: Path, when: datetime) -> None:
    os.utime(path, (when.timestamp(), when.timestamp()))


def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def commit_times(commits: int) -> list[datetime]:
    """When the demo's ``commits`` commits happened: evenly over the six weeks before yesterday."""
    return [NOW - 42 * DAY + i * (41 * DAY / commits) for i in range(commits)]


def _date_files(files: Iterable[Path], commits: list[tuple[int, datetime]]) -> None:
    """Date each file as the commit it was written for. ``commits`` pairs, in order, the real
    modification time (ns) of each commit's record (the file written last) with the time the demo
    gives that commit: a file gets the time of the first commit recorded at or after it was written."""
    recorded = [real for real, _ in commits]
    for path in list(files):
        _backdate(path, commits[min(bisect_left(recorded, path.stat().st_mtime_ns), len(commits) - 1)][1])


def build_delta(location: Path, appends: int = 120) -> None:
    """Small daily appends by delta-rs, dated over six weeks (module docstring)."""
    from deltalake import write_deltalake

    for i in range(appends):
        day = date(2026, 10, 1) + timedelta(days=i % 6)
        rows = pa.table(
            {
                "event_id": pa.array(range(i * 200, i * 200 + 200), pa.int64()),
                "user": pa.array([f"user-{(i * 200 + j) % 97}" for j in range(200)]),
                "amount": pa.array([(i * 200 + j) * 0.25 for j in range(200)], pa.float64()),
                "day": pa.array([day] * 200, pa.date32()),
            }
        )
        write_deltalake(
            str(location),
            rows,
            mode="append",
            partition_by=["day"],
            configuration={delta_properties.LOG_RETENTION_DURATION: "interval 7 days"},
        )
    log = location / "_delta_log"
    times = commit_times(appends)
    recorded = [(log / f"{version:020d}.json").stat().st_mtime_ns for version in range(appends)]
    _date_files(
        (p for p in location.rglob("*") if p.is_file() and log not in p.parents),
        list(zip(recorded, times, strict=True)),
    )
    for version, when in enumerate(times):
        _stamp_commit_info(log / f"{version:020d}.json", when)
        for path in log.glob(f"{version:020d}.*"):  # the commit, and the checkpoint written at it
            _backdate(path, when)
    pointer = log / "_last_checkpoint"
    if pointer.exists():
        _backdate(pointer, times[json.loads(pointer.read_text())["version"]])
    _plant_leftover(location / "day=2026-10-01")


def _stamp_commit_info(commit: Path, when: datetime) -> None:
    """Set the commit's ``commitInfo.timestamp`` (the time delta-rs' history shows) to ``when``."""
    lines = []
    for line in commit.read_text().splitlines():
        action = json.loads(line)
        if "commitInfo" in action:
            action["commitInfo"]["timestamp"] = _ms(when)
            line = json.dumps(action, separators=(",", ":"))
        lines.append(line)
    commit.write_text("\n".join(lines) + "\n")


def build_iceberg(root: Path, appends: int = 60) -> tuple[str, str]:
    """PyIceberg appends and one delete in a SQLite catalog; returns (catalog URI, identifier)."""
    from pyiceberg.catalog.sql import SqlCatalog

    uri = f"sqlite:///{root / 'catalog.db'}"
    (root / "warehouse").mkdir(parents=True)
    catalog = SqlCatalog("default", uri=uri, warehouse=f"file://{root / 'warehouse'}")
    catalog.create_namespace("shop")
    schema = pa.schema([("order_id", pa.int64()), ("customer", pa.string()), ("total", pa.float64())])
    table = catalog.create_table(
        "shop.orders",
        schema=schema,
        properties={
            iceberg_properties.MAX_SNAPSHOT_AGE_MS: "604800000",
            iceberg_properties.MIN_SNAPSHOTS_TO_KEEP: "10",
        },
    )
    for i in range(appends):
        ids = range(i * 100, i * 100 + 100)
        table.append(
            pa.table(
                {"order_id": list(ids), "customer": [f"c{n % 31}" for n in ids], "total": [n * 1.5 for n in ids]},
                schema=schema,
            )
        )
    table.delete("order_id < 150")
    location = Path(table.location().removeprefix("file://"))
    backdate_iceberg(location)
    _plant_leftover(location / "data")
    return uri, "shop.orders"


def backdate_iceberg(location: Path) -> None:
    """Restamp the history PyIceberg wrote under ``location`` as six weeks of commits (module docstring),
    in every metadata file alike. Each metadata file that adds snapshots is one commit: its snapshots
    get the commit's time (a millisecond apart, in sequence order), its ``last-updated-ms`` the newest of
    them; a file that adds none keeps its predecessor's time (the table's creation: a day before the
    first commit). ``snapshot-log`` and ``metadata-log`` entries follow by snapshot id and file name.
    Manifests and manifest lists hold no times."""
    files = sorted((location / "metadata").glob("*.metadata.json"))  # 00000-<uuid>, 00001-<uuid>, ...
    recorded = [path.stat().st_mtime_ns for path in files]
    documents = [json.loads(path.read_text()) for path in files]
    added: list[list[int]] = []
    for document in documents:
        known = {snapshot_id for ids in added for snapshot_id in ids}
        ordered = sorted(document["snapshots"], key=lambda snapshot: snapshot["sequence-number"])
        added.append([s["snapshot-id"] for s in ordered if s["snapshot-id"] not in known])
    times = iter(commit_times(sum(1 for ids in added if ids)))
    stamp: dict[int, int] = {}
    updated: dict[str, int] = {}
    previous = _ms(NOW - 43 * DAY)
    for path, ids in zip(files, added, strict=True):
        if ids:
            at = _ms(next(times))
            stamp.update({snapshot_id: at + k for k, snapshot_id in enumerate(ids)})
            previous = at + len(ids) - 1
        updated[path.name] = previous
    for path, document in zip(files, documents, strict=True):
        for snapshot in document["snapshots"]:
            snapshot["timestamp-ms"] = stamp[snapshot["snapshot-id"]]
        for entry in document["snapshot-log"]:
            entry["timestamp-ms"] = stamp[entry["snapshot-id"]]
        for entry in document["metadata-log"]:
            entry["timestamp-ms"] = updated[entry["metadata-file"].rsplit("/", 1)[-1]]
        document["last-updated-ms"] = updated[path.name]
        path.write_text(json.dumps(document, separators=(",", ":")))
    moments = [datetime.fromtimestamp(updated[path.name] / 1000, UTC) for path in files]
    _date_files(
        (p for p in location.rglob("*") if p.is_file() and p not in files), list(zip(recorded, moments, strict=True))
    )
    for path, when in zip(files, moments, strict=True):
        _backdate(path, when)


def build_icechunk(location: Path, commits: int = 40) -> None:
    """One commit of small chunks a day for ``commits`` days; objects dated by their commit."""
    storage, root = LocalStorage(), str(location)
    init_repository(storage, root, clock=_at(NOW - (commits + 1) * DAY))
    line = ZarrArrayMetadata(shape=(200,), data_type="uint8", chunk_shape=(1,), fill_value=FillValue("UInt8", 0))
    changes = ChangeSet().add_group("/", {"title": "demo"}).add_array("/line", line)
    commit(storage, root, changes, message="structure", clock=_at(NOW - commits * DAY))
    for k in range(commits):
        changes = ChangeSet()
        for j in range(10):
            changes.set_chunk("/line", ((k * 7 + j) % 200,), bytes([k % 256, j]) * 8)
        commit(storage, root, changes, message=f"day {k}", clock=_at(NOW - (commits - k - 1) * DAY))
    # A commit's branch file is written last; sequence 0 is the initial commit, 1 the structure.
    branch_files = sorted((location / "refs" / "branch.main").iterdir(), key=lambda path: path.stat().st_mtime_ns)
    dated = [
        (path.stat().st_mtime_ns, NOW - (commits - (MAX_SEQUENCE - decode_int(path.stem)) + 1) * DAY)
        for path in branch_files
    ]
    _date_files((p for p in location.rglob("*") if p.is_file() and "refs" not in p.parts), dated)
    for path, (_, when) in zip(branch_files, dated, strict=True):
        _backdate(path, when)
    leftover = location / "chunks" / new_id()  # a chunk a crashed writer stored but never committed
    leftover.write_bytes(b"uncommitted")
    _backdate(leftover, NOW - 10 * DAY)


def _at(when: datetime) -> Callable[[], datetime]:
    """A writer clock stopped at ``when``: the commit is dated then."""
    return lambda: when


def _plant_leftover(directory: Path) -> None:
    """What a writer that crashed before committing leaves: a file nothing references, ten days old."""
    directory.mkdir(parents=True, exist_ok=True)
    leftover = directory / "part-crashed-writer-0000.parquet"
    leftover.write_bytes(b"an uncommitted write" * 50)
    _backdate(leftover, NOW - 10 * DAY)


def write_registry(path: Path, iceberg: tuple[str, str]) -> None:
    uri, identifier = iceberg
    path.write_text(
        f"""# The demo registry (written by `make demo`; `make ui` serves it).
# A budget (a window every hour, so the demo's falls in one): the lakeops_planner sensor and the
# lakeops/maintenance_plan asset are in the demo too.
maintenance_budget: {{window: "0 * * * *", length: 1h, core_minutes: 60}}
# The overview's own runs write the health report with plots here, and link it.
health_report: {DEMO / "health.html"}
tables:
  - name: events
    location: {DEMO / "warehouse" / "events"}
    owners: [team:data-platform]
    compaction: {{min_input_files: 2, small_file_trigger: 10}}
    checkpoint: {{interval: 10}}
    orphans: {{older_than: 7d}}
    cdc: {{enabled: true, output: {DEMO / "warehouse" / "events_changes"}, start_date: {(NOW - 43 * DAY):%Y-%m-%d},
           key: [event_id]}}
  - name: orders
    catalog: {{uri: "{uri}"}}
    identifier: {identifier}
    compaction: {{min_input_files: 2, small_file_trigger: 10}}
    checkpoint: {{interval: 10}}
    orphans: {{older_than: 7d}}
    cdc: {{enabled: true, output: {DEMO / "warehouse" / "order_changes"}, start_date: {(NOW - 14 * DAY):%Y-%m-%d}}}
  - name: arrays
    location: {DEMO / "warehouse" / "arrays"}
    compaction: {{min_input_files: 2, small_file_trigger: 10}}
    expiry: {{older_than: 14d}}
    orphans: {{older_than: 7d}}
"""
    )


def observe_health(registry: Registry, instance: dg.DagsterInstance, title: str) -> None:
    """Observe every table through Dagster (the health observation the schedule records, with its
    health checks), render the overview as its schedule does, and print both."""
    print(f"\n== {title}", flush=True)
    result = _launch(registry, [table_key(entry) for entry in registry.tables], instance)
    for event in result.all_events:
        if event.event_type_value != "ASSET_OBSERVATION":
            continue
        observation = event.event_specific_data.asset_observation  # type: ignore[union-attr]
        numbers = {name: observation.metadata[name].value for name in HEALTH if name in observation.metadata}
        print(f"  {observation.asset_key.path[0]:8} " + "  ".join(f"{k}={v}" for k, v in numbers.items()), flush=True)
    failing = [c for c in result.get_asset_check_evaluations() if not c.passed]
    for check in sorted(failing, key=lambda c: (c.asset_key.path[0], c.severity.value)):
        print(f"  {check.asset_key.path[0]:8} {check.severity.value:5} {check.description}")
    overview = _launch(registry, [OVERVIEW_KEY], instance)
    (materialization,) = overview.asset_materializations_for_node("lakeops__overview")
    print(f"\n{materialization.metadata['tables'].value}", flush=True)


def record_plan(registry: Registry, instance: dg.DagsterInstance, now: datetime, cursor: str | None) -> str | None:
    """One evaluation of the ``lakeops_planner`` sensor at ``now`` (its plan of the window open then,
    or the review of the window ``cursor`` planned), recorded on lakeops/maintenance_plan as the daemon
    records it; printed. The demo runs every asset itself, so the review matches those runs."""
    assert registry.maintenance_budget is not None
    context = dg.build_sensor_context(instance=instance, cursor=cursor)
    result = evaluate_planner(registry, registry.maintenance_budget, context, StorageResource(), now)
    for event in result.asset_events or []:
        assert isinstance(event, dg.AssetMaterialization)
        instance.report_runless_asset_event(event)
        kind, summary = event.metadata["kind"].value, event.metadata["summary"].value
        print(f"\n== maintenance {kind} (lakeops/maintenance_plan)\n{summary}", flush=True)
    return result.cursor


def _launch(
    registry: Registry,
    keys: list[dg.AssetKey],
    instance: dg.DagsterInstance,
    *,
    partition_key: str | None = None,
    tags: dict[str, str] | None = None,
) -> dg.ExecuteInProcessResult:
    """A run of ``keys`` (with their checks) through the code location's own asset job, as the UI's
    "Materialize" launches it: the Runs page then shows the assets it was for, not an ephemeral job."""
    definitions = build_definitions(registry)
    job = definitions.resolve_implicit_job_def_def_for_assets(keys)
    assert job is not None, keys
    return job.execute_in_process(
        instance=instance,
        asset_selection=keys,
        partition_key=partition_key,
        run_config=QUIET,
        tags=tags,
        raise_on_error=False,
    )


def run_every_asset(registry: Registry, instance: dg.DagsterInstance) -> bool:
    """One Dagster run per (table, operation), CDC first; prints each outcome and check."""
    ok = True
    for entry in registry.tables:
        for operation in sorted(maintained(entry), key=lambda op: op != "cdc"):
            ok &= _materialize(registry, entry, operation, instance)
    return ok


def _materialize(registry: Registry, entry: TableEntry, operation: str, instance: dg.DagsterInstance) -> bool:
    print(f"\n$ dagster: materialize {entry.name}/{operation}", flush=True)
    key = operation_key(entry, operation)
    result = _launch(
        registry,
        [key],
        instance,
        partition_key=NOW.strftime("%Y-%m-%d") if operation == "cdc" else None,
        tags={"lakeops/demo": "true", "lakeops/table": entry.name, "lakeops/operation": operation},
    )
    for materialization in result.asset_materializations_for_node(f"{entry.name}__{operation}"):
        if materialization.asset_key != key:
            continue  # the overview the run rebuilt after it
        counts = {
            k: value.value
            for k, value in materialization.metadata.items()
            if isinstance(value, dg.IntMetadataValue) and value.value and not k.startswith("dagster/")
        }
        if counts:  # a CDC run also records the earlier days it covered, with no numbers of their own
            print("  " + "  ".join(f"{k}={v}" for k, v in counts.items()))
    for check in result.get_asset_check_evaluations():
        if check.asset_key == key:
            print(f"  check {check.check_name}: {'passed' if check.passed else 'FAILED'} — {check.description}")
    if not result.success:
        print(f"  run {result.run_id} failed: see `make ui`", flush=True)
    return result.success


def build_warehouse() -> Path:
    """The demo's tables, anew, and their registry (whose path it returns); the browser test of the
    UI builds them too."""
    shutil.rmtree(DEMO / "warehouse", ignore_errors=True)
    (DEMO / "warehouse").mkdir(parents=True)
    print(f"building the demo warehouse under {DEMO / 'warehouse'} ...", flush=True)
    build_delta(DEMO / "warehouse" / "events")
    iceberg = build_iceberg(DEMO / "warehouse" / "iceberg")
    build_icechunk(DEMO / "warehouse" / "arrays")
    registry_path = DEMO / "lakeops.yaml"
    write_registry(registry_path, iceberg)
    return registry_path


def run() -> int:
    registry_path = build_warehouse()
    registry = load_registry(registry_path)
    shutil.rmtree(DEMO / "dagster_home", ignore_errors=True)
    home = DEMO / "dagster_home"
    home.mkdir()
    shutil.copy(Path(__file__).parent.parent / "dagster_home" / "dagster.yaml", home / "dagster.yaml")

    os.environ["DAGSTER_HOME"] = str(home)
    with dg.DagsterInstance.get() as instance:
        register_pools(instance, registry)  # the demo's runs skip the queue, which would register them
        observe_health(registry, instance, "health before")
        cursor = record_plan(registry, instance, datetime.now(UTC), None)
        ok = run_every_asset(registry, instance)
        observe_health(registry, instance, "health after")
        record_plan(registry, instance, datetime.now(UTC) + timedelta(hours=1), cursor)
    print(f"\nregistry: {registry_path}\nsee the runs, metadata and checks in the UI: make ui")

    from spark_jobs.session import stop_session

    stop_session()  # end the JVM before the interpreter exits, not during its teardown
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(run())
