# awaken-stdio developer commands. `make install` then `make test` is all a fresh machine needs.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: install test lint format bench schemas pg-up pg-down node-tools conformance registry-gates

$(PY):
	$(PYTHON) -m venv $(VENV)

install: $(PY)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev,all]"
	$(PY) -m pip install -q -e examples/awaken_weather  # the example tool package (its entry point is tested)

test: $(PY)
	$(PY) -m pytest -q

lint: $(PY)
	$(PY) -m ruff check awaken_stdio tests bench examples scripts
	$(PY) -m ruff format --check awaken_stdio tests bench examples scripts
	$(PY) -m pyright  # strict on awaken_stdio/ ([tool.pyright] in pyproject.toml)

format: $(PY)
	$(PY) -m ruff format awaken_stdio tests bench
	$(PY) -m ruff check --fix awaken_stdio tests bench

bench: $(PY)
	$(PY) -m pip install -q -e ".[dev,all,bench]"  # as `make install`, plus agno: the in-memory run's baseline
	$(PY) -m bench

schemas: $(PY)
	$(PY) -m awaken_stdio config schema > schemas/config.schema.json
	$(PY) -m awaken_stdio.providers.scripted --schema > schemas/scripted-model.schema.json

# A throwaway PostgreSQL server in .pg/ for the store tests and benchmarks: eval "$$(make -s pg-up)"
pg-up:
	@scripts/pg-test-server.sh start

pg-down:
	@scripts/pg-test-server.sh stop

# Pinned Node 22, MCP Inspector and server-everything in .node/ for tests/e2e/test_mcp_third_party.py (idempotent).
node-tools:
	@scripts/node-tools.sh

# The official MCP conformance kit against `awaken-stdio serve` over HTTP, directly; passes when every
# failure is in tests/e2e/conformance/expected-failures.yml. Results in .node/conformance-results/.
conformance: $(PY)
	@PYTHON=$(abspath $(PY)) tests/e2e/conformance/run.sh

# What the ACP and MCP registries check before listing us (icon, manifests, versions, a cold `uvx` launch, the auth
# check, the protocol matrix), run against a wheel built once from the sdist. Needs uv (in the `dev` extra) and PyPI.
registry-gates: $(PY)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PY) scripts/registry_gates.py $(GATES_ARGS)
