"""The local file system's compare-and-swap against writers that take no lock (issue 34, break 5).

The icechunk package replaces ``ref.json`` by renaming a staged file over it, without a lock. Here
such a writer lands before each file-system call of :meth:`LocalStorage.replace_if_match` in turn,
and the swap is killed before each of them in turn: the other writer's version is never overwritten,
and a killed swap leaves the file readable, as it was or as it was going to be, to lakeops' next
access. The calls are counted through the ``os`` the module uses.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from lakeops.errors import Superseded
from lakeops.storage import LocalStorage, local
from lakeops.storage.local import CLAIM_SUFFIX, is_abandoned_temp


class _Syscalls:
    """``os`` as :mod:`lakeops.storage.local` sees it: ``hook`` runs before each call of one of its functions."""

    def __init__(self, hook: Callable[[], None]) -> None:
        self._hook = hook

    def __getattr__(self, name: str) -> Any:
        real = getattr(os, name)
        if not callable(real) or isinstance(real, type):
            return real

        def call(*args: Any, **kwargs: Any) -> Any:
            self._hook()
            return real(*args, **kwargs)

        return call


def _rename_over(target: Path, data: bytes) -> None:
    """The other writer: a staged file renamed over ``target``, as the icechunk package writes a ref."""
    staged = target.with_name(f"{target.name}#1")
    staged.write_bytes(data)
    os.rename(staged, target)


def _at_call(step: int, act: Callable[[], None]) -> tuple[_Syscalls, list[bool]]:
    """An ``os`` that runs ``act`` once, before its call number ``step``; the list says whether it ran."""
    calls, fired = [0], [False]

    def hook() -> None:
        if calls[0] == step and not fired[0]:
            fired[0] = True
            act()
        calls[0] += 1

    return _Syscalls(hook), fired


def _case(tmp_path: Path, step: int, name: str) -> tuple[Path, Path, str]:
    """A directory of its own for ``step``, holding ``name`` (``b"read"``), and the token of that version."""
    directory = tmp_path / f"step-{step}"
    directory.mkdir()
    target = directory / name
    target.write_bytes(b"read")
    return directory, target, LocalStorage().read_versioned(str(target))[1]


def _leftovers(directory: Path, target: Path) -> list[str]:
    """Names in ``directory`` other than ``target`` and abandoned temporary files (none may be a claim)."""
    return sorted(p.name for p in directory.iterdir() if p != target and not is_abandoned_temp(p.name))


def test_a_writer_renaming_over_the_file_at_any_step_is_never_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outcomes: list[str] = []
    for step in range(100):
        directory, target, token = _case(tmp_path, step, "ref.json")
        storage = LocalStorage()
        syscalls, fired = _at_call(step, lambda target=target: _rename_over(target, b"theirs"))
        monkeypatch.setattr(local, "os", syscalls)
        try:
            storage.replace_if_match(str(target), b"ours", token)
            outcomes.append("replaced, then overwritten by the other writer")
        except Superseded:
            outcomes.append("superseded")
        finally:
            monkeypatch.setattr(local, "os", os)
        if not fired[0]:
            break  # the swap made fewer calls than ``step``: every step was tried
        assert target.read_bytes() == b"theirs", f"the other writer's version, renamed in before call {step}, is lost"
        assert _leftovers(directory, target) == [], f"call {step}"
    else:
        pytest.fail("the swap made more than 100 calls")
    assert target.read_bytes() == b"ours"  # untouched, the swap goes through
    assert "superseded" in outcomes and len(outcomes) > 5, outcomes


def test_a_swap_killed_at_any_step_leaves_the_file_readable_and_swappable(tmp_path: Path) -> None:
    for step in range(100):
        directory, target, token = _case(tmp_path, step, "repo")
        storage = LocalStorage()
        syscalls, _ = _at_call(step, lambda: os._exit(9))
        pid = os.fork()
        if pid == 0:  # the child swaps and is killed before call ``step``
            code = 1
            try:
                local.os = syscalls  # type: ignore[attr-defined]
                storage.replace_if_match(str(target), b"ours", token)
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) in (0, 9), f"the swap failed before call {step}"
        listed = {Path(info.path).name for info in storage.list(str(directory)) if not is_abandoned_temp(info.path)}
        assert listed == {"repo"}, f"killed before call {step}"
        assert storage.read(str(target)) in (b"read", b"ours")
        assert not any(p.name.endswith(CLAIM_SUFFIX) for p in directory.iterdir())
        if os.waitstatus_to_exitcode(status) == 0:
            assert storage.read(str(target)) == b"ours"  # the swap ran to its end: every step was tried
            break
        data, token = storage.read_versioned(str(target))
        storage.replace_if_match(str(target), data + b" again", token)
        assert storage.read(str(target)) == data + b" again"
    else:
        pytest.fail("the swap made more than 100 calls")
    assert step > 5


def test_every_read_puts_back_a_file_a_killed_swap_left_aside(tmp_path: Path) -> None:
    storage = LocalStorage()
    target = tmp_path / "ref.json"
    claim = tmp_path / f".ref.json{CLAIM_SUFFIX}"
    reads: list[tuple[Callable[[], object], object]] = [
        (lambda: storage.read(str(target)), b"kept"),
        (lambda: storage.read_range(str(target), 1, 2), b"ep"),
        (lambda: storage.read_versioned(str(target))[0], b"kept"),
        (lambda: storage.stat(str(target)).size, 4),
        (lambda: storage.exists(str(target)), True),
        (lambda: [Path(info.path).name for info in storage.list(str(tmp_path))], ["ref.json"]),
    ]
    for read, expected in reads:
        claim.write_bytes(b"kept")
        assert read() == expected
        assert target.read_bytes() == b"kept" and not claim.exists()
        target.unlink()


def test_a_version_placed_while_a_killed_swap_held_the_old_one_stands(tmp_path: Path) -> None:
    storage = LocalStorage()
    target = tmp_path / "ref.json"
    (tmp_path / f".ref.json{CLAIM_SUFFIX}").write_bytes(b"old")
    target.write_bytes(b"newer")
    names = [Path(info.path).name for info in storage.list(str(tmp_path))]
    assert "ref.json" in names and not any(name.endswith(CLAIM_SUFFIX) for name in names)
    assert storage.read(str(target)) == b"newer"
    (kept,) = (p for p in tmp_path.iterdir() if is_abandoned_temp(p.name))  # removed by cleanup, past its floor
    assert kept.read_bytes() == b"old"


@contextmanager
def _swap_in_progress(directory: Path) -> Iterator[None]:
    """What another process's swap holds while it compares: the directory's lock, the file aside."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def test_a_reader_waits_for_a_swap_in_progress_and_reads_its_outcome(tmp_path: Path) -> None:
    target = tmp_path / "ref.json"
    claim = tmp_path / f".ref.json{CLAIM_SUFFIX}"
    claim.write_bytes(b"old")
    read: list[bytes] = []
    with _swap_in_progress(tmp_path):
        reader = threading.Thread(target=lambda: read.append(LocalStorage().read(str(target))))
        reader.start()
        reader.join(timeout=0.3)
        assert reader.is_alive(), "the reader did not wait for the swap"
        target.write_bytes(b"new")  # the swap links its version in and drops the claim
        claim.unlink()
    reader.join(timeout=10)
    assert read == [b"new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ref.json"]
