#!/usr/bin/env bash
# Builds the four offline base images the tests use, in the Docker engine at
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
#       commands run offline; and wget, git, pip and requests, the network
#       clients the networking guide's table is measured with.
#   E2B_TEST_CLIENTS_IMAGE (default e2b-test-clients:bookworm) the Debian
#       image's packages and the network clients of the networking guide's
#       table it leaves out: Debian's Node (18, with its fetch) and Java 17's
#       JDK (its source launcher runs the HttpClient probe), from the mirror;
#       npm, pnpm and yarn from the npm registry (JavaScript, no binary).
#       Only TestDockerNetworkClients uses it.
#   E2B_TEST_ARM64_IMAGE  (default e2b-test-base-arm64:latest) the busybox
#       image again with Debian's arm64 busybox-static, its config saying
#       architecture arm64: what a sandbox of an arm64 image runs on an amd64
#       engine under emulation (scripts/qemu-binfmt.sh). Built without
#       emulation: the package is downloaded for arm64 into a private apt
#       state (this machine's dpkg does not learn the architecture) and the
#       image loaded as a docker-archive written here, since `docker import
#       --platform` does not set the architecture on every engine (20.10).
#
# Each image carries its recipe's version as a label and is skipped when the
# engine has it with the same version: bump a RECIPE below when its recipe
# changes. `scripts/test-image.sh busybox`, `debian`, `clients` or `arm64`
# builds only one.
set -euo pipefail

BUSYBOX_IMAGE="${E2B_TEST_BASE_IMAGE:-e2b-test-base:latest}"
BUSYBOX_RECIPE=2
DEBIAN_IMAGE="${E2B_TEST_DEBIAN_IMAGE:-e2b-test-debian:bookworm}"
DEBIAN_RECIPE=4
CLIENTS_IMAGE="${E2B_TEST_CLIENTS_IMAGE:-e2b-test-clients:bookworm}"
CLIENTS_RECIPE=1
# Debian's npm depends on nodejs:any, which debootstrap cannot resolve: npm
# comes from the npm registry like pnpm and yarn (whose versions run on
# Debian's Node 18).
CLIENTS_INCLUDE=nodejs,openjdk-17-jdk-headless
CLIENTS_NPM=(npm@10.9.4 pnpm@9.15.9 yarn@1.22.22)
ARM64_IMAGE="${E2B_TEST_ARM64_IMAGE:-e2b-test-base-arm64:latest}"
ARM64_RECIPE=1
# What E2B's base image has that the examples and tests need (DEBIAN_RECIPE 3:
# sudo), and the network clients of the networking guide's table (4: wget,
# git, pip and requests).
DEBIAN_INCLUDE=iproute2,curl,procps,python3,sudo,wget,git,python3-pip,python3-requests
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

# busybox_root DIR BUSYBOX: a root file system at DIR of the static busybox
# at BUSYBOX with the applets of this machine's busybox (the same Debian
# release has the same applets on every architecture, and a foreign one
# cannot be asked), root's account files and a sticky /tmp.
busybox_root() {
	local root="$1" busybox="$2" applet
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,home,tmp,var/tmp,dev,proc,sys}
	chmod 1777 "$root/tmp" "$root/var/tmp"
	chmod 0700 "$root/root"
	cp "$busybox" "$root/bin/busybox"
	for applet in $(/bin/busybox --list); do
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
}

# static_busybox: this machine's busybox is a static one, whose applets
# busybox_root lists. The dynamic busybox of Debian's busybox package would
# not run in an image without libc.
static_busybox() {
	if ! /bin/busybox --list >/dev/null 2>&1 || [[ "$(ldd /bin/busybox 2>&1 || true)" != *"not a dynamic executable"* ]]; then
		log "/bin/busybox is not a static busybox; install Debian's busybox-static"
		return 1
	fi
}

build_busybox() {
	local root
	static_busybox || return 1
	root="$(mktemp -d)"
	busybox_root "$root" /bin/busybox
	import_root "$root" "$BUSYBOX_IMAGE" "$BUSYBOX_RECIPE"
	rm -rf "$root"
}

# load_root DIR IMAGE RECIPE ARCH: DIR as IMAGE for linux/ARCH, loaded as a
# docker-archive (one layer, a config naming the architecture).
load_root() {
	local root="$1" image="$2" recipe="$3" arch="$4" archive diff config
	archive="$(mktemp -d)"
	tar --numeric-owner --owner=0 --group=0 -C "$root" -cf "$archive/layer.tar" .
	diff="$(sha256sum "$archive/layer.tar" | cut -d' ' -f1)"
	mkdir "$archive/$diff"
	mv "$archive/layer.tar" "$archive/$diff/layer.tar"
	printf '{"architecture":"%s","os":"linux","created":"1970-01-01T00:00:00Z","config":{"Labels":{"e2b-test-image-recipe":"%s"}},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
		"$arch" "$recipe" "$diff" >"$archive/config.json"
	config="$(sha256sum "$archive/config.json" | cut -d' ' -f1)"
	mv "$archive/config.json" "$archive/$config.json"
	printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$config" "$image" "$diff" >"$archive/manifest.json"
	tar -C "$archive" -c . | docker load -q >/dev/null
	rm -rf "$archive"
	log "built $image (linux/$arch)"
}

# build_arm64: the busybox image with Debian's arm64 busybox-static.
build_arm64() {
	local apt root deb
	static_busybox || return 1
	apt="$(mktemp -d)"
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial"
	local opts=(-qq -o APT::Architecture=arm64 -o APT::Architectures::=arm64
		-o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache"
		-o Dir::State::status=/dev/null -o APT::Sandbox::User=root)
	log "apt-get download busybox-static:arm64 (private apt state)"
	if ! apt-get "${opts[@]}" update || ! (cd "$apt" && apt-get "${opts[@]}" download busybox-static:arm64); then
		rm -rf "$apt"
		return 1
	fi
	deb="$(echo "$apt"/busybox-static_*_arm64.deb)"
	dpkg-deb -x "$deb" "$apt/pkg"
	root="$(mktemp -d)"
	busybox_root "$root" "$apt/pkg/bin/busybox"
	load_root "$root" "$ARM64_IMAGE" "$ARM64_RECIPE" arm64
	rm -rf "$root" "$apt"
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

# debian_root DIR PACKAGES: Debian minbase with PACKAGES (comma-separated)
# at DIR, made with debootstrap from this machine's mirror, without what a
# registry's debian image leaves out too.
debian_root() {
	local root="$1" include="$2" mirror
	mirror="$(apt_mirror | head -n1)"
	if [[ -z "$mirror" ]]; then
		log "no Debian mirror in /etc/apt/sources.list{,.d}: debootstrap needs one"
		return 1
	fi
	if ! command -v debootstrap >/dev/null; then
		log "debootstrap is missing; install Debian's debootstrap"
		return 1
	fi
	log "debootstrap --variant=minbase --include=$include $DEBIAN_SUITE from $mirror (a minute or two)"
	if ! debootstrap --variant=minbase --include="$include" "$DEBIAN_SUITE" "$root" "$mirror" >"$root.log" 2>&1; then
		cat "$root.log" >&2
		rm -f "$root.log"
		return 1
	fi
	rm -f "$root.log"
	# Downloaded packages and lists, logs; and the machine-id that systemd
	# would fill in.
	rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log "$root"/var/log/apt/*
	: >"$root/etc/machine-id"
}

# import_debian DIR IMAGE RECIPE: DIR as IMAGE with the debian image's PATH
# and command.
import_debian() {
	import_root "$1" "$2" "$3" \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["bash"]'
}

build_debian() {
	local root rc=0
	root="$(mktemp -d)"
	debian_root "$root" "$DEBIAN_INCLUDE" && import_debian "$root" "$DEBIAN_IMAGE" "$DEBIAN_RECIPE" || rc=$?
	rm -rf "$root"
	return "$rc"
}

build_clients() {
	local root rc=0
	if ! command -v npm >/dev/null; then
		log "npm is missing (npm, pnpm and yarn are installed into the image with it); install Debian's npm"
		return 1
	fi
	root="$(mktemp -d)"
	debian_root "$root" "$DEBIAN_INCLUDE,$CLIENTS_INCLUDE" &&
		log "npm install --global ${CLIENTS_NPM[*]} into the image" &&
		npm install --global --prefix "$root/usr/local" --no-audit --no-fund --loglevel=error "${CLIENTS_NPM[@]}" >&2 &&
		import_debian "$root" "$CLIENTS_IMAGE" "$CLIENTS_RECIPE" || rc=$?
	rm -rf "$root"
	return "$rc"
}

which="${1:-all}"
case "$which" in
all | busybox | debian | clients | arm64) ;;
*)
	echo "usage: $0 [all|busybox|debian|clients|arm64]" >&2
	exit 2
	;;
esac
if [[ $which == all || $which == busybox ]] && ! up_to_date "$BUSYBOX_IMAGE" "$BUSYBOX_RECIPE"; then
	build_busybox
fi
if [[ $which == all || $which == debian ]] && ! up_to_date "$DEBIAN_IMAGE" "$DEBIAN_RECIPE"; then
	build_debian
fi
if [[ $which == all || $which == clients ]] && ! up_to_date "$CLIENTS_IMAGE" "$CLIENTS_RECIPE"; then
	build_clients
fi
if [[ $which == all || $which == arm64 ]] && ! up_to_date "$ARM64_IMAGE" "$ARM64_RECIPE"; then
	build_arm64
fi
