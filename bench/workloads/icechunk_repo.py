"""An Icechunk repository (lakeops' own writer, the Icechunk seed format, docs/architecture.md) holding
``objects`` chunk objects: half reached by the tip of ``main`` (one commit of a 1-D array of small
chunks), half left behind by crashed writers (never referenced, 30 days old), for garbage collection."""

from __future__ import annotations

import os
import time
from pathlib import Path

from bench.workloads.model import Workload, tree_bytes
from lakeops.icechunk.ids import new_id
from lakeops.icechunk.repository import CHUNKS_DIR
from lakeops.icechunk.snapshot import FillValue, ZarrArrayMetadata
from lakeops.icechunk.writer import ChangeSet, commit, init_repository
from lakeops.storage import open_storage

DAY_S = 86_400


def chunk_objects(root: Path, *, objects: int, age_days: int = 30) -> Workload:
    live = objects // 2
    storage = open_storage(str(root))
    init_repository(storage, str(root))
    line = ZarrArrayMetadata(
        shape=(max(1, live),), data_type="uint8", chunk_shape=(1,), fill_value=FillValue("UInt8", 0)
    )
    changes = ChangeSet().add_group("/").add_array("/line", line)
    for i in range(live):
        changes.set_chunk("/line", (i,), i.to_bytes(4, "little"))
    commit(storage, str(root), changes, message="many small chunks")
    chunks = root / CHUNKS_DIR
    stamp = time.time() - age_days * DAY_S
    garbage = []
    for i in range(objects - live):
        name = new_id()
        path = chunks / name
        path.write_bytes(i.to_bytes(4, "little"))
        os.utime(path, (stamp, stamp))
        garbage.append(f"{CHUNKS_DIR}/{name}")
    return Workload(
        root=root,
        target=str(root),
        size=objects,
        unit="chunk objects",
        bytes=tree_bytes(root),
        params={"garbage": garbage},
    )
