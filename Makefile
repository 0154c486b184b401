PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: venv demo test bench clean

# One stamp per extra: `make demo` installs the command-line extra, `make test`
# the test extra (which includes it), `make bench` the bench extra (adds opendp).
$(VENV)/.created:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	touch $@

$(VENV)/.cli: pyproject.toml $(VENV)/.created
	$(BIN)/pip install -q -e ".[cli]"
	touch $@

$(VENV)/.test: pyproject.toml $(VENV)/.created
	$(BIN)/pip install -q -e ".[test]"
	touch $@ $(VENV)/.cli

$(VENV)/.bench: pyproject.toml $(VENV)/.created
	$(BIN)/pip install -q -e ".[bench]"
	touch $@ $(VENV)/.test $(VENV)/.cli

venv: $(VENV)/.test

demo: $(VENV)/.cli
	$(BIN)/python -m sparseldp.demo

test: $(VENV)/.test
	$(BIN)/python -m pytest

bench: $(VENV)/.bench
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) demo-output
