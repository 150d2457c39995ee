"""Simulated estate: the benefit-ranked planner (:mod:`lakeops.planning`) against the anchors' policies.

500 modelled tables over 30 days, in hourly steps. Each table has its own commit rate (log-normal,
median one an hour, from one a day to a few hundred an hour), small files per commit and their
size, a share with deletes (each delete commit tombstones a rewritten file) and a share with a CDC
consumer whose watermark holds log versions back from expiry. Each hour the commits land: new small
files, log versions past the checkpoint, and — once past their retention (7 days) — expirable
versions and reclaimable tombstones.

Every policy acts on the same modelled tables through the real code: an action's benefit and work
are :func:`lakeops.planning.benefit.candidates` of the table's :class:`TableObservation`; what a run
really takes is a hidden "true" cost (per-table speed, 8 s overhead, 64 MiB/s, ±30 % noise) that no
policy sees. The planner predicts with the real :class:`lakeops.planning.cost.CostModel`, starting
from its conservative default and learning from every run it made, exactly as it learns from audit
records.

Policies:

- ``cron``: every operation on every table every night at 01:00 (runs with nothing to do still pay
  the job's overhead, as a Spark job that plans and finds nothing does).
- ``sensors``: what lakeops' Dagster sensors do: compaction when a table has 20 mergeable small
  files, a checkpoint every 10 commits, CDC when there are commits to extract (checked hourly), and
  expiry and orphan removal nightly.
- ``planner``: one plan a night at 01:00 (``window: "0 1 * * *"``), or one an hour (``"0 * * * *"``),
  within a share of cron's compute (cron's core-minutes a night times the share, over the windows).

Measured: core-minutes spent; benefit points captured per core-minute; each table's *debt* (the
points maintenance could capture from it now: the same units) sampled every 6 hours — the worst
table's debt averaged over the month and at its peak, and the mean table's.

Run: ``python -m bench.simulate_planner [--tables 500] [--days 30] [--seed 7] [--readme bench/README.md]``.
"""

from __future__ import annotations

import argparse
import functools
import math
import random
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import fmean

from lakeops.planning.benefit import Candidate, candidates
from lakeops.planning.cost import CostModel, RunSample
from lakeops.planning.models import CompactionWork, TableObservation
from lakeops.planning.planner import next_deferrals, plan
from lakeops.registry import MaintenanceBudget

MIB = 1 << 20
TARGET = 128 * MIB
RETENTION_H = 7 * 24
#: The hidden truth of a run: overhead and throughput (the planner's default assumes 20 s, 32 MiB/s).
TRUE_OVERHEAD_S = 8.0
TRUE_THROUGHPUT = 64 * MIB
#: The sensors' triggers (lakeops' registry defaults: small_file_trigger 10, interval 10; 20 here to
#: match a common production setting of the compaction trigger).
SMALL_FILE_TRIGGER = 20
CHECKPOINT_INTERVAL = 10
WINDOW_HOUR = 1
START = "<!-- planner-simulation:start -->"
END = "<!-- planner-simulation:end -->"


@dataclass
class Table:
    """One modelled table: how it grows, and where it stands."""

    name: str
    commits_per_hour: float
    files_per_commit: int
    file_bytes: int
    deletes: bool
    cdc: bool
    speed: float  # the hidden per-table slowness of its runs
    small_files: int = 0
    small_bytes: int = 0
    checkpoint_lag: int = 0
    #: Log versions committed per hour (index: hour), for expiry and the CDC watermark.
    versions: list[int] = field(default_factory=list)
    expired_through: int = 0  # hours whose versions are expired
    #: Tombstoned (bytes, files) per hour.
    tombstones: list[tuple[int, int]] = field(default_factory=list)
    vacuumed_through: int = 0
    cdc_through: int = 0  # hour up to which the consumer has extracted
    cdc_lag: int = 0

    def observe(self, hour: int) -> TableObservation:
        past = max(hour - RETENTION_H, 0)
        expirable = sum(self.versions[self.expired_through : past])
        held = sum(self.versions[max(self.cdc_through, self.expired_through) : past]) if self.cdc else 0
        dead = self.tombstones[self.vacuumed_through : past]
        live_files = self.small_files + 1
        work = []
        if self.small_files >= 2:
            added = max(1, -(-self.small_bytes // TARGET))
            work = [CompactionWork(files_removed=self.small_files, bytes_removed=self.small_bytes, files_added=added)]
        return TableObservation(
            table=self.name,
            format="delta",
            pool=f"lakeops_{self.name}",
            compaction=work,
            checkpoint_lag=self.checkpoint_lag,
            checkpoint_bytes=512 * (live_files + self.checkpoint_lag),
            expirable_versions=expirable,
            expirable_files=expirable,
            expirable_versions_held=held,
            listed_files=live_files + sum(f for _, f in self.tombstones[self.vacuumed_through :]),
            reclaimable_files=sum(f for _, f in dead),
            reclaimable_bytes=sum(b for b, _ in dead),
            cdc_lag_versions=self.cdc_lag,
            cdc_bytes=self.cdc_lag * self.files_per_commit * self.file_bytes,
        )

    def commit(self, hour: int, rng: random.Random) -> None:
        n = _poisson(rng, self.commits_per_hour)
        self.versions.append(n)
        self.tombstones.append((0, 0))
        if not n:
            return
        files = n * self.files_per_commit
        self.small_files += files
        self.small_bytes += files * self.file_bytes
        self.checkpoint_lag += n
        if self.cdc:
            self.cdc_lag += n
        if self.deletes and self.small_files > files:
            # Copy-on-write deletes: one earlier small file rewritten per delete commit.
            gone = min(n // 2 + 1, self.small_files - files)
            self.tombstones[hour] = (gone * self.file_bytes, gone)
            self.small_files -= gone
            self.small_bytes -= gone * self.file_bytes

    def apply(self, candidate: Candidate, hour: int) -> None:
        """What the run does to the table."""
        operation = candidate.action.operation
        past = max(hour - RETENTION_H, 0)
        if operation == "compaction":  # the whole, or a piece of it (the planner's split action)
            files = min(candidate.benefit.files_removed, self.small_files)
            nbytes = min(candidate.work_bytes // 2, self.small_bytes) if files < self.small_files else self.small_bytes
            self.tombstones[hour] = (self.tombstones[hour][0] + nbytes, self.tombstones[hour][1] + files)
            self.small_files, self.small_bytes = self.small_files - files, self.small_bytes - nbytes
            self.checkpoint_lag += 1
        elif operation == "checkpoint":
            self.checkpoint_lag = 0
        elif operation == "expiry":
            self.expired_through = min(past, self.cdc_through) if self.cdc else past
        elif operation == "orphans":
            self.vacuumed_through = past
        elif operation == "cdc":
            self.cdc_lag, self.cdc_through = 0, hour + 1


def _poisson(rng: random.Random, mean: float) -> int:
    if mean > 30:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    limit, k, p = math.exp(-mean), 0, 1.0
    while True:
        p *= rng.random()
        if p <= limit:
            return k
        k += 1


def _estate(count: int, rng: random.Random) -> list[Table]:
    return [
        Table(
            name=f"t{i:03d}",
            commits_per_hour=min(math.exp(rng.gauss(0, 1.5)), 300.0),
            files_per_commit=rng.choice([1, 1, 1, 2, 4, 8]),
            file_bytes=int(math.exp(rng.uniform(math.log(64 << 10), math.log(16 * MIB)))),
            deletes=rng.random() < 0.3,
            cdc=rng.random() < 0.2,
            speed=math.exp(rng.gauss(0, 0.5)),
        )
        for i in range(count)
    ]


def _true_seconds(table: Table, candidate: Candidate, rng: random.Random) -> float:
    work = candidate.work_bytes + candidate.work_files * MIB
    return table.speed * (TRUE_OVERHEAD_S + work / TRUE_THROUGHPUT) * math.exp(rng.gauss(0, 0.3))


@dataclass
class Outcome:
    policy: str
    core_minutes: float = 0.0
    points: float = 0.0
    runs: int = 0
    worst: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)

    def row(self) -> str:
        per = self.points / self.core_minutes if self.core_minutes else 0.0
        worst, mean = fmean(self.worst), fmean(self.mean)
        return (
            f"| {self.policy} | {self.core_minutes:,.0f} | {self.runs:,} | {self.points:,.0f} | {per:,.1f} | "
            f"{worst:,.0f} | {max(self.worst):,.0f} | {mean:,.1f} |"
        )


Policy = Callable[[list[Table], int, Outcome], None]


def _run(table: Table, candidate: Candidate, hour: int, outcome: Outcome, rng: random.Random) -> float:
    seconds = _true_seconds(table, candidate, rng)
    outcome.core_minutes += seconds / 60
    outcome.points += candidate.benefit.points
    outcome.runs += 1
    table.apply(candidate, hour)
    return seconds


def every_operation_policy(rng: random.Random, operations: set[str]) -> Policy:
    """Each night, ``operations`` on every table, whether or not there is anything to do."""

    def act(tables: list[Table], hour: int, outcome: Outcome) -> None:
        if hour % 24 != WINDOW_HOUR:
            return
        for table in tables:
            found = {c.action.operation: c for c in candidates(table.observe(hour)) if c.blocked is None}
            for operation in sorted(operations):
                if operation == "cdc" and not table.cdc:
                    continue
                if operation in found:
                    _run(table, found[operation], hour, outcome, rng)
                else:  # a run that plans, finds nothing and stops: the job's overhead
                    outcome.core_minutes += table.speed * TRUE_OVERHEAD_S * math.exp(rng.gauss(0, 0.3)) / 60
                    outcome.runs += 1

    return act


def sensors_policy(rng: random.Random) -> Policy:
    nightly = every_operation_policy(rng, {"expiry", "orphans"})

    def act(tables: list[Table], hour: int, outcome: Outcome) -> None:
        nightly(tables, hour, outcome)
        for table in tables:
            due = (
                table.small_files >= SMALL_FILE_TRIGGER or table.checkpoint_lag >= CHECKPOINT_INTERVAL or table.cdc_lag
            )
            if not due:
                continue
            for c in candidates(table.observe(hour)):
                op = c.action.operation
                if (
                    (op == "compaction" and table.small_files >= SMALL_FILE_TRIGGER)
                    or (op == "checkpoint" and table.checkpoint_lag >= CHECKPOINT_INTERVAL)
                    or op == "cdc"
                ):
                    _run(table, c, hour, outcome, rng)

    return act


def planner_policy(rng: random.Random, core_minutes: float, every_hours: int) -> Policy:
    """One plan each ``every_hours`` (24: nightly at 01:00) within ``core_minutes`` a window."""
    budget = MaintenanceBudget(core_minutes=core_minutes, length=f"{min(every_hours, 4)}h")
    model = CostModel(budget)
    deferred: dict[str, int] = {}

    def act(tables: list[Table], hour: int, outcome: Outcome) -> None:
        nonlocal deferred
        if hour % every_hours != WINDOW_HOUR % every_hours:
            return
        observations = {t.name: t.observe(hour) for t in tables}
        result = plan(observations.values(), budget, model, deferred=deferred)
        deferred = next_deferrals(result)
        by_table = {t.name: t for t in tables}
        for decision in result.decisions:
            if not decision.chosen:
                continue
            table = by_table[decision.action.table]
            candidate = Candidate(decision.action, decision.benefit, decision.cost.bytes, decision.cost.files)
            seconds = _run(table, candidate, hour, outcome, rng)
            model.learn(RunSample(table.name, decision.action.operation, candidate.work_bytes, candidate.work_files,
                                  seconds, f"{hour:06d}"))  # fmt: skip

    return act


def _debt(table: Table, hour: int) -> float:
    return sum(c.benefit.points for c in candidates(table.observe(hour)) if c.blocked is None)


def simulate(policy: str, make: Callable[[random.Random], Policy], *, tables: int, days: int, seed: int) -> Outcome:
    """``policy`` over a fresh estate of ``tables`` (the same for every policy, by ``seed``)."""
    estate = _estate(tables, random.Random(seed))
    growth, noise = random.Random(seed + 1), random.Random(seed + 2)
    act = make(noise)
    outcome = Outcome(policy)
    for hour in range(days * 24):
        for table in estate:
            table.commit(hour, growth)
        act(estate, hour, outcome)
        if hour % 6 == 0 and hour >= 24:  # after the first night: every policy had its chance
            debts = [_debt(t, hour) for t in estate]
            outcome.worst.append(max(debts))
            outcome.mean.append(sum(debts) / len(debts))
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=500)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--readme", type=Path, help="replace the results table between the markers in this file")
    args = parser.parse_args(argv)
    run = {"tables": args.tables, "days": args.days, "seed": args.seed}
    every_operation = {"compaction", "checkpoint", "expiry", "orphans", "cdc"}
    cron = simulate("cron (every operation, nightly)", lambda rng: every_operation_policy(rng, every_operation), **run)
    outcomes = [cron, simulate("threshold sensors + nightly expiry/orphans", sensors_policy, **run)]
    nightly = cron.core_minutes / args.days
    for every, share in ((24, 0.5), (24, 0.75), (24, 1.0), (1, 0.5), (1, 1.0)):
        window = "nightly" if every == 24 else "hourly"
        budget = nightly * share * every / 24
        name = f"planner {window}, {share:.0%} of cron's compute ({budget:,.1f} core-min a window)"
        policy = functools.partial(planner_policy, core_minutes=budget, every_hours=every)
        outcomes.append(simulate(name, policy, **run))
    table = "\n".join(
        [
            f"{args.tables} tables, {args.days} days, seed {args.seed}. Debt: benefit points maintenance could "
            "capture from a table now (one point: one file a full scan opens needlessly), sampled every 6 h.",
            "",
            "| policy | core-min | runs | points captured | points per core-min | worst table's debt (mean) "
            "| worst table's debt (peak) | mean table's debt |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
            *(o.row() for o in outcomes),
        ]
    )
    sys.stdout.write(table + "\n")
    if args.readme is not None:
        text = args.readme.read_text()
        block = f"{START}\n{table}\n{END}"
        args.readme.write_text(re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S))
    return 0


if __name__ == "__main__":
    sys.exit(main())
