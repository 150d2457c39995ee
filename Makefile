# Two commands for a new user: `make demo` and `make test`. Both create .venv and install the project.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo test test-all lint typecheck clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

## Build a small-file Delta table in ./.lakeops-demo, inspect it, compact it on Spark, inspect again.
demo: install
	$(PY) -m spark_jobs.demo

## The test suite CI runs (unit, conformance, Spark local mode, S3 on a local moto server).
test: install
	$(PY) -m pytest -q -m "not slow and not integration"

## Everything, including long-running checks.
test-all: install
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check lakeops spark_jobs orchestration tests

typecheck: install
	$(VENV)/bin/mypy lakeops spark_jobs

clean:
	rm -rf $(VENV) .lakeops-demo .pytest_cache .mypy_cache .ruff_cache
