//go:build linux

package server

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process/processconnect"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

func TestServeOnUnixSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "envd.sock")
	// A stale socket file from an earlier run.
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	stale.SetUnlinkOnClose(false)
	_ = stale.Close()

	ln, err := listenOn("unix://" + path)
	if err != nil {
		t.Fatalf("listenOn over a stale socket: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o666 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket %v (%v), want a socket with mode 0666", fi, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- New(Config{BaseEnv: testutil.CommandEnv(t)}).Serve(ctx, ln) }()

	client := &http.Client{Transport: envdclient.UnixSocketTransport(path)}
	resp, err := client.Get("http://envd/health")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("/health over the socket = %d", resp.StatusCode)
	}
	stream, err := processconnect.NewProcessClient(client, "http://envd").Start(ctx, connect.NewRequest(shell("sleep 600")))
	if err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() {
		t.Fatalf("no start event: %v", stream.Err())
	}
	pid := int(stream.Msg().GetEvent().GetStart().GetPid())

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after cancel: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	eventually(t, "the process to be killed on shutdown", func() bool { return !alive(pid) })
}

func TestReapOrphans(t *testing.T) {
	// Make the test process what envd is in a container: the process that
	// orphans are re-parented to.
	if err := becomeSubreaper(); err != nil {
		testutil.Missing(t, "cannot become a child subreaper: %v", err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{ReapOrphans: true, BaseEnv: testutil.CommandEnv(t)})
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	// sh exits at once; its background sleep becomes our orphan, and a
	// zombie when it exits. Its stdout goes elsewhere so the end is prompt.
	e := &testEnvd{srv: srv, url: "http://" + ln.Addr().String()}
	r := run(t, e, shell("sleep 0.2 >/dev/null 2>&1 & echo $!"), nil)
	orphan, err := strconv.Atoi(strings.TrimSpace(string(r.stdout)))
	if err != nil {
		t.Fatalf("orphan pid %q: %v", r.stdout, err)
	}
	eventually(t, "the orphan to be reaped", func() bool {
		_, err := os.Stat(filepath.Join("/proc", strconv.Itoa(orphan)))
		return err != nil
	})
	// The server's own children are still reaped by their Wait, with their
	// exit status intact.
	if r := run(t, e, shell("exit 7"), nil); r.end.GetExitCode() != 7 {
		t.Errorf("own child's end %v, want exit 7", r.end)
	}
}

// The egress proxy variables reach every process; /init's envVars and the
// request's own override them.
func TestBaseEnvUnderInitAndRequest(t *testing.T) {
	base := ProxyEnv("http://127.0.0.1:49984")
	base["A"] = "base"
	e := startEnvd(t, Config{BaseEnv: base})
	initEnvd(t, e, `{"envVars": {"A": "init", "https_proxy": "http://mine"}}`)
	r := run(t, e, shell(`echo "$HTTP_PROXY|$https_proxy|$NO_PROXY|$no_proxy|$NODE_USE_ENV_PROXY|$A"`), nil)
	if want := "http://127.0.0.1:49984|http://mine|localhost,127.0.0.1,::1|localhost,127.0.0.1,::1|1|init\n"; string(r.stdout) != want {
		t.Errorf("process env %q, want %q", r.stdout, want)
	}
}

// envd stops once the time in its deadline file has passed, reading the
// file anew so that a moved deadline counts.
func TestRunStopsAtTheDeadline(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "deadline")
	write := func(end time.Time) {
		if err := os.WriteFile(file, []byte(strconv.FormatInt(end.UnixMilli(), 10)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	write(start.Add(300 * time.Millisecond))
	done := make(chan error, 1)
	var log testutil.SyncBuffer
	go func() {
		done <- Run(t.Context(), RunOptions{Listen: "unix://" + filepath.Join(dir, "envd.sock"), DeadlineFile: file, DeadlinePoll: 20 * time.Millisecond, Log: &log})
	}()
	time.Sleep(100 * time.Millisecond)
	write(start.Add(800 * time.Millisecond))
	select {
	case err := <-done:
		if took := time.Since(start); err != nil || took < 800*time.Millisecond {
			t.Fatalf("Run = %v after %v, want nil once the moved deadline passed", err, took)
		}
		// Its messages are envd's JSON lines, each named once.
		listening, stopping := false, false
		for _, l := range logLines(t, &log) {
			message, _ := l["message"].(string)
			listening = listening || strings.HasPrefix(message, "envd "+envd.Version+" listening on unix://")
			stopping = stopping || strings.HasSuffix(message, "has passed: stopping")
			if l["logger"] != "envd" || l["timestamp"] == nil {
				t.Errorf("Run's log line %v, want a line of logger envd", l)
			}
		}
		if !listening || !stopping {
			t.Errorf("Run's log %v, want its listening and stopping lines", logLines(t, &log))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("envd still runs 5 s after its deadline")
	}
}
