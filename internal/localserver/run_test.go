//go:build linux

package localserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

func TestAPIKeyIsGeneratedOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	key, err := loadAPIKey(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if !e2b.IsAPIKey(key) || len(key) != len("e2b_")+40 {
		t.Fatalf("generated key %q is not e2b_ + 40 hex", key)
	}
	fi, err := os.Stat(filepath.Join(dir, apiKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v mode %v, want 0600", err, fi.Mode())
	}
	again, err := loadAPIKey(dir, "")
	if err != nil || again != key {
		t.Fatalf("second run got %q %v, want the kept %q", again, err, key)
	}
	if given, err := loadAPIKey(dir, "e2b_abc"); err != nil || given != "e2b_abc" {
		t.Errorf("configured key = %q %v", given, err)
	}
	if _, err := loadAPIKey(dir, "sk_nope"); err == nil {
		t.Error("a malformed configured key was accepted")
	}
}

// listen binds o.Listen, as Run does before it serves.
func listen(t *testing.T, o Options) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// serve prints the URLs and key, writes server.json while it runs, and on
// cancellation stops sandboxes and removes server.json.
func TestServeWritesInfoAndShutsDownCleanly(t *testing.T) {
	eng := newFakeEngine(t)
	dataDir := t.TempDir()
	opts := Options{Listen: "127.0.0.1:0"}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, listen(t, opts), opts, dataDir, testAPIKey, eng, engine.Runtime{Name: "fake"}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), &stdout)
	}()
	infoPath := filepath.Join(dataDir, InfoFile)
	var info Info
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		raw, err := os.ReadFile(infoPath)
		if err == nil && json.Unmarshal(raw, &info) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not written within 30 s", infoPath)
		}
	}
	if info.APIKey != testAPIKey || info.PID != os.Getpid() || !strings.HasPrefix(info.APIURL, "http://127.0.0.1:") || info.SandboxURL != info.APIURL || info.Runtime != "fake" {
		t.Fatalf("info = %+v", info)
	}
	if out := stdout.String(); !strings.Contains(out, "E2B_API_URL="+info.APIURL+"\n") || !strings.Contains(out, "E2B_API_KEY="+testAPIKey+"\n") {
		t.Errorf("stdout = %q", out)
	}
	req, _ := http.NewRequest("GET", info.APIURL+"/templates", nil)
	req.Header.Set("X-API-Key", testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /templates on the served URL: %v %v", resp, err)
	}
	resp.Body.Close()

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve ended with %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not end within 60 s of cancellation")
	}
	if _, err := os.Stat(infoPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s left behind after shutdown: %v", infoPath, err)
	}
}

// Idle and silent connections do not starve valid clients: at the
// connection cap the oldest idle one is closed for a new one, and the
// server closes idle connections by itself.
func TestServeBoundsIdleConnections(t *testing.T) {
	eng := newFakeEngine(t)
	dataDir := t.TempDir()
	opts := Options{Listen: "127.0.0.1:0", MaxConnections: 8, IdleTimeout: time.Second}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, listen(t, opts), opts, dataDir, testAPIKey, eng, engine.Runtime{Name: "fake"}, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard)
	}()
	defer func() { cancel(); <-done }() //nolint:errcheck // shutting down is TestServe's subject; here it only has to end
	var info Info
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		raw, err := os.ReadFile(filepath.Join(dataDir, InfoFile))
		if err == nil && json.Unmarshal(raw, &info) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server.json not written")
		}
	}
	addr := strings.TrimPrefix(info.APIURL, "http://")

	// 100 connections: half never send a byte, half go idle after a
	// keep-alive request.
	var conns []net.Conn
	for i := range 100 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if i%2 == 1 {
			fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		}
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()

	start := time.Now()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequest("GET", info.APIURL+"/templates", nil)
	req.Header.Set("X-API-Key", testAPIKey)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("a valid request among 100 idle connections: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("valid request = %d", resp.StatusCode)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the valid request waited %s behind idle connections", took)
	}

	// Every idle connection is closed by the server: a read ends (EOF or
	// reset) instead of blocking past the deadline.
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 4096)
		for {
			_, err := c.Read(buf)
			if err == nil {
				continue // the answer to the keep-alive request
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("connection %d is still open after 10 s", i)
			}
			break
		}
	}

	// Oversized headers are refused.
	big, _ := http.NewRequest("GET", info.APIURL+"/health", nil)
	big.Header.Set("X-Big", strings.Repeat("x", DefaultMaxHeaderBytes*2))
	if resp, err := client.Do(big); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("oversized headers = %d, want 431", resp.StatusCode)
		}
	}
}

// A request body that stops arriving is cut off at its deadline; the
// upload path has its own, longer one.
func TestSlowBodyIsCutOff(t *testing.T) {
	ts := startServer(t, newFakeEngine(t), serverOptions{configure: func(c *Config) { c.bodyReadTimeout = 300 * time.Millisecond }})
	// Straight to the handler: the contract check would read the body first.
	hs := httptest.NewServer(ts.Server.Handler())
	defer hs.Close()
	addr := strings.TrimPrefix(hs.URL, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v2/sandboxes HTTP/1.1\r\nHost: %s\r\nX-API-Key: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"templ", addr, testAPIKey)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || time.Since(start) > 5*time.Second {
		t.Errorf("stalled body: %d after %s, want 400 at the deadline", resp.StatusCode, time.Since(start))
	}
}
