#!/usr/bin/env bash
# Runs `make dist`'s snapshot release (GoReleaser, .goreleaser.yaml) into
# _output/dist and checks what it built (hack/distcheck): an archive per
# platform with binaries of that platform (their ELF, Mach-O or PE header)
# stamped with the snapshot's version, commit and the commit's date, the
# checksums file matching every archive; then runs this machine's own
# binary from its archive: `tether version` must print what was stamped;
# and builds that binary once more (GoReleaser, this platform only, into
# _output/dist-again): it must be the same bytes, as a release build of one
# commit is reproducible (-trimpath, the commit's date, no build time).
#
# Without GoReleaser (hack/install-goreleaser.sh, run by `make peers`) it
# skips, except under CI=true, where that is an error.
#
# Cost: tether and the example server are compiled for six platforms; with
# the Go build cache warm (verify-crossbuild.sh compiled the same
# dependencies) that is mostly linking.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

goreleaser=_output/goreleaser/bin/goreleaser
if [[ ! -x "${goreleaser}" ]]; then
	[[ "${CI:-}" != "true" ]] || die "${goreleaser} is missing and CI=true: run hack/install-goreleaser.sh (make peers)"
	log "skipped: ${goreleaser} is missing (make peers builds it)"
	exit 0
fi

began="$(date +%s)"
mkdir -p _output
commit="$(git rev-parse HEAD)"
# GoReleaser's CommitDate: the committer date, UTC, RFC 3339.
date="$(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ)"
if ! TETHER_COMMIT="${commit}" TETHER_DATE="${date}" "${goreleaser}" release --snapshot --clean >_output/dist.log 2>&1; then
	cat _output/dist.log >&2
	die "goreleaser release --snapshot failed (log above, and in _output/dist.log)"
fi
log "snapshot release built in $(($(date +%s) - began))s (log: _output/dist.log)"

dist=_output/dist
version="$(sed -n 's/.*"version":"\([^"]*\)".*/\1/p' "${dist}/metadata.json")"
[[ -n "${version}" ]] || die "${dist}/metadata.json names no version"
go run ./hack/distcheck -dir "${dist}" -version "${version}" -commit "${commit}" -date "${date}" ||
	die "the release archives in ${dist} are wrong (above): see .goreleaser.yaml"

host_os="$(go env GOHOSTOS)"
host_arch="$(go env GOHOSTARCH)"
archive="${dist}/tether_${version}_${host_os}_${host_arch}.tar.gz"
if [[ -f "${archive}" ]]; then
	tmp="$(mktemp -d)"
	trap 'rm -rf "${tmp}"' EXIT
	tar -xzf "${archive}" -C "${tmp}" tether
	says="$("${tmp}/tether" version)"
	[[ "${says}" == "tether ${version} (commit ${commit}, built ${date}) "* ]] ||
		die "${archive}: tether version says ${says@Q}, want version ${version}, commit ${commit} and date ${date}"
	log "${archive}: ${says}"

	# The same build once more, into a dist directory of its own (`build
	# --clean` empties its dist): the same commit must give the same binary.
	again=_output/dist-again
	sed "s|^dist: .*|dist: ${again}|" .goreleaser.yaml >_output/goreleaser-again.yaml
	if ! TETHER_COMMIT="${commit}" TETHER_DATE="${date}" "${goreleaser}" build --config _output/goreleaser-again.yaml \
		--snapshot --clean --single-target --id tether --output "${tmp}/tether-again" >_output/dist-again.log 2>&1; then
		cat _output/dist-again.log >&2
		die "goreleaser build --single-target failed (log above, and in _output/dist-again.log)"
	fi
	cmp -s "${tmp}/tether" "${tmp}/tether-again" ||
		die "two builds of commit ${commit} differ (${archive}'s tether and ${again}'s): the release is not reproducible; look for a build time or path stamped in (.goreleaser.yaml ldflags)"
	log "a second build of ${commit} is the same bytes: $(sha256sum "${tmp}/tether" | cut -d' ' -f1)"
fi
log "ok"
