"""Fixtures for the Icechunk tests: a writable copy of the real seed-format test repository."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lakeops_testdata import TESTDATA

TEST_REPO = TESTDATA / "icechunk-seed-format" / "test-repo"


@pytest.fixture
def test_repo() -> Path:
    """The read-only repository written by Icechunk 0.1.0-alpha.1 (see tests/data/PROVENANCE.md)."""
    return TEST_REPO


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """A private copy of the test repository, safe to commit to."""
    return Path(shutil.copytree(TEST_REPO, tmp_path / "test-repo"))
