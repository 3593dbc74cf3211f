# Two entry points: `make demo` and `make test`. Both install what is missing first.
SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed
APT_PACKAGES := zookeeper kcat default-jre-headless iproute2 nftables iptables chromium chromium-driver
SUDO  := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Tests run on two pytest-xdist workers, each module whole on one worker (tests/conftest.py keeps
# a few folders together). Most integration time is waiting (sessions to expire, JVMs to start,
# throttled copies): the serial suite kept the 2 cores about a third busy. Every test binds free
# ports (headwater.admin.local.free_port) and names what it creates after its own process.
# PYTEST_WORKERS=0 runs the suite in one process.
PYTEST_WORKERS ?= 2
PYTEST_ARGS ?= --durations=25

.PHONY: demo test lint typecheck unit system venv js bench chaos clean

demo: system venv
	$(PY) -m headwater demo

test: system venv js lint typecheck
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

lint: venv
	$(VENV)/bin/ruff check $(wildcard headwater tests benchmarks examples)
	$(VENV)/bin/lint-imports
	@# pytest imports test modules by basename (rootdir-relative, no packages): two test_x.py break collection.
	@dups=$$(find tests -name 'test_*.py' -printf '%f\n' | sort | uniq -d); \
	  if [ -n "$$dups" ]; then echo "test module names must be unique across tests/: $$dups"; exit 1; fi

typecheck: venv
	$(VENV)/bin/mypy

# The quick loop while working: unit and simulation tests, no processes started.
unit: venv
	$(PY) -m pytest -q tests/unit tests/sim

# System packages from Debian: the ZooKeeper server, kcat (a real librdkafka client), a JRE
# (ZooKeeper and Spark run on it), iproute2 + nftables (+ iptables) for the chaos tests' network
# namespaces and faults, and chromium + chromium-driver for the console's browser tests (selenium
# drives /usr/bin/chromium through /usr/bin/chromedriver). Installed only when something is missing.
system:
	@export PATH="$$PATH:/usr/sbin:/sbin"; \
	if ! command -v kcat >/dev/null || ! [ -e /usr/share/java/zookeeper.jar ] || ! command -v java >/dev/null \
	    || ! command -v ip >/dev/null || ! command -v nft >/dev/null || ! command -v iptables >/dev/null \
	    || ! [ -x /usr/bin/chromium ] || ! [ -x /usr/bin/chromedriver ]; then \
	  echo "installing $(APT_PACKAGES)"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $(SUDO) apt-get update -q && \
	  $(SUDO) apt-get install -y -q $(APT_PACKAGES); \
	fi
	@if ! command -v npm >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q nodejs npm; \
	fi
	@if ! python3.11 -c 'import venv, ensurepip' 2>/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $(SUDO) apt-get install -y -q python3 python3-venv python3-dev; \
	fi

# KafkaJS and its Snappy/LZ4/ZSTD codecs for the conformance tests, at the versions package-lock.json
# pins; installed again whenever the lock file is newer than the last install.
JS_STAMP := tests/js/node_modules/.installed

js: system $(JS_STAMP)

$(JS_STAMP): tests/js/package-lock.json | system
	npm ci --prefix tests/js --no-audit --no-fund
	touch $(JS_STAMP)

venv: $(STAMP)

$(STAMP): pyproject.toml
	@PYBIN=$$(command -v python3.11 || command -v python3); \
	  [ -x $(PY) ] || $$PYBIN -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,spark]'
	touch $(STAMP)

# The randomized fault-injection suite (tests/chaos/README.md), outside CI. Needs root (network
# namespaces). CHAOS_SEEDS=20 (or 1-20, or 3,7,9), CHAOS_SEED=N for one, CHAOS_NEMESES=pause,kill.
chaos: system venv
	$(PY) tests/chaos/chaos_suite.py

bench: system venv
	$(PY) benchmarks/datapath.py

clean:
	rm -rf tests/js/node_modules $(VENV) .mypy_cache .ruff_cache .pytest_cache build *.egg-info
