# obs-iac: `make render` and `make test` work on a fresh clone (they create .venv).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: render check-render diff test check lint typecheck fmt bench bench-lint bench-tests golden clean venv preview dist tools

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

render: $(STAMP)
	$(BIN)/obs-iac render

# The current stack (Prometheus 3, Alertmanager 0.35, an OTel Collector) pinned in
# tools/versions.toml, built with Go into ${OBS_IAC_TOOLS_DIR:-~/.cache/obs-iac/tools}/bin;
# a no-op when the pins are unchanged. Needs no venv. Also reports Debian's floor tools.
tools:
	nice -n 10 $(PYTHON) tools/build.py

# Dashboard layout previews: SVG, and PNG when headless Chromium is installed
# (apt-get install chromium); without it, SVG only, and it says so.
PREVIEWS ?= docs/previews
preview: $(STAMP)
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
	  || command -v google-chrome >/dev/null 2>&1; then \
	  $(BIN)/obs-iac preview --out $(PREVIEWS) --png; \
	else \
	  echo "preview: Chromium not found, SVG only (apt-get install chromium for the PNGs)"; \
	  $(BIN)/obs-iac preview --out $(PREVIEWS); \
	fi

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

# An sdist and a wheel built from it, into $(DIST) (no network: the venv has the backend).
DIST ?= dist
dist: $(STAMP)
	$(BIN)/python -m build --no-isolation --outdir $(DIST) .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
