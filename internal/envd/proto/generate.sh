#!/usr/bin/env bash
# Regenerates internal/envd/gen from the .proto files beside this script.
# protoc comes from Debian's protobuf-compiler; the plugins are built from the
# versions pinned in go.mod, so the output only changes when go.mod does.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go \
  && go build -o "$bin/protoc-gen-connect-go" connectrpc.com/connect/cmd/protoc-gen-connect-go)
out="$root/internal/envd/gen"
rm -rf "$out"
mkdir -p "$out"
cd "$here"
PATH="$bin:$PATH" protoc -I . \
  --go_out="$out" --go_opt=module=github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen \
  --connect-go_out="$out" --connect-go_opt=module=github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen \
  process/process.proto filesystem/filesystem.proto
