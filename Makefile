# Millstream developer entry points. `make run` and `make test` install what
# they need themselves, so a fresh clone needs only Python 3.11, Java 17 and make.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install run test test-fast bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/millstream cluster start

test: install
	$(PY) -m pytest -q

test-fast: install
	$(PY) -m pytest -q tests/engine

bench: install
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) var test-artifacts
