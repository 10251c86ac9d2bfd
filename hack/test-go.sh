#!/usr/bin/env bash
# Runs go test -race over every package (extra arguments go to go test) and
# ends with a summary: one line per package, then every failed and skipped
# test, then counts. The full output is kept in _output/go-test.log.
#
# Under CI=true the tests run verbosely, so the log shows every test and the
# summary can list skips: CI must be able to see that nothing was skipped.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

mkdir -p _output
logfile=_output/go-test.log
args=(-race -timeout "${GO_TEST_TIMEOUT:-10m}")
if [[ "${CI:-}" == "true" ]]; then
	args+=(-v)
fi

status=0
go test "${args[@]}" "$@" ./... 2>&1 | tee "${logfile}" || status=$?

count() { grep -cE "$1" "${logfile}" || true; }
{
	echo
	echo "== go test summary (full log: ${logfile})"
	grep -E '^(ok|FAIL|\?)[[:space:]]' "${logfile}" || true
	grep -E '^[[:space:]]*--- (FAIL|SKIP):' "${logfile}" || true
	if [[ "${CI:-}" == "true" ]]; then
		echo "tests: $(count '^[[:space:]]*--- PASS:') passed, $(count '^[[:space:]]*--- FAIL:') failed, $(count '^[[:space:]]*--- SKIP:') skipped"
	fi
	if [[ ${status} -eq 0 ]]; then echo "PASS"; else echo "FAIL (go test exit status ${status})"; fi
} >&2
exit "${status}"
