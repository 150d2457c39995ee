"""deploy/ without Docker: what can be checked of the image, compose stack and Helm values here.

There is no container engine on CI, so the files are validated by what they say: they parse, they hold
no secret (every credential is a required ``${VAR:?}``), they agree with each other and with the
project (module names, concurrency rules), the packages the Dockerfile installs are the ones these tests
run with, and the image's entrypoint starts an executor with the arguments Spark on Kubernetes expects.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import runpy
import shlex
import stat
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from lakeops.registry import RegisteredTable
from spark_jobs.session import REDACTION_REGEX

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"

_SECRET_WORDS = ("PASSWORD", "SECRET", "ACCESS_KEY")
_REFERENCE = re.compile(r"\$\{(?P<name>[A-Z0-9_]+)(?P<op>:\?|:-|\?|-)?(?P<rest>[^}]*)\}")


def _yaml(relative: str) -> Any:
    return yaml.safe_load((DEPLOY / relative).read_text())


def _compose() -> dict[str, Any]:
    compose: dict[str, Any] = _yaml("compose.yaml")
    return compose


def _strings(node: Any) -> list[str]:
    """Every string value (not key) in a parsed YAML document."""
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return [node] if isinstance(node, str) else []


def test_every_yaml_file_parses() -> None:
    for relative in ("compose.yaml", "dagster.yaml", "workspace.yaml", "helm/values.yaml", "registry.example.yaml"):
        assert isinstance(_yaml(relative), dict), relative
    for manifest in sorted((DEPLOY / "helm").glob("*.yaml")):
        documents = list(yaml.safe_load_all(manifest.read_text()))
        assert documents and all(isinstance(d, dict) for d in documents), manifest.name


def _manifests(relative: str) -> dict[str, dict[str, Any]]:
    """A multi-document Kubernetes manifest by ``Kind/name``."""
    documents = yaml.safe_load_all((DEPLOY / relative).read_text())
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in documents}


def test_kubernetes_event_logs_have_their_claim_and_history_server() -> None:
    """The claim every Spark driver on Kubernetes writes its event log to, and the History Server on it,
    are manifests of their own (the chart creates neither)."""
    events = _manifests("helm/spark-events.yaml")
    claim = events["PersistentVolumeClaim/lakeops-spark-events"]
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]  # the drivers and the History Server at once
    history = events["Deployment/lakeops-spark-history"]["spec"]["template"]
    (container,) = history["spec"]["containers"]
    assert container["command"] == ["spark-class", "org.apache.spark.deploy.history.HistoryServer"]
    log_dir = _spark_defaults("helm/spark-defaults.conf")["spark.eventLog.dir"]
    (opts,) = [e["value"] for e in container["env"] if e["name"] == "SPARK_HISTORY_OPTS"]
    assert f"-Dspark.history.fs.logDirectory={log_dir}" in opts.split()
    (mount,) = container["volumeMounts"]
    assert f"file://{mount['mountPath']}" == log_dir
    assert events["Service/lakeops-spark-history"]["spec"]["selector"] == history["metadata"]["labels"]
    (code,) = _yaml("helm/values.yaml")["dagster-user-deployments"]["deployments"]
    connect = _manifests("helm/spark-connect.yaml")["Deployment/lakeops-spark-connect"]["spec"]["template"]
    for pod_volumes, image in (
        (history["spec"]["volumes"], container["image"]),
        (connect["spec"]["volumes"], connect["spec"]["containers"][0]["image"]),
        (code["volumes"], f"{code['image']['repository']}:{code['image']['tag']}"),
    ):
        claims = {v["persistentVolumeClaim"]["claimName"] for v in pod_volumes if "persistentVolumeClaim" in v}
        assert claims == {"lakeops-spark-events"}
        assert image == f"{code['image']['repository']}:{code['image']['tag']}"


def test_the_helm_chart_is_pinned_to_the_locked_dagster() -> None:
    """``helm upgrade`` names the chart release of the Dagster the image installs, wherever it is written."""
    locked = re.search(r"^dagster==(\S+)", (DEPLOY / "requirements.lock").read_text(), re.MULTILINE)
    assert locked
    for relative in ("README.md", "helm/values.yaml"):
        commands = [line for line in (DEPLOY / relative).read_text().splitlines() if "helm upgrade" in line]
        assert commands, relative
        for command in commands:
            assert f"--version {locked[1]}" in command, f"{relative}: {command.strip()}"


def test_the_readmes_env_file_sets_every_required_variable() -> None:
    """Step 1 of the compose instructions, copied as written, starts the stack: every ``${VAR:?}`` of
    compose.yaml is in it."""
    readme = (DEPLOY / "README.md").read_text()
    step = readme.split("1. Create `deploy/.env`", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    written = {line.strip().split("=", 1)[0] for line in step.splitlines() if "=" in line}
    values = _strings(_compose())  # comments aside
    required = {m["name"] for value in values for m in _REFERENCE.finditer(value) if m["op"] == ":?"}
    assert required and required <= written, sorted(required - written)


def test_compose_runs_the_whole_stack_from_one_image() -> None:
    services = _compose()["services"]
    ours = {"create-bucket", "spark-master", "spark-worker-1", "spark-worker-2", "spark-connect", "spark-history"}
    ours |= {"user-code", "webserver", "daemon"}
    assert set(services) == {"postgres", "object-store", *ours}
    lakeops_image = services["user-code"]["image"]
    for name in sorted(ours):
        assert services[name]["image"] == lakeops_image, name
        assert services[name]["build"]["dockerfile"] == "deploy/Dockerfile", name
    assert services["spark-master"]["command"][:2] == ["spark-class", "org.apache.spark.deploy.master.Master"]
    for worker in ("spark-worker-1", "spark-worker-2"):
        command = services[worker]["command"]
        assert command[:3] == ["spark-class", "org.apache.spark.deploy.worker.Worker", "spark://spark-master:7077"]
        assert services[worker]["environment"]["AWS_ENDPOINT_URL"], "workers do their own S3 IO"
    code = services["user-code"]["command"]
    assert code[:3] == ["dagster", "api", "grpc"] and code[-2:] == ["-m", "orchestration.definitions"]
    # Runs go to the long-lived Spark Connect server, itself an application on the standalone master.
    assert services["user-code"]["environment"]["LAKEOPS_SPARK_MASTER"].endswith(":-sc://spark-connect:15002}")
    connect = services["spark-connect"]["command"]
    assert connect[:3] == ["spark-submit", "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
    assert connect[3:5] == ["--master", "spark://spark-master:7077"]
    assert "spark.connect.grpc.binding.port=15002" in connect and "spark.scheduler.mode=FAIR" in connect
    assert services["user-code"]["depends_on"]["spark-connect"] == {"condition": "service_healthy"}
    # The driver runs in user-code: executors reach it by the name it advertises.
    assert services["user-code"]["environment"]["SPARK_LOCAL_HOSTNAME"] == services["user-code"]["hostname"]


def _spark_defaults(relative: str) -> dict[str, str]:
    pairs = (line.split(None, 1) for line in (DEPLOY / relative).read_text().splitlines())
    return {key: value.strip() for key, value in (p for p in pairs if len(p) == 2) if not key.startswith("#")}


def test_spark_applications_are_sized_logged_and_visible() -> None:
    """Each run (one Spark application) is capped so several share the cluster, its Python workers get
    memory for pyarrow, the UI is on and the event log lands where the History Server reads it."""
    services = _compose()["services"]
    standalone = _spark_defaults("spark-defaults.conf")
    workers = 2 * 2  # two workers of SPARK_WORKER_CORES (default 2)
    assert 0 < int(standalone["spark.cores.max"]) < workers
    assert standalone["spark.executor.pyspark.memory"] and standalone["spark.ui.enabled"] == "true"
    kubernetes = _spark_defaults("helm/spark-defaults.conf")
    for conf in (standalone, kubernetes):
        assert conf["spark.eventLog.enabled"] == "true" and conf["spark.eventLog.dir"] == "file:///opt/spark/events"
    assert kubernetes["spark.kubernetes.driver.pod.name"] == "${env:POD_NAME}"
    assert kubernetes["spark.executor.pyspark.memory"]
    code = services["user-code"]
    conf_dir = code["environment"]["SPARK_CONF_DIR"]
    assert f"./spark-defaults.conf:{conf_dir}/spark-defaults.conf:ro" in code["volumes"]
    assert "spark-events:/opt/spark/events" in code["volumes"]
    history = services["spark-history"]
    assert history["command"] == ["spark-class", "org.apache.spark.deploy.history.HistoryServer"]
    assert "spark-events:/opt/spark/events" in history["volumes"]
    assert "logDirectory=file:///opt/spark/events" in history["environment"]["SPARK_HISTORY_OPTS"]
    (deployment,) = _yaml("helm/values.yaml")["dagster-user-deployments"]["deployments"]
    assert {"name": "spark-events", "mountPath": "/opt/spark/events"} in deployment["volumeMounts"]
    assert any(e["name"] == "POD_NAME" for e in deployment["env"])


def test_every_image_is_pinned() -> None:
    """No moving tag: each image names a release (or the lakeops image the required per-build tag)."""
    images = {name: service["image"] for name, service in _compose()["services"].items() if "image" in service}
    for name, image in images.items():
        reference = _REFERENCE.sub(lambda m: m["rest"] if m["op"] == ":-" else "<" + m["name"] + ">", image)
        repository, _, tag = reference.rpartition(":")
        assert repository and tag and tag != "latest", f"{name}: image {image} is not pinned"
    assert {images[name] for name in ("spark-master", "user-code", "webserver", "daemon")} == {
        "lakeops:${LAKEOPS_VERSION:?set LAKEOPS_VERSION, the tag to build and run (e.g. git rev-parse --short HEAD)}"
    }
    values = _yaml("helm/values.yaml")
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    executor_image = next(
        line.split()[1]
        for line in (DEPLOY / "helm" / "spark-defaults.conf").read_text().splitlines()
        if line.startswith("spark.kubernetes.container.image ")
    )
    assert executor_image == f"{deployment['image']['repository']}:{deployment['image']['tag']}"
    assert deployment["image"]["tag"] != "latest"


def test_kubernetes_runs_connect_to_a_long_lived_spark_connect_server() -> None:
    deployment, service = yaml.safe_load_all((DEPLOY / "helm" / "spark-connect.yaml").read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["command"][:5] == [
        "spark-submit",
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--master",
        "k8s://https://kubernetes.default.svc:443",
    ]
    assert "spark.connect.grpc.binding.port=15002" in container["command"]
    assert {e["name"] for e in container["env"]} >= {"SPARK_CONF_DIR", "SPARK_LOCAL_HOSTNAME", "POD_NAME"}
    (code,) = _yaml("helm/values.yaml")["dagster-user-deployments"]["deployments"]
    assert container["image"] == f"{code['image']['repository']}:{code['image']['tag']}"
    master = next(e["value"] for e in code["env"] if e["name"] == "LAKEOPS_SPARK_MASTER")
    assert master == f"sc://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    assert service["spec"]["selector"] == deployment["spec"]["template"]["metadata"]["labels"]


def test_compose_holds_no_secret() -> None:
    compose = _compose()
    text = (DEPLOY / "compose.yaml").read_text()
    references = list(_REFERENCE.finditer(text))
    assert references
    for match in references:
        if any(word in match["name"] for word in _SECRET_WORDS):
            assert match["op"] == ":?", f"{match[0]}: a secret must be required, never defaulted"
    for service, config in compose["services"].items():
        for key, value in (config.get("environment") or {}).items():
            if any(word in key for word in (*_SECRET_WORDS, "PGPASSWORD")):
                assert re.fullmatch(r"\$\{[A-Z0-9_]+:\?[^}]*\}", str(value)), f"{service}.{key} = {value!r}"
    # Published ports listen on the loopback interface only.
    for service, config in compose["services"].items():
        for port in config.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{service}: {port}"


def test_helm_values_and_dagster_yaml_agree_on_the_run_rules() -> None:
    values = _yaml("helm/values.yaml")
    instance = _yaml("dagster.yaml")
    (deployment,) = values["dagster-user-deployments"]["deployments"]
    assert deployment["dagsterApiGrpcArgs"] == ["-m", "orchestration.definitions"]
    assert deployment["includeConfigInLaunchedRuns"]["enabled"] is True
    env = {item["name"]: item.get("value") for item in deployment["env"]}
    (driver_host,) = [item for item in deployment["env"] if item["name"] == "SPARK_LOCAL_HOSTNAME"]
    assert driver_host["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"  # executors reach the run pod
    assert env["LAKEOPS_SPARK_MASTER"].startswith("sc://")  # the Spark Connect server of spark-connect.yaml
    conf_dir = Path(env["SPARK_CONF_DIR"])
    assert any(Path(mount["mountPath"]) == conf_dir for mount in deployment["volumeMounts"])
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    assert values["postgresql"]["enabled"] is False and values["generatePostgresqlPasswordSecret"] is False
    assert "postgresqlPassword" not in values["postgresql"]
    assert values["dagsterDaemon"]["runCoordinator"]["type"] == "QueuedRunCoordinator"
    assert instance["run_coordinator"]["class"] == "QueuedRunCoordinator"
    pools = values["concurrency"]["pools"]
    assert values["concurrency"]["enabled"] is True
    assert (
        (pools["granularity"], pools["defaultLimit"])
        == (
            instance["concurrency"]["pools"]["granularity"],
            instance["concurrency"]["pools"]["default_limit"],
        )
        == ("run", 1)
    )
    shipped = ROOT / "dagster_home" / "dagster.yaml"  # the local instance, once orchestration is merged
    if shipped.is_file():
        assert yaml.safe_load(shipped.read_text())["concurrency"] == instance["concurrency"]


def test_spark_defaults_configure_kubernetes_executors() -> None:
    settings = dict(
        line.split(None, 1)
        for line in (DEPLOY / "helm" / "spark-defaults.conf").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert settings["spark.kubernetes.container.image"].strip()
    assert settings["spark.kubernetes.namespace"].strip()
    refs = {key: value.strip() for key, value in settings.items() if "secretKeyRef" in key}
    assert refs == {
        "spark.kubernetes.executor.secretKeyRef.AWS_ACCESS_KEY_ID": "lakeops-credentials:AWS_ACCESS_KEY_ID",
        "spark.kubernetes.executor.secretKeyRef.AWS_SECRET_ACCESS_KEY": "lakeops-credentials:AWS_SECRET_ACCESS_KEY",
    }
    assert settings["spark.redaction.regex"].strip() == REDACTION_REGEX


def test_the_example_registry_names_valid_tables_without_secrets() -> None:
    registry = _yaml("registry.example.yaml")
    tables = [
        RegisteredTable.model_validate({k: v for k, v in entry.items() if k in RegisteredTable.model_fields})
        for entry in registry["tables"]
    ]
    assert [t.name for t in tables] == ["events", "orders"]
    catalog = tables[1].catalog
    assert catalog is not None and catalog.uri.startswith("postgresql+psycopg2://lakeops@")  # no password


def _lock() -> dict[str, tuple[str, list[str]]]:
    """deploy/requirements.lock: package name -> (version, hashes)."""
    locked: dict[str, tuple[str, list[str]]] = {}
    for line in (DEPLOY / "requirements.lock").read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        requirement, *hashes = line.split()
        name, _, version = requirement.partition("==")
        assert version and hashes and all(h.startswith("--hash=sha256:") for h in hashes), line
        locked[canonicalize_name(name)] = (version, hashes)
    return locked


def test_the_image_installs_exactly_the_locked_packages() -> None:
    text = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ")
    installs = [shlex.split(line.split("&&")[0]) for line in text.splitlines() if line.startswith("RUN pip install")]
    assert installs == [
        ["RUN", "pip", "install", "--require-hashes", "--no-deps", "-r", "deploy/requirements.lock"],
        ["RUN", "pip", "install", "--no-deps", "--no-build-isolation", "."],
    ]
    assert "pip check" in text
    for source in re.findall(r"^COPY (?!--)(\S+)", text, flags=re.MULTILINE):
        assert (ROOT / source).exists(), f"Dockerfile copies {source}, which is not in the repository"
    assert re.search(r"^FROM python:3\.11\.\d+-slim-bookworm$", text, flags=re.MULTILINE)
    assert "openjdk-17-jre-headless" in text


def test_the_lock_pins_every_dependency_within_pyprojects_bounds() -> None:
    locked = _lock()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    generator = runpy.run_path(str(DEPLOY / "lock.py"))  # what `make lock` resolves
    extras = project["project"]["optional-dependencies"]
    # The image runs Spark, Spark Connect and Dagster on PostgreSQL with the Kubernetes run launcher,
    # and draws the health report's plots.
    assert set(generator["PROJECT_EXTRAS"]) == {"spark", "connect", "dagster", "report"}
    wanted = [Requirement(r) for r in project["project"]["dependencies"]]
    wanted += [Requirement(r) for extra in generator["PROJECT_EXTRAS"] for r in extras[extra]]
    wanted += [Requirement(r) for r in generator["BESIDE"]]
    wanted += [Requirement(r) for r in project["build-system"]["requires"]]
    assert {"dagster-postgres", "dagster-k8s", "psycopg2-binary"} <= {canonicalize_name(r.name) for r in wanted}
    # The Spark Connect client production runs use (the `connect` extra): pyspark's own `connect` extra.
    (connect,) = [Requirement(r) for r in extras["connect"]]
    wanted += [
        Requirement(raw)
        for raw in importlib.metadata.requires("pyspark") or []
        if Requirement(raw).marker is not None and Requirement(raw).marker.evaluate({"extra": "connect"})
    ]
    assert connect.name == "pyspark" and connect.extras == {"connect"}
    for requirement in wanted:
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{requirement} is not in deploy/requirements.lock (run make lock)"
        assert requirement.specifier.contains(locked[name][0]), f"{requirement}: locked {locked[name][0]}"
    # Every dependency of a locked package is locked too, at a version it accepts (what pip check verifies in
    # the image; read from the packages installed here at the locked version, e.g. dagster-postgres's exact
    # dagster pin).
    for name, (version, _) in locked.items():
        metadata = importlib.metadata.metadata(name) if _installed(name, version) else None
        for raw in (metadata.get_all("Requires-Dist") or []) if metadata else []:
            dependency = Requirement(raw)
            if dependency.marker is None or dependency.marker.evaluate({"extra": ""}):
                needed = canonicalize_name(dependency.name)
                assert needed in locked, f"{name} needs {dependency}, not locked"
                assert dependency.specifier.contains(locked[needed][0], prereleases=True), (
                    f"{name} needs {dependency}, locked {locked[needed][0]}"
                )


def _installed(name: str, version: str) -> bool:
    try:
        return importlib.metadata.version(name) == version
    except importlib.metadata.PackageNotFoundError:
        return False


def _entrypoint(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> str:
    """Run deploy/spark-entrypoint.sh with a stand-in ``java`` that prints its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    java = bin_dir / "java"
    java.write_text('#!/usr/bin/env bash\nprintf "%s\\n" "$@"\n')
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    result = subprocess.run(
        [str(DEPLOY / "spark-entrypoint.sh"), *argv],
        env={"PATH": f"{bin_dir}:{os.environ['PATH']}", **(env or {})},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def test_entrypoint_runs_other_commands_as_given(tmp_path: Path) -> None:
    assert _entrypoint(tmp_path, "echo", "lakeops", "--help") == "lakeops --help\n"


def test_entrypoint_starts_a_kubernetes_executor(tmp_path: Path) -> None:
    env = {
        "SPARK_HOME": "/spark",
        "SPARK_EXECUTOR_MEMORY": "2g",
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.0.0.5:7078",
        "SPARK_EXECUTOR_ID": "3",
        "SPARK_EXECUTOR_CORES": "2",
        "SPARK_APPLICATION_ID": "spark-app-1",
        "SPARK_EXECUTOR_POD_IP": "10.0.0.9",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_POD_NAME": "lakeops-exec-3",
        "SPARK_JAVA_OPT_10": "-Dten=10",
        "SPARK_JAVA_OPT_0": "-Dzero=with space",
        "SPARK_JAVA_OPT_2": "-Dtwo=2",
    }
    args = _entrypoint(tmp_path, "executor", env=env).splitlines()
    assert args[:3] == ["-Dzero=with space", "-Dtwo=2", "-Dten=10"]  # index order, one argument each
    assert args[3:6] == ["-Xms2g", "-Xmx2g", "-cp"] and args[6].endswith(":/spark/jars/*")
    assert args[7] == "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    options = dict(zip(args[8::2], args[9::2], strict=True))
    assert options == {
        "--driver-url": env["SPARK_DRIVER_URL"],
        "--executor-id": "3",
        "--cores": "2",
        "--app-id": "spark-app-1",
        "--hostname": "10.0.0.9",
        "--resourceProfileId": "0",
        "--podName": "lakeops-exec-3",
    }


def test_a_relock_is_constrained_to_the_versions_already_locked() -> None:
    """``make lock`` after adding an extra adds its packages and upgrades nothing else: every locked
    ``name==version`` is a constraint of the resolution (``UPGRADE=1`` drops them)."""
    generator = runpy.run_path(str(DEPLOY / "lock.py"))
    text = (DEPLOY / "requirements.lock").read_text()
    pins = generator["pins"](text)
    assert len(pins) == len(_lock()) and all(re.fullmatch(r"[A-Za-z0-9._-]+==\S+", pin) for pin in pins)
    assert f"matplotlib=={_lock()['matplotlib'][0]}" in pins and not any(pin.startswith("#") for pin in pins)
