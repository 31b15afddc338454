# Stencil's one entry point for building and testing. `make test` is what CI runs.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

CARGO ?= cargo
TESTENV := tests/testenv
KUBECONFIG_RIG := $(CURDIR)/target/testenv/kubeconfig
STENCIL := target/debug/stencil

.PHONY: help
help: ## List the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-16s %s\n", $$1, $$2}'

.PHONY: test
test: lint unit golden integration ## Everything: fmt, clippy, unit, golden and rig tests

.PHONY: lint
lint: ## cargo fmt --check and clippy -D warnings
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --all-features --locked -- -D warnings

.PHONY: unit
unit: ## Unit tests (no cluster)
	$(CARGO) test --locked --workspace --lib --bins --features fault-injection

.PHONY: build
build: ## Build the stencil binary
	$(CARGO) build --locked --bin stencil

.PHONY: chart
chart: build ## Regenerate the chart's CRDs, editor schema, bundled operators and their RBAC, and the book's generated reference pages (tests fail when stale)
	$(STENCIL) crd > charts/stencil/crds/operatordefinitions.stencil.dev.yaml
	$(STENCIL) crd --compat metacontroller > charts/stencil/files/metacontroller-crds.yaml
	mkdir -p schemas charts/stencil/schemas
	$(STENCIL) schema > schemas/operatordefinition.schema.json
	cp schemas/operatordefinition.schema.json charts/stencil/schemas/
	$(STENCIL) schema --format markdown > docs/src/reference/operatordefinition.md
	$(STENCIL) commands-page > docs/src/reference/cli.md
	cp operators/*.yaml charts/stencil/operators/
	$(STENCIL) rbac --definitions operators/ --no-cluster-definitions --format values > charts/stencil/files/bundled-rbac.yaml

.PHONY: golden
golden: build ## Validate the bundled operators, run their golden cases, check the docs' snippets and links
	$(STENCIL) validate operators/
	$(STENCIL) test tests/golden
	$(CARGO) test --locked --test docs

.PHONY: integration
integration: ## Integration tests against the rig (or STENCIL_TEST_KUBECONFIG's cluster)
ifdef STENCIL_TEST_KUBECONFIG
	$(TESTENV)/build.sh kro
	$(CARGO) test --locked --features fault-injection --test '*'
	CARGO=$(CARGO) tests/faults/watch_faults.sh short
else
	$(TESTENV)/build.sh kro
	$(MAKE) --no-print-directory testenv-up
	status=0; STENCIL_TEST_KUBECONFIG=$(KUBECONFIG_RIG) $(CARGO) test --locked --features fault-injection --test '*' || status=$$?; \
	if [ $$status = 0 ]; then STENCIL_TEST_KUBECONFIG=$(KUBECONFIG_RIG) CARGO=$(CARGO) tests/faults/watch_faults.sh short || status=$$?; fi; \
	if [ $$status = 0 ]; then $(MAKE) --no-print-directory bench-smoke || status=$$?; fi; \
	$(MAKE) --no-print-directory testenv-down; exit $$status
endif

.PHONY: test-faults
test-faults: ## The whole fault suite: 3 min of fuzzing, every crash point, 5 s and 60 s API server outages, the scenarios (sharding's too) under each watch fault
	STENCIL_FUZZ_SECONDS=60 $(CARGO) test --locked --release -p stencil-core --lib fuzz -- --nocapture --test-threads=1
	$(MAKE) --no-print-directory testenv-up
	status=0; STENCIL_FAULTS=full STENCIL_TEST_KUBECONFIG=$(KUBECONFIG_RIG) \
	  $(CARGO) test --locked --features fault-injection --test faults --test apiserver_faults -- --nocapture || status=$$?; \
	STENCIL_TEST_KUBECONFIG=$(KUBECONFIG_RIG) CARGO=$(CARGO) tests/faults/watch_faults.sh full || status=$$?; \
	$(MAKE) --no-print-directory testenv-down; exit $$status

.PHONY: bench
bench: ## Benchmarks on the rig: BENCH_N (1000), BENCH_LATENCY_SAMPLES (200), BENCH_IDLE_SECONDS (300)
	$(CARGO) build --locked --release --bin stencil
	$(TESTENV)/build.sh kro
	$(MAKE) --no-print-directory testenv-up
	status=0; $(CARGO) bench --locked --bench rig || status=$$?; \
	$(MAKE) --no-print-directory testenv-down; exit $$status

.PHONY: bench-smoke
bench-smoke: build ## A tiny benchmark run (N=20) on a running rig, so the harness cannot rot
	BENCH_N=20 BENCH_LATENCY_SAMPLES=5 BENCH_IDLE_SECONDS=5 BENCH_RESYNC_SECONDS=10 BENCH_KRO=0 BENCH_DECORATE_OTHERS=50 \
	STENCIL_BIN=$(STENCIL) $(CARGO) test --locked --bench rig

.PHONY: docs
docs: ## Build the book (docs/) into target/book; installs mdBook with cargo if missing; fails on any warning
	@command -v mdbook >/dev/null || cargo install --locked mdbook
	@mkdir -p target
	@mdbook build docs > target/mdbook.log 2>&1; status=$$?; cat target/mdbook.log; \
	  test $$status -eq 0 && ! grep -Eiq 'warn|error' target/mdbook.log

.PHONY: testenv-build
testenv-build: ## Build (or reuse) the rig's pinned upstream binaries
	$(TESTENV)/build.sh

.PHONY: testenv-up
testenv-up: ## Start the rig; writes target/testenv/{kubeconfig,env}
	$(TESTENV)/up.sh

.PHONY: testenv-down
testenv-down: ## Stop every rig process and remove its state
	$(TESTENV)/down.sh

.PHONY: dev
dev: ## The main job: rig (unless KUBECONFIG is set), CRDs, stencil run on operators/, examples applied
	scripts/dev.sh
