//go:build linux

package localserver

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/cors"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	envdserver "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/server"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/openapitest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/relay"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

const testAPIKey = "e2b_0123456789abcdef0123456789abcdef01234567"

// testServer is a Server on a loopback httptest listener whose every API
// request and response is checked against E2B's OpenAPI spec.
type testServer struct {
	t      *testing.T
	URL    string
	Server *Server
	Config Config
	client *http.Client
	apiKey string
	// buildWait bounds waitBuild (default 60 s).
	buildWait time.Duration
}

// testClock is a settable clock for expiring grants and sandboxes.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock {
	return &testClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// serverOptions adjust startServer: the Config, the data dir, and whether
// the test closes the server itself.
type serverOptions struct {
	configure   func(*Config)
	dataDir     string
	skipCleanup bool
}

// startServer starts a Server on engine with a fresh data dir (or
// opts.dataDir) and closes it when the test ends. Everything but envd proxy
// traffic, upload PUTs and /_local endpoints goes through the contract check.
func startServer(t *testing.T, eng Engine, opts ...serverOptions) *testServer {
	t.Helper()
	var o serverOptions
	for _, opt := range opts {
		if opt.configure != nil {
			o.configure = opt.configure
		}
		if opt.dataDir != "" {
			o.dataDir = opt.dataDir
		}
		o.skipCleanup = o.skipCleanup || opt.skipCleanup
	}
	cfg := Config{DataDir: o.dataDir, APIKey: testAPIKey, ReapInterval: 5 * time.Millisecond}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if o.configure != nil {
		o.configure(&cfg)
	}
	srv, err := New(t.Context(), cfg, eng)
	if err != nil {
		t.Fatal(err)
	}
	validated := openapitest.E2B(t).Middleware(t, srv.Handler(),
		openapitest.SkipRequests(openapitest.IsSandboxTraffic),
		// The contract describes no preflights.
		openapitest.SkipRequests(cors.IsPreflight),
		openapitest.SkipRequests(func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/_local/") }))
	hs := httptest.NewUnstartedServer(validated)
	checkPanics := failOnPanics(t, hs)
	hs.Start()
	ts := &testServer{t: t, URL: hs.URL, Server: srv, Config: srv.cfg, client: hs.Client(), apiKey: testAPIKey}
	t.Cleanup(func() {
		hs.Close()
		checkPanics()
		if !o.skipCleanup {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := srv.Close(ctx); err != nil {
				t.Errorf("close server: %v", err)
			}
		}
	})
	return ts
}

// request sends a request with the API key and a JSON body (when body is
// not nil; a []byte body is sent as it is).
func (ts *testServer) request(method, path string, body any, header ...string) *http.Response {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			ts.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-API-Key", ts.apiKey)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	resp, err := ts.client.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// call sends a request, requires status and decodes the answer into out.
func (ts *testServer) call(method, path string, body any, status int, out any) http.Header {
	ts.t.Helper()
	resp := ts.request(method, path, body)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		ts.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, raw, status)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			ts.t.Fatalf("%s %s: decode %s: %v", method, path, raw, err)
		}
	}
	return resp.Header
}

// expectError checks that resp is the {code, message} envelope with status
// and a message containing want.
func expectError(t *testing.T, resp *http.Response, status int, want string) {
	t.Helper()
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		t.Fatalf("answer %d %s, want %d", resp.StatusCode, raw, status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("error Content-Type = %q, want application/json", ct)
	}
	var env map[string]any
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("error body %s is not JSON: %v", raw, err)
	}
	if code, ok := env["code"].(float64); !ok || int(code) != status {
		t.Errorf("error envelope code = %v, want %d (body %s)", env["code"], status, raw)
	}
	msg, ok := env["message"].(string)
	if !ok || msg == "" {
		t.Fatalf("error envelope has no message: %s", raw)
	}
	if !strings.Contains(msg, want) {
		t.Errorf("error message %q does not contain %q", msg, want)
	}
}

// direct serves a request with the API key straight from the handler,
// without the contract check: for requests the spec itself rejects
// (malformed bodies, out-of-enum parameters) or that no operation matches.
func (ts *testServer) direct(method, path string, body []byte) *http.Response {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("X-API-Key", testAPIKey)
	rec := httptest.NewRecorder()
	ts.Server.Handler().ServeHTTP(rec, req)
	return rec.Result()
}

func (ts *testServer) expectError(method, path string, body any, status int, want string) {
	ts.t.Helper()
	expectError(ts.t, ts.request(method, path, body), status, want)
}

func (ts *testServer) register(name string, tags ...string) e2b.TemplateRequestResponseV3 {
	ts.t.Helper()
	var out e2b.TemplateRequestResponseV3
	ts.call("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: name, Tags: tags}, http.StatusAccepted, &out)
	return out
}

func (ts *testServer) start(reg e2b.TemplateRequestResponseV3, req e2b.TemplateBuildStartV2) {
	ts.t.Helper()
	ts.call("POST", "/v2/templates/"+reg.TemplateID+"/builds/"+reg.BuildID, req, http.StatusAccepted, nil)
}

func (ts *testServer) status(templateID, buildID, query string) e2b.TemplateBuildInfo {
	ts.t.Helper()
	var info e2b.TemplateBuildInfo
	ts.call("GET", "/templates/"+templateID+"/builds/"+buildID+"/status"+query, nil, http.StatusOK, &info)
	return info
}

// expectTemplateBuild checks that the template list gives templateID's last
// good build as buildID, which its bare name resolves to.
func (ts *testServer) expectTemplateBuild(templateID, buildID string) {
	ts.t.Helper()
	var list []e2b.Template
	ts.call("GET", "/templates", nil, 200, &list)
	for _, tmpl := range list {
		if tmpl.TemplateID == templateID {
			if tmpl.BuildID != buildID {
				ts.t.Errorf("template %s lists build %s, want %s", templateID, tmpl.BuildID, buildID)
			}
			return
		}
	}
	ts.t.Errorf("template %s is not listed: %+v", templateID, list)
}

// waitBuild polls the status as the SDK does until the build ends.
func (ts *testServer) waitBuild(reg e2b.TemplateRequestResponseV3) e2b.TemplateBuildInfo {
	ts.t.Helper()
	// Generous by default: builds under gVisor on a loaded machine take
	// minutes.
	wait := cmp.Or(ts.buildWait, 5*time.Minute)
	deadline := time.Now().Add(wait)
	for {
		info := ts.status(reg.TemplateID, reg.BuildID, "")
		if info.Status == e2b.BuildReady || info.Status == e2b.BuildError {
			return info
		}
		if time.Now().After(deadline) {
			ts.t.Fatalf("build %s still %s after %v", reg.BuildID, info.Status, wait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// build registers name, starts it with steps and waits for it.
func (ts *testServer) build(name string, steps ...e2b.TemplateStep) (e2b.TemplateRequestResponseV3, e2b.TemplateBuildInfo) {
	ts.t.Helper()
	return ts.buildFrom("base:latest", name, steps...)
}

// buildFrom registers name, starts it from image with steps and waits for it.
func (ts *testServer) buildFrom(image, name string, steps ...e2b.TemplateStep) (e2b.TemplateRequestResponseV3, e2b.TemplateBuildInfo) {
	ts.t.Helper()
	reg := ts.register(name)
	ts.start(reg, e2b.TemplateBuildStartV2{FromImage: image, Steps: steps})
	return reg, ts.waitBuild(reg)
}

func run(cmd string) e2b.TemplateStep {
	return e2b.TemplateStep{Type: "RUN", Args: []string{cmd}}
}

// fakeEngine stands in for Docker where a test is about API semantics. Its
// builds log one line per step; a RUN "fail" step fails, a RUN "crash" step
// fails with no step known, a RUN "block" step waits for cancellation or for
// release. Its sandboxes run the real envd
// server on a unix socket.
type fakeEngine struct {
	t   *testing.T
	dir string

	release chan struct{} // closed to let "block" steps finish
	builds  chan engine.BuildSpec
	stopped chan string

	mu            sync.Mutex
	startErr      error                   // when set, StartSandbox fails with it
	sandboxes     map[string]func() error // stops the sandbox's envd, returning its Serve error
	removedImages []string
	deadlines     map[string]time.Time
	deadlineSets  map[string]int // SetSandboxDeadline calls, by sandbox
	keptOrphans   []string
	paused        map[string]bool
	snapshotErr   error                  // when set, CommitSandbox fails with it
	logs          []engine.LogLine       // every fake sandbox's log
	warmed        []engine.SandboxSpec   // every WarmSandbox's spec, in order
	ends          chan engine.SandboxEnd // what WatchSandboxEnds reports
}

func newFakeEngine(t *testing.T) *fakeEngine {
	// Not t.TempDir: sandbox sockets live here, and a unix socket path must
	// stay under 108 bytes, which a long test name in the directory can pass.
	dir, err := os.MkdirTemp("", "lsfake") //nolint:usetesting // socket path length, see above
	if err != nil {
		t.Fatal(err)
	}
	e := &fakeEngine{
		t: t, dir: dir, release: make(chan struct{}),
		builds: make(chan engine.BuildSpec, 100), stopped: make(chan string, 100),
		sandboxes: map[string]func() error{}, paused: map[string]bool{}, ends: make(chan engine.SandboxEnd),
	}
	t.Cleanup(func() {
		e.mu.Lock()
		for id, stop := range e.sandboxes {
			if err := stop(); err != nil {
				t.Errorf("envd of sandbox %s: %v", id, err)
			}
		}
		e.mu.Unlock()
		os.RemoveAll(dir)
	})
	return e
}

func (e *fakeEngine) Info(context.Context) (engine.EngineInfo, error) {
	return engine.EngineInfo{ServerVersion: "fake", Runtime: engine.Runtime{Name: "fake"}}, nil
}

func (e *fakeEngine) Build(ctx context.Context, spec engine.BuildSpec) (*engine.BuildResult, error) {
	e.builds <- spec
	env := map[string]string{}
	if spec.FromBuild != nil {
		maps.Copy(env, spec.FromBuild.Env)
	}
	spec.Log(e2b.BuildLogEntry{Message: "base " + spec.BaseImage, Level: e2b.LogDebug, Step: "base"})
	for i, st := range spec.Steps {
		step := strconv.Itoa(i + 1)
		spec.Log(e2b.BuildLogEntry{Message: fmt.Sprintf("%s %s", st.Type, strings.Join(st.Args, " ")), Level: e2b.LogInfo, Step: step})
		switch {
		case st.Type == steps.Run && st.Args[0] == "fail":
			spec.Log(e2b.BuildLogEntry{Message: "it failed", Level: e2b.LogError, Step: step})
			return nil, &engine.StepError{Step: step, Err: errors.New("command exited with code 1")}
		case st.Type == steps.Run && st.Args[0] == "crash":
			return nil, errors.New("the engine lost the container")
		case st.Type == steps.Run && st.Args[0] == "block":
			select {
			case <-ctx.Done():
				return nil, &engine.StepError{Step: step, Err: ctx.Err()}
			case <-e.release:
			}
		case st.Type == steps.Env:
			for j := 0; j+1 < len(st.Args); j += 2 {
				env[st.Args[j]] = st.Args[j+1]
			}
		}
	}
	return &engine.BuildResult{
		Image: "fake/" + spec.TemplateID + ":" + spec.BuildID, User: "user", Workdir: "/home/user",
		Env: env, StartCmd: spec.StartCmd, ReadyCmd: spec.ReadyCmd, EnvdVersion: "0.6.13",
	}, nil
}

func (e *fakeEngine) StartSandbox(ctx context.Context, spec engine.SandboxSpec) (*engine.Sandbox, error) {
	sb, err := e.WarmSandbox(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := e.InitSandbox(ctx, spec); err != nil {
		return nil, errors.Join(err, e.StopSandbox(ctx, spec.SandboxID))
	}
	return sb, nil
}

// WarmSandbox serves a real envd on the sandbox's socket, not initialised.
func (e *fakeEngine) WarmSandbox(ctx context.Context, spec engine.SandboxSpec) (*engine.Sandbox, error) {
	e.mu.Lock()
	startErr := e.startErr
	e.mu.Unlock()
	if startErr != nil {
		return nil, startErr
	}
	socket := filepath.Join(e.dir, spec.SandboxID+".sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, err
	}
	serveCtx, cancel := context.WithCancel(context.WithoutCancel(ctx)) // envd lives until StopSandbox
	served := make(chan error, 1)
	go func() {
		served <- envdserver.New(envdserver.Config{BaseEnv: testutil.CommandEnv(e.t)}).Serve(serveCtx, ln)
	}()
	e.mu.Lock()
	e.sandboxes[spec.SandboxID] = func() error {
		cancel()
		return <-served
	}
	e.warmed = append(e.warmed, spec)
	// The container ends itself at spec.EndAt, as the engine's does.
	if e.deadlines == nil {
		e.deadlines = map[string]time.Time{}
	}
	e.deadlines[spec.SandboxID] = spec.EndAt
	e.mu.Unlock()
	return &engine.Sandbox{ID: spec.SandboxID, ContainerID: "fake-" + spec.SandboxID, EnvdVersion: "0.6.13"}, nil
}

// InitSandbox hands the sandbox's envd its token and env.
func (e *fakeEngine) InitSandbox(ctx context.Context, spec engine.SandboxSpec) error {
	client, err := envdclient.New(envdclient.Config{BaseURL: "http://localhost", HTTPClient: unixClient(filepath.Join(e.dir, spec.SandboxID+".sock"))})
	if err != nil {
		return err
	}
	return client.Init(ctx, envdclient.InitRequest{AccessToken: spec.AccessToken, EnvVars: spec.Env})
}

// DialSandbox reaches the fake sandbox's envd on its socket; nothing else
// listens in a fake sandbox.
func (e *fakeEngine) DialSandbox(ctx context.Context, id string, port int) (net.Conn, error) {
	e.mu.Lock()
	_, ok := e.sandboxes[id]
	e.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("sandbox %s is not running", id)
	}
	if port != envd.Port {
		return nil, &relay.RefusedError{Port: port, Reason: "connection refused"}
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", filepath.Join(e.dir, id+".sock"))
}

// WatchSandboxEnds reports the ends a test sends on e.ends.
func (e *fakeEngine) WatchSandboxEnds(ctx context.Context, ended func(engine.SandboxEnd)) {
	for {
		select {
		case <-ctx.Done():
			return
		case end := <-e.ends:
			ended(end)
		}
	}
}

func unixClient(socket string) *http.Client {
	return &http.Client{Transport: envdclient.UnixSocketTransport(socket)}
}

func (e *fakeEngine) StopSandbox(_ context.Context, id string) error {
	e.mu.Lock()
	stop, ok := e.sandboxes[id]
	delete(e.sandboxes, id)
	e.mu.Unlock()
	if !ok {
		return nil
	}
	err := stop()
	e.stopped <- id
	return err
}

func (e *fakeEngine) RemoveOrphans(_ context.Context, keep func(string) bool, _ func(string) bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	for id, stop := range e.sandboxes {
		if keep(id) {
			e.keptOrphans = append(e.keptOrphans, id)
		} else {
			errs = append(errs, stop())
			delete(e.sandboxes, id)
		}
	}
	return errors.Join(errs...)
}

func (e *fakeEngine) SetSandboxDeadline(_ context.Context, id string, end time.Time) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.deadlines == nil {
		e.deadlines = map[string]time.Time{}
	}
	e.deadlines[id] = end
	if e.deadlineSets == nil {
		e.deadlineSets = map[string]int{}
	}
	e.deadlineSets[id]++
	return nil
}

func (e *fakeEngine) RemoveImage(_ context.Context, image string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.removedImages = append(e.removedImages, image)
	return nil
}

func (e *fakeEngine) PauseSandbox(_ context.Context, id string) error {
	return e.setPaused(id, true)
}

func (e *fakeEngine) ResumeSandbox(_ context.Context, spec engine.SandboxSpec) error {
	return e.setPaused(spec.SandboxID, false)
}

// setPaused fails as Docker does: for an unknown sandbox, or one already in
// that state.
func (e *fakeEngine) setPaused(id string, paused bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.sandboxes[id]; !ok {
		return fmt.Errorf("sandbox %s has no container", id)
	}
	if e.paused[id] == paused {
		return fmt.Errorf("sandbox %s: paused is already %v", id, paused)
	}
	e.paused[id] = paused
	return nil
}

func (e *fakeEngine) isPaused(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.paused[id]
}

func (e *fakeEngine) SandboxMetrics(_ context.Context, id string) (engine.SandboxMetrics, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.sandboxes[id]; !ok {
		return engine.SandboxMetrics{}, fmt.Errorf("sandbox %s has no container", id)
	}
	return engine.SandboxMetrics{Time: time.Now(), CPUCount: 2, CPUUsedPct: 12.5, MemUsed: 64 << 20, MemTotal: 1 << 30, DiskUsed: 10 << 20}, nil
}

func (e *fakeEngine) SandboxLogs(_ context.Context, id string, since time.Time, last int) ([]engine.LogLine, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.sandboxes[id]; !ok {
		return nil, fmt.Errorf("sandbox %s has no container", id)
	}
	lines := e.logs
	if last > 0 && last < len(lines) {
		lines = lines[len(lines)-last:]
	}
	return slices.DeleteFunc(slices.Clone(lines), func(l engine.LogLine) bool { return l.Time.Before(since) }), nil
}

// CommitSandbox names the image as Docker's engine does; snapshotErr fails it.
func (e *fakeEngine) CommitSandbox(_ context.Context, spec engine.SnapshotSpec) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.sandboxes[spec.SandboxID]; !ok {
		return "", fmt.Errorf("sandbox %s has no container", spec.SandboxID)
	}
	if e.snapshotErr != nil {
		return "", e.snapshotErr
	}
	return "fake/" + spec.TemplateID + ":" + spec.BuildID, nil
}

// EnforceDiskLimits finds nothing: fake sandboxes have no disk limit.
func (e *fakeEngine) EnforceDiskLimits(context.Context) ([]engine.DiskOverrun, error) {
	return nil, nil
}
