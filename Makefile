# Two commands on a fresh machine: `make run` serves the gateway, `make test` checks everything.
# Both create .venv when it is missing and install what they need into it.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.run-installed
DEV_STAMP := $(VENV)/.dev-installed

.PHONY: run test lint typecheck unit openapi bench bench-quick clean

run: $(RUN_STAMP)
	$(BIN)/msmq-gateway serve

test: $(DEV_STAMP)
	@scripts/ensure-postgres
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest

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

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache .hypothesis
