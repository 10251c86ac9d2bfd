#!/usr/bin/env bash
# Fails when a Go file is not gofmt-formatted (and simplified, gofmt -s).
# Fix with hack/update-gofmt.sh.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

mapfile -t files < <(go_files)
[[ ${#files[@]} -gt 0 ]] || die "no Go files found under ${REPO_ROOT}"
bad="$(gofmt -s -l "${files[@]}")"
if [[ -n "${bad}" ]]; then
	log "these files are not gofmt -s formatted:"
	sed 's/^/  /' <<<"${bad}" >&2
	die "run hack/update-gofmt.sh to fix them"
fi
log "ok (${#files[@]} files)"
