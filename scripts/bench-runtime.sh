#!/usr/bin/env bash
# Figures of the containers' runtimes side by side (design/performance.md, "Runtimes"): through
# the local server on the Docker engine at DOCKER_HOST, with the offline test image
# (E2B_TEST_BASE_IMAGE, default e2b-test-base:latest), ROUNDS rounds (default 10) of a sandbox
# create (until envd answers), a create and its first command, a RUN step of 2,000 /bin/true
# and a COPY of 64 MiB, under each of RUNTIMES (default "runc runsc"; the engine must offer
# them: scripts/dockerd.sh registers runsc). It prints p50 and p95 of each, and the machine's
# load before each runtime's rounds (other work on the machine shows in the figures).
set -euo pipefail
cd "$(dirname "$0")/.."

: "${DOCKER_HOST:?set DOCKER_HOST to the Docker engine}"
export E2B_TEST_BASE_IMAGE=${E2B_TEST_BASE_IMAGE:-e2b-test-base:latest}
rounds=${ROUNDS:-10}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
echo "docker: $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})'), runtimes: $(docker info --format '{{range $name, $rt := .Runtimes}}{{$name}} {{end}}')"
for runtime in ${RUNTIMES:-runc runsc}; do
	echo "$runtime: load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	E2B_TEST_RUNTIME=$runtime E2B_BENCH_RUNTIME=$rounds go test -count=1 -v -run '^TestRuntimeFigures$' -timeout 60m ./internal/localserver/ |
		sed -n 's/^figure //p; /_test.go:[0-9]*:/p; /^--- FAIL/p'
	echo "$runtime: load after: $(cut -d' ' -f1-3 /proc/loadavg)"
done
