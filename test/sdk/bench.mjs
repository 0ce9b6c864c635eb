// Sandbox figures of the local server through the official E2B JS SDK, as
// a user's code sees them (scripts/bench-sandbox.sh starts the servers and
// runs this once per server; design/performance.md, "Sandboxes").
//
// Against the server whose server.json is BENCH_SERVER_INFO, with the
// template BENCH_TEMPLATE (built first from E2B_TEST_BASE_IMAGE):
//   - BENCH_RUNS sequential rounds (after 2 discarded) of Sandbox.create,
//     commands.run('true') and kill, timed apart; with BENCH_POOL set, each
//     round first waits until the server's pool holds that many containers,
//     so that every create is served from the pool;
//   - BENCH_CONCURRENT creates at once: the time until all answered, the
//     errors, the server's peak RSS meanwhile;
//   - one idle sandbox: the RSS of its envd processes and the container's
//     memory (getMetrics, page cache excluded).
// Prints one JSON object on stdout; progress goes to stderr.

import { readFile } from 'node:fs/promises'

import { Sandbox, Template } from 'e2b'

const env = (name, fallback) => process.env[name] ?? fallback
const server = JSON.parse(await readFile(env('BENCH_SERVER_INFO'), 'utf8'))
// The SDK reads its configuration from the environment.
Object.assign(process.env, {
  E2B_API_URL: server.api_url,
  E2B_SANDBOX_URL: server.sandbox_url,
  E2B_DOMAIN: server.domain,
  E2B_API_KEY: server.api_key,
})
const templateName = env('BENCH_TEMPLATE', 'bench-sandbox:v1')
const runs = Number(env('BENCH_RUNS', '20'))
const pool = Number(env('BENCH_POOL', '0'))
const concurrent = Number(env('BENCH_CONCURRENT', '50'))
const serverPid = server.pid
const apiURL = server.api_url
const apiKey = server.api_key

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const now = () => performance.now()

// percentile of sorted ms values (nearest rank).
function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]
}
function stats(values) {
  const sorted = [...values].sort((a, b) => a - b)
  const round = (v) => Math.round(v * 10) / 10
  return { p50: round(percentile(sorted, 50)), p95: round(percentile(sorted, 95)), n: sorted.length }
}

async function pooled() {
  const resp = await fetch(`${apiURL}/_local/stats`, { headers: { 'X-API-Key': apiKey } })
  return (await resp.json()).poolReady
}

async function rssKB(pid) {
  const status = await readFile(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1])
}

const out = { template: templateName, pool, runs, sequential: {}, concurrent: {}, idle: {} }

{
  const started = now()
  await Template.build(Template().fromImage(env('E2B_TEST_BASE_IMAGE', 'e2b-test-debian:bookworm')), templateName)
  console.error(`bench: template built in ${Math.round(now() - started)} ms`)
}

// Sequential rounds.
const create = []
const createRun = []
const kill = []
for (let i = 0; i < runs + 2; i++) {
  if (pool > 0 && i > 0) {
    for (let waited = 0; (await pooled()) < pool; waited++) {
      if (waited > 1200) throw new Error('the pool did not fill within 60 s')
      await sleep(50)
    }
  }
  const t0 = now()
  const sandbox = await Sandbox.create(templateName)
  const t1 = now()
  await sandbox.commands.run('true')
  const t2 = now()
  await sandbox.kill()
  const t3 = now()
  if (i >= 2) {
    create.push(t1 - t0)
    createRun.push(t2 - t0)
    kill.push(t3 - t2)
  }
}
out.sequential = { create: stats(create), createAndFirstCommand: stats(createRun), kill: stats(kill) }
console.error(`bench: sequential ${JSON.stringify(out.sequential)}`)

// Concurrent creates.
if (concurrent > 0) {
  let peak = await rssKB(serverPid)
  let sampling = true
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, await rssKB(serverPid))
      await sleep(20)
    }
  })()
  const t0 = now()
  const results = await Promise.allSettled(Array.from({ length: concurrent }, () => Sandbox.create(templateName)))
  const elapsed = now() - t0
  sampling = false
  await sampler
  const errors = results.filter((r) => r.status === 'rejected').map((r) => String(r.reason?.message ?? r.reason))
  out.concurrent = { creates: concurrent, allAnsweredMs: Math.round(elapsed), errors: errors.length, firstError: errors[0], serverPeakRSSMB: Math.round(peak / 1024) }
  console.error(`bench: concurrent ${JSON.stringify(out.concurrent)}`)
  await Promise.allSettled(results.filter((r) => r.status === 'fulfilled').map((r) => r.value.kill()))
}

// One idle sandbox.
{
  const sandbox = await Sandbox.create(templateName)
  await sleep(3000)
  const ps = await sandbox.commands.run('ps -eo rss=,args=', { user: 'root' })
  const envd = ps.stdout.split('\n').filter((l) => / envd /.test(l) && !/ps -eo/.test(l))
  const rss = (filter) => envd.filter(filter).reduce((sum, l) => sum + Number(l.trim().split(/\s+/)[0]), 0)
  const metrics = await sandbox.getMetrics()
  const last = metrics[metrics.length - 1] ?? {}
  out.idle = {
    envdRSSMB: Math.round(rss((l) => !l.includes('--channel')) / 102.4) / 10,
    channelAgentRSSMB: Math.round(rss((l) => l.includes('--channel')) / 102.4) / 10,
    containerMemMB: Math.round((last.memUsed ?? 0) / 104857.6) / 10,
  }
  console.error(`bench: idle ${JSON.stringify(out.idle)}`)
  await sandbox.kill()
}

console.log(JSON.stringify(out))
