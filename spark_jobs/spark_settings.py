"""Where an operation's plan units run: threads on the driver or Spark tasks (:class:`SparkSettings`),
and the plan sizes below which the driver is the better place (:data:`DRIVER_MAX_BYTES`,
:data:`DRIVER_MAX_UNITS`, :data:`DRIVER_DELETE_BATCHES`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from lakeops.deletion import BatchResult, DeleteBatch, delete_batch, delete_in_threads, for_run
from lakeops.errors import InvalidArgument
from lakeops.redaction import register_secret_settings
from lakeops.units import format_size, parse_size

__all__ = [
    "DRIVER_DELETE_BATCHES",
    "DRIVER_MAX_BYTES",
    "DRIVER_MAX_BYTES_ENV",
    "DRIVER_MAX_UNITS",
    "DRIVER_MAX_UNITS_ENV",
    "SparkSettings",
]

Unit = TypeVar("Unit", bound=BaseModel)
Result = TypeVar("Result", bound=BaseModel)


#: Up to this many deletion batches (about a thousand files each) are deleted by threads on the
#: driver: a batch is one S3 DeleteObjects request or a thousand unlinks, far cheaper than starting a
#: Spark session (seconds). Larger deletions run as Spark tasks when a master is configured (or a
#: session is running); on the default local session they stay on the driver too (:meth:`SparkSettings.delete`).
DRIVER_DELETE_BATCHES = 16

#: A plan whose units read at most this many bytes (None: any plan with a byte figure) runs in threads
#: on the driver instead of starting a local Spark session. Such units are pyarrow rewrites, which
#: release the GIL: local Spark runs the same code on the same cores, in worker processes, after ~7 s
#: of session start-up and ~5 s for the first job, and pays Arrow serialisation on top. Measured on a
#: 2-CPU machine (bench/README.md): 70 MB compacted in 3.6 s on the driver against 26.5 s on local
#: Spark, 2 GB in 104 s against 147 s. ``$LAKEOPS_DRIVER_MAX_BYTES`` (or ``driver_max_bytes``) caps it:
#: 0 sends every plan to Spark.
DRIVER_MAX_BYTES: int | None = None
DRIVER_MAX_BYTES_ENV = "LAKEOPS_DRIVER_MAX_BYTES"

#: For plans whose units have no byte figure (checkpoint parts, manifests, directory listings,
#: snapshot diffs, deletion batches): up to this many units run on the driver. Such units are mostly
#: Python work, which threads run one at a time (the GIL) where Spark's workers run them in
#: parallel; the same bound as :data:`DRIVER_DELETE_BATCHES`, so deletions keep their rule.
#: ``$LAKEOPS_DRIVER_MAX_UNITS`` (or ``driver_max_units``) overrides; 0: always Spark.
DRIVER_MAX_UNITS = 16
DRIVER_MAX_UNITS_ENV = "LAKEOPS_DRIVER_MAX_UNITS"


class SparkSettings(BaseModel):
    """Where plan units run: ``master`` (None: ``$LAKEOPS_SPARK_MASTER``, else the spark-submit master,
    else ``local[*]``) and Spark ``conf``. The session starts only when a plan has units to run, and
    not at all for a plan that would run on the default ``local[*]`` and is better run on the driver
    (:meth:`runs_on_driver`). ``driver_max_bytes`` / ``driver_max_units``: the largest such plan (None:
    the environment variable, else :data:`DRIVER_MAX_BYTES` / :data:`DRIVER_MAX_UNITS`; 0: always Spark)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    master: str | None = None
    conf: dict[str, str] = {}
    driver_max_bytes: int | None = Field(default=None, ge=0)
    driver_max_units: int | None = Field(default=None, ge=0)

    def model_post_init(self, context: Any, /) -> None:
        """Secret settings (``spark.hadoop.fs.s3a.secret.key``, a Spark Connect URL's ``;token=``) are
        masked by value from now on, however Spark or a library quotes them."""
        parameters = dict(p.partition("=")[::2] for p in (self.master or "").split(";")[1:])
        register_secret_settings({**self.conf, **parameters})

    def runs_on_driver(self, units: int, work_bytes: int | None) -> bool:
        """Whether a plan of ``units`` units reading ``work_bytes`` (None: unknown) runs in threads on
        the driver: it is within the limits, and Spark would be a new ``local[*]`` session on this machine anyway
        (no master asked for, none already running: an active session costs nothing more to use)."""
        max_bytes = _limit(self.driver_max_bytes, DRIVER_MAX_BYTES_ENV, DRIVER_MAX_BYTES, sizes=True)
        if work_bytes is not None:
            small = max_bytes is None or work_bytes <= max_bytes
        else:
            max_units = _limit(self.driver_max_units, DRIVER_MAX_UNITS_ENV, DRIVER_MAX_UNITS, sizes=False)
            small = max_units is None or units <= max_units
        return small and self._spark_would_be_local(max_bytes)

    def _spark_would_be_local(self, max_bytes: int | None) -> bool:
        """Spark would be a new ``local[*]`` session on this machine, and the driver is not capped to 0."""
        if max_bytes == 0 or {"spark.master", "spark.remote"} & self.conf.keys():
            return False
        from spark_jobs.session import would_start_default_session

        return would_start_default_session(self.master)

    def run_units(
        self,
        units: Sequence[Unit],
        task: Callable[[Unit], Result],
        result_type: type[Result],
        *,
        label: str,
        description: str,
        progress: Console,
        work_bytes: int | None = None,
    ) -> list[Result]:
        """Run ``task`` on every unit, echoing ``label`` and progress to ``progress``: in threads on
        the driver when :meth:`runs_on_driver` (``work_bytes``: what the units read, if the plan
        knows), else as Spark tasks (:func:`spark_jobs.spark_tasks.run_units`) once the executors passed their
        preflight (:func:`spark_jobs.preflight.check_executors`: they can read the table). Either way results come
        in unit order and a failed unit raises ``TaskFailed`` with the completed results."""
        from lakeops.executors import run_on_driver
        from spark_jobs.spark_tasks import run_units

        if self.runs_on_driver(len(units), work_bytes):
            threads = min(len(units), os.cpu_count() or 1)
            size = f", {format_size(work_bytes)}" if work_bytes is not None else ""
            progress.print(f"{label} on the driver ({threads} threads{size}) ...")
            return run_on_driver(
                units,
                task,
                result_type,
                threads=threads,
                description=description,
                progress=lambda done, total: progress.print(f"  {done}/{total} units done"),
            )
        from spark_jobs.preflight import check_executors
        from spark_jobs.session import build_session

        spark = build_session(master=self.master, conf=self.conf)
        progress.print(f"{label} on Spark ({spark.conf.get('spark.master', 'connect')}) ...")
        check_executors(spark, units)
        return run_units(
            spark,
            units,
            task,
            result_type,
            description=description,
            progress=lambda done, total: progress.print(f"  {done}/{total} Spark tasks done"),
        )

    def delete(
        self,
        batches: Sequence[DeleteBatch],
        *,
        label: str,
        description: str,
        progress: Console,
        task: Callable[[DeleteBatch], BatchResult] = delete_batch,
        quarantine_run: str | None = None,
        operation: str = "",
    ) -> list[BatchResult]:
        """Delete every batch: on the driver when there are at most :data:`DRIVER_DELETE_BATCHES` or
        Spark would only be a local session (deleting is waiting on storage, which threads do as well as
        local worker processes, without the start-up), else as Spark tasks. A failed batch raises (the
        Spark path: ``TaskFailed``); batches already done stay deleted and a rerun plans only what is
        left. ``quarantine_run``: move the files into that run's trash instead (stamped on every batch
        here, so planners stay unaware of it)."""
        if not batches:
            return []
        batches = for_run(batches, quarantine_run, operation)
        max_bytes = _limit(self.driver_max_bytes, DRIVER_MAX_BYTES_ENV, DRIVER_MAX_BYTES, sizes=True)
        if len(batches) > DRIVER_DELETE_BATCHES and not self._spark_would_be_local(max_bytes):
            return self.run_units(batches, task, BatchResult, label=label, description=description, progress=progress)
        progress.print(f"{label} on the driver ...")
        return delete_in_threads(batches, task)


def _limit(given: int | None, env: str, default: int | None, *, sizes: bool) -> int | None:
    """``given``, else ``$env`` (a count, or with ``sizes`` also a size such as ``2GB``), else ``default``
    (None: no limit)."""
    if given is not None:
        return given
    text = os.environ.get(env, "").strip()
    if not text:
        return default
    if text.isdigit():
        return int(text)
    try:
        if sizes:
            return parse_size(text)
    except InvalidArgument as exc:
        raise InvalidArgument(f"${env}: {exc}") from None
    raise InvalidArgument(f"${env}: expected a whole number of 0 or more, got {text!r}")
