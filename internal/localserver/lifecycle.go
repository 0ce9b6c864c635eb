package localserver

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// Pausing and resuming (design/e2b-api.md "Pause and resume", design/local-server.md): a paused
// sandbox is a frozen container (docker pause) whose processes keep their
// memory; it stays until killed, with no end.

// defaultResumeTimeout is the timeout of the deprecated resume endpoint
// when none is given (ResumedSandbox).
const defaultResumeTimeout = 15

// handlePauseSandbox serves POST /sandboxes/{sandboxID}/pause: 204, 409
// when already paused. The body ({memory}) is optional; the memory is
// always kept here.
func (s *Server) handlePauseSandbox(w http.ResponseWriter, r *http.Request) error {
	id, _, err := sandboxRequest[e2b.SandboxPauseRequest](w, r, true)
	if err != nil {
		return err
	}
	sb, unlock, err := s.lockedSandbox(id)
	if err != nil {
		return err
	}
	defer unlock()
	if sb.Paused() {
		return failure.New(failure.Conflict, "Error pausing sandbox - sandbox '%s' is already paused", id)
	}
	if err := s.pauseSandbox(r.Context(), sb); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleResumeSandbox serves the deprecated POST /sandboxes/{sandboxID}/resume:
// 201 with the sandbox, 409 when it runs.
func (s *Server) handleResumeSandbox(w http.ResponseWriter, r *http.Request) error {
	id, req, err := sandboxRequest[e2b.ResumedSandbox](w, r, true)
	if err != nil {
		return err
	}
	timeout, err := s.ttl(req.Timeout, defaultResumeTimeout, 0)
	if err != nil {
		return err
	}
	sb, unlock, err := s.lockedSandbox(id)
	if err != nil {
		return err
	}
	defer unlock()
	if !sb.Paused() {
		return failure.New(failure.Conflict, "Sandbox %s is already running", id)
	}
	if sb, err = s.resumeSandbox(r.Context(), sb, timeout, req.AutoPause); err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, s.sandboxAnswer(sb))
	return nil
}

// sandboxLock is the lock of one sandbox and how many hold or wait for it.
type sandboxLock struct {
	mu    sync.Mutex
	users int
}

// lockedSandbox locks the sandbox id (lockSandbox) and reads its record;
// when it cannot, it returns the error with nothing locked.
func (s *Server) lockedSandbox(id string) (store.Sandbox, func(), error) {
	unlock := s.lockSandbox(id)
	sb, err := s.store.Sandbox(id)
	if err != nil {
		unlock()
		return store.Sandbox{}, nil, err
	}
	return sb, unlock, nil
}

// lockSandbox takes the lock that serialises the pauses, resumes and
// snapshots of sandbox id, so that its record and its container agree, and
// returns its release. Other sandboxes are not held up (a commit takes a
// while).
func (s *Server) lockSandbox(id string) func() {
	s.mu.Lock()
	l := s.sandboxLocks[id]
	if l == nil {
		l = &sandboxLock{}
		s.sandboxLocks[id] = l
	}
	l.users++
	s.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.users--; l.users == 0 {
			delete(s.sandboxLocks, id)
		}
		s.mu.Unlock()
	}
}

// pauseSandbox freezes a running sandbox and records it paused. Its
// container's own end is cleared first, so that envd, thawed later, does
// not end it for an end that passed while it was paused. Callers hold
// the sandbox's lock (lockSandbox).
func (s *Server) pauseSandbox(ctx context.Context, sb store.Sandbox) error {
	if err := s.engine.SetSandboxDeadline(ctx, sb.ID, time.Time{}); err != nil {
		return failure.OwnFailure(err)
	}
	if err := s.engine.PauseSandbox(ctx, sb.ID); err != nil {
		if derr := s.engine.SetSandboxDeadline(ctx, sb.ID, containerEnd(sb)); derr != nil {
			s.log.Error("restore the end of a sandbox that could not be paused", "sandbox", sb.ID, "err", derr)
		}
		return failure.OwnFailure(err)
	}
	if _, err := s.store.PauseSandbox(sb.ID); err != nil {
		if rerr := s.engine.ResumeSandbox(context.WithoutCancel(ctx), engine.SandboxSpec{SandboxID: sb.ID}); rerr != nil {
			s.log.Error("thaw a sandbox whose pause could not be recorded", "sandbox", sb.ID, "err", rerr)
		}
		return err
	}
	return nil
}

// resumeSandbox thaws a paused sandbox to run timeout from now and records
// it running (and, when autoPause is set, whether it pauses then). Callers
// hold the sandbox's lock (lockSandbox).
func (s *Server) resumeSandbox(ctx context.Context, sb store.Sandbox, timeout time.Duration, autoPause *bool) (store.Sandbox, error) {
	next := sb
	next.State, next.EndAt = store.StateRunning, s.cfg.Now().Add(timeout)
	if autoPause != nil {
		next.AutoPause = *autoPause
	}
	// The end first: envd must find it when it thaws.
	if err := s.engine.SetSandboxDeadline(ctx, sb.ID, containerEnd(next)); err != nil {
		return sb, failure.OwnFailure(err)
	}
	b, err := s.store.Build(sb.TemplateID, sb.BuildID)
	if err == nil && b.Result == nil {
		err = fmt.Errorf("build %s has no image", b.ID)
	}
	if err != nil {
		return sb, failure.OwnFailure(err)
	}
	if err := s.engine.ResumeSandbox(ctx, sandboxSpec(next, b)); err != nil {
		return sb, failure.OwnFailure(err)
	}
	resumed, err := s.store.ResumeSandbox(sb.ID, next.EndAt, autoPause)
	if err != nil {
		// The sandbox runs but is recorded paused: pause it again so that
		// the record holds.
		if perr := s.engine.PauseSandbox(context.WithoutCancel(ctx), sb.ID); perr != nil {
			s.log.Error("freeze a sandbox whose resume could not be recorded", "sandbox", sb.ID, "err", perr)
		}
		return sb, err
	}
	return resumed, nil
}

// autoResume resumes a paused sandbox that traffic resumes (lifecycle
// autoResume) for its AutoResume, and reports whether it runs now.
func (s *Server) autoResume(ctx context.Context, sb store.Sandbox) bool {
	if sb.AutoResume <= 0 {
		return false
	}
	defer s.lockSandbox(sb.ID)()
	sb, err := s.store.Sandbox(sb.ID)
	if err != nil {
		return false
	}
	if sb.Paused() {
		if _, err := s.resumeSandbox(ctx, sb, sb.AutoResume, nil); err != nil {
			s.log.Error("resume a sandbox for its traffic", "sandbox", sb.ID, "err", err)
			return false
		}
		s.log.Info("sandbox resumed by its traffic", "sandbox", sb.ID)
	}
	return true
}

// pauseAtEnd pauses a sandbox whose end came and that pauses then
// (lifecycle onTimeout "pause"), for the reaper and the shutdown.
func (s *Server) pauseAtEnd(ctx context.Context, id string) {
	defer s.lockSandbox(id)()
	sb, err := s.store.Sandbox(id)
	if err != nil || sb.Paused() {
		return // killed or paused meanwhile
	}
	if err := s.pauseSandbox(ctx, sb); err != nil {
		s.log.Error("pause a sandbox at its end", "sandbox", id, "err", err)
		return
	}
	s.log.Info("sandbox timed out and was paused", "sandbox", id)
}
