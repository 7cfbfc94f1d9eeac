# trl_ada developer loop. `make test` is the README's test command and what CI runs (every test);
# `make test-fast` skips the multi-process, end-to-end and benchmark-smoke tests (`-m "not slow"`).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH := torch==2.13.0
export HF_HUB_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install test test-fast lint format demo clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH)
	$(PY) -m pip install -q $(TORCH) -e ".[dev]"
	touch $@

install: $(VENV)/.installed

test: install
	$(PY) -m pytest -n 2 --dist loadgroup -q

test-fast: install
	$(PY) -m pytest -n 2 --dist loadgroup -q -m "not slow"

lint: install
	$(VENV)/bin/ruff check trl_ada tests benchmarks
	$(VENV)/bin/ruff format --check trl_ada tests benchmarks

format: install
	$(VENV)/bin/ruff check --fix trl_ada tests benchmarks
	$(VENV)/bin/ruff format trl_ada tests benchmarks

demo: install
	$(VENV)/bin/trl-ada demo

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache
