//go:build linux

package client

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"connectrpc.com/connect"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process/processconnect"
)

// shell runs script with /bin/sh: a login bash (what Command uses) is slow
// on some machines, and one test of Command is enough.
func shell(script string) RunRequest {
	return RunRequest{Cmd: "/bin/sh", Args: []string{"-c", script}}
}

func TestRunExitCodes(t *testing.T) {
	c := startEnvd(t, nil).client(t, "")

	res, err := c.Run(t.Context(), RunRequest{Command: "echo out; echo err >&2"})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || !res.Exited || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.PID == 0 {
		t.Errorf("exit 0: got %+v", res)
	}

	res, err = c.Run(t.Context(), shell("printf partial; exit 3"))
	if err != nil {
		t.Fatalf("a non-zero exit is not Run's error, got %v", err)
	}
	if res.ExitCode != 3 || !res.Exited || res.Error != "exit status 3" || string(res.Stdout) != "partial" {
		t.Errorf("exit 3: got %+v", res)
	}
}

// A process killed by a signal from elsewhere ends with exited=false: Run
// reports a *ProcessError that keeps the status and what was captured.
func TestRunKilledBySignalIsProcessError(t *testing.T) {
	c := startEnvd(t, nil).client(t, "")
	onOutput, ready := onMarker("ready")
	killed := make(chan error, 1)
	go func() {
		<-ready
		killed <- c.kill(context.Background(), "victim", "")
	}()
	req := shell("echo ready; exec sleep 600")
	req.Tag, req.OnOutput = "victim", onOutput
	res, err := c.Run(t.Context(), req)
	if kerr := <-killed; kerr != nil {
		t.Fatal(kerr)
	}
	var pe *ProcessError
	if !errors.As(err, &pe) {
		t.Fatalf("error = %v, want a *ProcessError", err)
	}
	if pe.ExitCode != -1 || pe.Status != "signal: killed" || pe.Result != res {
		t.Errorf("ProcessError = %+v, want exit -1, status \"signal: killed\" and the result", pe)
	}
	if res == nil || res.ExitCode != -1 || res.Exited || string(res.Stdout) != "ready\n" {
		t.Errorf("result = %+v", res)
	}
}

func TestRunStdinFollowedByEOF(t *testing.T) {
	c := startEnvd(t, nil).client(t, "")
	res, err := c.Run(t.Context(), RunRequest{Cmd: "cat", Stdin: strings.NewReader("hello\nworld"), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "hello\nworld" || res.ExitCode != 0 || res.StdinEOFUnsupported || res.StdinError != "" {
		t.Errorf("cat: got %+v", res)
	}

	// More than one SendInput chunk, echoed while it is still being sent.
	input := bytes.Repeat([]byte("0123456789abcdef"), 3<<16+5) // 3 MiB + 80 B
	res, err = c.Run(t.Context(), RunRequest{Cmd: "cat", Stdin: bytes.NewReader(input), MaxOutputBytes: 4 << 20, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(res.Stdout, input) || res.StdoutTruncated {
		t.Errorf("cat of %d bytes gave %d bytes back", len(input), len(res.Stdout))
	}

	// Empty input: still EOF, so cat ends.
	res, err = c.Run(t.Context(), RunRequest{Cmd: "wc", Args: []string{"-c"}, Stdin: strings.NewReader(""), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Errorf("wc -c of empty stdin = %q", res.Stdout)
	}
}

// When the caller's input fails half-way, the command must not go on with
// half an input: Run kills it and reports the read error.
func TestRunStdinReadErrorAborts(t *testing.T) {
	c := startEnvd(t, nil).client(t, "")
	broken := io.MultiReader(strings.NewReader("partial"), iotest.ErrReader(errors.New("disk gone")))
	res, err := c.Run(t.Context(), RunRequest{Cmd: "cat", Stdin: broken, Tag: "half-fed", Timeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "reading stdin") || !strings.Contains(err.Error(), "disk gone") {
		t.Fatalf("error = %v, want the stdin read error", err)
	}
	if res == nil || res.PID == 0 {
		t.Errorf("want the partial result, got %+v", res)
	}
	assertGone(t, c, "half-fed")
}

// A process that exits without reading all its input is a normal outcome,
// but the undelivered input is reported, not silently dropped.
func TestRunStdinNotConsumed(t *testing.T) {
	c := startEnvd(t, nil).client(t, "")
	input := bytes.Repeat([]byte("x"), 8<<20)
	res, err := c.Run(t.Context(), RunRequest{Cmd: "head", Args: []string{"-c", "1"}, Stdin: bytes.NewReader(input), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "x" || res.ExitCode != 0 || res.StdinError == "" {
		t.Errorf("got stdout %q exit %d StdinError %q; want \"x\", 0 and a reason", res.Stdout, res.ExitCode, res.StdinError)
	}
	t.Logf("StdinError: %s", res.StdinError)
}

// Without Stdin the process's stdin is /dev/null: it reads EOF at once
// instead of waiting on a pipe.
func TestRunWithoutStdinReadsNothing(t *testing.T) {
	c := startEnvd(t, nil).client(t, "")
	res, err := c.Run(t.Context(), RunRequest{Cmd: "cat", Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != 0 || res.ExitCode != 0 {
		t.Errorf("cat without stdin: %+v", res)
	}
}

// An envd older than 0.5.2 has no CloseStdin (a plain 404, read as
// unimplemented): the input still arrives and the result says no EOF was sent.
func TestRunStdinEOFUnsupported(t *testing.T) {
	e := startEnvd(t, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/process.Process/CloseStdin" {
				http.NotFound(w, r)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	c := e.client(t, "")
	res, err := c.Run(t.Context(), RunRequest{Cmd: "head", Args: []string{"-c", "3"}, Stdin: strings.NewReader("abc"), Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Stdout) != "abc" || !res.StdinEOFUnsupported {
		t.Errorf("got stdout %q, StdinEOFUnsupported %v; want \"abc\" and true", res.Stdout, res.StdinEOFUnsupported)
	}
}

// 10 MB on each stream with a 1 MB cap: exactly the cap is kept, both flags
// are set, the callback still sees everything, and the heap never holds the
// output.
func TestRunCapsOutputPerStream(t *testing.T) {
	c := startEnvd(t, nil).client(t, "")
	const total, limit = 10 << 20, 1 << 20
	var seen [3]int
	heap := sampleHeap()
	res, err := c.Run(t.Context(), RunRequest{
		Cmd:            "/bin/sh",
		Args:           []string{"-c", "head -c 10485760 /dev/zero | tr '\\0' o; head -c 10485760 /dev/zero | tr '\\0' e >&2"},
		MaxOutputBytes: limit,
		Timeout:        5 * time.Minute,
		OnOutput:       func(s Stream, chunk []byte) { seen[s] += len(chunk) },
	})
	peak := heap.Peak()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Stdout) != limit || len(res.Stderr) != limit || !res.StdoutTruncated || !res.StderrTruncated {
		t.Errorf("kept %d/%d bytes, truncated %v/%v; want %d each and both flags", len(res.Stdout), len(res.Stderr), res.StdoutTruncated, res.StderrTruncated, limit)
	}
	if bytes.Count(res.Stdout, []byte("o")) != limit || bytes.Count(res.Stderr, []byte("e")) != limit {
		t.Error("the streams were mixed up")
	}
	if seen[Stdout] != total || seen[Stderr] != total {
		t.Errorf("OnOutput saw %d/%d bytes, want %d each", seen[Stdout], seen[Stderr], total)
	}
	t.Logf("peak heap growth while 20 MB streamed through: %.1f MiB", float64(peak)/(1<<20))
	if peak > 16<<20 {
		t.Errorf("heap grew by %d bytes; output is not bounded by the cap", peak)
	}
}

// The Timeout becomes the remote deadline; when it passes Run returns an
// error wrapping context.DeadlineExceeded and the process is gone.
func TestRunTimeoutKillsProcess(t *testing.T) {
	e := startEnvd(t, nil)
	c := e.client(t, "")
	begin := time.Now()
	res, err := c.Run(t.Context(), RunRequest{Cmd: "sleep", Args: []string{"600"}, Tag: "sleeper", Timeout: 2 * time.Second})
	if elapsed := time.Since(begin); elapsed > time.Minute {
		t.Errorf("Run returned after %s for a 2 s timeout", elapsed)
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "2s timeout") {
		t.Fatalf("error = %v, want one naming the timeout and wrapping DeadlineExceeded", err)
	}
	if res == nil || res.PID == 0 {
		t.Errorf("want the partial result of the started process, got %+v", res)
	}
	assertGone(t, c, "sleeper")
	starts := e.recorder.headers("/process.Process/Start")
	ms, convErr := strconv.Atoi(starts[len(starts)-1].Get("Connect-Timeout-Ms"))
	if convErr != nil || ms <= 0 || ms > 2000 {
		t.Errorf("Connect-Timeout-Ms = %q, want the 2 s deadline", starts[len(starts)-1].Get("Connect-Timeout-Ms"))
	}
}

// Cancelling the caller's context mid-stream returns ctx's error and kills
// the remote process by tag.
func TestRunCancelMidStream(t *testing.T) {
	e := startEnvd(t, nil)
	c := e.client(t, "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res, err := c.Run(ctx, RunRequest{
		Cmd:      "yes",
		Tag:      "flood",
		OnOutput: func(Stream, []byte) { cancel() },
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
	if res == nil || len(res.Stdout) == 0 {
		t.Errorf("want the partial output, got %+v", res)
	}
	assertGone(t, c, "flood")
	if len(e.recorder.headers("/process.Process/SendSignal")) == 0 {
		t.Error("no SendSignal was sent to kill the process")
	}
}

// A context cancelled before Run starts anything sends nothing.
func TestRunCancelledBeforeStart(t *testing.T) {
	e := startEnvd(t, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res, err := e.client(t, "").Run(ctx, RunRequest{Cmd: "true"})
	if !errors.Is(err, context.Canceled) || res != nil {
		t.Fatalf("got %+v, %v; want no result and context.Canceled", res, err)
	}
	if n := len(e.recorder.headers("/process.Process/Start")); n != 0 {
		t.Errorf("%d Start calls reached envd", n)
	}
}

func TestRunUnknownUser(t *testing.T) {
	c := startEnvd(t, nil).client(t, "")
	res, err := c.Run(t.Context(), RunRequest{Cmd: "id", User: "nosuchuser"})
	var ue *UserError
	if !errors.As(err, &ue) || ue.User != "nosuchuser" || !strings.Contains(err.Error(), `"nosuchuser"`) {
		t.Fatalf("error = %v, want a *UserError naming nosuchuser", err)
	}
	if connect.CodeOf(err) != connect.CodeUnauthenticated || res != nil {
		t.Errorf("code %v, result %+v; want unauthenticated and no result", connect.CodeOf(err), res)
	}
}

func TestRunMissingCwd(t *testing.T) {
	c := startEnvd(t, nil).client(t, "")
	missing := t.TempDir() + "/not-there"
	_, err := c.Run(t.Context(), RunRequest{Cmd: "pwd", Cwd: missing})
	var ce *CwdError
	if !errors.As(err, &ce) || ce.Cwd != missing || !strings.Contains(err.Error(), missing) {
		t.Fatalf("error = %v, want a *CwdError naming %s", err, missing)
	}
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("code = %v, want invalid_argument", connect.CodeOf(err))
	}

	dir := t.TempDir()
	res, err := c.Run(t.Context(), RunRequest{Cmd: "/bin/sh", Args: []string{"-c", "pwd; echo $GREETING"}, Cwd: dir, Env: map[string]string{"GREETING": "hi"}})
	if err != nil || string(res.Stdout) != dir+"\nhi\n" {
		t.Errorf("pwd in %s: %v %+v", dir, err, res)
	}
}

// The headers of the SDK go on the wire: routing, token, user, keepalive,
// remote deadline, binary Connect, and never the connect-python agent.
func TestRunSendsHeaders(t *testing.T) {
	e := startEnvd(t, nil)
	c := e.client(t, "")
	if _, err := c.Run(t.Context(), RunRequest{Cmd: "cat", User: "root", Stdin: strings.NewReader("x"), Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Run(t.Context(), RunRequest{Cmd: "true"}); err != nil {
		t.Fatal(err)
	}
	starts := e.recorder.headers("/process.Process/Start")
	if len(starts) != 2 {
		t.Fatalf("%d Start calls recorded, want 2", len(starts))
	}
	withUser, noUser := starts[0], starts[1]
	for name, want := range map[string]string{
		"E2b-Sandbox-Id":          testSandboxID,
		"E2b-Sandbox-Port":        "49983",
		"Keepalive-Ping-Interval": "50",
		"Authorization":           "Basic " + base64.StdEncoding.EncodeToString([]byte("root:")),
		"Content-Type":            "application/connect+proto",
		"User-Agent":              defaultUserAgent,
	} {
		if got := withUser.Get(name); got != want {
			t.Errorf("Start header %s = %q, want %q", name, got, want)
		}
	}
	if withUser.Get("Connect-Timeout-Ms") == "" {
		t.Error("Start with a Timeout sent no Connect-Timeout-Ms")
	}
	if got := noUser.Get("Authorization"); got != "" {
		t.Errorf("Start without a user sent Authorization %q", got)
	}
	if got := noUser.Get("Connect-Timeout-Ms"); got != "" {
		t.Errorf("Start without any deadline sent Connect-Timeout-Ms %q", got)
	}
	for _, path := range []string{"/process.Process/SendInput", "/process.Process/CloseStdin"} {
		hs := e.recorder.headers(path)
		if len(hs) == 0 {
			t.Errorf("no %s call recorded", path)
			continue
		}
		if hs[0].Get("E2b-Sandbox-Id") != testSandboxID || hs[0].Get("Authorization") == "" {
			t.Errorf("%s headers %v lack routing or the user", path, hs[0])
		}
	}
}

// With an access token set through /init, calls carrying it work and calls
// without it are refused with a typed error.
func TestAccessTokenAndInit(t *testing.T) {
	e := startEnvd(t, nil)
	c := e.client(t, "s3cret")
	dir := t.TempDir()
	if err := c.Init(t.Context(), InitRequest{AccessToken: "s3cret", EnvVars: map[string]string{"FROM_INIT": "yes"}, DefaultWorkdir: dir}); err != nil {
		t.Fatal(err)
	}
	res, err := c.Run(t.Context(), shell("pwd; echo $FROM_INIT"))
	if err != nil || string(res.Stdout) != dir+"\nyes\n" {
		t.Fatalf("run after init: %v %+v", err, res)
	}
	if h := e.recorder.headers("/process.Process/Start"); h[0].Get("X-Access-Token") != "s3cret" {
		t.Errorf("X-Access-Token = %q", h[0].Get("X-Access-Token"))
	}

	anonymous := e.client(t, "")
	if err := anonymous.Health(t.Context()); err != nil {
		t.Errorf("health needs no token, got %v", err)
	}
	_, err = anonymous.Run(t.Context(), RunRequest{Cmd: "true"})
	var ue *UserError
	if !errors.As(err, &ue) {
		t.Errorf("run without the token: error = %v, want a *UserError", err)
	}
	var he *HTTPError
	err = anonymous.Upload(t.Context(), dir+"/f", "", strings.NewReader("x"))
	if !errors.As(err, &he) || he.StatusCode != http.StatusUnauthorized {
		t.Errorf("upload without the token: error = %v, want HTTP 401", err)
	}
}

// fakeProcess is a stand-in Process service for faults the real server does
// not produce: it replays scripted events and records kills.
type fakeProcess struct {
	processconnect.UnimplementedProcessHandler
	events []*process.ProcessEvent
	killed chan string
}

func (f *fakeProcess) Start(_ context.Context, _ *connect.Request[process.StartRequest], stream *connect.ServerStream[process.StartResponse]) error {
	for _, ev := range f.events {
		if err := stream.Send(&process.StartResponse{Event: ev}); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeProcess) SendSignal(_ context.Context, req *connect.Request[process.SendSignalRequest]) (*connect.Response[process.SendSignalResponse], error) {
	f.killed <- req.Msg.GetProcess().GetTag()
	return connect.NewResponse(&process.SendSignalResponse{}), nil
}

func startFake(t *testing.T, events ...*process.ProcessEvent) (*Client, *fakeProcess) {
	t.Helper()
	f := &fakeProcess{events: events, killed: make(chan string, 1)}
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(f))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	c, err := New(Config{BaseURL: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c, f
}

func startEv(pid uint32) *process.ProcessEvent {
	return &process.ProcessEvent{Event: &process.ProcessEvent_Start{Start: &process.ProcessEvent_StartEvent{Pid: pid}}}
}

func keepaliveEv() *process.ProcessEvent {
	return &process.ProcessEvent{Event: &process.ProcessEvent_Keepalive{Keepalive: &process.ProcessEvent_KeepAlive{}}}
}

func stdoutEv(s string) *process.ProcessEvent {
	return &process.ProcessEvent{Event: &process.ProcessEvent_Data{Data: &process.ProcessEvent_DataEvent{Output: &process.ProcessEvent_DataEvent_Stdout{Stdout: []byte(s)}}}}
}

func TestRunToleratesKeepalives(t *testing.T) {
	c, _ := startFake(t, keepaliveEv(), startEv(7), keepaliveEv(), stdoutEv("a"), keepaliveEv(), stdoutEv("b"),
		&process.ProcessEvent{Event: &process.ProcessEvent_End{End: &process.ProcessEvent_EndEvent{Exited: true}}})
	res, err := c.Run(t.Context(), RunRequest{Command: "x"})
	if err != nil || res.PID != 7 || string(res.Stdout) != "ab" || !res.Exited {
		t.Errorf("got %v %+v", err, res)
	}
}

// A stream that ends without an end event is an error, and the process,
// which may still run, is killed by tag.
func TestRunStreamWithoutEndEvent(t *testing.T) {
	c, f := startFake(t, startEv(7), stdoutEv("half"))
	res, err := c.Run(t.Context(), RunRequest{Command: "x", Tag: "orphan"})
	if err == nil || !strings.Contains(err.Error(), "without an end event") {
		t.Fatalf("error = %v, want one saying the end event is missing", err)
	}
	if res == nil || string(res.Stdout) != "half" {
		t.Errorf("partial result = %+v", res)
	}
	select {
	case tag := <-f.killed:
		if tag != "orphan" {
			t.Errorf("killed tag %q, want orphan", tag)
		}
	default:
		t.Error("the process was not killed")
	}
}
