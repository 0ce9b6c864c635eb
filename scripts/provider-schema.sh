#!/usr/bin/env bash
# Prints the provider's schemas as JSON, as OpenTofu reports them, for
# `tfplugindocs generate --providers-schema` (make docs). OpenTofu rather
# than the pinned Terraform 1.8, which reports no ephemeral resources.
# tfplugindocs looks the provider up as registry.terraform.io/hashicorp/e2b,
# so that is the address the configuration gives it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tofu="$(scripts/tools.sh tofu)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

CGO_ENABLED=0 go build -o "$work/bin/terraform-provider-e2b" .
cat >"$work/cli.tfrc" <<RC
provider_installation {
  dev_overrides {
    "registry.terraform.io/hashicorp/e2b" = "$work/bin"
  }
  direct {}
}
RC
mkdir "$work/config"
cat >"$work/config/main.tf" <<'TF'
terraform {
  required_providers {
    e2b = { source = "registry.terraform.io/hashicorp/e2b" }
  }
}
TF
# dev_overrides need no init; the warning about them goes to stderr.
TF_CLI_CONFIG_FILE="$work/cli.tfrc" CHECKPOINT_DISABLE=1 \
	"$tofu" -chdir="$work/config" providers schema -json 2>"$work/stderr" || {
	cat "$work/stderr" >&2
	exit 1
}
