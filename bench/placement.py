"""``python -m bench.placement [--units N] [--parallelism P] [--repeats R] [--baseline RUNNER_PY]``: what
placing plan units costs Spark.

Runs :func:`spark_jobs.spark_tasks.run_units` on ``N`` small units (a task that only echoes its unit, so the
time is scheduling, placement and result collection) ``R`` times in one ``local[2]`` session after a
warm-up, and prints each run's wall time and the stages it ran with their task counts. ``--baseline``
loads another version of ``spark_jobs/spark_tasks.py`` (``runner.py`` before) and alternates the two
in the same session, so both see the same machine. Issue 23, part 2: the units used to reach the
tasks through a broadcast join, built in a stage of its own.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

from pydantic import BaseModel
from pyspark import StatusTracker, cloudpickle

from spark_jobs.session import build_session, stop_session
from spark_jobs.spark_tasks import run_units

# Workers cannot import this module by name when it is run as a script: ship its task by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class Unit(BaseModel):
    index: int
    path: str


class Echo(BaseModel):
    index: int


def echo(unit: Unit) -> Echo:
    return Echo(index=unit.index)


def _load(path: Path) -> ModuleType:
    """Another version of ``spark_jobs/spark_tasks.py`` (e.g. from ``git show REV:spark_jobs/spark_tasks.py``)."""
    spec = importlib.util.spec_from_file_location("baseline_runner", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"{path}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _stages(tracker: StatusTracker, first_job: int) -> tuple[list[int], int]:
    """Task counts of the stages of the jobs from ``first_job`` on, and the next job id."""
    stages: list[int] = []
    while (job := tracker.getJobInfo(first_job)) is not None:
        stages += [info.numTasks for info in map(tracker.getStageInfo, job.stageIds) if info is not None]
        first_job += 1
    return stages, first_job


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.placement", description=__doc__)
    parser.add_argument("--units", type=int, default=500)
    parser.add_argument("--parallelism", type=int, help="tasks per run (default: run_units' own)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--baseline", type=Path, help="another spark_tasks.py (or runner.py), run alternately with this one"
    )
    args = parser.parse_args(argv)
    runners = {"this": sys.modules[run_units.__module__]}
    if args.baseline is not None:
        runners["baseline"] = _load(args.baseline)
    units = [Unit(index=i, path=f"part-{i:05d}.parquet") for i in range(args.units)]
    spark = build_session(master=args.master, app_name="lakeops-bench-placement")
    try:
        tracker = spark.sparkContext.statusTracker()
        for runner in runners.values():  # warm-up: JVM code paths, Python workers
            runner.run_units(spark, units[:4], echo, Echo)
        _, next_job = _stages(tracker, 0)
        times: dict[str, list[float]] = {name: [] for name in runners}
        for repeat in range(args.repeats):
            # Alternate the order, so drift in the machine's load falls on each alike.
            for name in sorted(runners, reverse=repeat % 2 == 1):
                start = time.perf_counter()
                results = runners[name].run_units(spark, units, echo, Echo, parallelism=args.parallelism)
                times[name].append(time.perf_counter() - start)
                if [r.index for r in results] != list(range(args.units)):
                    raise SystemExit(f"{name}: results out of unit order")
                stages, next_job = _stages(tracker, next_job)
                print(f"{name}: {times[name][-1]:.2f} s, stages (tasks each): {stages}")
        for name, seconds in times.items():
            print(f"{name}: median {statistics.median(seconds):.2f} s over {args.repeats} runs of {args.units} units")
    finally:
        stop_session(spark)


if __name__ == "__main__":
    main()
