# The two entry points of a fresh clone (see README):
#   make demo   install, then ingest the bundled sample KB and answer questions offline
#   make test   install with the dev extra, then lint, type-check and run the tests
# Installs are pinned by constraints.txt (what CI tested); `make lock` rewrites it from the
# newest releases the package index has (then run `make test` and commit both).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test install install-dev lock

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# With the serve extra: `hybrid-rag serve` (the page) works right after `make demo`.
install: $(BIN)/python
	$(BIN)/pip install --quiet -c constraints.txt -e '.[serve]'

install-dev: $(BIN)/python
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'

# Every extra the image and CI install, resolved afresh in a throw-away venv, then frozen.
LOCK_VENV := .lock-venv
lock:
	rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LOCK_VENV)/bin/pip install --quiet -e '.[dev,postgres,redis,server,serve]'
	{ echo "# Pinned by 'make lock' (pip freeze of .[dev,postgres,redis,server,serve]); used by make and deploy/Dockerfile."; \
	  $(LOCK_VENV)/bin/pip freeze --exclude-editable | grep -v -i '^hybrid-rag'; } > constraints.txt
	rm -rf $(LOCK_VENV)

# The demo fills the data home everything else reads ($$HYBRID_RAG_HOME, default
# ~/.local/share/hybrid-rag): the CLI, the README's Python example and langgraph dev.
demo: install
	$(BIN)/hybrid-rag demo

test: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest
