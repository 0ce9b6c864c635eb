package localserver

import "github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"

// sandboxEnded forgets a sandbox whose container ended without the server,
// as E2B forgets one whose VM ended, so that it is not answered "running".
// A paused sandbox's container that exited (the engine stopped) stays: its
// resume boots it again; one removed is gone.
func (s *Server) sandboxEnded(end engine.SandboxEnd) {
	defer s.lockSandbox(end.SandboxID)()
	sb, err := s.store.Sandbox(end.SandboxID)
	if err != nil || (sb.Paused() && !end.Removed) {
		return // a pooled container, removed meanwhile, or paused
	}
	if err := s.stopSandbox(s.ctx, sb.ID); err != nil {
		s.log.Error("forget a sandbox whose container ended", "sandbox", sb.ID, "err", err)
		return
	}
	if end.Removed {
		s.log.Warn("sandbox ended: its container was removed", "sandbox", sb.ID)
		return
	}
	s.log.Warn("sandbox ended: its container exited", "sandbox", sb.ID, "exit_code", end.ExitCode)
}
