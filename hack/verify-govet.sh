#!/usr/bin/env bash
# Runs go vet over every package. There is no update-govet.sh: what vet finds
# needs a person to fix the code.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

if ! go vet ./...; then
	die "go vet found problems (above); fix the code, there is no update script for vet"
fi
log "ok"
