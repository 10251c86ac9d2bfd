#!/usr/bin/env bash
# Rewrites every Go file with gofmt -s; hack/verify-gofmt.sh checks the result.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

mapfile -t files < <(go_files)
gofmt -s -w "${files[@]}"
