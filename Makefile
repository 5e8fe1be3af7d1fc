# The two quickstart commands: `make demo` and `make test`. Each builds .venv when it is missing.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck diagrams bench clean

# the package and its required dependencies only: what `make demo` needs (a few MB)
BASE := $(VENV)/.base
$(BASE): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q -e .
	touch $(BASE)

# everything the tests, the linters and the optional integrations need
$(STAMP): $(BASE) pyproject.toml
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(BASE)
	$(VENV)/bin/agentcore-fsm demo

lint: $(STAMP)
	$(PY) -m ruff check agentcore_fsm tests
	$(PY) -m ruff format --check agentcore_fsm tests
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	$(PY) -m mypy

test: lint typecheck
	$(PY) -m pytest -q -p no:cacheprovider -n auto --dist loadgroup

diagrams: $(STAMP)
	$(VENV)/bin/agentcore-fsm diagram --regenerate

bench: $(STAMP)
	$(VENV)/bin/agentcore-fsm bench

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
