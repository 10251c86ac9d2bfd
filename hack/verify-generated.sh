#!/usr/bin/env bash
# Fails when a file generated from spec's Go types is not what
# hack/update-generated.sh would write (its header lists them). Writes only
# to a temporary directory. Fix with hack/update-generated.sh.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

go run ./hack/schemagen -dir spec -out "${tmp}"
# The examples' copies are checked against the tether that embeds the
# checked-in schemas: when those are stale, the check above fails anyway.
go build -o "${tmp}/tether" ./cmd/tether
"${tmp}/tether" schema >"${tmp}/mcpconnection.schema.json"
"${tmp}/tether" crd >"${tmp}/crd.yaml"

stale=()
check() { # generated, checked-in
	if ! cmp -s "$1" "$2"; then
		stale+=("$2")
		diff -u "$2" "$1" | head -n 20 >&2 || true
	fi
}
check "${tmp}/zz_generated.schema.json" spec/zz_generated.schema.json
check "${tmp}/zz_generated.status.schema.json" spec/zz_generated.status.schema.json
check "${tmp}/mcpconnection.schema.json" examples/schema/mcpconnection.schema.json
check "${tmp}/crd.yaml" examples/kubernetes/crd.yaml
# The chart's copies (a symbolic link would fail here too: cmp follows it,
# but the -L test does not let it pass).
for f in examples/helm/tether/crds/mcpconnections.yaml examples/helm/tether/files/tether-alerts.yaml; do
	if [[ -L "${f}" ]]; then
		stale+=("${f} (a symbolic link; the chart needs a copy)")
	fi
done
check "${tmp}/crd.yaml" examples/helm/tether/crds/mcpconnections.yaml
check examples/prometheus/tether-alerts.yaml examples/helm/tether/files/tether-alerts.yaml

if [[ ${#stale[@]} -gt 0 ]]; then
	log "these generated files are stale (diffs above, first lines):"
	printf '  %s\n' "${stale[@]}" >&2
	die "run hack/update-generated.sh to regenerate them"
fi
log "ok (6 files)"
