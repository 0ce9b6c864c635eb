#!/usr/bin/env bash
# Runs the README's two commands as a new user would: in a fresh Debian
# bookworm container (the debootstrap minbase of scripts/test-image.sh,
# nothing installed), on a fresh clone of HEAD with nothing beside it, with
# an empty Go module and build cache and an empty tool cache. Only the Go
# toolchain (read-only) and the Docker engine's socket come from this
# machine (the local server needs nothing else of the engine). Prints how
# long each command took.
#
#   scripts/fresh-machine.sh                 quick start, then the tests
#   scripts/fresh-machine.sh quickstart      only the quick start
#
#   FRESH_PARENT=dir/names   the clone's parent directories below the work
#                            directory (default "test": lint rules and tests
#                            must not match the checkout's own path); "" for none
#   FRESH_TERRAFORM=path     a Terraform binary put on the container's PATH,
#                            which the quick start then uses instead of
#                            building the pinned one (default: none on PATH)
#
# Needs a Docker engine at DOCKER_HOST (scripts/test.sh's dockerd.sh starts
# one) and root. The harness container itself gets the host network (to
# reach apt's mirror and the Go module proxy), CAP_SYS_ADMIN (debootstrap
# mounts /proc) and the host's user namespace (an engine with
# --userns-remap, as dockerd.sh starts, refuses the host network otherwise,
# and the harness writes the clone it mounts); the sandboxes the tests
# start are the local server's own.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

which="${1:-all}"
case "$which" in
all | quickstart) ;;
*)
	echo "usage: $0 [all|quickstart]" >&2
	exit 2
	;;
esac
if [[ -z "${DOCKER_HOST:-}" || "$DOCKER_HOST" != unix://* ]]; then
	echo "fresh-machine.sh: DOCKER_HOST must name the engine's unix socket" >&2
	exit 1
fi
socket="${DOCKER_HOST#unix://}"
goroot="$(go env GOROOT)"
image="${E2B_TEST_DEBIAN_IMAGE:-e2b-test-debian:bookworm}"
scripts/test-image.sh debian

root="$(mktemp -d "${TMPDIR:-/tmp}/e2b-fresh.XXXXXX")"
# The images are this run's own (below): removed however the run ends.
trap 'docker image rm "fresh-busybox:$$" "fresh-debian:$$" "fresh-arm64:$$" >/dev/null 2>&1 || true; rm -rf "$root"' EXIT
clone="$root/${FRESH_PARENT-test}/clone"
mkdir -p "$(dirname "$clone")" "$root/home" "$root/tmp"
git clone -q --no-local . "$clone"

# A machine whose network re-signs TLS has its CA under
# /usr/local/share/ca-certificates: the container's ca-certificates
# package (which the scripts install) picks it up from there.
cas=()
if [[ -d /usr/local/share/ca-certificates ]]; then
	cas=(-v /usr/local/share/ca-certificates:/usr/local/share/ca-certificates:ro)
fi

terraform=()
if [[ -n "${FRESH_TERRAFORM:-}" ]]; then
	terraform=(-v "$(realpath "$FRESH_TERRAFORM"):/usr/local/bin/terraform:ro")
	echo "fresh-machine: Terraform on PATH: $("$FRESH_TERRAFORM" version | head -n 1)"
else
	echo "fresh-machine: no Terraform on PATH"
fi

# Own image names, so that test-image.sh builds them from its recipe
# instead of finding this machine's.
docker run --rm --network host --userns host --cap-add SYS_ADMIN \
	-v "$goroot:$goroot:ro" \
	-v "$(dirname "$socket"):$(dirname "$socket")" \
	-v "$root:$root" \
	"${cas[@]}" "${terraform[@]}" \
	-e DOCKER_HOST="$DOCKER_HOST" \
	-e HOME="$root/home" -e TMPDIR="$root/tmp" \
	-e PATH="$goroot/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
	-e E2B_TEST_BASE_IMAGE="fresh-busybox:$$" -e E2B_TEST_DEBIAN_IMAGE="fresh-debian:$$" -e E2B_TEST_CLIENTS_IMAGE="fresh-clients:$$" -e E2B_TEST_ARM64_IMAGE="fresh-arm64:$$" \
	-e CI=true \
	-w "$clone" "$image" \
	bash -c "set -e; t0=\$SECONDS; scripts/quickstart.sh; t1=\$SECONDS
		echo \"fresh-machine: quickstart.sh took \$((t1 - t0)) s\"
		if [[ $which == all ]]; then scripts/test.sh; echo \"fresh-machine: test.sh took \$((SECONDS - t1)) s\"; fi"
