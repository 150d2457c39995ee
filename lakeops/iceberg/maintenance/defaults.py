"""Defaults of Iceberg maintenance options, in a module without dependencies so that the command line
and the option models show them without importing the format's code (pyarrow, fastavro and all)."""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum

__all__ = ["DEFAULT_MAX_FILE_GROUP_SIZE", "DEFAULT_OLDER_THAN", "PrefixMismatchMode"]

#: ``rewrite_data_files``' ``max-file-group-size-bytes`` default.
DEFAULT_MAX_FILE_GROUP_SIZE = 100 * 1024**3
#: The age floor of Iceberg orphan files (``remove_orphan_files``' ``older_than`` default).
DEFAULT_OLDER_THAN = timedelta(days=3)


class PrefixMismatchMode(StrEnum):
    """What to do with a listed file whose path a reference names under another scheme or authority."""

    ERROR = "error"
    IGNORE = "ignore"
    DELETE = "delete"
