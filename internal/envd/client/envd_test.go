//go:build linux

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
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// testSandboxID is the routing ID every test client sends.
const testSandboxID = "itest0sandbox"

// realEnvd is a real envd server on loopback HTTP/1.1 with a recorder in front.
type realEnvd struct {
	url      string
	recorder *recorder
}

// startEnvd serves the real envd, wrapped by wrap when given (fault
// injection), behind a recorder of request headers.
func startEnvd(t testing.TB, wrap func(http.Handler) http.Handler) *realEnvd {
	t.Helper()
	srv := server.New(server.Config{BaseEnv: testutil.CommandEnv(t)})
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(h)
	}
	rec := &recorder{next: h}
	ts := httptest.NewServer(rec)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Close) // runs first: kills what is left so ts.Close does not wait on streams
	return &realEnvd{url: ts.URL, recorder: rec}
}

// client returns a client for e with the test sandbox ID and token.
func (e *realEnvd) client(t testing.TB, token string) *Client {
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

// assertGone checks that the process tagged tag ends (it was sent SIGKILL,
// which envd reaps asynchronously) and then no longer shows in List.
func assertGone(t *testing.T, c *Client, tag string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := c.process.Connect(ctx, connect.NewRequest(&process.ConnectRequest{
		Process: &process.ProcessSelector{Selector: &process.ProcessSelector_Tag{Tag: tag}},
	}))
	if err != nil {
		t.Fatalf("Connect to %q: %v", tag, err)
	}
	ended := false
	for !ended && stream.Receive() {
		ended = stream.Msg().GetEvent().GetEnd() != nil
	}
	_ = stream.Close()
	if err := stream.Err(); !ended && connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("process %q did not end: %v", tag, err)
	}
	resp, err := c.process.List(ctx, connect.NewRequest(&process.ListRequest{}))
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	for _, p := range resp.Msg.GetProcesses() {
		if p.GetTag() == tag {
			t.Errorf("process %q (pid %d) still listed after it ended", tag, p.GetPid())
		}
	}
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
