# obs-iac: `make render` and `make test` work on a fresh clone (they create .venv).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: render check-render diff test check lint typecheck fmt bench bench-lint bench-tests golden clean venv preview

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

render: $(STAMP)
	$(BIN)/obs-iac render

# Dashboard layout previews (SVG + PNG via headless Chromium: apt-get install chromium).
preview: $(STAMP)
	$(BIN)/obs-iac preview --out docs/previews --png

check-render: $(STAMP)
	$(BIN)/obs-iac render --check

# What the working tree changes in production, against BASE (default: the committed generated/).
diff: $(STAMP)
	$(BIN)/obs-iac diff $(if $(BASE),--base $(BASE))

# pytest-xdist: one worker per core (TEST_JOBS=0 runs in one process). What a session
# fixture builds once for all workers goes through tests/venvs.py:once_per_run.
TEST_JOBS ?= auto
test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_JOBS)

lint: $(STAMP)
	$(BIN)/ruff check obs_iac tests bench
	$(BIN)/ruff format --check obs_iac tests bench

typecheck: $(STAMP)
	$(BIN)/mypy obs_iac

check: lint typecheck test check-render

fmt: $(STAMP)
	$(BIN)/ruff format obs_iac tests bench
	$(BIN)/ruff check --fix obs_iac tests bench

# Rewrites the golden trees under tests/golden/*/expected from the current code.
golden: $(STAMP)
	OBS_IAC_UPDATE_GOLDEN=1 $(BIN)/python -m pytest -q tests/test_golden.py

# Every figure of issue 12 (render scaling and floor, pool, incremental, diff, progress bar,
# start-up, and lint against promtool via bench/lint_bench.py) into bench/results/.
# Long: about an hour with the 5,000-service fleet. Quick look: make bench BENCH_ARGS="--sizes 10,100 --repeats 2 --out /tmp/bench"
bench: $(STAMP)
	$(BIN)/python bench/run.py $(BENCH_ARGS)

# Issue 22: promtool time per example service and the wall time of the whole suite
# (also part of `make bench`). Quick look without the suite: BENCH_ARGS=--no-suite
bench-tests: $(STAMP)
	$(BIN)/python bench/test_loop.py --json bench/results/test_loop.json $(BENCH_ARGS)

# obs-iac lint against promtool check rules on the 1,000-service fleet's rule files.
bench-lint: $(STAMP)
	$(BIN)/python bench/lint_bench.py -n 1000

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
