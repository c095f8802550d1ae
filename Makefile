# acceltrial developer tasks. `make help` lists them; `make test` is what CI runs.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
TOOLS := .tools/bin
# One CRD per kind: AcceleratorTrial and TrainingTrial.
CRD_KINDS := AcceleratorTrial:acceleratortrials TrainingTrial:trainingtrials
CHART := charts/acceltrial
CHART_CRDS := $(CHART)/files/crds
PYTEST_ARGS ?=
JUNIT_DIR ?=
# Two tiers, every directory of tests/ in exactly one (tests/unit/test_test_tiers.py checks it):
# the inner loop needs no server at all; the rest needs the control plane built (the operator's
# tests run on the real one, the emulator only where Go is missing).
FAST_TESTS := tests/unit tests/chart tests/security tests/hostile
CLUSTER_TESTS := tests/cli tests/demo tests/faults tests/handlers tests/integration tests/kstatus tests/sandbox
# Build the control plane where go is (always in CI, where its absence fails the build).
define control_plane_if_go
@if command -v go >/dev/null || [ -n "$$CI" ]; then scripts/control-plane.sh; else \
	echo "no go command: tests of the real control plane will be skipped" >&2; fi
endef
# test-cluster runs its test files on this many pytest-xdist workers, a file to one worker, the
# slowest files first (tests/slowest-files.txt): its tests wait much of the time (steps, scrapes,
# kwok's pod stages), and a third worker fills the two cores where two left a quarter idle.
CLUSTER_WORKERS ?= 3
SCENARIO ?= promote
SPEED ?= 1

.PHONY: help demo demo-all prometheus setup tools lint format typecheck contracts crds verify-crds chart-lint pytest test \
	validate-examples api-docs verify-api-docs sandbox bench bench-faults clean control-plane \
	test-fast test-cluster

help: ## List every target with what it does.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The operator with every extra, then the test bed (testbed/, its own package: local control
# planes, the simulated fleet, the demo), which `pip install .` never installs.
$(INSTALLED): pyproject.toml testbed/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet -e testbed/
	@touch $@

demo: $(INSTALLED) tools ## Set up .venv, kubectl, helm and Prometheus, then run a complete trial locally (SCENARIO=promote).
	$(BIN)/acceltrial demo --scenario $(SCENARIO) --speed $(SPEED)

demo-all: $(INSTALLED) tools ## Run every scenario in examples/scenarios, one after another.
	@set -e; for scenario in $$(ls examples/scenarios/*.yaml | grep -v -e '/trial.yaml$$' -e '/training-trial.yaml$$'); do \
		$(BIN)/acceltrial demo --scenario $$scenario --speed $(SPEED); done

prometheus: ## Find or fetch Prometheus (PROMETHEUS_BIN, PATH, or Debian's package) into .tools/bin.
	@scripts/prometheus.sh

setup: $(INSTALLED) tools ## Create .venv with the operator, every extra and the test bed (testbed/), and the tools the tests run.

tools: $(INSTALLED) prometheus ## Put real kubectl v1.33, helm and Prometheus (with promtool) into .tools/bin.
	@PYTHON=$(BIN)/python scripts/kube-tools.sh

control-plane: ## Build the upstream kube-apiserver, controllers, scheduler, etcd and kwok into .tools/bin (Go 1.26).
	@scripts/control-plane.sh

lint: $(INSTALLED) ## Lint and check formatting with ruff.
	$(BIN)/ruff check operator testbed tests scripts bench
	$(BIN)/ruff format --check operator testbed tests scripts bench

format: $(INSTALLED) ## Format the code and apply safe lint fixes with ruff.
	$(BIN)/ruff format operator testbed tests scripts bench
	$(BIN)/ruff check --fix operator testbed tests scripts bench

typecheck: $(INSTALLED) ## Type-check the package with mypy --strict.
	$(BIN)/mypy

contracts: $(INSTALLED) ## Check the layering contracts with import-linter.
	$(BIN)/lint-imports

crds: $(INSTALLED) ## Regenerate crds/ and the chart's copy from the API models.
	@mkdir -p $(CHART_CRDS)
	@for pair in $(CRD_KINDS); do \
		file=acceltrial.dev_$${pair#*:}.yaml; \
		$(BIN)/acceltrial crd --kind $${pair%%:*} > crds/$$file && cp crds/$$file $(CHART_CRDS)/$$file \
			&& echo "crds/$$file and its chart copy"; \
	done

verify-crds: $(INSTALLED) ## Fail if crds/ or the chart's copy differ from the API models.
	@for pair in $(CRD_KINDS); do \
		file=acceltrial.dev_$${pair#*:}.yaml; \
		$(BIN)/acceltrial crd --kind $${pair%%:*} | diff -u crds/$$file - || \
			{ echo "crds/$$file is stale: run 'make crds' and commit the result" >&2; exit 1; }; \
		diff -u crds/$$file $(CHART_CRDS)/$$file || \
			{ echo "the chart's copy of $$file is stale: run 'make crds'" >&2; exit 1; }; \
	done
	@echo "CRDs match the models"

api-docs: $(INSTALLED) ## Regenerate docs/api.md and docs/api-training.md (the API references) from the models.
	$(BIN)/python -m acceltrial.api.reference > docs/api.md
	$(BIN)/python -m acceltrial.api.reference TrainingTrial > docs/api-training.md

verify-api-docs: $(INSTALLED) ## Fail if docs/api.md or docs/api-training.md differ from the models.
	@$(BIN)/python -m acceltrial.api.reference | diff -u docs/api.md - || \
		{ echo "docs/api.md is stale: run 'make api-docs'" >&2; exit 1; }
	@$(BIN)/python -m acceltrial.api.reference TrainingTrial | diff -u docs/api-training.md - || \
		{ echo "docs/api-training.md is stale: run 'make api-docs'" >&2; exit 1; }

chart-lint: tools ## Lint the Helm chart strictly and render it.
	$(TOOLS)/helm lint --strict $(CHART)
	$(TOOLS)/helm template acceltrial $(CHART) --namespace acceltrial-system \
		--kube-version 1.33.0 > /dev/null

validate-examples: $(INSTALLED) ## Validate every example trial offline.
	$(BIN)/acceltrial validate examples/*.yaml

pytest: setup ## Run the whole test suite in one pytest (PYTEST_ARGS='-m "not slow"' skips the slow tests).
	$(control_plane_if_go)
	$(BIN)/pytest $(PYTEST_ARGS)

test-fast: setup ## The inner loop (under 3 min): unit, engine, chart, security, hostile-input tests; no server, no build.
	$(BIN)/pytest $(FAST_TESTS) $(PYTEST_ARGS) $(if $(JUNIT_DIR),--junitxml=$(JUNIT_DIR)/junit-fast.xml)

test-cluster: setup ## The tests of a cluster, Prometheus or a demo; builds the control plane first when go is here.
	$(control_plane_if_go)
	$(BIN)/pytest -n $(CLUSTER_WORKERS) --dist loadfile --no-loadscope-reorder $(CLUSTER_TESTS) $(PYTEST_ARGS) \
		$(if $(JUNIT_DIR),--junitxml=$(JUNIT_DIR)/junit-cluster.xml)

test: ## Everything CI checks: lint, types, contracts, drift, chart, then test-fast while the control plane builds, then test-cluster.
	@scripts/test.sh

sandbox: $(INSTALLED) ## Serve a local cluster on 127.0.0.1:8001 (kubeconfig: ./sandbox.kubeconfig).
	$(BIN)/acceltrial sandbox up --port 8001 --kubeconfig sandbox.kubeconfig

bench: setup ## Run the benchmarks (short profiles): decisions, decisions at equal false rollbacks, quality detection, scale, one analysis, the sandbox.
	$(BIN)/python -m bench.decisions --quick
	$(BIN)/python -m bench.quality --quick
	$(BIN)/python -m bench.calibrated --quick
	$(BIN)/python -m bench.scale --quick
	$(BIN)/python -m bench.analysis
	$(BIN)/python -m bench.cluster

bench-faults: setup ## The fault suite's longer run: every fault kind 3 times (seeds 7, 8, 9), figures per kind.
	PATH=$(CURDIR)/$(TOOLS):$$PATH $(BIN)/python -m bench.faults --rounds 3 --seed 7 --parallel 3

clean: ## Remove the virtualenv, unpacked tools and caches.
	rm -rf $(VENV) .tools .mypy_cache .ruff_cache .pytest_cache .hypothesis .import_linter_cache
