//go:build linux

package localserver

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// TestProxyRefusalLeavesBodyUnread: a request whose body the sandbox never
// reads (nothing listens on the port) is answered 502 and the connection
// serves the next request; the server does not panic (net/http's "invalid
// concurrent Body.Read call" when a full-duplex handler returns before the
// body's end, golang/go#68560).
func TestProxyRefusalLeavesBodyUnread(t *testing.T) {
	eng := newFakeEngine(t)
	ts := startServer(t, eng)
	ts.build("app")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app"})
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	for i := range 3 {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/upload", strings.NewReader("a body nobody reads"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("E2b-Sandbox-Id", sb.SandboxID)
		req.Header.Set("E2b-Sandbox-Port", "3000")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "port is not open") {
			t.Errorf("request %d = %d %s, want 502 port is not open", i, resp.StatusCode, body)
		}
	}
}
