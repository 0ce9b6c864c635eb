package sandboxes

import (
	"context"
	"fmt"
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

// Pause pauses a running sandbox (Conflict when it is paused already).
func (s *Manager) Pause(ctx context.Context, id string) error {
	sb, unlock, err := s.Lock(id)
	if err != nil {
		return err
	}
	defer unlock()
	if sb.Paused() {
		return failure.New(failure.Conflict, "Error pausing sandbox - sandbox '%s' is already paused", id)
	}
	return s.pause(ctx, sb)
}

// Resume resumes a paused sandbox for timeout seconds (15 when unset) and,
// when autoPause is set, says whether it pauses then (Conflict when it
// runs).
func (s *Manager) Resume(ctx context.Context, id string, timeout *int32, autoPause *bool) (*e2b.Sandbox, error) {
	d, err := s.ttl(timeout, defaultResumeTimeout, 0)
	if err != nil {
		return nil, err
	}
	sb, unlock, err := s.Lock(id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if !sb.Paused() {
		return nil, failure.New(failure.Conflict, "Sandbox %s is already running", id)
	}
	if sb, err = s.resume(ctx, sb, d, autoPause); err != nil {
		return nil, err
	}
	return s.answer(sb), nil
}

// sandboxLock is the lock of one sandbox and how many hold or wait for it.
type sandboxLock struct {
	mu    sync.Mutex
	users int
}

// Lock locks the sandbox id (sandboxLocks.lock) and reads its record;
// when it cannot, it returns the error with nothing locked.
func (s *Manager) Lock(id string) (store.Sandbox, func(), error) {
	unlock := s.sandboxLocks.lock(id)
	sb, err := s.records.Sandbox(id)
	if err != nil {
		unlock()
		return store.Sandbox{}, nil, err
	}
	return sb, unlock, nil
}

// sandboxLocks are the locks of the sandboxes being paused, resumed or
// snapshotted, by sandbox ID, each kept while someone holds or waits for it.
type sandboxLocks struct {
	mu    sync.Mutex
	locks map[string]*sandboxLock
}

// lock takes the lock that serialises the pauses, resumes and snapshots of
// sandbox id, so that its record and its container agree, and returns its
// release. Other sandboxes are not held up (a commit takes a while).
func (ls *sandboxLocks) lock(id string) func() {
	ls.mu.Lock()
	l := ls.locks[id]
	if l == nil {
		l = &sandboxLock{}
		ls.locks[id] = l
	}
	l.users++
	ls.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		ls.mu.Lock()
		if l.users--; l.users == 0 {
			delete(ls.locks, id)
		}
		ls.mu.Unlock()
	}
}

// pause freezes a running sandbox and records it paused. Its
// container's own end is cleared first, so that envd, thawed later, does
// not end it for an end that passed while it was paused. Callers hold
// the sandbox's lock (sandboxLocks.lock).
func (s *Manager) pause(ctx context.Context, sb store.Sandbox) error {
	if err := s.engine.SetSandboxDeadline(ctx, sb.ID, time.Time{}); err != nil {
		return failure.OwnFailure(err)
	}
	if err := s.engine.PauseSandbox(ctx, sb.ID); err != nil {
		if derr := s.engine.SetSandboxDeadline(ctx, sb.ID, containerEnd(sb)); derr != nil {
			s.log.Error("restore the end of a sandbox that could not be paused", "sandbox", sb.ID, "err", derr)
		}
		return failure.OwnFailure(err)
	}
	if _, err := s.records.PauseSandbox(sb.ID); err != nil {
		if rerr := s.engine.ResumeSandbox(context.WithoutCancel(ctx), engine.SandboxSpec{SandboxID: sb.ID}); rerr != nil {
			s.log.Error("thaw a sandbox whose pause could not be recorded", "sandbox", sb.ID, "err", rerr)
		}
		return err
	}
	return nil
}

// resume thaws a paused sandbox to run timeout from now and records
// it running (and, when autoPause is set, whether it pauses then). Callers
// hold the sandbox's lock (sandboxLocks.lock).
func (s *Manager) resume(ctx context.Context, sb store.Sandbox, timeout time.Duration, autoPause *bool) (store.Sandbox, error) {
	next := sb
	next.State, next.EndAt = store.StateRunning, s.cfg.Now().Add(timeout)
	if autoPause != nil {
		next.AutoPause = *autoPause
	}
	// The end first: envd must find it when it thaws.
	if err := s.engine.SetSandboxDeadline(ctx, sb.ID, containerEnd(next)); err != nil {
		return sb, failure.OwnFailure(err)
	}
	b, err := s.catalog.Build(sb.TemplateID, sb.BuildID)
	if err == nil && b.Result == nil {
		err = fmt.Errorf("build %s has no image", b.ID)
	}
	if err != nil {
		return sb, failure.OwnFailure(err)
	}
	if err := s.engine.ResumeSandbox(ctx, sandboxSpec(next, b)); err != nil {
		return sb, failure.OwnFailure(err)
	}
	resumed, err := s.records.ResumeSandbox(sb.ID, next.EndAt, autoPause)
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

// Reach is nil when traffic may go to the sandbox: it runs, or is paused
// and traffic resumes it (lifecycle autoResume), which Reach does. Else
// the sandbox is Unreachable, as E2B's proxy answers: the SDKs read that
// as "the sandbox was killed or timed out" (isRunning → false).
func (s *Manager) Reach(ctx context.Context, id string) error {
	sb, err := s.records.Sandbox(id)
	if err != nil {
		return failure.MissingAs(err, failure.Unreachable, "sandbox '%s' not found: it was killed or timed out", id)
	}
	if sb.Paused() && !s.autoResume(ctx, sb) {
		// Its envd is frozen: a request would wait for it in vain.
		return failure.New(failure.Unreachable, "sandbox '%s' is paused: connect to it to resume it", id)
	}
	return nil
}

// autoResume resumes a paused sandbox that traffic resumes (lifecycle
// autoResume) for its AutoResume, and reports whether it runs now.
func (s *Manager) autoResume(ctx context.Context, sb store.Sandbox) bool {
	if sb.AutoResume <= 0 {
		return false
	}
	defer s.sandboxLocks.lock(sb.ID)()
	sb, err := s.records.Sandbox(sb.ID)
	if err != nil {
		return false
	}
	if sb.Paused() {
		if _, err := s.resume(ctx, sb, sb.AutoResume, nil); err != nil {
			s.log.Error("resume a sandbox for its traffic", "sandbox", sb.ID, "err", err)
			return false
		}
		s.log.Info("sandbox resumed by its traffic", "sandbox", sb.ID)
	}
	return true
}

// pauseAtEnd pauses a sandbox whose end came and that pauses then
// (lifecycle onTimeout "pause"), for the reaper and the shutdown.
func (s *Manager) pauseAtEnd(ctx context.Context, id string) {
	defer s.sandboxLocks.lock(id)()
	sb, err := s.records.Sandbox(id)
	if err != nil || sb.Paused() {
		return // killed or paused meanwhile
	}
	if err := s.pause(ctx, sb); err != nil {
		s.log.Error("pause a sandbox at its end", "sandbox", id, "err", err)
		return
	}
	s.log.Info("sandbox timed out and was paused", "sandbox", id)
}
