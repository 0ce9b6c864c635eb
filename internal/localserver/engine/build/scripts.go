package build

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
