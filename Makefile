# Quickstart: `make bench` then `make test`. Both create or refresh .venv from pyproject.toml.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
WORKLOAD ?= triangle
TIER   ?=
MASTER_FLAG := $(if $(SPARK_MASTER),--master $(SPARK_MASTER),)
TIER_FLAG   := $(if $(TIER),--tier $(TIER),)

.PHONY: bench test java venv clean-cache

java:
	@$(PYTHON) harness/check_java.py

$(STAMP): pyproject.toml
	@$(PYTHON) harness/check_java.py
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

venv: $(STAMP)

bench: java $(STAMP)
	$(PY) -m harness bench $(WORKLOAD) $(TIER_FLAG) $(MASTER_FLAG)

test: java $(STAMP)
	$(PY) -m pytest -q

clean-cache:
	rm -rf .cache
