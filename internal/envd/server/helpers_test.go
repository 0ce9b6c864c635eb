//go:build linux

package server

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/filesystem/filesystemconnect"
	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process/processconnect"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/openapitest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// testEnvd is a Server on real loopback HTTP.
type testEnvd struct {
	srv *Server
	url string
}

// startEnvd serves a Server on loopback. Plain HTTP traffic (everything but
// the Connect procedures) is checked against envd's OpenAPI contract; opts
// name the statuses envd answers that the contract does not declare. Its
// commands get testutil.CommandEnv unless cfg sets a BaseEnv.
func startEnvd(t *testing.T, cfg Config) *testEnvd {
	t.Helper()
	if cfg.BaseEnv == nil {
		cfg.BaseEnv = testutil.CommandEnv(t)
	}
	srv := New(cfg)
	isRPC := func(r *http.Request) bool {
		return strings.HasPrefix(r.URL.Path, "/process.") || strings.HasPrefix(r.URL.Path, "/filesystem.")
	}
	hs := httptest.NewServer(openapitest.Envd(t).Middleware(t, srv, openapitest.SkipRequests(isRPC)))
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return &testEnvd{srv: srv, url: hs.URL}
}

// startUncheckedEnvd serves a Server without the contract middleware, which
// buffers bodies: for the large-upload tests.
func startUncheckedEnvd(t *testing.T) *testEnvd {
	t.Helper()
	srv := New(Config{BaseEnv: testutil.CommandEnv(t)})
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		srv.Close()
	})
	return &testEnvd{srv: srv, url: hs.URL}
}

func (e *testEnvd) process() processconnect.ProcessClient {
	return processconnect.NewProcessClient(http.DefaultClient, e.url)
}

func (e *testEnvd) filesystem() filesystemconnect.FilesystemClient {
	return filesystemconnect.NewFilesystemClient(http.DefaultClient, e.url)
}

// basicUser is the Authorization header naming user.
func basicUser(user string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"))
}

// result is everything a Start or Connect stream delivered.
type result struct {
	pid        uint32
	starts     int
	stdout     []byte
	stderr     []byte
	pty        []byte
	maxChunk   int
	keepalives int
	end        *pb.ProcessEvent_EndEvent
	ends       int
	order      []string // event kinds in arrival order
}

// collect reads a Start or Connect stream to its end.
func collect[T interface{ GetEvent() *pb.ProcessEvent }](t *testing.T, stream interface {
	Receive() bool
	Msg() T
	Err() error
}) *result {
	t.Helper()
	r := &result{}
	for stream.Receive() {
		r.add(stream.Msg().GetEvent())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream failed after %v: %v", r.order, err)
	}
	return r
}

func (r *result) add(ev *pb.ProcessEvent) {
	switch e := ev.GetEvent().(type) {
	case *pb.ProcessEvent_Start:
		r.starts++
		r.pid = e.Start.GetPid()
		r.order = append(r.order, "start")
	case *pb.ProcessEvent_Data:
		var b []byte
		switch o := e.Data.GetOutput().(type) {
		case *pb.ProcessEvent_DataEvent_Stdout:
			b = o.Stdout
			r.stdout = append(r.stdout, b...)
		case *pb.ProcessEvent_DataEvent_Stderr:
			b = o.Stderr
			r.stderr = append(r.stderr, b...)
		case *pb.ProcessEvent_DataEvent_Pty:
			b = o.Pty
			r.pty = append(r.pty, b...)
		}
		r.maxChunk = max(r.maxChunk, len(b))
		if len(r.order) == 0 || r.order[len(r.order)-1] != "data" {
			r.order = append(r.order, "data")
		}
	case *pb.ProcessEvent_Keepalive:
		r.keepalives++
		r.order = append(r.order, "keepalive")
	case *pb.ProcessEvent_End:
		r.ends++
		r.end = e.End
		r.order = append(r.order, "end")
	}
}

// checkShape asserts one start first and one end last.
func (r *result) checkShape(t *testing.T) {
	t.Helper()
	if r.starts != 1 || r.ends != 1 || r.order[0] != "start" || r.order[len(r.order)-1] != "end" {
		t.Fatalf("event order %v, want one start first and one end last", r.order)
	}
}

// run starts cmd args through Start and collects the stream.
func run(t *testing.T, e *testEnvd, req *pb.StartRequest, header map[string]string) *result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	creq := connect.NewRequest(req)
	for k, v := range header {
		creq.Header().Set(k, v)
	}
	stream, err := e.process().Start(ctx, creq)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	r := collect(t, stream)
	r.checkShape(t)
	return r
}

func shell(script string) *pb.StartRequest {
	return &pb.StartRequest{Process: &pb.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", script}}}
}

func ptr[T any](v T) *T { return &v }

// startStream starts a process and returns its stream once the start event
// arrived.
func startStream(t *testing.T, ctx context.Context, e *testEnvd, req *pb.StartRequest) (*connect.ServerStreamForClient[pb.StartResponse], uint32) {
	t.Helper()
	stream, err := e.process().Start(ctx, connect.NewRequest(req))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if !stream.Receive() {
		t.Fatalf("no start event: %v", stream.Err())
	}
	pid := stream.Msg().GetEvent().GetStart().GetPid()
	if pid == 0 {
		t.Fatalf("first event is %v, want start", stream.Msg().GetEvent())
	}
	return stream, pid
}

// testUser creates (once) an unprivileged account with a home for the
// user-switching tests, or skips when that is impossible here.
func testUser(t *testing.T) *osUser {
	t.Helper()
	testUserOnce.Do(func() {
		if !isRoot() {
			testUserErr = "not running as root"
			return
		}
		if _, err := lookupUser(testUserName); err == nil {
			return
		}
		if out, err := exec.Command("useradd", "-m", "-s", "/bin/sh", testUserName).CombinedOutput(); err != nil {
			testUserErr = "useradd: " + err.Error() + ": " + string(out)
		}
	})
	if testUserErr != "" {
		testutil.Missing(t, "no test user: %s", testUserErr)
	}
	u, err := lookupUser(testUserName)
	if err != nil {
		t.Fatalf("lookup %s: %v", testUserName, err)
	}
	if _, err := os.Stat(u.home); err != nil {
		testutil.Missing(t, "test user's home %s: %v", u.home, err)
	}
	return u
}

const testUserName = "envdtest"

var (
	testUserOnce sync.Once
	testUserErr  string
)

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
