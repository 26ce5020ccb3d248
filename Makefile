# Cowboy node — developer and CI entry points (GNU make).
#
# Everything runs from a project-local virtualenv (.venv) created with $(PY).
# `pip install -e '.[test]'` re-runs only when pyproject.toml is newer than the
# stamp file, so repeated `make test` / `make devnet` start immediately.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules

PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PIP_FLAGS := --disable-pip-version-check -q
FUZZ_SECONDS ?= 300
FUZZ_TRANSPORT_CASES ?= 100000
FUZZ_API_SECONDS ?= 600
SOAK_SECONDS ?= 600
DEVNET_HOME ?= ./devnet-home
TESTNET_DIR ?= ./testnet-home
TESTNET_VALIDATORS ?= 4
DEV_LOCK := requirements-dev.lock
RUNTIME_LOCK := requirements.lock
LOCK_VENV ?= .venv-lock
PIP_TOOLS_VERSION ?= 7.6.2
LOCK_FLAGS := --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links

.PHONY: help venv install lint typecheck test test-pythons devnet testnet testnet-stop testnet-start testnet-status fuzz fuzz-api bench soak clean distclean lock image compose-test

help: ## Show this help
	@echo "usage: make <target>   (PY=$(PY), VENV=$(VENV))"
	@grep -E '^[a-z][a-z0-9-]*:.*## ' $(firstword $(MAKEFILE_LIST)) | \
		awk 'BEGIN {FS = ":.*## "} {printf "  %-10s %s\n", $$1, $$2}'

$(VPY):
	@$(PY) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
		{ echo "error: $(PY) is not Python >= 3.11 (set PY=/path/to/python3.11)" >&2; exit 1; }
	@$(PY) -m venv $(VENV) || \
		{ echo "error: '$(PY) -m venv' failed (Debian/Ubuntu: apt-get install python3.11-venv)" >&2; exit 1; }

venv: $(VPY) ## Create the virtualenv .venv (if missing)

# Dependencies come only from the hashed lock (runtime + test extras, see `make lock`); the project itself is
# installed editable without resolving anything (--no-deps), so nothing unpinned enters the venv.
# pip's output (and the warnings a host's pip.conf can add) goes to a log, shown only when the install fails.
$(STAMP): pyproject.toml $(DEV_LOCK) | $(VPY)
	@echo "install: locked dependencies into $(VENV) (a few minutes the first time; log $(VENV)/install.log)"
	@{ $(VPY) -m pip install $(PIP_FLAGS) --require-hashes -r $(DEV_LOCK) && \
		$(VPY) -m pip install $(PIP_FLAGS) --no-deps -e .; } >$(VENV)/install.log 2>&1 || \
		{ tail -40 $(VENV)/install.log; echo "error: pip install failed (whole log: $(VENV)/install.log)" >&2; exit 1; }
	@touch $@

install: $(STAMP) ## Install the locked dependencies (requirements-dev.lock, hashes checked), then the project editable

# pip-tools runs from its own throwaway venv so it never changes what .venv holds. The dev lock (runtime + test) is
# resolved first, keeping every pin it already has unless UPGRADE=1; the runtime lock (the image's) is then
# constrained by it, so a package pinned in both has the same version and hashes in both.
lock: ## Regenerate requirements-dev.lock (runtime + test) and requirements.lock (runtime) with hashes; UPGRADE=1 takes new releases
	@test -x $(LOCK_VENV)/bin/pip-compile || { $(PY) -m venv $(LOCK_VENV) && \
		$(LOCK_VENV)/bin/pip install $(PIP_FLAGS) 'pip-tools==$(PIP_TOOLS_VERSION)'; }
	CUSTOM_COMPILE_COMMAND='make lock' $(LOCK_VENV)/bin/pip-compile $(LOCK_FLAGS) $(if $(filter 1,$(UPGRADE)),--upgrade) \
		--extra test -o $(DEV_LOCK) pyproject.toml
	CUSTOM_COMPILE_COMMAND='make lock' $(LOCK_VENV)/bin/pip-compile $(LOCK_FLAGS) -c $(DEV_LOCK) \
		-o $(RUNTIME_LOCK) pyproject.toml

lint: $(STAMP) ## ruff check
	@echo "make test [1/4] $$(date +%T) lint (ruff); the whole suite takes ~12 min on a quiet 2-core machine, 2-3x that loaded"
	$(VPY) -m ruff check .

typecheck: $(STAMP) ## mypy (packages and settings from pyproject.toml)
	@echo "make test [2/4] $$(date +%T) typecheck (mypy)"
	$(VPY) -m mypy

# Both halves run on TEST_WORKERS processes (pytest-xdist). The unit tests are pure CPU and share nothing. The
# integration and e2e tests start real nodes, runners and networks on loopback and mostly wait for blocks, so two
# of them side by side take about half the time; each module stays on one worker (--dist loadfile: its
# module-scoped node is started once) and every wait in them is bounded with margin for a loaded machine.
TEST_WORKERS ?= 2

test: lint typecheck ## lint + typecheck + the whole pytest suite (what .ci/run runs): unit tests, then the process tests, each on TEST_WORKERS workers
	@echo "make test [3/4] $$(date +%T) unit tests (tests/unit)"
	$(VPY) -m pytest -q -n $(TEST_WORKERS) tests/unit
	@echo "make test [4/4] $$(date +%T) process tests (real nodes, runners and networks: the long part)"
	$(VPY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile tests --ignore=tests/unit
	@echo "make test: passed $$(date +%T)"

# PVM version 1 on every CPython it is validated on (pvm/version.py VALIDATED_INTERPRETERS): a venv per
# interpreter (.venv-3.12 ...; from the hashed lock), the PVM and determinism tests under each, then the
# interpreter audit (0 actor-visible differences from 3.11, or it fails). An interpreter is found in
# ~/.pyenv/versions first, then on PATH (PYTHON_3.12=/path/to/python3.12 overrides).
TEST_PYTHONS ?= 3.11 3.12 3.13
PVM_TESTS := tests/unit/execution/pvm/test_pvm_*.py tests/unit/execution/test_determinism*.py \
	tests/unit/execution/actors/test_actors_determinism.py
python_for = $(or $(PYTHON_$(1)),$(lastword $(sort $(wildcard $(HOME)/.pyenv/versions/$(1).*/bin/python$(1)))),$(shell command -v python$(1) 2>/dev/null))

.venv-%/.installed-stamp: pyproject.toml $(DEV_LOCK)
	@test -n "$(call python_for,$*)" || { echo "error: no CPython $* (pyenv install $*, or PYTHON_$*=...)" >&2; exit 1; }
	$(call python_for,$*) -m venv .venv-$*
	.venv-$*/bin/python -m pip install $(PIP_FLAGS) --require-hashes -r $(DEV_LOCK)
	.venv-$*/bin/python -m pip install $(PIP_FLAGS) --no-deps -e .
	@touch $@

test-pythons: $(foreach v,$(TEST_PYTHONS),.venv-$(v)/.installed-stamp) ## PVM + determinism tests under each CPython in TEST_PYTHONS (3.11 3.12 3.13), then the interpreter audit (what .ci/run runs first)
	@for v in $(TEST_PYTHONS); do echo "== CPython $$v"; \
		.venv-$$v/bin/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) $(PVM_TESTS) || exit 1; done
	python3 scripts/pvm_interpreter_audit.py --check --examples 3 $(foreach v,$(TEST_PYTHONS),.venv-$(v)/bin/python)

test-sdk-e2e: $(STAMP) ## cowboy_sdk continuations end to end: a devnet node, a real runner (HTTP server + LLM stub), kill -9 mid-job, the README Quick Start (~2 min)
	COWBOY_SDK_E2E=1 $(VPY) -m pytest -q tests/integration/test_sdk_continuation_e2e.py

test-runner-ops: $(STAMP) ## runner executors end to end (issue 21): a real runner with an LLM stub answering 429 then OK, then unhealthy; podman-isolated custom programs (~80 s)
	COWBOY_RUNNER_OPS_E2E=1 $(VPY) -m pytest -q tests/integration/test_runner_llm_ops.py tests/unit/runner/test_runner_custom_container.py

devnet: $(STAMP) ## Start a local single-validator devnet (state in DEVNET_HOME=./devnet-home)
	DEVNET_HOME='$(DEVNET_HOME)' COWBOY_NODE='$(VENV)/bin/cowboy-node' bash deploy/devnet.sh

testnet: $(STAMP) ## Generate (if missing) and run a local TESTNET_VALIDATORS-validator network (default 4) in TESTNET_DIR=./testnet-home
	@if [ ! -e '$(TESTNET_DIR)/validator-0' ]; then \
		$(VENV)/bin/cowboy-node testnet --validators '$(TESTNET_VALIDATORS)' --output '$(TESTNET_DIR)' >/dev/null; \
		echo "testnet: generated $(TESTNET_VALIDATORS) validators in $(TESTNET_DIR) (summary: $(TESTNET_DIR)/testnet.json)"; \
	fi
	TESTNET_DIR='$(TESTNET_DIR)' COWBOY_NODE='$(VENV)/bin/cowboy-node' bash deploy/testnet.sh

testnet-stop: $(STAMP) ## Stop validator V of the running `make testnet` (e.g. make testnet-stop V=2)
	COWBOY_NODE='$(VENV)/bin/cowboy-node' bash deploy/testnet.sh stop '$(V)' '$(TESTNET_DIR)'

testnet-start: $(STAMP) ## Start validator V again under the running `make testnet` (its Ctrl-C stops it too)
	COWBOY_NODE='$(VENV)/bin/cowboy-node' bash deploy/testnet.sh start '$(V)' '$(TESTNET_DIR)'

testnet-status: $(STAMP) ## Each validator of TESTNET_DIR: running or not, and its consensus status
	COWBOY_NODE='$(VENV)/bin/cowboy-node' bash deploy/testnet.sh status '$(TESTNET_DIR)'

fuzz: $(STAMP) ## Fuzz the CBOR codec for FUZZ_SECONDS (default 300), then the CIP-11 frame decoder and sessions (>= 100,000 cases)
	$(VPY) tests/fuzz/fuzz_cbor.py --seconds $(FUZZ_SECONDS)
	$(VPY) tests/fuzz/fuzz_transport.py --cases $(FUZZ_TRANSPORT_CASES)

fuzz-api: $(STAMP) ## schemathesis against a live node on its /openapi.json for FUZZ_API_SECONDS (default 600): 0 findings, blocks throughout
	$(VPY) scripts/fuzz_api.py --seconds $(FUZZ_API_SECONDS) --workers 2

# Mutation testing (docs/testing.md): cosmic-ray lives in its own venv (like pip-tools for `make lock`), so it never
# changes what .venv holds; it mutates a copy of the tree under build/mutate/, never the working tree.
MUTATE_VENV ?= .venv-mutate
MUTATE_JOBS ?= 2
COSMIC_RAY_VERSION ?= 8.7.0
MODULE ?=

$(MUTATE_VENV)/bin/cosmic-ray:
	$(PY) -m venv $(MUTATE_VENV)
	$(MUTATE_VENV)/bin/pip install $(PIP_FLAGS) 'cosmic-ray==$(COSMIC_RAY_VERSION)'

.PHONY: mutate mutate-conformance
mutate: $(STAMP) $(MUTATE_VENV)/bin/cosmic-ray ## Mutation testing, one cosmic-ray session per module (MODULE=name, or `make mutate-<name>`, runs one; list: scripts/mutate.py --list)
	MUTATE_VENV=$(MUTATE_VENV) MUTATE_JOBS=$(MUTATE_JOBS) $(VPY) scripts/mutate.py $(MODULE)

mutate-conformance: $(STAMP) ## The named mutants of docs/conformance.md, each killed by its row's cited tests
	$(VPY) scripts/conformance_mutants.py

mutate-%: $(STAMP) $(MUTATE_VENV)/bin/cosmic-ray
	MUTATE_VENV=$(MUTATE_VENV) MUTATE_JOBS=$(MUTATE_JOBS) $(VPY) scripts/mutate.py $*

bench: $(STAMP) ## All benchmarks (each prints JSON with its same-run baseline)
	$(VPY) bench/chain_throughput.py
	$(VPY) bench/chain_throughput.py --validators 4
	$(VPY) bench/state_root.py
	$(VPY) bench/eob_timers.py
	$(VPY) bench/actor_workflow.py
	$(VPY) bench/dispatch.py
	$(VPY) bench/quic_echo.py
	$(VPY) bench/push_latency.py
	$(VPY) bench/push_latency.py --validators 4
	$(VPY) bench/heartbeat_cost.py
	$(VPY) bench/runner_capacity.py --pairs 4
	$(VPY) bench/runner_capacity.py --workers 1,1w,2 --runners 300 --client-procs 2
	$(VPY) bench/runner_capacity_chain.py --runners 300 --workers 2 --seconds 60
	$(VPY) bench/consensus.py
	$(VPY) bench/sdk_continuations.py
	$(VPY) bench/sdk_loop_continuations.py
	$(VPY) bench/cip1_scheduler.py
	$(VPY) bench/cip1_listing.py
	$(VPY) bench/mode_a_certificate.py
	$(VPY) bench/reconfig_admission.py
	$(VPY) bench/pvm_unicode.py
	$(VPY) bench/pvm_interrupt_cost.py
	$(VPY) bench/pvm_call_setup.py
	$(VPY) bench/follower_signatures.py
	$(VPY) bench/consensus_flood.py
	$(VPY) bench/consensus_scale.py
	$(VPY) bench/subscriptions.py
	$(VPY) bench/verified_reads.py
	$(VPY) bench/ui_snapshot.py
	$(VPY) bench/sync_catchup.py
	$(VPY) bench/p2p_lossy_link.py
	$(VPY) bench/disk_usage.py
	$(VPY) bench/join_time.py
	$(VPY) bench/derived_rebuild.py
	$(VPY) bench/mcp_client.py
	@echo "not run here: bench/qh3_echo.py (needs qh3 installed with --qh3-path), bench/soak.py (make soak), python -m bench.chain_throughput_network (an A/B: needs --base, a worktree of a baseline commit)"

soak: $(STAMP) ## Soak a real node for SOAK_SECONDS (default 600) under steady load; JSON with goal verdicts
	$(VPY) bench/soak.py --duration $(SOAK_SECONDS)

FAULTS_SECONDS ?= 25
FAULTS_SUMMARY ?= faults-under-load.jsonl
FAULTS_TMP ?= .e2e-faults-tmp
.PHONY: e2e-faults
e2e-faults: $(STAMP) ## Faults under load (issue 30 §5): 4 real validators, >= 300 transfers/s, kill -9 / SIGSTOP leader / wipe / partition / 100±50 ms + 5 % loss, FAULTS_SECONDS (25) each; JSON lines in FAULTS_SUMMARY, node logs kept in FAULTS_TMP (~7 min)
	rm -f '$(FAULTS_SUMMARY)'
	rc=0; FAULTS_FULL=1 FAULTS_SECONDS='$(FAULTS_SECONDS)' FAULTS_SUMMARY='$(FAULTS_SUMMARY)' \
		$(VPY) -m pytest -q -p no:cacheprovider --basetemp='$(FAULTS_TMP)' tests/e2e/test_network_faults_under_load.py || rc=$$?; \
		echo "--- $(FAULTS_SUMMARY) ---"; cat '$(FAULTS_SUMMARY)' 2>/dev/null || true; exit $$rc

SIM_SEEDS ?= 2000
.PHONY: sim mutation-consensus
sim: $(STAMP) ## Long deterministic consensus simulation: SIM_SEEDS (default 2000) seeds per scenario
	SIM_SEEDS=$(SIM_SEEDS) $(VPY) -m pytest -q -p no:cacheprovider --timeout=0 tests/unit/consensus/test_simplex_sim.py -k "not threshold_bls"

mutation-consensus: $(STAMP) ## Remove each consensus rule in turn (scripts/consensus_mutations.py); fails if its tests still pass
	$(VPY) scripts/consensus_mutations.py

clean: ## Remove caches and build artefacts (keeps .venv and devnet-home)
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean ## clean, and remove .venv too (devnet-home is never removed by make)
	rm -rf $(VENV) .venv-3.* *.egg-info

# Container image and compose testnet (docker or podman, whichever is installed; CONTAINER_ENGINE overrides).
CONTAINER_ENGINE ?= $(shell command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1 && echo docker || \
	(command -v podman >/dev/null 2>&1 && echo podman) || echo docker)
IMAGE ?= cowboy-node:local
BASE_IMAGE ?=

image: ## Build the node/runner image IMAGE (cowboy-node:local) with docker or podman; BASE_IMAGE=... overrides the pinned base
	$(CONTAINER_ENGINE) build $(if $(filter podman,$(CONTAINER_ENGINE)),--format docker) \
		$(if $(BASE_IMAGE),--build-arg BASE_IMAGE=$(BASE_IMAGE)) -t $(IMAGE) .

compose-test: ## Opt-in: build the image, bring up docker-compose.yml, check agreement and a settled demo job, tear down
	CONTAINER_ENGINE='$(CONTAINER_ENGINE)' IMAGE='$(IMAGE)' BASE_IMAGE='$(BASE_IMAGE)' bash deploy/compose/compose-test.sh
