#!/usr/bin/env bash
# Prints the path of a pinned tool binary, building it from source with
# `go install` into the user's cache the first time (no prebuilt downloads).
#
#   scripts/tools.sh terraform       Terraform CLI for acceptance tests and docs
#   scripts/tools.sh golangci-lint   the linter
#
# The cache is ${XDG_CACHE_HOME:-$HOME/.cache}/terraform-provider-e2b, one
# directory per tool and version, so a version bump builds afresh.
set -euo pipefail

TERRAFORM_VERSION=1.8.5
GOLANGCI_LINT_VERSION=v2.15.0

cache="${XDG_CACHE_HOME:-$HOME/.cache}/terraform-provider-e2b"

case "${1:-}" in
terraform)
	name=terraform
	pkg="github.com/hashicorp/terraform@v${TERRAFORM_VERSION}"
	dir="$cache/terraform-v${TERRAFORM_VERSION}"
	;;
golangci-lint)
	name=golangci-lint
	pkg="github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}"
	dir="$cache/golangci-lint-${GOLANGCI_LINT_VERSION}"
	;;
*)
	echo "usage: $0 terraform|golangci-lint" >&2
	exit 2
	;;
esac

if [[ ! -x "$dir/$name" ]]; then
	echo "building $pkg (first run only; takes a few minutes)" >&2
	mkdir -p "$cache"
	tmp="$(mktemp -d "$cache/.build-$name.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	# GOFLAGS from the caller (say -mod=vendor) must not apply to the tool's module.
	GOBIN="$tmp/bin" GOFLAGS= CGO_ENABLED=0 go install "$pkg" >&2
	mkdir -p "$dir"
	# Rename into place so an interrupted build never leaves a half binary.
	mv -f "$tmp/bin/$name" "$dir/$name"
fi
echo "$dir/$name"
