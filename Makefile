# Loom developer and CI entry points (pydantic-core style: `make help` lists the targets).
.DEFAULT_GOAL := help
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

VENV := .venv
UV ?= $(shell command -v uv >/dev/null 2>&1 && echo uv || echo python3 -m uv)
CARGO_MANIFEST := ddlog-gen/Cargo.toml
EXAMPLE := ddlog-gen/examples/l2switch

.PHONY: help
help: ## Show this help
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*?## "}; {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

.PHONY: .uv
.uv: ## Make sure uv is installed (pip-installs it if missing)
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv

.PHONY: install
install: .uv ## Install system packages and the workspace (with the Rust extension, release) into .venv
	@# System packages: real ovsdb-server/ovs-vswitchd and ZooKeeper (fresh CI machines lack them),
	@# and jemalloc, which Loom's ovsdb-servers run with (loom_common.ovsdb.JEMALLOC); ethtool and
	@# iproute2 for the netdev sandbox's VMs (network namespaces, TX offload off); chromium, headless,
	@# for the web page's test; curl, which the README's tour uses (and its test runs).
	@# (Debian installs the OVS daemons in /usr/sbin, which a non-root PATH may lack.)
	@if { command -v ovsdb-server || [ -x /usr/sbin/ovsdb-server ]; } >/dev/null \
	    && { command -v ovs-vswitchd || [ -x /usr/sbin/ovs-vswitchd ]; } >/dev/null \
	    && compgen -G '/usr/lib/*/libjemalloc.so.2' >/dev/null \
	    && { command -v ethtool || [ -x /usr/sbin/ethtool ]; } >/dev/null && command -v ping >/dev/null \
	    && command -v chromium >/dev/null && command -v curl >/dev/null \
	    && { [ -e /usr/share/zookeeper/bin/zkServer.sh ] \
	         || compgen -G '/usr/share/java/zookeeper*.jar' >/dev/null; }; then :; else \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  export DEBIAN_FRONTEND=noninteractive; \
	  $$SUDO apt-get install -y --no-install-recommends openvswitch-switch zookeeper libjemalloc2 \
	       ethtool iproute2 iputils-ping chromium curl \
	  || { $$SUDO apt-get update && $$SUDO apt-get install -y --no-install-recommends \
	       openvswitch-switch zookeeper libjemalloc2 ethtool iproute2 iputils-ping chromium curl; }; \
	fi
	$(UV) sync --all-packages --locked

.PHONY: build-dev
build-dev: .uv ## Rebuild the Rust extension in place (release) after editing Rust code
	$(UV) run --no-sync sh -c "cd ddlog-gen && maturin develop --uv --release"

.PHONY: run
run: install ## Start the local deployment and the demo (4 simulated nodes, two tenants) until Ctrl-C
	$(VENV)/bin/loom up --demo $(LOOM_UP_ARGS)

.PHONY: example
example: install ## Run the example rule program on its script with loom-ddlog and print the result
	@echo "== $(EXAMPLE).dl  <  $(EXAMPLE).dat"
	$(VENV)/bin/loom-ddlog run $(EXAMPLE).dl < $(EXAMPLE).dat

.PHONY: bench-api
bench-api: install ## The API load benchmark (NVP workload, scale 0.1) against raw OVSDB writes
	$(VENV)/bin/loom-api-bench

.PHONY: bench-logical
bench-logical: install ## The logical controller benchmark (NVP workload, scale 0.1): cold start and port changes
	$(VENV)/bin/loom-logical-bench

.PHONY: bench-physical
bench-physical: install ## The physical benchmark: every hypervisor of the NVP workload (scale 0.1: 300) its own node, 2 controllers
	$(VENV)/bin/loom-physical-bench

.PHONY: openapi
openapi: ## Regenerate schemas/api/openapi.json from the API's collections and models
	$(VENV)/bin/python -m loom_api.openapi > schemas/api/openapi.json.tmp \
		|| { rm -f schemas/api/openapi.json.tmp; exit 1; }
	mv schemas/api/openapi.json.tmp schemas/api/openapi.json

.PHONY: rules
rules: ## Regenerate the rules' generated files: config.dl, universal.dl (the schemas), pipeline.dl and loom_universal.md's register table (the contract)
	$(VENV)/bin/python -m loom_logical.inputs > rules/logical/config.dl.tmp \
		|| { rm -f rules/logical/config.dl.tmp; exit 1; }
	mv rules/logical/config.dl.tmp rules/logical/config.dl
	$(VENV)/bin/python -m loom_physical.inputs > rules/physical/universal.dl.tmp \
		|| { rm -f rules/physical/universal.dl.tmp; exit 1; }
	mv rules/physical/universal.dl.tmp rules/physical/universal.dl
	for f in rules/logical/pipeline.dl rules/physical/pipeline.dl; do \
		$(VENV)/bin/python -m loom_schemas.pipeline > $$f.tmp || { rm -f $$f.tmp; exit 1; }; \
		mv $$f.tmp $$f; done
	$(VENV)/bin/python -m loom_schemas.pipeline --document schemas/loom_universal.md

.PHONY: format
format: ## Format Python and Rust code
	$(UV) run --no-sync ruff check --fix .
	$(UV) run --no-sync ruff format .
	cargo fmt --all --manifest-path $(CARGO_MANIFEST)

.PHONY: lint-python
lint-python: ## Lint Python (ruff check, ruff format --check)
	$(UV) run --no-sync ruff check .
	$(UV) run --no-sync ruff format --check .

.PHONY: lint-rust
lint-rust: ## Lint Rust (cargo fmt --check, clippy -D warnings)
	cargo fmt --all --manifest-path $(CARGO_MANIFEST) -- --check
	cargo clippy --manifest-path $(CARGO_MANIFEST) --workspace --all-targets -- -D warnings

.PHONY: lint
lint: lint-python lint-rust ## Lint everything

.PHONY: typecheck
typecheck: ## mypy (strict) and stubtest of the native module
	$(UV) run --no-sync mypy
	$(UV) run --no-sync mypy api-server/tests
	$(UV) run --no-sync mypy logical-controller/tests
	$(UV) run --no-sync python -m mypy.stubtest loom_ddlog._native

.PHONY: test-faults
test-faults: install ## The fault matrix alone (part of make test), each row's figures printed as JSON
	$(UV) run --no-sync pytest -s -p no:cacheprovider nvp-tests/tests/test_faults.py

.PHONY: test-rust
test-rust: ## cargo test, release
	cargo test --manifest-path $(CARGO_MANIFEST) --workspace --release

.PHONY: test-python
# Tests mostly wait on their daemons: two workers on two cores halve the suite's time. A
# file stays on one worker (its module fixtures are made once); each worker chooses listener
# ports from its own share (`loom_common.testing`).
PYTEST_WORKERS ?= 2

test-python: ## pytest on PYTEST_WORKERS workers (exit code 5, "no tests collected", counts as a failure)
	$(UV) run --no-sync pytest -n $(PYTEST_WORKERS) --dist loadfile

.PHONY: test-fast
test-fast: lint-python ## The inner loop, a few minutes: ruff, then the tests that need no daemon (not ovs, zk, system)
	$(UV) run --no-sync pytest -m "not ovs and not zk and not system"

.PHONY: test
test: install lint typecheck test-rust test-python ## Everything CI runs: install, lint, typecheck, cargo test, pytest last
