"""The one root check (lakeops.storage.confined): every delete, move and write of a storage opened for a
root stays inside it, symlinks resolved on local disk, lexically on S3; a refused call touches nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lakeops.errors import OutsideRoot, UnsafeOperation
from lakeops.storage import ConfinedStorage, LocalStorage, open_storage
from lakeops.storage.confined import os as confined_os


@pytest.fixture
def table(tmp_path: Path) -> tuple[Path, Path]:
    """A table root with ``data/part-0`` and a directory ``linked`` that is a symlink to ``outside``."""
    root, outside = tmp_path / "t", tmp_path / "outside"
    (root / "data").mkdir(parents=True)
    (root / "data" / "part-0").write_bytes(b"live")
    outside.mkdir()
    (outside / "victim").write_bytes(b"not the table's")
    (root / "linked").symlink_to(outside)
    return root, outside


def test_refusal_is_an_unsafe_operation_naming_table_path_and_link(table: tuple[Path, Path]) -> None:
    root, outside = table
    with pytest.raises(OutsideRoot) as info:
        open_storage(str(root)).delete_many([str(root / "linked" / "victim")])
    assert isinstance(info.value, UnsafeOperation)
    message = str(info.value)
    assert message.startswith(f"{root}: refusing to delete {root}/linked/victim: ")
    assert f"{root}/linked is a symlink to {outside}, outside the table root {root}" in message
    assert (outside / "victim").exists()


@pytest.mark.parametrize(
    "call",
    [
        lambda s, r: s.write(f"{r}/linked/new", b"x"),
        lambda s, r: s.put_if_absent(f"{r}/linked/new", b"x"),
        lambda s, r: s.copy_if_absent(f"{r}/data/part-0", f"{r}/linked/new"),
        lambda s, r: s.move_if_absent(f"{r}/data/part-0", f"{r}/linked/new"),
        lambda s, r: s.move_if_absent(f"{r}/linked/victim", f"{r}/data/back"),
        lambda s, r: s.delete_many([f"{r}/data/part-0", f"{r}/linked/victim"]),  # the first is not deleted
        lambda s, r: s.prune(f"{r}/linked"),
        lambda s, r: s.write(f"{r}/../outside/new", b"x"),
        lambda s, r: s.write(str(r), b"x"),  # the root is a directory, not an object
    ],
)
def test_every_change_through_a_link_out_is_refused_and_touches_nothing(table: tuple[Path, Path], call: object) -> None:
    root, outside = table
    before = sorted(p.name for p in outside.iterdir()), sorted(p.name for p in (root / "data").iterdir())
    with pytest.raises(OutsideRoot):
        call(open_storage(str(root)), root)  # type: ignore[operator]
    assert (sorted(p.name for p in outside.iterdir()), sorted(p.name for p in (root / "data").iterdir())) == before


def test_a_root_reached_through_a_symlink_is_fine(tmp_path: Path) -> None:
    real = tmp_path / "warehouse-disk" / "t"
    real.mkdir(parents=True)
    (tmp_path / "warehouse").symlink_to(tmp_path / "warehouse-disk")
    storage = open_storage(str(tmp_path / "warehouse" / "t"))
    storage.write(str(tmp_path / "warehouse" / "t" / "_delta_log" / "0.json"), b"{}")
    storage.delete_many([str(tmp_path / "warehouse" / "t" / "_delta_log" / "0.json")])
    assert not (real / "_delta_log" / "0.json").exists()


def test_a_link_inside_the_table_to_inside_the_table_is_fine(tmp_path: Path) -> None:
    root = tmp_path / "t"
    (root / "data").mkdir(parents=True)
    (root / "alias").symlink_to(root / "data")
    open_storage(str(root)).write(str(root / "alias" / "f"), b"x")
    assert (root / "data" / "f").read_bytes() == b"x"


def test_a_symlinked_file_is_acted_on_as_the_link(table: tuple[Path, Path]) -> None:
    root, outside = table
    (root / "data" / "link-file").symlink_to(outside / "victim")
    open_storage(str(root)).delete_many([str(root / "data" / "link-file")])
    assert not (root / "data" / "link-file").is_symlink() and (outside / "victim").read_bytes() == b"not the table's"


def test_nested_roots_all_hold(tmp_path: Path) -> None:
    """An Iceberg data path inside the location that is itself a link out is still refused."""
    root, outside = tmp_path / "t", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "data").symlink_to(outside)
    storage = open_storage(str(root), also=[str(root / "data")])
    with pytest.raises(OutsideRoot, match="data is a symlink"):
        storage.write(str(root / "data" / "f"), b"x")
    elsewhere = open_storage(str(root), also=[str(outside)])  # a data path outside the location: its own root
    elsewhere.write(str(outside / "f"), b"x")
    assert (outside / "f").exists()


def test_directories_are_resolved_once_per_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    files = [root / f"p={i % 3}" / f"f{i}" for i in range(300)]
    for file in files:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(b"")
    calls: list[str] = []
    real = os.path.realpath
    monkeypatch.setattr(confined_os.path, "realpath", lambda p: calls.append(p) or real(p))
    assert open_storage(str(root)).delete_many(str(f) for f in files) == 300
    assert sorted(calls) == sorted([str(root), *(str(root / f"p={i}") for i in range(3))])
    assert not any(f.exists() for f in files)


def test_s3_is_checked_lexically_without_touching_the_local_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(confined_os.path, "realpath", lambda p: pytest.fail(f"resolved {p} on S3"))
    storage = ConfinedStorage(LocalStorage(), "s3://bucket/t")
    assert storage.confine(["s3a://bucket/t/data/x"], "delete") == ["s3://bucket/t/data/x"]
    for outside in ("s3://bucket/t2/x", "s3://other/t/x", "s3://bucket/t/../x"):
        with pytest.raises(OutsideRoot, match="not inside the table root s3://bucket/t"):
            storage.confine([outside], "delete")


def test_confining_again_replaces_the_roots(tmp_path: Path) -> None:
    storage = ConfinedStorage(open_storage(str(tmp_path / "a")), str(tmp_path / "b"))
    assert isinstance(storage.inner, LocalStorage) and storage.roots == (str(tmp_path / "b"),)
