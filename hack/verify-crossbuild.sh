#!/usr/bin/env bash
# Builds and vets every package, its tests included (go vet type-checks the
# _test.go files and compiles every dependency for the target), for each
# platform tether ships on besides the machine's own, which verify-govet.sh
# covers: a Linux-only call in a file without a build constraint fails
# here, not in a user's hands. The Windows-only and darwin-only tests are
# type-checked so, not run: nothing here runs a Windows or macOS binary
# (Wine lacks the ProcessPrng that Go's Windows runtime calls). There is no
# update script: what this finds needs a person to fix the code.
#
# Cost: the first run compiles the dependency graph once per platform
# (about a minute each on 2 cores); later runs reuse the build cache.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

# The release platforms (.goreleaser.yaml) other than the host's.
platforms=(windows/amd64 windows/arm64 darwin/amd64 darwin/arm64 linux/amd64 linux/arm64)
host="$(go env GOHOSTOS)/$(go env GOHOSTARCH)"

failed=()
for p in "${platforms[@]}"; do
	[[ "${p}" != "${host}" ]] || continue
	log "go vet ./... for ${p}"
	if ! GOOS="${p%/*}" GOARCH="${p#*/}" CGO_ENABLED=0 go vet -trimpath ./...; then
		failed+=("${p}")
	fi
done
[[ ${#failed[@]} -eq 0 ]] || die "go vet failed for ${failed[*]} (above): give the platform its own _unix.go/_windows.go file or a //go:build constraint"


log "ok"
