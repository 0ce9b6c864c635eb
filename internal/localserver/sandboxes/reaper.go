package sandboxes

import (
	"context"
	"time"
)

// diskCheckInterval is how often the reaper has the engine measure the
// containers against their disk and file limits. The engine measures each
// container in the background, spaced by its own measure's time, so a
// call returns at once with the sandboxes it stopped since the last.
const diskCheckInterval = 2 * time.Second

// reapLoop stops sandboxes whose time ran out (pausing those that pause
// then) or whose files grew past their disk limit, and expires the warm
// pool's idle containers, until the Manager closes.
func (s *Manager) reapLoop() {
	ticker := time.NewTicker(s.cfg.ReapInterval)
	defer ticker.Stop()
	var lastDiskCheck time.Time
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-ticker.C:
			s.ReapExpired(s.ctx)
			s.pool.expirePool(s.ctx)
			if time.Since(lastDiskCheck) >= diskCheckInterval {
				lastDiskCheck = time.Now()
				s.reapOverDisk(s.ctx)
			}
		}
	}
}

// ReapExpired ends the sandboxes whose end came: pauses those that pause
// then, stops the others.
func (s *Manager) ReapExpired(ctx context.Context) {
	sandboxes, err := s.records.Sandboxes()
	if err != nil {
		s.log.Error("list sandboxes to reap", "err", err)
		return
	}
	now := s.cfg.Now()
	for _, sb := range sandboxes {
		// A starting sandbox is its create's until it runs.
		if sb.Paused() || sb.Starting() || now.Before(sb.EndAt) {
			continue
		}
		if sb.AutoPause {
			s.pauseAtEnd(ctx, sb.ID)
			continue
		}
		if err := s.stop(ctx, sb.ID); err != nil {
			s.log.Error("stop expired sandbox", "sandbox", sb.ID, "err", err)
			continue
		}
		s.log.Info("sandbox timed out and was stopped", "sandbox", sb.ID)
	}
}

// reapOverDisk stops the sandboxes the engine found past their disk or
// file limit (it stopped their containers already) and says why.
func (s *Manager) reapOverDisk(ctx context.Context) {
	overruns, err := s.engine.EnforceDiskLimits(ctx)
	if err != nil {
		s.log.Error("enforce disk limits", "err", err)
	}
	for _, o := range overruns {
		if err := s.stop(ctx, o.SandboxID); err != nil {
			s.log.Error("stop a sandbox past its disk limit", "sandbox", o.SandboxID, "err", err)
			continue
		}
		s.log.Warn("sandbox stopped: "+o.Error(), "sandbox", o.SandboxID, "used_mib", o.Used>>20, "held_mib", o.Held>>20, "limit_mib", o.Limit>>20,
			"files", o.Files, "file_limit", o.FileLimit)
	}
}
