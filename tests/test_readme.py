"""README.md's commands run exactly as written, from a fresh copy of the repository (issue 20, item 5:
its backfill command failed as written — the registry and instance variables were not shown, and
``.venv/bin`` is not on a new user's ``PATH``).

Every command of the README's ``bash`` blocks is run, block by block in one shell each (so ``source``
and ``export`` carry to the next lines), in a copy of the files a clone would hold, by a user whose
environment has neither ``.venv/bin`` nor any lakeops or Dagster variable; the copy reuses this
checkout's ``.venv`` through a symlink, dated so that ``make`` does not reinstall into it. A command
that cannot run in a test is in :data:`EXCLUDED` with the reason; the minutes-long ones run in the slow
test only (:data:`SLOW`). Inline code that is a complete command (a ``make`` target, or an invocation
with options and no placeholder) must be one of the block commands or excluded, so a new command in
the README is either run here or consciously excluded.

The ``python`` blocks run after them, with the demo's registry (``LAKEOPS_REGISTRY``) as the README
exports it. ``make demo`` is the first command: its report must show every maintenance operation doing work on
its first run (the demo's backdated history), and its tables must still read afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from deltalake import DeltaTable
from pyiceberg.catalog.sql import SqlCatalog

from lakeops.icechunk.repository import Repository

pytestmark = [pytest.mark.orchestration, pytest.mark.long]  # long: CI runs it as its own stage (make test-long)

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: Commands of README.md that this test does not run, with the reason.
EXCLUDED: dict[str, str] = {
    "make test": "the quick suite (.ci/run runs it)",
    "make test-long": "the suite this test is part of (.ci/run runs it after make test)",
    "make test-integration": "starts a Spark cluster, PostgreSQL and S3; .ci/run runs it after make test",
    "make test-reliability": "the fuzzing suite with a large budget; make test runs it with a small one",
    "make test-all": "every test, this one included",
    "make ui": "serves the UI until stopped; tests/orchestration/test_make_ui.py starts it and stops it",
    "make test-ui": "installs Chromium (apt-get) and Playwright into .venv; .ci/run runs it after make test",
    "make bench": "minutes of benchmarks, and it installs the bench extra into .venv; tests/bench cover it",
    "make screenshot": "installs Chromium and the screenshot extra into .venv; tests/orchestration/test_ui.py "
    "runs its entry point",
}
#: Commands run by the slow test only (``make test-all``), with what takes the time.
SLOW: dict[str, str] = {"make lint typecheck": "ruff, the import contracts and mypy over the whole tree"}

#: The first word of inline code that makes it a shell command.
EXECUTABLES = {"make", "lakeops", "dagster", "dg", "spark-submit", "python", "pip", "docker", "git"}

#: For each demo run (table/operation), a report number that is positive only if it did work.
DEMO_WORK = {
    "events/cdc": "rows_written",
    "events/compaction": "files_removed",
    "events/checkpoint": "parts",
    "events/expiry": "deleted_commits",
    "events/orphans": "deleted_files",
    "orders/cdc": "rows_written",
    "orders/compaction": "files_removed",
    "orders/checkpoint": "manifests_replaced",
    "orders/expiry": "snapshots_expired",
    "orders/orphans": "deleted_files",
    "arrays/compaction": "chunks_packed",
    "arrays/expiry": "snapshots_expired",
    "arrays/orphans": "deleted_files",
}


def _key(command: str) -> str:
    """A command without its trailing comment and extra spaces: how EXCLUDED and SLOW name it."""
    return " ".join(re.sub(r"\s+#.*$", "", command).split())


def bash_blocks(text: str) -> list[list[str]]:
    """The commands of each ``bash`` block, as written (continuation lines joined; blank and comment
    lines dropped)."""
    blocks = []
    for body in re.findall(r"^```bash\n(.*?)^```", text, flags=re.M | re.S):
        commands: list[str] = []
        pending = ""
        for line in body.splitlines():
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            command, pending = pending + line, ""
            if command.strip() and not command.lstrip().startswith("#"):
                commands.append(command)
        blocks.append(commands)
    return blocks


def python_blocks(text: str) -> list[str]:
    """The code of each ``python`` block, as written."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)


def _placeholder(word: str) -> bool:
    """A word that stands for what the reader supplies: ``TABLE``, ``FIRST...LAST``, ``[--json]``, ``...``."""
    parts = re.split(r"[^A-Za-z0-9_]+", word)
    return word == "..." or word.startswith("[") or any(re.fullmatch(r"[A-Z][A-Z0-9_]*", part) for part in parts)


def inline_commands(text: str) -> set[str]:
    """Inline code outside the blocks that a reader would paste into a shell (see the module docstring)."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    found = set()
    for span in re.findall(r"`([^`]+)`", prose):
        words = span.split()
        if len(words) < 2 or words[0].rsplit("/", 1)[-1] not in EXECUTABLES:
            continue  # not a command, or a program's name in a sentence (`make`)
        if any(_placeholder(word) for word in words):
            continue  # a synopsis
        if words[0] != "make" and not any(word.startswith("-") for word in words[1:]):
            continue  # a command's name in a sentence (`lakeops compact`)
        found.add(" ".join(words))
    return found


def test_every_readme_command_is_run_or_excluded() -> None:
    text = README.read_text()
    block_commands = {_key(command) for block in bash_blocks(text) for command in block}
    assert block_commands, "README.md has no bash block"
    inline = inline_commands(text)
    unhandled = sorted(inline - block_commands - set(EXCLUDED))
    assert not unhandled, f"inline commands neither in a bash block (which runs them) nor in EXCLUDED: {unhandled}"
    stale = sorted((set(EXCLUDED) | set(SLOW)) - block_commands - inline)
    assert not stale, f"EXCLUDED or SLOW names commands README.md no longer has: {stale}"


def test_inline_commands_are_recognised() -> None:
    """Synopses and names of commands are prose; the README's old backfill line was a command."""
    old_backfill = (
        "dagster asset materialize -m orchestration.definitions --select events/cdc "
        "--partition-range 2026-11-01...2026-11-03"
    )
    text = (
        "With `make`, run `make demo`, then `lakeops compact` or `lakeops restore TABLE RUN_ID`; "
        "`dagster asset materialize --select a/b --partition-range FIRST...LAST`; `.venv/bin/lakeops inspect t --json`"
        f"; or `{old_backfill}`."
    )
    assert inline_commands(text) == {"make demo", ".venv/bin/lakeops inspect t --json", old_backfill}


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files a clone of this checkout would hold (tracked and new, as in the working tree), with
    ``.venv`` linked to this checkout's, whose install ``make`` must find up to date."""
    venv = ROOT / ".venv"
    if not (venv / ".installed").is_file():
        pytest.skip("no .venv made by make here to reuse")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    copy = tmp_path_factory.mktemp("clone") / "lakeops"
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.exists() or source.is_symlink():  # a tracked file deleted in the working tree is not there
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, copy / name, follow_symlinks=False)
    (copy / ".venv").symlink_to(venv)
    installed = (venv / ".installed").stat().st_mtime
    os.utime(copy / "pyproject.toml", (installed - 1, installed - 1))
    up_to_date = subprocess.run(["make", "-q", "install"], cwd=copy, env=_user_env(), capture_output=True)
    assert up_to_date.returncode == 0, "make would reinstall into the shared .venv"
    return copy


def _user_env() -> dict[str, str]:
    """A new user's environment: no virtualenv on PATH, no lakeops, Dagster or pytest variables."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("LAKEOPS_", "DAGSTER_", "PYTEST_", "VIRTUAL_ENV", "PYTHON"))
    }
    venv_bin = (ROOT / ".venv" / "bin").resolve()
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if Path(p).resolve() != venv_bin)
    return env


def run_commands(commands: list[str], cwd: Path) -> dict[str, tuple[bool, str]]:
    """Run ``commands`` in order in one bash (``set -e``); each one's success and its output."""
    script = ["set -eo pipefail"]
    for i, command in enumerate(commands):
        script += [f"printf '\\n@@@ start %d\\n' {i}", command, f"printf '\\n@@@ done %d\\n' {i}"]
    finished = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", "\n".join(script)],
        cwd=cwd,
        env=_user_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=1800,
    )
    outputs = re.split(r"\n@@@ start (\d+)\n", finished.stdout)
    results: dict[str, tuple[bool, str]] = {}
    for number, output in zip(outputs[1::2], outputs[2::2], strict=True):
        done = f"\n@@@ done {number}\n"
        results[commands[int(number)]] = (done in output, output.replace(done, ""))
    return results


@pytest.fixture(scope="module")
def readme_run(clone: Path) -> Iterator[dict[str, tuple[bool, str]]]:
    """Every bash block of the clone's README.md, in order, without the excluded and slow commands."""
    results: dict[str, tuple[bool, str]] = {}
    for block in bash_blocks((clone / "README.md").read_text()):
        commands = [c for c in block if _key(c) not in EXCLUDED and _key(c) not in SLOW]
        if commands:
            results.update(run_commands(commands, clone))
    registry = {"LAKEOPS_REGISTRY": str(clone / ".lakeops-demo" / "lakeops.yaml")}
    for code in python_blocks((clone / "README.md").read_text()):
        ran = subprocess.run(
            [str(clone / ".venv" / "bin" / "python"), "-c", code],
            cwd=clone,
            env=_user_env() | registry,
            capture_output=True,
            text=True,
            timeout=600,
        )
        results[code] = (ran.returncode == 0, ran.stdout + ran.stderr)
    yield results
    shutil.rmtree(clone / ".lakeops-demo", ignore_errors=True)


def test_readme_commands_run_as_written(readme_run: dict[str, tuple[bool, str]]) -> None:
    text = README.read_text()
    expected = [c for block in bash_blocks(text) for c in block if _key(c) not in EXCLUDED and _key(c) not in SLOW]
    assert "make demo" in {_key(c) for c in expected}
    assert any(c.startswith("dagster asset materialize") for c in expected)
    for command in expected:
        assert command in readme_run, f"not reached (an earlier command of its block failed): {command}"
        ok, output = readme_run[command]
        assert ok, f"{command}\n{output[-4000:]}"
    backfill = next(output for command, (_, output) in readme_run.items() if command.startswith("dagster asset"))
    assert "RUN_SUCCESS" in backfill


def test_readme_python_runs_on_the_demo(readme_run: dict[str, tuple[bool, str]]) -> None:
    blocks = python_blocks(README.read_text())
    assert any("lakeops.api" in code or "from lakeops import api" in code for code in blocks)
    for code in blocks:
        ok, output = readme_run[code]
        assert ok, f"{code}\n{output[-4000:]}"
    api_example = next(readme_run[code][1] for code in blocks if "api.compact" in code)
    assert re.search(r"^\d+ files in \d+ groups would be rewritten$", api_example, flags=re.M), api_example
    assert re.search(r"^\d+ files moved to the trash, run \S+$", api_example, flags=re.M), api_example


def _demo_runs(output: str) -> dict[str, list[str]]:
    """``make demo``'s report: the lines under each ``$ dagster: materialize TABLE/OPERATION``."""
    runs: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in output.splitlines():
        if line.startswith("$ dagster: materialize "):
            current = runs.setdefault(line.removeprefix("$ dagster: materialize ").strip(), [])
        elif line.startswith(("==", "registry:")):
            current = None
        elif current is not None and line.startswith("  "):  # the demo's own lines; Dagster's log is not indented
            current.append(line.strip())
    return runs


def test_make_demo_shows_every_operation_at_work(readme_run: dict[str, tuple[bool, str]]) -> None:
    ok, output = next(result for command, result in readme_run.items() if _key(command) == "make demo")
    assert ok, output[-4000:]
    runs = _demo_runs(output)
    assert set(runs) == {*DEMO_WORK, "arrays/checkpoint"}, sorted(runs)
    for run, lines in runs.items():
        checks = [line for line in lines if line.startswith("check ")]
        assert checks and all(": passed" in line for line in checks), (run, lines)
    for run, number in DEMO_WORK.items():
        numbers = {k: int(v) for line in runs[run] for k, v in re.findall(r"(\w+)=(\d+)", line)}
        assert numbers.get(number, 0) > 0, f"{run} did no work on its first run: {runs[run]}"
    assert any("not applicable" in line for line in runs["arrays/checkpoint"])


def test_the_demo_tables_read_after_their_maintenance(readme_run: dict[str, tuple[bool, str]], clone: Path) -> None:
    registry = yaml.safe_load((clone / ".lakeops-demo" / "lakeops.yaml").read_text())
    tables = {entry["name"]: entry for entry in registry["tables"]}
    events = DeltaTable(tables["events"]["location"])
    assert events.to_pyarrow_table().num_rows == 120 * 200
    assert DeltaTable(tables["events"]["cdc"]["output"]).to_pyarrow_table().num_rows >= 120 * 200
    orders = SqlCatalog("default", uri=tables["orders"]["catalog"]["uri"]).load_table(tables["orders"]["identifier"])
    assert orders.scan().to_arrow().num_rows == 60 * 100 - 150
    assert DeltaTable(tables["orders"]["cdc"]["output"]).to_pyarrow_table().num_rows > 0
    arrays = Repository.open(tables["arrays"]["location"])
    head = arrays.resolve("main")
    chunks = arrays.chunk_payloads(head, "/line")
    assert chunks and all(arrays.read_chunk(head, "/line", index) for index in chunks)


@pytest.mark.slow
def test_slow_readme_commands_run_as_written(clone: Path) -> None:
    slow = [c for block in bash_blocks((clone / "README.md").read_text()) for c in block if _key(c) in SLOW]
    assert {_key(c) for c in slow} == set(SLOW)
    for command, (ok, output) in run_commands(slow, clone).items():
        assert ok, f"{command}\n{output[-4000:]}"


def test_every_delta_feature_lakeops_handles_is_named() -> None:
    """The README's list of Delta features keeps up with lakeops.delta.features.FEATURES."""
    from lakeops.delta.features import FEATURES

    text = README.read_text()
    missing = [name for name in FEATURES if f"`{name}`" not in text and not name.endswith("-preview")]
    assert not missing, f"README.md does not name these supported Delta features: {missing}"
