#!/usr/bin/env bash
# Builds the binary for every GOOS/GOARCH pair .goreleaser.yml releases and
# runs go vet for darwin and windows, so that a Linux-only call in a shared
# file fails here rather than in a release. The pairs are read from the
# file itself (its goos and goarch lists less its ignore entries), so the
# two cannot disagree.
#
#   scripts/cross-build.sh          build and vet
#   scripts/cross-build.sh --list   print the pairs only
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# release_pairs prints "goos/goarch" for each release target of the
# builds entry of .goreleaser.yml.
release_pairs() {
	awk '
		function unq(s) { gsub(/[ '\''"-]/, "", s); return s }
		/^[^ ]/ { section = $1 }
		section != "builds:" { next }
		/^    goos:/ { list = "goos"; next }
		/^    goarch:/ { list = "goarch"; next }
		/^    ignore:/ { list = "ignore"; next }
		/^    [a-z_]+:/ { list = ""; next }
		list == "goos" && /^      - / { oses[++n_os] = unq($2) }
		list == "goarch" && /^      - / { arches[++n_arch] = unq($2) }
		list == "ignore" && /^      - goos:/ { ig_os = unq($3) }
		list == "ignore" && /^        goarch:/ { ignored[ig_os "/" unq($2)] = 1 }
		END {
			for (i = 1; i <= n_os; i++)
				for (j = 1; j <= n_arch; j++) {
					p = oses[i] "/" arches[j]
					if (!(p in ignored)) print p
				}
		}
	' .goreleaser.yml
}

mapfile -t pairs < <(release_pairs)
if ((${#pairs[@]} == 0)); then
	echo "cross-build: no release targets found in .goreleaser.yml" >&2
	exit 1
fi
if [[ "${1:-}" == "--list" ]]; then
	printf '%s\n' "${pairs[@]}"
	exit 0
fi

failed=()
for pair in "${pairs[@]}"; do
	if ! CGO_ENABLED=0 GOOS="${pair%/*}" GOARCH="${pair#*/}" go build -trimpath -o /dev/null .; then
		failed+=("build $pair")
	fi
done
for goos in darwin windows; do
	if ! CGO_ENABLED=0 GOOS="$goos" GOARCH=amd64 go vet ./...; then
		failed+=("vet $goos")
	fi
done
if ((${#failed[@]} > 0)); then
	echo "cross-build: failed: ${failed[*]}" >&2
	exit 1
fi
echo "cross-build: ${#pairs[@]} release targets build; go vet passes for darwin and windows"
