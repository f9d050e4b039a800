# exalsius-operator: one Go workspace, one module per deployable.
#
# The two commands for a fresh machine are `make run` and `make test`. `make help` lists every target.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

COMPONENTS := colony-controller workspace-controller inventory-collector webhook
MODULES := common $(COMPONENTS) e2e

TOOLS_BIN := $(shell hack/tools.sh bindir)
KUBEBUILDER_ASSETS ?= $(shell hack/tools.sh assets)
export KUBEBUILDER_ASSETS
export PATH := $(TOOLS_BIN):$(PATH)
CONTROLLER_GEN := $(TOOLS_BIN)/controller-gen

# Built component binaries live outside the repository too, next to the tools.
BIN_DIR ?= $(shell hack/tools.sh bindir)/../components
export EXALSIUS_BIN_DIR := $(abspath $(BIN_DIR))

CHART_DIR := charts/exalsius-operator
GO_TEST_FLAGS ?= -count=1 -timeout 20m

##@ General

.PHONY: help
help: ## List every target.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Main commands

.PHONY: run
run: tools build ## Start the local world: management cluster, child clusters, k0rdent simulator, all components, the quick start.
	cd e2e && go run ./cmd/localworld --bin-dir "$(EXALSIUS_BIN_DIR)" --repo-root "$(CURDIR)"

.PHONY: test
test: tools verify build test-unit test-chart test-e2e test-chaos-short ## Every module's unit and integration tests, chart checks, the e2e suite and the short chaos suite.

##@ Development

.PHONY: tools
tools: ## Build kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kubectl, kwok, helm, controller-gen and crd-ref-docs into the cache (once per machine).
	hack/tools.sh

.PHONY: generate
generate: ## Generate deepcopy code, CRDs, RBAC, the chart's copies of them and docs/api.md.
	hack/tools.sh controller-gen crd-ref-docs
	hack/generate.sh

.PHONY: verify
verify: ## Fail on generated-file drift, gofmt or go vet findings, broken Markdown links or examples that do not parse.
	hack/tools.sh controller-gen crd-ref-docs
	hack/verify.sh

.PHONY: build
build: ## Build every component binary into $(BIN_DIR).
	@mkdir -p "$(EXALSIUS_BIN_DIR)"
	@for c in $(COMPONENTS); do echo "[build] $$c"; (cd $$c && go build -o "$(EXALSIUS_BIN_DIR)/$$c" .); done

.PHONY: test-unit
test-unit: ## Unit and integration tests of every module but e2e (real API servers through envtest).
	@for m in common $(COMPONENTS); do echo "[test] $$m"; (cd $$m && go test $(GO_TEST_FLAGS) $$(go list ./... | grep -v /charttest)); done

.PHONY: test-chart
test-chart: ## Lint the umbrella chart, render it under default and CI values, check the objects and dry-run them on a real API server.
	hack/test-chart.sh

.PHONY: test-e2e
test-e2e: build ## End-to-end suites on the local world (k0rdent simulator, KWOK GPU nodes).
	cd e2e && go test $(GO_TEST_FLAGS) ./...

.PHONY: test-chaos-short
test-chaos-short: build ## The chaos suite, short: a few rounds of small rollouts with faults injected (part of `make test`; CHAOS_SEED replays).
	cd e2e && CHAOS=short go test -count=1 -timeout 30m -run '^TestChaos$$' -v ./chaos/

.PHONY: chaos
chaos: tools build ## The chaos suite, full: 20 rounds of 200-workspace rollouts with faults; figures into docs/benchmarks.md (CHAOS_SEED replays).
	cd e2e && CHAOS=full CHAOS_DOC="$(CURDIR)/docs/benchmarks.md" go test -count=1 -timeout 12h -run '^TestChaos$$' -v ./chaos/

.PHONY: bench
bench: tools ## Benchmarks that print speed and memory figures.
	@for m in common $(COMPONENTS); do (cd $$m && go test -run '^$$' -bench . -benchmem ./...); done

.PHONY: fuzz
fuzz: ## Run each fuzz test for a short while.
	hack/fuzz.sh

##@ Release

IMAGE_REGISTRY ?= ghcr.io/exalsius/exalsius-operator
IMAGE_TAG ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
CONTAINER_TOOL ?= docker
PLATFORMS ?= linux/amd64,linux/arm64
BUNDLE_NAMESPACE ?= exalsius-system
BUNDLE_KUBE_VERSION ?= v1.37.2

.PHONY: images
images: ## Build every component image (docker with BuildKit, or CONTAINER_TOOL=podman): IMAGE_REGISTRY/<component>:IMAGE_TAG.
	@command -v $(CONTAINER_TOOL) >/dev/null || { echo "[images] $(CONTAINER_TOOL) not found: install docker (or set CONTAINER_TOOL=podman)"; exit 1; }
	@for c in $(COMPONENTS); do echo "[images] $(IMAGE_REGISTRY)/$$c:$(IMAGE_TAG)"; \
	  DOCKER_BUILDKIT=1 $(CONTAINER_TOOL) build -f $$c/Dockerfile -t $(IMAGE_REGISTRY)/$$c:$(IMAGE_TAG) . || exit 1; done

.PHONY: images-push
images-push: ## Build and push multi-platform images (PLATFORMS) with docker buildx.
	@for c in $(COMPONENTS); do echo "[images] push $(IMAGE_REGISTRY)/$$c:$(IMAGE_TAG)"; \
	  $(CONTAINER_TOOL) buildx build --platform $(PLATFORMS) --push -f $$c/Dockerfile -t $(IMAGE_REGISTRY)/$$c:$(IMAGE_TAG) . || exit 1; done

.PHONY: bundle
bundle: ## Render dist/install.yaml (namespace, CRDs, RBAC, Deployments, webhook) from the chart with images tagged IMAGE_TAG.
	@[ -x "$(TOOLS_BIN)/helm" ] || { echo "[bundle] helm is missing: run 'make tools'"; exit 1; }
	@mkdir -p dist
	@{ printf -- '---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    app.kubernetes.io/part-of: exalsius-operator\n' "$(BUNDLE_NAMESPACE)"; \
	  "$(TOOLS_BIN)/helm" template exalsius-operator $(CHART_DIR) --namespace $(BUNDLE_NAMESPACE) --kube-version $(BUNDLE_KUBE_VERSION) \
	    $(foreach c,$(COMPONENTS),--set $(c).image.repository=$(IMAGE_REGISTRY)/$(c) --set $(c).image.tag=$(IMAGE_TAG)); } > dist/install.yaml
	@echo "[bundle] wrote dist/install.yaml ($$(grep -c '^kind:' dist/install.yaml) objects)"
