#!/usr/bin/env bash
# Regenerates every file made from spec's Go types; hack/verify-generated.sh
# checks them:
#   spec/zz_generated.schema.json          the manifest's JSON Schema  (hack/schemagen)
#   spec/zz_generated.status.schema.json   a status document's schema  (hack/schemagen)
#   examples/schema/mcpconnection.schema.json  `tether schema`, which the
#                                          examples' yaml-language-server lines name
#   examples/kubernetes/crd.yaml           `tether crd`
#   examples/helm/tether/crds/mcpconnections.yaml  a copy of crd.yaml
#   examples/helm/tether/files/tether-alerts.yaml  a copy of
#                                          examples/prometheus/tether-alerts.yaml
# The chart holds copies, not links: a checkout without symbolic links
# (Windows, core.symlinks=false) would otherwise hold a chart whose CRD and
# rules are one-line files naming their targets.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

go run ./hack/schemagen -dir spec -out spec

# tether embeds the schemas it prints: build it after they are written.
bin="$(mktemp -d)"
trap 'rm -rf "${bin}"' EXIT
go build -o "${bin}/tether" ./cmd/tether
"${bin}/tether" schema >examples/schema/mcpconnection.schema.json
"${bin}/tether" crd >examples/kubernetes/crd.yaml
cp examples/kubernetes/crd.yaml examples/helm/tether/crds/mcpconnections.yaml
cp examples/prometheus/tether-alerts.yaml examples/helm/tether/files/tether-alerts.yaml
log "ok"
