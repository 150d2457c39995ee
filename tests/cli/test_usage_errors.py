"""Exit status 2 for every usage error of every command (README, "Exit status"): malformed durations,
sizes, numbers, run ids and predicates, unknown or missing arguments — caught while parsing — and
options the table's format does not take, caught once the table is read. One table of cases; each
names the option (or argument) in its message and changes no table file."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyiceberg_tables import small_file_table

from spark_jobs.cli import main as lakeops

DELTA = "{delta}"  # replaced by the Delta table's location
ICEBERG = ["{iceberg}", "--catalog-uri", "{catalog}"]

CASES: list[tuple[list[str], str]] = [
    # sizes
    (["compact", DELTA, "--target-file-size", "12XB"], "--target-file-size: bad size '12XB'"),
    (["compact", DELTA, "--target-file-size=-1MB"], "--target-file-size: bad size '-1MB'"),
    (["compact", DELTA, "--target-file-size", "0"], "target_file_size: Input should be greater than 0"),
    (["compact", DELTA, "--max-file-group-size", "1XB"], "--max-file-group-size: bad size '1XB'"),
    (["compact", DELTA, "--max-rewrite-bytes", "1XB"], "--max-rewrite-bytes: bad size '1XB'"),
    (["compact", DELTA, "--max-rewrite-bytes", "0"], "max_rewrite_bytes: Input should be greater than 0"),
    (["checkpoint", DELTA, "--target-manifest-size", "8QB"], "--target-manifest-size: bad size '8QB'"),
    # durations
    (["compact", DELTA, "--commit-timeout", "5x"], "--commit-timeout: bad duration '5x'"),
    (["expire", DELTA, "--older-than", "7x"], "--older-than"),
    (["orphans", DELTA, "--older-than=-1d"], "--older-than"),
    (["purge-trash", DELTA, "--older-than", "x"], "--older-than: bad duration 'x'"),
    # numbers
    (["compact", DELTA, "--min-input-files", "x"], "--min-input-files: invalid int value: 'x'"),
    (["compact", DELTA, "--min-input-files", "0"], "min_input_files: Input should be greater than or equal to 1"),
    (["compact", DELTA, "--dv-purge-ratio", "abc"], "--dv-purge-ratio: invalid float value: 'abc'"),
    (["compact", DELTA, "--dv-purge-ratio", "2"], "dv_purge_ratio: Input should be less than or equal to 1"),
    (["compact", DELTA, "--partial-progress", "0"], "partial_progress: Input should be greater than or equal to 1"),
    (["compact", DELTA, "--commit-retries", "-1"], "commit_retries: Input should be greater than or equal to 0"),
    (["checkpoint", DELTA, "--part-size", "-1"], "--part-size: expected a positive integer, got '-1'"),
    (["checkpoint", DELTA, "--part-size", "0"], "--part-size: expected a positive integer, got '0'"),
    (["checkpoint", DELTA, "--version", "x"], "--version: invalid int value: 'x'"),
    (["checkpoint", DELTA, "--version", "-5"], "version: Input should be greater than or equal to 0"),
    (["expire", DELTA, "--retain-last", "x"], "--retain-last: invalid int value: 'x'"),
    (["expire", DELTA, "--retain-last", "0"], "retain_last: Input should be greater than or equal to 1"),
    (["expire", DELTA, "--keep-from-version", "-1"], "keep_from_version: Input should be greater than or equal to 0"),
    (["expire", DELTA, "--snapshot-id", "abc"], "--snapshot-id: invalid int value: 'abc'"),
    (["orphans", DELTA, "--listing-threshold", "x"], "--listing-threshold: invalid int value: 'x'"),
    (["inspect", DELTA, "--version", "-1"], "version: Input should be greater than or equal to 0"),
    (["inspect", DELTA, "--snapshot-id", "q"], "--snapshot-id: invalid int value: 'q'"),
    # other values
    (["inspect", DELTA, "--timestamp", "yesterday"], "--timestamp: Invalid isoformat string: 'yesterday'"),
    (["compact", DELTA, "--where", "day >= "], "--where 'day >= ': missing value after >="),
    (["compact", DELTA, "--where", "a = 1 OR b = 2"], "OR is not supported"),
    (["compact", DELTA, "--conf", "novalue"], "--conf: expected KEY=VALUE, got 'novalue'"),
    (["orphans", DELTA, "--prefix-mismatch-mode", "maybe"], "--prefix-mismatch-mode: invalid choice: 'maybe'"),
    (["restore", DELTA, "../../etc"], "RUN_ID: '../../etc' is not a lakeops run id"),
    (["compact", ""], "argument table: a table location or name must not be empty"),
    (["cdc", DELTA, "--from", "0", "--output", ""], "--output: a table location or name must not be empty"),
    # unknown, missing and conflicting arguments
    (["compact", DELTA, "--bogus"], "unrecognized arguments: --bogus"),
    (["compact"], "the following arguments are required: table"),
    (["restore", DELTA], "the following arguments are required: RUN_ID"),
    (["cdc", DELTA, "--from", "0"], "the following arguments are required: --output"),
    (["cdc", DELTA, "--output", "out"], "the following arguments are required: --from"),
    (["inspect", DELTA, "--version", "1", "--snapshot-id", "2"], "not allowed with argument --version"),
    (["vacuum", DELTA], "invalid choice: 'vacuum'"),
    ([], "the following arguments are required: command"),
    # found once the table is read: a value malformed for its format, an option it does not have
    (["cdc", DELTA, "--from", "garbage", "--output", "out"], "--from 'garbage' is not a table version"),
    (["cdc", DELTA, "--from", "0", "--to", "zz", "--output", "out"], "--to 'zz' is not a table version"),
    (["expire", DELTA, "--snapshot-id", "1"], "--snapshot-id does not apply to this table's format"),
    (
        ["orphans", DELTA, "--prefix-mismatch-mode", "ignore"],
        "--prefix-mismatch-mode does not apply to this table's format",
    ),
    (["inspect", DELTA, "--snapshot-id", "1"], "--snapshot-id is for Iceberg tables"),
    (["inspect", *ICEBERG, "--version", "1"], "Iceberg tables are inspected at a --snapshot-id, not a --version"),
    (["orphans", *ICEBERG, "--keep-from-version", "1"], "--keep-from-version does not apply"),
    (["checkpoint", DELTA, "--rewrite-all"], "--rewrite-all does not apply to this table's format"),
    (["checkpoint", DELTA, "--target-manifest-size", "8MB"], "--target-manifest-size does not apply"),
    (["checkpoint", *ICEBERG, "--part-size", "10", "--force"], "--part-size, --force does not apply"),
    (["inspect", *ICEBERG, "--catalog-id", "1"], "--catalog-region and --catalog-id apply to a Glue catalog only"),
    (["compact", "db.t", "--catalog-type", "hive"], "--catalog-type: invalid choice: 'hive'"),
    (["inspect", *ICEBERG, "--catalog-token-env", "T"], "--catalog-token-env: only a REST catalog takes them"),
    (
        ["inspect", *ICEBERG, "--catalog-no-vended-credentials"],
        "--catalog-no-vended-credentials: only a REST catalog takes them",
    ),
    (["inspect", "db.t", "--catalog-type", "rest"], "db.t: --catalog-uri: missing; a REST catalog is reached"),
]


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("usage")
    for i in range(2):
        write_deltalake(str(root / "delta"), pa.table({"id": [i]}), mode="append")
    iceberg = small_file_table(root / "iceberg", appends=2, rows=3)
    return {"delta": str(root / "delta"), "iceberg": iceberg.identifier, "catalog": iceberg.catalog_uri}


def _files(root: Path) -> dict[str, int]:
    """The tables' files (a refused run of an audited command still leaves its audit record)."""
    return {str(p): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file() and "_lakeops_audit" not in p.parts}


@pytest.mark.parametrize(("argv", "message"), CASES, ids=[" ".join(argv).replace("/", "_") for argv, _ in CASES])
def test_usage_errors_exit_2(
    argv: list[str],
    message: str,
    tables: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # a relative --output lands here, if anything wrote one
    argv = [arg.format(**tables) for arg in argv]
    before = _files(Path(tables["delta"]).parent)
    try:
        code = lakeops(argv)
    except SystemExit as usage:  # argparse's own
        code = int(usage.code or 0)
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert _files(Path(tables["delta"]).parent) == before and not _files(tmp_path)
