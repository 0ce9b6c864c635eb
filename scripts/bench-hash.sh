#!/usr/bin/env bash
# Whole-process figures for build-context hashing (design/performance.md): one process per
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
printf '%-8s %9s %9s %9s %14s\n' mode wall_s MB/s cpu_s peak_RSS_MiB
declare -A wall cpu
for mode in sha256 cold warm sdk archive; do
	t0=$(date +%s.%N)
	if [ -x /usr/bin/time ]; then
		/usr/bin/time -f '%M %U %S' -o "$work/time" "$bin" -mode "$mode" -tree "$tree" -cache "$cache" >/dev/null
		read -r kib user sys <"$work/time"
		cpu_s=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')
	else # the command's own VmHWM; no CPU time
		read -r _ _ kib < <("$bin" -mode "$mode" -tree "$tree" -cache "$cache")
		cpu_s=0
	fi
	secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
	wall[$mode]=$secs
	cpu[$mode]=$cpu_s
	awk -v m="$mode" -v s="$secs" -v c="$cpu_s" -v k="$kib" -v mb="$total_mb" \
		'BEGIN { printf "%-8s %9.3f %9.0f %9.2f %14.1f\n", m, s, (s > 0 ? mb / s : 0), c, k / 1024 }'
done
awk -v sha="${wall[sha256]}" -v cold="${wall[cold]}" -v warm="${wall[warm]}" \
	-v csha="${cpu[sha256]}" -v ccold="${cpu[cold]}" -v cwarm="${cpu[warm]}" 'BEGIN {
	printf "wall: cold / sha256 one core = %.2f (target <= 1.2); warm / cold = 1/%.1f (target <= 1/20)\n", cold / sha, (warm > 0 ? cold / warm : 0)
	if (cwarm > 0) printf "cpu:  cold / sha256 one core = %.2f; warm / cold = 1/%.1f\n", ccold / csha, ccold / cwarm
}'
echo "(archive includes a warm hash of the tree before spooling the archive; cpu_s is user + sys)"
