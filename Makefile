# For a new user: `make demo`, `make test`, `make ui`. Each creates .venv and installs the project.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
## The port `make ui` serves the Dagster UI on (127.0.0.1 only), and the demo it serves (`make demo` writes it).
UI_PORT ?= 3000
DEMO_DIR ?= $(CURDIR)/.lakeops-demo

.PHONY: install lock chromium demo ui screenshot test test-long test-ui test-integration test-reliability test-all bench bench-full lint typecheck clean

## Every extra the tests need (pyproject.toml): Spark, its Connect client, Dagster and dg, Airflow, the icechunk package,
## matplotlib, test tools.
EXTRAS := spark,connect,dagster,dg,icechunk,airflow,report,test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

## deploy/requirements.lock: the exact packages (versions, SHA-256 hashes) the image installs (pip lock);
## locked packages keep their versions, UPGRADE=1 resolves them all afresh.
lock: install
	$(PY) deploy/lock.py $(if $(UPGRADE),--upgrade)

## Build a demo warehouse in ./.lakeops-demo (Delta, Iceberg in a SQLite catalog, Icechunk), run every
## maintenance asset once through Dagster, print health before and after.
demo: install
	$(PY) -m orchestration.demo

## The Dagster UI on the demo registry (after `make demo`; DEMO_DIR for another): http://127.0.0.1:$(UI_PORT).
## Ctrl-C or a SIGTERM to make stops it all: `exec` makes `dagster dev` make's own child, and SIGINT is reset to
## its default first, because `dagster dev` maps SIGTERM onto SIGINT's handler, which a shell ignores for a job
## started with `&`.
ui: install
	@test -f $(DEMO_DIR)/lakeops.yaml -a -d $(DEMO_DIR)/dagster_home || { echo "no demo in $(DEMO_DIR): run make demo first" >&2; exit 2; }
	LAKEOPS_REGISTRY=$(DEMO_DIR)/lakeops.yaml DAGSTER_HOME=$(DEMO_DIR)/dagster_home \
		exec $(PY) -c 'import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])' \
		$(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p $(UI_PORT)

## Debian's Chromium (apt-get, as root, when absent) and Playwright to drive it: nothing else is downloaded.
chromium: install
	command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }
	$(PY) -m pip install --quiet -e '.[screenshot]'

## Headless-Chromium screenshots of the demo in the UI (after `make demo`): docs/asset-graph.png (the events
## table's assets and checks), docs/health-overview.png (every table's health), docs/concurrency.png (pools).
screenshot: chromium
	$(PY) -m orchestration.ui screenshot docs

## The test suite CI runs (unit, conformance, Spark local mode, S3 on a local moto server), on every core
## (pytest-xdist: each worker has its own Spark session, moto server on a free port and temp dirs);
## the 20 slowest tests are listed at the end. TEST_WORKERS=1 runs it in one process. The unit tests
## run first, with pyspark, dagster and airflow made unimportable (tests/absent_modules.py): the layers hold.
TEST_WORKERS ?= $(shell nproc 2>/dev/null || echo 2)
TEST_SELECTION := -m "not slow and not long and not integration and not ui"
test: install
	LAKEOPS_TEST_WITHOUT_SPARK_AND_ORCHESTRATORS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) $(TEST_SELECTION) tests/unit
	$(PY) -m pytest -q -n $(TEST_WORKERS) --durations=20 $(TEST_SELECTION) --ignore=tests/unit

## The checks of a minute or more (marker `long`): crash kills, storage faults, concurrent writers, dagster
## dev's sensors and pools, the README's commands as written, the bench harness. CI runs them after `make test`.
test-long: install
	$(PY) -m pytest -q -n $(TEST_WORKERS) --durations=10 -m "long and not slow and not integration and not ui"

## The Dagster UI in a real browser (Chromium driven by Playwright) against `dagster dev` on 127.0.0.1.
test-ui: chromium
	$(PY) -m pytest -q -m ui tests/orchestration

## Tests that start real components on 127.0.0.1: a Spark standalone cluster, PostgreSQL (installed
## from Debian's packages if absent), the moto S3 server. CI runs them after `make test`.
test-integration: install
	$(PY) -m pytest -q -m integration tests/integration

## The reliability suite with a large fuzzing budget (make test runs it with a small one).
test-reliability: install
	LAKEOPS_FUZZ_EXAMPLES=2000 LAKEOPS_WRITERS_SECONDS=120 LAKEOPS_CRASH_ROUNDS=5 LAKEOPS_ICECHUNK_RACE_ROUNDS=10 $(PY) -m pytest -q tests/reliability

## Everything, including long-running checks.
test-all: chromium
	$(PY) -m pytest -q

## Benchmarks against delta-rs, PyIceberg and the pyarrow limit (bench/README.md): a quick pass of a few
## minutes, or 1x, 4x and 16x a base whose 16x is the issue's sizes (hours); results in bench/results/<date>.json.
bench: install
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) -m bench --size quick

bench-full: install
	$(PY) -m pip install --quiet -e '.[bench]'
	$(PY) -m bench --size full

lint: install
	$(VENV)/bin/ruff check lakeops spark_jobs orchestration bench tests examples
	$(VENV)/bin/lint-imports

## mypy on every package, strict for lakeops ([tool.mypy] in pyproject.toml); CI's stage after lint.
typecheck: install
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV) .lakeops-demo .pytest_cache .mypy_cache .ruff_cache
