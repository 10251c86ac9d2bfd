#!/usr/bin/env bash
# Builds helm, which the tests of the Helm chart (examples/helm/tether) run
# against the test control plane, from the Go module proxy alone (no release
# tarball, no get-helm script), into _output/helm/bin/helm.
#
# The version is that of hack/helm/go.mod, a tool module of its own so that
# tether's go.mod never carries Helm's dependency graph (as
# hack/controlplane does for Kubernetes). A stamp file beside the binary
# records what was built; while it matches (version, build flags, go.mod and
# go.sum) and the binary is there, nothing is built. A cold build (empty Go
# build cache) takes ~280 s of CPU: 13 minutes on a 2-core machine shared at
# load 20, a few on an idle one; much less once the control plane's build
# has cached the Kubernetes packages both link. See docs/deploy.md.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

began="$(date +%s%N)"
# took prints the time since the script began, in seconds.
took() {
	local ms=$((($(date +%s%N) - began) / 1000000))
	printf '%d.%03ds' $((ms / 1000)) $((ms % 1000))
}

module=hack/helm
out=_output/helm
bin="${out}/bin"
stamp="${bin}/.versions"

helm_version="$(awk '!/=>/ && $1 == "helm.sh/helm/v4" && $2 ~ /^v[0-9]/ { print $2; exit }' "${module}/go.mod")"
[[ "${helm_version}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
	die "${module}/go.mod: no release version of helm.sh/helm/v4 (found '${helm_version}')"

# helm reports the version it was stamped with, as Helm's own Makefile
# stamps it (unstamped it says v4.3, and a chart's kubeVersion and
# .Capabilities.HelmVersion would see that). -s -w as Helm's release build.
ldflags="-s -w -X helm.sh/helm/v4/internal/version.version=${helm_version} -X helm.sh/helm/v4/internal/version.gitTreeState=clean"

want="$(
	printf 'helm %s\nbuild CGO_ENABLED=0 -ldflags %s\n' "${helm_version}" "${ldflags}"
	sha256sum "${module}/go.mod" "${module}/go.sum"
)"

if [[ -x "${bin}/helm" ]] && [[ -f "${stamp}" ]] && [[ "$(<"${stamp}")" == "${want}" ]]; then
	log "up to date in ${bin} (helm ${helm_version}); took $(took)"
	exit 0
fi

log "building helm ${helm_version} into ${bin}"
# Build into a fresh directory and move into place only on success, so a
# failed or interrupted build never leaves a binary beside a stale stamp.
mkdir -p "${out}"
tmp="$(mktemp -d "${out}/build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
(cd "${module}" && CGO_ENABLED=0 go build -trimpath -ldflags "${ldflags}" -o "${REPO_ROOT}/${tmp}/helm" helm.sh/helm/v4/cmd/helm)

mkdir -p "${bin}"
rm -f "${stamp}"
mv -f "${tmp}/helm" "${bin}/helm"
printf '%s\n' "${want}" >"${stamp}"
"${bin}/helm" version --short >&2
log "built in $(took)"
