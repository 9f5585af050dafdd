# The two commands of the README: `make dev` runs the engine on its embedded default database,
# `make test` runs the whole suite. Both build the virtualenv from pyproject.toml first.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: dev test lint bench docs

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

bench: $(BIN)/.installed
	$(BIN)/python -m pytest tests/benchmarks -s -p no:cacheprovider $(PYTEST_ARGS)
