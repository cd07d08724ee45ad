# Millstream developer entry points. `make run` and `make test` install what
# they need themselves, so a fresh clone needs only Python 3.11, Java 17 and make.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install run test test-fast bench browser-deps clean

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/millstream cluster start

# Browser tests drive Debian's Chromium through Playwright (never a downloaded browser).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing Debian's chromium for the browser tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

test: install browser-deps
	$(PY) -m pytest -q

test-fast: install
	$(PY) -m pytest -q tests/engine

bench: install
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) var test-artifacts
