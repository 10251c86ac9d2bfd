#!/usr/bin/env bash
# Builds tether's container image (the Dockerfile at the root) from static
# binaries built beforehand: `make image` runs `make build` first. The build
# context is staged in a directory of its own (CONTEXT), holding only what
# the image takes: the binaries, the CA bundle and the directories the image
# needs with their modes, so no registry is needed for a build but the base
# image's (none with BASE=scratch) and nothing else of the tree is sent to
# the daemon.
#
# Environment:
#   IMAGE      the tag (default tether:dev)
#   BASE       the final stage's base image (default: the Dockerfile's,
#              gcr.io/distroless/static-debian12:nonroot)
#   TARGET     tether (default) or examples (with the example server)
#   BIN_DIR    where tether and tether-example-server are (default bin)
#   CONTEXT    the staging directory (default _output/image/context; emptied)
#   CA_BUNDLE  the CA certificates copied in (default Debian's,
#              /etc/ssl/certs/ca-certificates.crt)
#   DOCKER     the docker command (default docker)
#   BUILD_LABEL  the value of the label dev.tether.build on every image the
#              build makes, intermediate ones included (default empty): the
#              tests prune their images by it
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

image="${IMAGE:-tether:dev}"
base="${BASE:-}"
target="${TARGET:-tether}"
bin_dir="${BIN_DIR:-bin}"
context="${CONTEXT:-_output/image/context}"
ca_bundle="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
docker="${DOCKER:-docker}"

case "${target}" in
tether | examples) ;;
*) die "TARGET=${target}: not tether or examples" ;;
esac
binaries=(tether)
[[ "${target}" != examples ]] || binaries+=(tether-example-server)
for b in "${binaries[@]}"; do
	[[ -x "${bin_dir}/${b}" ]] || die "${bin_dir}/${b} is missing: run make build"
	# The base may have no libc (distroless static, scratch): a dynamically
	# linked binary would fail there with "no such file or directory".
	if command -v file >/dev/null 2>&1 && file -L "${bin_dir}/${b}" | grep -q 'dynamically linked'; then
		die "${bin_dir}/${b} is linked dynamically: build it with CGO_ENABLED=0 (make build)"
	fi
done
[[ -s "${ca_bundle}" ]] || die "CA_BUNDLE=${ca_bundle}: no CA certificates there (install ca-certificates, or name a PEM bundle)"

rm -rf "${context}"
# rootfs/: root's directories; owned/: an empty directory that becomes
# tether's (user 65532) /var/lib/tether and /manifests.
mkdir -p "${context}/rootfs/tmp" "${context}/rootfs/var/lib" "${context}/rootfs/etc/ssl/certs" "${context}/owned"
chmod 0755 "${context}/rootfs/var" "${context}/rootfs/var/lib" "${context}/rootfs/etc" "${context}/rootfs/etc/ssl" "${context}/rootfs/etc/ssl/certs" "${context}/owned"
chmod 1777 "${context}/rootfs/tmp"
cp "${ca_bundle}" "${context}/ca-certificates.crt"
chmod 0644 "${context}/ca-certificates.crt"
for b in "${binaries[@]}"; do
	cp "${bin_dir}/${b}" "${context}/${b}"
done
args=(build --file Dockerfile --target "${target}" --tag "${image}")
[[ -z "${base}" ]] || args+=(--build-arg "BASE=${base}")
[[ -z "${BUILD_LABEL:-}" ]] || args+=(--build-arg "BUILD_LABEL=${BUILD_LABEL}")
log "building ${image} (target ${target}${base:+, base ${base}})"
"${docker}" "${args[@]}" "${context}"
