//go:build linux

package localserver

import (
	"net/http"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// TestCORS: what a browser page running the JS SDK sends to the API and,
// routed by the E2b-Sandbox-* headers, to a sandbox's envd.
func TestCORS(t *testing.T) {
	ts := startServer(t, newFakeEngine(t))
	ts.build("app")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "app"})
	const origin = "https://app.example"
	send := func(method, path string, header ...string) *http.Response {
		t.Helper()
		resp := ts.request(method, path, nil, header...)
		resp.Body.Close()
		return resp
	}
	expect := func(what string, resp *http.Response, status int, want map[string]string) {
		t.Helper()
		if resp.StatusCode != status {
			t.Errorf("%s = %d, want %d", what, resp.StatusCode, status)
		}
		for name, v := range want {
			if got := resp.Header.Values(name); v == "" && len(got) != 0 || v != "" && (len(got) != 1 || got[0] != v) {
				t.Errorf("%s: %s = %q, want %q", what, name, got, v)
			}
		}
	}

	// API preflights are answered before the key check, with E2B's lists.
	expect("API preflight", send("OPTIONS", "/v2/sandboxes", "X-API-Key", "", "Origin", origin,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type,x-api-key"),
		http.StatusNoContent, map[string]string{
			"Access-Control-Allow-Origin":  "*",
			"Access-Control-Allow-Methods": "POST",
			"Access-Control-Allow-Headers": "Origin, Content-Length, Content-Type, User-Agent, Authorization, X-API-Key, X-Team-ID, " +
				"browser, lang, lang_version, machine, os, package_version, processor, publisher, release, sdk_runtime, system",
			"Access-Control-Max-Age": "43200",
		})
	expect("API preflight without Origin", send("OPTIONS", "/v2/sandboxes", "X-API-Key", "",
		"Access-Control-Request-Method", "POST"),
		http.StatusNoContent, map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Headers": ""})
	expect("API preflight of TRACE", send("OPTIONS", "/v2/sandboxes", "X-API-Key", "", "Origin", origin,
		"Access-Control-Request-Method", "TRACE"),
		http.StatusNoContent, map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Allow-Methods": ""})

	// Answers, refusals included, are readable from any page.
	exposed := "X-Next-Token, X-Total-Running, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Retry-After"
	expect("GET /v2/sandboxes from a page", send("GET", "/v2/sandboxes", "Origin", origin),
		http.StatusOK, map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": exposed, "Vary": "Origin"})
	expect("keyless GET /v2/sandboxes from a page", send("GET", "/v2/sandboxes", "X-API-Key", "", "Origin", origin),
		http.StatusUnauthorized, map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": exposed})
	expect("GET /v2/sandboxes without Origin", send("GET", "/v2/sandboxes"),
		http.StatusOK, map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Expose-Headers": "", "Vary": "Origin"})

	// A preflight of header-routed sandbox traffic names the routing
	// headers but carries no values: it gets envd's answer, any header.
	requested := "connect-protocol-version,content-type,e2b-sandbox-id,e2b-sandbox-port,x-access-token"
	expect("sandbox preflight", send("OPTIONS", "/process.Process/Start", "X-API-Key", "", "Origin", origin,
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", requested),
		http.StatusNoContent, map[string]string{
			"Access-Control-Allow-Origin":  "*",
			"Access-Control-Allow-Methods": "POST",
			"Access-Control-Allow-Headers": requested,
			"Access-Control-Max-Age":       "7200",
		})
	// The request itself reaches envd, whose CORS headers it gets, once.
	expect("sandbox request from a page", send("GET", "/health", "X-API-Key", "", "Origin", origin,
		"E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983"),
		http.StatusNoContent, map[string]string{
			"Access-Control-Allow-Origin":   "*",
			"Access-Control-Expose-Headers": "Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin, Location, Cache-Control, X-Content-Type-Options",
			"Vary":                          "Origin",
		})
}
