#!/usr/bin/env bash
# Whole-process figures for build-context hashing (docs/performance.md): one process per
# operation on the generated 440 MB tree (10,000 x 4 KiB + 10 x 40 MiB), reporting wall
# time and peak RSS. The tree is kept in $E2B_BENCH_TREE (default: $TMPDIR/e2b-bench-tree).
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bin=$work/hashbench
go build -o "$bin" ./internal/buildcontext/internal/hashbench
tree=${E2B_BENCH_TREE:-${TMPDIR:-/tmp}/e2b-bench-tree}
mkdir -p "$tree"
"$bin" -mode generate -tree "$tree" >/dev/null
cache=$work/digests.bin
total_mb=440.8 # benchtree.TotalBytes / 1e6

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %9s %9s %14s\n' mode wall_s MB/s peak_RSS_MiB
declare -A wall
for mode in sha256 cold warm sdk archive; do
	t0=$(date +%s.%N)
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -f '%M' -o "$work/rss" "$bin" -mode "$mode" -tree "$tree" -cache "$cache" >/dev/null
		kib=$(cat "$work/rss")
	else # the command's own VmHWM
		read -r _ _ kib < <("$bin" -mode "$mode" -tree "$tree" -cache "$cache")
	fi
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
	wall[$mode]=$secs
	awk -v m="$mode" -v s="$secs" -v k="$kib" -v mb="$total_mb" \
		'BEGIN { printf "%-8s %9.3f %9.0f %14.1f\n", m, s, (s > 0 ? mb / s : 0), k / 1024 }'
done
awk -v sha="${wall[sha256]}" -v cold="${wall[cold]}" -v warm="${wall[warm]}" 'BEGIN {
	printf "cold / sha256 one core = %.2f (target <= 1.2)\n", cold / sha
	printf "warm / cold            = 1/%.1f (target <= 1/20)\n", (warm > 0 ? cold / warm : 0)
}'
echo "(archive includes a warm hash of the tree before spooling the archive)"
