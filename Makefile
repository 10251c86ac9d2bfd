# tether's development entry points. `make help` lists them.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c
.DEFAULT_GOAL := help

GO      ?= go
BIN     := bin
# Stamped into the binaries as a release is (.goreleaser.yaml, the
# Dockerfile): `tether version` prints them.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
# The commit's date, in UTC as GoReleaser's CommitDate, so that a build is a
# function of the commit; the build's time only outside git.
DATE    ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)

# What `make image` builds: the image's tag, its base (empty: the
# Dockerfile's default, distroless static nonroot) and its target (tether,
# or examples for an image that also holds the example server).
IMAGE  ?= tether:dev
BASE   ?=
TARGET ?= tether

# The manifests `make run` uses: a stdio connection to the example server.
MANIFESTS ?= examples/manifests

# What `make run` runs once everything is built.
RUN_CMD = $(BIN)/tether run --dir $(MANIFESTS)

.PHONY: help
help: ## List the targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-zA-Z0-9_.-]+:.*## / { printf "  %-10s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

.PHONY: build
# tether is built static (no cgo), as Go daemons ship: it runs on any Linux
# without libc, and not mapping libc and the dynamic loader takes ~1.5 MB off
# its idle RSS. hack/bench builds it the same way. The example server is
# static too, so that it runs in the container image (which has no libc).
build: ## Build bin/tether and bin/tether-example-server (both static)
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/tether ./cmd/tether
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/tether-example-server ./examples/server

.PHONY: run
run: build ## Build, then run tether on examples/manifests until Ctrl-C (MANIFESTS=DIR for another tree)
	$(RUN_CMD)

.PHONY: image
# The image copies the static binaries of `make build` and the build
# machine's CA certificates (hack/build-image.sh, docs/deploy.md); BASE is
# the final stage's base image (default: distroless static, nonroot).
image: build ## Build the container image (IMAGE=tether:dev; BASE=scratch needs no registry; TARGET=examples adds the example server)
	IMAGE="$(IMAGE)" BASE="$(BASE)" TARGET="$(TARGET)" hack/build-image.sh

.PHONY: test
test: ## gofmt, go vet (every release platform), staticcheck, the package graph and generated files, install the test peers, the snapshot release, then go test -race ./...
	hack/verify-gofmt.sh
	hack/verify-govet.sh
	hack/verify-crossbuild.sh
	hack/verify-staticcheck.sh
	hack/verify-imports.sh
	hack/verify-generated.sh
	hack/install-peers.sh
	hack/verify-dist.sh
	hack/test-go.sh

.PHONY: dist
dist: ## Build the release archives of every platform, snapshot-versioned, with checksums, into _output/dist (GoReleaser)
	hack/install-goreleaser.sh
	TETHER_COMMIT=$(COMMIT) TETHER_DATE=$(DATE) _output/goreleaser/bin/goreleaser release --snapshot --clean

.PHONY: bench
bench: ## Measure tether end to end (hack/bench): table on stdout, JSON in _output/bench.json
	$(GO) run ./hack/bench -json _output/bench.json $(BENCH_FLAGS)

.PHONY: verify
verify: ## Run every hack/verify-*.sh (gofmt, vet, cross-builds, staticcheck, imports, go mod tidy, generated files, promtool, the snapshot release)
	@for s in hack/verify-*.sh; do echo "== $$s"; "$$s"; done

.PHONY: update
update: ## Run every hack/update-*.sh (gofmt -w, go mod tidy)
	@for s in hack/update-*.sh; do echo "== $$s"; "$$s"; done

.PHONY: peers
peers: ## Install the real MCP servers the tests use (npm peers with the conformance suite, bin/everything-server) and the test control plane
	hack/install-peers.sh

.PHONY: clean
clean: ## Remove build and test output (bin/, _output/)
	rm -rf $(BIN) _output
