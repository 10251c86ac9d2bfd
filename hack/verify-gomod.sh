#!/usr/bin/env bash
# Fails when `go mod tidy` would change go.mod or go.sum. Never writes them:
# `go mod tidy -diff` only prints the change. Fix with hack/update-gomod.sh.
#
# Needs the module proxy when the module cache lacks a module that tidy
# considers (tests of dependencies, other platforms), so `make test` leaves it
# out and `make verify` and CI run it.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

if ! diff="$(go mod tidy -diff 2>&1)"; then
	printf '%s\n' "${diff}" >&2
	die "go.mod/go.sum are not tidy (diff above); run hack/update-gomod.sh to fix them"
fi
log "ok"
