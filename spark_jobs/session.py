"""Spark session for lakeops jobs: works out of the box locally, defers to the cluster when told.

This is the "execute" half of the plan → execute → commit → report flow (docs/architecture.md): the driver plans
with ``lakeops`` and Spark only runs pure ``lakeops`` functions on plan units (see
:mod:`spark_jobs.spark_tasks`). So the session needs no Hadoop/S3A settings, only:

- the right Python on the workers (the running interpreter, so locally the workers see the same
  virtualenv and therefore ``lakeops``),
- quiet logs, no UI and a driver bound to 127.0.0.1 when local,
- secrets redacted wherever Spark shows its settings (:data:`REDACTION_REGEX`),
- the project's code on executors when the cluster does not have it installed
  (:func:`ship_project`).

Master resolution: the ``master`` argument, else ``$LAKEOPS_SPARK_MASTER``, else the master given to
``spark-submit`` (when this process was launched by it), else ``local[*]``. ``sc://host:port``
selects Spark Connect. Settings precedence: lakeops defaults < ``conf`` (applied last so a
cluster's settings always win).
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import re
import sys
import tempfile
import warnings
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from lakeops.errors import InvalidArgument
from spark_jobs.extras import require

if TYPE_CHECKING:  # imported where used: deciding not to use Spark must not cost pyspark's import
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_MASTER",
    "MASTER_ENV",
    "REDACTION_REGEX",
    "build_session",
    "is_local_master",
    "would_start_default_session",
    "needs_shipping",
    "ship_project",
    "stop_session",
]

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
MASTER_ENV = "LAKEOPS_SPARK_MASTER"

#: Packages a Spark task may import; shipped together by :func:`ship_project`.
PROJECT_PACKAGES = ("lakeops", "spark_jobs")

# (application or Connect session, zip name) already shipped: a second build_session() on the
# same session must not add the same code again.
_SHIPPED: set[tuple[str, str]] = set()

_LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?|local-cluster\[[^\]]*\]")

# Every job runs a handful of tasks on plan units; Spark's own SQL defaults (200 shuffle
# partitions) are sized for big joins, not for a laptop or a CI runner.
_LOCAL_DEFAULTS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "8",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}

# A local driver JVM only moves plan units and results (small JSON rows) between Python
# processes; the heavy work runs in Python with pyarrow. So start-up matters and peak JIT
# throughput does not: the C1-only compiler and the serial collector start a local session about
# 40% faster on a 2-core machine (measured: ~6 s instead of ~11 s) and spare its cores.
_LOCAL_JVM_OPTIONS = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]

#: What Spark hides (``*********(redacted)``) in its UI's environment page, the event log and its own
#: logs: every setting or environment variable whose name or value matches. Spark's default,
#: ``(?i)secret|password|token|access[.]?key|credential``, misses ``AWS_ACCESS_KEY_ID`` (and
#: ``spark.executorEnv.AWS_ACCESS_KEY_ID``, ``LAKEOPS_S3_ACCESS_KEY_ID``): an underscore joins
#: "access" and "key" there. Also redacted: any value that is an AWS access key id (``AKIA``/``ASIA``
#: and 16 more characters), whatever its name. Session tokens match ``token``. A ``conf`` of the
#: caller's own ``spark.redaction.regex`` replaces this one (Spark Connect: the server's applies).
REDACTION_REGEX = r"(?i)secret|password|token|access[._-]?key|credential|\b(AKIA|ASIA)[0-9A-Z]{16}\b"

_COMMON_DEFAULTS: dict[str, str] = {
    "spark.redaction.regex": REDACTION_REGEX,
    "spark.log.level": "WARN",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # A segfault in a native library (pyarrow, pyroaring) then shows a Python traceback
    # instead of "Python worker exited unexpectedly (crashed)".
    "spark.python.worker.faulthandler.enabled": "true",
    "spark.sql.execution.pyspark.udf.faulthandler.enabled": "true",
}

# Spark prints "Using Spark's default log4j profile" and "Setting default log level" when it runs
# on its built-in log4j2 profile; giving it any profile silences the banner. The level itself is
# set by ``spark.log.level`` so that ``conf`` can change it.
_LOG4J2_PROPERTIES = """\
# Written by spark_jobs.session: quiet console logging for lakeops' local Spark driver.
rootLogger.level = warn
rootLogger.appenderRef.console.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.nativecode.name = org.apache.hadoop.util.NativeCodeLoader
logger.nativecode.level = error
"""


def is_local_master(master: str) -> bool:
    """Whether ``master`` runs executors on this machine (``local``, ``local[N]``, ``local-cluster``)."""
    return _LOCAL_MASTER.fullmatch(master.strip()) is not None


def _is_connect(master: str | None) -> bool:
    return master is not None and master.startswith("sc://")


def _is_connect_session(spark: SparkSession) -> bool:
    # Avoids importing pyspark.sql.connect (it needs grpc) just to ask.
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _launched_by_spark_submit() -> bool:
    """True when a JVM (spark-submit, a notebook kernel) started this Python process for us."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _resolve_master(master: str | None) -> tuple[str | None, bool]:
    """Return ``(master, explicit)``; master ``None`` leaves the choice to spark-submit."""
    if master:
        return master, True
    from_env = os.environ.get(MASTER_ENV, "").strip()
    if from_env:
        return from_env, True
    if _launched_by_spark_submit():
        return None, False
    return DEFAULT_MASTER, False


def would_start_default_session(master: str | None) -> bool:
    """Whether :func:`build_session` with ``master`` would start a new ``local[*]`` session: no master
    was asked for (argument, ``$LAKEOPS_SPARK_MASTER``, spark-submit) and no session runs in this
    process to reuse. Does not import pyspark when nothing has yet (then no session can exist)."""
    if _resolve_master(master) != (DEFAULT_MASTER, False):
        return False
    return "pyspark.sql" not in sys.modules or _existing_session() is None


def _session_master(spark: SparkSession) -> str | None:
    if _is_connect_session(spark):
        return None
    return spark.sparkContext.master


def _existing_session() -> SparkSession | None:
    """The session this thread should reuse, if any.

    ``getActiveSession`` is per thread; a session created on another thread (Dagster, a notebook)
    still owns the one SparkContext of this process, so fall back to the default session
    (``stop()`` clears it).
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    return getattr(SparkSession, "_instantiatedSession", None)


def _log4j2_file() -> Path:
    """Write the quiet log4j2 profile once per content into the temp dir and return its path."""
    digest = hashlib.sha256(_LOG4J2_PROPERTIES.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"lakeops-log4j2-{digest}.properties"
    if not path.exists():
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            f.write(_LOG4J2_PROPERTIES)
        os.replace(tmp, path)  # atomic: concurrent sessions never read a half-written file
    return path


def _settings(master: str | None, app_name: str, conf: Mapping[str, str], ui: bool, *, new_jvm: bool) -> dict[str, str]:
    """Merge lakeops defaults and ``conf`` (last, so it wins) into one dict of Spark settings."""
    settings: dict[str, str] = {"spark.app.name": app_name, **_COMMON_DEFAULTS}
    if ui:
        settings["spark.ui.enabled"] = "true"
    elif master is not None and is_local_master(master):
        settings["spark.ui.enabled"] = "false"  # a few local tasks: nothing to look at, one less port
    if master is not None and is_local_master(master):
        settings.update(_LOCAL_DEFAULTS)
    settings["spark.pyspark.driver.python"] = sys.executable
    settings["spark.pyspark.python"] = _worker_python()
    settings.update(conf)
    if new_jvm:
        # Only read when this process launches the driver JVM (not under spark-submit). Merged
        # rather than replaced: the caller's options come last, and for a repeated -D or -XX
        # option the JVM takes the last one, so ``conf`` still wins.
        options = [f"-Dlog4j2.configurationFile={_log4j2_file().as_uri()}"]
        if master is not None and is_local_master(master):
            options += _LOCAL_JVM_OPTIONS
        if conf.get("spark.driver.extraJavaOptions"):
            options.append(conf["spark.driver.extraJavaOptions"])
        settings["spark.driver.extraJavaOptions"] = " ".join(options)
    return settings


def _worker_python() -> str:
    """The executors' Python: the running interpreter, unless spark-submit already chose one."""
    submitted = os.environ.get("PYSPARK_PYTHON") if _launched_by_spark_submit() else None
    return submitted or sys.executable


def build_session(
    *,
    master: str | None = None,
    app_name: str = "lakeops",
    conf: dict[str, str] | None = None,
    ui: bool = False,
    ship: bool | None = None,
) -> SparkSession:
    """Return a Spark session ready to run lakeops plan units, reusing a compatible active one.

    ``master``: ``local[*]``/``local[N]``, a cluster URL, or ``sc://host:port`` for Spark Connect;
    defaults as described in the module docstring. ``conf`` is applied after lakeops' defaults, so a
    cluster's settings win. ``ui=True`` enables the Spark web UI; without it the UI is off on a local
    master (nothing to look at for a few tasks, and one less port) and left to the cluster's settings
    otherwise, spark-submit's included (on by default, and in deploy/'s spark-defaults.conf).
    ``ship``: send ``lakeops`` + ``spark_jobs`` to the
    executors with :func:`ship_project`; ``None`` decides with :func:`needs_shipping`.

    An active session is reused when no master was requested explicitly (argument or
    ``$LAKEOPS_SPARK_MASTER``) or when it runs on the requested master; its runtime-modifiable
    settings from ``conf`` are applied. A session on a different master is an
    :class:`~lakeops.errors.InvalidArgument`: one process has one SparkContext, and silently running
    on another cluster than asked would be worse than failing. Without pyspark installed (or, for Spark
    Connect, its client) this is a :class:`~spark_jobs.extras.MissingExtra` naming the extra to install.
    """
    conf = dict(conf or {})
    requested, explicit = _resolve_master(master)
    require("pyspark.sql", extra="spark", needed_for=f"Spark (master {requested or 'from spark-submit'})")
    remote = requested if _is_connect(requested) else conf.get("spark.remote")
    if remote:
        require("pyspark.sql.connect.session", extra="connect", needed_for=f"Spark Connect ({remote})")

    existing = _existing_session()
    if existing is not None:
        _check_compatible(existing, requested, explicit)
        _apply_runtime_conf(existing, conf)
        spark = existing
    else:
        spark = _create(requested, app_name, conf, ui)

    if ship is None:
        ship = needs_shipping(spark)
    if ship:
        ship_project(spark)
    return spark


def _check_compatible(existing: SparkSession, requested: str | None, explicit: bool) -> None:
    if not explicit or requested is None:
        return
    if _is_connect_session(existing):
        if not _is_connect(requested):
            raise InvalidArgument(f"a Spark Connect session is already active; cannot also run on master {requested!r}")
        return
    current = _session_master(existing)
    if current != requested:
        raise InvalidArgument(
            f"a Spark session on master {current!r} is already active in this process; "
            f"master {requested!r} was requested. Stop it first (spark_jobs.session.stop_session()) "
            f"or request {current!r}."
        )


def _apply_runtime_conf(spark: SparkSession, conf: Mapping[str, str]) -> None:
    """Apply ``conf`` to a reused session; static settings cannot change after start-up."""
    ignored = []
    for key, value in conf.items():
        if spark.conf.get(key, None) == value:
            continue
        if spark.conf.isModifiable(key):
            spark.conf.set(key, value)
        else:
            ignored.append(key)
    if ignored:
        log.warning(
            "reusing the active Spark session: static settings %s cannot change after start-up and were not applied",
            ", ".join(sorted(ignored)),
        )


def _create(master: str | None, app_name: str, conf: Mapping[str, str], ui: bool) -> SparkSession:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if _is_connect(master):
        assert master is not None
        # The server owns static settings, the Python of its workers and its logs; send only
        # session (SQL) settings.
        sql_defaults = {k: v for k, v in _COMMON_DEFAULTS.items() if k.startswith("spark.sql.")}
        return builder.remote(master).config(map={**sql_defaults, **conf}).getOrCreate()

    new_jvm = not _launched_by_spark_submit()
    settings = _settings(master, app_name, conf, ui, new_jvm=new_jvm)
    # SparkContext takes the workers' Python from the environment, not from the settings.
    os.environ["PYSPARK_PYTHON"] = settings["spark.pyspark.python"]
    os.environ["PYSPARK_DRIVER_PYTHON"] = settings["spark.pyspark.driver.python"]
    if new_jvm and master is not None and is_local_master(master):
        # Otherwise Spark warns that the hostname resolves to a loopback address and binds a
        # public interface; a local job has no reason to listen beyond 127.0.0.1.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if master is not None:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    with warnings.catch_warnings():
        # pyspark warns at session start-up that it "does not yet fully support pandas >= 3";
        # lakeops moves data with pyarrow, never with pandas, so the warning is noise here.
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas")
        return builder.getOrCreate()


def stop_session(spark: SparkSession | None = None) -> None:
    """Stop ``spark`` (default: the active or default session), if any; safe to call twice.

    After a Spark Connect session pyspark keeps marking the process as a Connect client
    (``SPARK_CONNECT_MODE_ENABLED``), so a classic session built next (another master, a later run
    in the same process) would be taken for a Connect one and fail for want of a URL: the mark goes
    with the session."""
    spark = spark if spark is not None else _existing_session()
    if spark is not None:
        connect = _is_connect_session(spark)
        spark.stop()
        if connect:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


def _package_dir(name: str) -> Path:
    """The directory holding package ``name``'s sources.

    Read from ``__path__``, not ``__file__``: an editable install can present a regular package
    as a namespace package (no ``__file__``), and its path may carry import-hook entries that are
    not directories.
    """
    module = importlib.import_module(name)
    dirs = [Path(entry).resolve() for entry in getattr(module, "__path__", []) if Path(entry).is_dir()]
    if len(dirs) != 1:
        raise InvalidArgument(
            f"cannot ship package {name!r} to the executors: expected one source directory, found {dirs}"
        )
    return dirs[0]


def _installed_in_site_packages(path: Path) -> bool:
    return any(part in ("site-packages", "dist-packages") for part in path.parts)


def needs_shipping(spark: SparkSession) -> bool:
    """Whether executors need the project's code sent by :func:`ship_project`.

    Local masters share this machine and interpreter, so no. Elsewhere, a project installed into
    ``site-packages`` (a wheel in the cluster image) is assumed to be installed on the executors
    too; a source checkout or an editable install is not, so it is shipped.
    """
    master = _session_master(spark)
    if master is not None and is_local_master(master):
        return False
    return not all(_installed_in_site_packages(_package_dir(name)) for name in PROJECT_PACKAGES)


def _zip_project() -> Path:
    """Zip the project's packages (sources and package data, no bytecode); return the zip's path.

    The zip holds an entry for every directory too: Python imports from a zip through ``zipimport``,
    which finds a package without ``__init__.py`` (a namespace package, e.g. a folder of modules)
    only by its directory entry.

    The zip is content-addressed (named after a digest of what it holds): executors cache added
    files by name and refuse a different file under a name they already have, while shipping the
    same code twice is harmless.
    """
    files = [
        (Path(name) / path.relative_to(root), path)
        for name in PROJECT_PACKAGES
        for root in [_package_dir(name)]
        for path in sorted(root.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".pyc", ".pyo")
    ]
    directories = sorted({parent.as_posix() + "/" for arcname, _ in files for parent in arcname.parents[:-1]})
    digest = hashlib.sha256()
    for directory_name in directories:
        digest.update(directory_name.encode() + b"\0")
    for arcname, path in files:
        digest.update(arcname.as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    directory = Path(tempfile.gettempdir()) / "lakeops-ship"
    directory.mkdir(exist_ok=True)
    dest = directory / f"lakeops-project-{digest.hexdigest()[:16]}.zip"
    if not dest.exists():
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "wb") as raw, zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for directory_name in directories:
                zf.writestr(zipfile.ZipInfo(directory_name), b"")
            for arcname, path in files:
                zf.write(path, arcname.as_posix())
        os.replace(tmp, dest)
    return dest


def ship_project(spark: SparkSession) -> Path:
    """Send ``lakeops`` and ``spark_jobs`` to every executor as one zip on their ``sys.path``.

    Needed when the executors' Python does not have this project installed (a source checkout,
    an editable install, a newer version than the cluster image). Third-party dependencies
    (pyarrow, pydantic, ...) are not shipped: the cluster image must provide them. Spark puts the
    zip on ``sys.path`` of the Python workers; shipping the same code twice to a session is a
    no-op. Returns the zip's path.
    """
    dest = _zip_project()
    connect = _is_connect_session(spark)
    # A Connect session has no SparkContext; its server-side session id plays the same role.
    owner = f"connect:{getattr(spark, 'session_id', '')}" if connect else spark.sparkContext.applicationId
    if (owner, dest.name) in _SHIPPED:
        return dest
    if connect:
        spark.addArtifacts(str(dest), pyfile=True)
    else:
        spark.sparkContext.addPyFile(str(dest))
    _SHIPPED.add((owner, dest.name))
    log.info("shipped %s to the executors", dest.name)
    return dest
