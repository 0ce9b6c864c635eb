// Drives the official E2B JS SDK, unchanged, against the server named by
// E2B_API_URL, E2B_SANDBOX_URL, E2B_DOMAIN and E2B_API_KEY: one template
// build and one sandbox, through the SDK's public API only.
//
// Prints one JSON summary on stdout:
//   {"ok": bool, "template": {...}, "sandboxId": "...", "checks": [{"name", "ok", "detail"}]}
// and exits 1 when any check failed (2 when the environment is incomplete).
// Progress and build logs go to stderr.
//
// Environment besides the four above: E2B_TEST_BASE_IMAGE (the image the
// template starts from, with bash: default e2b-test-debian:bookworm) and
// SDK_INTEROP_TEMPLATE (the template name, default sdk-interop:v1).

import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { isDeepStrictEqual } from 'node:util'

import { CommandExitError, Sandbox, Template, TimeoutError } from 'e2b'

for (const name of ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_DOMAIN', 'E2B_API_KEY']) {
  if (!process.env[name]) {
    console.error(`interop: ${name} is not set`)
    process.exit(2)
  }
}
const baseImage = process.env.E2B_TEST_BASE_IMAGE || 'e2b-test-debian:bookworm'
const templateName = process.env.SDK_INTEROP_TEMPLATE || 'sdk-interop:v1'
const templateAlias = templateName.split(':')[0]

const summary = { ok: true, template: null, sandboxId: null, checks: [] }

function check(name, ok, detail) {
  summary.checks.push({ name, ok, detail })
  if (!ok) summary.ok = false
  console.error(`interop: ${ok ? 'ok  ' : 'FAIL'} ${name}${ok ? '' : ': ' + JSON.stringify(detail)}`)
  return ok
}

// expectEqual records a check that got equals want, with both in the detail.
function expectEqual(name, got, want) {
  return check(name, isDeepStrictEqual(got, want), { got, want })
}

// eventSeen waits up to 10 s for a watchDir event of name and type in events.
async function eventSeen(events, name, type) {
  for (let i = 0; i < 200 && !events.some((e) => e.name === name && e.type === type); i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  return events.some((e) => e.name === name && e.type === type)
}

// attempt runs fn as the check name, recording a thrown error as its failure.
async function attempt(name, fn) {
  try {
    await fn()
  } catch (err) {
    check(name, false, { error: describe(err) })
  }
}

function describe(err) {
  return { name: err?.name, message: String(err?.message ?? err), stack: err?.stack?.split('\n').slice(0, 6).join('\n') }
}

// The build context: a file and a directory with a subdirectory. The SDK
// runs every command as `/bin/bash -l -c <cmd>`: the base image is a Debian
// one, as E2B templates usually are.
const contextDir = await mkdtemp(join(tmpdir(), 'e2b-sdk-interop-'))
await writeFile(join(contextDir, 'hello.txt'), 'hello from the sdk\n')
await mkdir(join(contextDir, 'conf', 'sub'), { recursive: true })
await writeFile(join(contextDir, 'conf', 'a.txt'), 'a\n')
await writeFile(join(contextDir, 'conf', 'sub', 'b.txt'), 'b\n')

let sandbox
try {
  const template = Template({ fileContextPath: contextDir })
    .fromImage(baseImage)
    .setEnvs({ FOO: 'bar baz', GREETING: 'hi' })
    .setWorkdir('/app')
    .copy('hello.txt', '/app/hello.txt')
    .copy('conf', '/app/conf/')
    .runCmd('echo "$GREETING $FOO" > built.txt && id -un >> built.txt')

  const logs = []
  const started = Date.now()
  await attempt('build', async () => {
    const info = await Template.build(template, templateName, {
      onBuildLogs: (entry) => {
        logs.push(entry)
        console.error(`build: ${entry.toString()}`)
      },
    })
    summary.template = {
      name: info.name,
      tags: info.tags,
      templateId: info.templateId,
      buildId: info.buildId,
      logEntries: logs.length,
      seconds: (Date.now() - started) / 1000,
    }
    check('build', Boolean(info.templateId && info.buildId), summary.template)
    check('build logs', logs.length > 0, { entries: logs.length })
  })

  await attempt('template exists', async () => {
    expectEqual('template exists', await Template.exists(templateAlias), true)
    expectEqual('unknown template does not exist', await Template.exists(templateAlias + '-missing'), false)
  })

  await attempt('sandbox create', async () => {
    sandbox = await Sandbox.create(templateName, {
      timeoutMs: 10 * 60 * 1000,
      envs: { SANDBOX_VAR: 'from create' },
      metadata: { purpose: 'sdk-interop' },
    })
    summary.sandboxId = sandbox.sandboxId
    check('sandbox create', Boolean(sandbox.sandboxId), { sandboxId: sandbox.sandboxId })
  })

  if (sandbox) {
    await attempt('sandbox info', async () => {
      const info = await sandbox.getInfo()
      expectEqual('sandbox info', {
        sandboxId: info.sandboxId,
        templateId: info.templateId,
        metadata: info.metadata,
        state: info.state,
      }, {
        sandboxId: sandbox.sandboxId,
        templateId: summary.template?.templateId,
        metadata: { purpose: 'sdk-interop' },
        state: 'running',
      })
    })

    await attempt('command: copy, env, workdir', async () => {
      const res = await sandbox.commands.run('cat /app/hello.txt && echo $FOO && pwd')
      expectEqual('command: copy, env, workdir', { exitCode: res.exitCode, stdout: res.stdout, stderr: res.stderr }, {
        exitCode: 0,
        stdout: 'hello from the sdk\nbar baz\n/app\n',
        stderr: '',
      })
    })

    await attempt('command: directory copy and run step', async () => {
      const res = await sandbox.commands.run('cat built.txt conf/a.txt conf/sub/b.txt && id -un')
      expectEqual('command: directory copy and run step', res.stdout, 'hi bar baz\nuser\na\nb\nuser\n')
    })

    await attempt('command: sandbox env and per-command env', async () => {
      const res = await sandbox.commands.run('echo "$SANDBOX_VAR/$PER_COMMAND"', { envs: { PER_COMMAND: 'from run' } })
      expectEqual('command: sandbox env and per-command env', res.stdout, 'from create/from run\n')
    })

    await attempt('command: user and cwd', async () => {
      const res = await sandbox.commands.run('id -un && pwd', { user: 'root', cwd: '/app/conf' })
      expectEqual('command: user and cwd', res.stdout, 'root\n/app/conf\n')
    })

    await attempt('command: non-zero exit', async () => {
      try {
        const res = await sandbox.commands.run('echo out; echo oops >&2; exit 3')
        check('command: non-zero exit', false, { error: 'no CommandExitError', exitCode: res.exitCode })
      } catch (err) {
        if (!(err instanceof CommandExitError)) throw err
        expectEqual('command: non-zero exit', { exitCode: err.exitCode, stdout: err.stdout, stderr: err.stderr }, {
          exitCode: 3,
          stdout: 'out\n',
          stderr: 'oops\n',
        })
      }
    })

    await attempt('command: background child keeps the output open', async () => {
      // envd ends a command once every holder of its stdout closed it.
      const res = await sandbox.commands.run('(sleep 2; echo child) & echo parent')
      expectEqual('command: background child keeps the output open', { exitCode: res.exitCode, stdout: res.stdout }, {
        exitCode: 0,
        stdout: 'parent\nchild\n',
      })
    })

    await attempt('command: timeout', async () => {
      // envd kills the command at timeoutMs and ends the stream with
      // deadline_exceeded, which the SDK reports as a TimeoutError.
      let error
      try {
        await sandbox.commands.run('echo started; sleep 600', { timeoutMs: 2000 })
      } catch (err) {
        error = err
      }
      check('command: timeout', error instanceof TimeoutError, { error: describe(error) })
    })

    await attempt('command: background with stdin', async () => {
      const handle = await sandbox.commands.run('cat; echo done', { background: true, stdin: true })
      await handle.sendStdin('ping\n')
      await handle.sendStdin('pong\n')
      await handle.closeStdin()
      const res = await handle.wait()
      expectEqual('command: background with stdin', { exitCode: res.exitCode, stdout: res.stdout }, {
        exitCode: 0,
        stdout: 'ping\npong\ndone\n',
      })
    })

    await attempt('command: list and kill a background process', async () => {
      const handle = await sandbox.commands.run('sleep 600', { background: true })
      const listed = (await sandbox.commands.list()).some((p) => p.pid === handle.pid)
      const killed = await sandbox.commands.kill(handle.pid)
      let exitCode
      try {
        exitCode = (await handle.wait()).exitCode
      } catch (err) {
        if (!(err instanceof CommandExitError)) throw err
        exitCode = err.exitCode
      }
      expectEqual('command: list and kill a background process', { listed, killed, exitCode }, {
        listed: true,
        killed: true,
        exitCode: -1,
      })
    })

    await attempt('files: write and read', async () => {
      const path = '/app/written/by-sdk.txt'
      const content = 'written by the sdk\nline two\n'
      const info = await sandbox.files.write(path, content)
      expectEqual('files: write reports the path', info.path, path)
      expectEqual('files: write and read', await sandbox.files.read(path), content)
      const res = await sandbox.commands.run(`cat ${path}`)
      expectEqual('files: written file seen by a command', res.stdout, content)
    })

    await attempt('files: make, list, stat, rename, remove', async () => {
      const dir = '/app/fsdir'
      const made = await sandbox.files.makeDir(dir)
      await sandbox.files.write(`${dir}/x.txt`, 'x')
      const listed = (await sandbox.files.list(dir)).map((e) => ({ name: e.name, type: e.type, path: e.path }))
      const stat = await sandbox.files.getInfo(`${dir}/x.txt`)
      const renamed = await sandbox.files.rename(`${dir}/x.txt`, `${dir}/y.txt`)
      const existsAfterRename = [await sandbox.files.exists(`${dir}/x.txt`), await sandbox.files.exists(`${dir}/y.txt`)]
      await sandbox.files.remove(dir)
      const existsAfterRemove = await sandbox.files.exists(dir)
      expectEqual('files: make, list, stat, rename, remove', {
        made,
        listed,
        stat: { name: stat.name, type: stat.type, size: stat.size, owner: stat.owner },
        renamed: renamed.path,
        existsAfterRename,
        existsAfterRemove,
      }, {
        made: true,
        listed: [{ name: 'x.txt', type: 'file', path: `${dir}/x.txt` }],
        stat: { name: 'x.txt', type: 'file', size: 1, owner: 'user' },
        renamed: `${dir}/y.txt`,
        existsAfterRename: [false, true],
        existsAfterRemove: false,
      })
    })

    // E2B's answers the SDK keys off: remove of a missing path resolves,
    // makeDir onto a file throws (false is for an existing directory only).
    await attempt('files: remove of a missing path, makeDir onto a file', async () => {
      await sandbox.files.remove('/app/never-was/there')
      await sandbox.files.write('/app/plain-file', 'p')
      let threw = null
      try {
        await sandbox.files.makeDir('/app/plain-file')
      } catch (err) {
        threw = err?.name
      }
      expectEqual('files: remove of a missing path, makeDir onto a file', {
        threw: threw !== null,
        existingDir: await sandbox.files.makeDir('/app'),
      }, { threw: true, existingDir: false })
    })

    // A symlinked directory is listed as a directory with its resolved target.
    await attempt('files: list types a symlinked directory dir', async () => {
      await sandbox.commands.run('mkdir -p /app/links/real && ln -s real /app/links/linked')
      const listed = (await sandbox.files.list('/app/links')).map((e) => ({ name: e.name, type: e.type, symlinkTarget: e.symlinkTarget }))
      expectEqual('files: list types a symlinked directory dir', listed, [
        { name: 'linked', type: 'dir', symlinkTarget: '/app/links/real' },
        { name: 'real', type: 'dir', symlinkTarget: undefined },
      ])
    })

    await attempt('files: metadata', async () => {
      const info = await sandbox.files.write('/app/with-metadata.txt', 'm', { metadata: { Team: 'infra' } })
      const stat = await sandbox.files.getInfo('/app/with-metadata.txt')
      expectEqual('files: metadata', { written: info.metadata, stat: stat.metadata }, {
        written: { team: 'infra' },
        stat: { team: 'infra' },
      })
    })

    // watchDir (the WatchDir stream), recursive: a directory created below
    // is watched too.
    await attempt('files: watchDir receives events', async () => {
      await sandbox.files.makeDir('/app/watched')
      const events = []
      const handle = await sandbox.files.watchDir('/app/watched', (ev) => { events.push({ name: ev.name, type: ev.type }) }, { recursive: true })
      try {
        await sandbox.commands.run('mkdir /app/watched/sub')
        const sub = await eventSeen(events, 'sub', 'create')
        await sandbox.commands.run('echo hi > /app/watched/sub/cmd.txt')
        expectEqual('files: watchDir receives events', {
          sub,
          create: await eventSeen(events, 'sub/cmd.txt', 'create'),
          write: await eventSeen(events, 'sub/cmd.txt', 'write'),
        }, { sub: true, create: true, write: true })
      } finally {
        await handle.stop()
      }
    })

    // An upload (files.write) seen by watchDir: its file only, created and
    // written, never the temporary it is written to (as on E2B's envd).
    await attempt('files: watchDir sees an upload as its file', async () => {
      await sandbox.files.makeDir('/app/uploads')
      const events = []
      const handle = await sandbox.files.watchDir('/app/uploads', (ev) => { events.push({ name: ev.name, type: ev.type }) })
      try {
        await sandbox.files.write('/app/uploads/up.txt', 'first')
        await sandbox.files.write('/app/uploads/up.txt', 'second')
        await sandbox.commands.run('touch /app/uploads/marker')
        const marker = await eventSeen(events, 'marker', 'create')
        expectEqual('files: watchDir sees an upload as its file', {
          marker,
          create: events.some((e) => e.name === 'up.txt' && e.type === 'create'),
          write: events.filter((e) => e.name === 'up.txt' && e.type === 'write').length >= 2,
          others: events.filter((e) => e.name !== 'up.txt' && e.name !== 'marker'),
        }, { marker: true, create: true, write: true, others: [] })
      } finally {
        await handle.stop()
      }
    })

    // Home-relative paths: getInfo of ~, ~/ and . is the user's home, as on E2B.
    await attempt('files: getInfo of the home', async () => {
      const home = (await sandbox.commands.run('cd ~ && pwd')).stdout.trim()
      const infos = {}
      for (const path of ['~', '~/', '.']) {
        const info = await sandbox.files.getInfo(path)
        infos[path] = { path: info.path, type: info.type }
      }
      expectEqual('files: getInfo of the home', infos, {
        '~': { path: home, type: 'dir' },
        '~/': { path: home, type: 'dir' },
        '.': { path: home, type: 'dir' },
      })
    })

    // Sandbox.connect (POST /v2/sandboxes/{id}/connect): the same sandbox, usable.
    await attempt('sandbox connect', async () => {
      const again = await Sandbox.connect(sandbox.sandboxId, { timeoutMs: 15 * 60 * 1000 })
      const res = await again.commands.run('echo reconnected')
      expectEqual('sandbox connect', { sandboxId: again.sandboxId, stdout: res.stdout }, {
        sandboxId: sandbox.sandboxId,
        stdout: 'reconnected\n',
      })
    })

    // Sandbox.getMetrics (GET /sandboxes/{id}/metrics): a sample of the
    // container's CPU and memory.
    await attempt('sandbox metrics', async () => {
      const metrics = await sandbox.getMetrics()
      const m = metrics[metrics.length - 1] ?? {}
      expectEqual('sandbox metrics', {
        samples: metrics.length > 0,
        cpuCount: m.cpuCount >= 1,
        memTotal: m.memTotal === 1024 * 1024 * 1024,
        memUsed: m.memUsed > 0,
        timestamp: m.timestamp instanceof Date && !Number.isNaN(m.timestamp.getTime()),
      }, { samples: true, cpuCount: true, memTotal: true, memUsed: true, timestamp: true })
    })

    // pause (POST /sandboxes/{id}/pause), a second pause (409 → false), and
    // Sandbox.connect resuming it: the file written before is still there.
    await attempt('sandbox pause and connect', async () => {
      await sandbox.files.write('/app/paused.txt', 'before the pause')
      const paused = await sandbox.pause()
      const pausedAgain = await sandbox.pause()
      const state = (await sandbox.getInfo()).state
      const running = await sandbox.isRunning()
      const resumed = await Sandbox.connect(sandbox.sandboxId)
      const content = await resumed.files.read('/app/paused.txt')
      const stateAfter = (await resumed.getInfo()).state
      expectEqual('sandbox pause and connect', { paused, pausedAgain, state, running, content, stateAfter }, {
        paused: true,
        pausedAgain: false,
        state: 'paused',
        running: false,
        content: 'before the pause',
        stateAfter: 'running',
      })
    })

    // createSnapshot (POST /sandboxes/{id}/snapshots), listSnapshots (GET
    // /snapshots), a sandbox of the snapshot, deleteSnapshot.
    await attempt('snapshot create, list, use and delete', async () => {
      const snap = await sandbox.createSnapshot({ name: `${templateAlias}-snap` })
      const listed = (await Sandbox.listSnapshots({ sandboxId: sandbox.sandboxId }).nextItems()).map((s) => s.snapshotId)
      const fromSnap = await Sandbox.create(snap.snapshotId)
      let content
      try {
        content = await fromSnap.files.read('/app/paused.txt')
      } finally {
        await fromSnap.kill()
      }
      const deleted = await Sandbox.deleteSnapshot(snap.snapshotId)
      const listedAfter = (await Sandbox.listSnapshots({ sandboxId: sandbox.sandboxId }).nextItems()).length
      expectEqual('snapshot create, list, use and delete', { snap, listed, content, deleted, listedAfter }, {
        snap: { snapshotId: `local/${templateAlias}-snap:default`, names: [`local/${templateAlias}-snap`] },
        listed: [`local/${templateAlias}-snap:default`],
        content: 'before the pause',
        deleted: true,
        listedAfter: 0,
      })
    })

    // lifecycle {onTimeout: 'pause', autoResume: true}: paused, not killed,
    // at its end, and resumed by the next envd request.
    await attempt('sandbox lifecycle: pause on timeout, resume by traffic', async () => {
      const short = await Sandbox.create(templateName, { timeoutMs: 2000, lifecycle: { onTimeout: 'pause', autoResume: true } })
      try {
        await short.files.write('/app/lifecycle.txt', 'kept at the end')
        const lifecycle = (await short.getInfo()).lifecycle
        let state
        for (let i = 0; i < 300 && state !== 'paused'; i++) {
          await new Promise((resolve) => setTimeout(resolve, 100))
          state = (await short.getInfo()).state
        }
        const content = await short.files.read('/app/lifecycle.txt')
        const stateAfter = (await short.getInfo()).state
        expectEqual('sandbox lifecycle: pause on timeout, resume by traffic', { lifecycle, state, content, stateAfter }, {
          lifecycle: { onTimeout: 'pause', autoResume: true },
          state: 'paused',
          content: 'kept at the end',
          stateAfter: 'running',
        })
      } finally {
        await short.kill()
      }
    })

    await attempt('sandbox kill', async () => {
      expectEqual('sandbox kill', await sandbox.kill(), true)
    })

    // The SDK asks envd's /health through the sandbox proxy and takes a 502
    // as "not running"; any other answer for a killed sandbox is an error.
    await attempt('sandbox gone after kill', async () => {
      expectEqual('sandbox gone after kill', await sandbox.isRunning(), false)
    })
  }
} finally {
  await rm(contextDir, { recursive: true, force: true })
  if (sandbox && !summary.checks.some((c) => c.name === 'sandbox kill' && c.ok)) {
    await sandbox.kill().catch((err) => console.error('interop: cleanup kill:', err))
  }
}

process.stdout.write(JSON.stringify(summary) + '\n')
process.exit(summary.ok ? 0 : 1)
