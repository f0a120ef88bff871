# The two commands of the README: `make demo` (set up, run the main job) and
# `make test` (set up, run the whole suite). Both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[test]"
	touch $@

demo: $(VENV)/.installed
	$(BIN)/python -m idcrawl.demo

lint: $(VENV)/.installed
	$(BIN)/ruff check idcrawl tests bench
	$(BIN)/mypy idcrawl

test: lint
	$(BIN)/python -m pytest

bench: $(VENV)/.installed
	$(BIN)/python bench/scheduler_lanes.py
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/dedup.py

clean:
	rm -rf $(VENV) demo-output build *.egg-info .pytest_cache .mypy_cache .ruff_cache
