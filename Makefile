# Two commands do all the set-up on a fresh machine:
#   make demo   - a virtual environment, the project installed, the bundled example run
#   make test   - the same environment plus test tools and services, then the test suite

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Processes make test runs the suite on (pytest-xdist); 0 runs it in this one. Three on
# two CPUs: many tests wait on processes, leases and sandboxes, and two processes kept
# the CPUs busy 73% of the time (1,293 s); three, 82% (1,134 s).
TEST_WORKERS ?= 3

.PHONY: demo test services lint typecheck bytecode clean bench

$(BIN)/pact: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

demo: $(BIN)/pact bytecode
	$(BIN)/pact demo

services:
	./scripts/ensure-services

test: $(BIN)/pact services lint typecheck bytecode
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup

# The suite starts Python processes by the hundred (pact commands, workers, stand-ins),
# and a user runs pact again and again. Each would compile the project's modules again
# where PYTHONDONTWRITEBYTECODE is set (an editable install is never compiled by pip);
# compiled once here, they are read (the interpreter checks each against its source).
# The example's replayed agent outputs are data, copied into projects: not compiled.
bytecode: $(BIN)/pact
	$(BIN)/python -m compileall -q -x '/examples/' pact_workers scheduler bench tests

lint: $(BIN)/pact
	$(BIN)/ruff check pact_workers scheduler tests bench
	$(BIN)/ruff format --check pact_workers scheduler tests bench

typecheck: $(BIN)/pact
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
	find pact_workers scheduler bench tests -name __pycache__ -type d -prune -exec rm -rf {} +

bench: $(BIN)/pact
	$(BIN)/python bench/scheduling.py --quick
	$(BIN)/python bench/scale.py

# The fleet in containers (compose.yaml; see deploy/). No registry needed: the images
# build from local wheels and, where no image can be pulled, from debootstrap bases
# (scripts/ensure-services builds those as root).
.PHONY: fleet-image fleet-up fleet-down fleet-logs

fleet-image:
	deploy/build-image.sh

fleet-up:
	@[ -n "$${PACT_FLEET_IMAGE:-}" ] || deploy/build-image.sh --if-missing
	deploy/compose.sh up -d

fleet-down:
	deploy/compose.sh down -v --remove-orphans

fleet-logs:
	deploy/compose.sh logs --follow --tail=100
