#!/usr/bin/env bash
# Checks the Prometheus examples with promtool: the scrape config and the
# alerting rules are valid (check config, check rules) and the rules pass
# their unit tests (test rules). There is nothing to regenerate: a failure
# names the file to fix by hand under examples/prometheus/.
#
# promtool comes from Debian's `prometheus` package (apt-get install prometheus).
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}/examples/prometheus"

command -v promtool >/dev/null || die "promtool not found: apt-get install prometheus"

promtool check config prometheus.yml >/dev/null \
	|| die "examples/prometheus/prometheus.yml is invalid (promtool check config prometheus.yml)"
promtool check rules tether-alerts.yaml >/dev/null \
	|| die "examples/prometheus/tether-alerts.yaml is invalid (promtool check rules tether-alerts.yaml)"
promtool test rules tether-alerts_test.yaml \
	|| die "the alerting rules fail their unit tests: fix tether-alerts.yaml or tether-alerts_test.yaml"
log "ok"
