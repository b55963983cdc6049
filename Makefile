# Two entry points on a fresh machine: `make demo` and `make test`. Both install every extra
# that needs no torch (`.[all,dev]`) and are re-runnable and fast the second time: the venv is
# rebuilt only when pyproject.toml changes, the llama-cpp-python wheel is built once per CPU-flag
# set into $FAITHRAG_WHEEL_CACHE (default $FAITHRAG_CACHE/wheels), models are assembled once.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.faithrag-installed
PYTEST_ARGS ?=

.PHONY: setup models models-tiny demo test test-fast bench clean

setup: $(STAMP)

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
test: models-tiny
	PYTHON=$(BIN)/python scripts/build_llama_server.sh > $(VENV)/.llama-server-path
	FAITHRAG_LLAMA_SERVER=$$(cat $(VENV)/.llama-server-path) $(BIN)/python -m pytest $(PYTEST_ARGS)

test-fast: setup
	$(BIN)/python -m pytest -m "not model and not server and not install" $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
