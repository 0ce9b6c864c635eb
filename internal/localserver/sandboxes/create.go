package sandboxes

import (
	"context"
	"crypto/rand"
	"maps"
	"runtime"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// Create starts a sandbox of req's template for req.Timeout seconds
// (defaultTimeout when unset), with an envd access token when secure, and
// records it.
func (s *Manager) Create(ctx context.Context, req e2b.NewSandbox, defaultTimeout int32, secure bool) (*e2b.Sandbox, error) {
	timeout, err := s.ttl(req.Timeout, defaultTimeout, 1)
	if err != nil {
		return nil, err
	}
	if req.TemplateID == "" {
		return nil, failure.New(failure.Invalid, "templateID is required")
	}
	autoPause := req.AutoPause != nil && *req.AutoPause
	autoResume := req.AutoResume != nil && req.AutoResume.Enabled
	// E2B's checks: without memory the pause at the end is a file system
	// snapshot, which traffic cannot resume.
	if req.AutoPauseMemory != nil && !*req.AutoPauseMemory {
		if !autoPause {
			return nil, failure.New(failure.Invalid, "autoPauseMemory=false only applies when autoPause is true.")
		}
		if autoResume {
			return nil, failure.New(failure.Invalid, "autoPauseMemory=false (filesystem-only auto-pause) cannot be combined with autoResume: a filesystem-only snapshot cannot be auto-resumed by traffic and must be resumed explicitly.")
		}
	}
	t, b, err := s.catalog.Resolve(req.TemplateID)
	if err != nil {
		return nil, err
	}
	token := ""
	if secure {
		token = rand.Text()
	}
	// One forward flow: the sandbox is recorded as starting with its final
	// ID (a pooled container's, when the build has one) and end, its
	// container started with that end, then it is marked running.
	pooled, fromPool := s.pool.takePooled(b.ID)
	id := "i" + store.RandomID(20)
	if fromPool {
		id = pooled.id
	}
	now := s.cfg.Now().UTC()
	sb := store.Sandbox{
		ID: id, TemplateID: t.ID, Alias: t.Alias, BuildID: b.ID, AccessToken: token,
		StartedAt: now, EndAt: now.Add(timeout), CPUCount: b.CPUCount, MemoryMB: b.MemoryMB,
		Metadata: req.Metadata, EnvVars: req.EnvVars, State: store.StateStarting, AutoPause: autoPause,
	}
	if autoResume {
		sb.AutoResume = timeout
	}
	if err := s.records.CreateSandbox(sb); err != nil {
		if fromPool {
			s.pool.removePooled(ctx, pooled)
		}
		return nil, err
	}
	started, err := s.startSandbox(ctx, sb, b, pooled, fromPool)
	if err == nil {
		envdVersion := started.EnvdVersion
		if envdVersion == "" {
			envdVersion = b.Result.EnvdVersion
		}
		sb, err = s.records.SandboxStarted(id, started.ContainerID, envdVersion)
		if err != nil {
			err = failure.OwnFailure(err)
			if stopErr := s.engine.StopSandbox(context.WithoutCancel(ctx), id); stopErr != nil {
				s.log.Error("stop a sandbox that could not be recorded", "sandbox", id, "err", stopErr)
			}
		}
	} else {
		s.log.Error("start sandbox", "template", t.ID, "build", b.ID, "err", err)
		err = failure.Wrap(failure.SandboxNotStarted, "start sandbox", err)
	}
	if err != nil {
		if _, delErr := s.records.DeleteSandbox(id); delErr != nil {
			s.log.Error("forget a sandbox that did not start", "sandbox", id, "err", delErr)
		}
		return nil, err
	}
	s.pool.fillPool(t.ID, b.ID)
	return s.answer(sb), nil
}

// startSandbox starts the container of sandbox sb of build b, recorded as
// starting: the pooled container when fromPool, which takes sb's end and
// is initialised as a fresh one is, else (or when that fails) a fresh one
// started with sb's end. On error nothing is left running.
func (s *Manager) startSandbox(ctx context.Context, sb store.Sandbox, b store.Build, pooled pooledSandbox, fromPool bool) (*engine.Sandbox, error) {
	spec := sandboxSpec(sb, b)
	if fromPool {
		// The pooled container was started with the pool's end, not the
		// sandbox's: this is the one time the sandbox's end goes down.
		err := s.engine.SetSandboxDeadline(ctx, sb.ID, spec.EndAt)
		if err == nil {
			err = s.engine.InitSandbox(ctx, spec)
		}
		if err == nil {
			s.log.Info("warm pool: sandbox handed out", "sandbox", sb.ID, "build", b.ID)
			return &pooled.started, nil
		}
		s.log.Warn("warm pool: initialise a pooled container; starting a fresh one", "sandbox", sb.ID, "err", err)
		if err := s.engine.StopSandbox(context.WithoutCancel(ctx), sb.ID); err != nil {
			return nil, err
		}
	}
	release, err := s.starts.take(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	return s.engine.StartSandbox(ctx, spec)
}

// maxContainerStarts bounds the sandbox containers starting at once
// (fresh ones and the pool's). Fifty creates at once otherwise start fifty
// containers that share the machine until envd's start timeout passes for
// many of them (seen under gVisor); queued, each start gets its share, and
// the envd timeout counts from its own start.
func maxContainerStarts() int { return max(4, 2*runtime.NumCPU()) }

// startSlots hold a token for every sandbox container starting.
type startSlots chan struct{}

// take waits until fewer than maxContainerStarts containers are starting,
// or ctx ends, and returns the release of the slot it took.
func (slots startSlots) take(ctx context.Context) (func(), error) {
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// sandboxSpec is what the engine needs to start sandbox sb of build b, or
// to boot it again: the build's user, workdir and start command, its env
// with the sandbox's envVars over it.
func sandboxSpec(sb store.Sandbox, b store.Build) engine.SandboxSpec {
	env := maps.Clone(b.Result.Env)
	if env == nil {
		env = map[string]string{}
	}
	maps.Copy(env, sb.EnvVars)
	return engine.SandboxSpec{
		SandboxID: sb.ID, TemplateID: sb.TemplateID, BuildID: sb.BuildID, Image: b.Result.Image,
		User: b.Result.User, Workdir: b.Result.Workdir, Env: env, StartCmd: b.Result.StartCmd,
		AccessToken: sb.AccessToken, CPUCount: sb.CPUCount, MemoryMB: sb.MemoryMB, EndAt: containerEnd(sb),
	}
}

// containerEnd is the end the sandbox's container ends itself at (none
// for one that pauses at its end or is paused: it must not end itself).
func containerEnd(sb store.Sandbox) time.Time {
	if sb.AutoPause || sb.Paused() {
		return time.Time{}
	}
	return sb.EndAt
}
