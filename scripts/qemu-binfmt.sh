#!/usr/bin/env bash
# Lets this machine's kernel run arm64 (aarch64) executables through
# Debian's qemu-user-static, so that a Docker engine on amd64 runs arm64
# images (design/engine-channel.md, Architectures). Idempotent: a no-op
# when qemu-aarch64 is registered with the F (fix-binary) flag already.
#
# F makes the kernel open the interpreter when it is registered, so that
# it works inside containers, whose file systems do not have it. The
# registration is the kernel's, for every process and engine on the
# machine, until the next boot.
#
# Exits 0 when emulation is registered, 3 when this kernel has no
# binfmt_misc (emulation is impossible here; the arm64 test skips), 1 on
# any other failure (e.g. no permission to mount binfmt_misc or to
# register: the arm64 test then reports its prerequisite missing).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

binfmt=/proc/sys/fs/binfmt_misc
name=qemu-aarch64
# The package's own description of the format: magic, mask, interpreter.
format=/usr/share/binfmts/$name

log() { printf 'qemu-binfmt.sh: %s\n' "$*" >&2; }

sudo=()
if ((EUID != 0)); then
	sudo=(sudo)
fi

# A kernel that builds binfmt_misc as a module lists it once loaded.
if ! grep -qw binfmt_misc /proc/filesystems; then
	"${sudo[@]}" modprobe binfmt_misc 2>/dev/null || true
fi
if ! grep -qw binfmt_misc /proc/filesystems; then
	log "this kernel has no binfmt_misc: it cannot run arm64 executables"
	exit 3
fi

# registered: qemu-aarch64 is enabled with the fix-binary flag.
registered() {
	[[ -r "$binfmt/$name" ]] && grep -qx enabled "$binfmt/$name" && grep -q '^flags: .*F' "$binfmt/$name"
}

if [[ ! -e "$binfmt/status" ]]; then
	"${sudo[@]}" mount -t binfmt_misc binfmt_misc "$binfmt"
fi
if registered; then
	exit 0
fi
scripts/install-packages.sh qemu-user-static

# field NAME: the value of NAME in the package's format file.
field() { awk -v k="$1" '$1 == k { print $2; exit }' "$format"; }

interpreter="$(field interpreter)"
magic="$(field magic)"
mask="$(field mask)"
offset="$(field offset)"
if [[ -z "$interpreter" || -z "$magic" ]]; then
	log "$format does not describe $name"
	exit 1
fi
flags=F
[[ "$(field preserve)" == yes ]] && flags+=P
[[ "$(field credentials)" == yes ]] && flags+=C

if [[ -e "$binfmt/$name" ]]; then
	# Registered without F (e.g. by binfmt-support's defaults): in a
	# container the interpreter would not be found.
	log "replacing the registration of $name, which lacks the F flag"
	echo -1 | "${sudo[@]}" tee "$binfmt/$name" >/dev/null
fi
# The kernel decodes the \x escapes of magic and mask itself.
printf ':%s:M:%s:%s:%s:%s:%s' "$name" "${offset:-0}" "$magic" "$mask" "$interpreter" "$flags" |
	"${sudo[@]}" tee "$binfmt/register" >/dev/null
if ! registered; then
	log "registering $name did not take"
	exit 1
fi
log "registered $name ($interpreter, flags $flags)"
