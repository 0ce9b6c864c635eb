package openapitest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingTB captures what a check reports instead of failing the test.
type recordingTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	panic("Fatalf: " + fmt.Sprintf(format, args...))
}

func (r *recordingTB) all() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.errors, "\n")
}

// expect asserts that exactly the listed fragments were reported (all of
// them) or, with none listed, that nothing was.
func (r *recordingTB) expect(t *testing.T, fragments ...string) {
	t.Helper()
	got := r.all()
	if len(fragments) == 0 {
		if got != "" {
			t.Errorf("unexpected contract violations:\n%s", got)
		}
		return
	}
	if got == "" {
		t.Fatalf("no contract violation was reported; want one mentioning %q", fragments)
	}
	for _, f := range fragments {
		if !strings.Contains(got, f) {
			t.Errorf("the report does not mention %q:\n%s", f, got)
		}
	}
}

const buildID = "0b9d3f2e-6c1a-4a8e-9f7d-2e5b8c1d4a6f"

func TestSpecsLoad(t *testing.T) {
	for _, s := range []*Spec{E2B(t), Envd(t)} {
		if s.Document().Paths.Len() == 0 {
			t.Errorf("%s has no paths", s.Name())
		}
	}
	if first, again := E2B(t), E2B(t); first != again {
		t.Error("the E2B spec is loaded more than once")
	}
}

func TestAllowlistEntryForADeclaredStatusIsObsolete(t *testing.T) {
	doc, _, err := loadDocument("envd-openapi.yml")
	if err != nil {
		t.Fatal(err)
	}
	err = allowStatuses(http.MethodGet, "/files", 404)(doc)
	if err == nil || !strings.Contains(err.Error(), "GET /files already declares 404: the allowlist entry is obsolete") {
		t.Errorf("error %v, want the entry reported obsolete", err)
	}
	if err := allowStatuses(http.MethodGet, "/nope", 401)(doc); err == nil || !strings.Contains(err.Error(), "GET /nope is missing") {
		t.Errorf("error %v, want the operation reported missing", err)
	}
}

// answer is a server that answers every request with status, content type
// and body.
func answer(t *testing.T, status int, contentType, body string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func send(t *testing.T, rt http.RoundTripper, method, url, body string, header map[string]string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-API-Key", "e2b_00")
	for k, v := range header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(data)))
	return resp
}

const validCreated = `{"templateID":"tpl","buildID":"` + buildID + `","public":false,"names":["t/x"],"tags":["default"],"aliases":["x"]}`

func TestTransport(t *testing.T) {
	cases := []struct {
		name                 string
		status               int
		contentType, respond string
		method, path, body   string
		header               map[string]string
		want                 []string
	}{
		{name: "valid create", status: 202, contentType: "application/json", respond: validCreated,
			method: "POST", path: "/v3/templates", body: `{"name":"x:v1","cpuCount":2}`},
		{name: "wrong field type in request", status: 202, contentType: "application/json", respond: validCreated,
			method: "POST", path: "/v3/templates", body: `{"name":"x","cpuCount":"two"}`,
			want: []string{"POST /v3/templates", "request body", "field /cpuCount", `value "two"`}},
		{name: "missing required response field", status: 202, contentType: "application/json",
			respond: `{"templateID":"tpl","public":false,"names":[],"tags":[],"aliases":[]}`,
			method:  "POST", path: "/v3/templates", body: `{"name":"x"}`,
			want: []string{"response 202 to POST /v3/templates", `"buildID" is missing`}},
		{name: "undeclared status", status: 418, contentType: "application/json", respond: `{"code":418,"message":"teapot"}`,
			method: "GET", path: "/templates/tpl/builds/" + buildID + "/status",
			want: []string{"response 418 to GET /templates/{templateID}/builds/{buildID}/status", "status 418 is not declared", "declared: 200, 400, 401, 403, 404, 429, 500, 502, 503, 504"}},
		{name: "edge status with an empty body", status: 429, respond: "",
			method: "GET", path: "/templates/tpl/builds/" + buildID + "/status"},
		{name: "allowlisted status with the error envelope", status: 404, contentType: "application/json",
			respond: `{"code":404,"message":"build not found"}`,
			method:  "POST", path: "/v2/templates/tpl/builds/" + buildID, body: `{"fromImage":"x","steps":[]}`},
		{name: "allowlisted status with another JSON body", status: 404, contentType: "application/json",
			respond: `{"error":"build not found"}`,
			method:  "POST", path: "/v2/templates/tpl/builds/" + buildID, body: `{"fromImage":"x","steps":[]}`,
			want: []string{"response 404 to POST /v2/templates/{templateID}/builds/{buildID}", "error envelope", `"code" is missing`}},
		{name: "allowlisted status of another operation", status: 403, contentType: "application/json",
			respond: `{"code":403,"message":"no access"}`,
			method:  "GET", path: "/templates/tpl/builds/" + buildID + "/logs",
			want: []string{"response 403 to GET /templates/{templateID}/builds/{buildID}/logs", "status 403 is not declared"}},
		{name: "declared error without the JSON body through the edge", status: 404, respond: "",
			method: "DELETE", path: "/sandboxes/iabc"},
		{name: "declared error with a JSON body is checked", status: 404, contentType: "application/json", respond: `{"message":"gone"}`,
			method: "DELETE", path: "/sandboxes/iabc",
			want: []string{"response 404 to DELETE /sandboxes/{sandboxID}", `"code" is missing`}},
		{name: "edge redirect", status: 302, contentType: "text/html", respond: "<a>Found</a>",
			method: "GET", path: "/templates/tpl"},
		{name: "edge status with an HTML body", status: 502, contentType: "text/html", respond: "<html>bad gateway</html>",
			method: "GET", path: "/templates/tpl"},
		{name: "bad enum in query", status: 200, contentType: "application/json",
			respond: `{"templateID":"t","buildID":"b","status":"ready","logs":[],"logEntries":[]}`,
			method:  "GET", path: "/templates/tpl/builds/" + buildID + "/status?level=loud",
			want: []string{"query parameter level", `value "loud"`}},
		{name: "bad enum in response", status: 200, contentType: "application/json",
			respond: `{"templateID":"t","buildID":"b","status":"done","logs":[],"logEntries":[]}`,
			method:  "GET", path: "/templates/tpl/builds/" + buildID + "/status",
			want: []string{"field /status", `value "done"`}},
		{name: "bad uuid format in response", status: 201, contentType: "application/json",
			respond: `{"buildID":"not-a-uuid","tags":["a"]}`,
			method:  "POST", path: "/templates/tags", body: `{"target":"x:default","tags":["a"]}`,
			want: []string{"field /buildID", `value "not-a-uuid"`}},
		{name: "missing credentials answered 200", status: 200, contentType: "application/json", respond: `[]`,
			method: "GET", path: "/templates/tpl/tags", header: map[string]string{"X-API-Key": ""},
			want: []string{"GET /templates/{templateID}/tags", "X-API-Key"}},
		{name: "missing credentials answered 401", status: 401, contentType: "application/json", respond: `{"code":401,"message":"no"}`,
			method: "GET", path: "/templates/tpl/tags", header: map[string]string{"X-API-Key": ""}},
		{name: "unknown operation", status: 200, method: "GET", path: "/nope",
			want: []string{"GET /nope matches no operation"}},
		{name: "alias with namespace escaped in the path", status: 200, contentType: "application/json",
			respond: `{"templateID":"t","public":false}`, method: "GET", path: "/templates/aliases/team%2Ftpl:v1"},
		{name: "allowlisted v2 sandbox create", status: 201, contentType: "application/json",
			respond: `{"templateID":"t","sandboxID":"i1","clientID":"6532622b","envdVersion":"0.6.13","envdAccessToken":"x","trafficAccessToken":null,"domain":null}`,
			method:  "POST", path: "/v2/sandboxes", body: `{"templateID":"x:v1","metadata":{"m":"1"},"envVars":{"K":"V"}}`},
		{name: "secure on v2 sandbox create", status: 201, contentType: "application/json",
			respond: `{"templateID":"t","sandboxID":"i1","clientID":"6532622b","envdVersion":"0.6.13"}`,
			method:  "POST", path: "/v2/sandboxes", body: `{"templateID":"x","secure":true}`,
			want: []string{"POST /v2/sandboxes", "field /secure", "value true", "not allowed"}},
		{name: "v2 sandbox answer checked as Sandbox", status: 201, contentType: "application/json",
			respond: `{"templateID":"t","sandboxID":"i1","clientID":"6532622b"}`,
			method:  "POST", path: "/v2/sandboxes", body: `{"templateID":"x"}`,
			want: []string{`"envdVersion" is missing`}},
		{name: "allowlisted v2 connect without a body", status: 200, contentType: "application/json",
			respond: `{"templateID":"t","sandboxID":"i1","clientID":"6532622b","envdVersion":"0.6.13","envdAccessToken":"x"}`,
			method:  "POST", path: "/v2/sandboxes/i1/connect"},
		{name: "v2 connect timeout checked", status: 200, contentType: "application/json",
			respond: `{"templateID":"t","sandboxID":"i1","clientID":"6532622b","envdVersion":"0.6.13"}`,
			method:  "POST", path: "/v2/sandboxes/i1/connect", body: `{"timeout":-1}`,
			want: []string{"POST /v2/sandboxes/{sandboxID}/connect", "field /timeout"}},
		{name: "allowlisted minFreeDiskMb typed", status: 202, contentType: "application/json", respond: validCreated,
			method: "POST", path: "/v3/templates", body: `{"name":"x","minFreeDiskMb":"big"}`,
			want: []string{"field /minFreeDiskMb", `value "big"`}},
		{name: "allowlisted upload headers", status: 201, contentType: "application/json",
			respond: `{"present":false,"url":"https://s3/x","headers":{"x-amz-meta":"1"}}`,
			method:  "GET", path: "/templates/tpl/files/" + strings.Repeat("ab", 32)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := answer(t, tc.status, tc.contentType, tc.respond)
			rec := &recordingTB{}
			rt := E2B(t).Transport(rec, srv.URL, nil)
			resp := send(t, rt, tc.method, srv.URL+tc.path, tc.body, tc.header)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d passed through as %d", tc.status, resp.StatusCode)
			}
			if got, _ := io.ReadAll(resp.Body); string(got) != tc.respond {
				t.Errorf("body %q passed through as %q", tc.respond, got)
			}
			rec.expect(t, tc.want...)
		})
	}
}

func TestTransportUnderBasePathOnly(t *testing.T) {
	srv := answer(t, 200, "text/plain", "stored")
	other := answer(t, 200, "text/plain", "stored")
	rec := &recordingTB{}
	rt := E2B(t).Transport(rec, srv.URL+"/api", nil)
	// An upload to a presigned URL elsewhere is no API operation.
	send(t, rt, "PUT", other.URL+"/bucket/files/x.tar?sig=1", "data", nil)
	// Neither is a path outside the API base on the same host.
	send(t, rt, "PUT", srv.URL+"/upload/x", "data", nil)
	rec.expect(t)
	// Under the base, the prefix is stripped before matching.
	send(t, rt, "GET", srv.URL+"/api/nope", "", nil)
	rec.expect(t, "GET /nope matches no operation")
}

func TestMiddleware(t *testing.T) {
	handler := http.NewServeMux()
	handler.HandleFunc("POST /v3/templates", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "r1")
		w.WriteHeader(http.StatusAccepted)
		if strings.Contains(string(body), "incomplete") {
			_, _ = io.WriteString(w, `{"templateID":"tpl"}`)
			return
		}
		_, _ = io.WriteString(w, validCreated)
	})
	handler.HandleFunc("DELETE /templates/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") == "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"code":401,"message":"no key"}`)
			return
		}
		w.WriteHeader(http.StatusConflict) // not declared for this operation
	})
	handler.HandleFunc("GET /templates/{id}/tags", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "streamed, not JSON")
		http.NewResponseController(w).Flush()
	})
	handler.HandleFunc("GET /sandboxes/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound) // declared, but without the JSON body
	})
	handler.HandleFunc("GET /templates/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway) // what an edge, not the API server, answers
		_, _ = io.WriteString(w, "<html>bad gateway</html>")
	})
	handler.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "proxied")
	})

	cases := []struct {
		name               string
		method, path, body string
		header             map[string]string
		status             int
		respond            string
		want               []string
	}{
		{name: "valid", method: "POST", path: "/v3/templates", body: `{"name":"x"}`, status: 202, respond: validCreated},
		{name: "wrong request field type", method: "POST", path: "/v3/templates", body: `{"name":"x","tags":"v1"}`,
			status: 202, respond: validCreated, want: []string{"request body", "field /tags", `value "v1"`}},
		{name: "missing response fields", method: "POST", path: "/v3/templates", body: `{"name":"incomplete"}`,
			status: 202, respond: `{"templateID":"tpl"}`, want: []string{"response 202 to POST /v3/templates", "is missing"}},
		{name: "undeclared status", method: "DELETE", path: "/templates/tpl", status: 409,
			want: []string{"response 409 to DELETE /templates/{templateID}", "status 409 is not declared"}},
		{name: "a server's error without a body", method: "GET", path: "/sandboxes/iabc", status: 404,
			want: []string{"response 404 to GET /sandboxes/{sandboxID}", "Content-Type"}},
		{name: "edge statuses are not a server's", method: "GET", path: "/templates/tpl", status: 502, respond: "<html>bad gateway</html>",
			want: []string{"response 502 to GET /templates/{templateID}", "status 502 is not declared", "declared: 200, 401, 403, 404, 500)"}},
		{name: "unauthenticated request refused with 401", method: "DELETE", path: "/templates/tpl", header: map[string]string{"X-API-Key": ""},
			status: 401, respond: `{"code":401,"message":"no key"}`},
		{name: "streaming body is not parsed", method: "GET", path: "/templates/tpl/tags", status: 200, respond: "streamed, not JSON"},
		{name: "sandbox traffic skipped by predicate", method: "POST", path: "/process.Process/Start",
			header: map[string]string{"E2b-Sandbox-Id": "iabc"}, status: 200, respond: "proxied"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingTB{}
			srv := httptest.NewServer(E2B(t).Middleware(rec, handler, SkipRequests(IsSandboxTraffic)))
			defer srv.Close()
			resp := send(t, http.DefaultTransport, tc.method, srv.URL+tc.path, tc.body, tc.header)
			if resp.StatusCode != tc.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if got, _ := io.ReadAll(resp.Body); string(got) != tc.respond {
				t.Errorf("body %q, want %q", got, tc.respond)
			}
			if tc.path == "/v3/templates" && resp.Header.Get("X-Request-Id") != "r1" {
				t.Error("a header the handler set was lost")
			}
			if len(resp.TransferEncoding) > 0 && tc.respond != "streamed, not JSON" {
				t.Errorf("a buffered response was sent with Transfer-Encoding %v", resp.TransferEncoding)
			}
			rec.expect(t, tc.want...)
		})
	}
}

func TestIsSandboxTraffic(t *testing.T) {
	for host, want := range map[string]bool{
		"49983-iabc123.e2b.app":     true,
		"49983-iabc123-x.localhost": true,
		"api.e2b.app":               false,
		"127.0.0.1:3000":            false,
	} {
		r := httptest.NewRequest("GET", "http://"+host+"/files", nil)
		if got := IsSandboxTraffic(r); got != want {
			t.Errorf("IsSandboxTraffic(host %s) = %v, want %v", host, got, want)
		}
	}
	r := httptest.NewRequest("GET", "http://127.0.0.1/files", nil)
	r.Header.Set("E2b-Sandbox-Id", "iabc")
	if !IsSandboxTraffic(r) {
		t.Error("a request with E2b-Sandbox-Id is not recognised as sandbox traffic")
	}
}

func TestEnvdMiddleware(t *testing.T) {
	rec := &recordingTB{}
	h := Envd(t).Middleware(rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK) // /health declares 204 only
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	send(t, http.DefaultTransport, "GET", srv.URL+"/health", "", nil)
	rec.expect(t, "response 200 to GET /health")
}

// A request its client cancelled is not checked: a reverse proxy answers
// it 502, which no client receives.
func TestMiddlewareSkipsCancelledRequests(t *testing.T) {
	rec := &recordingTB{}
	answered := make(chan struct{})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(answered)
		<-r.Context().Done()
		w.WriteHeader(http.StatusBadGateway)
	})
	srv := httptest.NewServer(E2B(t).Middleware(rec, handler))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/templates/tpl", nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		cancel()
	}()
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("the cancelled request was answered")
	}
	<-answered
	srv.Close() // waits for the middleware to return
	rec.expect(t)
}
