package localserver

import (
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// failOnPanics makes the test fail if hs, not yet started, logs a panic
// while serving (net/http recovers a handler's panic and logs "http: panic
// serving …"): a server users run for days must not panic on what a client
// or a sandbox does. The returned check reports them; call it once hs is
// closed.
func failOnPanics(t *testing.T, hs *httptest.Server) (check func()) {
	t.Helper()
	var captured testutil.SyncBuffer
	hs.Config.ErrorLog = log.New(&captured, "", 0)
	return func() {
		for line := range strings.SplitSeq(captured.String(), "\n") {
			if strings.HasPrefix(line, "http: panic serving") {
				t.Errorf("the server panicked: %s", line)
			}
		}
	}
}
