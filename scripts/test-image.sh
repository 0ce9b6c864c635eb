#!/usr/bin/env bash
# Builds the small offline base image the tests use, e2b-test-base:latest,
# in the Docker engine at DOCKER_HOST: a root file system made of Debian's
# busybox-static with every applet linked, /etc/passwd and /etc/group with
# root, /tmp with mode 1777, and no image config (no CMD, no ENV): the
# tests check how the local server copes with a base image that has no bash,
# no useradd and no command. No registry is needed.
# Skipped when the image is there with the same recipe version.
set -euo pipefail

IMAGE="${E2B_TEST_BASE_IMAGE:-e2b-test-base:latest}"
# Bump when the recipe below changes, so existing images are rebuilt.
RECIPE=2

if [[ "$(docker image inspect --format '{{ index .Config.Labels "e2b-test-base-recipe" }}' "$IMAGE" 2>/dev/null)" == "$RECIPE" ]]; then
	exit 0
fi

busybox=/bin/busybox
# The dynamic busybox of Debian's busybox package would not run without libc.
if ! "$busybox" --list >/dev/null 2>&1 || [[ "$(ldd "$busybox" 2>&1 || true)" != *"not a dynamic executable"* ]]; then
	echo "test-image.sh: $busybox is not a static busybox; install Debian's busybox-static" >&2
	exit 1
fi

root="$(mktemp -d)"
trap 'rm -rf "$root"' EXIT

mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,home,tmp,var/tmp,dev,proc,sys}
chmod 1777 "$root/tmp" "$root/var/tmp"
chmod 0700 "$root/root"
cp "$busybox" "$root/bin/busybox"
for applet in $("$busybox" --list); do
	[[ -e "$root/bin/$applet" ]] || ln -s busybox "$root/bin/$applet"
done

cat >"$root/etc/passwd" <<'TXT'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
TXT
cat >"$root/etc/group" <<'TXT'
root:x:0:
users:x:100:
nogroup:x:65534:
TXT
printf '/bin/sh\n' >"$root/etc/shells"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"

tar --numeric-owner --owner=0 --group=0 -C "$root" -c . |
	docker import \
		--change "LABEL e2b-test-base-recipe=$RECIPE" \
		- "$IMAGE" >/dev/null
echo "test-image.sh: built $IMAGE" >&2
