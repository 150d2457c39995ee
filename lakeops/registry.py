"""The registry file: the tables the platform maintains, their addresses and maintenance policies.

The file is ``$LAKEOPS_REGISTRY``, else ``lakeops.yaml`` in the working directory (for ``dagster dev``
or the code server, the project root they start in; no file there: no tables). One schema validates
it, for every reader that acts on the whole file: the Dagster definitions (:mod:`orchestration.definitions`)
and ``lakeops plan-maintenance`` both call :func:`load_registry` (pydantic, unknown keys refused), and
every error is a :class:`RegistryError` naming the file, the table and the key, so a typo fails the load
instead of silently switching a policy off. The command line also accepts a registry name wherever it
takes a table; :func:`lookup` then reads only that entry's address (``name``, ``location`` or
``catalog`` + ``identifier``, ``format``). A catalog is ``{type: sql, uri, name}`` (the default type, a
SQLAlchemy URL), ``{type: glue, region, endpoint_url, catalog_id}`` (AWS Glue) or ``{type: rest, uri,
warehouse, credential_env, token_env, prefix, vended_credentials}`` (an Iceberg REST catalog). Secrets
never live here: a REST catalog's and S3's are named by the environment variables that hold them.
Example::

    storage:
      endpoint_url: http://127.0.0.1:9000          # optional; default: the AWS configuration chain
      access_key_id_env: LAKE_KEY_ID               # optional; names of environment variables
      secret_access_key_env: LAKE_SECRET
    spark: {master: "local[4]", conf: {spark.executor.memory: 2g}, executor: auto}  # auto | spark | driver
    maintenance_budget: {window: "0 1 * * *", core_minutes: 120}   # optional: lakeops.planning
    health_report: /srv/lakeops/health.html        # optional: the overview writes lakeops health --html here
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

Schedules and the budget's window are cron expressions in UTC, read without Dagster by
:func:`cron_problem`: five fields (minute, hour, day of month, month, day of week) of numbers, ``*``,
ranges, steps and lists, month and day names, or one of ``@hourly``, ``@daily``, ``@midnight``,
``@weekly``, ``@monthly``, ``@yearly``, ``@annually``; every one it accepts is a schedule Dagster runs
as written (the tests hold it to Dagster's own parser). Extensions some schedulers add (``L``, ``W``,
``#``, ``?``, ``H``), ranges that wrap around and dates no month has (``0 0 30 2 *``) are refused.

``health`` holds the thresholds of the table's health checks (:mod:`lakeops.health_signals`), one
``{warn, error}`` per signal; a key left out keeps its default and ``null`` turns that level off.
The defaults follow the table's policies where one says when maintenance is due: ``small_files``
warns at ``compaction.small_file_trigger`` (errors at 10 times it), ``small_file_ratio`` at
``compaction.fragment_ratio_trigger`` (else 75 %; never on a table of under 10 live files, which
is all small files while young),
``checkpoint_lag`` at ``checkpoint.interval`` (10 times), ``oldest_snapshot_age`` at twice
``expiry.older_than`` (4 times; else 60d and 180d). The others: ``manifests`` 100/1000, ``snapshots`` 1000/10000,
``reclaimable_bytes`` 10GB/100GB, ``cdc_lag_versions`` 100/1000, ``cdc_lag_time`` 1h/6h (also the
CDC output's freshness windows: raise it above the cron's interval for CDC on a ``schedules.cdc``
cron), ``last_expiry`` and ``last_orphans`` 2d/7d (the nightly schedule's), ``last_compaction``,
``last_checkpoint`` and ``last_cdc`` off (sensors run those when needed: their age alone says nothing).
"""

from __future__ import annotations

import difflib
import os
import re
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from lakeops.compaction_options import CommitRetries, Sizing
from lakeops.errors import LakeopsError, UsageError
from lakeops.health_signals import SIGNALS, Limit, applicable_signals, format_value
from lakeops.retention_options import ExpiryAge, OrphansAge, RetainLast
from lakeops.units import epoch_ms, parse_duration, parse_size

__all__ = [
    "REST_ONLY",
    "REGISTRY_ENV",
    "CatalogAddress",
    "CatalogType",
    "MaintenanceBudget",
    "RegisteredTable",
    "Registry",
    "RegistryError",
    "TableEntry",
    "cron_problem",
    "load_registry",
    "lookup",
    "parse_registry",
    "registry_audit_location",
    "registry_path",
    "why_unknown",
]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TAG_KEY = re.compile(r"([A-Za-z0-9_.-]{1,63}/)?[A-Za-z0-9_.-]{1,63}")
_TAG_VALUE = re.compile(r"[A-Za-z0-9_.-]{0,63}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class RegistryError(UsageError):
    """The registry file is missing, unreadable, or holds a key or value that is not allowed: the
    command line exits 2 for it, as for a bad option."""


#: The Iceberg catalogs an entry (and the command line) can name, beside a file-system table's location.
CatalogType = Literal["sql", "glue", "rest"]

REGISTRY_ENV = "LAKEOPS_REGISTRY"
DEFAULT_FILE = "lakeops.yaml"


class CatalogAddress(BaseModel):
    """An entry's Iceberg catalog: ``type: sql`` (the default) with ``uri`` (a SQLAlchemy URL) and
    ``name``; ``type: glue`` with optional ``region``, ``endpoint_url`` and ``catalog_id`` (the AWS
    account); ``type: rest`` with ``uri`` and the REST settings ``warehouse``, ``credential_env``,
    ``token_env``, ``prefix`` and ``vended_credentials`` (see
    :class:`lakeops.iceberg.rest_client.RestSettings`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: CatalogType = "sql"
    uri: str | None = None
    name: str = "default"
    region: str | None = None
    endpoint_url: str | None = None
    catalog_id: str | None = None
    warehouse: str | None = None
    credential_env: str | None = None
    token_env: str | None = None
    prefix: str | None = None
    vended_credentials: bool | None = None

    @model_validator(mode="after")
    def _keys_of_its_type(self) -> CatalogAddress:
        glue_keys = [key for key in GLUE_ONLY if getattr(self, key) is not None]
        rest_keys = [key for key in REST_ONLY if getattr(self, key) is not None]
        if self.type != "glue" and self.uri is None:
            raise ValueError(f"a {self.type.upper()} catalog needs a uri")
        if self.type != "glue" and glue_keys:
            raise ValueError(f"{', '.join(glue_keys)}: only for a Glue catalog (type: glue)")
        if self.type == "glue" and self.uri is not None:
            raise ValueError("uri: a Glue catalog takes endpoint_url (and region, catalog_id), not uri")
        if self.type != "rest" and rest_keys:
            raise ValueError(f"{', '.join(rest_keys)}: only a catalog of type rest takes them")
        return self

    def options(self) -> dict[str, str | bool | None]:
        """The operations' ``catalog_*`` options (:class:`lakeops.ops.target.CatalogOptions` fields)."""
        if self.type == "glue":
            return {
                "catalog_type": "glue",
                "catalog_uri": self.endpoint_url,
                "catalog_region": self.region,
                "catalog_id": self.catalog_id,
            }
        fields = {"type": self.type, "uri": self.uri, "name": self.name}
        fields |= {key: getattr(self, key) for key in REST_ONLY if getattr(self, key) is not None}
        return {f"catalog_{key}": value for key, value in fields.items()}


#: The catalog settings only a Glue catalog has.
GLUE_ONLY = ("region", "endpoint_url", "catalog_id")
#: The catalog settings only a REST catalog has.
REST_ONLY = ("warehouse", "credential_env", "token_env", "prefix", "vended_credentials")


class RegisteredTable(BaseModel):
    """An entry's address, all a name lookup needs (the whole entry, policies included, is
    :class:`TableEntry`, validated when the whole file is loaded)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    location: str | None = None
    catalog: CatalogAddress | None = None
    identifier: str | None = None
    format: Literal["auto", "delta", "iceberg", "icechunk"] = "auto"

    @model_validator(mode="after")
    def _one_address(self) -> RegisteredTable:
        if self.location is None and (self.catalog is None or self.identifier is None):
            raise ValueError("location: missing (give location, or catalog and identifier)")
        if self.location is not None and (self.catalog is not None or self.identifier is not None):
            raise ValueError("location: give location, or catalog and identifier, not both")
        return self


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


#: Each cron field: its name, its lowest and highest value, where ``*`` and ``a/step`` end (Sunday is
#: 0 and 7, and Dagster's reader ends a day-of-week step at 6), and the names its values may go by.
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_CRON_FIELDS: tuple[tuple[str, int, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, 59, {}),
    ("hour", 0, 23, 23, {}),
    ("day of month", 1, 31, 31, {}),
    ("month", 1, 12, 12, {name: i for i, name in enumerate(_MONTHS, start=1)}),
    ("day of week", 0, 7, 6, {name: i for i, name in enumerate(_DAYS)}),
)
_CRON_ALIASES = frozenset({"@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually"})
#: The longest each month can be (February in a leap year).
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _cron_number(text: str, names: dict[str, int]) -> int | None:
    if text.isascii() and text.isdigit():
        return int(text)
    return names.get(text.upper())


def _cron_field(text: str, low: int, high: int, open_high: int, names: dict[str, int]) -> set[int] | str:
    """The values one field selects, or what is wrong with it. A range of one value (``5-5``, ``23/5``
    in hours) is refused: Dagster's reader takes it for ``*``, running the schedule far more often."""
    values: set[int] = set()
    for item in text.split(","):
        body, slash, step_text = item.partition("/")
        step = int(step_text) if step_text.isascii() and step_text.isdigit() else 0
        if slash and step < 1:
            return f"{item!r} has no step of 1 or more"
        if body == "*":
            first, last = low, open_high
        else:
            start, dash, end = body.partition("-")
            first_or_none = _cron_number(start, names)
            last_or_none = _cron_number(end, names) if dash else (open_high if slash else first_or_none)
            if first_or_none is None or last_or_none is None:
                return f"{item!r} is not a number, a range or '*'"
            first, last = first_or_none, last_or_none
            if not low <= first <= high or not low <= last <= high:
                return f"{item!r} is outside {low}-{high}"
            if (dash or slash) and first >= last:
                return (
                    f"{item!r} is a range that wraps around"
                    if first > last and dash
                    else f"{item!r} selects {start} alone: write {start!r}"
                )
        values.update(range(first, last + 1, step or 1))
    return values


def cron_problem(text: str) -> str | None:
    """Why ``text`` is not a cron expression a schedule can run (see the module docstring), or None."""
    if text in _CRON_ALIASES:
        return None
    fields = text.split()
    if len(fields) != len(_CRON_FIELDS):
        return f"it has {len(fields)} of the five fields (minute hour day-of-month month day-of-week)"
    selected: list[set[int]] = []
    for field_text, (what, low, high, open_high, names) in zip(fields, _CRON_FIELDS, strict=True):
        values = _cron_field(field_text, low, high, open_high, names)
        if isinstance(values, str):
            return f"{what} {values}"
        selected.append(values)
    days, months = selected[2], selected[3]
    if fields[4] == "*" and min(days) > max(_MONTH_DAYS[m - 1] for m in months):
        return f"no month it names has day {min(days)}: it would never run"
    return None


def _cron(text: str) -> str:
    problem = cron_problem(text)
    if problem is not None:
        raise ValueError(f"{text!r} is not a cron expression: {problem} (e.g. '0 3 * * *')")
    return text


def _env_name(text: str) -> str:
    if not _ENV_NAME.fullmatch(text):
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


class CompactionPolicy(Sizing, CommitRetries):
    """Compact when the table has ``small_file_trigger`` mergeable small files, or when small files
    make up ``fragment_ratio_trigger`` of its live files; ``partitioned``: one Dagster partition per
    table partition (a run compacts the partitions it is given, through ``--where``). The options a
    run applies (``target_file_size``, ``min_input_files``, ``commit_retries``, ``commit_timeout``)
    are the compaction options' own fields (:mod:`lakeops.compaction_options`)."""

    small_file_trigger: int = Field(default=10, ge=1)
    fragment_ratio_trigger: float | None = Field(default=None, gt=0, le=1)
    partitioned: bool = False

    def run_options(self) -> dict[str, Any]:
        """The compaction options this policy sets (the triggers decide when a run happens, not what it does)."""
        return {name: getattr(self, name) for name in (*Sizing.model_fields, *CommitRetries.model_fields)}


class CheckpointPolicy(_Strict):
    """Checkpoint (Delta) or rewrite manifests (Iceberg) once this many commits landed since the last one."""

    interval: int = Field(default=10, ge=1)


class ExpiryPolicy(ExpiryAge, RetainLast):
    """``None``: the table's own retention properties (and the operation's safe default). The keys are
    the expiry options' own fields (:mod:`lakeops.retention_options`)."""


class OrphansPolicy(OrphansAge):
    """``None``: the table's own retention (and the operation's safe default); the orphans option's own field."""


class CdcPolicy(_Strict):
    """Extract the change feed into ``output``, partitioned by commit day (UTC) from ``start_date``.
    ``key``: the columns that identify a row, for the duplicate check (default: every column)."""

    enabled: bool = False
    output: str | None = None
    partitioning: Literal["daily"] = "daily"
    start_date: date | None = None
    key: list[str] = []

    @property
    def since_ms(self) -> int:
        """When extraction starts: midnight UTC of ``start_date`` in epoch milliseconds (none: 0)."""
        start = self.start_date or date(1970, 1, 1)
        return epoch_ms(datetime(start.year, start.month, start.day, tzinfo=UTC))

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


class MaintenanceBudget(BaseModel):
    """The registry's ``maintenance_budget``: ``core_minutes`` to spend per window, the window
    opening at each tick of the ``window`` cron (UTC) and lasting ``length``; ``cores_per_run``: the
    cores one run occupies (a run's core-minutes are its wall minutes times that)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    window: Cron = "0 1 * * *"
    core_minutes: float = Field(gt=0)
    length: str = "4h"
    cores_per_run: float = Field(default=1.0, gt=0)

    @field_validator("length")
    @classmethod
    def _duration(cls, text: str) -> str:
        seconds = parse_duration(_duration(text)).total_seconds()
        if seconds <= 0:
            raise ValueError(f"{text!r} is not a positive duration")
        return text

    @property
    def length_minutes(self) -> float:
        return parse_duration(self.length).total_seconds() / 60


class TableEntry(RegisteredTable):
    """One maintained table: its address (validated by :class:`RegisteredTable`) and its policies."""

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
        if not _NAME.fullmatch(self.name):
            raise ValueError(f"name: {self.name!r} must be letters, digits and underscores, not starting with a digit")
        for owner in self.owners:
            if not ("@" in owner or (owner.startswith("team:") and len(owner) > 5)):
                raise ValueError(f"owners: {owner!r} must be an email address or team:<name>")
        for key, value in self.tags.items():
            if not _TAG_KEY.fullmatch(key) or not _TAG_VALUE.fullmatch(value):
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
            # Compaction's own trigger, else three in four files small; tables under the signal's
            # min_live_files are never flagged (a young table is all small files).
            "small_file_ratio": Limit(warn=self.compaction.fragment_ratio_trigger or 0.75),
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

    @property
    def pool(self) -> str:
        """The concurrency pool the table's runs queue in (Dagster's pool; the planner's unit of limits)."""
        return f"lakeops_{self.name}"

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


#: Where a Dagster run's units execute: ``auto`` (a plan within the driver's limits in threads of the
#: run's process, a larger one on Spark), ``spark`` (every plan on Spark), ``driver`` (never Spark).
ExecutorChoice = Literal["auto", "spark", "driver"]


class SparkConfig(_Strict):
    """The Dagster runs' Spark resource: ``master``, ``conf`` and where units run (``executor``)."""

    master: str | None = None
    conf: dict[str, str] = {}
    executor: ExecutorChoice = "auto"


class Registry(_Strict):
    tables: list[TableEntry] = []
    storage: StorageConfig = StorageConfig()
    spark: SparkConfig = SparkConfig()
    #: Where every run's audit record goes instead of the table root (read by :mod:`lakeops.audit`).
    audit_location: str | None = None
    #: Benefit-ranked maintenance within this many core-minutes per window (:mod:`lakeops.planning`).
    maintenance_budget: MaintenanceBudget | None = None
    #: The HTML health report with plots (``lakeops health --html``) that the Dagster overview rewrites at
    #: each of its own materializations and links to: an absolute path, as the code location may run anywhere.
    health_report: str | None = None

    @field_validator("health_report")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not Path(value).is_absolute():
            raise ValueError(f"{value!r} must be an absolute path (the code location's working folder varies)")
        return value

    @model_validator(mode="after")
    def _unique(self) -> Registry:
        names = [t.name for t in self.tables]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"tables: {', '.join(twice)} registered more than once")
        return self

    def table(self, name: str) -> TableEntry:
        for entry in self.tables:
            if entry.name == name:
                return entry
        raise RegistryError(f"registry: no table named {name!r}")


def registry_path() -> Path:
    return Path(os.environ.get(REGISTRY_ENV) or DEFAULT_FILE)


def _text(path: Path) -> str:
    """The registry file's text: one that cannot be read, or is not UTF-8 (YAML's encoding), is refused
    naming it."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RegistryError(f"registry {path}: cannot read it ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise RegistryError(f"registry {path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from exc


def _yaml(text: str, source: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RegistryError(f"{source}: not valid YAML ({exc})") from exc


def _document(path: Path) -> Any:
    return _yaml(_text(path), f"registry {path}")


def _entries(path: Path) -> list[Any]:
    document = _document(path)
    tables = (document or {}).get("tables", []) if isinstance(document, dict) else None
    if not isinstance(tables, list):
        raise RegistryError(f"registry {path}: 'tables' must be a list of table entries")
    return tables


def lookup(name: str) -> RegisteredTable | None:
    """The registry entry called ``name``, or None when there is no registry or no such entry."""
    path = registry_path()
    if not path.is_file():
        if REGISTRY_ENV in os.environ:
            raise RegistryError(f"registry {path} (from ${REGISTRY_ENV}) does not exist")
        return None
    for i, raw in enumerate(_entries(path)):
        if isinstance(raw, dict) and raw.get("name") == name:
            try:
                return RegisteredTable.model_validate(raw)
            except ValidationError as exc:
                problems = "; ".join(_describe(e, raw) for e in exc.errors())
                raise RegistryError(f"registry {path}: table {name!r} (entry {i}): {problems}") from None
    return None


def why_unknown(name: str) -> str:
    """Why ``name`` is no registry table, for an error message: the registry searched (and where its
    path came from) with its closest names, or that there is no registry file."""
    path = registry_path()
    if not path.is_file():  # with $LAKEOPS_REGISTRY set, lookup() has refused the missing file already
        return f"no registry to look the name up in (${REGISTRY_ENV} is not set and {path.resolve()} does not exist)"
    source = f"from ${REGISTRY_ENV}" if REGISTRY_ENV in os.environ else f"in the working directory; no ${REGISTRY_ENV}"
    names = [raw["name"] for raw in _entries(path) if isinstance(raw, dict) and isinstance(raw.get("name"), str)]
    close = difflib.get_close_matches(name, names, n=3)
    hint = f"did you mean {' or '.join(map(repr, close))}?" if close else f"none of its {len(names)} names is close"
    return f"no table named {name!r} in registry {path.resolve()} ({source}); {hint}"


def registry_audit_location() -> str | None:
    """The registry's top-level ``audit_location`` (where run audit records go), if it has one."""
    path = registry_path()
    if not path.is_file():
        return None
    document = _document(path)
    location = document.get("audit_location") if isinstance(document, dict) else None
    if location is not None and not isinstance(location, str):
        raise RegistryError(f"registry {path}: audit_location must be a path or URI, not {location!r}")
    return location or None


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
    raw = _yaml(text, source)
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
    return parse_registry(_text(path), str(path))
