# Two commands on a fresh machine: `make run` serves the gateway, `make test` checks everything.
# Both create .venv when it is missing and install what they need into it.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.run-installed
DEV_STAMP := $(VENV)/.dev-installed
BENCH_STAMP := $(VENV)/.bench-installed

.PHONY: run test lint typecheck unit openapi bench bench-quick clean

# `make run WORKERS=2`: several worker processes on one database (docs/performance.md).
WORKERS ?= 1

run: $(RUN_STAMP)
	$(BIN)/msmq-gateway serve --workers $(WORKERS)

test: $(DEV_STAMP)
	@scripts/ensure-postgres
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest

# The benchmark suite (docs/performance.md): a table on stdout and JSON under bench/results/.
# It uses PostgreSQL and RabbitMQ on 127.0.0.1 when they are up and starts neither.
bench: $(BENCH_STAMP)
	$(BIN)/python -m bench

bench-quick: $(BENCH_STAMP)
	$(BIN)/python -m bench --quick

openapi: $(DEV_STAMP)
	$(BIN)/python -m app.openapi_export openapi/openapi.json

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(RUN_STAMP)

$(BENCH_STAMP): pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $@ $(RUN_STAMP)

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache .hypothesis
