#!/usr/bin/env bash
# Prints the path of a pinned tool binary, building it from source with
# `go install` into the user's cache the first time (no prebuilt downloads).
#
#   scripts/tools.sh terraform       Terraform CLI for acceptance tests and docs
#   scripts/tools.sh tofu            OpenTofu CLI for acceptance tests (and the
#                                    ephemeral resource's schema in the docs)
#   scripts/tools.sh terraform-oldest  the oldest Terraform and OpenTofu the
#   scripts/tools.sh tofu-oldest       provider supports, on which test.sh
#                                    runs the outside-change and upgrade tests
#   scripts/tools.sh golangci-lint   the linter
#   scripts/tools.sh runsc           gVisor's OCI runtime, which the scripts'
#                                    Docker engines register (scripts/dockerd.sh)
#
# The cache is ${XDG_CACHE_HOME:-$HOME/.cache}/terraform-provider-e2b, one
# directory per tool and version, so a version bump builds afresh. The CLIs
# are linked with version.dev=no, as their releases are: they report 1.8.5,
# not 1.8.5-dev (the -release in their directory names marks that recipe).
set -euo pipefail

TERRAFORM_VERSION=1.8.5
OPENTOFU_VERSION=1.12.6
# The oldest CLIs of the README's version table: Terraform 1.5.7, the last
# release under the MPL, and the last patch of OpenTofu 1.8.
TERRAFORM_OLDEST_VERSION=1.5.7
OPENTOFU_OLDEST_VERSION=1.8.11
GOLANGCI_LINT_VERSION=v2.15.0
# gVisor publishes no tagged Go module versions: a pseudo-version of its
# master branch (2026-09-05), which has the systrap platform and runs
# under Docker 20.10 with --network=none and --overlay2=none.
RUNSC_VERSION=v0.0.0-20260905035102-160fafc42237

cache="${XDG_CACHE_HOME:-$HOME/.cache}/terraform-provider-e2b"

case "${1:-}" in
terraform | terraform-oldest)
	name=terraform
	version=$TERRAFORM_VERSION
	[[ $1 == terraform-oldest ]] && version=$TERRAFORM_OLDEST_VERSION
	pkg="github.com/hashicorp/terraform@v${version}"
	ldflags="-s -w -X github.com/hashicorp/terraform/version.dev=no"
	dir="$cache/terraform-v${version}-release"
	;;
tofu | tofu-oldest)
	name=tofu
	version=$OPENTOFU_VERSION
	[[ $1 == tofu-oldest ]] && version=$OPENTOFU_OLDEST_VERSION
	pkg="github.com/opentofu/opentofu@v${version}"
	ldflags="-s -w -X github.com/opentofu/opentofu/version.dev=no"
	dir="$cache/tofu-v${version}-release"
	;;
golangci-lint)
	name=golangci-lint
	pkg="github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}"
	ldflags=""
	dir="$cache/golangci-lint-${GOLANGCI_LINT_VERSION}"
	;;
runsc)
	name=runsc
	pkg="gvisor.dev/gvisor/runsc@${RUNSC_VERSION}"
	ldflags=""
	dir="$cache/runsc-${RUNSC_VERSION}"
	;;
*)
	echo "usage: $0 terraform|terraform-oldest|tofu|tofu-oldest|golangci-lint|runsc" >&2
	exit 2
	;;
esac

if [[ ! -x "$dir/$name" ]]; then
	echo "building $pkg (first run only; takes a few minutes)" >&2
	mkdir -p "$cache"
	tmp="$(mktemp -d "$cache/.build-$name.XXXXXX")"
	trap 'rm -rf "$tmp"' EXIT
	# GOFLAGS from the caller (say -mod=vendor) must not apply to the tool's module.
	export GOFLAGS= CGO_ENABLED=0
	if [[ $name == tofu ]]; then
		# `go install` refuses OpenTofu (its go.mod has a replace directive), so
		# it is built inside a writable copy of its module from the proxy.
		src="$(cd "$tmp" && go mod download -json "$pkg" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
		cp -r "$src" "$tmp/src"
		chmod -R u+w "$tmp/src"
		(cd "$tmp/src" && go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/$name" ./cmd/tofu) >&2
	else
		GOBIN="$tmp/bin" go install -trimpath -ldflags "$ldflags" "$pkg" >&2
	fi
	mkdir -p "$dir"
	# Rename into place so an interrupted build never leaves a half binary.
	mv -f "$tmp/bin/$name" "$dir/$name"
fi
echo "$dir/$name"
