"""The table registry with its maintenance policies: what the Dagster definitions are generated from.

The file is the one the command line reads (:func:`lakeops.registry.registry_path`:
``$LAKEOPS_REGISTRY``, else ``lakeops.yaml`` in the working directory, which is the project root
when ``dagster dev`` or the code server starts there; no file there: no tables). ``lakeops`` reads
only each entry's address; here every key is validated (pydantic, unknown keys refused) and every
error names the table and the key, so a typo fails the code location's load instead of silently
switching a policy off. Secrets never live here: S3 credentials are named by the environment
variables that hold them, read through ``dagster.EnvVar`` at run time. Example::

    storage:
      endpoint_url: http://127.0.0.1:9000          # optional; default: the AWS configuration chain
      access_key_id_env: LAKE_KEY_ID               # optional; names of environment variables
      secret_access_key_env: LAKE_SECRET
    spark: {master: "local[4]", conf: {spark.executor.memory: 2g}}
    maintenance_budget: {window: "0 1 * * *", core_minutes: 120}   # optional: lakeops.planning
    tables:
      - name: events                               # a Dagster name: letters, digits, underscores
        location: s3://lake/events                 # or catalog: {uri: sqlite:///cat.db} + identifier: db.events
                                                   # (or catalog: {type: glue, region: eu-west-1})
                                                   # REST: catalog: {type: rest, uri: https://..., token_env: NAME}
        format: auto                               # auto | delta | iceberg | icechunk
        owners: [team:data-platform]
        tags: {tier: gold}
        compaction: {target_file_size: 128MB, min_input_files: 5, small_file_trigger: 20, partitioned: true}
        checkpoint: {interval: 10}
        expiry: {older_than: 30d, retain_last: 50}
        orphans: {older_than: 7d}
        cdc: {enabled: true, output: s3://lake/events_changes, start_date: 2026-11-01, key: [event_id]}
        schedules: {nightly: "0 3 * * *", health: "*/30 * * * *"}
        health: {small_files: {warn: 20, error: 500}, cdc_lag_time: {warn: 30min, error: 2h}}

``health`` holds the thresholds of the table's health checks (:mod:`lakeops.ops.health`), one
``{warn, error}`` per signal; a key left out keeps its default and ``null`` turns that level off.
The defaults follow the table's policies where one says when maintenance is due: ``small_files``
warns at ``compaction.small_file_trigger`` (errors at 10 times it), ``small_file_ratio`` at
``compaction.fragment_ratio_trigger`` (else never: a young table is all small files),
``checkpoint_lag`` at ``checkpoint.interval`` (10 times), ``oldest_snapshot_age`` at twice
``expiry.older_than`` (4 times; else 60d and 180d). The others: ``manifests`` 100/1000, ``snapshots`` 1000/10000,
``reclaimable_bytes`` 10GB/100GB, ``cdc_lag_versions`` 100/1000, ``cdc_lag_time`` 1h/6h (also the
CDC output's freshness windows: raise it above the cron's interval for CDC on a ``schedules.cdc``
cron), ``last_expiry`` and ``last_orphans`` 2d/7d (the nightly schedule's), ``last_compaction``,
``last_checkpoint`` and ``last_cdc`` off (sensors run those when needed: their age alone says nothing).
"""

from __future__ import annotations

import os
import re
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Literal

import dagster as dg
import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from lakeops.errors import InvalidArgument, LakeopsError
from lakeops.ops.health import SIGNALS, Limit, applicable_signals, format_value
from lakeops.planning.models import MaintenanceBudget
from lakeops.registry import REGISTRY_ENV, RegisteredTable, registry_path
from lakeops.units import parse_duration, parse_size

__all__ = ["Registry", "RegistryError", "TableEntry", "load_registry", "parse_registry"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TAG_KEY = re.compile(r"^([A-Za-z0-9_.-]{1,63}/)?[A-Za-z0-9_.-]{1,63}$")
_TAG_VALUE = re.compile(r"^[A-Za-z0-9_.-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class RegistryError(InvalidArgument):
    """The registry file is missing, unreadable, or holds a key or value that is not allowed."""


def _duration(text: str) -> str:
    try:
        parse_duration(text)
    except LakeopsError as exc:  # as a ValueError, pydantic reports it with the key
        raise ValueError(str(exc)) from None
    return text


def _size(value: int | str) -> int:
    if isinstance(value, int):
        if value <= 0:
            raise ValueError(f"{value} is not a positive size")
        return value
    try:
        return parse_size(value)
    except LakeopsError as exc:
        raise ValueError(str(exc)) from None


def _cron(text: str) -> str:
    """Valid exactly when Dagster accepts it as a schedule's cron string."""
    try:
        dg.ScheduleDefinition(name="cron_check", cron_schedule=text, job_name="cron_check")
    except (dg.DagsterInvalidDefinitionError, dg.DagsterInvariantViolationError):
        raise ValueError(f"{text!r} is not a cron expression (five fields, e.g. '0 3 * * *')") from None
    return text


def _env_name(text: str) -> str:
    if not _ENV_NAME.match(text):
        raise ValueError(f"{text!r} is not an environment variable name (the secret itself never goes here)")
    return text


def _window(text: str) -> str:
    """A duration Dagster accepts as a freshness window: a minute or more."""
    if parse_duration(_duration(text)).total_seconds() < 60:
        raise ValueError(f"{text!r} is shorter than a minute, the shortest freshness window Dagster takes")
    return text


Duration = Annotated[str, AfterValidator(_duration)]
Window = Annotated[str, AfterValidator(_window)]
Size = Annotated[int | str, AfterValidator(_size)]
Cron = Annotated[str, AfterValidator(_cron)]
EnvName = Annotated[str, AfterValidator(_env_name)]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CompactionPolicy(_Strict):
    """Compact when the table has ``small_file_trigger`` mergeable small files, or when small files
    make up ``fragment_ratio_trigger`` of its live files; ``partitioned``: one Dagster partition per
    table partition (a run compacts the partitions it is given, through ``--where``).
    ``commit_retries``/``commit_timeout``: how long a commit that loses races to writers keeps
    rebasing (None: the table's ``commit.retry.*`` properties, else lakeops' defaults)."""

    target_file_size: Size | None = None
    min_input_files: int = Field(default=5, ge=1)
    commit_retries: int | None = Field(default=None, ge=0)
    commit_timeout: Duration | None = None
    small_file_trigger: int = Field(default=10, ge=1)
    fragment_ratio_trigger: float | None = Field(default=None, gt=0, le=1)
    partitioned: bool = False


class CheckpointPolicy(_Strict):
    """Checkpoint (Delta) or rewrite manifests (Iceberg) once this many commits landed since the last one."""

    interval: int = Field(default=10, ge=1)


class ExpiryPolicy(_Strict):
    """``None``: the table's own retention properties (and the operation's safe default)."""

    older_than: Duration | None = None
    retain_last: int | None = Field(default=None, ge=1)


class OrphansPolicy(_Strict):
    older_than: Duration | None = None


class CdcPolicy(_Strict):
    """Extract the change feed into ``output``, partitioned by commit day (UTC) from ``start_date``.
    ``key``: the columns that identify a row, for the duplicate check (default: every column)."""

    enabled: bool = False
    output: str | None = None
    partitioning: Literal["daily"] = "daily"
    start_date: date | None = None
    key: list[str] = []

    @model_validator(mode="after")
    def _complete(self) -> CdcPolicy:
        if self.enabled and (self.output is None or self.start_date is None):
            missing = "output" if self.output is None else "start_date"
            raise ValueError(f"{missing}: required when cdc is enabled")
        return self


class Schedules(_Strict):
    """Cron strings (UTC): ``nightly`` runs expiry and orphans, ``health`` observes the table; the
    others add a schedule next to the sensor that already triggers that operation."""

    nightly: Cron = "0 3 * * *"
    health: Cron = "*/30 * * * *"
    compaction: Cron | None = None
    checkpoint: Cron | None = None
    cdc: Cron | None = None


class CountLimit(_Strict):
    warn: int | None = Field(default=None, ge=1)
    error: int | None = Field(default=None, ge=1)


class RatioLimit(_Strict):
    warn: float | None = Field(default=None, gt=0, le=1)
    error: float | None = Field(default=None, gt=0, le=1)


class AgeLimit(_Strict):
    warn: Duration | None = None
    error: Duration | None = None


class WindowLimit(_Strict):
    warn: Window | None = None
    error: Window | None = None


class SizeLimit(_Strict):
    warn: Size | None = None
    error: Size | None = None


class HealthPolicy(_Strict):
    """Thresholds of the health checks, by signal; None: the defaults (:meth:`TableEntry.health_limits`)."""

    small_files: CountLimit | None = None
    small_file_ratio: RatioLimit | None = None
    checkpoint_lag: CountLimit | None = None
    manifests: CountLimit | None = None
    snapshots: CountLimit | None = None
    oldest_snapshot_age: AgeLimit | None = None
    reclaimable_bytes: SizeLimit | None = None
    cdc_lag_versions: CountLimit | None = None
    cdc_lag_time: WindowLimit | None = None
    last_compaction: AgeLimit | None = None
    last_checkpoint: AgeLimit | None = None
    last_expiry: AgeLimit | None = None
    last_orphans: AgeLimit | None = None
    last_cdc: AgeLimit | None = None


def _seconds(text: str | None) -> float | None:
    return None if text is None else parse_duration(text).total_seconds()


_DAY = 86400.0


class TableEntry(RegisteredTable):
    """One maintained table: its address (validated by :class:`lakeops.registry.RegisteredTable`)
    and its policies."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str | None = None
    owners: list[str] = []
    tags: dict[str, str] = {}
    compaction: CompactionPolicy = CompactionPolicy()
    checkpoint: CheckpointPolicy = CheckpointPolicy()
    expiry: ExpiryPolicy = ExpiryPolicy()
    orphans: OrphansPolicy = OrphansPolicy()
    cdc: CdcPolicy = CdcPolicy()
    schedules: Schedules = Schedules()
    health: HealthPolicy = HealthPolicy()

    @model_validator(mode="after")
    def _valid(self) -> TableEntry:
        if not _NAME.match(self.name):
            raise ValueError(f"name: {self.name!r} must be letters, digits and underscores, not starting with a digit")
        for owner in self.owners:
            if not ("@" in owner or (owner.startswith("team:") and len(owner) > 5)):
                raise ValueError(f"owners: {owner!r} must be an email address or team:<name>")
        for key, value in self.tags.items():
            if not _TAG_KEY.match(key) or not _TAG_VALUE.match(value):
                raise ValueError(f"tags.{key}: keys and values are letters, digits, '_', '.', '-' (63 at most)")
        if self.compaction.partitioned and self.schedules.compaction is not None:
            raise ValueError(
                "schedules.compaction: not available for a partitioned compaction (the small-file sensor requests "
                "the partitions that need it)"
            )
        for name, limit in self.health_limits().items():
            if limit.warn is not None and limit.error is not None and limit.warn > limit.error:
                unit = SIGNALS[name].unit
                raise ValueError(
                    f"health.{name}: warn ({format_value(unit, limit.warn)}) is above error "
                    f"({format_value(unit, limit.error)}); give both, or a warn at or below the error"
                )
        return self

    def _default_limits(self) -> dict[str, Limit]:
        """The thresholds the registry leaves to defaults: where a policy says when maintenance is
        due, the warning is that point (the sensor's trigger), so "needs compaction" means what the
        small-file sensor acts on."""
        older_than = _seconds(self.expiry.older_than)
        nightly = Limit(warn=2 * _DAY, error=7 * _DAY)
        return {
            "small_files": Limit(
                warn=self.compaction.small_file_trigger, error=10 * self.compaction.small_file_trigger
            ),
            # Off unless compaction triggers on it: every young table is all small files.
            "small_file_ratio": Limit(warn=self.compaction.fragment_ratio_trigger),
            "checkpoint_lag": Limit(warn=self.checkpoint.interval, error=10 * self.checkpoint.interval),
            "manifests": Limit(warn=100, error=1000),
            "snapshots": Limit(warn=1000, error=10000),
            "oldest_snapshot_age": (
                Limit(warn=2 * older_than, error=4 * older_than)
                if older_than
                else Limit(warn=60 * _DAY, error=180 * _DAY)
            ),
            "reclaimable_bytes": Limit(warn=10 * 1024**3, error=100 * 1024**3),
            "cdc_lag_versions": Limit(warn=100, error=1000),
            "cdc_lag_time": Limit(warn=3600, error=6 * 3600),
            "last_compaction": Limit(),
            "last_checkpoint": Limit(),
            "last_expiry": nightly,
            "last_orphans": nightly,
            "last_cdc": Limit(),
        }

    def health_limits(self) -> dict[str, Limit]:
        """The thresholds of every health signal that applies to this table (its format, CDC on or
        off): the registry's ``health`` values over the defaults, durations in seconds, sizes in bytes."""
        defaults = self._default_limits()
        limits = {}
        for name in applicable_signals(self.format, cdc=self.cdc.enabled):
            given = getattr(self.health, name)
            levels = {} if given is None else {k: getattr(given, k) for k in given.model_fields_set}
            if isinstance(given, AgeLimit | WindowLimit):
                levels = {k: _seconds(v) for k, v in levels.items()}
            limits[name] = defaults[name].model_copy(update=levels)
        return limits

    @property
    def address(self) -> str:
        """How the operations name the table: its location, or its catalog identifier."""
        return self.location or str(self.identifier)

    def catalog_options(self) -> dict[str, str | bool | None]:
        """The operations' ``catalog_*`` options for a catalog table (its type, address, and for a REST
        catalog the names of the environment variables with its secrets), else none."""
        return {} if self.catalog is None else self.catalog.options()


class StorageConfig(_Strict):
    """Non-secret S3 settings, and the names of the environment variables holding the keys."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id_env: EnvName | None = None
    secret_access_key_env: EnvName | None = None

    @model_validator(mode="after")
    def _pair(self) -> StorageConfig:
        if (self.access_key_id_env is None) != (self.secret_access_key_env is None):
            raise ValueError("access_key_id_env and secret_access_key_env: give both or neither")
        return self


class SparkConfig(_Strict):
    master: str | None = None
    conf: dict[str, str] = {}


class Registry(_Strict):
    tables: list[TableEntry] = []
    storage: StorageConfig = StorageConfig()
    spark: SparkConfig = SparkConfig()
    #: Where every run's audit record goes instead of the table root (read by :mod:`lakeops.audit`).
    audit_location: str | None = None
    #: Benefit-ranked maintenance within this many core-minutes per window (:mod:`lakeops.planning`).
    maintenance_budget: MaintenanceBudget | None = None

    @model_validator(mode="after")
    def _unique(self) -> Registry:
        names = [t.name for t in self.tables]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"tables: {', '.join(twice)} registered more than once")
        return self

    @model_validator(mode="after")
    def _budget_window(self) -> Registry:
        if self.maintenance_budget is not None:
            _cron(self.maintenance_budget.window)
        return self

    def table(self, name: str) -> TableEntry:
        for entry in self.tables:
            if entry.name == name:
                return entry
        raise RegistryError(f"registry: no table named {name!r}")


def _describe(error: Any, raw: Any) -> str:
    """One pydantic error as ``table 'x': key.path: problem``."""
    loc = list(error["loc"])
    where = ""
    if len(loc) >= 2 and loc[0] == "tables" and isinstance(loc[1], int):
        tables = raw.get("tables") if isinstance(raw, dict) else None
        entry = tables[loc[1]] if isinstance(tables, list) and loc[1] < len(tables) else None
        name = entry.get("name") if isinstance(entry, dict) else None
        where = f"table {name!r}: " if name else f"tables[{loc[1]}]: "
        loc = loc[2:]
    key = ".".join(str(part) for part in loc)
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "extra_forbidden":
        return f"{where}unknown key {key}"
    if error["type"] == "missing":
        return f"{where}{key}: missing"
    return f"{where}{key}: {message}" if key else f"{where}{message}"


def parse_registry(text: str, source: str = "registry") -> Registry:
    """Validate registry YAML; :class:`RegistryError` names ``source``, each bad table and key."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RegistryError(f"{source}: not valid YAML ({exc})") from exc
    try:
        return Registry.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        problems = "; ".join(_describe(e, raw) for e in exc.errors())
        raise RegistryError(f"{source}: {problems}") from None


def load_registry(path: Path | None = None) -> Registry:
    """The registry at ``path`` (default: the command line's registry file). The default file may be
    absent (no tables); a file named explicitly must exist."""
    explicit = path is not None or REGISTRY_ENV in os.environ
    path = path or registry_path()
    if not path.is_file():
        if explicit:
            raise RegistryError(f"registry {path}: file not found")
        return Registry()
    return parse_registry(path.read_text(), str(path))
