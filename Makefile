# Two entry points on a fresh machine: `make demo` and `make test`. Both install every extra
# that needs no torch (`.[all,dev]`), and `make test` the torch extras too (`make torch`: the CPU
# build of torch, then `.[dev-torch]`). They are re-runnable and fast the second time: the venv
# is rebuilt only when pyproject.toml changes, the llama-cpp-python wheel is built once per
# CPU-flag set into $FAITHRAG_WHEEL_CACHE (default $FAITHRAG_CACHE/wheels), models are
# assembled once.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.faithrag-installed
TORCH_STAMP := $(VENV)/.faithrag-torch-installed
PYTEST_ARGS ?=
# The CPU build of torch, by its exact version: pip takes it from a local wheel (find-links) or
# from TORCH_INDEX_ARGS (e.g. --extra-index-url https://download.pytorch.org/whl/cpu) and fails
# rather than fall back to PyPI's CUDA build (gigabytes), which has no +cpu version.
TORCH ?= torch==2.13.0+cpu
TORCH_INDEX_ARGS ?=

.PHONY: setup torch models models-tiny demo test test-fast bench clean

setup: $(STAMP)

torch: $(TORCH_STAMP)

$(TORCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q --disable-pip-version-check $(TORCH_INDEX_ARGS) "$(TORCH)"
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[dev-torch]"
	$(BIN)/python -c 'import torch, sys; sys.exit(f"torch {torch.__version__} is a CUDA build" if torch.version.cuda else 0)'
	touch $@

$(STAMP): pyproject.toml scripts/build_llama_wheel.sh
	$(PY) -c 'import sys; assert sys.version_info >= (3, 10), "faithrag needs Python >= 3.10"'
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip wheel
	PYTHON=$(BIN)/python scripts/build_llama_wheel.sh
	$(BIN)/python -m pip install -q --disable-pip-version-check -e ".[all,dev]"
	touch $@

models-tiny: setup
	$(BIN)/faithrag models pull tiny

models: setup
	$(BIN)/faithrag models pull default

demo: models
	$(BIN)/faithrag demo

# the tests also drive llama.cpp's own llama-server, built once from the wheel's llama.cpp sources
test: models-tiny torch
	PYTHON=$(BIN)/python scripts/build_llama_server.sh > $(VENV)/.llama-server-path
	FAITHRAG_LLAMA_SERVER=$$(cat $(VENV)/.llama-server-path) $(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: setup
	$(BIN)/python -m pytest -m "not model and not server and not install" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
