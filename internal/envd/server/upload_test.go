//go:build linux

package server

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

const bigUpload = 100 << 20

// patternReader yields n deterministic pseudo-random bytes without holding
// them: the upload source of the large-upload tests.
type patternReader struct {
	left  int64
	state uint64
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	var word [8]byte
	for i := 0; i < len(p); i += 8 {
		r.state ^= r.state << 13
		r.state ^= r.state >> 7
		r.state ^= r.state << 17
		binary.LittleEndian.PutUint64(word[:], r.state)
		copy(p[i:], word[:])
	}
	r.left -= int64(len(p))
	return len(p), nil
}

// heapPeak samples HeapInuse until stop is called and returns the peak
// above the level at the start.
func heapPeak(t *testing.T) (stop func() uint64) {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 {
		close(done)
		wg.Wait()
		if peak < base {
			return 0
		}
		return peak - base
	}
}

func fileDigest(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return h.Sum(nil)
}

// uploadStreamed posts the body produced by write (into a pipe) and checks
// the stored file's digest and the heap growth meanwhile.
func uploadStreamed(t *testing.T, e *testEnvd, target, contentType string, header map[string]string, write func(w io.Writer, src io.Reader) error) {
	t.Helper()
	h := sha256.New()
	src := io.TeeReader(&patternReader{left: bigUpload, state: 0x9e3779b97f4a7c15}, h)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(write(pw, src)) }()

	stop := heapPeak(t)
	r := do(t, http.MethodPost, e.url+"/files?path="+url.QueryEscape(target), contentType, pr, header)
	peak := stop()
	if r.status != http.StatusOK {
		t.Fatalf("upload = %d %s", r.status, r.body)
	}
	if got := fileDigest(t, target); !bytes.Equal(got, h.Sum(nil)) {
		t.Error("the stored file differs from what was sent")
	}
	t.Logf("heap growth during a %d MiB upload: %.1f MiB", bigUpload>>20, float64(peak)/(1<<20))
	if peak > 32<<20 {
		t.Errorf("heap grew by %d MiB during a %d MiB upload: not streamed", peak>>20, bigUpload>>20)
	}
}

func TestLargeUploadMultipart(t *testing.T) {
	e := startUncheckedEnvd(t)
	target := filepath.Join(t.TempDir(), "big.bin")
	const boundary = "envd-test-boundary"
	uploadStreamed(t, e, target, "multipart/form-data; boundary="+boundary, nil, func(w io.Writer, src io.Reader) error {
		mw := multipart.NewWriter(w)
		if err := mw.SetBoundary(boundary); err != nil {
			return err
		}
		part, err := mw.CreateFormFile("file", "big.bin")
		if err != nil {
			return err
		}
		if _, err := io.Copy(part, src); err != nil {
			return err
		}
		return mw.Close()
	})
}

func TestLargeUploadOctetStreamGzip(t *testing.T) {
	e := startUncheckedEnvd(t)
	target := filepath.Join(t.TempDir(), "big.bin")
	uploadStreamed(t, e, target, "application/octet-stream", map[string]string{"Content-Encoding": "gzip"}, func(w io.Writer, src io.Reader) error {
		zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
		if err != nil {
			return err
		}
		if _, err := io.Copy(zw, src); err != nil {
			return err
		}
		return zw.Close()
	})
}
