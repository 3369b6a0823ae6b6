# The two entry points of a fresh clone (see README):
#   make demo   install, then ingest the bundled sample KB and answer questions offline
#   make test   install with the dev extra, then lint, type-check and run the tests
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test install install-dev

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet -e .

install-dev: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'

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
