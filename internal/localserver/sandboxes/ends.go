package sandboxes

import (
	"context"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// A sandbox's end: when it ends (timeouts, connects, refreshes), and
// ending it (kill). The container keeps its own end too (containerEnd),
// so that it ends on time while the server is down.

// Kill stops the sandbox and forgets it.
func (s *Manager) Kill(ctx context.Context, id string) error {
	if _, err := s.records.Sandbox(id); err != nil {
		return err
	}
	if err := s.stop(ctx, id); err != nil {
		return failure.OwnFailure(err)
	}
	return nil
}

// stop removes the sandbox's container, then forgets it; a sandbox whose
// container could not be removed stays recorded to be tried again.
func (s *Manager) stop(ctx context.Context, id string) error {
	if err := s.engine.StopSandbox(ctx, id); err != nil {
		return err
	}
	if s.cfg.Stopped != nil {
		s.cfg.Stopped(id)
	}
	_, err := s.records.DeleteSandbox(id)
	return err
}

// SetTimeout makes the sandbox end seconds from now, sooner or later.
func (s *Manager) SetTimeout(ctx context.Context, id string, seconds int32) error {
	timeout, err := s.ttl(&seconds, 0, 0)
	if err != nil {
		return err
	}
	sb, err := s.records.SetSandboxEndAt(id, s.cfg.Now().Add(timeout))
	if err != nil {
		return err
	}
	if err := s.engine.SetSandboxDeadline(ctx, id, containerEnd(sb)); err != nil {
		return failure.OwnFailure(err)
	}
	return nil
}

// Connect resumes a paused sandbox to run timeout seconds (def when
// unset) from now (resumed), or makes a running one end then if that is
// later (connecting only extends).
func (s *Manager) Connect(ctx context.Context, id string, timeout *int32, def int32) (sandbox *e2b.Sandbox, resumed bool, err error) {
	d, err := s.ttl(timeout, def, 0)
	if err != nil {
		return nil, false, err
	}
	sb, unlock, err := s.Lock(id)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	if sb.Paused() {
		if sb, err = s.resume(ctx, sb, d, nil); err != nil {
			return nil, false, err
		}
		return s.answer(sb), true, nil
	}
	if sb, err = s.extend(ctx, id, d); err != nil {
		return nil, false, err
	}
	return s.answer(sb), false, nil
}

// Refresh keeps a sandbox alive for seconds more (0 to 3600) from now,
// never shortening it.
func (s *Manager) Refresh(ctx context.Context, id string, seconds int32) error {
	if seconds < 0 || seconds > maxRefreshSeconds {
		return failure.New(failure.Invalid, "duration %d is invalid: it must be from 0 to %d seconds", seconds, maxRefreshSeconds)
	}
	_, err := s.extend(ctx, id, time.Duration(seconds)*time.Second)
	return err
}

// extend moves the sandbox's end to now+d when that is later, in the store
// and in its container.
func (s *Manager) extend(ctx context.Context, id string, d time.Duration) (store.Sandbox, error) {
	sb, err := s.records.ExtendSandboxEndAt(id, s.cfg.Now().Add(d))
	if err != nil {
		return sb, err
	}
	if err := s.engine.SetSandboxDeadline(ctx, id, containerEnd(sb)); err != nil {
		return sb, failure.OwnFailure(err)
	}
	return sb, nil
}

// maxRefreshSeconds is the largest refresh E2B accepts (SandboxRefreshRequest).
const maxRefreshSeconds = 3600

// ttl reads the timeout (seconds) of a request, or def when unset. It must
// be from least seconds to the server's limit; else the error is Invalid,
// naming it.
func (s *Manager) ttl(requested *int32, def, least int32) (time.Duration, error) {
	seconds := def
	if requested != nil {
		seconds = *requested
	}
	if seconds < least || time.Duration(seconds)*time.Second > s.cfg.MaxSandboxTimeout {
		return 0, failure.New(failure.Invalid, "timeout %d is invalid: it must be from %d to %d seconds", seconds, least, int64(s.cfg.MaxSandboxTimeout/time.Second))
	}
	return time.Duration(seconds) * time.Second, nil
}
