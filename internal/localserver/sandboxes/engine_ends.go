package sandboxes

import "github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"

// engineEnds forgets the sandboxes whose containers ended without the
// server, as the engine reports them (Engine.WatchSandboxEnds), as E2B
// forgets one whose VM ended, so that none is answered "running".
type engineEnds struct{ m *Manager }

// watch hands the engine's reports to ended until the Manager closes.
func (e engineEnds) watch() { e.m.engine.WatchSandboxEnds(e.m.ctx, e.ended) }

// ended forgets the sandbox of end. A paused sandbox's container that
// exited (the engine stopped) stays: its resume boots it again; one
// removed is gone.
func (e engineEnds) ended(end engine.SandboxEnd) {
	m := e.m
	defer m.sandboxLocks.lock(end.SandboxID)()
	sb, err := m.records.Sandbox(end.SandboxID)
	if err != nil || (sb.Paused() && !end.Removed) {
		return // a pooled container, removed meanwhile, or paused
	}
	if err := m.stop(m.ctx, sb.ID); err != nil {
		m.log.Error("forget a sandbox whose container ended", "sandbox", sb.ID, "err", err)
		return
	}
	if end.Removed {
		m.log.Warn("sandbox ended: its container was removed", "sandbox", sb.ID)
		return
	}
	m.log.Warn("sandbox ended: its container exited", "sandbox", sb.ID, "exit_code", end.ExitCode)
}
