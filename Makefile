# `make test` and `make demo` work from a fresh clone: they create .venv and install first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := clients/node/node_modules/.package-lock.json
MWP_PROTOCOL_ROOT ?= ../shared/mwp-0.1
export MWP_PROTOCOL_ROOT

.PHONY: install bytecode test lint typecheck unit conformance demo bench bench-group bench-floor bench-log bench-scheduler bench-agents bench-offer-floor bench-work-item-floor bench-gateway bench-agent-startup clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@# The Temporal UI test's browser: Debian's Chromium (Playwright never downloads one here).
	command -v chromium >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }
	touch $(STAMP)

# tests/integration/test_node_client.py needs the Node.js client's packages (it skips only where
# node is missing).
$(NODE_STAMP): clients/node/package-lock.json
	if command -v npm >/dev/null 2>&1; then cd clients/node && npm ci --no-audit --no-fund; fi

install: $(STAMP) $(NODE_STAMP)

# An editable install leaves the product's own modules uncompiled, and where the environment sets
# PYTHONDONTWRITEBYTECODE every process (each agent, each test's subprocess) compiles them again.
# Compiled once here, as a regular install would; it redoes only what changed.
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q mwp workflows activities workers

lint: $(STAMP)
	$(BIN)/ruff check mwp workflows activities workers tests benchmarks examples
	$(BIN)/ruff format --check mwp workflows activities workers tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy mwp examples

# Two workers, each with its own dev server (tests/integration/conftest.py), a file per worker
# at a time: about half the wall time on two cores. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2
unit: $(STAMP) $(NODE_STAMP) bytecode
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

conformance: $(STAMP)
	$(BIN)/mwp conformance --root $(MWP_PROTOCOL_ROOT)

test: lint typecheck unit conformance

demo: $(STAMP) bytecode
	$(BIN)/mwp demo

bench: $(STAMP)
	$(BIN)/python -m benchmarks.signed_documents

# Accepted Commands per second into one Group, on the embedded stack (about 3 minutes).
bench-group: $(STAMP)
	$(BIN)/python -m benchmarks.group_commands

# The Temporal work a Command needs in this design (child start or signal), without the protocol.
bench-floor: $(STAMP)
	$(BIN)/python -m benchmarks.group_floor

# Signed Group Event log: Events sealed and appended per second (folder, SeaweedFS S3) and replay.
bench-log: $(STAMP)
	$(BIN)/python -m benchmarks.event_log

# Worker Scheduler decision time: 1,000 Groups of 100 queued items (a few seconds).
bench-scheduler: $(STAMP)
	$(BIN)/python -m benchmarks.scheduler

# WorkItems completed per second end to end: 20 Missions, 5 in-process agent runtimes (about a minute).
bench-agents: $(STAMP)
	$(BIN)/python -m benchmarks.agent_runtime

# The Temporal hops and durable writes of one offer -> accepted, without protocol work (half a minute).
bench-offer-floor: $(STAMP)
	$(BIN)/python -m benchmarks.offer_floor

# The Temporal work of a WorkItem's whole life at bench-agents' scale, without protocol work
# (half a minute).
bench-work-item-floor: $(STAMP)
	$(BIN)/python -m benchmarks.work_item_floor

# The Group gateway: Events/s delivered to 100 subscribers, Command round trip against the
# direct Update (a few minutes).
bench-gateway: $(STAMP)
	$(BIN)/python -m benchmarks.gateway_delivery

# Agent and Coordinator processes: wall time and CPU until each serves, one at a time and the
# demo's six at once (about a minute).
bench-agent-startup: $(STAMP)
	$(BIN)/python -m benchmarks.agent_startup

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache .hypothesis clients/node/node_modules
