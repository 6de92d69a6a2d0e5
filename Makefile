# Two commands do all the set-up on a fresh machine:
#   make demo   - a virtual environment, the project installed, the bundled example run
#   make test   - the same environment plus test tools and services, then the test suite

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test services lint typecheck clean bench

$(BIN)/pact: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

demo: $(BIN)/pact
	$(BIN)/pact demo

services:
	./scripts/ensure-services

test: $(BIN)/pact services lint typecheck
	$(BIN)/python -m pytest

lint: $(BIN)/pact
	$(BIN)/ruff check pact_workers scheduler tests bench
	$(BIN)/ruff format --check pact_workers scheduler tests bench

typecheck: $(BIN)/pact
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache

bench: $(BIN)/pact
	$(BIN)/python bench/scheduling.py
