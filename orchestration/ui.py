"""Start ``dagster dev`` on a registry and ask its GraphQL API what it serves.

Used by ``make ui`` (through the Makefile), by the UI tests and by ``make screenshot``: the webserver
and daemon start on 127.0.0.1 with ``DAGSTER_HOME`` and ``LAKEOPS_REGISTRY`` set, and
:func:`served` lists the asset keys, schedules and sensors of the loaded code location, as the UI's
own pages query them. A code location that failed to load is an error, with Dagster's message: the
webserver still serves then, with no assets, and an empty graph must never pass for a loaded one.
:func:`chromium_page` is the browser that ``make screenshot`` (:func:`screenshots`) and the browser tests
(``make test-ui``) see it in.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lakeops.errors import LakeopsError

if TYPE_CHECKING:
    from playwright.sync_api import Page

PROJECT = Path(__file__).resolve().parent.parent
#: What ``make demo`` builds and ``make screenshot`` shows: the registry and the Dagster instance.
DEMO = PROJECT / ".lakeops-demo"
#: The code location ``workspace.yaml`` defines.
LOCATION = "orchestration.definitions:defs"

QUERY = """
{
  workspaceOrError {
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError { __typename ... on PythonError { message errorChain { error { message } } } }
      }
    }
    ... on PythonError { message }
  }
  assetNodes { assetKey { path } }
  repositoriesOrError {
    ... on RepositoryConnection { nodes { name schedules { name } sensors { name } } }
    ... on PythonError { message }
  }
}
"""


class UiNotServing(LakeopsError):
    """``dagster dev`` exited, did not answer in time, or does not serve what was asked for."""


class LocationFailed(UiNotServing):
    """The webserver answers, but the code location failed to load (waiting does not help)."""


@dataclass(frozen=True)
class Served:
    assets: set[str]
    schedules: set[str]
    sensors: set[str]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(f"{url}/graphql", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["data"]


def served(url: str) -> Served:
    """What the loaded code location serves; :class:`LocationFailed` with Dagster's error when it
    failed to load, :class:`UiNotServing` while it is still loading."""
    data = graphql(url, QUERY)
    workspace = data["workspaceOrError"]
    if "locationEntries" not in workspace:
        raise LocationFailed(f"{url}: the workspace failed to load: {workspace.get('message')}")
    entry = next((e for e in workspace["locationEntries"] if e["name"] == LOCATION), None)
    if entry is None or entry["loadStatus"] != "LOADED":
        raise UiNotServing(f"{url}: the code location {LOCATION} has not loaded yet")
    error = entry["locationOrLoadError"]
    if error["__typename"] == "PythonError":  # the registry's own message is in the cause chain
        messages = [error["message"], *(link["error"]["message"] for link in error["errorChain"])]
        because = "; caused by: ".join(m.strip() for m in messages)
        raise LocationFailed(f"{url}: the code location {LOCATION} failed to load: {because}")
    repositories = data["repositoriesOrError"]
    if "nodes" not in repositories:
        raise UiNotServing(f"{url}: the code location failed to load: {repositories.get('message')}")
    nodes = repositories["nodes"]
    return Served(
        assets={"/".join(node["assetKey"]["path"]) for node in data["assetNodes"]},
        schedules={s["name"] for repo in nodes for s in repo["schedules"]},
        sensors={s["name"] for repo in nodes for s in repo["sensors"]},
    )


@contextmanager
def dagster_dev(registry: Path, home: Path, *, port: int | None = None, timeout_s: float = 180) -> Iterator[str]:
    """``dagster dev`` on ``registry`` with instance ``home``; yields the UI's URL once the code
    location has loaded, and stops the webserver and daemon afterwards."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    env = os.environ | {"DAGSTER_HOME": str(home), "LAKEOPS_REGISTRY": str(registry)}
    command = [sys.executable, "-m", "dagster", "dev", "-w", str(PROJECT / "workspace.yaml")]
    log = home / "dagster-dev.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*command, "-h", "127.0.0.1", "-p", str(port)],
            cwd=PROJECT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_until_loaded(url, process, log, timeout_s)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_until_loaded(url: str, process: subprocess.Popen, log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = log.read_text(errors="replace")[-3000:]
            raise UiNotServing(f"dagster dev exited with {process.returncode} (log {log}):\n{output}")
        try:
            served(url)
            return
        except LocationFailed:
            raise
        except (OSError, KeyError, UiNotServing):
            time.sleep(1)
    raise UiNotServing(f"dagster dev did not serve {url} within {timeout_s:.0f} s (log {log})")


#: Chromium flags for a headless run on a machine without network: no background connections.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


@contextmanager
def chromium_page(*, chromium: str = "chromium", size: tuple[int, int] = (1600, 1300)) -> Iterator["Page"]:
    """A page of headless Chromium in a fresh profile: Playwright drives the system's Chromium
    (Debian's package; nothing is downloaded), so the UI is seen as a user's browser shows it."""
    from playwright.sync_api import sync_playwright

    executable = shutil.which(chromium)
    if executable is None:
        raise UiNotServing(f"{chromium}: not installed (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="lakeops-chromium-") as profile, sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=executable,
            args=CHROMIUM_FLAGS,
            headless=True,
            viewport={"width": size[0], "height": size[1]},
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def open_ui(page: "Page", url: str) -> None:
    """Go to ``url`` and dismiss the UI's first-visit dialog (shown once per profile and server)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.goto(url, wait_until="networkidle")
    with suppress(PlaywrightTimeout):  # no first-visit dialog on this instance
        page.get_by_role("button", name="Skip").click(timeout=10_000)
    page.wait_for_load_state("networkidle")


#: What ``make screenshot`` renders into ``docs/``: file name -> the UI's page (``{group}``: a table's).
PAGES = {
    "asset-graph.png": f"locations/{LOCATION}/asset-groups/{{group}}",
    "health-overview.png": "assets/lakeops/overview",
    "concurrency.png": "deployment/concurrency",
}


def screenshots(page: "Page", url: str, group: str, out_dir: Path) -> list[Path]:
    """PNGs of the :data:`PAGES` of the UI at ``url`` (``group``'s asset graph), taken in ``page``
    once each page's data has loaded."""
    written = []
    for name, path in PAGES.items():
        out = out_dir / name
        page.goto(f"{url}/{path.format(group=group)}", wait_until="networkidle")
        page.wait_for_timeout(2000)  # the graph lays itself out after its data arrives
        page.screenshot(path=str(out))
        if not out.is_file() or out.stat().st_size == 0:
            raise UiNotServing(f"{out}: Chromium wrote no screenshot of {url}/{path}")
        written.append(out)
    return written


def capture(registry: Path, home: Path, group: str, out_dir: Path) -> list[Path]:
    """:func:`screenshots` of the UI as ``dagster dev`` serves ``registry``; raises
    :class:`UiNotServing` (before Chromium starts) when the location or the group is not there."""
    with dagster_dev(registry, home) as url:
        assets = served(url).assets
        if not any(asset.startswith(f"{group}/") for asset in assets):
            groups = sorted({asset.split("/")[0] for asset in assets})
            raise UiNotServing(f"{registry}: group {group!r} has no assets; the location serves {groups or 'none'}")
        with chromium_page() as page:
            open_ui(page, url)
            return screenshots(page, url, group, out_dir)


def main(argv: list[str]) -> int:
    """``python -m orchestration.ui screenshot DIR [GROUP]``: the demo registry's UI as
    :data:`PAGES` into ``DIR`` (``GROUP``: the table whose asset graph is shown, default ``events``).
    Exits 1, saying why, when there is nothing true to show."""
    if argv[:1] != ["screenshot"] or len(argv) not in (2, 3):
        print("usage: python -m orchestration.ui screenshot DIR [GROUP]", file=sys.stderr)
        return 2
    group = argv[2] if len(argv) == 3 else "events"
    registry = DEMO / "lakeops.yaml"
    if not registry.is_file():
        print(f"{registry}: missing; run `make demo` first", file=sys.stderr)
        return 1
    out_dir = Path(argv[1]).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        written = capture(registry, DEMO / "dagster_home", group, out_dir)
    except LakeopsError as exc:
        print(f"screenshot failed: {exc}", file=sys.stderr)
        return 1
    for out in written:
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
