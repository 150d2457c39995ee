"""Writing a run's results: the JSON document, and the summary table between the markers of
``bench/README.md`` (a re-run replaces the table, nothing else)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

START = "<!-- bench:results:start -->"
END = "<!-- bench:results:end -->"


def results_path(directory: Path, document: dict[str, Any]) -> Path:
    """``<date>.json`` for the quick pass, ``<date>-<size>.json`` for the other sizes."""
    day = document["date"][:10]
    name = day if document["size"] == "quick" else f"{day}-{document['size']}"
    return directory / f"{name}.json"


def write_json(directory: Path, document: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = results_path(directory, document)
    path.write_text(json.dumps(document, indent=2) + "\n")
    return path


def _seconds(result: dict[str, Any], role: str) -> str:
    contender = result["contenders"].get(role)
    return "—" if contender is None else f"{contender['median_s']:.2f}"


def _ratio(result: dict[str, Any], key: str) -> str:
    value = result["ratios"][key]
    if value is None:
        return "—"
    target = result["targets"].get(key)
    mark = "" if target is None else (" ✓" if value <= target else f" ✗ (target ≤ {target})")
    return f"{value:.2f}{mark}"


def table(document: dict[str, Any]) -> str:
    head = (
        f"Size `{document['size']}`, {document['repeats']} repeats, medians in seconds, {document['date']}, "
        f"{document['machine']['cpus']} CPUs, {document['execution']}; total {document['total_s']} s.\n\n"
        "| case | work | ours | peer | limit | ours/peer | ours/limit | driver MB | JVM MB | worker MB |\n"
        "|---|---|---:|---:|---:|---|---|---:|---:|---:|\n"
    )
    rows = []
    for r in document["results"]:
        ours = r["contenders"]["ours"]
        work = f"{r['workload']['size']:,} {r['workload']['unit']}" + (f" (x{r['scale']})" if r["scale"] != 1 else "")
        rows.append(
            f"| {r['title']} | {work} | {_seconds(r, 'ours')} | {_seconds(r, 'peer')} | {_seconds(r, 'limit')} "
            f"| {_ratio(r, 'ours_over_peer')} | {_ratio(r, 'ours_over_limit')} | {ours['driver_peak_mb']:.0f} "
            f"| {ours['jvm_peak_mb']:.0f} | {ours['worker_peak_mb']:.0f} |"
        )
    slopes = [
        f"- {name}: " + ", ".join(f"{role} {value}" for role, value in by_role.items())
        for name, by_role in document.get("slopes", {}).items()
    ]
    tail = "\n\nSlopes (log time over log work; 1 = linear):\n\n" + "\n".join(slopes) if slopes else ""
    return head + "\n".join(rows) + tail


def update_readme(readme: Path, document: dict[str, Any]) -> None:
    """Replace the text between the markers with this run's table (markers appended if absent)."""
    text = readme.read_text() if readme.exists() else ""
    block = f"{START}\n{table(document)}\n{END}"
    if START in text and END in text:
        before, rest = text.split(START, 1)
        after = rest.split(END, 1)[1]
        text = before + block + after
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block + "\n"
    readme.write_text(text)
