#!/usr/bin/env bash
# Installs the named Debian packages that are not installed yet, running
# `apt-get update` first only when something is missing; a no-op (and fast)
# when all are there.
#
#   scripts/install-packages.sh docker.io busybox-static
set -euo pipefail

missing=()
for pkg in "$@"; do
	if [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" != "install ok installed" ]]; then
		missing+=("$pkg")
	fi
done
if ((${#missing[@]} == 0)); then
	exit 0
fi

sudo=()
if ((EUID != 0)); then
	sudo=(sudo)
fi
printf '==> installing %s\n' "${missing[*]}" >&2
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
