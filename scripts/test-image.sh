#!/usr/bin/env bash
# Builds the small offline base image the tests use, e2b-test-base:latest,
# in the Docker engine at DOCKER_HOST: a root file system made of Debian's
# busybox-static with every applet linked, /etc/passwd and /etc/group with
# root, /tmp with mode 1777, and two small shell scripts for what E2B's
# builder expects of a base image and busybox lacks: /bin/bash (runs busybox
# sh; E2B runs steps as `bash -l -c <command>`) and /usr/sbin/useradd (the
# options E2B's USER step uses). No registry is needed.
# Skipped when the image is there with the same recipe version.
set -euo pipefail

IMAGE="${E2B_TEST_BASE_IMAGE:-e2b-test-base:latest}"
# Bump when the recipe below changes, so existing images are rebuilt.
RECIPE=1

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
cat >"$root/bin/bash" <<'SH'
#!/bin/sh
# Not bash: busybox sh, enough for the `bash -l -c <command>` of E2B builds.
exec /bin/sh "$@"
SH
cat >"$root/usr/sbin/useradd" <<'SH'
#!/bin/sh
# Minimal useradd: [-m|--create-home] [-s|--shell SHELL] [-u|--uid UID]
# [-G|--groups G1,G2] [-U|--user-group] NAME. Always creates the user's own
# group, as Debian's useradd does by default.
set -e
home_create=0 shell=/bin/sh uid= groups=
while [ $# -gt 1 ]; do
	case "$1" in
	-m | --create-home) home_create=1 ;;
	-U | --user-group) ;;
	-s | --shell) shift; shell="$1" ;;
	-u | --uid) shift; uid="$1" ;;
	-G | --groups) shift; groups="$1" ;;
	*) echo "useradd: unsupported option $1" >&2; exit 2 ;;
	esac
	shift
done
name="$1"
if grep -q "^$name:" /etc/passwd; then echo "useradd: user '$name' already exists" >&2; exit 9; fi
if [ -z "$uid" ]; then
	uid=$(awk -F: 'BEGIN { m = 999 } $3 >= 1000 && $3 < 60000 && $3 > m { m = $3 } END { print m + 1 }' /etc/passwd /etc/group)
fi
echo "$name:x:$uid:" >>/etc/group
echo "$name:x:$uid:$uid::/home/$name:$shell" >>/etc/passwd
echo "$name:!:19000:0:99999:7:::" >>/etc/shadow
for g in $(echo "$groups" | tr ',' ' '); do
	grep -q "^$g:" /etc/group || echo "$g:x:$(awk -F: 'BEGIN { m = 99 } $3 < 1000 && $3 > m { m = $3 } END { print m + 1 }' /etc/group):" >>/etc/group
	sed -i "/^$g:/ { s/:\$/:$name/; t; s/\$/,$name/ }" /etc/group
done
if [ "$home_create" = 1 ]; then
	mkdir -p "/home/$name"
	chown "$uid:$uid" "/home/$name"
	chmod 0750 "/home/$name"
fi
SH
chmod 0755 "$root/bin/bash" "$root/usr/sbin/useradd"

cat >"$root/etc/passwd" <<'TXT'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
TXT
cat >"$root/etc/group" <<'TXT'
root:x:0:
users:x:100:
nogroup:x:65534:
TXT
: >"$root/etc/shadow"
chmod 0640 "$root/etc/shadow"
printf '/bin/sh\n/bin/bash\n' >"$root/etc/shells"
printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"

tar --numeric-owner --owner=0 --group=0 -C "$root" -c . |
	docker import \
		--change "LABEL e2b-test-base-recipe=$RECIPE" \
		--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		--change 'CMD ["/bin/sh"]' \
		- "$IMAGE" >/dev/null
echo "test-image.sh: built $IMAGE" >&2
