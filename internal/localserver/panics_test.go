package localserver

import (
	"bytes"
	"log"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// serverLog is what net/http logs through a test server's ErrorLog.
type serverLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *serverLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// failOnPanics makes the test fail if hs, not yet started, logs a panic
// while serving (net/http recovers a handler's panic and logs "http: panic
// serving …"): a server users run for days must not panic on what a client
// or a sandbox does. The returned check reports them; call it once hs is
// closed.
func failOnPanics(t *testing.T, hs *httptest.Server) (check func()) {
	t.Helper()
	captured := &serverLog{}
	hs.Config.ErrorLog = log.New(captured, "", 0)
	return func() {
		captured.mu.Lock()
		defer captured.mu.Unlock()
		for line := range strings.SplitSeq(captured.buf.String(), "\n") {
			if strings.HasPrefix(line, "http: panic serving") {
				t.Errorf("the server panicked: %s", line)
			}
		}
	}
}
