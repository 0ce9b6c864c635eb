// Figures of the local server through the official E2B JS SDK, as a user's
// code sees them (scripts/bench.sh starts the servers and runs this once per
// server; design/performance.md). Prints one JSON object on stdout; progress
// goes to stderr.
//
// `node bench.mjs sink <file>` is the loopback sink of the egress figures
// instead: an HTTP server on 127.0.0.1 (its port written to <file>) that
// answers GET /?bytes=N with N bytes and PUT with the count of what it read.
//
// Against the server whose server.json is BENCH_SERVER_INFO, with the
// template BENCH_TEMPLATE (built first from E2B_TEST_BASE_IMAGE), the parts
// named in BENCH_PARTS (comma-separated):
//   - data: in one sandbox, BENCH_MB MiB each way: the engine's floor
//     (`docker exec -i <container> cat > /dev/null`, and `head -c` out of
//     it), files.write, files.read of BENCH_READ_MB MiB (and curl's
//     download of the uploaded file without gzip through the server's
//     sandbox proxy), and egress through the server's proxy
//     to and from the sink at BENCH_SINK_PORT (curl in the sandbox);
//   - pooled: BENCH_RUNS rounds of create + commands.run('true'), each once
//     the pool holds a container for the template, and of the kill after;
//   - paced: BENCH_RUNS create + first command, one after the other, 300 ms
//     apart, nothing waiting for the pool;
//   - burst: BENCH_RUNS create + first command at once;
//   - cold: BENCH_RUNS rounds of create, and of create + first command
//     (meant for a server without a pool);
//   - build: a Dockerfile (FROM the base image, COPY of BENCH_MB MiB, a RUN,
//     an ENV) built by the server through Template.build and by `docker
//     build` on the same engine, each cold and again with its cache warm;
//     the COPY step's time from the server's build log;
//   - concurrent: BENCH_CONCURRENT creates at once: the time until all
//     answered, the errors, the server's peak RSS meanwhile;
//   - idle: one idle sandbox: the RSS of its envd processes and the
//     container's memory (getMetrics, page cache excluded).
// Sandboxes are killed at the end of each part. `docker` is the CLI on PATH,
// which reaches the server's engine through DOCKER_HOST.

import { execFile, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'

import { Sandbox, Template } from 'e2b'

const env = (name, fallback) => process.env[name] ?? fallback
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const now = () => performance.now()
const log = (msg) => console.error(`bench: ${msg}`)

async function bench() {
  const server = JSON.parse(await readFile(env('BENCH_SERVER_INFO'), 'utf8'))
  // The SDK reads its configuration from the environment.
  Object.assign(process.env, {
    E2B_API_URL: server.api_url,
    E2B_SANDBOX_URL: server.sandbox_url,
    E2B_DOMAIN: server.domain,
    E2B_API_KEY: server.api_key,
  })
  const baseImage = env('E2B_TEST_BASE_IMAGE', 'e2b-test-debian:bookworm')
  const templateName = env('BENCH_TEMPLATE', 'bench:v1')
  const parts = new Set(env('BENCH_PARTS', 'pooled').split(','))
  const runs = Number(env('BENCH_RUNS', '10'))
  const mib = Number(env('BENCH_MB', '128'))
  const out = { template: templateName, runs, mib }

  const started = now()
  await Template.build(Template().fromImage(baseImage), templateName)
  log(`template built in ${Math.round(now() - started)} ms`)

  const part = async (name, fn) => {
    if (!parts.has(name)) return
    const load = await loadavg()
    log(`${name}: load ${load}`)
    out[name] = { ...(await fn()), load }
    log(`${name}: ${JSON.stringify(out[name])}`)
  }
  await part('data', () => data(templateName, mib << 20, Number(env('BENCH_READ_MB', '16')) << 20, env('BENCH_SINK_PORT')))
  await part('pooled', () => pooledRounds(server, templateName, runs))
  await part('paced', () => paced(templateName, runs, 300))
  await part('burst', () => burst(templateName, runs))
  await part('cold', () => coldRounds(templateName, runs))
  await part('build', () => build(baseImage, mib << 20))
  await part('concurrent', () => concurrent(server, templateName, Number(env('BENCH_CONCURRENT', '50'))))
  await part('idle', () => idle(templateName))
  console.log(JSON.stringify(out))
}

async function loadavg() {
  return (await readFile('/proc/loadavg', 'utf8')).split(' ').slice(0, 3).join(' ')
}

// percentiles of ms values (nearest rank).
function percentiles(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const at = (p) => Math.round(sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] * 10) / 10
  return { p50: at(50), p90: at(90), p95: at(95), n: sorted.length }
}

const mbps = (bytes, ms) => Math.round((bytes / 1e6 / (ms / 1000)) * 10) / 10

// timed runs fn and returns its result and the ms it took.
async function timed(fn) {
  const t0 = now()
  const result = await fn()
  return [result, now() - t0]
}

// shell runs a shell command line on this machine, with stdin from
// /dev/null, and returns the ms it took; it fails on a non-zero exit.
function shell(line) {
  return new Promise((resolve, reject) => {
    const t0 = now()
    const child = spawn('sh', ['-c', line], { stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', (b) => (stderr += b))
    child.on('exit', (code) => (code === 0 ? resolve(now() - t0) : reject(new Error(`${line}: exit ${code}: ${stderr.trim()}`))))
  })
}

const run = promisify(execFile)

// containerOf finds the engine's container of sandbox: the one holding the
// marker file written through envd (a pooled container carries no sandbox
// label of its own).
async function containerOf(sandbox) {
  const marker = `/tmp/.bench-${sandbox.sandboxId}`
  await sandbox.files.write(marker, sandbox.sandboxId)
  const { stdout } = await run('docker', ['ps', '-q', '--filter', 'label=e2b-local.kind=sandbox'])
  for (const id of stdout.split('\n').filter(Boolean)) {
    const got = await run('docker', ['exec', id, 'cat', marker]).catch(() => ({ stdout: '' }))
    if (got.stdout === sandbox.sandboxId) return id
  }
  throw new Error(`no container of the engine holds ${marker}`)
}

// noTimeout lifts the SDK's request and command timeouts for the figures
// of a slow path.
const noTimeout = { requestTimeoutMs: 0, timeoutMs: 0 }

// data measures the bytes' paths in one sandbox, each against the floor.
async function data(templateName, bytes, readBytes, sinkPort) {
  const sandbox = await Sandbox.create(templateName)
  try {
    const id = await containerOf(sandbox)
    const r = { bytes }
    // The floor includes the exec's own start, as the issue defined it;
    // execStartMs says what that start costs.
    r.execStartMs = Math.round(await shell(`docker exec ${id} true`))
    r.floorInMBps = mbps(bytes, await shell(`head -c ${bytes} /dev/zero | docker exec -i ${id} sh -c 'cat > /dev/null'`))
    r.floorOutMBps = mbps(bytes, await shell(`docker exec ${id} head -c ${bytes} /dev/zero > /dev/null`))
    const blob = randomBytes(bytes)
    const path = '/tmp/bench-upload'
    log(`data: floor ${r.floorInMBps} MB/s`)
    r.uploadMBps = mbps(bytes, (await timed(() => sandbox.files.write(path, blob, noTimeout)))[1])
    // files.read of readBytes only: the SDK's fetch asks for gzip, which
    // envd answers, and Node 20's decompression of it takes time that grows
    // faster than the size (70 s for 64 MiB; design/performance.md).
    const readPath = '/tmp/bench-read'
    await sandbox.files.write(readPath, blob.subarray(0, readBytes), noTimeout)
    const [read, readMs] = await timed(() => sandbox.files.read(readPath, { format: 'bytes', ...noTimeout }))
    if (read.length !== readBytes) throw new Error(`files.read returned ${read.length} bytes, want ${readBytes}`)
    r.readBytes = readBytes
    r.downloadMBps = mbps(readBytes, readMs)
    log(`data: upload ${r.uploadMBps} MB/s, download ${r.downloadMBps} MB/s`)
    // The same file without gzip (curl through the server's sandbox
    // proxy): the SDK's fetch asks for gzip, which envd answers, and Node's
    // decompression of an incompressible stream costs more than the path.
    const curlOut = await run('curl', ['-sS', '-o', '/dev/null', '-w', '%{size_download} %{time_total}', '-H', `Host: ${sandbox.getHost(49983)}`,
      '-H', `X-Access-Token: ${sandbox.envdAccessToken ?? ''}`, `${process.env.E2B_SANDBOX_URL}/files?path=${path}&username=root`])
    const [identityBytes, identityS] = curlOut.stdout.trim().split(' ').map(Number)
    if (identityBytes !== bytes) throw new Error(`the identity download moved ${identityBytes} bytes, want ${bytes}`)
    r.downloadIdentityMBps = mbps(bytes, identityS * 1000)
    await sandbox.files.remove(path)
    await sandbox.files.remove(readPath)
    if (sinkPort) {
      // curl's own clock: the command's start is not part of the figure.
      const curl = `curl -sS --noproxy '' -x http://127.0.0.1:49984`
      const down = await sandbox.commands.run(`${curl} -o /dev/null -w '%{size_download} %{time_total}' 'http://127.0.0.1:${sinkPort}/?bytes=${bytes}'`, noTimeout)
      const [downBytes, downS] = down.stdout.trim().split(' ').map(Number)
      if (downBytes !== bytes) throw new Error(`egress download moved ${downBytes} bytes, want ${bytes}`)
      r.egressInMBps = mbps(bytes, downS * 1000)
      // The sink answers the count it received.
      const up = await sandbox.commands.run(`head -c ${bytes} /dev/zero | ${curl} -T - -w '%{time_total}' 'http://127.0.0.1:${sinkPort}/'`, noTimeout)
      const [upBytes, upS] = up.stdout.trim().split(/\s+/).map(Number)
      if (upBytes !== bytes) throw new Error(`the sink received ${upBytes} bytes of the egress upload, want ${bytes}`)
      r.egressOutMBps = mbps(bytes, upS * 1000)
    }
    return r
  } finally {
    await sandbox.kill()
  }
}

// createAndRun is one create and its first command, in ms, and the sandbox.
async function createAndRun(templateName) {
  const t0 = now()
  const sandbox = await Sandbox.create(templateName)
  await sandbox.commands.run('true')
  return [sandbox, now() - t0]
}

async function killAll(sandboxes) {
  await Promise.allSettled(sandboxes.map((s) => s.kill()))
}

async function pooledRounds(server, templateName, runs) {
  const took = []
  const kill = []
  for (let i = 0; i < runs; i++) {
    for (let waited = 0; (await poolReady(server)) < 1; waited++) {
      if (waited > 1200) throw new Error('the pool held no container within 60 s')
      await sleep(50)
    }
    const [sandbox, ms] = await createAndRun(templateName)
    took.push(ms)
    kill.push((await timed(() => sandbox.kill()))[1])
  }
  return { ...percentiles(took), kill: percentiles(kill) }
}

async function poolReady(server) {
  const resp = await fetch(`${server.api_url}/_local/stats`, { headers: { 'X-API-Key': server.api_key } })
  return (await resp.json()).poolReady
}

async function paced(templateName, runs, gapMs) {
  const took = []
  const sandboxes = []
  try {
    for (let i = 0; i < runs; i++) {
      if (i > 0) await sleep(gapMs)
      const [sandbox, ms] = await createAndRun(templateName)
      sandboxes.push(sandbox)
      took.push(ms)
    }
  } finally {
    await killAll(sandboxes)
  }
  return percentiles(took)
}

async function burst(templateName, runs) {
  const results = await Promise.allSettled(Array.from({ length: runs }, () => createAndRun(templateName)))
  const ok = results.filter((r) => r.status === 'fulfilled').map((r) => r.value)
  await killAll(ok.map(([sandbox]) => sandbox))
  const failed = results.find((r) => r.status === 'rejected')
  if (failed) throw failed.reason
  return percentiles(ok.map(([, ms]) => ms))
}

async function coldRounds(templateName, runs) {
  const create = []
  const first = []
  for (let i = 0; i < runs; i++) {
    const t0 = now()
    const sandbox = await Sandbox.create(templateName)
    create.push(now() - t0)
    await sandbox.commands.run('true')
    first.push(now() - t0)
    await sandbox.kill()
  }
  return { create: percentiles(create), createAndFirstCommand: percentiles(first) }
}

// build times one Dockerfile built by the server and by `docker build`,
// cold and warm. The context's bytes are new to both caches each run.
async function build(baseImage, bytes) {
  const ctx = await mkdtemp(join(tmpdir(), 'bench-build-'))
  const tag = `bench-build-${process.pid}`
  try {
    await writeFile(join(ctx, 'blob'), randomBytes(bytes))
    const dockerfile = `FROM ${baseImage}\nCOPY blob /opt/blob\nRUN wc -c /opt/blob\nENV BENCH=1\n`
    await writeFile(join(ctx, 'Dockerfile'), dockerfile)
    const r = { bytes }
    const serverBuild = async (name) => {
      const entries = []
      const [, ms] = await timed(() =>
        Template.build(Template({ fileContextPath: ctx }).fromDockerfile(dockerfile), name, { onBuildLogs: (e) => entries.push(e) }),
      )
      return [ms, entries]
    }
    const [coldMs, coldLog] = await serverBuild(`${tag}:cold`)
    r.serverColdMs = Math.round(coldMs)
    r.copyMs = copyStepMs(coldLog)
    if (r.copyMs) r.copyMBps = mbps(bytes, r.copyMs)
    r.serverWarmMs = Math.round((await serverBuild(`${tag}:warm`))[0])
    const docker = `docker build -q -t ${tag} ${ctx}`
    r.dockerColdMs = Math.round(await shell(`${docker} --no-cache`))
    r.dockerWarmMs = Math.round(await shell(docker))
    await shell(`docker rmi ${tag}`)
    return r
  } finally {
    await rm(ctx, { recursive: true, force: true })
  }
}

// copyStepMs is the COPY step's time in a build log: from its line to the
// next step's.
function copyStepMs(entries) {
  const at = entries.findIndex((e) => /\bCOPY\b/.test(e.message) && /\[builder/.test(e.message))
  if (at < 0) return undefined
  const next = entries.slice(at + 1).find((e) => /\[builder|Saving the image/.test(e.message))
  return next ? Math.round(next.timestamp - entries[at].timestamp) : undefined
}

async function concurrent(server, templateName, count) {
  const rssKB = async () => Number(/VmRSS:\s+(\d+)/.exec(await readFile(`/proc/${server.pid}/status`, 'utf8'))[1])
  let peak = await rssKB()
  let sampling = true
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, await rssKB())
      await sleep(20)
    }
  })()
  const [results, elapsed] = await timed(() => Promise.allSettled(Array.from({ length: count }, () => Sandbox.create(templateName))))
  sampling = false
  await sampler
  const errors = results.filter((r) => r.status === 'rejected').map((r) => String(r.reason?.message ?? r.reason))
  await killAll(results.filter((r) => r.status === 'fulfilled').map((r) => r.value))
  return { creates: count, allAnsweredMs: Math.round(elapsed), errors: errors.length, firstError: errors[0], serverPeakRSSMB: Math.round(peak / 1024) }
}

async function idle(templateName) {
  const sandbox = await Sandbox.create(templateName)
  try {
    await sleep(3000)
    const ps = await sandbox.commands.run('ps -eo rss=,args=', { user: 'root' })
    const envd = ps.stdout.split('\n').filter((l) => / envd /.test(l) && !/ps -eo/.test(l))
    const rss = (filter) => envd.filter(filter).reduce((sum, l) => sum + Number(l.trim().split(/\s+/)[0]), 0)
    const metrics = await sandbox.getMetrics()
    const last = metrics[metrics.length - 1] ?? {}
    return {
      envdRSSMB: Math.round(rss((l) => !l.includes('--channel')) / 102.4) / 10,
      channelAgentRSSMB: Math.round(rss((l) => l.includes('--channel')) / 102.4) / 10,
      containerMemMB: Math.round((last.memUsed ?? 0) / 104857.6) / 10,
    }
  } finally {
    await sandbox.kill()
  }
}

if (process.argv[2] === 'sink') {
  const sink = createServer((req, res) => {
    if (req.method === 'GET') {
      let left = Number(new URL(req.url, 'http://sink').searchParams.get('bytes'))
      const chunk = Buffer.alloc(1 << 20, 0x5a)
      res.writeHead(200, { 'Content-Length': left })
      const more = () => {
        while (left > 0) {
          const n = Math.min(left, chunk.length)
          left -= n
          if (!res.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return res.once('drain', more)
        }
        res.end()
      }
      return more()
    }
    let got = 0
    req.on('data', (b) => (got += b.length))
    req.on('end', () => res.end(`${got}\n`))
  })
  sink.listen(0, '127.0.0.1', () => writeFile(process.argv[3], String(sink.address().port)))
} else {
  await bench()
}
