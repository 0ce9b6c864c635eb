#!/usr/bin/env bash
# Builds the two offline base images the tests use, in the Docker engine at
# DOCKER_HOST, with no image registry:
#
#   E2B_TEST_BASE_IMAGE   (default e2b-test-base:latest) a root file system of
#       Debian's busybox-static with every applet linked, /etc/passwd and
#       /etc/group with root, /tmp with mode 1777, and no image config (no CMD,
#       no ENV): how the local server copes with an image that has no bash, no
#       useradd and no command.
#   E2B_TEST_DEBIAN_IMAGE (default e2b-test-debian:bookworm) Debian bookworm
#       minbase made with debootstrap from the mirror this machine's apt uses:
#       bash, apt, useradd, as the images E2B templates are built from, and
#       the tools E2B's base image has that the SDK's ready commands run (ss,
#       curl, pgrep) and python3, so that the examples' servers and ready
#       commands run offline.
#
# Each image carries its recipe's version as a label and is skipped when the
# engine has it with the same version: bump a RECIPE below when its recipe
# changes. `scripts/test-image.sh busybox` or `debian` builds only one.
set -euo pipefail

BUSYBOX_IMAGE="${E2B_TEST_BASE_IMAGE:-e2b-test-base:latest}"
BUSYBOX_RECIPE=2
DEBIAN_IMAGE="${E2B_TEST_DEBIAN_IMAGE:-e2b-test-debian:bookworm}"
DEBIAN_RECIPE=2
# What E2B's base image has that the examples need (DEBIAN_RECIPE 2).
DEBIAN_INCLUDE=iproute2,curl,procps,python3
DEBIAN_SUITE=bookworm

log() { printf 'test-image.sh: %s\n' "$*" >&2; }

# up_to_date IMAGE RECIPE: the engine has IMAGE built by this RECIPE version.
up_to_date() {
	[[ "$(docker image inspect --format '{{ index .Config.Labels "e2b-test-image-recipe" }}' "$1" 2>/dev/null)" == "$2" ]]
}

# import_root DIR IMAGE RECIPE [docker import --change ...]: DIR as IMAGE,
# owned by root whoever ran this.
import_root() {
	local root="$1" image="$2" recipe="$3"
	shift 3
	tar --numeric-owner --owner=0 --group=0 -C "$root" -c . |
		docker import --change "LABEL e2b-test-image-recipe=$recipe" "$@" - "$image" >/dev/null
	log "built $image"
}

build_busybox() {
	local busybox=/bin/busybox root
	# The dynamic busybox of Debian's busybox package would not run without libc.
	if ! "$busybox" --list >/dev/null 2>&1 || [[ "$(ldd "$busybox" 2>&1 || true)" != *"not a dynamic executable"* ]]; then
		log "$busybox is not a static busybox; install Debian's busybox-static"
		return 1
	fi
	root="$(mktemp -d)"
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,home,tmp,var/tmp,dev,proc,sys}
	chmod 1777 "$root/tmp" "$root/var/tmp"
	chmod 0700 "$root/root"
	cp "$busybox" "$root/bin/busybox"
	local applet
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
	import_root "$root" "$BUSYBOX_IMAGE" "$BUSYBOX_RECIPE"
	rm -rf "$root"
}

# apt_mirror prints the first Debian mirror of this machine's apt sources
# (deb822 .sources files or one-line sources.list), so that debootstrap
# reaches the same mirror apt-get does.
apt_mirror() {
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -r "$f" ]] || continue
		awk '/^URIs:/ && $2 !~ /security/ { print $2; exit }' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[[ -r "$f" ]] || continue
		awk '$1 == "deb" && $2 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' "$f"
	done
}

build_debian() {
	local mirror root
	mirror="$(apt_mirror | head -n1)"
	if [[ -z "$mirror" ]]; then
		log "no Debian mirror in /etc/apt/sources.list{,.d}: debootstrap needs one"
		return 1
	fi
	if ! command -v debootstrap >/dev/null; then
		log "debootstrap is missing; install Debian's debootstrap"
		return 1
	fi
	root="$(mktemp -d)"
	log "debootstrap --variant=minbase --include=$DEBIAN_INCLUDE $DEBIAN_SUITE from $mirror (a minute or two)"
	if ! debootstrap --variant=minbase --include="$DEBIAN_INCLUDE" "$DEBIAN_SUITE" "$root" "$mirror" >"$root.log" 2>&1; then
		cat "$root.log" >&2
		rm -rf "$root" "$root.log"
		return 1
	fi
	rm -f "$root.log"
	# What a registry's debian image leaves out too: downloaded packages and
	# lists, logs; and the machine-id that systemd would fill in.
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log "$root"/var/log/apt/*
	: >"$root/etc/machine-id"
	import_root "$root" "$DEBIAN_IMAGE" "$DEBIAN_RECIPE" \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["bash"]'
	rm -rf "$root"
}

which="${1:-all}"
case "$which" in
all | busybox | debian) ;;
*)
	echo "usage: $0 [all|busybox|debian]" >&2
	exit 2
	;;
esac
if [[ $which != debian ]] && ! up_to_date "$BUSYBOX_IMAGE" "$BUSYBOX_RECIPE"; then
	build_busybox
fi
if [[ $which != busybox ]] && ! up_to_date "$DEBIAN_IMAGE" "$DEBIAN_RECIPE"; then
	build_debian
fi
