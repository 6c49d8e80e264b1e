# The two commands a new machine needs (see README.md):
#   make demo   install, then `guardtrace up --demo`: broker, store, consumer, dashboard
#               and simulated traffic on the embedded defaults (Ctrl-C stops it)
#   make test   install (Debian's chromium too, for the one browser test), then run the
#               test suite (what CI runs)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: install browser demo smoke lint test bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[server,test]'
	touch $@

demo: install
	$(BIN)/guardtrace up --demo

# The batch pipeline check: emit 10,000 spans, consume them, print the counts.
smoke: install
	PATH="$(abspath $(BIN)):$$PATH" bash scripts/smoke.sh

# The browser test drives Debian's Chromium (Playwright uses it; it downloads no browser).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# ruff and mypy (configured in pyproject.toml). The repository root is the package
# `guardtrace`, which mypy finds by name: a link named guardtrace, in a folder of its own,
# points at the root.
lint: install
	$(BIN)/ruff check .
	@typecheck=$$(mktemp -d) && ln -s "$(CURDIR)" "$$typecheck/guardtrace" && \
	  MYPYPATH="$$typecheck" $(BIN)/mypy -p guardtrace; status=$$?; rm -rf "$$typecheck"; exit $$status

test: install browser lint
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=25

# The benchmarks (benchmarks/, not part of `make test`): each prints a table and, last, one
# JSON line with its figures and targets; copies go to .guardtrace/bench/. Smoke sizes:
# make bench BENCH_ARGS=--quick
BENCH_ARGS ?=
bench: $(VENV)/.bench-installed
	@mkdir -p .guardtrace/bench
	@for b in hook_overhead detection_quality pipeline_throughput payload_throughput lookup_latency redaction_quality pipeline_detection; do \
	  echo "== $$b $(BENCH_ARGS)"; \
	  $(BIN)/python benchmarks/$$b.py $(BENCH_ARGS) > .guardtrace/bench/$$b.txt; \
	  status=$$?; cat .guardtrace/bench/$$b.txt; [ $$status = 0 ] || exit $$status; \
	done

$(VENV)/.bench-installed: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[server,test,bench]'
	touch $@

clean:
	rm -rf $(VENV) .guardtrace build *.egg-info
