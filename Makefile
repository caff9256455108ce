# fencedlease — build, generate, test. Every tool is built from Go modules pinned under
# hack/, so a fresh machine with only Go and the module proxy can run every target.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

IMG ?= fencedlease:dev
# The agent sidecar (and `hold`): the Dockerfile's agent target, which admission injects.
AGENT_IMG ?= fencedlease-agent:dev
BIN := $(CURDIR)/bin
K8S_VERSION := $(shell awk '$$1 == "require" && $$2 == "k8s.io/kubernetes" { print substr($$3, 2) } $$1 == "k8s.io/kubernetes" { print substr($$2, 2) }' hack/envtest/kubernetes/go.mod)
ifeq ($(K8S_VERSION),)
$(error no k8s.io/kubernetes version in hack/envtest/kubernetes/go.mod)
endif
KUBEBUILDER_ASSETS ?= $(BIN)/k8s/$(K8S_VERSION)
export KUBEBUILDER_ASSETS

# No build here needs DWARF: race reports, panics and coverage read the pclntab, and the
# image strips it anyway (-s -w). Without it a cold `make test` compiles ~8 % and links ~25 %
# less. Exported, so the control plane, lint, the tests and the tests' own builds of the
# operator agree and share one build cache. BUILD_GOFLAGS= keeps DWARF (for a debugger).
BUILD_GOFLAGS ?= -gcflags=all=-dwarf=false -ldflags=-w
export GOFLAGS := $(strip $(filter-out $(BUILD_GOFLAGS),$(shell go env GOFLAGS)) $(BUILD_GOFLAGS))

CONTROLLER_GEN := $(BIN)/controller-gen
KUSTOMIZE := $(BIN)/kustomize
STATICCHECK := $(BIN)/staticcheck
RULECHECK := $(BIN)/rulecheck
HELM := $(BIN)/helm
IMAGE_TOOL := $(BIN)/image-tool
GINKGO_FLAGS ?=
# Test packages at once: three times the CPUs, since the envtest suites wait on leases more
# than they compute, and -p also bounds the links (fewer, and the short packages' test
# binaries are linked only after the long suites end). go test starts packages in the order
# they are named: the longest first, so the short ones fill in around them.
LONG_TESTS := ./test/realnode ./test/e2e ./test/chaos ./test/outages ./test/workloads ./controllers/fencedlease \
	./test/authority ./internal/plugin ./pkg/holder ./hack/krew ./controllers/leadership
TEST_PACKAGES ?= $(shell echo $$((3 * $$(getconf _NPROCESSORS_ONLN))))
CHAOS_ROUNDS ?= 10
# Generated histories of the protocol that make chaos runs (make test runs 50).
HISTORIES ?= 10000

.PHONY: all
all: build

##@ Tools

.PHONY: envtest
envtest: ## Build etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok and the fences' S3 and Kafka test servers from Go modules into bin/k8s/<version> (cached).
	@bash hack/envtest/build.sh "$(KUBEBUILDER_ASSETS)" >/dev/null

$(CONTROLLER_GEN): hack/tools/go.mod
	cd hack/tools && go build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

$(KUSTOMIZE): hack/tools/go.mod
	cd hack/tools && go build -o $(KUSTOMIZE) sigs.k8s.io/kustomize/kustomize/v5

$(STATICCHECK): hack/tools/go.mod
	cd hack/tools && go build -o $(STATICCHECK) honnef.co/go/tools/cmd/staticcheck

# In its own module: Prometheus's rule parser stays out of the operator's dependencies.
$(RULECHECK): hack/rulecheck/go.mod hack/rulecheck/main.go
	cd hack/rulecheck && go build -o $(RULECHECK) .

# Helm in its own module, its modules shared with the operator at the operator's versions
# (hack/envtest/align.sh) and built as the control plane is, so it reuses what that compiled.
$(HELM): hack/helm/go.mod
	cd hack/helm && CGO_ENABLED=0 go build -trimpath -o $(HELM) helm.sh/helm/v3/cmd/helm

# make images' tool: builds, describes, pushes and serves the images (hack/images, its own
# module, so go-containerregistry stays out of the operator's).
$(IMAGE_TOOL): hack/images/go.mod $(wildcard hack/images/*.go) hack/images/busybox/applets.txt
	cd hack/images && go build -o $(IMAGE_TOOL) .

.PHONY: nodes
nodes: envtest ## Build what a real node runs (kubelet and kube-proxy as kube-node, containerd, the CNI plugins) beside the control plane; runc comes from Debian.
	@REAL_NODES=1 bash hack/envtest/build.sh "$(KUBEBUILDER_ASSETS)" >/dev/null

.PHONY: controller-gen kustomize helm
controller-gen: $(CONTROLLER_GEN) ## Build controller-gen into bin/.
helm: $(HELM) ## Build helm into bin/ (from hack/helm).
kustomize: $(KUSTOMIZE) ## Build kustomize into bin/.

##@ Generate

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and RBAC from markers.
	$(CONTROLLER_GEN) crd rbac:roleName=manager-role paths="./api/...;./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: rules
rules: $(RULECHECK) ## Parse the alert rules and the dashboard's queries; write the metric names they read (config/prometheus/metric-names.txt).
	cd hack/rulecheck && go test -count=1 ./...
	$(RULECHECK)

.PHONY: chart
chart: $(KUSTOMIZE) build-installer ## Regenerate charts/fencedlease's CRD and templates from config/ (hack/chartgen); values.yaml and _helpers.tpl are by hand.
	$(KUSTOMIZE) build config/webhook-install > $(BIN)/chart-webhook.yaml
	$(KUSTOMIZE) build config/certmanager > $(BIN)/chart-certmanager.yaml
	$(KUSTOMIZE) build config/prometheus > $(BIN)/chart-prometheus.yaml
	go run ./hack/chartgen -bundle dist/install.yaml -webhook $(BIN)/chart-webhook.yaml -certmanager $(BIN)/chart-certmanager.yaml -prometheus $(BIN)/chart-prometheus.yaml -out charts/fencedlease

.PHONY: api-list
api-list: ## List the exported Go API of api/... and pkg/... into api/exported/ (hack/apilist); a change there goes in CHANGELOG.md.
	go run ./hack/apilist -out api/exported ./api/... ./pkg/...

# What make verify regenerates and finds stale when it changes.
CHECKED_IN := api config dist charts go.mod go.sum hack/envtest hack/helm hack/images

.PHONY: verify
verify: generate manifests build-installer rules chart api-list ## Fail when generated files, the exported API listings or go.mod are stale.
	go mod tidy
	cd hack/images && go mod tidy
	cd hack/envtest/node && go mod tidy
	bash hack/envtest/align.sh
	$(KUSTOMIZE) build config/certmanager >/dev/null
	$(KUSTOMIZE) build config/samples >/dev/null
	$(KUSTOMIZE) build config/prometheus >/dev/null
	$(KUSTOMIZE) build config/grafana >/dev/null
	$(KUSTOMIZE) build config/apf >/dev/null
	@if [ -n "$$(git status --porcelain -- $(CHECKED_IN))" ]; then \
		echo "generated files are stale; run 'make generate manifests build-installer rules chart api-list', 'go mod tidy' and 'bash hack/envtest/align.sh' and commit (an api/exported change is a change to the public Go API: note it in CHANGELOG.md):"; \
		git status --porcelain -- $(CHECKED_IN); git --no-pager diff --stat; exit 1; fi

.PHONY: build-installer
build-installer: $(KUSTOMIZE) ## Write dist/install.yaml: everything for one kubectl apply -f.
	@mkdir -p dist
	{ echo "# fencedlease install bundle, generated by 'make build-installer' from config/. Images: $(IMG), agent $(AGENT_IMG)"; \
	  cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG) agent=$(AGENT_IMG) >/dev/null && cd ../.. && \
	  cd config/policy && $(KUSTOMIZE) edit set image agent=$(AGENT_IMG) >/dev/null && cd ../.. && \
	  $(KUSTOMIZE) build config/default; echo "---"; $(KUSTOMIZE) build config/policy; \
	  echo "---"; $(KUSTOMIZE) build config/fence; echo "---"; $(KUSTOMIZE) build config/apf; } > dist/install.yaml
	{ echo "# fencedlease install bundle for Kubernetes 1.30-1.35 (no MutatingAdmissionPolicy: the pod webhook admits candidates), generated by 'make build-installer' from config/. Images: $(IMG), agent $(AGENT_IMG)"; \
	  $(KUSTOMIZE) build config/webhook-install; echo "---"; $(KUSTOMIZE) build config/policy-webhook; \
	  echo "---"; $(KUSTOMIZE) build config/fence; echo "---"; $(KUSTOMIZE) build config/apf; } > dist/install-webhook.yaml
	cd config/manager && $(KUSTOMIZE) edit set image controller=fencedlease:dev agent=fencedlease-agent:dev
	cd config/policy && $(KUSTOMIZE) edit set image agent=fencedlease-agent:dev

##@ Check

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

# vet and staticcheck type-check against the race build that `go test -race` uses, so a cold
# machine compiles every dependency once for lint and tests, not once per mode (~5 min on 2 cores).
.PHONY: lint
lint: $(STATICCHECK) ## gofmt must have nothing to say; go vet and staticcheck must pass.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet -race ./...
	GOFLAGS="$$(go env GOFLAGS) -race" $(STATICCHECK) ./...

# The images the real-node suite pulls: this machine's platform only (make images builds two).
.PHONY: test-images
test-images:
	$(MAKE) images IMAGE_PLATFORMS=linux/$$(go env GOARCH)

# make test runs the real-node suite first and alone until its cluster is up, then every
# other package (the long ones first) and lint beside it (hack/test.sh).
.PHONY: test
test: envtest nodes rules $(HELM) test-images ## Run every test (unit, envtest, and real nodes as root) with the control plane built from modules.
	cd hack/images && go test -count=1 ./...
	@mkdir -p $(BIN); MAKE="$(MAKE)" bash hack/test.sh $(BIN) -race -count=1 -timeout 45m -p $(TEST_PACKAGES) $(GINKGO_FLAGS) -- $(LONG_TESTS) ./...

.PHONY: chaos
chaos: envtest nodes test-images ## The long fault-injection runs: HISTORIES (10000) generated histories of the protocol against the controller (about 30 min), two operator replicas with holders writing through the SQL fence (about an hour), then, as root, holders on real nodes frozen, cut off, their kubelet stopped, their node lost (about 4 min a round), the upgrade from the previous release with its rollback and a second upgrade, and the operator's memory with 1,000 FencedLeases; each fault CHAOS_ROUNDS (10) times; prints the tables.
	go test -count=1 -timeout 90m ./controllers/fencedlease -run 'TestGeneratedHistories|TestEveryCrashPointOfAPass' -v -rapid.checks=$(HISTORIES) -rapid.nofailfile
	go test -count=1 -timeout 150m ./test/chaos -run TestChaos -v -chaos.rounds=$(CHAOS_ROUNDS) -chaos.series=3 -chaos.long
	go test -count=1 -timeout 150m ./test/realnode -run 'TestRealNodes/(chaos|upgrade|operator_memory)' -v -realnode.chaos.rounds=$(CHAOS_ROUNDS) -realnode.long

BENCH_FLAGS ?=

.PHONY: bench
bench: envtest ## Measure the operator against client-go leader election on one control plane (40–60 min); prints the table of docs/performance.md. BENCH_FLAGS='-bench.scale=0 -bench.runs=5' to change.
	go test -count=1 -timeout 85m ./test/bench -run TestBench -v -args -bench.enable $(BENCH_FLAGS)

##@ Build and run

.PHONY: demo
demo: envtest ## The whole protocol in under a minute: pause a holder, see its stale write rejected. DSN=postgres://... for PostgreSQL; SVG=docs/timeline.svg redraws the README's picture from the run.
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/invoice-scheduler ./cmd/invoice-scheduler
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/demo ./cmd/demo
	$(BIN)/demo --assets "$(KUBEBUILDER_ASSETS)" --scheduler $(BIN)/invoice-scheduler $(if $(DSN),--dsn "$(DSN)") $(if $(SVG),--svg "$(SVG)")

.PHONY: build
build: ## Build the operator, the small agent (sidecar and hold), the kubectl plugin and the example invoice scheduler into bin/.
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/fencedlease ./cmd
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/fencedlease-agent ./cmd/agent
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/kubectl-fencedlease ./cmd/kubectl-fencedlease
	cp cmd/kubectl-fencedlease/kubectl_complete-fencedlease $(BIN)/
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/invoice-scheduler ./cmd/invoice-scheduler

VERSION ?= v0.1.0

.PHONY: plugin-release
plugin-release: ## Build the kubectl plugin's archives for five platforms and its krew manifest (with their sha256) into bin/plugin; VERSION=v1.2.3.
	go run ./hack/krew -version $(VERSION) -out $(BIN)/plugin

.PHONY: run
run: envtest build ## Run the operator against KUBECONFIG without webhook (a cluster cannot call back here), or on an embedded control plane with the admission policies (they admit candidates).
	$(BIN)/fencedlease --local-control-plane=auto --leader-elect=false --webhook=false

# The images' platforms, the labels they carry and where make images writes them.
IMAGE_PLATFORMS ?= linux/amd64 linux/arm64
IMAGES := $(BIN)/images
IMAGE_VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
IMAGE_CREATED ?= $(shell git log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)
IMAGE_SOURCE ?= https://github.com/fencedlease/fencedlease

.PHONY: images
images: $(IMAGE_TOOL) ## Build the two images (operator, agent), the real nodes' sandbox image (pause) and make cluster's busybox stand-in for the samples as OCI layouts in bin/images/, one index for IMAGE_PLATFORMS, without Docker; the same commit gives the same digests.
	rm -rf $(IMAGES)/bin
	for p in $(IMAGE_PLATFORMS); do os=$${p%/*} arch=$${p#*/}; \
	  for b in fencedlease:./cmd fencedlease-agent:./cmd/agent invoice-scheduler:./cmd/invoice-scheduler; do \
	    CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags="-s -w" -o $(IMAGES)/bin/$${os}_$${arch}/$${b%%:*} $${b#*:} || exit 1; \
	  done; \
	  for b in pause busybox; do \
	    (cd hack/images && CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch go build -trimpath -ldflags="-s -w" -o $(IMAGES)/bin/$${os}_$${arch}/$$b ./$$b) || exit 1; \
	  done; \
	done
	$(IMAGE_TOOL) build -bin $(IMAGES)/bin -out $(IMAGES) -version "$(IMAGE_VERSION)" -revision "$(IMAGE_REVISION)" \
	  -created "$(IMAGE_CREATED)" -source "$(IMAGE_SOURCE)"

.PHONY: push
push: images ## Push the images to IMG and AGENT_IMG with your registry credentials (docker login's config or a credential helper; no Docker engine).
	$(IMAGE_TOOL) push -layout $(IMAGES)/fencedlease -ref $(IMG)
	$(IMAGE_TOOL) push -layout $(IMAGES)/fencedlease-agent -ref $(AGENT_IMG)

.PHONY: cluster
cluster: nodes ## A real two-node cluster on this machine (kubelets, containerd, runc, CNI, kube-proxy, a registry with make images' output), as root, until Ctrl-C.
	$(MAKE) images IMAGE_PLATFORMS=linux/$$(go env GOARCH)
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/cluster ./hack/cluster
	$(BIN)/cluster

.PHONY: cluster-down
cluster-down: ## Remove what a killed make cluster or real-node test run left: processes, mounts, cgroups, the network namespace.
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/cluster ./hack/cluster
	$(BIN)/cluster -down

.PHONY: docker-build
docker-build: ## Build the operator image $(IMG) and the agent image $(AGENT_IMG) (needs a Docker engine).
	docker build -t $(IMG) .
	docker build --target agent -t $(AGENT_IMG) .

##@ Deploy (to the cluster in KUBECONFIG)

.PHONY: install
install: $(KUSTOMIZE) ## Install the CRD.
	$(KUSTOMIZE) build config/crd | kubectl apply --server-side -f -

.PHONY: uninstall
uninstall: $(KUSTOMIZE) ## Remove the CRD (and every FencedLease).
	$(KUSTOMIZE) build config/crd | kubectl delete --ignore-not-found -f -

.PHONY: deploy
deploy: build-installer ## Deploy the operator with image $(IMG) and agent image $(AGENT_IMG).
	kubectl apply --server-side -f dist/install.yaml

.PHONY: undeploy
undeploy: ## Remove fencedlease: every FencedLease first (the operator revokes the holders), then the operator, then the CRD. BUNDLE=dist/install-webhook.yaml for the webhook install.
	go run ./hack/undeploy -f $(or $(BUNDLE),dist/install.yaml)

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-15s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
