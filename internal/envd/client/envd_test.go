package client

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/server"
)

// testSandboxID is the routing ID every test client sends.
const testSandboxID = "itest0sandbox"

// envd is a real envd server on loopback HTTP/1.1 with a recorder in front.
type envd struct {
	url      string
	recorder *recorder
}

// startEnvd serves the real envd, wrapped by wrap when given (fault
// injection), behind a recorder of request headers.
func startEnvd(t *testing.T, wrap func(http.Handler) http.Handler) *envd {
	t.Helper()
	srv := server.New(server.Config{})
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(h)
	}
	rec := &recorder{next: h}
	ts := httptest.NewServer(rec)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close) // runs first: kills what is left so ts.Close does not wait on streams
	return &envd{url: ts.URL, recorder: rec}
}

// client returns a client for e with the test sandbox ID and token.
func (e *envd) client(t *testing.T, token string) *Client {
	t.Helper()
	c, err := New(Config{BaseURL: e.url, SandboxID: testSandboxID, AccessToken: token})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// recorder keeps the headers of every request, by path.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	seen map[string][]http.Header
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	if r.seen == nil {
		r.seen = map[string][]http.Header{}
	}
	r.seen[req.URL.Path] = append(r.seen[req.URL.Path], req.Header.Clone())
	r.mu.Unlock()
	r.next.ServeHTTP(w, req)
}

func (r *recorder) headers(path string) []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[path]
}

// runningWithTag lists envd's processes and reports whether one has tag.
func runningWithTag(t *testing.T, c *Client, tag string) bool {
	t.Helper()
	resp, err := c.process.List(context.Background(), connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, p := range resp.Msg.GetProcesses() {
		if p.GetTag() == tag {
			return true
		}
	}
	return false
}

// onMarker returns an OnOutput callback that closes the returned channel the
// first time stdout contains marker: a signal that the process is running.
func onMarker(marker string) (func(Stream, []byte), <-chan struct{}) {
	seen := make(chan struct{})
	var once sync.Once
	var out []byte
	return func(s Stream, chunk []byte) {
		if s != Stdout {
			return
		}
		if len(out) < 1024 {
			out = append(out, chunk...)
		}
		if bytes.Contains(out, []byte(marker)) {
			once.Do(func() { close(seen) })
		}
	}, seen
}

// heapSampler records the peak of the Go heap in use above a baseline taken
// after a GC, sampling until stop is called.
type heapSampler struct {
	base uint64
	peak uint64
	stop chan struct{}
	done chan struct{}
}

func sampleHeap() *heapSampler {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h := &heapSampler{base: ms.HeapInuse, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > h.base && ms.HeapInuse-h.base > h.peak {
				h.peak = ms.HeapInuse - h.base
			}
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

// Peak returns the highest heap growth seen, in bytes.
func (h *heapSampler) Peak() uint64 {
	close(h.stop)
	<-h.done
	return h.peak
}
