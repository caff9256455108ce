# fencedlease — build, generate, test. Every tool is built from Go modules pinned under
# hack/, so a fresh machine with only Go and the module proxy can run every target.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

IMG ?= fencedlease:dev
BIN := $(CURDIR)/bin
K8S_VERSION := $(shell sed -n 's/^require k8s.io\/kubernetes v\(.*\)$$/\1/p' hack/envtest/kube-apiserver/go.mod)
KUBEBUILDER_ASSETS ?= $(BIN)/k8s/$(K8S_VERSION)
export KUBEBUILDER_ASSETS

CONTROLLER_GEN := $(BIN)/controller-gen
KUSTOMIZE := $(BIN)/kustomize
GINKGO_FLAGS ?=

.PHONY: all
all: build

##@ Tools

.PHONY: envtest
envtest: ## Build kube-apiserver and etcd from Go modules into bin/k8s/<version> (cached).
	@bash hack/envtest/build.sh "$(KUBEBUILDER_ASSETS)" >/dev/null

$(CONTROLLER_GEN): hack/tools/go.mod
	cd hack/tools && go build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

$(KUSTOMIZE): hack/tools/go.mod
	cd hack/tools && go build -o $(KUSTOMIZE) sigs.k8s.io/kustomize/kustomize/v5

.PHONY: controller-gen kustomize
controller-gen: $(CONTROLLER_GEN) ## Build controller-gen into bin/.
kustomize: $(KUSTOMIZE) ## Build kustomize into bin/.

##@ Generate

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and RBAC from markers.
	$(CONTROLLER_GEN) crd rbac:roleName=manager-role paths="./api/...;./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: verify
verify: generate manifests ## Fail when generated files or go.mod are stale.
	go mod tidy
	@if [ -n "$$(git status --porcelain -- api config go.mod go.sum)" ]; then \
		echo "generated files are stale; run 'make generate manifests' and 'go mod tidy' and commit:"; \
		git status --porcelain -- api config go.mod go.sum; git --no-pager diff --stat; exit 1; fi

##@ Check

.PHONY: fmt
fmt: ## gofmt the tree.
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: ## go vet, and gofmt must have nothing to say.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

.PHONY: test
test: envtest lint ## Run every test (unit and envtest) with the control plane built from modules.
	go test -race -count=1 ./... -coverprofile cover.out $(GINKGO_FLAGS)

##@ Build and run

.PHONY: build
build: ## Build the manager binary into bin/.
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/fencedlease ./cmd

.PHONY: run
run: envtest build ## Run the operator against KUBECONFIG's cluster, or an embedded control plane if none.
	$(BIN)/fencedlease --local-control-plane=auto --leader-elect=false

.PHONY: docker-build
docker-build: ## Build the image (needs a Docker engine).
	docker build -t $(IMG) .

##@ Deploy (to the cluster in KUBECONFIG)

.PHONY: install
install: $(KUSTOMIZE) ## Install the CRD.
	$(KUSTOMIZE) build config/crd | kubectl apply --server-side -f -

.PHONY: uninstall
uninstall: $(KUSTOMIZE) ## Remove the CRD (and every FencedLease).
	$(KUSTOMIZE) build config/crd | kubectl delete --ignore-not-found -f -

.PHONY: deploy
deploy: $(KUSTOMIZE) ## Deploy the operator with image $(IMG).
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/default | kubectl apply --server-side -f -

.PHONY: undeploy
undeploy: $(KUSTOMIZE) ## Remove the operator.
	$(KUSTOMIZE) build config/default | kubectl delete --ignore-not-found -f -

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-15s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)
