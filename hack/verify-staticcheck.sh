#!/usr/bin/env bash
# Runs staticcheck (pinned; fetched through the Go module proxy on first use,
# not a requirement of go.mod) over every package. There is no
# update-staticcheck.sh: what it finds needs a person to fix the code.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

STATICCHECK_VERSION=v0.8.2
if ! go run "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}" ./...; then
	die "staticcheck found problems (above); fix the code, there is no update script for staticcheck"
fi
log "ok"
