"""Hypothesis strategies of valid registries, as operators write them: every address form, format, policy mix,
CDC start date (before and after today) and schedule override. Both orchestrators' loaders are held to them
(tests/orchestration/test_any_registry.py for Dagster, tests/airflow/test_dags.py for Airflow).
"""

from __future__ import annotations

import os
from datetime import date
from typing import Any

import yaml
from hypothesis import strategies as st

#: Examples per property: each builds and resolves a whole code location (a second or less at these
#: sizes); ``LAKEOPS_FUZZ_EXAMPLES`` raises it as for the other property tests.
EXAMPLES = max(5, int(os.environ.get("LAKEOPS_FUZZ_EXAMPLES", "25")) // 3)
CRONS = st.sampled_from(["0 3 * * *", "*/30 * * * *", "15 * * * *", "0 */6 * * 1-5", "@daily"])
NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,24}", fullmatch=True)
TAG_TEXT = st.from_regex(r"[A-Za-z0-9_.-]{1,20}", fullmatch=True)


@st.composite
def table_entries(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """One valid registry entry named ``name``: any address form, format and policy mix."""
    entry: dict[str, Any] = {"name": name, "format": draw(st.sampled_from(["auto", "delta", "iceberg", "icechunk"]))}
    if draw(st.booleans()):
        entry["location"] = draw(st.sampled_from([f"/lake/{name}", f"s3://lake/{name}", f"file:///lake/{name}"]))
    else:
        entry["catalog"] = {"uri": draw(st.sampled_from(["sqlite:///catalog.db", "postgresql://db/lake"]))}
        entry["identifier"] = f"shop.{name}"
    if draw(st.booleans()):
        entry["owners"] = draw(st.lists(st.sampled_from(["team:data", "oncall@example.com"]), unique=True))
        entry["tags"] = draw(st.dictionaries(TAG_TEXT, TAG_TEXT, max_size=3))
    partitioned = draw(st.booleans())
    entry["compaction"] = {
        "partitioned": partitioned,
        "target_file_size": draw(st.sampled_from(["64MB", "1GB", 1024])),
        "min_input_files": draw(st.integers(1, 50)),
        "small_file_trigger": draw(st.integers(1, 500)),
        **({"fragment_ratio_trigger": draw(st.floats(0.01, 1.0))} if draw(st.booleans()) else {}),
    }
    entry["checkpoint"] = {"interval": draw(st.integers(1, 100))}
    entry["expiry"] = {
        "older_than": draw(st.sampled_from(["1d", "30d", "12h"])),
        "retain_last": draw(st.integers(1, 99)),
    }
    entry["orphans"] = {"older_than": draw(st.sampled_from(["3d", "7d"]))}
    if draw(st.booleans()):
        entry["cdc"] = {
            "enabled": True,
            "output": f"/lake/{name}_changes",
            # Before and after today: a start date in the future has no partitions yet, and still loads.
            "start_date": draw(st.dates(date(2000, 1, 1), date(2035, 12, 31))),
            "key": draw(st.lists(st.sampled_from(["id", "day"]), unique=True)),
        }
    overrides = ["nightly", "health", "checkpoint", "cdc", *([] if partitioned else ["compaction"])]
    entry["schedules"] = {kind: draw(CRONS) for kind in draw(st.lists(st.sampled_from(overrides), unique=True))}
    return entry


@st.composite
def registries(draw: st.DrawFn, max_tables: int = 8) -> str:
    """Registry YAML as an operator writes it: 0 to ``max_tables`` tables, optional storage, Spark
    and audit settings."""
    names = draw(st.lists(NAMES, max_size=max_tables, unique_by=str.lower))
    document: dict[str, Any] = {"tables": [draw(table_entries(name)) for name in names]}
    if draw(st.booleans()):
        document["storage"] = {
            "endpoint_url": "http://127.0.0.1:9000",
            "access_key_id_env": "K",
            "secret_access_key_env": "S",
        }
        document["spark"] = {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "4"}}
        document["audit_location"] = "s3://lake/_audit"
    return yaml.safe_dump(document, sort_keys=False)
