# The two commands a new machine needs (see README.md):
#   make demo   install, then run the pipeline on the embedded defaults
#   make test   install, then run the test suite (what CI runs)
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: install demo test clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

demo: install
	PATH="$(abspath $(BIN)):$$PATH" bash scripts/demo.sh

test: install
	$(BIN)/python -m pytest -q -p no:cacheprovider

clean:
	rm -rf $(VENV) .guardtrace build *.egg-info
