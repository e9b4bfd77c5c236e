# Quickstart: `make bench` then `make test`. Both create or refresh .venv from pyproject.toml.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
LINT_STAMP := $(VENV)/.lint-installed
WORKLOAD ?= triangle
TIER   ?=
MASTER_FLAG := $(if $(SPARK_MASTER),--master $(SPARK_MASTER),)
TIER_FLAG   := $(if $(TIER),--tier $(TIER),)
FROM_FLAG   := $(if $(FROM),--from $(FROM),)

GATE_TIMING ?=
PAIRED ?= 1
MICRO := $(PY) -m pytest -q -p no:cacheprovider tests/benchmarks --benchmark-enable --benchmark-only \
         --benchmark-storage=results/baselines/micro --benchmark-sort=name

.PHONY: lint ruff bench test test-thorough test-cluster gate micro baseline report history java venv clean-cache cluster-up cluster-down

java:
	@$(PYTHON) harness/core/check_java.py

# uv installs the same pinned packages as pip, byte-compiled as pip leaves them (a process that may not
# write .pyc files, PYTHONDONTWRITEBYTECODE, would otherwise compile numba's and Spark's sources at every
# start), in about half the time: 53 s against 77-109 s from an empty cache here. pip where uv cannot be had.
UV := uv==0.13.9
comma := ,
INSTALL = $(PY) -m pip install --quiet --disable-pip-version-check $(UV) && $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY) $(1) \
          || $(PY) -m pip install --quiet --disable-pip-version-check $(1)

$(STAMP): pyproject.toml
	@$(PYTHON) harness/core/check_java.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(call INSTALL,-e '.[test]')
	@$(PY) -m harness.spark.jvm_archive 2>/dev/null | grep '^jvm archive' || echo "jvm archive: not written now; a later session writes it"
	@touch $(STAMP)

venv: $(STAMP)

# The linters and stubs (pyproject.toml's `lint` extra) beside the test dependencies; no Java needed.
$(LINT_STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(call INSTALL,-e '.[test$(comma)lint]')
	@touch $(LINT_STAMP)

# ruff (lint and format) over the code and the tests; mypy (check_untyped_defs) and pylint's
# duplicate-code check (6 similar lines) over harness/ and implementations/. Configured in pyproject.toml.
lint: ruff
	$(PY) -m mypy
	$(PY) -m pylint harness implementations

ruff: $(LINT_STAMP)
	$(PY) -m ruff check harness implementations tests
	$(PY) -m ruff format --check harness implementations tests

bench: java $(STAMP)
	$(PY) -m harness bench $(WORKLOAD) $(TIER_FLAG) $(MASTER_FLAG) $(FROM_FLAG)

# DURATIONS=0: every test's setup and call time, slowest first (results/profiles/ keeps such a listing).
DURATIONS ?= 15
test: java $(STAMP)
	$(PY) -m pytest -q -m "not cluster and not thorough" --ignore=tests/benchmarks --durations=$(DURATIONS)

# tests/test_cluster.py: a standalone master and two workers on free loopback ports, the same workload
# there, an executor SIGKILLed mid-query, and no process left after the cluster stops.
test-cluster: java $(STAMP)
	$(PY) -m pytest -q -m cluster --durations=15

# The property-based suites at full strength: 50 random graphs (up to 60 vertices, ids over all of
# int64) and patterns per static implementation, 20 random update sequences of 10+ batches for
# Delta-BiGJoin (and 20 more of induced or anti-edge patterns), the fixed graphs `make test` leaves out; then the other tests marked `thorough`. CI runs
# it after `make test`, which together run every fixed graph.
test-thorough: java $(STAMP)
	HARNESS_HYPOTHESIS=thorough $(PY) -m pytest -q -m "property or thorough" tests/test_conformance.py tests/test_delta.py --durations=10
	$(PY) -m pytest -q -m "thorough and not cluster" --ignore=tests/test_conformance.py --ignore=tests/test_delta.py --durations=10

# Rerun results/baselines/gate.json and compare: counts and logical counters always bind; times are
# paired (the baseline's commit rerun beside this tree, alternating trials) and bind, unless PAIRED=0,
# where they are the stored ones and advisory. Then time the primitives against the saved run, which
# is unpaired too: advisory unless GATE_TIMING=binding.
# `python -m harness gate` exits 1 on a regression and 2 on a failure (make itself then exits 2).
gate: java $(STAMP)
	$(PY) -m harness gate $(if $(filter 0,$(PAIRED)),--unpaired,--paired) $(if $(GATE_TIMING),--timing $(GATE_TIMING),) $(MASTER_FLAG)
	@echo "micro-benchmarks: against the saved run in results/baselines/micro, unpaired: $(if $(filter binding,$(GATE_TIMING)),binding (GATE_TIMING=binding),advisory, never failing)"
	$(MICRO) --benchmark-compare $(if $(filter binding,$(GATE_TIMING)),--benchmark-compare-fail=median:25%,)

# The micro-benchmarks alone (K=expression selects some, as pytest -k), compared with the saved run.
micro: java $(STAMP)
	$(MICRO) $(if $(K),-k "$(K)",) --benchmark-compare

# Record both baselines from a clean tree (the harness refuses a dirty one).
baseline: java $(STAMP)
	$(PY) -m harness baseline $(MASTER_FLAG)
	$(MICRO) --benchmark-save=baseline

report: $(STAMP)
	$(PY) -m harness report

# Spark's History Server (from the pyspark package) on 127.0.0.1:$(HISTORY_PORT) over results/eventlogs/,
# where every session writes its compressed event log (capped at HARNESS_EVENTLOG_CAP_MB, default 1024).
HISTORY_PORT ?= 18080
history: java $(STAMP)
	$(PY) -m harness history --port $(HISTORY_PORT)

clean-cache:
	rm -rf .cache

# A Spark standalone master on 127.0.0.1 and HOSTS workers on 127.0.0.2, 127.0.0.3, ..., each in its
# own mount namespace with a private /tmp (needs root); they share only the store. Then
# `make bench SPARK_MASTER=spark://127.0.0.1:7077 HARNESS_STORE=<the store it prints>`. State: .cluster/
HOSTS ?= 2
cluster-up: java $(STAMP)
	$(PY) -m harness cluster up --hosts $(HOSTS)

cluster-down: $(STAMP)
	$(PY) -m harness cluster down
