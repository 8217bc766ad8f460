# Everything runs inside .venv, created on first use from python3 (>= 3.10).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
# `make test-min`: the lowest versions pyproject.toml declares, in their own venv.
VENV_MIN := .venv-min
INSTALLED_MIN := $(VENV_MIN)/.installed
# `make demo`: only what `turntrim demo` needs (the package and rich).
VENV_DEMO := .venv-demo
INSTALLED_DEMO := $(VENV_DEMO)/.installed
# `make docs` builds the site here.
SITE := site
# `make test-pythons`: the suite on the oldest and the newest Python supported,
# each in a venv of its own (.venv-3.10, .venv-3.13), from these interpreters.
PYTHONS := 3.10 3.13
PYTHON_3.10 ?= python3.10
PYTHON_3.13 ?= python3.13

.PHONY: test test-min test-pythons docs demo lint format typecheck mutation bench clean

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[cli,agents,dev,docs]'
	touch $@

$(INSTALLED_DEMO): pyproject.toml
	$(PYTHON) -m venv $(VENV_DEMO)
	$(VENV_DEMO)/bin/python -m pip install --quiet --upgrade pip
	$(VENV_DEMO)/bin/python -m pip install --quiet -e '.[cli]'
	touch $@

demo: $(INSTALLED_DEMO)
	$(VENV_DEMO)/bin/turntrim demo

# The documentation site; --strict fails on any warning (a broken link or anchor,
# a page left out of the nav, a docstring mkdocstrings cannot read). The variable
# silences Material's notice about its own end of life, which is not a warning
# about these docs.
docs: $(INSTALLED)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir $(SITE)

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

# uv resolves every direct dependency to its declared floor (transitive ones as usual).
$(INSTALLED_MIN): pyproject.toml
	$(PYTHON) -m venv $(VENV_MIN)
	$(VENV_MIN)/bin/python -m pip install --quiet --upgrade pip 'uv>=0.9,<1'
	$(VENV_MIN)/bin/python -m uv pip install --quiet --python $(VENV_MIN)/bin/python \
		--resolution lowest-direct -e '.[cli,agents,dev]'
	touch $@

test-min: $(INSTALLED_MIN)
	$(VENV_MIN)/bin/python -m uv pip list --python $(VENV_MIN)/bin/python 2>/dev/null \
		| grep -Ei '^(langchain|langchain-core|langchain-openai|langchain-anthropic|langgraph|tiktoken|rich|pytest|hypothesis) '
	$(VENV_MIN)/bin/pytest

# pyenv's shims run only the versions selected; let them find every installed
# one (the selected first, so python3 stays what it was).
ifneq ($(shell command -v pyenv 2>/dev/null),)
.venv-%/.installed: export PYENV_VERSION ?= $(shell pyenv version-name):$(shell pyenv versions --bare | paste -sd: -)
endif
# The venvs outlive the run (make would delete what a pattern rule made).
.PRECIOUS: .venv-%/.installed
.venv-%/.installed: pyproject.toml
	$(PYTHON_$*) -m venv .venv-$*
	.venv-$*/bin/python -m pip install --quiet --upgrade pip
	.venv-$*/bin/python -m pip install --quiet -e '.[cli,agents,dev]'
	touch $@

# Lint and typecheck are the same on every Python: `make test` runs them once.
test-python-%: .venv-%/.installed
	.venv-$*/bin/python --version
	.venv-$*/bin/pytest

test-pythons: $(addprefix test-python-,$(PYTHONS))

# Speed, as ratios measured side by side with trim_messages (not part of `make test`):
# every scenario on the seeded generator, then the timing ones on recorded τ-bench
# conversations when they are beside the checkout (the quality scenarios read
# their own recorded data whatever the input), then the documentation's tables.
TAU_BENCH := ../shared/data/tau-bench-gpt4o-airline.json
bench: $(INSTALLED)
	$(BIN)/python -m benchmarks
	if [ -f $(TAU_BENCH) ]; then $(BIN)/python -m benchmarks --timing-only --transcripts $(TAU_BENCH); fi
	$(BIN)/python -m benchmarks.readme

# Mutation testing of the core and the message adapter (not part of `make test`).
mutation: $(INSTALLED)
	rm -rf mutants
	$(BIN)/mutmut run
	$(BIN)/mutmut results

clean:
	rm -rf $(VENV) $(VENV_MIN) $(VENV_DEMO) $(addprefix .venv-,$(PYTHONS)) $(SITE) .mypy_cache .ruff_cache .hypothesis mutants
