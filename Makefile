# Millstream developer entry points. `make run` and `make test` install what
# they need themselves, so a fresh clone needs only Python 3.11, Java 17 and make.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp

.PHONY: install run test test-fast bench system-deps clean

# The site_hook files are copied into site-packages (not linked) even by the editable install.
$(STAMP): pyproject.toml setup.py $(wildcard engine/compat/site_hook/*)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/millstream cluster start

# Debian packages the tests use: Chromium for the browser tests (driven by Playwright, never a
# downloaded browser), redis-server and openssl for the TLS test.
system-deps:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v redis-server >/dev/null 2>&1 || missing="$$missing redis-server"; \
	command -v openssl >/dev/null 2>&1 || missing="$$missing openssl"; \
	command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages for the tests:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# Two workers: most integration tests wait on real processes (heartbeats, leases, rate-limited
# sources) more than they compute, so two at a time on 2 cores halve the wall time; a test file
# stays on one worker (--dist loadfile), so a module's fixtures are built once.
test: install system-deps
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=40

test-fast: install
	$(PY) -m pytest -q tests/engine

# The long test variants first (the 13-fault chaos run, long leak runs, every remote store), then
# the measurements.
bench: install system-deps
	$(PY) -m pytest -q --full -m full
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) var test-artifacts
