"""The icechunk package committing in a loop, in a process of its own, until SIGTERM (issue 34).

``python icechunk_committer.py LOCATION PAUSE_S [ENDPOINT_URL]``: LOCATION is a directory (local file
system) or ``s3://bucket/prefix`` (with the moto endpoint). Commit ``k`` (k = 0, 1, ...) sets element
``k`` of the array ``racer`` on ``main`` to ``k + 1`` and nothing else; once ``commit`` has returned,
the process prints ``acknowledged {"k": k, "snapshot": ID}`` on a line of its own (the package logs
on standard output too): the commits the package acknowledged. Between two commits it waits a random
time of up to PAUSE_S seconds, so its ref writes fall anywhere in lakeops' commits. A lost race
(``ConflictError``) or a branch that cannot be read for an instant (lakeops moves a ref aside while it
swaps it on a local file system) is retried on a fresh session, as an application would.
"""

from __future__ import annotations

import json
import random
import signal
import sys
import time
from typing import Any

import icechunk
import zarr

#: What starts the line of an acknowledged commit.
ACKNOWLEDGED = "acknowledged"
#: Elements of ``racer``: more than any round commits.
CAPACITY = 100_000


def package_storage(location: str, endpoint_url: str | None) -> Any:
    """The icechunk package's storage for ``location``."""
    if not location.startswith("s3://"):
        return icechunk.local_filesystem_storage(location)
    bucket, _, prefix = location.removeprefix("s3://").partition("/")
    return icechunk.s3_storage(
        bucket=bucket, prefix=prefix, endpoint_url=endpoint_url, allow_http=True, force_path_style=True, from_env=True
    )


def main(location: str, pause_s: float, endpoint_url: str | None) -> None:
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    repo = icechunk.Repository.open(package_storage(location, endpoint_url))
    pauses = random.Random(location)
    k = 0
    while not stopping:
        try:
            session = repo.writable_session("main")
            zarr.open_array(session.store, path="racer", mode="r+")[k] = k + 1
            snapshot = session.commit(f"racer {k}")
        except icechunk.ConflictError:
            continue
        except icechunk.IcechunkError as exc:
            if "ref not found" not in str(exc):
                raise
            time.sleep(0.001)
            continue
        print(ACKNOWLEDGED, json.dumps({"k": k, "snapshot": snapshot}), flush=True)
        k += 1
        time.sleep(pauses.uniform(0, pause_s))


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
