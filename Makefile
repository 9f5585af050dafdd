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
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(BIN)/.installed
	$(BIN)/ruff check .

# Benchmarks print one JSON line per figure; they are never part of the test suite. Every figure comes
# with its reference measured in the same run (raw limit, DBOS where DBOS_PYTHON points at a virtualenv
# with ../shared/bench/requirements.txt). BENCH_ARGS=--full runs the sizes of spec 08.
bench: $(BIN)/.installed
	$(BIN)/python -m tests.benchmarks.report $(BENCH_ARGS)
