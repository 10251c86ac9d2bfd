#!/usr/bin/env bash
# Holds the package graph to docs/architecture.md: imports run one way (a
# leaf never imports the hub, package controller), the CLI's packages
# (statusview for tether get, importer for tether import) link none of the
# daemon's heavy dependencies, and the binary no typed Kubernetes client. There is no update-imports.sh: a violation
# needs the code moved.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

module=github.com/tether-mcp/tether
status=0

# The CLI's packages: no go-sdk, OpenTelemetry or client-go.
for pkg in controller/statusview controller/importer controller/owner controller/bridge controller/manifest controller/statusfile controller/desired controller/exposure spec; do
	heavy=$(go list -deps "./${pkg}" | grep -E '^(github.com/modelcontextprotocol/go-sdk|go.opentelemetry.io|k8s.io/client-go)(/|$)' || true)
	if [[ -n ${heavy} ]]; then
		log "${pkg} links the daemon's dependencies:"
		printf '  %s\n' ${heavy} >&2
		status=1
	fi
done

# The tether binary links no typed Kubernetes client, nor the API types of
# every group that they register at init: they cost tens of MB of binary and
# about 10 MB of idle RSS, in --dir mode too. Kubernetes mode goes through
# the dynamic client (docs/architecture.md, Kubernetes mode).
typed=$(go list -deps ./cmd/tether | grep -E '^(k8s.io/client-go/(kubernetes|informers|listers|applyconfigurations|tools/record|tools/leaderelection)|k8s.io/api)(/|$)' || true)
if [[ -n ${typed} ]]; then
	log "cmd/tether links typed Kubernetes clients or API types:"
	printf '  %s\n' ${typed} >&2
	status=1
fi

# No package below controller/ imports the hub.
for pkg in $(go list ./controller/... | grep -v "^${module}/controller\$"); do
	# Read whole, then searched: grep -q in a pipe may stop go list with
	# SIGPIPE, which pipefail turns into "no match".
	imports="$(go list -f '{{join .Imports "\n"}}' "${pkg}")"
	if grep -qx "${module}/controller" <<<"${imports}"; then
		log "${pkg#"${module}/"} imports the hub, package controller"
		status=1
	fi
done

# tether diff predicts with the daemon's rules, never with its machinery:
# controller/diff imports none of the packages that run connections or the
# gateway (the rules it shares live in spec, manifest and exposure).
imports="$(go list -deps ./controller/diff)"
for pkg in controller controller/gateway controller/supervisor controller/connection controller/kubernetes controller/oauth; do
	if grep -qx "${module}/${pkg}" <<<"${imports}"; then
		log "controller/diff links ${pkg}"
		status=1
	fi
done
if grep -qE '^(go.opentelemetry.io|k8s.io/client-go)(/|$)' <<<"${imports}"; then
	log "controller/diff links OpenTelemetry or client-go"
	status=1
fi

# spec is the root of the graph: it imports no package of tether's.
imports="$(go list -f '{{join .Imports "\n"}}' ./spec)"
if grep -q "^${module}/" <<<"${imports}"; then
	log "spec imports a tether package"
	status=1
fi

if [[ ${status} -ne 0 ]]; then
	die "the package graph breaks the rules of docs/architecture.md (above)"
fi
log "ok"
