"""Identical copies: a workload is generated once at its working path, set aside as pristine, and
copied back before every run, so each contender starts from the same bytes (and mtimes) at the same
path (an Iceberg catalog stores absolute paths, so the copy must live where the original did)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


class Workspace:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.work = base / "work"
        self.pristine = base / "pristine"
        self.scratch = base / "scratch"
        self.spec_dir = base / "spec"
        if base.exists():
            shutil.rmtree(base)
        self.spec_dir.mkdir(parents=True)

    def freeze(self) -> None:
        """Set the generated workload aside; :meth:`restore` copies it back."""
        self.work.rename(self.pristine)

    def restore(self) -> None:
        """A fresh copy of the pristine workload at the working path, and an empty scratch dir."""
        for directory in (self.work, self.scratch):
            if directory.exists():
                shutil.rmtree(directory)
        shutil.copytree(self.pristine, self.work, copy_function=shutil.copy2, symlinks=True)
        self.scratch.mkdir()
        # Flushed to disk, as the files a maintenance run meets are (VACUUM deletes files a week old):
        # unlinking a copy still dirty in the page cache costs a fraction of unlinking one on disk.
        os.sync()

    def remove(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)
