#!/usr/bin/env bash
# Figures of the local server's build engine (design/performance.md, "Local builds"): a build
# of `COPY . /bench/` of the 440.8 MB benchmark tree (10,000 x 4 KiB + 10 x 40 MiB) and a RUN,
# then a rebuild with only the RUN changed, on the Docker engine at DOCKER_HOST with the
# offline test image (E2B_TEST_BASE_IMAGE, default e2b-test-base:latest). It prints the COPY
# phase's MB/s, the final save, both builds' seconds and their ratio. The tree is generated
# under $TMPDIR and removed afterwards unless $E2B_BENCH_TREE names one to keep.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${DOCKER_HOST:?set DOCKER_HOST to the Docker engine}"
export E2B_TEST_BASE_IMAGE=${E2B_TEST_BASE_IMAGE:-e2b-test-base:latest}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tree=${E2B_BENCH_TREE:-$work/tree}
go build -o "$work/hashbench" ./internal/buildcontext/internal/hashbench
mkdir -p "$tree"
"$work/hashbench" -mode generate -tree "$tree" >/dev/null

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "docker: $(docker version --format '{{.Server.Version}} {{.Server.APIVersion}}' 2>/dev/null || echo unknown)"
E2B_BENCH_TREE=$tree go test ./internal/localserver/engine/docker/ -run XXX -bench BenchmarkBuildLayerCache -benchtime 1x -count "${COUNT:-1}" -timeout 30m |
	grep -E '^Benchmark|^(ok|FAIL)' |
	awk '/^Benchmark/ { for (i = 3; i < NF; i += 2) printf "%-14s %10.2f\n", $(i + 1), $i; next } { print }'
echo "targets: copy_MB/s >= 200; rebuild/first <= 0.20"
