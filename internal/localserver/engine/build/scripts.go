package engine

// Helper scripts the build runs as root with /bin/sh through envd. They use
// only POSIX sh and tools busybox has too, because images range from
// Debian to a bare busybox root file system. Arguments come as "$1"...,
// never spliced into the script text.

// ensureUserScript creates user $1 when missing: useradd where it exists,
// else busybox adduser, else by writing the account files (minimal images
// have neither). With $2 = true the user gets admin rights: membership of
// the sudo/wheel/admin groups the image has, and passwordless sudo when
// sudo is installed. It prints what it did.
const ensureUserScript = `set -e
u="$1"; admin="$2"
if ! id -u "$u" >/dev/null 2>&1; then
	shell=/bin/sh
	[ -x /bin/bash ] && shell=/bin/bash
	if command -v useradd >/dev/null 2>&1; then
		useradd --create-home --shell "$shell" "$u"
	elif adduser -D -s "$shell" "$u" >/dev/null 2>&1; then
		:
	else
		uid=1000
		while grep -q "^[^:]*:[^:]*:$uid:" /etc/passwd /etc/group 2>/dev/null; do uid=$((uid + 1)); done
		echo "$u:x:$uid:$uid::/home/$u:$shell" >>/etc/passwd
		grep -q "^$u:" /etc/group 2>/dev/null || echo "$u:x:$uid:" >>/etc/group
		mkdir -p "/home/$u"
		chown "$uid:$uid" "/home/$u"
	fi
	echo "Created user $u"
fi
[ "$admin" = true ] || exit 0
for g in sudo wheel admin; do
	grep -q "^$g:" /etc/group 2>/dev/null || continue
	if command -v usermod >/dev/null 2>&1; then
		usermod -aG "$g" "$u"
	else
		awk -F: -v OFS=: -v g="$g" -v u="$u" '$1 == g { n = split($4, m, ","); found = 0; for (i = 1; i <= n; i++) if (m[i] == u) found = 1; if (!found) $4 = ($4 == "" ? u : $4 "," u) } { print }' /etc/group >/etc/group.e2b
		cat /etc/group.e2b >/etc/group
		rm -f /etc/group.e2b
	fi
done
if [ -d /etc/sudoers.d ]; then
	echo "$u ALL=(ALL:ALL) NOPASSWD: ALL" >"/etc/sudoers.d/90-e2b-$u"
	chmod 0440 "/etc/sudoers.d/90-e2b-$u"
fi
`

// mkdirOwnedScript creates directory $1 and gives what it created to user
// $2 (and the user's primary group).
const mkdirOwnedScript = `set -e
d="$1"; u="$2"
first=
p="$d"
while [ ! -e "$p" ] && [ ! -L "$p" ]; do first="$p"; p=$(dirname "$p"); done
mkdir -p "$d"
if [ -n "$first" ]; then chown -R "$u:$(id -g "$u")" "$first"; fi
`

// placeScript puts extracted files where a COPY step says, as Docker does:
// $1 source (file, symlink or directory), $2 absolute destination, $3 "1"
// when the destination is a directory to copy into (trailing slash), $4
// owner (user or user:group), $5 mode (octal, may be empty), $6 the
// source as the template wrote it, for messages.
//   - A directory's contents are merged into the destination (moved there,
//     one rename, when it does not exist): the destination keeps its owner
//     and mode, files are overwritten, symlinks stay links.
//   - A file or symlink goes to the destination, or into it when it is a
//     directory or $3 says so.
//
// What was copied (and directories created for it) gets the owner and,
// when given, the mode; symlinks keep their mode.
const placeScript = `set -e
src="$1"; dest="$2"; into="$3"; owner="$4"; mode="$5"
case "$owner" in
*:*) ;;
*) owner="$owner:$(id -g "$owner")" ;;
esac
if [ ! -e "$src" ] && [ ! -L "$src" ]; then
	echo "no uploaded files match $6" >&2
	exit 1
fi
if [ -d "$src" ] && [ ! -L "$src" ]; then
	chown -hR "$owner" "$src"
	[ -z "$mode" ] || find "$src" ! -type l -exec chmod "$mode" {} +
	if [ ! -e "$dest" ] && [ ! -L "$dest" ]; then
		mkdir -p "$(dirname "$dest")"
		mv "$src" "$dest"
		exit 0
	fi
	if [ ! -d "$dest" ]; then
		echo "$dest exists and is not a directory" >&2
		exit 1
	fi
	keep=$(stat -L -c '%u:%g %a' "$dest")
	(cd "$src" && tar -cf - .) | (cd "$dest" && tar -xf -)
	chown "${keep% *}" "$dest"
	chmod "${keep#* }" "$dest"
	exit 0
fi
if [ "$into" = 1 ] || [ -d "$dest" ]; then
	if [ ! -e "$dest" ]; then
		mkdir -p "$dest"
		chown "$owner" "$dest"
	fi
	target="$dest/$(basename "$src")"
else
	mkdir -p "$(dirname "$dest")"
	target="$dest"
fi
if [ -d "$target" ] && [ ! -L "$target" ]; then
	echo "cannot overwrite the directory $target with a file" >&2
	exit 1
fi
rm -f "$target"
mv "$src" "$target"
chown -h "$owner" "$target"
if [ -n "$mode" ] && [ ! -L "$target" ]; then chmod "$mode" "$target"; fi
`
