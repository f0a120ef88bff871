# The two commands of the README: `make demo` (set up, run the main job) and
# `make test` (set up, run the whole suite). Both create .venv on first use.
#
# `make docs` builds the manual (docs/, Sphinx with MyST Markdown) into docs/_build/html with warnings as
# errors (-W: a broken cross-reference, a page outside every toctree or a missing include fails it);
# .venv has Sphinx from the `docs` extra. `make test` runs lint, the docs build and the whole suite on
# the latest Scrapy (.venv), then the Scrapy tier on the oldest Scrapy idcrawl supports (.venv-floor, the
# pin of constraints-floor.txt, which is also pyproject.toml's `scrapy>=`): FLOOR_TESTS below.
# `make test-floor` runs that tier alone. `make test-fast` runs the unit tier alone (tests/unit: no server,
# no crawl, about a minute); the suite's other tiers are tests/crawl (real scrapy runs) and
# tests/integration (redis-server, scrapyd, builds). `make lint` runs ruff, mypy and import-linter's
# contracts (pyproject.toml's [tool.importlinter]: the core imports no Scrapy, Twisted or Redis; the state
# stores nothing of the distributed layer).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
FLOOR_VENV ?= .venv-floor
FLOOR_BIN := $(FLOOR_VENV)/bin
# pywb for the replay tests (tests/support/wayback.py): a venv of its own, as pywb 2.10 pins redis==2.10.6 and
# werkzeug, which the project's redis>=5 excludes (requirements-pywb.txt). `make test` makes it first.
PYWB_VENV ?= .venv-pywb
FLOOR_SCRAPY := $(shell sed -n 's/^scrapy==\([0-9.]*\).*/\1/p' constraints-floor.txt)
ifeq ($(FLOOR_SCRAPY),)
$(error constraints-floor.txt has no scrapy==X.Y.Z line)
endif
# The floor tier: the tests whose outcome can depend on the Scrapy version, chosen to keep CI short
# (on a 2-core machine loaded by other work: whole modules took 8 min; a first cut, 153 tests,
# 5 min; this one, 118 tests, 4 min, plus 2 min to create .venv-floor). The adapter of Scrapy
# internals (tests/unit/test_scrapy_adapter.py, idcrawl/_scrapy.py), the one-line refusal filter (tests/unit/test_errors.py) and real `scrapy crawl` runs
# through each Scrapy internal idcrawl relies on: the dupefilter's fingerprints (and the lane fingerprints that must equal them), the engine wake-up
# and the delay queue, the slot delays of politeness, closing from an extension (limits, distributed
# idle timeout), feed flushing for resume, the exit status of refused input (the in-process halves
# of politeness and profiles ride along, as when each was one module), a failed write and JOBDIR's files
# (the feed storage, the disk queue, SpiderState, the shutdown signal), and the demo spider on recorded pages
# (idcrawl.recorded builds a crawler outside the engine: _scrapy.offline_crawler). Left out: the other crawl
# modules (soft 404s, overlap, incidents, monitors, demo, idjob, idcoverage, addon, the rest of the
# distributed ones), the package builds (packaging, scrapyd, zyte), and the rest of tests/unit.
# `make test` runs pytest on TEST_WORKERS processes (pytest-xdist; each test starts its own servers on free
# ports and writes under its own tmp_path, so they share nothing). Two: the suite is half waiting (crawl
# subprocesses, sites with latency, leases) and a CI machine has 2 cores; on this machine the crawl and
# integration tiers used 1.3 cores serially. TEST_WORKERS=0 runs it in one process (plain `pytest` does too).
TEST_WORKERS ?= 2
# worksteal: a worker that has run its share takes queued tests from the other's (the default `load` hands out
# the queue up front, so a worker whose last tests are slow fleet runs can finish long after the other)
TEST_DIST ?= --dist worksteal
FLOOR_TESTS := tests/unit/test_scrapy_adapter.py tests/unit/test_errors.py tests/crawl/test_crawl_core.py tests/crawl/test_crawl_errors.py \
	tests/crawl/test_bounds_crawl.py \
	tests/unit/test_politeness.py tests/crawl/test_politeness_crawl.py tests/crawl/test_limits_crawl.py \
	tests/unit/test_profiles.py tests/crawl/test_profiles_crawl.py \
	tests/unit/test_demo_recorded.py tests/unit/test_laneprint.py \
	tests/unit/test_storage.py tests/crawl/test_storage_crawl.py \
	tests/crawl/test_dupefilter_crawl.py::test_pages_linked_many_times_are_fetched_once_and_a_jobdir_rerun_fetches_none \
	tests/crawl/test_dupefilter_crawl.py::test_a_page_that_never_got_a_final_answer_is_not_saved_as_seen \
	tests/crawl/test_dupefilter_crawl.py::test_without_jobdir_only_a_resuming_run_reads_the_filter_beside_the_state \
	tests/crawl/test_dupefilter_crawl.py::test_the_request_fingerprinter_setting_decides_what_is_a_duplicate \
	tests/crawl/test_dupefilter_crawl.py::test_a_corrupt_filter_file_stops_the_crawl_with_one_line_and_is_kept \
	tests/crawl/test_dupefilter_crawl.py::test_a_bad_setting_stops_the_crawl_with_one_line \
	tests/crawl/test_attempts_crawl.py::test_retry_after_delays_the_next_attempt \
	tests/crawl/test_resume_crawl.py::test_a_stopped_crawl_resumes_with_the_rest_of_the_bound \
	"tests/crawl/test_resume_crawl.py::test_killed_with_sigkill_at_any_moment_a_resumed_run_loses_nothing[1]" \
	tests/crawl/test_resume_crawl.py::test_resume_with_other_parameters_is_refused \
	tests/crawl/test_resume_crawl.py::test_a_corrupt_state_file_stops_the_crawl_and_is_left_intact \
	tests/integration/test_distributed_crawl.py::test_a_target_pushed_through_the_feed_key_is_crawled_by_idle_workers \
	tests/integration/test_distributed_crawl.py::test_an_id_whose_callback_raises_does_not_hold_the_job_forever \
	"tests/crawl/test_scope_crawl.py::test_the_fetched_set_is_a_breadth_first_walk_to_max_hops_and_off_scope_hosts_get_no_request[2]"
FLOOR_DESELECT := --deselect tests/crawl/test_crawl_core.py::test_unbounded_range_costs_no_more_memory_than_a_small_one
# The newest-Python tier: PYTHON (3.11, requires-python's floor) runs the whole suite; `make test` then runs
# the unit tier and the floor tier's crawl tests (real `scrapy crawl` runs through each Scrapy internal idcrawl
# relies on) on the newest Python the machine has, in .venv-pyX.Y with the latest Scrapy, as a tox matrix
# tests a range (pyproject.toml's classifiers name the Pythons tested). .ci/newest_python.py finds it
# (python3.N on PATH, pyenv's versions; NEWEST_PYTHON=PATH picks one, NEWEST_PYTHON= skips); with none
# newer than PYTHON the tier says so in one line and is skipped. `make test-newest` runs it alone.
NEWEST_TESTS := tests/unit $(filter tests/crawl/% "tests/crawl/%,$(FLOOR_TESTS)) $(FLOOR_DESELECT)

.PHONY: demo test test-venvs test-fast test-floor test-newest test-newest-run newest-venv lint docs bench clean

# The venvs are filled by uv (the test extra has it; .venv gets it from pip first): the same packages and
# resolution rules as pip's, in a fraction of the time (on this machine, .venv-floor: pip 2 min, uv 18 s).
# --compile-bytecode, as pip does: without .pyc files every `scrapy` a test starts compiles Scrapy and Twisted
# again when PYTHONDONTWRITEBYTECODE is set (0.65 -> 1.45 CPU s for its imports). .venv keeps pip (python -m
# venv): tests/integration/test_packaging.py builds a wheel with `pip wheel`; the others are `uv venv --seed`.
UV := $(BIN)/uv
# Bytecode caches on for every step: with PYTHONDONTWRITEBYTECODE set (some shells set it), each pytest worker
# rewrites and compiles every test module again, and each of the suite's thousand subprocesses compiles
# idcrawl's modules again. Python checks a cache against its source's mtime and size, so it changes no outcome.
unexport PYTHONDONTWRITEBYTECODE

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check "uv>=0.4"
	$(UV) pip install --quiet --compile-bytecode --python $(BIN)/python --upgrade-package pip pip -e ".[test,docs]"
	touch $@

$(FLOOR_VENV)/.installed: pyproject.toml constraints-floor.txt $(VENV)/.installed
	$(UV) venv --quiet --seed --allow-existing --python $(PYTHON) $(FLOOR_VENV)
	$(UV) pip install --quiet --compile-bytecode --python $(FLOOR_BIN)/python -e ".[test]" -c constraints-floor.txt
	touch $@

$(PYWB_VENV)/.installed: requirements-pywb.txt $(VENV)/.installed
	$(UV) venv --quiet --seed --allow-existing --python $(PYTHON) $(PYWB_VENV)
	$(UV) pip install --quiet --compile-bytecode --python $(PYWB_VENV)/bin/python -r requirements-pywb.txt
	touch $@

# NEWEST_PYTHON and NEWEST_VENV come from test-newest below
$(NEWEST_VENV)/.installed: pyproject.toml $(VENV)/.installed
	$(UV) venv --quiet --seed --allow-existing --python $(NEWEST_PYTHON) $(NEWEST_VENV)
	$(UV) pip install --quiet --compile-bytecode --python $(NEWEST_VENV)/bin/python -e ".[test,docs]"  # docs: tests/unit/test_docs.py builds pages
	touch $@

demo: $(VENV)/.installed
	$(BIN)/python -m idcrawl.demo

lint: $(VENV)/.installed
	$(BIN)/ruff check idcrawl tests bench
	$(BIN)/mypy idcrawl
	$(BIN)/lint-imports --no-cache

docs: $(VENV)/.installed
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html

# `make test`: the set-up steps side by side (lint and the docs build use the CPU while uv waits on the network),
# then the whole suite, then the floor and newest-Python tiers, one after the other: side by side they would put
# four pytest workers on two cores, and the suite's subprocess timeouts are sized for two. --output-sync keeps
# each step's output in one piece. Any step failing fails `make test`, as before.
test: $(VENV)/.installed
	$(MAKE) --no-print-directory -j4 --output-sync=target lint docs $(PYWB_VENV)/.installed test-venvs
	$(BIN)/python -m pytest -n $(TEST_WORKERS) $(TEST_DIST)
	$(MAKE) --no-print-directory test-floor
	$(MAKE) --no-print-directory test-newest

# the floor's venv, then the newest Python's: one after the other, as each editable install writes
# idcrawl.egg-info into the checkout
test-venvs: $(FLOOR_VENV)/.installed
	$(MAKE) --no-print-directory newest-venv

test-fast: $(VENV)/.installed
	$(BIN)/python -m pytest tests/unit

test-floor: $(FLOOR_VENV)/.installed
	IDCRAWL_EXPECT_SCRAPY=$(FLOOR_SCRAPY) $(FLOOR_BIN)/python -m pytest -n $(TEST_WORKERS) $(TEST_DIST) $(FLOOR_TESTS) \
		$(FLOOR_DESELECT)

test-newest:
	@found=$$($(PYTHON) .ci/newest_python.py) || exit 1; set -- $$found; \
	if [ $$# -eq 0 ]; then \
		echo "test-newest: skipped, no Python newer than $$($(PYTHON) -c 'import sys; print(sys.version.split()[0])') here (python3.N on PATH, pyenv)"; \
	else \
		echo "test-newest: Python $$1 ($$2): the unit tier and the floor tier's crawl tests"; \
		$(MAKE) --no-print-directory NEWEST_PYTHON=$$2 NEWEST_VENV=.venv-py$$1 test-newest-run; \
	fi

# the newest Python's venv alone (`make test` makes it with the other venvs: an editable install writes
# idcrawl.egg-info into the checkout, which no test run should see half written)
newest-venv:
	@found=$$($(PYTHON) .ci/newest_python.py) || exit 1; set -- $$found; \
	if [ $$# -ne 0 ]; then $(MAKE) --no-print-directory NEWEST_PYTHON=$$2 NEWEST_VENV=.venv-py$$1 .venv-py$$1/.installed; fi

test-newest-run: $(NEWEST_VENV)/.installed
	$(NEWEST_VENV)/bin/python -m pytest -n $(TEST_WORKERS) $(TEST_DIST) $(NEWEST_TESTS)

bench: $(VENV)/.installed
	$(BIN)/python bench/scheduler_lanes.py
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/dedup.py

clean:
	rm -rf $(VENV) $(FLOOR_VENV) $(PYWB_VENV) .venv-py3.* demo-output build docs/_build *.egg-info .pytest_cache .mypy_cache .ruff_cache
