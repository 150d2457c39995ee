"""Compaction's options, each declared once (issue 35, item 2): the shared fields in
:mod:`lakeops.compaction_options`, each format's in its own model; the API's model, the command line's
arguments and help, the registry's policy keys and the refusal of another format's option all follow
from those declarations."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from icechunk_repos import build_history
from pydantic import ValidationError

from lakeops import api
from lakeops.compaction_options import CommitRetries, Sizing
from lakeops.delta.maintenance.options import DeltaCompactionOptions
from lakeops.errors import UsageError
from lakeops.iceberg.maintenance.options import IcebergCompactionOptions
from lakeops.icechunk.maintenance.options import IcechunkPackingOptions
from lakeops.ops.options import CatalogOptions, CompactionOptions
from lakeops.registry import CompactionPolicy, parse_registry
from lakeops.storage import open_storage

FORMATS = {"Delta": DeltaCompactionOptions, "Iceberg": IcebergCompactionOptions, "Icechunk": IcechunkPackingOptions}


def _declarers(model: type, name: str) -> list[str]:
    return [cls.__name__ for cls in model.__mro__ if name in vars(cls).get("__annotations__", {})]


@pytest.mark.parametrize("name", [n for n in CompactionOptions.model_fields if n not in CatalogOptions.model_fields])
def test_every_compaction_option_is_declared_by_one_model(name: str) -> None:
    assert len(_declarers(CompactionOptions, name)) == 1, _declarers(CompactionOptions, name)


def test_the_registry_policy_sets_the_options_own_fields() -> None:
    """``target_file_size`` and the commit retries are the options' fields, read alike: sizes and
    durations as the command line writes them."""
    entry = parse_registry(
        "tables:\n  - name: t\n    location: /t\n"
        "    compaction: {target_file_size: 64MB, commit_timeout: 10m, commit_retries: 3}\n"
    ).table("t")
    options = entry.compaction.run_options()
    assert set(options) == {*Sizing.model_fields, *CommitRetries.model_fields}
    assert options == {
        "target_file_size": 64 * 1024 * 1024,
        "min_input_files": 5,
        "commit_retries": 3,
        "commit_timeout": timedelta(minutes=10),
    }
    assert CompactionOptions(**options) == CompactionOptions(
        target_file_size="64MB", commit_timeout="10m", commit_retries=3
    )
    for field in options:
        assert _declarers(CompactionPolicy, field) == _declarers(CompactionOptions, field)


def test_a_bad_size_is_refused_naming_the_option() -> None:
    with pytest.raises(ValidationError, match=r"target_file_size\n.*bad size 'huge'"):
        CompactionOptions(target_file_size="huge")
    with pytest.raises(ValidationError, match="target_file_size"):
        DeltaCompactionOptions(target_file_size=0)
    assert IcebergCompactionOptions(min_file_size=0).min_file_size == 0  # a threshold nothing is below


def test_the_help_shows_each_format_s_options_in_its_group(capsys: pytest.CaptureFixture[str]) -> None:
    from spark_jobs.cli import main as lakeops

    with pytest.raises(SystemExit, match="0"):
        lakeops(["compact", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for title, model in FORMATS.items():
        section = out.split(f"{title}:", 1)[1]
        for name, field in model.model_fields.items():
            if name in vars(model).get("__annotations__", {}):
                flag = "--keep-dangling-deletes" if name == "remove_dangling_deletes" else "--" + name.replace("_", "-")
                assert flag in section and " ".join((field.description or "").split())[:40] in section, name
    assert "smallest group worth rewriting (default 5)" in out
    assert "largest group one task rewrites (default 100.0 GiB)" in out


def _delta(tmp_path: Path) -> str:
    location = tmp_path / "delta"
    for i in range(3):
        write_deltalake(str(location), pa.table({"id": [i]}), mode="append")
    return str(location)


@pytest.mark.parametrize(
    ("options", "flag"),
    [
        ({"min_file_size": 1}, "--min-file-size"),
        ({"remove_dangling_deletes": False}, "--keep-dangling-deletes"),
        ({"sort": True}, "--sort"),
        ({"branch": "dev"}, "--branch"),
    ],
)
def test_a_delta_table_refuses_another_format_s_option(tmp_path: Path, options: dict[str, object], flag: str) -> None:
    """Ignored, an Iceberg or Icechunk option would silently do nothing on a Delta table."""
    location = _delta(tmp_path)
    with pytest.raises(UsageError, match=rf"^{location}: {flag} does not apply to this table's format$"):
        api.compact(location, CompactionOptions(min_input_files=2, **options), dry_run=True)


def test_an_icechunk_repository_refuses_a_file_rewrite_option(tmp_path: Path) -> None:
    root = str(tmp_path / "repo")
    build_history(open_storage(root), root, commits=3)
    with pytest.raises(UsageError, match=r"--where, --commit-retries does not apply"):
        api.compact(root, CompactionOptions(where="a = 1", commit_retries=1), dry_run=True)
    report = api.compact(root, CompactionOptions(min_input_files=2, target_file_size="1MB"), dry_run=True)
    assert report.target_file_size == 1024 * 1024


def test_options_modules_import_no_format_code() -> None:
    """The command line builds its parser from these models: they must not pull in pyarrow."""
    import subprocess

    probe = (
        "import sys; import lakeops.ops.options; "
        "print(' '.join(m for m in sys.modules if m.split('.')[0] in ('pyarrow', 'numpy', 'fastavro')))"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == ""
