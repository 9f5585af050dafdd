# The two commands of the README: `make dev` runs the engine on its embedded default database,
# `make test` runs the whole suite. Both build the virtualenv from pyproject.toml first.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin

.PHONY: dev test lint bench trace reliability

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

# Benchmarks print one JSON line per figure; they are never part of the test suite. Every figure comes
# with its reference measured in the same run (raw limit, DBOS where DBOS_PYTHON points at a virtualenv
# with ../shared/bench/requirements.txt). BENCH_ARGS=--full runs the sizes of spec 08.
bench: $(BIN)/.installed
	$(BIN)/python -m tests.benchmarks.report $(BENCH_ARGS)

# Which statements of a lifecycle cost, each timed by the server on a private one with performance_schema on
# (the shared server is never reconfigured): make trace FLOW=poll RUNS=20 (FLOW: timer, signal or poll).
FLOW ?= timer
RUNS ?= 20
trace: $(BIN)/.installed
	$(BIN)/python -m tests.benchmarks.trace_statements --flow $(FLOW) --runs $(RUNS)

# The reliability battery of spec 08 at full size (the suite runs short versions of each): Z-1 crash runs,
# Z-2 competing runners, Z-3 database faults, Z-4 bad input, Z-5 isolation, Z-6 a Galera node killed and
# rejoined, then what spreading writes over the cluster costs, and the random walks of the engine ten times as
# many as in the suite. Every part prints JSON figure lines.
# Sizes: make reliability Z1_RUNS=50 HA_MIXED=200 HA_FINAL=50 Z4_EXAMPLES=60 WALKS_SCALE=10 (WALKS_FROM=N: the
# walks' first seed, so that other walks than the last run's are drawn)
Z1_RUNS ?= 50
Z2_INSTANCES ?= 100
Z4_EXAMPLES ?= 60
HA_MIXED ?= 200
HA_FINAL ?= 50
WALKS_SCALE ?= 10
WALKS_FROM ?= 0
WALK_TESTS := tests/sql/test_control_machine.py tests/sql/test_room_walks.py tests/sql/test_signal_walks.py
reliability: $(BIN)/.installed
	WEAVE_Z1_RUNS=$(Z1_RUNS) WEAVE_Z2_INSTANCES=$(Z2_INSTANCES) WEAVE_Z4_EXAMPLES=$(Z4_EXAMPLES) \
	WEAVE_HA_MIXED=$(HA_MIXED) WEAVE_HA_FINAL=$(HA_FINAL) WEAVE_HA_LAYOUTS=one-writer,spread \
	WEAVE_WALKS_SCALE=$(WALKS_SCALE) WEAVE_WALKS_FROM=$(WALKS_FROM) \
		$(BIN)/python -m pytest -s -q -m "battery or not battery" tests/reliability tests/api/test_isolation_matrix.py \
			$(WALK_TESTS) $(PYTEST_ARGS)
	$(BIN)/python -m tests.benchmarks.bench_galera
