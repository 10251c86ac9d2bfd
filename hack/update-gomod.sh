#!/usr/bin/env bash
# Runs go mod tidy; hack/verify-gomod.sh checks the result.
set -o errexit -o nounset -o pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

go mod tidy
