PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: venv demo test browser bench clean

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

test: $(VENV)/.test browser
	$(BIN)/python -m pytest

# tests/test_report.py renders the privacy report in headless Chromium (Debian package `chromium`):
# install it when it is missing and we can (root with apt-get); otherwise that test fails and says why.
browser:
	@if [ ! -x /usr/bin/chromium ] && ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else \
	    echo "make: chromium is missing and cannot be installed here (needs root and apt-get)" >&2; \
	  fi; \
	fi

bench: $(VENV)/.bench
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) demo-output
