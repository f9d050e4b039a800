# exalsius-operator: one Go workspace, one module per deployable.
#
# The two commands for a fresh machine are `make run` and `make test`. `make help` lists every target.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

# The components, one a line in common/components/names (the one list; Go code reads it as components.Names).
COMPONENTS := $(shell cat common/components/names)
# The kubectl plugin: its own module and binary, released as archives (not an image, not in the chart).
PLUGIN := kubectl-exalsius
MODULES := common $(COMPONENTS) $(PLUGIN) e2e

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
# The module test runs (test-unit, test-unit-real-crds, test-oldest-kube) hand every module's packages
# to one `go test` from the go.work root, GO_TEST_P test binaries at a time, the workspace-controller's
# first since its workspace package is the longest. One module after another left more than half of
# two cores idle while the colony-controller's, the inventory-collector's and common's suites waited
# on their API servers and watches; side by side, three at a time keeps both cores busy (the unit run
# went from 839 s to 611 s on a 2-core machine; docs/LOCAL_WORLD.md).
GO_TEST_P ?= 3
UNIT_MODULES := workspace-controller $(filter-out workspace-controller,common $(COMPONENTS)) $(PLUGIN)
UNIT_PATTERNS := $(foreach m,$(UNIT_MODULES),./$(m)/...)
# The packages whose tests start API servers (they import the testenv package), as folders from the
# go.work root; the runs against k0rdent's real CRDs and the oldest Kubernetes run these.
ENVTEST_PACKAGES = $$(grep -rl --include='*_test.go' 'exalsius-operator/common/testing/testenv"' $(1) | xargs -r -n1 dirname | awk '!seen[$$0]++' | grep -v /charttest | sed 's|^|./|')
# The e2e suites are one package whose features run one after another on one local world: about 18
# minutes alone on two cores, and more on a loaded machine, so they get a package timeout of their own.
E2E_TEST_FLAGS ?= -count=1 -timeout 45m

##@ General

.PHONY: help
help: ## List every target.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Main commands

.PHONY: run
# The local worlds are built, then run, not `go run`: an interrupted `go run` exits 1 whatever the program
# does, and make then reports Ctrl-C, a clean stop, as "Error 1".
run: tools build ## Start the local world: management cluster, child clusters, k0rdent simulator, all components, the quick start.
	@cd e2e && go build -o "$(EXALSIUS_BIN_DIR)/localworld" ./cmd/localworld
	cd e2e && exec "$(EXALSIUS_BIN_DIR)/localworld" --bin-dir "$(EXALSIUS_BIN_DIR)" --repo-root "$(CURDIR)"

.PHONY: run-chart
run-chart: tools ## The local world with a real node (containerd, kubelet, kube-proxy; root), the chart installed with helm from the project's images, the quick start (RUN_CHART_FLAGS=--exit stops once it runs).
	hack/node-deps.sh
	hack/tools.sh node
	hack/images.sh
	@mkdir -p "$(EXALSIUS_BIN_DIR)" && cd e2e && go build -o "$(EXALSIUS_BIN_DIR)/chartworld" ./cmd/chartworld
	cd e2e && exec "$(EXALSIUS_BIN_DIR)/chartworld" --repo-root "$(CURDIR)" $(RUN_CHART_FLAGS)

.PHONY: test
test: tools verify build test-unit test-unit-real-crds test-oldest-kube test-chart test-e2e test-chaos-short test-images test-node ## Every module's unit and integration tests, chart checks, the e2e suites, the short chaos suite, the images and the chart on a real node (skipped, saying why, where the host cannot run containers; plus the controller suites against K0RDENT_CRDS when set, and against the oldest supported Kubernetes).

##@ Development

.PHONY: tools
tools: ## Build kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kubectl, kwok, helm, promtool, controller-gen, crd-ref-docs, actionlint and golangci-lint into the cache (once per machine).
	hack/tools.sh

.PHONY: generate
generate: ## Generate deepcopy code, CRDs, RBAC, the chart's copies of them and docs/api.md.
	hack/tools.sh controller-gen crd-ref-docs
	hack/generate.sh

.PHONY: verify
verify: ## Fail on generated-file drift, gofmt, go vet or golangci-lint findings, broken Markdown links or examples that do not parse.
	hack/tools.sh controller-gen crd-ref-docs golangci-lint
	hack/verify.sh

.PHONY: build
build: ## Build every component binary and the kubectl plugin (kubectl-exalsius) into $(BIN_DIR).
	@mkdir -p "$(EXALSIUS_BIN_DIR)"
	@for c in $(COMPONENTS) $(PLUGIN); do echo "[build] $$c"; (cd $$c && go build -o "$(EXALSIUS_BIN_DIR)/$$c" .); done

.PHONY: test-unit
test-unit: ## Unit and integration tests of every module but e2e (real API servers through envtest), the modules' packages side by side.
	@pkgs=$$(go list $(UNIT_PATTERNS) | grep -v /charttest); start=$$(date +%s); \
	echo "[test] $(UNIT_MODULES): $$(echo $$pkgs | wc -w) packages, $(GO_TEST_P) at a time"; \
	env -u K0RDENT_CRDS go test $(GO_TEST_FLAGS) -p $(GO_TEST_P) $$pkgs; \
	echo "[test] the unit run took $$(( $$(date +%s) - start ))s"

# K0RDENT_CRDS=<folder of KCM's own CRD files> runs the controller suites once more with k0rdent's real
# CRDs instead of the project's mirror (common/testing/testenv installs them); unset, that run is skipped.
# Several folders, separated by spaces (one KCM release each), run the suites once per folder.
# test-unit and test-e2e always use the mirror, so both schemas are tested.
K0RDENT_CRDS ?=

# The oldest-Kubernetes run (test-oldest-kube) installs k0rdent's real CRDs from this folder, the first
# of K0RDENT_CRDS (KCM's newest general release, as .ci/run lists them), or the mirror when it is empty:
# a platform team on an old management cluster runs a general release. Inside `make test` the
# real-CRD run then skips that folder, which the oldest-Kubernetes run has covered, so the suites run
# once per KCM schema and once per Kubernetes end, not once per pair (a pair of runs is about a
# quarter of a cold `make test`).
OLDEST_KUBE_CRDS ?= $(firstword $(K0RDENT_CRDS))
REAL_CRDS_RUNS ?= $(K0RDENT_CRDS)
test: REAL_CRDS_RUNS = $(filter-out $(OLDEST_KUBE_CRDS),$(K0RDENT_CRDS))

.PHONY: test-unit-real-crds
test-unit-real-crds: ## The packages whose tests start API servers, once more against k0rdent's real CRDs, once per folder (K0RDENT_CRDS="<folder> ..."; within `make test`, all but OLDEST_KUBE_CRDS, which test-oldest-kube runs).
	@if [ -z "$(strip $(K0RDENT_CRDS))" ]; then echo "[test] K0RDENT_CRDS is not set: the run against k0rdent's real CRDs is skipped"; exit 0; fi; \
	if [ -z "$(strip $(REAL_CRDS_RUNS))" ]; then echo "[test] $(OLDEST_KUBE_CRDS): run by test-oldest-kube, against the oldest supported Kubernetes"; exit 0; fi; \
	pkgs=$(call ENVTEST_PACKAGES,$(filter-out $(PLUGIN),$(UNIT_MODULES))); \
	for crds in $(abspath $(REAL_CRDS_RUNS)); do \
	  [ -d "$$crds" ] || { echo "[test] K0RDENT_CRDS: $$crds is not a folder"; exit 1; }; \
	  start=$$(date +%s); \
	  echo "[test] $$(echo $$pkgs | wc -w) packages of $(filter-out $(PLUGIN),$(UNIT_MODULES)) against k0rdent's real CRDs in $$crds, $(GO_TEST_P) at a time"; \
	  K0RDENT_CRDS="$$crds" go test $(GO_TEST_FLAGS) -p $(GO_TEST_P) $$pkgs || exit 1; \
	  echo "[test] the run against $$crds took $$(( $$(date +%s) - start ))s"; \
	done

# The packages whose tests start API servers, once more against the oldest Kubernetes a management
# cluster may run (OLDEST_KUBE_VERSION in hack/tools.sh; docs/supported-versions.md). The API server
# is built the way `make tools` builds the others, into an assets folder of its own.
.PHONY: test-oldest-kube
test-oldest-kube: ## The packages whose tests start API servers, once more against the oldest supported management-cluster Kubernetes (its API server built into the cache on first use), with OLDEST_KUBE_CRDS (default the first K0RDENT_CRDS folder, else the mirror).
	@hack/tools.sh oldest
	@assets=$$(hack/tools.sh assets-oldest); start=$$(date +%s); \
	crds="$(abspath $(OLDEST_KUBE_CRDS))"; \
	if [ -n "$$crds" ]; then [ -d "$$crds" ] || { echo "[test] OLDEST_KUBE_CRDS: $$crds is not a folder"; exit 1; }; fi; \
	pkgs=$(call ENVTEST_PACKAGES,$(UNIT_MODULES)); \
	echo "[test] $$(echo $$pkgs | wc -w) packages of $(UNIT_MODULES) against the API server in $$assets, with $${crds:-the k0rdent mirror of the project}, $(GO_TEST_P) at a time"; \
	if [ -n "$$crds" ]; then K0RDENT_CRDS="$$crds" KUBEBUILDER_ASSETS="$$assets" go test $(GO_TEST_FLAGS) -p $(GO_TEST_P) $$pkgs || exit 1; \
	else env -u K0RDENT_CRDS KUBEBUILDER_ASSETS="$$assets" go test $(GO_TEST_FLAGS) -p $(GO_TEST_P) $$pkgs || exit 1; fi; \
	echo "[test] the run against the oldest supported Kubernetes took $$(( $$(date +%s) - start ))s"

.PHONY: test-chart
# test-chart (and test-node) run the chart against the first of the K0RDENT_CRDS folders (the newest
# general release, as .ci/run lists them), since a management API server loads one set of CRDs.
test-chart: ## Lint the umbrella chart, render it under default and CI values, check the objects and dry-run them on a real API server, and unit-test its alerts with promtool.
	K0RDENT_CRDS="$(firstword $(K0RDENT_CRDS))" hack/test-chart.sh

# test-e2e leaves out the packages that have their own targets (the chaos suite: test-chaos-short and
# chaos; the chart on a node: test-node): run here they would only skip, and a skipped package still
# prints "ok".
.PHONY: test-e2e
test-e2e: build ## End-to-end suites on the local world (k0rdent simulator, KWOK GPU nodes).
	cd e2e && env -u K0RDENT_CRDS go test $(E2E_TEST_FLAGS) $$(go list ./... | grep -v -e '/e2e/chaos$$' -e '/e2e/suites/chartnode$$')

.PHONY: test-node
test-node: ## The chart installed with helm on a real node (docs/NODE.md; part of `make test`); says loudly why and skips where the host cannot run containers.
	K0RDENT_CRDS="$(firstword $(K0RDENT_CRDS))" hack/test-node.sh

# make test runs the short chaos suite with a fixed seed, so that a red run can be replayed exactly and
# a green one means the same faults at the same moments; `make chaos` draws a new seed each time.
CHAOS_SHORT_SEED ?= 1796129239489346714

.PHONY: test-chaos-short
test-chaos-short: build ## The chaos suite, short: a few rounds of small rollouts with faults injected (part of `make test`, with a fixed seed unless CHAOS_SEED is set).
	cd e2e && CHAOS=short CHAOS_SEED=$${CHAOS_SEED:-$(CHAOS_SHORT_SEED)} env -u K0RDENT_CRDS go test -count=1 -timeout 30m -run '^TestChaos$$' -v ./chaos/

.PHONY: chaos
chaos: tools build ## The chaos suite, full: 20 rounds of 200-workspace rollouts with faults; figures into docs/benchmarks.md (CHAOS_SEED replays).
	cd e2e && CHAOS=full CHAOS_DOC="$(CURDIR)/docs/benchmarks.md" go test -count=1 -timeout 12h -run '^TestChaos$$' -v ./chaos/

# BENCH_FLAGS passes flags to the admission benchmark (e2e/cmd/bench), e.g. --sizes=1,100 --clusters=1
# --classes=cpu --idle=10s for a quick run; K0RDENT_CRDS=<folder> runs it on k0rdent's real CRDs.
BENCH_FLAGS ?=

.PHONY: bench
bench: tools build ## The modules' Go benchmarks (the inventory one among them), then workspace admission at scale against the built workspace-controller; rewrites its section of docs/benchmarks.md (not part of `make test`).
	@load=$$(cut -d' ' -f1-3 /proc/loadavg); out=$$(mktemp); 	for m in common $(COMPONENTS); do (cd $$m && go test -run '^$$' -bench . -benchmem ./...) || exit 1; done | tee "$$out"; 	cd e2e && go run ./cmd/bench --bin "$(EXALSIUS_BIN_DIR)/workspace-controller" --doc "$(CURDIR)/docs/benchmarks.md" \
	  --go-bench-output "$$out" --start-load "$$load" $(BENCH_FLAGS)

# The child-cluster cache against Cluster API's ClusterCache (e2e/clustercachebench, a module outside
# go.work): one process per cache and identity mode, so that each resident set belongs to one cache.
# CLUSTERCACHE_BENCH_CLUSTERS=20 CLUSTERCACHE_BENCH_NODES=10 makes a quick run (defaults 200 and 50).
.PHONY: bench-clustercache
bench-clustercache: tools ## The project's child-cluster cache against Cluster API's ClusterCache on the same child API servers, four runs (docs/design/child-cluster-cache.md; not part of `make test` or `make bench`).
	@cd e2e/clustercachebench && for cache in childcluster clustercache; do for ids in shared distinct; do \
	  GOWORK=off go test -count=1 -run '^$$' -bench "^BenchmarkCaches$$/^$$cache$$/^$$ids$$" -benchtime 1x -timeout 30m . || exit 1; \
	done; done

# BENCH_ENVELOPE_FLAGS passes flags to the scale envelope, e.g. --workspaces=500 --clusters=20 for a quick run.
BENCH_ENVELOPE_FLAGS ?=

.PHONY: bench-envelope
bench-envelope: tools build ## The scale envelope: 10,000 workspaces over 200 clusters (shared child API servers), child changes, the webhook at that size; rewrites its section of docs/benchmarks.md (not part of `make test`).
	load=$$(cut -d' ' -f1-3 /proc/loadavg); cd e2e && go run ./cmd/bench --envelope --start-load "$$load" --bin "$(EXALSIUS_BIN_DIR)/workspace-controller" --webhook-bin "$(EXALSIUS_BIN_DIR)/webhook" \
	  --repo-root "$(CURDIR)" --doc "$(CURDIR)/docs/benchmarks.md" --workspaces 10000 --clusters 200 $(BENCH_ENVELOPE_FLAGS)

.PHONY: fuzz
fuzz: ## Run each fuzz test for a short while.
	hack/fuzz.sh

##@ Release

# The version lives in one place, the chart's Chart.yaml (version and appVersion, which must agree);
# the images are tagged with it and the chart's default image tag is its appVersion.
CHART_VERSION := $(shell sed -n 's/^version: *//p' $(CHART_DIR)/Chart.yaml)
IMAGE_REGISTRY ?= ghcr.io/exalsius/exalsius-operator
IMAGE_TAG ?= $(CHART_VERSION)
PLATFORMS ?= linux/$(shell go env GOARCH)
BUNDLE_NAMESPACE ?= exalsius-system
BUNDLE_KUBE_VERSION ?= v1.37.2
export IMAGE_REGISTRY IMAGE_TAG PLATFORMS

.PHONY: images
images: ## Build the four component images without a container engine: dist/images/<component>.tar (OCI layouts, PLATFORMS), named IMAGE_REGISTRY/<component>:IMAGE_TAG.
	hack/images.sh

.PHONY: images-push
images-push: ## Build and push multi-platform images (PLATFORMS=linux/amd64,linux/arm64) to IMAGE_REGISTRY/<component>:IMAGE_TAG.
	hack/images.sh --push

.PHONY: test-images
test-images: images ## Build the images, then check their names (the chart's references), configs, reproducibility, the pause image, each binary's --help, their SBOMs, and the release sign/verify commands (part of `make test`).
	cd hack/imagebuild && GOWORK=off EXALSIUS_IMAGES_DIR="$(CURDIR)/dist/images" EXALSIUS_IMAGES_VERSION="$(CHART_VERSION)" \
	  EXALSIUS_IMAGES_REGISTRY="$(IMAGE_REGISTRY)" EXALSIUS_IMAGES_TAG="$(IMAGE_TAG)" go test $(GO_TEST_FLAGS) ./...

.PHONY: bundle
bundle: ## Render dist/install.yaml (namespace, CRDs, RBAC, Deployments, webhook) from the chart with images tagged IMAGE_TAG.
	@[ -x "$(TOOLS_BIN)/helm" ] || { echo "[bundle] helm is missing: run 'make tools'"; exit 1; }
	@mkdir -p dist
	@{ printf -- '---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    app.kubernetes.io/part-of: exalsius-operator\n' "$(BUNDLE_NAMESPACE)"; \
	  "$(TOOLS_BIN)/helm" template exalsius-operator $(CHART_DIR) --skip-tests --namespace $(BUNDLE_NAMESPACE) --kube-version $(BUNDLE_KUBE_VERSION) \
	    $(foreach c,$(COMPONENTS),--set $(c).image.repository=$(IMAGE_REGISTRY)/$(c) --set $(c).image.tag=$(IMAGE_TAG)); } > dist/install.yaml
	@echo "[bundle] wrote dist/install.yaml ($$(grep -c '^kind:' dist/install.yaml) objects)"

.PHONY: chart-package
chart-package: ## Package the chart into dist/exalsius-operator-<version>.tgz.
	@[ -x "$(TOOLS_BIN)/helm" ] || { echo "[chart] helm is missing: run 'make tools'"; exit 1; }
	@mkdir -p dist
	"$(TOOLS_BIN)/helm" package $(CHART_DIR) --destination dist

# A release builds its images for every platform the release workflow publishes (pure Go cross-builds),
# and the kubectl plugin's archives for PLUGIN_PLATFORMS.
RELEASE_PLATFORMS ?= linux/amd64,linux/arm64
PLUGIN_PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64

.PHONY: release
release: ## Prepare release VERSION=x.y.z [SIGNING_KEY=key.pem]: chart version, CHANGELOG entry, bundle, chart package, images (RELEASE_PLATFORMS), kubectl plugin archives (PLUGIN_PLATFORMS), SBOMs, SHA256SUMS, signatures, then release-verify's checks.
	@[ -n "$(VERSION)" ] || { echo "[release] usage: make release VERSION=x.y.z [SIGNING_KEY=key.pem]"; exit 1; }
	PLATFORMS="$(RELEASE_PLATFORMS)" PLUGIN_PLATFORMS="$(PLUGIN_PLATFORMS)" SIGNING_KEY="$(SIGNING_KEY)" hack/release.sh "$(VERSION)"

.PHONY: release-verify
release-verify: ## Check dist/ (VERSION, default the chart's): checksums, signatures (PUBLIC_KEY, default dist/cosign.pub; ALLOW_UNSIGNED=1 accepts none), image layouts, SBOMs against the binaries, the plugin archives, one version.
	cd hack/imagebuild && GOWORK=off go run . verify --repo-root "$(CURDIR)" --dist "$(CURDIR)/dist" --version "$(or $(VERSION),$(CHART_VERSION))" \
	  --plugin-platforms "$(PLUGIN_PLATFORMS)" \
	  $(if $(PUBLIC_KEY),--key "$(abspath $(PUBLIC_KEY))") $(if $(ALLOW_UNSIGNED),--allow-unsigned)
