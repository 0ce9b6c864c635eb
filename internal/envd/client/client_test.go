//go:build linux

package client

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/safehttp"
)

func TestNewAddressing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		want    string
		wantErr string
	}{
		{name: "shared host", cfg: Config{Domain: "e2b.app", SandboxID: "iabc123"}, want: "https://sandbox.e2b.app"},
		{name: "explicit URL wins", cfg: Config{BaseURL: "http://127.0.0.1:8080/sandboxes/x/", Domain: "e2b.app"}, want: "http://127.0.0.1:8080/sandboxes/x"},
		{name: "explicit https", cfg: Config{BaseURL: "https://envd.example.com"}, want: "https://envd.example.com"},
		{name: "http to non-loopback", cfg: Config{BaseURL: "http://envd.example.com"}, wantErr: "sandbox_url"},
		{name: "no address", cfg: Config{SandboxID: "iabc"}, wantErr: "sandbox URL or a domain"},
		{name: "domain with scheme", cfg: Config{Domain: "https://e2b.app"}, wantErr: "bare DNS name"},
		{name: "domain with path", cfg: Config{Domain: "e2b.app/x"}, wantErr: "bare DNS name"},
		{name: "domain with port", cfg: Config{Domain: "localhost:3000"}, wantErr: "bare DNS name"},
		{name: "sandbox URL with a query", cfg: Config{BaseURL: "https://envd.example.com/?token=x"}, wantErr: "query or fragment"},
		{name: "http to a .localhost name", cfg: Config{BaseURL: "http://sandbox.localhost:49983"}, want: "http://sandbox.localhost:49983"},
		{name: "ID that would change the host", cfg: Config{Domain: "e2b.app", SandboxID: "x.evil.com"}, wantErr: "not valid"},
		{name: "connect-python agent", cfg: Config{Domain: "e2b.app", UserAgent: "connect-python/1.0"}, wantErr: "legacy format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("New error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.baseURL != tc.want {
				t.Errorf("base URL = %q, want %q", c.baseURL, tc.want)
			}
		})
	}
}

// A client the caller passes in is used hardened: a redirect to another host
// is refused (the access token would follow it), and the caller's own client
// is left as it was.
func TestRedirectToAnotherHostRefused(t *testing.T) {
	var leaked http.Header
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = r.Header.Clone()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer other.Close()
	// Same server, but reached as "localhost": a different host to the client.
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherURL+r.URL.Path, http.StatusFound)
	}))
	defer redirecting.Close()

	callers := &http.Client{}
	c, err := New(Config{BaseURL: redirecting.URL, AccessToken: "secret", HTTPClient: callers})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Health(t.Context())
	if !errors.Is(err, safehttp.ErrUnsafeRedirect) {
		t.Fatalf("Health through a cross-host redirect: error = %v, want ErrUnsafeRedirect", err)
	}
	if leaked != nil {
		t.Errorf("the redirect was followed; the other host got headers %v", leaked)
	}
	if callers.CheckRedirect != nil {
		t.Error("New modified the caller's http.Client")
	}
}
