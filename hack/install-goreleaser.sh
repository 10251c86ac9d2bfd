#!/usr/bin/env bash
# Builds GoReleaser, the release tool of `make dist`, from the Go module
# proxy into _output/goreleaser/bin/goreleaser, at the version of
# hack/goreleaser/go.mod, a tool module of its own (never tether's go.mod).
# A stamp beside the binary records the go.mod and go.sum it was built
# from; while it matches, nothing is built (milliseconds). A cold build
# downloads ~400 MB of modules and takes ~5 minutes of CPU (measured: 4m24s
# user; 40 minutes of wall time with -p=1 on a 2-core machine at load 20;
# a few minutes when idle); with a warm build cache it takes seconds.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

module=hack/goreleaser
bin=_output/goreleaser/bin
stamp="${bin}/.versions"

want="$(
	printf 'build CGO_ENABLED=0 -trimpath -ldflags -s -w\n'
	sha256sum "${module}/go.mod" "${module}/go.sum"
)"
if [[ -x "${bin}/goreleaser" ]] && [[ -f "${stamp}" ]] && [[ "$(<"${stamp}")" == "${want}" ]]; then
	log "up to date in ${bin}"
	exit 0
fi

log "building goreleaser into ${bin} (cold: minutes)"
mkdir -p "${bin}"
tmp="$(mktemp -d "${bin}/build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
(cd "${module}" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "${REPO_ROOT}/${tmp}/goreleaser" github.com/goreleaser/goreleaser/v2)
rm -f "${stamp}"
mv -f "${tmp}/goreleaser" "${bin}/goreleaser"
printf '%s\n' "${want}" >"${stamp}"
"${bin}/goreleaser" --version | grep -m1 GitVersion >&2 || true
log "built"
