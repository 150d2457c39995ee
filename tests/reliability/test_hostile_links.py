"""Hostile table layouts (issue 19): directories linked out of the table, doctored Iceberg metadata logs.

Generated, not hand-picked: which of a table's directories are symlinks to elsewhere (``_delta_log``,
partitions, Iceberg ``metadata``/``data``, Icechunk ``refs``/``snapshots``/``manifests``/``chunks``,
the trash with a run-id-shaped directory in it, the audit folder), for every command that deletes,
moves or writes (:mod:`reliability.linked`); and which entries a metadata log names (this table's old
metadata, live data files, files behind a link or elsewhere, the current metadata file and manifest
list, strings that are no location) with ``write.metadata.delete-after-commit.enabled``. Whatever the
command does, it exits 0 or with a LakeopsError, nothing outside the table changes (the outside
directory's files and bytes are compared before and after) and the table reads the same afterwards.

Budget: every example builds a fresh table and runs the command line (about a second), so each
property runs a tenth of ``LAKEOPS_FUZZ_EXAMPLES`` (at least 3; see :mod:`reliability.hostile`).
"""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from pyiceberg_tables import rows_of, small_file_table
from reliability.hostile import EXAMPLES, FUZZ
from reliability.linked import KINDS, link_out, run, tree

LINK_FUZZ = settings(FUZZ, max_examples=max(3, EXAMPLES // 10))


def _nested(dirs: list[str]) -> bool:
    return any(a != b and b.startswith(f"{a}/") for a in dirs for b in dirs)


@pytest.mark.parametrize("kind", sorted(KINDS))
@LINK_FUZZ
@given(data=st.data())
def test_no_command_changes_anything_outside_through_linked_directories(
    kind: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = KINDS[kind]
    links = data.draw(
        st.lists(st.sampled_from(spec.dirs), min_size=1, max_size=3, unique=True).filter(lambda d: not _nested(d)),
        label="linked",
    )
    command = data.draw(st.sampled_from(spec.commands), label="command")
    work = tmp_path_factory.mktemp(kind)
    table = spec.build(work)
    outside = work / "elsewhere"
    for name in links:
        link_out(table.root, name, outside)
    before, rows = tree(outside), table.read()

    code, err = run(capsys, [command[0], *table.target, *command[1:]])
    event("refused" if "outside the table root" in err else f"exit {code}")

    assert code in (0, 1) and "Traceback" not in err, err
    assert code == 0 or "error:" in err, err
    assert tree(outside) == before, f"{command} changed files outside the table through {links}: {err}"
    assert table.read() == rows


#: ``write.metadata.previous-versions-max`` is drawn; every trimmed entry is a delete candidate.
TRIMMING = {"write.metadata.delete-after-commit.enabled": "true"}
ENTRY_KINDS = ["old", "live", "linked", "escaping", "other-table", "outside", "current", "manifest-list", "text"]


@LINK_FUZZ
@given(
    keep=st.integers(1, 3),
    kinds=st.lists(st.sampled_from(ENTRY_KINDS), max_size=6),
    text=st.text(max_size=20),
    spelled_as_uri=st.booleans(),
)
def test_a_doctored_metadata_log_never_deletes_more_than_old_metadata(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    keep: int,
    kinds: list[str],
    text: str,
    spelled_as_uri: bool,
) -> None:
    work = tmp_path_factory.mktemp("iceberg")
    properties = TRIMMING | {"write.metadata.previous-versions-max": str(keep)}
    table = small_file_table(work, appends=2, rows=5, properties=properties)
    rows = rows_of(table.table.scan().to_arrow())
    root, current = Path(table.location), Path(table.table.metadata_location.removeprefix("file://"))
    name = f"00001-{uuid.uuid4()}.metadata.json"
    outside = work / "elsewhere"
    outside.mkdir()
    (outside / name).write_text("{}")
    (root / "metadata" / "linked").symlink_to(outside)
    other = work / "other" / "metadata" / name
    other.parent.mkdir(parents=True)
    other.write_text("{}")
    old = root / "metadata" / f"00000-{uuid.uuid4()}.metadata.json"
    shutil.copy(current, old)
    live = Path(next(iter(table.table.scan().plan_files())).file.file_path.removeprefix("file://"))
    snapshot = table.table.current_snapshot()
    assert snapshot is not None
    entries = {
        "old": str(old),
        "live": str(live),
        "linked": str(root / "metadata" / "linked" / name),
        "escaping": f"{root}/metadata/../../../../other/metadata/{name}",
        "other-table": str(other),
        "outside": str(outside / name),
        "current": str(current),
        "manifest-list": snapshot.manifest_list.removeprefix("file://"),
        "text": text,
    }
    log = [entries[k] if k == "text" or not spelled_as_uri else f"file://{entries[k]}" for k in kinds]
    document = json.loads(current.read_text())
    document["metadata-log"] = [{"metadata-file": f, "timestamp-ms": 1} for f in log]
    current.write_text(json.dumps(document))
    survivors = {p: p.read_bytes() for p in (live, other, current, outside / name, old)}
    before = tree(outside)

    code, err = run(capsys, ["checkpoint", table.identifier, "--catalog-uri", table.catalog_uri, "--rewrite-all"])

    assert code == 0, err  # the commit lands whatever the log says
    trimmed = [*kinds, "current"][:-keep]
    kept = [*kinds, "current"][-keep:]
    if "old" in trimmed and "old" not in kept:
        del survivors[old]
        assert not old.exists(), "this table's old metadata file, trimmed off the log, was not deleted"
    assert {p: p.read_bytes() for p in survivors if p.exists()} == survivors, f"deleted: {log}"
    assert tree(outside) == before
    assert rows_of(table.reload().scan().to_arrow()) == rows
