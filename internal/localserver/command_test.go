package localserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseCommandFlagsAndEnv(t *testing.T) {
	t.Setenv("E2B_LOCAL_TEAM_SLUG", "from-env")
	t.Setenv("E2B_LOCAL_MAX_UPLOAD_BYTES", "1234")
	t.Setenv("E2B_LOCAL_LISTEN", "127.0.0.1:9")
	o, err := parseCommand([]string{"--listen", "127.0.0.1:0", "--upload-url-ttl", "5m"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.listen != "127.0.0.1:0" || o.teamSlug != "from-env" || o.maxUploadBytes != 1234 || o.uploadURLTTL != 5*time.Minute {
		t.Errorf("options = %+v: flags must win over env, env over defaults", o)
	}
	t.Setenv("E2B_LOCAL_MAX_CPU", "many")
	if _, err := parseCommand(nil, io.Discard); err == nil || !strings.Contains(err.Error(), "E2B_LOCAL_MAX_CPU") {
		t.Errorf("a bad env value: %v", err)
	}
	if _, err := parseCommand([]string{"extra"}, io.Discard); err == nil {
		t.Error("stray arguments accepted")
	}
}

func TestAPIKeyIsGeneratedOnceAndKept(t *testing.T) {
	dir := t.TempDir()
	key, err := loadAPIKey(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if !apiKeyPattern.MatchString(key) || len(key) != len("e2b_")+40 {
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

// syncBuffer is a bytes.Buffer safe to read while serve writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serve prints the URLs and key, writes server.json while it runs, and on
// cancellation stops sandboxes and removes server.json.
func TestServeWritesInfoAndShutsDownCleanly(t *testing.T) {
	eng := newFakeEngine(t)
	dataDir := t.TempDir()
	opts, err := parseCommand([]string{"--listen", "127.0.0.1:0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, opts, dataDir, testAPIKey, eng, nil, slog.New(slog.NewTextHandler(io.Discard, nil)), &stdout)
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
	if info.APIKey != testAPIKey || info.PID != os.Getpid() || !strings.HasPrefix(info.APIURL, "http://127.0.0.1:") || info.SandboxURL != info.APIURL {
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
