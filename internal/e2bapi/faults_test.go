package e2bapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/openapitest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/safehttp"
)

// errorsTB records what the contract check reports instead of failing.
type errorsTB struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (e *errorsTB) Helper() {}
func (e *errorsTB) Errorf(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errors = append(e.errors, fmt.Sprintf(format, args...))
}

// The client's tests rely on the validating transport; this shows it is
// wired in: a request outside the contract is reported.
func TestContractCheckIsLive(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 202, e2b.TemplateRequestResponseV3{TemplateID: testTemplate, BuildID: testBuildID, Names: []string{}, Tags: []string{}, Aliases: []string{}})
	})
	rec := &errorsTB{TB: t}
	c, err := New(Config{BaseURL: srv.URL, APIKey: testKey,
		HTTPClient: &http.Client{Transport: openapitest.E2B(t).Transport(rec, srv.URL, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTemplateBuild(t.Context(), e2b.TemplateBuildRequestV3{Name: "x", CPUCount: ptr[int32](0)}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rec.errors, "\n"); !strings.Contains(got, "field /cpuCount") {
		t.Errorf("cpuCount 0 (below the minimum of 1) was not reported; got %q", got)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	var calls atomic.Int32
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusTooManyRequests, e2b.Error{Code: 429, Message: "slow down"})
			return
		}
		writeJSON(w, 200, []e2b.TemplateTag{})
	})
	// A proxy in front of E2B may answer 429 to any operation.
	c, _ := newTestClient(t, srv, nil)
	if _, err := c.ListTags(t.Context(), "my-tpl"); err != nil {
		t.Fatalf("ListTags after a 429: %v", err)
	}
	reqs := srv.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if waited := reqs[1].At.Sub(reqs[0].At); waited < time.Second {
		t.Errorf("retried after %v; Retry-After asked for 1s", waited)
	}
}

func TestRetryAfterParsing(t *testing.T) {
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	cases := []struct {
		value string
		want  time.Duration
		ok    bool
	}{
		{"3", 3 * time.Second, true},
		{" 0 ", 0, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"86400", maxRetryAfter, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
	}
	for _, tc := range cases {
		got, ok := retryAfter(tc.value, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("retryAfter(%q) = %v, %v; want %v, %v", tc.value, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRetriesByMethodAndStatus(t *testing.T) {
	sandbox := e2b.Sandbox{TemplateID: testTemplate, SandboxID: "iabc", ClientID: e2b.ClientID, EnvdVersion: "0.6.13"}
	cases := []struct {
		name      string
		status    int
		call      func(ctx context.Context, c *Client) error
		wantCalls int
		wantErr   bool
	}{
		{name: "GET 503 then success", status: 503, wantCalls: 2,
			call: func(ctx context.Context, c *Client) error { _, err := c.GetTemplate(ctx, testTemplate); return err }},
		{name: "GET 502 then success", status: 502, wantCalls: 2,
			call: func(ctx context.Context, c *Client) error { _, err := c.GetTemplate(ctx, testTemplate); return err }},
		{name: "DELETE 504 then success", status: 504, wantCalls: 2,
			call: func(ctx context.Context, c *Client) error { return c.DeleteTemplate(ctx, testTemplate) }},
		{name: "POST 503 is retried", status: 503, wantCalls: 2,
			call: func(ctx context.Context, c *Client) error {
				_, err := c.CreateSandbox(ctx, e2b.NewSandbox{TemplateID: "base"})
				return err
			}},
		{name: "POST 502 is not retried", status: 502, wantCalls: 1, wantErr: true,
			call: func(ctx context.Context, c *Client) error {
				_, err := c.CreateSandbox(ctx, e2b.NewSandbox{TemplateID: "base"})
				return err
			}},
		{name: "POST 504 is not retried", status: 504, wantCalls: 1, wantErr: true,
			call: func(ctx context.Context, c *Client) error {
				_, err := c.CreateSandbox(ctx, e2b.NewSandbox{TemplateID: "base"})
				return err
			}},
		{name: "GET 500 is not retried", status: 500, wantCalls: 1, wantErr: true,
			call: func(ctx context.Context, c *Client) error { _, err := c.GetTemplate(ctx, testTemplate); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					writeJSON(w, tc.status, e2b.Error{Code: tc.status, Message: "backend trouble"})
					return
				}
				switch r.Method {
				case http.MethodPost:
					writeJSON(w, 201, sandbox)
				case http.MethodDelete:
					w.WriteHeader(204)
				default:
					writeJSON(w, 200, e2b.TemplateWithBuilds{TemplateID: testTemplate, Aliases: []string{}, Names: []string{}, Builds: []e2b.TemplateBuild{}})
				}
			})
			// Gateway statuses E2B's edge may send for any operation
			// (openapitest's allowlist).
			c, _ := newTestClient(t, srv, nil)
			err := tc.call(t.Context(), c)
			if got := int(calls.Load()); got != tc.wantCalls {
				t.Errorf("%d attempts, want %d", got, tc.wantCalls)
			}
			if tc.wantErr {
				var apiErr *APIError
				if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || apiErr.Message != "backend trouble" {
					t.Errorf("error %v, want an *APIError %d with the server's message", err, tc.status)
				}
			} else if err != nil {
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
}

func TestRetriesRunOut(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		writeJSON(w, http.StatusTooManyRequests, e2b.Error{Code: 429, Message: "rate limit"})
	})
	c, logs := newTestClient(t, srv, nil)
	_, err := c.GetTemplate(t.Context(), testTemplate)
	if statusOf(err) != http.StatusTooManyRequests {
		t.Fatalf("error %v, want rate limited", err)
	}
	if n := len(srv.requests()); n != 4 {
		t.Errorf("%d attempts, want 1 + MaxRetries (3)", n)
	}
	for attempt := 1; attempt <= 4; attempt++ {
		if !strings.Contains(logs.all(), fmt.Sprintf("attempt:%d", attempt)) {
			t.Errorf("attempt %d was not logged:\n%s", attempt, logs.all())
		}
	}
}

// resetFirst hijacks the first connection and closes it without answering.
func resetFirst(t *testing.T, then http.HandlerFunc) (*apiServer, *atomic.Int32) {
	var calls atomic.Int32
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			conn.Close()
			return
		}
		then(w, r)
	})
	return srv, &calls
}

func TestConnectionResetRetriedForGETOnly(t *testing.T) {
	// Fresh connections only, so Go's transport does not retry on its own.
	noReuse := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(noReuse.CloseIdleConnections)

	srv, calls := resetFirst(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, []e2b.TemplateTag{})
	})
	c, _ := newTestClient(t, srv, noReuse)
	if _, err := c.ListTags(t.Context(), "my-tpl"); err != nil {
		t.Fatalf("GET after a connection reset: %v", err)
	}
	if calls.Load() != 2 {
		t.Errorf("%d attempts, want 2", calls.Load())
	}

	srv, calls = resetFirst(t, func(w http.ResponseWriter, r *http.Request) {
		t.Error("a POST whose connection broke mid-request was sent again")
	})
	c, _ = newTestClient(t, srv, noReuse)
	if _, err := c.CreateTemplateBuild(t.Context(), e2b.TemplateBuildRequestV3{Name: "x"}); err == nil {
		t.Fatal("POST after a connection reset succeeded")
	}
	if calls.Load() != 1 {
		t.Errorf("%d attempts of the POST, want 1", calls.Load())
	}
}

func TestPOSTRetriedWhenNeverConnected(t *testing.T) {
	ln := httptest.NewServer(http.NotFoundHandler())
	url := ln.URL
	ln.Close() // nothing listens here any more
	var dials atomic.Int32
	logger := &captureLogger{}
	c, err := New(Config{BaseURL: url, APIKey: testKey, MaxRetries: 2, RetryWaitMin: time.Millisecond, RetryWaitMax: time.Millisecond, Logger: logger,
		HTTPClient: &http.Client{Transport: countingTransport{&dials, http.DefaultTransport}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateTemplateBuild(t.Context(), e2b.TemplateBuildRequestV3{Name: "x"})
	if err == nil {
		t.Fatal("POST to a closed port succeeded")
	}
	if dials.Load() != 3 {
		t.Errorf("%d attempts, want 3: a refused connection proves the POST was not processed", dials.Load())
	}
	// The error says which URL was tried and what to check.
	for _, want := range []string{"connection refused", "No E2B API answered at " + url, "api_url (or E2B_API_URL", "is running", "terraform-provider-e2b server"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

type countingTransport struct {
	n    *atomic.Int32
	next http.RoundTripper
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

func TestRedirectToAnotherHostIsRefused(t *testing.T) {
	var otherHits atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
	}))
	t.Cleanup(other.Close)
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	})
	// A redirect is an edge answer to the contract check (openapitest's allowlist).
	c, _ := newTestClient(t, srv, nil)
	_, err := c.GetTemplate(t.Context(), testTemplate)
	if !errors.Is(err, safehttp.ErrUnsafeRedirect) {
		t.Fatalf("error %v, want a refused redirect", err)
	}
	if otherHits.Load() != 0 {
		t.Errorf("the other host was contacted %d times", otherHits.Load())
	}
	if n := len(srv.requests()); n != 1 {
		t.Errorf("%d attempts, want 1: a refused redirect is not retried", n)
	}
}

func TestErrorEnvelope(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 404, e2b.Error{Code: 404, Message: "template 'nope' not found", ErrorCode: "template_not_found"})
	})
	c, _ := newTestClient(t, srv, nil)
	_, err := c.GetTemplateByAlias(t.Context(), "nope")
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v is not an *APIError", err)
	}
	want := APIError{StatusCode: 404, Code: 404, Message: "template 'nope' not found", ErrorCode: "template_not_found", Method: "GET", Path: "/templates/aliases/nope"}
	if *apiErr != want {
		t.Errorf("APIError %+v, want %+v", *apiErr, want)
	}
	if !IsNotFound(err) || IsInvalid(err) || IsBuildGone(err) != true {
		t.Errorf("status helpers misclassify %v", err)
	}
	for _, part := range []string{"GET /templates/aliases/nope", "404", "template 'nope' not found", "template_not_found"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("error text %q does not mention %q", err, part)
		}
	}
}

func TestStatusOnlyErrors(t *testing.T) {
	cases := []struct {
		status      int
		contentType string
		body        string
		wantMessage string
	}{
		{404, "", "", ""},
		{500, "text/html", "<html>bad things</html>", "<html>bad things</html>"},
		{500, "text/plain", `{"unexpected":true}`, `{"unexpected":true}`},
	}
	for _, tc := range cases {
		srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
			if tc.contentType != "" {
				w.Header().Set("Content-Type", tc.contentType)
			}
			w.WriteHeader(tc.status)
			_, _ = io.WriteString(w, tc.body)
		})
		// Error answers without the envelope come through E2B's edge
		// (design/e2b-api.md §0; openapitest's allowlist).
		c, _ := newTestClient(t, srv, nil)
		err := c.KillSandbox(t.Context(), "iabc")
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || apiErr.Message != tc.wantMessage || apiErr.Code != 0 {
			t.Errorf("body %q: error %#v, want status %d message %q", tc.body, err, tc.status, tc.wantMessage)
		}
		if tc.body == "" && !strings.Contains(err.Error(), "no error message") {
			t.Errorf("error text %q does not say the answer had no message", err)
		}
	}
}

func TestStatusHelpers(t *testing.T) {
	helpers := map[int]func(error) bool{400: IsInvalid, 404: IsNotFound}
	for _, status := range []int{400, 401, 403, 404, 409, 429} {
		err := fmt.Errorf("wrapped: %w", &APIError{StatusCode: status})
		for other, is := range helpers {
			if is(err) != (other == status) {
				t.Errorf("helper for %d on a %d error = %v", other, status, is(err))
			}
		}
		if statusOf(err) != status {
			t.Errorf("status of a wrapped %d error = %d", status, statusOf(err))
		}
	}
	if IsNotFound(errors.New("404")) {
		t.Error("a plain error counts as not found")
	}
}

// statusOf is the status code of the *APIError in err, 0 without one.
func statusOf(err error) int {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode
	}
	return 0
}

func TestAPIKeyNeverLogged(t *testing.T) {
	var calls atomic.Int32
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			writeJSON(w, 503, e2b.Error{Code: 503, Message: "overloaded"})
			return
		}
		// A server that echoes the key back must not get it into logs.
		writeJSON(w, 400, e2b.Error{Code: 400, Message: "bad key " + r.Header.Get("X-API-Key")})
	})
	c, logs := newTestClient(t, srv, nil)
	_, err := c.GetTemplateByAlias(t.Context(), "my-tpl")
	if !IsInvalid(err) {
		t.Fatalf("error %v, want 400", err)
	}
	all := logs.all()
	if strings.Contains(all, testKey) || strings.Contains(err.Error(), testKey) {
		t.Errorf("the API key leaked:\nlogs:\n%s\nerror: %v", all, err)
	}
	for _, want := range []string{"method:GET", "url:" + srv.URL + "/templates/aliases/my-tpl", "attempt:1", "attempt:2", "status:503", "status:400", "retrying"} {
		if !strings.Contains(all, want) {
			t.Errorf("logs lack %q:\n%s", want, all)
		}
	}
}

func TestUploadArchive(t *testing.T) {
	archive := []byte(strings.Repeat("build context archive bytes\n", 1000))
	path := filepath.Join(t.TempDir(), "context.tar.gz")
	if err := os.WriteFile(path, archive, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	var mu sync.Mutex
	var got []seen
	storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
		first := len(got) == 1
		chunked := len(r.TransferEncoding) > 0
		length := r.ContentLength
		mu.Unlock()
		if chunked || length != int64(len(archive)) {
			t.Errorf("upload sent with Transfer-Encoding %v and Content-Length %d; want exactly %d", r.TransferEncoding, length, len(archive))
		}
		if first {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(storage.Close)
	api := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) { t.Errorf("the API was called: %s %s", r.Method, r.URL) })
	c, logs := newTestClient(t, api, nil)

	link := &e2b.TemplateBuildFileUpload{URL: storage.URL + "/bucket/files/h.tar?X-Amz-Signature=secret", Headers: map[string]string{
		"x-amz-meta-team": "t1", "Content-Length": "1"}}
	if err := c.UploadArchive(t.Context(), link, f, int64(len(archive))); err != nil {
		t.Fatalf("UploadArchive: %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("%d upload attempts, want 2 (a 503, then success)", len(got))
	}
	for i, r := range got {
		if r.Method != http.MethodPut || r.Path != "/bucket/files/h.tar" || r.Query != "X-Amz-Signature=secret" {
			t.Errorf("attempt %d: %s %s?%s", i+1, r.Method, r.Path, r.Query)
		}
		if string(r.Body) != string(archive) {
			t.Errorf("attempt %d sent %d bytes, want the whole archive (%d)", i+1, len(r.Body), len(archive))
		}
		for _, h := range []string{"X-Api-Key", "Authorization", "Cookie"} {
			if v := r.Header.Get(h); v != "" {
				t.Errorf("attempt %d sent %s: %q", i+1, h, v)
			}
		}
		if r.Header.Get("X-Amz-Meta-Team") != "t1" {
			t.Errorf("attempt %d lacks the link's header x-amz-meta-team", i+1)
		}
		if ct := r.Header.Get("Content-Type"); ct != "" {
			t.Errorf("attempt %d sent Content-Type %q", i+1, ct)
		}
	}
	if strings.Contains(logs.all(), "secret") {
		t.Errorf("the presigned URL's signature was logged:\n%s", logs.all())
	}
}

func TestUploadRefusesUnsafeURL(t *testing.T) {
	api := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {})
	c, _ := newTestClient(t, api, nil)
	for _, target := range []string{"http://storage.example.com/x.tar", "ftp://127.0.0.1/x", ""} {
		err := c.UploadArchive(t.Context(), &e2b.TemplateBuildFileUpload{URL: target}, strings.NewReader("x"), 1)
		if err == nil {
			t.Errorf("upload to %q was not refused", target)
		}
	}
	if err := c.UploadArchive(t.Context(), &e2b.TemplateBuildFileUpload{URL: "https://storage.example/x"}, strings.NewReader(""), 0); err == nil {
		t.Error("an empty archive was uploaded")
	}
}

func TestGetFileUploadLinkChecksHash(t *testing.T) {
	api := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) { t.Errorf("request sent: %s", r.URL) })
	c, _ := newTestClient(t, api, nil)
	if _, err := c.GetFileUploadLink(t.Context(), testTemplate, "../../sandboxes"); err == nil || !strings.Contains(err.Error(), "../../sandboxes") {
		t.Errorf("a malformed hash was not refused by name: %v", err)
	}
	if err := c.KillSandbox(t.Context(), "../templates/x"); err == nil {
		t.Error("a malformed sandbox ID was not refused")
	}
}

func TestCreateSandboxFallsBackToV1(t *testing.T) {
	sandbox := e2b.Sandbox{TemplateID: testTemplate, SandboxID: "iabc", ClientID: e2b.ClientID, EnvdVersion: "0.6.13", EnvdAccessToken: "tok"}
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v2/sandboxes" {
			writeJSON(w, 404, e2b.Error{Code: 404, Message: "no such route"})
			return
		}
		writeJSON(w, 201, sandbox)
	})
	// An API older than POST /v2/sandboxes answers 404 for the route
	// (openapitest's allowlist).
	c, _ := newTestClient(t, srv, nil)
	for range 2 {
		got, err := c.CreateSandbox(t.Context(), e2b.NewSandbox{TemplateID: "my-tpl", Metadata: map[string]string{"m": "1"}})
		if err != nil {
			t.Fatalf("CreateSandbox: %v", err)
		}
		if *got != sandbox {
			t.Errorf("decoded %+v", got)
		}
	}
	if n := srv.count("POST", "/v2/sandboxes"); n != 1 {
		t.Errorf("POST /v2/sandboxes sent %d times; the fallback should be remembered after the first", n)
	}
	for _, r := range srv.requests() {
		if r.Path == "/sandboxes" {
			sameJSON(t, "v1 body", r.Body, `{"templateID":"my-tpl","timeout":300,"secure":true,"metadata":{"m":"1"}}`)
		}
	}
}

func TestCreateSandboxTemplateNotFoundIsNotAFallback(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 404, e2b.Error{Code: 404, Message: "template 'nope' not found"})
	})
	c, _ := newTestClient(t, srv, nil)
	for range 2 {
		if _, err := c.CreateSandbox(t.Context(), e2b.NewSandbox{TemplateID: "nope"}); !IsNotFound(err) {
			t.Fatalf("error %v, want not found", err)
		}
	}
	if n := srv.count("POST", "/v2/sandboxes"); n != 2 {
		t.Errorf("POST /v2/sandboxes sent %d times, want 2: two 404s mean a missing template, not a missing endpoint", n)
	}
}

func TestUploadErrorNamesTheStorage(t *testing.T) {
	storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, "<Error><Code>SignatureDoesNotMatch</Code></Error>")
	}))
	t.Cleanup(storage.Close)
	api := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {})
	c, _ := newTestClient(t, api, nil)
	err := c.UploadArchive(t.Context(), &e2b.TemplateBuildFileUpload{URL: storage.URL + "/b/h.tar?sig=secret"}, strings.NewReader("data"), 4)
	if statusOf(err) != http.StatusForbidden {
		t.Fatalf("error %v, want 403", err)
	}
	for _, want := range []string{"build context storage at " + strings.TrimPrefix(storage.URL, "http://"), "PUT /b/h.tar", "SignatureDoesNotMatch"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q shows the presigned signature", err)
	}
}

func TestUploadConnectionErrorsHideTheSignature(t *testing.T) {
	var attempts atomic.Int32
	storage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(storage.Close)
	api := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {})
	c, logs := newTestClient(t, api, nil)
	err := c.UploadArchive(t.Context(), &e2b.TemplateBuildFileUpload{URL: storage.URL + "/b/h.tar?X-Amz-Signature=topsecret"}, strings.NewReader("data"), 4)
	if err == nil {
		t.Fatal("upload to a server that drops every connection succeeded")
	}
	if attempts.Load() != 4 {
		t.Errorf("%d upload attempts, want 1 + MaxRetries (3)", attempts.Load())
	}
	if strings.Contains(err.Error(), "topsecret") || strings.Contains(logs.all(), "topsecret") {
		t.Errorf("the presigned signature leaked:\nerror: %v\nlogs:\n%s", err, logs.all())
	}
}

func TestIsBuildGone(t *testing.T) {
	for _, c := range []struct {
		err  error
		gone bool
	}{
		{nil, false},
		{&APIError{StatusCode: 404}, true},
		{&APIError{StatusCode: 400, Message: "Build 'x' not found"}, true},
		{&APIError{StatusCode: 400, Message: "invalid query"}, false},
		{&APIError{StatusCode: 500, Message: "not found"}, false},
	} {
		if got := IsBuildGone(c.err); got != c.gone {
			t.Errorf("IsBuildGone(%v) = %v, want %v", c.err, got, c.gone)
		}
	}
}
