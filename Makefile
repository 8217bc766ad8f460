# Everything runs inside .venv, created on first use from python3 (>= 3.10).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: test demo lint format typecheck mutation bench clean

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[cli,agents,dev]'
	touch $@

demo: $(INSTALLED)
	$(BIN)/turntrim demo

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Apply ruff's fixes, then format; what is left to fix by hand is listed first.
format: $(INSTALLED)
	-$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: $(INSTALLED)
	$(BIN)/mypy --strict langchain_turntrim
	$(BIN)/mypy tests benchmarks

test: lint typecheck
	$(BIN)/pytest

# Speed, as ratios measured side by side with trim_messages (not part of `make test`).
bench: $(INSTALLED)
	$(BIN)/python -m benchmarks

# Mutation testing of the core and the message adapter (not part of `make test`).
mutation: $(INSTALLED)
	rm -rf mutants
	$(BIN)/mutmut run
	$(BIN)/mutmut results

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .hypothesis mutants
