package localserver

import (
	"context"
	"crypto/rand"
	"maps"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

func (s *Server) domain() *string {
	if s.cfg.Domain == "" {
		return nil
	}
	d := s.cfg.Domain
	return &d
}

// Default sandbox timeouts in seconds (design/e2b-api.md "Create").
const (
	defaultTimeoutV1 = 15
	defaultTimeoutV2 = 300
)

// handleCreateSandbox serves POST /v2/sandboxes.
func (s *Server) handleCreateSandbox(w http.ResponseWriter, r *http.Request) error {
	var req e2b.NewSandbox
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	sb, err := s.createSandbox(r.Context(), req, defaultTimeoutV2, true)
	return answerCreated(w, sb, err)
}

// handleCreateSandboxV1 serves POST /sandboxes, which differs from v2 in
// the default timeout and in that it secures envd only on request.
func (s *Server) handleCreateSandboxV1(w http.ResponseWriter, r *http.Request) error {
	var req e2b.NewSandbox
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	sb, err := s.createSandbox(r.Context(), req, defaultTimeoutV1, req.Secure != nil && *req.Secure)
	return answerCreated(w, sb, err)
}

// answerCreated answers 201 with the sandbox createSandbox started, or its error.
func answerCreated(w http.ResponseWriter, sb *e2b.Sandbox, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, sb)
	return nil
}

// createSandbox starts a sandbox of req's template for req.Timeout seconds
// (defaultTimeout when unset), with an envd access token when secure, and
// records it.
func (s *Server) createSandbox(ctx context.Context, req e2b.NewSandbox, defaultTimeout int32, secure bool) (*e2b.Sandbox, error) {
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
	t, b, err := s.store.Resolve(req.TemplateID)
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
	pooled, fromPool := s.takePooled(b.ID)
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
	if err := s.store.CreateSandbox(sb); err != nil {
		if fromPool {
			s.removePooled(ctx, pooled)
		}
		return nil, err
	}
	started, err := s.startSandbox(ctx, sb, b, pooled, fromPool)
	if err == nil {
		envdVersion := started.EnvdVersion
		if envdVersion == "" {
			envdVersion = b.Result.EnvdVersion
		}
		sb, err = s.store.SandboxStarted(id, started.ContainerID, envdVersion)
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
		if _, delErr := s.store.DeleteSandbox(id); delErr != nil {
			s.log.Error("forget a sandbox that did not start", "sandbox", id, "err", delErr)
		}
		return nil, err
	}
	s.fillPool(t.ID, b.ID)
	return s.sandboxAnswer(sb), nil
}

// startSandbox starts the container of sandbox sb of build b, recorded as
// starting: the pooled container when fromPool, which takes sb's end and
// is initialised as a fresh one is, else (or when that fails) a fresh one
// started with sb's end. On error nothing is left running.
func (s *Server) startSandbox(ctx context.Context, sb store.Sandbox, b store.Build, pooled pooledSandbox, fromPool bool) (*engine.Sandbox, error) {
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
	release, err := s.startSlot(ctx)
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

// startSlot waits until fewer than maxContainerStarts containers are
// starting, or ctx ends, and returns the release of the slot it took.
func (s *Server) startSlot(ctx context.Context) (func(), error) {
	select {
	case s.starts <- struct{}{}:
		return func() { <-s.starts }, nil
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

// sandboxAnswer is the Sandbox of create, connect and resume answers.
func (s *Server) sandboxAnswer(sb store.Sandbox) *e2b.Sandbox {
	return &e2b.Sandbox{
		TemplateID: sb.TemplateID, SandboxID: sb.ID, Alias: sb.Alias, ClientID: e2b.ClientID,
		EnvdVersion: sb.EnvdVersion, EnvdAccessToken: sb.AccessToken, Domain: s.domain(),
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

// stateAndEnd is the API's state of the sandbox and its endAt, which for a
// paused sandbox is when it was paused, as on E2B.
func stateAndEnd(sb store.Sandbox) (string, time.Time) {
	switch {
	case !sb.Paused():
		return store.StateRunning, sb.EndAt
	case sb.PausedAt != nil:
		return store.StatePaused, *sb.PausedAt
	default:
		return store.StatePaused, sb.EndAt
	}
}

// sandboxID reads the sandbox ID of the path; a bad one is a 400 answer.
func sandboxID(r *http.Request) (string, error) {
	id := r.PathValue("sandboxID")
	if err := e2b.ValidateSandboxID(id); err != nil {
		return "", failure.New(failure.Invalid, "%v", err)
	}
	return id, nil
}

// sandboxRequest reads the sandbox ID of the path and the JSON body of a
// request about that sandbox; either bad is a 400 answer.
func sandboxRequest[T any](w http.ResponseWriter, r *http.Request, allowEmpty bool) (id string, req T, err error) {
	if id, err = sandboxID(r); err != nil {
		return id, req, err
	}
	return id, req, decodeBody(w, r, &req, allowEmpty)
}

func (s *Server) handleGetSandbox(w http.ResponseWriter, r *http.Request) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	sb, err := s.store.Sandbox(id)
	if err != nil {
		return err
	}
	state, end := stateAndEnd(sb)
	onTimeout := "kill"
	if sb.AutoPause {
		onTimeout = "pause"
	}
	writeJSON(w, http.StatusOK, e2b.SandboxDetail{
		TemplateID: sb.TemplateID, Alias: sb.Alias, SandboxID: sb.ID, ClientID: e2b.ClientID,
		StartedAt: sb.StartedAt, EndAt: end, EnvdVersion: sb.EnvdVersion,
		EnvdAccessToken: sb.AccessToken, Domain: s.domain(),
		CPUCount: sb.CPUCount, MemoryMB: sb.MemoryMB, Metadata: sb.Metadata, State: state,
		Lifecycle: &e2b.SandboxLifecycle{OnTimeout: onTimeout, AutoResume: sb.AutoResume > 0},
	})
	return nil
}

func listed(sb store.Sandbox) e2b.ListedSandbox {
	state, end := stateAndEnd(sb)
	return e2b.ListedSandbox{
		TemplateID: sb.TemplateID, Alias: sb.Alias, SandboxID: sb.ID, ClientID: e2b.ClientID,
		StartedAt: sb.StartedAt, EndAt: end, CPUCount: sb.CPUCount, MemoryMB: sb.MemoryMB,
		Metadata: sb.Metadata, State: state, EnvdVersion: sb.EnvdVersion,
	}
}

// filteredSandboxes lists the sandboxes matching the metadata query
// ("k=v&k2=v2", URL-encoded) and the state query (comma-separated or
// repeated; defaultStates when absent).
func (s *Server) filteredSandboxes(r *http.Request, defaultStates ...string) ([]e2b.ListedSandbox, error) {
	want, err := url.ParseQuery(r.URL.Query().Get("metadata"))
	if err != nil {
		return nil, failure.New(failure.Invalid, "metadata query %q is invalid: %v", r.URL.Query().Get("metadata"), err)
	}
	states := defaultStates
	if raw := r.URL.Query()["state"]; len(raw) > 0 {
		states = strings.Split(strings.Join(raw, ","), ",")
	}
	all, err := s.store.LiveSandboxes()
	if err != nil {
		return nil, failure.OwnFailure(err)
	}
	out := []e2b.ListedSandbox{}
next:
	for _, sb := range all {
		if sb.Starting() {
			continue
		}
		for k := range want {
			if sb.Metadata[k] != want.Get(k) {
				continue next
			}
		}
		item := listed(sb)
		if slices.Contains(states, item.State) {
			out = append(out, item)
		}
	}
	return out, nil
}

// handleListSandboxes serves GET /sandboxes, which lists running sandboxes
// only, as E2B's does.
func (s *Server) handleListSandboxes(w http.ResponseWriter, r *http.Request) error {
	out, err := s.filteredSandboxes(r, store.StateRunning)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) handleListSandboxesV2(w http.ResponseWriter, r *http.Request) error {
	limit, err := pageLimit(r)
	if err != nil {
		return err
	}
	out, err := s.filteredSandboxes(r, store.StateRunning, store.StatePaused)
	if err != nil {
		return err
	}
	page, next := paginate(out, limit, r.URL.Query().Get("nextToken"), func(sb e2b.ListedSandbox) string { return sb.SandboxID })
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *Server) handleDeleteSandbox(w http.ResponseWriter, r *http.Request) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	if _, err := s.store.Sandbox(id); err != nil {
		return err
	}
	if err := s.stopSandbox(r.Context(), id); err != nil {
		return failure.OwnFailure(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// stopSandbox removes the sandbox's container, then forgets it; a sandbox
// whose container could not be removed stays recorded to be tried again.
func (s *Server) stopSandbox(ctx context.Context, id string) error {
	if err := s.engine.StopSandbox(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	if p, ok := s.proxies[id]; ok {
		p.transport.CloseIdleConnections()
		delete(s.proxies, id)
	}
	s.mu.Unlock()
	_, err := s.store.DeleteSandbox(id)
	return err
}

func (s *Server) handleSandboxTimeout(w http.ResponseWriter, r *http.Request) error {
	id, req, err := sandboxRequest[e2b.SandboxTimeoutRequest](w, r, false)
	if err != nil {
		return err
	}
	timeout, err := s.ttl(&req.Timeout, 0, 0)
	if err != nil {
		return err
	}
	sb, err := s.store.SetSandboxEndAt(id, s.cfg.Now().Add(timeout))
	if err != nil {
		return err
	}
	if err := s.engine.SetSandboxDeadline(r.Context(), id, containerEnd(sb)); err != nil {
		return failure.OwnFailure(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleConnectSandbox serves POST /v2/sandboxes/{sandboxID}/connect, the
// SDK's Sandbox.connect; its body is optional (timeout 300 s).
func (s *Server) handleConnectSandbox(w http.ResponseWriter, r *http.Request) error {
	id, req, err := sandboxRequest[e2b.ConnectSandbox](w, r, true)
	if err != nil {
		return err
	}
	return s.connectSandbox(w, r, id, req.Timeout)
}

// handleConnectSandboxV1 serves POST /sandboxes/{sandboxID}/connect, which
// requires the timeout.
func (s *Server) handleConnectSandboxV1(w http.ResponseWriter, r *http.Request) error {
	id, req, err := sandboxRequest[e2b.ConnectSandbox](w, r, false)
	if err != nil {
		return err
	}
	if req.Timeout == nil {
		return failure.New(failure.Invalid, "timeout is required")
	}
	return s.connectSandbox(w, r, id, req.Timeout)
}

// connectSandbox answers a connect: a paused sandbox is resumed to run
// timeout seconds (300 s when unset) from now, 201; a running one ends
// then if that is later (connecting only extends), 200.
func (s *Server) connectSandbox(w http.ResponseWriter, r *http.Request, id string, requested *int32) error {
	timeout, err := s.ttl(requested, defaultTimeoutV2, 0)
	if err != nil {
		return err
	}
	sb, unlock, err := s.lockedSandbox(id)
	if err != nil {
		return err
	}
	defer unlock()
	if sb.Paused() {
		if sb, err = s.resumeSandbox(r.Context(), sb, timeout, nil); err != nil {
			return err
		}
		writeJSON(w, http.StatusCreated, s.sandboxAnswer(sb))
		return nil
	}
	if sb, err = s.extendSandbox(r, id, timeout); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.sandboxAnswer(sb))
	return nil
}

// handleRefreshSandbox keeps a sandbox alive for duration seconds more (0 to 3600) from
// now, never shortening it.
func (s *Server) handleRefreshSandbox(w http.ResponseWriter, r *http.Request) error {
	id, req, err := sandboxRequest[e2b.SandboxRefreshRequest](w, r, true)
	if err != nil {
		return err
	}
	var duration int32
	if req.Duration != nil {
		duration = *req.Duration
	}
	if duration < 0 || duration > maxRefreshSeconds {
		return failure.New(failure.Invalid, "duration %d is invalid: it must be from 0 to %d seconds", duration, maxRefreshSeconds)
	}
	if _, err := s.extendSandbox(r, id, time.Duration(duration)*time.Second); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// extendSandbox moves the sandbox's end to now+d when that is later, in the
// store and in its container.
func (s *Server) extendSandbox(r *http.Request, id string, d time.Duration) (store.Sandbox, error) {
	sb, err := s.store.ExtendSandboxEndAt(id, s.cfg.Now().Add(d))
	if err != nil {
		return sb, err
	}
	if err := s.engine.SetSandboxDeadline(r.Context(), id, containerEnd(sb)); err != nil {
		return sb, failure.OwnFailure(err)
	}
	return sb, nil
}

// maxRefreshSeconds is the largest refresh E2B accepts (SandboxRefreshRequest).
const maxRefreshSeconds = 3600

// ttl reads the timeout (seconds) of a request, or def when unset. It must
// be from least seconds to the server's limit; else the error is the 400
// answer naming it.
func (s *Server) ttl(requested *int32, def, least int32) (time.Duration, error) {
	seconds := def
	if requested != nil {
		seconds = *requested
	}
	if seconds < least || time.Duration(seconds)*time.Second > s.cfg.MaxSandboxTimeout {
		return 0, failure.New(failure.Invalid, "timeout %d is invalid: it must be from %d to %d seconds", seconds, least, int64(s.cfg.MaxSandboxTimeout/time.Second))
	}
	return time.Duration(seconds) * time.Second, nil
}

// grantPruneInterval is how often the reaper also prunes expired upload
// grants (link requests and the start prune them too).
const grantPruneInterval = time.Minute

// diskCheckInterval is how often the reaper has the engine measure the
// containers' file systems against their disk limits. Each measure walks
// the files every running container changed (measured: 0.5 to 1.5 s for
// one with 36,000 on a busy 2-core machine), so the next waits at least
// diskCheckSpacing times as long as the last took: the engine spends at
// most a tenth of its time on it.
const (
	diskCheckInterval = 2 * time.Second
	diskCheckSpacing  = 10
)

// reapLoop stops sandboxes whose time ran out (pausing those that pause
// then) or whose files grew past their disk limit, and prunes expired
// upload grants, until the server closes.
func (s *Server) reapLoop() {
	ticker := time.NewTicker(s.cfg.ReapInterval)
	defer ticker.Stop()
	lastPrune := time.Now()
	var lastDiskCheck time.Time
	var diskCheckTook time.Duration
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-ticker.C:
			s.reapExpired(s.ctx)
			s.expirePool(s.ctx)
			if time.Since(lastDiskCheck) >= max(diskCheckInterval, diskCheckSpacing*diskCheckTook) {
				lastDiskCheck = time.Now()
				s.reapOverDisk(s.ctx)
				diskCheckTook = time.Since(lastDiskCheck)
			}
			if time.Since(lastPrune) >= grantPruneInterval {
				lastPrune = time.Now()
				if _, err := s.store.PruneGrants(); err != nil {
					s.log.Error("prune expired upload grants", "err", err)
				}
			}
		}
	}
}

func (s *Server) reapExpired(ctx context.Context) {
	sandboxes, err := s.store.Sandboxes()
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
		if err := s.stopSandbox(ctx, sb.ID); err != nil {
			s.log.Error("stop expired sandbox", "sandbox", sb.ID, "err", err)
			continue
		}
		s.log.Info("sandbox timed out and was stopped", "sandbox", sb.ID)
	}
}

// reapOverDisk stops the sandboxes the engine found past their disk limit
// (it stopped their containers already) and says why.
func (s *Server) reapOverDisk(ctx context.Context) {
	overruns, err := s.engine.EnforceDiskLimits(ctx)
	if err != nil {
		s.log.Error("enforce disk limits", "err", err)
	}
	for _, o := range overruns {
		if err := s.stopSandbox(ctx, o.SandboxID); err != nil {
			s.log.Error("stop a sandbox past its disk limit", "sandbox", o.SandboxID, "err", err)
			continue
		}
		s.log.Warn("sandbox stopped: "+o.Error(), "sandbox", o.SandboxID, "used_mib", o.Used>>20, "limit_mib", o.Limit>>20)
	}
}
