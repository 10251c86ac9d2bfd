# Sourced by the hack/*.sh scripts (after their own strict preamble) for the
# repository root and a few helpers. Not executable on its own.

# The repository root, whatever directory the script was started from.
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export REPO_ROOT

log() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; }
die() { log "$*"; exit 1; }

# go_files lists the repository's Go files, relative to the root, skipping
# what is not ours (npm packages) and what is generated (build output).
go_files() {
	(cd "${REPO_ROOT}" && find . \
		\( -path ./.git -o -path ./hack/peers/node_modules -o -path ./hack/conformance/node_modules -o -path ./bin -o -path ./_output \) -prune \
		-o -type f -name '*.go' -print | sed 's|^\./||' | sort)
}
