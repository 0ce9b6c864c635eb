#!/usr/bin/env bash
# Quick start, end to end on one machine (Debian; it installs docker.io and
# debootstrap with apt when missing): builds the provider, starts the local
# E2B-compatible server it carries (on a free loopback port, with a temporary
# data directory, on the Docker engine at DOCKER_HOST or a private one),
# builds the offline Debian base image, then applies examples/quickstart with
# Terraform through dev_overrides: a template built from a context directory
# with COPY and RUN, a tag on the build, and a command run in a sandbox from
# that tag, whose output is printed. Then it destroys everything and stops
# what it started. A Terraform 1.8 or later on PATH is used; otherwise the
# pinned one is built from source (scripts/tools.sh).
#
#   scripts/quickstart.sh            the whole round trip
#   KEEP=1 scripts/quickstart.sh     leave server and state up, print how to reach them
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '==> %s\n' "$*" >&2; }

if ! command -v go >/dev/null; then
	echo "quickstart.sh: Go is needed (https://go.dev/dl/)" >&2
	exit 1
fi

cache="${XDG_CACHE_HOME:-$HOME/.cache}/terraform-provider-e2b"
mkdir -p "$cache"
work="$(mktemp -d "${TMPDIR:-/tmp}/e2b-qs.XXXXXX")" # short: it holds unix sockets
server_pid=""
applied=""

# shellcheck source=scripts/dockerd.sh
source scripts/dockerd.sh

# stop_server stops the server by its PID: SIGTERM, SIGKILL after 30 s.
stop_server() {
	if [[ -z "$server_pid" ]]; then
		return 0
	fi
	kill -TERM "$server_pid" 2>/dev/null || true
	(sleep 30 && kill -KILL "$server_pid" 2>/dev/null) &
	local killer=$!
	wait "$server_pid" 2>/dev/null || true
	kill "$killer" 2>/dev/null || true
	wait "$killer" 2>/dev/null || true
	server_pid=""
}

cleanup() {
	local rc=$?
	# Clean up as much as possible, whatever fails on the way.
	set +e
	if [[ -n "${KEEP:-}" && $rc == 0 ]]; then
		return 0
	fi
	if [[ -n "$applied" ]]; then
		log "terraform destroy (cleanup)"
		tf destroy -auto-approve -input=false -no-color >/dev/null 2>&1 || true
	fi
	stop_server
	stop_dockerd
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A Docker engine, and debootstrap for the offline Debian base image.
scripts/install-packages.sh docker.io debootstrap ca-certificates

# supported_terraform prints the path of a Terraform on PATH whose version
# this provider supports (1.8 or later), and fails when there is none.
supported_terraform() {
	local path version major minor
	path="$(command -v terraform)" || return 1
	version="$("$path" version -json 2>/dev/null | sed -n 's/.*"terraform_version": *"\([^"]*\)".*/\1/p')"
	IFS=. read -r major minor _ <<<"$version"
	[[ "$major" =~ ^[0-9]+$ && "$minor" =~ ^[0-9]+$ ]] || return 1
	((major > 1 || (major == 1 && minor >= 8))) || return 1
	echo "$path"
}

# A supported Terraform on PATH saves building the pinned one from source
# (minutes on a fresh machine).
if terraform="$(supported_terraform)"; then
	log "Terraform on PATH: $terraform"
else
	log "no Terraform 1.8 or later on PATH: the pinned one (built from source the first time)"
	terraform="$(scripts/tools.sh terraform)"
fi

log "building the provider"
mkdir -p "$work/bin"
CGO_ENABLED=0 go build -ldflags "-X main.version=0.0.0-quickstart" -o "$work/bin/terraform-provider-e2b" .

start_dockerd
export E2B_TEST_DEBIAN_IMAGE="${E2B_TEST_DEBIAN_IMAGE:-e2b-test-debian:bookworm}"
log "base image $E2B_TEST_DEBIAN_IMAGE"
scripts/test-image.sh debian

log "starting the local E2B server"
mkdir -p "$work/data"
# The data directory goes at the end, so no build layer could serve a later
# build: none is kept (on a shared engine they would stay behind).
"$work/bin/terraform-provider-e2b" server --listen 127.0.0.1:0 --data-dir "$work/data" \
	--layer-cache-size -1 >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
for ((i = 0; i < 240; i++)); do
	if grep -q '^E2B_API_KEY=' "$work/server.out" 2>/dev/null; then
		break
	fi
	if ! kill -0 "$server_pid" 2>/dev/null; then
		cat "$work/server.log" >&2
		echo "quickstart.sh: the server exited" >&2
		exit 1
	fi
	sleep 0.5
done
# The server prints E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN and E2B_API_KEY,
# the variables the provider (and the E2B SDKs) read.
while IFS='=' read -r key value; do
	case "$key" in
	E2B_API_URL | E2B_SANDBOX_URL | E2B_DOMAIN | E2B_API_KEY) export "$key=$value" ;;
	esac
done <"$work/server.out"
if [[ -z "${E2B_API_KEY:-}" ]]; then
	cat "$work/server.log" >&2
	echo "quickstart.sh: the server did not report its address" >&2
	exit 1
fi
log "server at $E2B_API_URL (data in $work/data)"
# The runtime the server chose (--runtime auto: gVisor when the engine
# offers it; scripts/dockerd.sh registers runsc in the engine it starts).
runtime="$(sed -n 's/^ *"runtime": "\(.*\)",$/\1/p' "$work/data/server.json")"
if grep -q '^ *"gvisor": true' "$work/data/server.json"; then
	log "sandboxes run under $runtime: gVisor, a kernel of their own"
else
	log "sandboxes run under $runtime, on this machine's kernel:"
	grep 'level=WARN' "$work/server.log" >&2 || true
fi

cat >"$work/terraformrc" <<RC
provider_installation {
  dev_overrides {
    "e2b-terraform/e2b" = "$work/bin"
  }
  direct {}
}
RC
export TF_CLI_CONFIG_FILE="$work/terraformrc" CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1

cp -r examples/quickstart "$work/config"
tf() { "$terraform" -chdir="$work/config" "$@"; }

# No terraform init: with dev_overrides the provider needs no installation,
# and init would still ask the registry about it.
log "terraform apply"
applied=1
tf apply -auto-approve -input=false -no-color -var "base_image=$E2B_TEST_DEBIAN_IMAGE"
if ! tf plan -input=false -no-color -detailed-exitcode -var "base_image=$E2B_TEST_DEBIAN_IMAGE" >"$work/plan.txt"; then
	cat "$work/plan.txt" >&2
	echo "quickstart.sh: a second plan right after apply is not empty" >&2
	exit 1
fi
log "a second plan finds nothing to do"
log "output of the command run in a sandbox of the template:"
tf output -raw hello

if [[ -n "${KEEP:-}" ]]; then
	log "KEEP is set: server (PID $server_pid) and state stay up"
	echo "export TF_CLI_CONFIG_FILE=$TF_CLI_CONFIG_FILE E2B_API_URL=$E2B_API_URL E2B_SANDBOX_URL=$E2B_SANDBOX_URL E2B_API_KEY=$E2B_API_KEY"
	echo "$terraform -chdir=$work/config destroy; kill $server_pid"
	exit 0
fi

log "terraform destroy"
tf destroy -auto-approve -input=false -no-color -var "base_image=$E2B_TEST_DEBIAN_IMAGE" >/dev/null
applied=""
stop_server
# A destroy and a stop leave nothing of the server on the engine (with
# --layer-cache-size -1 it keeps no layer cache either).
left="$("$work/bin/terraform-provider-e2b" server prune --list --data-dir "$work/data")"
if ! grep -q '^0 objects' <<<"$left"; then
	echo "$left" >&2
	echo "quickstart.sh: the server left the objects above on the engine; removing them" >&2
	"$work/bin/terraform-provider-e2b" server prune --data-dir "$work/data" >&2
	exit 1
fi
log "nothing of the server is left on the engine"
log "done"
