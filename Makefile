# custom-scheduler: kube-scheduler with our plugins.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

# Every go command here builds static, path-trimmed code: the binary, the envtest binaries and the
# tests then share one build cache instead of compiling the kube tree twice.
export CGO_ENABLED := 0
export GOFLAGS := -trimpath

VERSION ?= 0.1.0
KUBE_VERSION := $(shell go list -m -f '{{.Version}}' k8s.io/kubernetes)
GIT_COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
GIT_TREE_STATE ?= $(shell [ -z "$$(git status --porcelain --untracked-files=no 2>/dev/null)" ] && echo clean || echo dirty)
# The commit's date, not the clock: an unchanged tree links to the same binary and hits the build cache.
BUILD_DATE ?= $(shell git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || echo 1970-01-01T00:00:00Z)
# The Kubernetes version stays first (component-base derives the emulation version from it); ours is
# the build metadata.
GIT_VERSION := $(KUBE_VERSION)+custom-scheduler.$(VERSION)
VERSION_PKG := k8s.io/component-base/version
LDFLAGS := -s -w \
	-X $(VERSION_PKG).gitVersion=$(GIT_VERSION) \
	-X $(VERSION_PKG).gitMajor=1 \
	-X $(VERSION_PKG).gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION))) \
	-X $(VERSION_PKG).gitCommit=$(GIT_COMMIT) \
	-X $(VERSION_PKG).gitTreeState=$(GIT_TREE_STATE) \
	-X $(VERSION_PKG).buildDate=$(BUILD_DATE)

IMAGE ?= custom-scheduler
TAG ?= v$(VERSION)

BIN := $(CURDIR)/bin
ASSETS_DIR = $(CURDIR)/$(shell hack/envtest-assets.sh | tail -n 1)
TEST_TIMEOUT ?= 40m
# Extra flags for the playground, e.g. PLAYGROUND_FLAGS="--nodes=8 --exit-after=2m" or
# PLAYGROUND_FLAGS=--operator=kuberay (also kuberay-v1.5, training-operator, mpi-operator, kueue, jobset, trainer: docs/operators.md),
# or PLAYGROUND_FLAGS=--workload-api (the in-tree scheduling.k8s.io/v1beta1 gangs: docs/coscheduling/intree-api.md),
# or PLAYGROUND_FLAGS=--gpus (8 GPUs per node published through DRA ResourceSlices, and GPU gangs: examples/gpus),
# or PLAYGROUND_FLAGS=--example=disaggregated or --example=lws (a job of several roles, gang groups, in place of the
# sample workloads: examples/gang-groups, docs/coscheduling/gang-groups.md).
PLAYGROUND_FLAGS ?=
# Extra go test flags, e.g. TEST_FLAGS="-v -run TestScheduling".
TEST_FLAGS ?=
# Extra hack/bench.sh flags, e.g. BENCH_FLAGS="--reduced" or BENCH_FLAGS="--cases 'Basic BasicCustom' --reps 5".
BENCH_FLAGS ?=

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: ## Build bin/custom-scheduler (the same step the Dockerfile runs) and the kubectl plugin bin/kubectl-gang.
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/custom-scheduler ./cmd/custom-scheduler
	go build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-gang ./cmd/kubectl-gang

.PHONY: image
image: ## Build the container image (needs a Docker engine).
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE):$(TAG) .

.PHONY: generate
generate: ## Regenerate deepcopy code and CRD YAML (controller-gen), the PodGroup clientset, listers and informers (code-generator), and the alias component's configuration.
	hack/update-codegen.sh
	go run ./hack/aliasconfig/gen

##@ Run

.PHONY: run
run: build ## Start a local playground: etcd, kube-apiserver, kube-controller-manager, kwok nodes, custom-scheduler and sample workloads.
	@assets="$$(hack/envtest-assets.sh --all | tail -n 1)"; \
	go build -o $(BIN)/playground ./hack/playground; \
	exec $(BIN)/playground --assets "$$assets" --scheduler $(BIN)/custom-scheduler $(PLAYGROUND_FLAGS)

##@ Test

.PHONY: envtest
envtest: ## Build kube-apiserver, etcd and kube-controller-manager for the tests from the go.mod pins (skipped when built).
	@hack/envtest-assets.sh

.PHONY: test
test: build envtest ## Unit tests and, beside them, the integration tests against real apiservers (parallel shards). CI also runs test-race, chart-test, interop and bench-smoke.
	@mkdir -p $(BIN)/test-logs; \
	echo "unit tests: running beside the integration shards (output below when both end; log in $(BIN)/test-logs/unit.log)"; \
	go test $(TEST_FLAGS) $$(go list ./... | grep -v /test/integration) >$(BIN)/test-logs/unit.log 2>&1 & unit=$$!; \
	irc=0; $(MAKE) --no-print-directory test-integration || irc=$$?; \
	urc=0; wait $$unit || urc=$$?; \
	echo; echo "unit tests:"; grep -v 'no test files' $(BIN)/test-logs/unit.log || true; \
	if [ $$urc -ne 0 ]; then echo "unit tests: FAILED (exit $$urc)" >&2; fi; \
	if [ $$irc -ne 0 ]; then echo "integration tests: FAILED (exit $$irc)" >&2; fi; \
	[ $$urc -eq 0 ] && [ $$irc -eq 0 ]

# The integration package runs as INTEGRATION_SHARDS processes side by side, each with its own
# kube-apiserver and etcd (hack/test-integration.sh; tests balanced by hack/integration-durations.tsv).
# TEST_FLAGS may carry -v, -run and -skip. The soak runs under the race detector in test-race.
INTEGRATION_SHARDS ?= 4
.PHONY: test-integration
test-integration: build envtest ## Only the integration tests (parallel shards, INTEGRATION_SHARDS=4); TEST_FLAGS="-v -run TestX" narrows them.
	KUBEBUILDER_ASSETS="$(ASSETS_DIR)" CUSTOM_SCHEDULER_BINARY="$(BIN)/custom-scheduler" INTEGRATION_SHARDS=$(INTEGRATION_SHARDS) \
		hack/test-integration.sh -timeout $(TEST_TIMEOUT) -skip '^$(SOAK)$$' $(TEST_FLAGS)

.PHONY: test-all
test-all: test test-race chart-test ## Everything CI runs except interop and bench-smoke: make test, the race build with the soak, the chart tests.

# The race detector needs cgo; the shipped binaries stay static (CGO_ENABLED=0 above), the race
# build is for tests only. The soak (the scheduler in process, churned behind the fault proxy) runs
# here only: under the race detector it takes as long as without (about 95 s), and its race build
# about 4 minutes more on a warm cache.
SOAK := TestCoschedulingLifecycleSoak
.PHONY: test-race
test-race: envtest ## Run the unit tests and the gang soak under the race detector (needs a C compiler).
	CGO_ENABLED=1 go test -race $(TEST_FLAGS) $$(go list ./... | grep -v /test/)
	KUBEBUILDER_ASSETS="$(ASSETS_DIR)" CGO_ENABLED=1 go test -race $(TEST_FLAGS) -timeout $(TEST_TIMEOUT) -run '^$(SOAK)$$' ./test/integration/

# The Helm chart, dashboard and alert tests live in their own module (test/chart/go.mod), so Helm,
# Prometheus and the Grafana SDK never enter the scheduler's module graph.
CHART_TEST_DIR := test/chart

.PHONY: chart-test
chart-test: build envtest ## Helm chart tests: lint, drift from the kustomization, install into envtest and run; dashboard and alert queries against a live /metrics.
	cd $(CHART_TEST_DIR) && KUBEBUILDER_ASSETS="$(ASSETS_DIR)" CUSTOM_SCHEDULER_BINARY="$(BIN)/custom-scheduler" \
		go test $(TEST_FLAGS) -timeout $(TEST_TIMEOUT) ./...

# The operator interoperability tests live in their own module (test/interop/go.mod), so that
# scheduler-plugins' API types stay out of the scheduler's go.mod; the operators they run are pinned each
# in a module of its own (test/interop/tools/*/go.mod: their k8s.io v0.29-v0.33 graphs must not meet our
# v0.37 pins) and built from source into bin/interop/.
INTEROP_DIR := test/interop
INTEROP_BIN := $(BIN)/interop

.PHONY: interop-operators
interop-operators: ## Build KubeRay's ray-operator (v1.4.0 and v1.5.0), the Training Operator, the MPI Operator, Kueue, JobSet, Kubeflow Trainer v2 and LeaderWorkerSet from the pins in test/interop/tools/*/go.mod into bin/interop/.
	cd $(INTEROP_DIR)/tools/kuberay && go build -o $(INTEROP_BIN)/ray-operator github.com/ray-project/kuberay/ray-operator
	cd $(INTEROP_DIR)/tools/kuberay-v1.5 && go build -o $(INTEROP_BIN)/ray-operator-v1.5 github.com/ray-project/kuberay/ray-operator
	cd $(INTEROP_DIR)/tools/training-operator && go build -o $(INTEROP_BIN)/training-operator github.com/kubeflow/training-operator/cmd/training-operator.v1
	cd $(INTEROP_DIR)/tools/mpi-operator && go build -o $(INTEROP_BIN)/mpi-operator github.com/kubeflow/mpi-operator/cmd/mpi-operator
	cd $(INTEROP_DIR)/tools/kueue && go build -o $(INTEROP_BIN)/kueue sigs.k8s.io/kueue/cmd/kueue
	cd $(INTEROP_DIR)/tools/jobset && go build -o $(INTEROP_BIN)/jobset sigs.k8s.io/jobset
	cd $(INTEROP_DIR)/tools/trainer && go build -o $(INTEROP_BIN)/trainer-controller-manager github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager
	cd $(INTEROP_DIR)/tools/lws && go build -o $(INTEROP_BIN)/lws sigs.k8s.io/lws/cmd

.PHONY: interop
interop: build envtest interop-operators ## Operator interoperability tests: KubeRay (v1.4.0, and v1.5.0 with the alias profile), the Training Operator, the MPI Operator, Kueue, JobSet and Kubeflow Trainer v2 run against envtest with custom-scheduler as shipped; our PodGroup CRD checked a superset of scheduler-plugins'.
	cd $(INTEROP_DIR) && KUBEBUILDER_ASSETS="$(ASSETS_DIR)" CUSTOM_SCHEDULER_BINARY="$(BIN)/custom-scheduler" INTEROP_BIN_DIR="$(INTEROP_BIN)" \
		go test $(TEST_FLAGS) -timeout $(TEST_TIMEOUT) ./...

# The playground end to end (TestPlaygroundGPUs: `make run PLAYGROUND_FLAGS=--gpus`, its GPU gangs bound
# whole; TestPlaygroundTrainer: `make run PLAYGROUND_FLAGS=--operator=trainer`, its TrainJob bound whole);
# it needs kwok, so it has its own target. The Trainer test builds JobSet and Trainer from their pins
# like `make interop-operators` (seconds once built, 10 to 30 minutes the first time).
.PHONY: test-playground
test-playground: build ## Run the playground with --gpus (kwok nodes, DRA ResourceSlices) and with --operator=trainer (JobSet, Kubeflow Trainer v2), and check their gangs are bound whole.
	@assets="$$(hack/envtest-assets.sh --all | tail -n 1)"; \
	PLAYGROUND_ASSETS="$(CURDIR)/$$assets" CUSTOM_SCHEDULER_BINARY="$(BIN)/custom-scheduler" \
		go test $(TEST_FLAGS) -timeout 30m -run '^TestPlayground(GPUs|Trainer)$$' ./hack/playground

.PHONY: test-unit
test-unit: ## Run unit tests only.
	go test $$(go list ./... | grep -v /test/)

.PHONY: lint
lint: ## go vet (every module) and a gofmt check.
	go vet ./...
	cd $(CHART_TEST_DIR) && go vet ./...
	cd $(INTEROP_DIR) && go vet ./...
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: verify
verify: lint ## lint, plus generated code and the replace block are up to date.
	hack/verify.sh

##@ Benchmarks

.PHONY: bench
bench: envtest ## scheduler_perf benchmarks at full size (1000 nodes, 3 repetitions; about an hour) and the summary table.
	hack/bench.sh $(BENCH_FLAGS)

.PHONY: bench-gang-groups
bench-gang-groups: build envtest ## Jobs of three roles under a gang CompositePodGroup: custom-scheduler against in-tree kube-scheduler's own composite cycle (gates on), on a real apiserver serving v1alpha3 (about 5 minutes).
	KUBEBUILDER_ASSETS="$(ASSETS_DIR)" CUSTOM_SCHEDULER_BINARY="$(BIN)/custom-scheduler" hack/bench-gang-groups.sh

.PHONY: bench-smoke
bench-smoke: envtest ## Every benchmark workload at a tiny size, once (CI runs it so the harness keeps working).
	go vet -tags bench ./test/bench/...
	hack/bench.sh --smoke $(BENCH_FLAGS)

##@ Housekeeping

.PHONY: clean
clean: ## Remove built binaries (keeps envtest assets; `rm -rf bin` removes those too).
	rm -f $(BIN)/custom-scheduler
	rm -rf $(INTEROP_BIN)
