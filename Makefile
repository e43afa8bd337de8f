.DEFAULT_GOAL := help
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SERVE_STAMP := $(VENV)/.serve-installed

.PHONY: help install lock run test test-latest test-compat test-compat-examples test-compat-all test-mcp1 soak ha-drill lint migrate bench bench-calls bench-profile bench-peers bench-durability bench-volume image-smoke clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-17s %s\n", $$1, $$2}'

UPSTREAM_EXAMPLES := tests/adoption/upstream-examples.txt
# The versions the tests, the benches and `make run` install: pyproject.toml keeps ranges for users,
# these files pin one tested set inside them (`make lock` re-resolves them, `make test-latest` runs the
# suite on what the ranges allow today). docs/testing.md says why.
LOCK := requirements/dev.lock
COMPAT_LOCK := requirements/compat.lock

$(STAMP): pyproject.toml $(LOCK) $(UPSTREAM_EXAMPLES)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet -c $(LOCK) --upgrade pip
	$(PY) -m pip install --quiet -c $(LOCK) -e ".[dev]"
	touch $(STAMP) $(SERVE_STAMP)

# `make run` needs only the service: no linters, test tools or browsers. pip lists what it fetches.
$(SERVE_STAMP): pyproject.toml $(LOCK)
	@echo "make run: installing the service into $(VENV) (the first time takes about a minute)"
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --disable-pip-version-check --progress-bar off -c $(LOCK) -e . | grep --line-buffered -E '^(Collecting|Successfully)' || true
	$(VENV)/bin/sursis --version
	touch $(SERVE_STAMP)

install: $(STAMP) ## create .venv and install the service with its dev tools

run: $(SERVE_STAMP) ## start the API with the in-process worker (SQLite, scripted model; SURSIS_PORT)
	$(VENV)/bin/sursis demo seed
	$(VENV)/bin/sursis serve

migrate: $(STAMP) ## apply the migrations to SURSIS_DATABASE_URL
	$(VENV)/bin/sursis migrate

# Three processes on two cores: much of the suite waits on the servers, workers and browsers it
# starts, and a third process uses the cores while the other two wait.
test: $(STAMP) ## run the tests in three processes (SQLite and PostgreSQL on 127.0.0.1:5432), then the example project's own
	$(VENV)/bin/pytest -q -n 3 --dist loadfile
	cd examples/support-desk && ../../$(PY) -m pytest -q

LOCK_VENV := .venv-lock
lock: ## re-resolve requirements/dev.lock and requirements/compat.lock from pyproject's ranges (newest versions today)
	rm -rf $(LOCK_VENV) && python3 -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LOCK_VENV)/bin/python -m pip install --quiet -e ".[dev,peers]"
	{ echo "# make lock: .[dev,peers] resolved from pyproject.toml's ranges; make install, make run and the benches install with these as constraints."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable; } > $(LOCK)
	rm -rf $(LOCK_VENV) && python3 -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --upgrade pip
	printf 'pydantic-ai-slim==%s\npydantic-ai-harness==0.62.0\n' $(LOWEST_PYDANTIC_AI) > $(LOCK_VENV)/lowest.txt
	$(LOCK_VENV)/bin/python -m pip install --quiet -c $(LOCK_VENV)/lowest.txt -e ".[dev,compat]"
	{ echo "# make lock: .[dev,compat] on the lowest supported pydantic-ai, resolved from pyproject.toml's ranges; make test-compat installs .venv-compat with these."; \
	  $(LOCK_VENV)/bin/python -m pip freeze --all --exclude-editable; } > $(COMPAT_LOCK)
	rm -rf $(LOCK_VENV)

# The suite on the newest versions pyproject's ranges allow today (what a user's `pip install` gets), in
# a venv made anew, without the lock. The call pin is measured on the locked versions, so here the count
# is printed beside the pin instead of asserted.
LATEST_VENV := .venv-latest
test-latest: ## the suite on the newest versions the ranges allow, not the lock (.venv-latest, made anew; not in .ci/run)
	rm -rf $(LATEST_VENV) && python3 -m venv $(LATEST_VENV)
	$(LATEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LATEST_VENV)/bin/python -m pip install --quiet -e ".[dev]"
	@echo "versions that differ from $(LOCK):"
	@$(LATEST_VENV)/bin/python -m pip freeze --all --exclude-editable | awk -F'==' \
	  'NR == FNR { if ($$0 !~ /^#/) lock[tolower($$1)] = $$2; next } \
	   (tolower($$1) in lock) && lock[tolower($$1)] != $$2 { print "  " $$1 ": " lock[tolower($$1)] " -> " $$2; n++ } \
	   END { if (!n) print "  none" }' $(LOCK) -
	$(LATEST_VENV)/bin/pytest -q -n 2 --dist loadfile --deselect tests/kit/test_call_count.py::test_python_calls_per_approval_turn_stay_within_five_percent_of_the_pin
	$(LATEST_VENV)/bin/python bench/calls.py --sides ours streamed
	@echo "the pin (measured on $(LOCK)): $$(cat bench/calls_pin.json | $(LATEST_VENV)/bin/python -c 'import json,sys; p=json.load(sys.stdin); print(p["ours"], p["streamed"])')"

# The lowest pydantic-ai the service supports: the one pydantic-ai-harness pins. `.venv-compat` holds it
# with the harness (the `compat` extra); PIP_CONSTRAINT holds the venvs the packaging tests make there too.
LOWEST_PYDANTIC_AI := 2.62.0
COMPAT_VENV := .venv-compat
COMPAT_CONSTRAINTS := $(CURDIR)/$(COMPAT_VENV)/constraints.txt
COMPAT_STAMP := $(COMPAT_VENV)/.installed

$(COMPAT_STAMP): pyproject.toml Makefile $(COMPAT_LOCK)
	test -x $(COMPAT_VENV)/bin/python || python3 -m venv $(COMPAT_VENV)
	printf 'pydantic-ai-slim==%s\npydantic-ai-harness==0.62.0\n' $(LOWEST_PYDANTIC_AI) > $(COMPAT_CONSTRAINTS)
	$(COMPAT_VENV)/bin/python -m pip install --quiet -c $(COMPAT_LOCK) --upgrade pip
	$(COMPAT_VENV)/bin/python -m pip install --quiet -c $(COMPAT_LOCK) -c $(COMPAT_CONSTRAINTS) -e ".[dev,compat]"
	$(COMPAT_VENV)/bin/python -c "import pydantic_ai_harness; from importlib.metadata import version; print('.venv-compat: pydantic-ai', version('pydantic-ai-slim'), 'with pydantic-ai-harness', version('pydantic-ai-harness'))"
	touch $(COMPAT_STAMP)

# What pydantic-ai's version changes: adopting an agent and driving it (its deps, output, tool results,
# capabilities, nested agents), and how a segment's error reaches the service. The rest of tests/agents
# and tests/attacks (MCP, providers, policy) runs in `make test`, on the newest pydantic-ai, and
# `make test-compat-all` runs it here too. The packaging tests (venvs of their own) run in make test;
# tests/packaging/test_wheel.py installs the wheel beside pydantic-ai-harness, hence on the lowest.
COMPAT_TESTS := tests/adoption tests/agents/test_adopted_agent.py tests/agents/test_agent_deps.py \
	tests/agents/test_pydantic_ai_features.py tests/agents/test_nested_agents.py \
	tests/attacks/test_forged_nested_arguments.py tests/unit/test_failure_classification.py \
	tests/agents/test_capability_tools.py tests/attacks/test_capability_tool_added_at_run_time.py \
	tests/agents/test_validated_args.py tests/unit/test_approved_args.py \
	tests/agents/test_tool_control_flow.py tests/agents/test_deps_state.py

test-compat: $(COMPAT_STAMP) ## the adoption tests on the lowest supported pydantic-ai, with pydantic-ai-harness (.venv-compat; part of .ci/run)
	PIP_CONSTRAINT=$(COMPAT_CONSTRAINTS) $(COMPAT_VENV)/bin/pytest -q -n 2 --dist loadfile -m "not slow and not packaging" $(COMPAT_TESTS)

test-compat-examples: $(COMPAT_STAMP) ## pydantic-ai's own examples served from a fresh venv on the lowest supported pydantic-ai (.venv-compat; not in .ci/run: make test serves them on the newest)
	PIP_CONSTRAINT=$(COMPAT_CONSTRAINTS) $(COMPAT_VENV)/bin/pytest -q -n 2 --dist loadfile -m packaging tests/adoption/test_upstream_examples.py

test-compat-all: $(COMPAT_STAMP) ## tests/adoption, tests/agents and tests/attacks on the lowest supported pydantic-ai (.venv-compat; not in .ci/run)
	PIP_CONSTRAINT=$(COMPAT_CONSTRAINTS) $(COMPAT_VENV)/bin/pytest -q -n 2 --dist loadfile -m "not slow and not packaging" tests/adoption tests/agents tests/attacks

MCP1_VENV := .venv-mcp1
MCP1_STAMP := $(MCP1_VENV)/.installed

$(MCP1_STAMP): pyproject.toml Makefile
	test -x $(MCP1_VENV)/bin/python || python3 -m venv $(MCP1_VENV)
	$(MCP1_VENV)/bin/python -m pip install --quiet -e ".[dev]" "mcp<2" "fastmcp-slim[client]<4"
	touch $(MCP1_STAMP)

test-mcp1: $(MCP1_STAMP) ## the service on the mcp 1.x SDK (FastMCP 3) with an mcp 1.x server beside it (.venv-mcp1; not in .ci/run)
	$(MCP1_VENV)/bin/pytest -q -m "not slow and not packaging" tests/agents/test_mcp_one_sdk.py

SOAK_KILLS ?= 1000
soak: $(STAMP) ## >= 1,000 SIGKILLs at every fault point on PostgreSQL (SURSIS_SOAK_PG_URL, created if missing; not part of make test)
	$(PY) -m tests.faults.soak --kills $(SOAK_KILLS)

ha-drill: $(STAMP) ## through PgBouncer (transaction mode), a Patroni failover, the same behind PgBouncer, a PostgreSQL restart, all under approval turns (installs patroni, etcd-server, pgbouncer when missing)
	@missing=""; for tool in /usr/bin/patroni /usr/bin/etcd /usr/sbin/pgbouncer; do test -x $$tool || missing=1; done; \
	if [ -n "$$missing" ]; then \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq patroni etcd-server pgbouncer; \
	fi
	$(PY) -m tests.faults.pooler_turns
	$(PY) -m tests.faults.ha_drill

lint: $(STAMP) ## ruff, mypy --strict, import-linter
	$(VENV)/bin/ruff check sursis tests examples $(wildcard bench)
	$(VENV)/bin/ruff format --check sursis tests examples $(wildcard bench)
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: $(STAMP) ## per-turn cost, resolve p50/p99, throughput, memory over 10,000 turns beside the memory floor (bench/memory_floor.py); tables and JSON lines
	$(PY) bench/bench.py
	$(PY) bench/round_trips.py
	$(PY) bench/events_burst.py
	$(PY) bench/world_memory.py
	$(PY) bench/memory.py

bench-calls: $(STAMP) ## Python function calls per approval turn (Sursis with stream off and on, the bare pydantic-ai loop, LangGraph), split by package: a count, the same on every machine
	$(PY) -m pip install --quiet -c $(LOCK) -e ".[dev,peers]"
	$(PY) bench/calls.py

bench-profile: $(STAMP) ## where an approval turn's CPU goes: a native sampling profile (py-spy) of the in-process turn on PostgreSQL, as a table by owner
	$(PY) -m pip install --quiet -c $(LOCK) -e ".[dev,peers]"
	$(PY) bench/profile_native.py

bench-peers: $(STAMP) ## the approval turn against LangGraph, pydantic-ai on DBOS, on pgtask and on Absurd, and LangGraph's Agent Server on its PostgreSQL runtime (installs redis-server when missing)
	@if [ ! -x /usr/bin/redis-server ]; then \
	  sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq redis-server; \
	fi
	$(PY) -m pip install --quiet -c $(LOCK) -e ".[dev,peers]"
	test -x .venv-agent-server/bin/python || python3 -m venv .venv-agent-server
	.venv-agent-server/bin/pip install --quiet -r bench/agent-server-requirements.txt
	test -x .venv-pgtask/bin/python || python3 -m venv .venv-pgtask
	.venv-pgtask/bin/pip install --quiet -r bench/pgtask-requirements.txt
	test -x .venv-absurd/bin/python || python3 -m venv .venv-absurd
	.venv-absurd/bin/pip install --quiet -r bench/absurd-requirements.txt
	$(PY) bench/peers.py

bench-durability: $(STAMP) ## runs/s with 1 and 4 worker processes, resolve-to-resume latency (PostgreSQL)
	$(PY) bench/durability.py

VOLUME_SCALE ?= 1
bench-volume: $(STAMP) ## a turn, the inbox, claims, the sweeper on a year of rows against an empty database (PostgreSQL; VOLUME_SCALE=0.1 for a quick run)
	$(PY) bench/volume.py --scale $(VOLUME_SCALE)

image-smoke: ## build the Docker image and run compose.yaml's layout against PostgreSQL (needs docker, jq)
	bash deploy/image-smoke.sh

clean: ## remove the venv and local databases
	rm -rf $(VENV) $(COMPAT_VENV) sursis.db sursis.db-wal sursis.db-shm
