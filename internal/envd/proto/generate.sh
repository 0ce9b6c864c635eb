#!/usr/bin/env bash
# Regenerates internal/envd/gen from the .proto files beside this script with
# buf and the plugins pinned in tools/go.mod: nothing but the Go toolchain.
# buf writes into a temporary directory, which replaces internal/envd/gen only
# when generation succeeded, so a failing generator leaves the tree as it was.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out="$root/internal/envd/gen"
# The plugins' modules in tools/go.mod must be the provider's runtime versions.
for mod in google.golang.org/protobuf connectrpc.com/connect; do
	runtime=$(cd "$root" && go list -m -f '{{.Version}}' "$mod")
	plugin=$(cd "$root" && go list -m -modfile=tools/go.mod -f '{{.Version}}' "$mod")
	if [[ "$runtime" != "$plugin" ]]; then
		echo "generate.sh: $mod is $plugin in tools/go.mod but $runtime in go.mod; make them equal" >&2
		exit 1
	fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$here" # buf.gen.yaml's plugin paths are relative to it
go tool -modfile="$root/tools/go.mod" buf generate -o "$tmp"
if [[ -z "$(ls -A "$tmp/gen" 2>/dev/null)" ]]; then
	echo "generate.sh: buf generated nothing" >&2
	exit 1
fi
# Unchanged output leaves the files (and their mtimes) alone.
if ! diff -r -q "$tmp/gen" "$out" >/dev/null 2>&1; then
	rm -rf "$out"
	mv "$tmp/gen" "$out"
fi
