"""The project's code location: whatever its ``defs`` folder declares (``dg``'s loader)."""

from pathlib import Path

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
