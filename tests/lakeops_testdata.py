"""Where the fixtures written by other implementations live: ``tests/data`` in this repository.

``tests/data/PROVENANCE.md`` says where each table comes from (repository, commit, licence) and what it
exercises. The fixtures are read-only by convention: a test that writes or deletes copies a table first.
"""

from __future__ import annotations

from pathlib import Path

TESTDATA = Path(__file__).resolve().parent / "data"
