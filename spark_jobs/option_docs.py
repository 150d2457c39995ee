"""docs/options.md: every command's options table, generated from the option models that declare them
(the same declarations as each command's ``--help``); ``python -m spark_jobs.option_docs`` rewrites it
and ``tests/cli/test_option_docs.py`` keeps the file equal to :func:`document`."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from spark_jobs.commands import COMMANDS
from spark_jobs.option_arguments import CommandOptions

__all__ = ["DOC", "document"]

DOC = Path(__file__).parents[1] / "docs" / "options.md"

_PREAMBLE = """\
# `lakeops` options

Generated from the option models that declare them by `spark_jobs.option_docs.document()`
(`python -m spark_jobs.option_docs` rewrites this file; `tests/cli/test_option_docs.py` keeps it equal),
and each command's `--help` shows the same text: the shared ones are declared in
`lakeops/compaction_options.py` and `lakeops/retention_options.py`, each format's own in its
`lakeops/<format>/maintenance/options.py`, the others in `lakeops/ops/options.py` and the command's
module. An option set for a table of a format it is not for is refused, naming the flag and the table
(exit status 2). The same names, with `_` for `-`, are the fields of the command's model in
`lakeops.ops.options` (`CompactionOptions`, `CheckpointOptions`, ...) in the Python API; the registry's
`compaction` policy takes `target_file_size`, `min_input_files`, `commit_retries` and `commit_timeout`,
its `expiry` policy `older_than` and `retain_last`, its `orphans` policy `older_than`, with these
meanings. Every command also takes TABLE, the catalog options (`--catalog-uri`, ...), `--json`,
`--endpoint-url` and `--region`; those that run on Spark `--master` and `--conf`.
"""


def document() -> str:
    """The whole of docs/options.md: one section per command that has options, in the commands' order."""
    sections = [_PREAMBLE]
    for name, module in COMMANDS.items():
        options = getattr(importlib.import_module(module), "OPTIONS", None)
        if isinstance(options, CommandOptions):
            sections.append(f"## `lakeops {name}`\n\n{options.markdown()}")
    return "\n".join(sections)


if __name__ == "__main__":
    DOC.write_text(document())
    sys.exit(0)
