# The two commands of the README: `make dev` runs the engine on its embedded default database,
# `make test` runs the whole suite. Both build the virtualenv from pyproject.toml first.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: dev test lint bench

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

dev: $(BIN)/.installed
	$(BIN)/weave dev

test: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/mypy

# Benchmarks print one JSON line per figure; they are never part of the test suite.
bench: $(BIN)/.installed
	$(BIN)/python -m tests.benchmarks.bench_scan
	$(BIN)/python -m tests.benchmarks.bench_timers
	$(BIN)/python -m tests.benchmarks.bench_tasks
	$(BIN)/python -m tests.benchmarks.bench_signals
