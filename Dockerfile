# tether's container image: the static tether binary on a distroless (or
# scratch) base, as user 65532, with CA certificates. Build it with
#
#   make image                              # tether:dev on distroless static (nonroot)
#   make image BASE=scratch                 # no registry needed
#   make image TARGET=examples IMAGE=tether:examples   # with the example server too
#
# `make image` builds the static binaries (CGO_ENABLED=0, version stamped)
# and stages them with the build machine's CA bundle as the build context
# (hack/build-image.sh); this file copies them in, so that a build needs no
# registry but the base's, and none at all with BASE=scratch. docs/deploy.md
# says how to run the image.
#
# The final stage's base is a build argument: distroless static (CA
# certificates, /etc/passwd with nonroot 65532, tzdata) by default, or any
# image that needs no libc, scratch included (the staged CA bundle makes it
# whole).
ARG BASE=gcr.io/distroless/static-debian12:nonroot

# rootfs holds the image's files with their owners and modes, so that the
# final stages add them in one layer. The directories above the ones tether
# writes are root's first (a COPY --chown would otherwise make the parents
# it creates tether's with some builders); /var/lib/tether (a volume) holds
# the state directory, which tether makes itself with mode 0700, as it
# requires; /manifests is where the manifest tree is mounted, written by
# tether when the status files go beside the manifests; /tmp is for the
# stdio servers tether starts.
FROM scratch AS rootfs
# BUILD_LABEL (hack/build-image.sh's BUILD_LABEL; empty by default) labels
# every image of every stage dev.tether.build, the intermediate ones of a
# builder without BuildKit included, so that whoever built them (the tests)
# can remove them all by that label.
ARG BUILD_LABEL=""
LABEL dev.tether.build=${BUILD_LABEL}
COPY rootfs/ /
COPY --chown=65532:65532 owned/ /var/lib/tether/
COPY --chown=65532:65532 owned/ /manifests/
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY tether /usr/local/bin/tether

# tether: tether alone.
FROM ${BASE} AS tether
ARG BUILD_LABEL=""
LABEL dev.tether.build=${BUILD_LABEL}
COPY --from=rootfs / /
USER 65532:65532
ENV HOME=/var/lib/tether
VOLUME ["/manifests", "/var/lib/tether"]
EXPOSE 8808 9464
ENTRYPOINT ["tether"]
# The gateway on every interface of the container needs a bearer token
# (tether refuses a non-loopback --listen without one): mount it at
# /run/secrets/tether/token. Metrics, /healthz and /readyz on :9464.
CMD ["run", "--dir=/manifests", "--state-dir=/var/lib/tether/state", "--listen=:8808", "--auth-token-file=/run/secrets/tether/token", "--metrics-addr=:9464"]

# examples: tether and the example server (tether-example-server, which
# examples/ and the tests use), for trying tether out. It comes last, so a
# builder without BuildKit (which runs every stage before its target) builds
# no more than it needs for the target tether; hack/build-image.sh always
# names the target.
FROM tether AS examples
COPY tether-example-server /usr/local/bin/tether-example-server
