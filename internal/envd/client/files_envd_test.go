//go:build linux

package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/filesystem"
)

// generator yields n deterministic pseudo-random bytes without holding them.
func generator(seed uint64, n int64) io.Reader {
	var key [32]byte
	key[0] = byte(seed)
	return io.LimitReader(rand.NewChaCha8(key), n)
}

// A 100 MB file goes up and comes back intact while the heap stays small:
// both directions stream.
func TestUploadDownloadLargeFileStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 200 MB")
	}
	c := startEnvd(t, nil).client(t, "")
	const size = 100 << 20
	path := filepath.Join(t.TempDir(), "parents", "made", "big.bin")

	sent := sha256.New()
	heap := sampleHeap()
	if err := c.Upload(t.Context(), path, "", io.TeeReader(generator(1, size), sent)); err != nil {
		t.Fatal(err)
	}
	upPeak := heap.Peak()

	entry, err := c.Stat(t.Context(), path, "")
	if err != nil {
		t.Fatal(err)
	}
	if entry.GetSize() != size || entry.GetType() != filesystem.FileType_FILE_TYPE_FILE {
		t.Errorf("Stat after upload: size %d type %v", entry.GetSize(), entry.GetType())
	}

	got := sha256.New()
	heap = sampleHeap()
	if err := download(c, t.Context(), path, "", got); err != nil {
		t.Fatal(err)
	}
	downPeak := heap.Peak()
	if !bytes.Equal(got.Sum(nil), sent.Sum(nil)) {
		t.Error("the downloaded file differs from the uploaded one")
	}
	t.Logf("peak heap growth: upload %.1f MiB, download %.1f MiB (file 100 MiB)", float64(upPeak)/(1<<20), float64(downPeak)/(1<<20))
	for dir, peak := range map[string]uint64{"upload": upPeak, "download": downPeak} {
		if peak > 16<<20 {
			t.Errorf("%s grew the heap by %d bytes; it is not streaming", dir, peak)
		}
	}
}

func TestUploadOverwritesAndDownloadMissing(t *testing.T) {
	e := startEnvd(t, nil)
	c := e.client(t, "tok")
	if err := c.Init(t.Context(), InitRequest{AccessToken: "tok"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "f.txt")
	for _, content := range []string{"first version", "second"} {
		if err := c.Upload(t.Context(), path, "", strings.NewReader(content)); err != nil {
			t.Fatal(err)
		}
	}
	onDisk, err := os.ReadFile(path)
	if err != nil || string(onDisk) != "second" {
		t.Errorf("file holds %q (%v), want the second upload", onDisk, err)
	}
	if got, err := c.ReadFile(t.Context(), path, "root", 6); err != nil || string(got) != "second" {
		t.Errorf("ReadFile: %q, %v", got, err)
	}
	if got, err := c.ReadFile(t.Context(), path, "root", 5); err == nil || !strings.Contains(err.Error(), "longer than 5 bytes") {
		t.Errorf("ReadFile of a file past the limit: %q, %v", got, err)
	}

	missing := filepath.Join(t.TempDir(), "nope")
	_, err = c.ReadFile(t.Context(), missing, "", 1<<10)
	var he *HTTPError
	if !errors.As(err, &he) || he.StatusCode != http.StatusNotFound || !strings.Contains(err.Error(), missing) {
		t.Errorf("download of a missing file: %v, want HTTP 404 naming the path", err)
	}
	if _, err := c.Stat(t.Context(), missing, ""); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("stat of a missing file: %v, want not_found", err)
	}
	if err := c.Health(t.Context()); err != nil {
		t.Errorf("health: %v", err)
	}
	for _, h := range e.recorder.headers("/files") {
		if h.Get("X-Access-Token") != "tok" || h.Get("E2b-Sandbox-Id") != testSandboxID || h.Get("E2b-Sandbox-Port") != "49983" {
			t.Errorf("a /files call lacks the token or routing headers: %v", h)
		}
	}
}

// Upload must not close the caller's reader.
func TestUploadLeavesBodyOpen(t *testing.T) {
	c := startEnvd(t, nil).client(t, "")
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := c.Upload(t.Context(), filepath.Join(t.TempDir(), "dst"), "", f); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Errorf("the caller's file was closed: %v", err)
	}
}

// download streams the file at path, read as user, into w (GET /files), so that
// tests can see what Upload wrote. A missing file is an *HTTPError with StatusCode 404.
func download(c *Client, ctx context.Context, path, user string, w io.Writer) error {
	if path == "" {
		return errors.New("download needs a path in the sandbox")
	}
	op := fmt.Sprintf("download of %q", path)
	resp, err := c.send(ctx, op, http.MethodGet, "/files", fileQuery(path, user), nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}
