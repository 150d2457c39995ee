"""``make ui`` as an on-call engineer runs it: started in the background (``make ui &``, which makes the
shell ignore SIGINT for it) or in a terminal, then stopped with ``kill`` or Ctrl-C. Either way every
process it started is gone: ``dagster dev`` used to map SIGTERM onto an ignored SIGINT and keep its six
processes running after make had been told to stop."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.long  # starts and stops dagster dev twice: CI's make test-long

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _session_alive(session: int) -> list[str]:
    """The processes still in ``session`` (ps: every process whose session id is the one make led)."""
    listed = subprocess.run(["ps", "-eo", "sid=,pid=,args="], capture_output=True, text=True, check=True).stdout
    return [line.strip() for line in listed.splitlines() if line.split(None, 1)[0] == str(session)]


def _demo(root: Path) -> Path:
    """A demo directory as ``make demo`` leaves it: a registry (one table) and a Dagster instance."""
    demo = root / "demo"
    (demo / "dagster_home").mkdir(parents=True)
    shutil.copy(ROOT / "dagster_home" / "dagster.yaml", demo / "dagster_home" / "dagster.yaml")
    (demo / "lakeops.yaml").write_text(f"tables:\n  - name: events\n    location: {root / 'events'}\n")
    return demo


def test_make_ui_before_make_demo_says_so(tmp_path: Path) -> None:
    done = subprocess.run(
        ["make", "-s", "ui", f"DEMO_DIR={tmp_path / 'none'}"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2 and f"no demo in {tmp_path / 'none'}: run make demo first" in done.stderr


@pytest.mark.parametrize(
    ("started", "stop"),
    [("in the background", signal.SIGTERM), ("in a terminal", signal.SIGINT)],
    ids=["kill", "ctrl-c"],
)
def test_make_ui_stops_every_process_it_started(started: str, stop: signal.Signals, tmp_path: Path) -> None:
    port = _free_port()
    demo = _demo(tmp_path)

    def as_started() -> None:
        if started == "in the background":
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # what `make ui &` gets from a shell

    make = subprocess.Popen(
        ["make", "ui", f"UI_PORT={port}", f"DEMO_DIR={demo}"],
        cwd=ROOT,
        start_new_session=True,  # its own session and process group, as a terminal's job would be
        preexec_fn=as_started,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        while not _listening(port):
            assert make.poll() is None, f"make ui exited with {make.returncode} before serving"
            assert time.monotonic() < deadline, "the UI never listened"
            time.sleep(1)
        if stop == signal.SIGTERM:
            make.send_signal(stop)  # `kill <make's pid>`
        else:
            os.killpg(make.pid, stop)  # Ctrl-C: the terminal signals the whole foreground group
        make.wait(timeout=90)  # TimeoutExpired: make itself never stopped
        deadline = time.monotonic() + 30
        while _session_alive(make.pid) and time.monotonic() < deadline:
            time.sleep(1)
        assert _session_alive(make.pid) == []
        assert not _listening(port)
    finally:
        if _session_alive(make.pid):
            os.killpg(make.pid, signal.SIGKILL)
