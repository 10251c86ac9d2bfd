#!/usr/bin/env bash
# tether-check.sh: what a pull request does to the MCP connections its
# manifests declare. Run it in a checkout of the pull request; it validates
# the manifests and prints `tether diff` against the base branch.
#
#   examples/ci/tether-check.sh [MANIFEST_DIR] [BASE_REF]
#
# MANIFEST_DIR defaults to $TETHER_DIR or manifests; BASE_REF to
# $TETHER_BASE or origin/main. TETHER is the tether binary (default: tether
# on PATH). Exit status: 0 no change, 1 changes (informational: a CI job
# usually passes on it), 2 invalid manifests or an error, as tether diff.
set -o errexit -o nounset -o pipefail

dir=${1:-${TETHER_DIR:-manifests}}
base=${2:-${TETHER_BASE:-origin/main}}
tether=${TETHER:-tether}

if ! "${tether}" validate "${dir}"; then
	exit 2
fi
status=0
"${tether}" diff --dir "${dir}" --against "${base}" || status=$?
exit "${status}"
