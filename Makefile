# Everything runs inside .venv, created on first use from python3 (>= 3.10).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: test demo lint typecheck clean

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

typecheck: $(INSTALLED)
	$(BIN)/mypy --strict langchain_turntrim

test: lint typecheck
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .hypothesis
