"""Directories of a table that are symlinks out of it (issue 19, "What broke" 3), through ``lakeops``.

A top-level directory (``_delta_log``, Icechunk ``refs``/``chunks``, Iceberg ``metadata``, the trash,
the audit folder) or a partition directory that is a link to elsewhere passes every lexical check:
its paths start with the table root. Every command that deletes, moves or writes through one must
stop with an error naming the link and where it points, and change nothing outside the table (the
outside directory's files and bytes are compared before and after) nor what the table reads. Each
case failed before the one root check (:mod:`lakeops.storage.confined`) but Icechunk garbage
collection, which the per-batch check of ``delete_batch`` already covered. The plans are small and
run on the driver, so no Spark session starts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from reliability.linked import AUDIT, KINDS, RUN_ID, TRASH, link_out, run, tree, without_audit

CASES = [
    ("delta", TRASH, ("purge-trash", "--older-than", "0s")),
    ("delta", TRASH, ("orphans", "--older-than", "0s", "--force-short-retention", "--quarantine")),
    ("delta", "_delta_log", ("expire", "--older-than", "1d", "--force")),
    ("delta", "_delta_log", ("checkpoint", "--force")),
    ("delta", "p=a", ("compact", "--min-input-files", "2")),
    ("iceberg", "metadata", ("checkpoint", "--rewrite-all")),
    ("iceberg", "metadata", ("compact", "--min-input-files", "2")),
    ("iceberg", "metadata", ("expire", "--older-than", "0s", "--force", "--retain-last", "1")),
    ("iceberg", "data/category=a", ("compact", "--min-input-files", "2")),
    ("icechunk", "refs", ("expire", "--older-than", "0s", "--force")),
    ("icechunk", "chunks", ("compact",)),
    ("icechunk", "manifests", ("compact",)),
    ("icechunk", "snapshots", ("compact",)),
    ("icechunk", "chunks", ("orphans", "--older-than", "0s", "--force-short-retention")),
]


@pytest.mark.parametrize(("kind", "link", "command"), CASES, ids=[f"{k}-{d}-{c[0]}" for k, d, c in CASES])
def test_a_command_through_a_directory_linked_out_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, link: str, command: tuple[str, ...]
) -> None:
    table = KINDS[kind].build(tmp_path)
    outside = link_out(table.root, link, tmp_path / "elsewhere")
    before, rows = tree(outside), table.read()

    code, err = run(capsys, [command[0], *table.target, *command[1:]])

    assert code == 1 and "Traceback" not in err, err
    assert f"{table.root}/{link} is a symlink to {outside}, outside the table root" in err, err
    assert tree(outside) == before
    assert table.read() == rows


def test_audit_records_never_go_through_an_audit_dir_linked_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = KINDS["delta"].build(tmp_path)
    outside = link_out(table.root, AUDIT, tmp_path / "elsewhere")

    code, err = run(capsys, ["checkpoint", *table.target, "--force"])

    assert code == 0, err  # the run itself is fine; only its record cannot be written
    assert "no audit record written" in err and f"{AUDIT} is a symlink to {outside}" in err, err
    assert tree(outside) == {}


def _doctored_run(run_dir: Path, entry: str) -> None:
    """A quarantine run that moved ``entry`` (a path relative to the root), as a hostile writer leaves it."""
    record = {"path": entry, "size": 4, "kind": "data", "moved_at": "2020-01-01T00:00:00+00:00"}
    record |= {"run_id": RUN_ID, "operation": "orphans"}
    (run_dir / entry).parent.mkdir(parents=True, exist_ok=True)
    (run_dir / entry).write_bytes(b"evil")
    (run_dir / "_manifest-00000.jsonl").write_text(json.dumps(record) + "\n")


@pytest.mark.parametrize("linked", ["entry", "run"])
def test_restore_of_a_doctored_run_never_moves_through_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], linked: str
) -> None:
    """``entry``: a manifest entry names a path through a directory linked out of the table (the restore
    would write there); ``run``: the run directory itself is a link out (it would move files from there)."""
    table = KINDS["delta"].build(tmp_path)
    outside = tmp_path / "elsewhere"
    if linked == "entry":
        link_out(table.root, "linked", outside)
        _doctored_run(table.root / TRASH / RUN_ID, "linked/x.parquet")
    else:
        outside.mkdir()
        _doctored_run(outside, "part-0.parquet")
        (table.root / TRASH).mkdir()
        os.symlink(outside, table.root / TRASH / RUN_ID)
    before, files = tree(outside), tree(table.root)

    code, err = run(capsys, ["restore", *table.target, RUN_ID])

    assert code == 1 and "symlink" in err and "outside the table root" in err, err
    assert tree(outside) == before
    assert without_audit(tree(table.root)) == without_audit(files)
