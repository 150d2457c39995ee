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
from pyiceberg_tables import small_file_table

from lakeops import api
from lakeops.compaction_options import CommitRetries, Sizing
from lakeops.delta.maintenance.options import DeltaCompactionOptions
from lakeops.errors import UsageError
from lakeops.iceberg.maintenance.defaults import DEFAULT_OLDER_THAN
from lakeops.iceberg.maintenance.options import IcebergCompactionOptions
from lakeops.icechunk.maintenance.options import IcechunkPackingOptions
from lakeops.ops.options import CatalogOptions, CheckpointOptions, CompactionOptions, ExpiryOptions, OrphansOptions
from lakeops.registry import CompactionPolicy, ExpiryPolicy, OrphansPolicy, parse_registry
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


# Every other command's options, declared once the same way (issue 35, item 2).


@pytest.mark.parametrize(
    ("model", "formats"),
    [
        (CheckpointOptions, CheckpointOptions.formats),
        (ExpiryOptions, ExpiryOptions.formats),
        (OrphansOptions, OrphansOptions.formats),
    ],
    ids=["checkpoint", "expire", "orphans"],
)
def test_every_option_of_a_command_is_declared_by_one_model(model: type, formats: tuple[type, ...]) -> None:
    for name in model.model_fields:
        assert len(_declarers(model, name)) == 1, (name, _declarers(model, name))
    assert {n for f in formats for n in f.model_fields} == set(model.model_fields) - set(CatalogOptions.model_fields)


def test_the_registry_policies_are_the_options_own_fields() -> None:
    for policy, options in ((ExpiryPolicy, ExpiryOptions), (OrphansPolicy, OrphansOptions)):
        for name in policy.model_fields:
            assert _declarers(policy, name) == _declarers(options, name), name
    with pytest.raises(ValidationError, match=r"older_than\n.*bad duration 'soon'"):
        ExpiryOptions(older_than="soon")
    assert ExpiryOptions(older_than="30d").older_than == "30d"  # kept as written, for the audit record


def test_the_orphans_default_retention_in_the_help_is_iceberg_s() -> None:
    assert f"Iceberg {DEFAULT_OLDER_THAN.days} days" in (OrphansOptions.model_fields["older_than"].description or "")


@pytest.mark.parametrize(
    ("options", "flags"),
    [
        ({"target_manifest_size": 8 << 20}, "--target-manifest-size"),
        ({"rewrite_all": True}, "--rewrite-all"),
    ],
)
def test_a_delta_checkpoint_refuses_iceberg_s_manifest_options(
    tmp_path: Path, options: dict[str, object], flags: str
) -> None:
    """Silently ignored until now: a Delta checkpoint has no manifests."""
    location = _delta(tmp_path)
    with pytest.raises(UsageError, match=rf"^{location}: {flags} does not apply to this table's format$"):
        api.checkpoint(location, CheckpointOptions(**options), dry_run=True)


@pytest.mark.parametrize(
    ("options", "flags"),
    [
        ({"part_size": 10}, "--part-size"),
        ({"force": True}, "--force"),
        ({"part_size": 5, "force": True}, "--part-size, --force"),
    ],
)
def test_an_iceberg_checkpoint_refuses_delta_s_options(tmp_path: Path, options: dict[str, object], flags: str) -> None:
    """Silently ignored until now: a manifest rewrite has no parts and never finds its work done."""
    table = small_file_table(tmp_path, appends=2, rows=3)
    given = CheckpointOptions(catalog_uri=table.catalog_uri, **options)
    refused = rf"^default\.{table.identifier}: {flags} does not apply to this table's format$"
    with pytest.raises(UsageError, match=refused):
        api.checkpoint(table.identifier, given, dry_run=True)


def test_an_icechunk_checkpoint_refuses_every_checkpoint_option(tmp_path: Path) -> None:
    """Silently ignored until now: a repository has no checkpoint, so none of them does anything."""
    root = str(tmp_path / "repo")
    build_history(open_storage(root), root, commits=3)
    given = CheckpointOptions(version=1, part_size=5, force=True, target_manifest_size=1 << 20, rewrite_all=True)
    flags = "--version, --part-size, --force, --target-manifest-size, --rewrite-all"
    with pytest.raises(UsageError, match=rf"^{root}: {flags} does not apply to this table's format$"):
        api.checkpoint(root, given, dry_run=True)
    assert api.checkpoint(root, CheckpointOptions(), dry_run=True).status == "not applicable"


def test_every_command_s_help_is_its_models(capsys: pytest.CaptureFixture[str]) -> None:
    """The arguments are generated from the fields: each field's description is its help."""
    from spark_jobs.cli import main as lakeops

    for command, model in (("checkpoint", CheckpointOptions), ("expire", ExpiryOptions), ("orphans", OrphansOptions)):
        with pytest.raises(SystemExit, match="0"):
            lakeops([command, "--help"])
        out = " ".join(capsys.readouterr().out.split())
        for name, field in model.model_fields.items():
            if name not in CatalogOptions.model_fields:
                assert " ".join((field.description or "").split())[:40] in out, (command, name)
