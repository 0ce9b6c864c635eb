//go:build linux

package sandboxrun

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	envd "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/server"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/openapitest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

const (
	testSandbox = "itest0sandbox"
	testToken   = "envd-token"
)

const (
	testTemplateID = "abcdefghij0123456789"
	testBuild      = "1f0c6f2e-8f5b-4b8e-9a8e-1c2d3e4f5a6b"
)

// fakeAPI is a stand-in for the sandbox endpoints of the E2B API: it creates one sandbox,
// describes it and records kills. killStatus, when set, is the answer to a kill. For
// Promote it reports testBuild of testTemplateID as buildStatus (ready when empty) and
// records tag moves.
type fakeAPI struct {
	mu          sync.Mutex
	created     []e2b.NewSandbox
	killed      []string
	killStatus  int
	createErr   int
	buildStatus string
	moved       []e2b.AssignTemplateTagsRequest
}

func (f *fakeAPI) handler(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v2/sandboxes":
		var req e2b.NewSandbox
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.created = append(f.created, req)
		if f.createErr != 0 {
			reply(f.createErr, e2b.Error{Code: f.createErr, Message: "template not found"})
			return
		}
		reply(http.StatusCreated, e2b.Sandbox{TemplateID: "abcdefghij0123456789", SandboxID: testSandbox, ClientID: e2b.ClientID,
			EnvdVersion: "0.6.13", EnvdAccessToken: testToken})
	case r.Method == http.MethodGet && r.URL.Path == "/sandboxes/"+testSandbox:
		now := time.Now().UTC()
		reply(http.StatusOK, e2b.SandboxDetail{TemplateID: "abcdefghij0123456789", SandboxID: testSandbox, ClientID: e2b.ClientID,
			StartedAt: now, EndAt: now.Add(time.Hour), EnvdVersion: "0.6.13", EnvdAccessToken: testToken, CPUCount: 2, MemoryMB: 512,
			DiskSizeMB: 1024, State: "running"})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/sandboxes/"):
		reply(http.StatusNotFound, e2b.Error{Code: 404, Message: "sandbox not found"})
	case r.Method == http.MethodGet && r.URL.Path == "/templates/"+testTemplateID+"/builds/"+testBuild+"/status":
		status := f.buildStatus
		if status == "" {
			status = e2b.BuildReady
		}
		reply(http.StatusOK, e2b.TemplateBuildInfo{TemplateID: testTemplateID, BuildID: testBuild, Status: status,
			Logs: []string{}, LogEntries: []e2b.BuildLogEntry{}})
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/templates/"+testTemplateID+"/builds/"):
		reply(http.StatusBadRequest, e2b.Error{Code: 400, Message: "build not found"})
	case r.Method == http.MethodPost && r.URL.Path == "/templates/tags":
		var req e2b.AssignTemplateTagsRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		f.moved = append(f.moved, req)
		reply(http.StatusCreated, e2b.AssignedTemplateTags{Tags: req.Tags, BuildID: testBuild})
	case r.Method == http.MethodDelete && r.URL.Path == "/sandboxes/"+testSandbox:
		f.killed = append(f.killed, testSandbox)
		if f.killStatus != 0 {
			reply(f.killStatus, e2b.Error{Code: f.killStatus, Message: "kill refused"})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeAPI) kills() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.killed)
}

// setup serves f as the E2B API (every call checked against the E2B spec) and a real
// envd in this process, and returns a client of the API and the options that reach envd.
func setup(t *testing.T, f *fakeAPI) (*e2bapi.Client, Options, *tokens) {
	t.Helper()
	apiSrv := httptest.NewServer(http.HandlerFunc(f.handler))
	t.Cleanup(apiSrv.Close)
	api, err := e2bapi.New(e2bapi.Config{BaseURL: apiSrv.URL, APIKey: "e2b_0123456789abcdef",
		HTTPClient: &http.Client{Transport: openapitest.E2B(t).Transport(t, apiSrv.URL, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	daemon := server.New(server.Config{BaseEnv: testutil.CommandEnv(t)})
	envdSrv := httptest.NewServer(daemon)
	t.Cleanup(envdSrv.Close)
	t.Cleanup(daemon.Close)
	seen := &tokens{}
	return api, Options{
		Connect: func(sb *e2b.Sandbox) (*envd.Client, error) {
			return envd.New(envd.Config{BaseURL: envdSrv.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
		},
		Secret: func(ctx context.Context, secret string) context.Context { seen.add(secret); return ctx },
	}, seen
}

type tokens struct {
	mu   sync.Mutex
	seen []string
}

func (s *tokens) add(v string) { s.mu.Lock(); s.seen = append(s.seen, v); s.mu.Unlock() }

func TestRunInANewSandbox(t *testing.T) {
	f := &fakeAPI{}
	api, opts, secrets := setup(t, f)
	res, err := Run(t.Context(), api, Request{Template: "base:v1", Run: envd.RunRequest{Command: "echo out; echo err >&2; exit 3", Timeout: 5 * time.Second}}, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.SandboxID != testSandbox || res.Output.ExitCode != 3 || string(res.Output.Stdout) != "out\n" || string(res.Output.Stderr) != "err\n" {
		t.Errorf("result %+v, output %+v", res, res.Output)
	}
	if len(f.created) != 1 || f.created[0].TemplateID != "base:v1" || f.created[0].Timeout == nil || *f.created[0].Timeout != 65 {
		t.Errorf("created %+v, want base:v1 living the command's timeout and a minute", f.created)
	}
	if f.kills() != 1 || len(res.Warnings) != 0 {
		t.Errorf("%d kills, warnings %q; want the sandbox killed once", f.kills(), res.Warnings)
	}
	if len(secrets.seen) != 1 || secrets.seen[0] != testToken {
		t.Errorf("secrets handed over %q, want the envd token", secrets.seen)
	}
	msg := ExitMessage(Request{Run: envd.RunRequest{Command: "echo out; echo err >&2; exit 3"}}, res, "Accept it elsewhere.")
	for _, want := range []string{`Command "echo out; echo err >&2; exit 3" exited with code 3 in sandbox ` + testSandbox + ". Accept it elsewhere.", "stderr:\nerr\n"} {
		if !strings.Contains(msg, want) {
			t.Errorf("exit message %q lacks %q", msg, want)
		}
	}
}

// TestRunOnLine hands every line of output to OnLine, beyond MaxOutputBytes too, and the
// last one without its newline once the command ended.
func TestRunOnLine(t *testing.T) {
	api, opts, _ := setup(t, &fakeAPI{})
	lines := map[envd.Stream][]string{}
	opts.OnLine = func(s envd.Stream, line string) { lines[s] = append(lines[s], line) }
	res, err := Run(t.Context(), api, Request{Template: "base:v1", Run: envd.RunRequest{
		Command: "echo one; echo two >&2; printf 'three\\nfour'", MaxOutputBytes: 4, Timeout: 5 * time.Second}}, opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	// The streams are read apart, so only each stream's own order is certain.
	if !slices.Equal(lines[envd.Stdout], []string{"one", "three", "four"}) || !slices.Equal(lines[envd.Stderr], []string{"two"}) || !res.Output.StdoutTruncated {
		t.Errorf("lines %q (stdout truncated: %v), want one, three and four (beyond the cap) and two", lines, res.Output.StdoutTruncated)
	}
}

func TestRunInARunningSandboxLeavesIt(t *testing.T) {
	f := &fakeAPI{}
	api, opts, _ := setup(t, f)
	res, err := Run(t.Context(), api, Request{SandboxID: testSandbox, Run: envd.RunRequest{Cmd: "/bin/echo", Args: []string{"a", "b  c"}, Stdin: strings.NewReader("")}}, opts)
	if err != nil || string(res.Output.Stdout) != "a b  c\n" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	if len(f.created) != 0 || f.kills() != 0 {
		t.Errorf("%d created, %d killed; a running sandbox is used and left running", len(f.created), f.kills())
	}
}

func TestRunTimeoutKillsTheSandbox(t *testing.T) {
	f := &fakeAPI{}
	api, opts, _ := setup(t, f)
	// No login shell: its start-up could take the whole timeout on a busy machine.
	run := envd.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", "echo started >&2; sleep 30"}, Timeout: 2 * time.Second}
	res, err := Run(t.Context(), api, Request{Template: "base", Run: run}, opts)
	var runErr *Error
	if !errors.As(err, &runErr) || runErr.Stage != StageRun || runErr.SandboxID != testSandbox ||
		!strings.Contains(err.Error(), `Command "/bin/sh -c echo started >&2; sleep 30" did not end within the timeout of 2s and was killed; raise timeout if it needs longer.`) {
		t.Fatalf("Run error %v, want a timeout naming the command", err)
	}
	if !strings.Contains(err.Error(), "stderr:\nstarted") {
		t.Errorf("error %q does not show the stderr so far", err)
	}
	if f.kills() != 1 || res.SandboxID != testSandbox {
		t.Errorf("%d kills of %q, want the created sandbox killed", f.kills(), res.SandboxID)
	}
}

// The sandbox is killed also when the run is cancelled.
func TestRunCancelledStillKills(t *testing.T) {
	f := &fakeAPI{}
	api, opts, _ := setup(t, f)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(300*time.Millisecond, cancel)
	_, err := Run(ctx, api, Request{Template: "base", Run: envd.RunRequest{Command: "sleep 30"}}, opts)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run error %v, want the cancellation", err)
	}
	if f.kills() != 1 {
		t.Errorf("%d kills after a cancelled run, want 1", f.kills())
	}
}

func TestRunKillFailureIsAWarning(t *testing.T) {
	for status, warns := range map[int]bool{http.StatusInternalServerError: true, http.StatusNotFound: false} {
		f := &fakeAPI{killStatus: status}
		api, opts, _ := setup(t, f)
		res, err := Run(t.Context(), api, Request{Template: "base", Run: envd.RunRequest{Command: "true"}}, opts)
		if err != nil {
			t.Fatalf("kill answered %d: Run error %v, want none", status, err)
		}
		if got := len(res.Warnings) == 1 && strings.Contains(res.Warnings[0], "could not be killed"); got != warns {
			t.Errorf("kill answered %d: warnings %q, want a warning: %v", status, res.Warnings, warns)
		}
	}
}

func TestRunErrorsByStage(t *testing.T) {
	f := &fakeAPI{createErr: http.StatusNotFound}
	api, opts, _ := setup(t, f)
	_, err := Run(t.Context(), api, Request{Template: "missing", Run: envd.RunRequest{Command: "true"}}, opts)
	var runErr *Error
	if !errors.As(err, &runErr) || runErr.Stage != StageCreate || !e2bapi.IsNotFound(err) {
		t.Errorf("create refused: %v, want a create-stage error keeping the 404", err)
	}
	if f.kills() != 0 {
		t.Error("a sandbox that was never created was killed")
	}

	_, err = Run(t.Context(), api, Request{SandboxID: "iother", Run: envd.RunRequest{Command: "true"}}, opts)
	if !errors.As(err, &runErr) || runErr.Stage != StageGet || runErr.SandboxID != "iother" {
		t.Errorf("unknown sandbox: %v, want a get-stage error", err)
	}

	opts.Connect = func(*e2b.Sandbox) (*envd.Client, error) { return nil, errors.New("no route") }
	f.createErr = 0
	_, err = Run(t.Context(), api, Request{Template: "base", Run: envd.RunRequest{Command: "true"}}, opts)
	if !errors.As(err, &runErr) || runErr.Stage != StageConnect || f.kills() != 1 {
		t.Errorf("envd unreachable: %v (%d kills), want a connect-stage error and the sandbox killed", err, f.kills())
	}
}

func TestDescribeCommand(t *testing.T) {
	for want, req := range map[string]envd.RunRequest{
		`Command "echo hi"`:                             {Command: "echo hi"},
		`Command "/bin/ls -l /tmp"`:                     {Cmd: "/bin/ls", Args: []string{"-l", "/tmp"}},
		`Command "` + strings.Repeat("x", 117) + `..."`: {Command: strings.Repeat("x", 200)},
	} {
		if got := DescribeCommand(req); got != want {
			t.Errorf("DescribeCommand(%+v) = %q, want %q", req, got, want)
		}
	}
}

func TestOutputTail(t *testing.T) {
	if got := OutputTail("stderr", nil); got != "\n\n(stderr is empty)" {
		t.Errorf("empty: %q", got)
	}
	long := strings.Repeat("a", 5000) + "END"
	if got := OutputTail("stderr", []byte(long)); !strings.HasPrefix(got, "\n\nlast bytes of stderr:\n") || !strings.HasSuffix(got, "END") || len(got) > errorOutputBytes+40 {
		t.Errorf("long: %d bytes starting %q", len(got), got[:40])
	}
}
