#!/usr/bin/env bash
# Builds the test control plane that the Kubernetes-mode tests start on
# loopback (controller/kubernetes/kubetest, docs/controlplane.md): a real
# kube-apiserver, etcd and kubectl, from the Go module proxy alone (no kind,
# no docker, no release tarballs), into _output/controlplane/bin/.
#
# The versions are those of hack/controlplane/go.mod, a tool module of its
# own. A stamp file beside the binaries records what was built; while it
# matches (versions, build flags, go.mod and go.sum) and the binaries are
# there, nothing is built (~10 ms). A cold build downloads ~90 MB of modules
# and takes 400-600 s of CPU: 4-9 minutes on an idle 2-core machine, 8-14
# on a shared one, with a peak of ~2.4 GB of memory (the link of
# kube-apiserver). With a warm Go build cache it takes seconds. Set
# GOFLAGS=-p=1 to build one package at a time where memory is short.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

began="$(date +%s%N)"
# took prints the time since the script began, in seconds.
took() {
	local ms=$((($(date +%s%N) - began) / 1000000))
	printf '%d.%03ds' $((ms / 1000)) $((ms % 1000))
}

module=hack/controlplane
out=_output/controlplane
bin="${out}/bin"
stamp="${bin}/.versions"
binaries=(kube-apiserver etcd kubectl)

# required prints the version that the tool module requires of module $1.
required() {
	local v
	v="$(awk -v m="$1" '!/=>/ && !/^[[:space:]]*\/\// { for (i = 1; i < NF; i++) if ($i == m && $(i + 1) ~ /^v[0-9]/) { print $(i + 1); exit } }' "${module}/go.mod")"
	[[ -n "${v}" ]] || die "${module}/go.mod: no require line for $1"
	printf '%s\n' "${v}"
}

kube_version="$(required k8s.io/kubernetes)"
etcd_version="$(required go.etcd.io/etcd/server/v3)"
[[ "${kube_version}" =~ ^v([0-9]+)\.([0-9]+)\.[0-9]+$ ]] ||
	die "${module}/go.mod: k8s.io/kubernetes ${kube_version} is not a release version vMAJOR.MINOR.PATCH"
kube_major="${BASH_REMATCH[1]}"
kube_minor="${BASH_REMATCH[2]}"

# kube-apiserver and kubectl report the version they were stamped with, as
# Kubernetes' own build stamps them; unstamped they say v0.0.0-master, which
# kubectl's version skew warning takes at face value. -s -w drops the symbol
# and DWARF tables, as Kubernetes' release build does (a third of the size;
# stack traces keep their function names and lines).
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X ${pkg}.gitVersion=${kube_version}"
	ldflags+=" -X ${pkg}.gitMajor=${kube_major}"
	ldflags+=" -X ${pkg}.gitMinor=${kube_minor}"
	ldflags+=" -X ${pkg}.gitTreeState=clean"
done

# What the stamp records: the versions, the build flags, and go.mod's and
# go.sum's hashes so that a change of a replace or of a dependency rebuilds
# too.
want="$(
	printf 'kubernetes %s\netcd %s\nbuild CGO_ENABLED=0 -ldflags %s\n' "${kube_version}" "${etcd_version}" "${ldflags}"
	sha256sum "${module}/go.mod" "${module}/go.sum"
)"

present=true
for b in "${binaries[@]}"; do
	[[ -x "${bin}/${b}" ]] || present=false
done
if ${present} && [[ -f "${stamp}" ]] && [[ "$(<"${stamp}")" == "${want}" ]]; then
	log "up to date in ${bin} (kubernetes ${kube_version}, etcd ${etcd_version}); took $(took)"
	exit 0
fi

log "building kube-apiserver and kubectl ${kube_version}, etcd ${etcd_version} into ${bin} (cold: minutes)"

# Build into a fresh directory and move into place only on success, so a
# failed or interrupted build never leaves a binary beside a stale stamp.
mkdir -p "${out}"
tmp="$(mktemp -d "${out}/build.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
# Static binaries (as Kubernetes releases its server binaries): no C
# compiler needed, no libc version to match.
(cd "${module}" && CGO_ENABLED=0 go build -ldflags "${ldflags}" -o "${REPO_ROOT}/${tmp}/" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kubectl \
	go.etcd.io/etcd/server/v3)
# go build names a binary after its package's last path element.
mv "${tmp}/server" "${tmp}/etcd"
for b in "${binaries[@]}"; do
	[[ -x "${tmp}/${b}" ]] || die "go build did not produce ${b}"
done

mkdir -p "${bin}"
rm -f "${stamp}"
for b in "${binaries[@]}"; do
	mv -f "${tmp}/${b}" "${bin}/${b}"
done
printf '%s\n' "${want}" >"${stamp}"

"${bin}/kube-apiserver" --version >&2
# The first line only, without a pipe: under pipefail, head's early exit
# can make etcd's next write fail with SIGPIPE, and the script with it.
etcd_says="$("${bin}/etcd" --version)"
printf '%s\n' "${etcd_says%%$'\n'*}" >&2
log "built in $(took)"
