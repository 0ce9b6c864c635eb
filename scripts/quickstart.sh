#!/usr/bin/env bash
# Quick start: builds the provider and runs Terraform with it on
# examples/provider, through a CLI configuration whose dev_overrides point
# Terraform at the binary just built (no registry needed).
#
# For now the provider has its configuration only, so this shows the provider
# being built, found by Terraform, validated and applied; it grows into a
# template build on the local server as the resources land.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '==> %s\n' "$*" >&2; }

if ! command -v go >/dev/null; then
	echo "quickstart.sh: Go is needed (https://go.dev/dl/)" >&2
	exit 1
fi

terraform="$(scripts/tools.sh terraform)"

work="$(mktemp -d /tmp/e2b-quickstart.XXXXXX)"
trap 'rm -rf "$work"' EXIT

log "building the provider"
mkdir -p "$work/bin"
CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=0.0.0-quickstart" -o "$work/bin/terraform-provider-e2b" .

cat >"$work/terraformrc" <<EOF
provider_installation {
  dev_overrides {
    "e2b-terraform/e2b" = "$work/bin"
  }
  direct {}
}
EOF
export TF_CLI_CONFIG_FILE="$work/terraformrc" CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1

cp -r examples/provider "$work/config"
tf() { "$terraform" -chdir="$work/config" "$@"; }

# With dev_overrides, init has nothing to download for this provider.
log "terraform init"
tf init -input=false -no-color >/dev/null
log "terraform validate"
tf validate -no-color
log "terraform apply"
tf apply -auto-approve -input=false -no-color
log "the provider's configuration, as Terraform reads it from the binary:"
tf providers schema -json | grep -o '"[a-z_]*":{"type":"[a-z]*"[^}]*}' >&2
log "done with $("$terraform" version | head -1)"
