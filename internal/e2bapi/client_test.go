package e2bapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/openapitest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

const (
	testKey       = "e2b_0123456789abcdef0123456789abcdef"
	testUserAgent = "terraform-provider-e2b/1.2.3"
	testBuildID   = "0b9d3f2e-6c1a-4a8e-9f7d-2e5b8c1d4a6f"
	testTemplate  = "rki5dems9wqfm4r03t7g"
)

var testTime = time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)

// seen is one request as the test server received it.
type seen struct {
	Method, Path, Query string
	Header              http.Header
	Body                []byte
	At                  time.Time
}

// apiServer is an httptest server that records requests and answers with
// the test's handler.
type apiServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newAPIServer(t *testing.T, handler http.HandlerFunc) *apiServer {
	t.Helper()
	s := &apiServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.reqs = append(s.reqs, seen{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, At: time.Now()})
		s.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		handler(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) requests() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.reqs...)
}

func (s *apiServer) count(method, path string) int {
	n := 0
	for _, r := range s.requests() {
		if r.Method == method && r.Path == path {
			n++
		}
	}
	return n
}

// captureLogger keeps every entry the client logs.
type captureLogger struct {
	mu      sync.Mutex
	entries []string
	fields  []map[string]any
}

func (l *captureLogger) add(level, msg string, fields map[string]any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, fmt.Sprintf("%s %s %v", level, msg, fields))
	l.fields = append(l.fields, fields)
}

func (l *captureLogger) Debug(_ context.Context, msg string, f map[string]any) {
	l.add("DEBUG", msg, f)
}
func (l *captureLogger) Info(_ context.Context, msg string, f map[string]any) { l.add("INFO", msg, f) }
func (l *captureLogger) Warn(_ context.Context, msg string, f map[string]any) { l.add("WARN", msg, f) }

func (l *captureLogger) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.entries, "\n")
}

// newTestClient returns a client of srv whose every call passes the
// validating transport of the E2B spec.
func newTestClient(t *testing.T, srv *apiServer, base http.RoundTripper) (*Client, *captureLogger) {
	t.Helper()
	logger := &captureLogger{}
	c, err := New(Config{
		BaseURL:      srv.URL,
		APIKey:       testKey,
		UserAgent:    testUserAgent,
		MaxRetries:   3,
		RetryWaitMin: time.Millisecond,
		RetryWaitMax: 5 * time.Millisecond,
		HTTPClient:   &http.Client{Transport: openapitest.E2B(t).Transport(t, srv.URL, base)},
		Logger:       logger,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, logger
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func ptr[T any](v T) *T { return &v }

func sameJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: body %q is not JSON: %v", what, got, err)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad expectation %q: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: body %s, want %s", what, got, want)
	}
}

func TestEndpoints(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	created := e2b.TemplateRequestResponseV3{TemplateID: testTemplate, BuildID: testBuildID, Names: []string{"team/my-tpl"}, Tags: []string{"v1"}, Aliases: []string{"my-tpl"}}
	upload := e2b.TemplateBuildFileUpload{URL: "https://storage.example/files/x.tar?sig=1", Headers: map[string]string{"x-amz-meta-a": "1"}}
	info := e2b.TemplateBuildInfo{TemplateID: testTemplate, BuildID: testBuildID, Status: e2b.BuildBuilding, Logs: []string{},
		LogEntries: []e2b.BuildLogEntry{{Timestamp: testTime, Message: "step 1", Level: e2b.LogInfo, Step: "1"}}}
	withBuilds := e2b.TemplateWithBuilds{TemplateID: testTemplate, Aliases: []string{"my-tpl"}, Names: []string{"team/my-tpl"}, CreatedAt: testTime, UpdatedAt: testTime,
		LastSpawnedAt: ptr(testTime), Builds: []e2b.TemplateBuild{{BuildID: testBuildID, Status: e2b.BuildReady, CreatedAt: testTime, UpdatedAt: testTime, FinishedAt: ptr(testTime), CPUCount: 2, MemoryMB: 1024}}}
	sandbox := e2b.Sandbox{TemplateID: testTemplate, SandboxID: "iabcdefghij0123456789", ClientID: e2b.ClientID, EnvdVersion: "0.6.13", EnvdAccessToken: "tok"}
	detail := e2b.SandboxDetail{TemplateID: testTemplate, SandboxID: "iabcdefghij0123456789", ClientID: e2b.ClientID, StartedAt: testTime, EndAt: testTime.Add(time.Minute),
		EnvdVersion: "0.6.13", CPUCount: 2, MemoryMB: 1024, DiskSizeMB: 5120, State: "running", Metadata: map[string]string{"m": "1"}}

	cases := []struct {
		name         string
		call         func(ctx context.Context, c *Client) (any, error)
		method, path string
		query        string
		body         string // JSON; empty for none
		status       int
		answer       any // nil for an empty body
		want         any
	}{
		{name: "CreateTemplateBuild",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateTemplateBuild(ctx, e2b.TemplateBuildRequestV3{Name: "team/my-tpl:v1", Tags: []string{"prod"}, CPUCount: ptr[int32](2), MemoryMB: ptr[int32](1024), MinFreeDiskMB: ptr[int32](0)})
			},
			method: "POST", path: "/v3/templates",
			body:   `{"name":"team/my-tpl:v1","tags":["prod"],"cpuCount":2,"memoryMB":1024,"minFreeDiskMb":0}`,
			status: 202, answer: created, want: &created},
		{name: "GetFileUploadLink",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetFileUploadLink(ctx, testTemplate, hash) },
			method: "GET", path: "/templates/" + testTemplate + "/files/" + hash,
			status: 201, answer: upload, want: &upload},
		{name: "StartBuild",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.StartBuild(ctx, testTemplate, testBuildID, e2b.TemplateBuildStartV2{FromImage: "ubuntu:22.04", StartCmd: "python app.py",
					Steps: []e2b.TemplateStep{{Type: steps.Copy, Args: []string{"app", "/app", "", ""}, FilesHash: hash}, {Type: steps.Run, Args: []string{"echo hi"}}}})
			},
			method: "POST", path: "/v2/templates/" + testTemplate + "/builds/" + testBuildID,
			body: `{"fromImage":"ubuntu:22.04","force":false,"startCmd":"python app.py","steps":[` +
				`{"type":"COPY","args":["app","/app","",""],"filesHash":"` + hash + `","force":false},{"type":"RUN","args":["echo hi"],"force":false}]}`,
			status: 202},
		{name: "StartBuild from a private registry, a step without args",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.StartBuild(ctx, testTemplate, testBuildID, e2b.TemplateBuildStartV2{FromImage: "registry.example/img:1", Force: true,
					FromImageRegistry: &e2b.FromImageRegistry{Type: "registry", Username: "u", Password: "p"},
					Steps:             []e2b.TemplateStep{{Type: steps.Workdir}}})
			},
			method: "POST", path: "/v2/templates/" + testTemplate + "/builds/" + testBuildID,
			body: `{"fromImage":"registry.example/img:1","fromImageRegistry":{"type":"registry","username":"u","password":"p"},"force":true,` +
				`"steps":[{"type":"WORKDIR","args":[],"force":false}]}`,
			status: 202},
		{name: "StartBuild without steps sends an empty list",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.StartBuild(ctx, testTemplate, testBuildID, e2b.TemplateBuildStartV2{FromTemplate: "base"})
			},
			method: "POST", path: "/v2/templates/" + testTemplate + "/builds/" + testBuildID,
			body: `{"fromTemplate":"base","force":false,"steps":[]}`, status: 202},
		{name: "GetBuildStatus",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.GetBuildStatus(ctx, testTemplate, testBuildID, 5)
			},
			method: "GET", path: "/templates/" + testTemplate + "/builds/" + testBuildID + "/status", query: "logsOffset=5",
			status: 200, answer: info, want: &info},
		{name: "GetTemplate",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetTemplate(ctx, testTemplate) },
			method: "GET", path: "/templates/" + testTemplate,
			status: 200, answer: withBuilds, want: &withBuilds},
		{name: "DeleteTemplate by name",
			call:   func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteTemplate(ctx, "team/my-tpl") },
			method: "DELETE", path: "/templates/team%2Fmy-tpl", status: 204},
		{name: "UpdateTemplate",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.UpdateTemplate(ctx, "team/my-tpl", e2b.TemplateUpdateRequest{Public: ptr(true)})
			},
			method: "PATCH", path: "/v2/templates/team%2Fmy-tpl", body: `{"public":true}`,
			status: 200, answer: e2b.TemplateUpdateResponse{Names: []string{"team/my-tpl"}}, want: &e2b.TemplateUpdateResponse{Names: []string{"team/my-tpl"}}},
		{name: "GetTemplateByAlias",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetTemplateByAlias(ctx, "team/my-tpl:v1") },
			method: "GET", path: "/templates/aliases/team%2Fmy-tpl:v1",
			status: 200, answer: e2b.TemplateAliasResponse{TemplateID: testTemplate, Public: true}, want: &e2b.TemplateAliasResponse{TemplateID: testTemplate, Public: true}},
		{name: "AssignTags",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.AssignTags(ctx, "my-tpl:v1", []string{"prod"})
			},
			method: "POST", path: "/templates/tags", body: `{"target":"my-tpl:v1","tags":["prod"]}`,
			status: 201, answer: e2b.AssignedTemplateTags{Tags: []string{"prod"}, BuildID: testBuildID}, want: &e2b.AssignedTemplateTags{Tags: []string{"prod"}, BuildID: testBuildID}},
		{name: "DeleteTags",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.DeleteTags(ctx, "my-tpl", []string{"prod"})
			},
			method: "DELETE", path: "/templates/tags", body: `{"name":"my-tpl","tags":["prod"]}`, status: 204},
		{name: "ListTags",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.ListTags(ctx, "my-tpl") },
			method: "GET", path: "/templates/my-tpl/tags",
			status: 200, answer: []e2b.TemplateTag{{Tag: "prod", BuildID: testBuildID, CreatedAt: testTime}}, want: []e2b.TemplateTag{{Tag: "prod", BuildID: testBuildID, CreatedAt: testTime}}},
		{name: "CreateSandbox sends no secure to v2",
			call: func(ctx context.Context, c *Client) (any, error) {
				return c.CreateSandbox(ctx, e2b.NewSandbox{TemplateID: "my-tpl:v1", Secure: ptr(false), Metadata: map[string]string{"m": "1"}, EnvVars: map[string]string{"K": "V"}})
			},
			method: "POST", path: "/v2/sandboxes", body: `{"templateID":"my-tpl:v1","metadata":{"m":"1"},"envVars":{"K":"V"}}`,
			status: 201, answer: sandbox, want: &sandbox},
		{name: "GetSandbox",
			call:   func(ctx context.Context, c *Client) (any, error) { return c.GetSandbox(ctx, "iabcdefghij0123456789") },
			method: "GET", path: "/sandboxes/iabcdefghij0123456789",
			status: 200, answer: detail, want: &detail},
		{name: "KillSandbox",
			call: func(ctx context.Context, c *Client) (any, error) {
				return nil, c.KillSandbox(ctx, "iabcdefghij0123456789")
			},
			method: "DELETE", path: "/sandboxes/iabcdefghij0123456789", status: 204},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
				if tc.answer == nil {
					w.WriteHeader(tc.status)
					return
				}
				writeJSON(w, tc.status, tc.answer)
			})
			c, _ := newTestClient(t, srv, nil)
			got, err := tc.call(t.Context(), c)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			reqs := srv.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tc.method || r.Path != tc.path || r.Query != tc.query {
				t.Errorf("request %s %s?%s, want %s %s?%s", r.Method, r.Path, r.Query, tc.method, tc.path, tc.query)
			}
			if r.Header.Get("X-API-Key") != testKey {
				t.Errorf("X-API-Key %q, want the key", r.Header.Get("X-API-Key"))
			}
			if ua := r.Header.Get("User-Agent"); ua != testUserAgent {
				t.Errorf("User-Agent %q, want %q", ua, testUserAgent)
			}
			if tc.body == "" {
				if len(r.Body) != 0 {
					t.Errorf("unexpected body %q", r.Body)
				}
			} else {
				sameJSON(t, "request body", r.Body, tc.body)
				if ct := r.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q, want application/json", ct)
				}
			}
			if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decoded %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestNewRefusesUnsafeConfig(t *testing.T) {
	for _, cfg := range []Config{
		{BaseURL: "http://api.example.com", APIKey: testKey},
		{BaseURL: "ftp://127.0.0.1", APIKey: testKey},
		{BaseURL: "https://api.e2b.app"},
		{BaseURL: "https://api.e2b.app", APIKey: testKey, UserAgent: "e2b-js-sdk/2.51.0"},
		{BaseURL: "https://api.e2b.app", APIKey: testKey, MaxRetries: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted an unsafe or invalid configuration", cfg)
		}
	}
	for _, base := range []string{"http://127.0.0.1:3000", "http://localhost:3000/", "https://api.e2b.app"} {
		c, err := New(Config{BaseURL: base, APIKey: testKey})
		if err != nil {
			t.Errorf("New(%q): %v", base, err)
		} else if c.userAgent != defaultUserAgent {
			t.Errorf("default user agent %q, want %q", c.userAgent, defaultUserAgent)
		}
	}
}

// TestBackoffLogsTheWait logs what a retry waits for and how long: a Retry-After of
// minutes is a warning (the apply looks stuck meanwhile), a short one is information.
func TestBackoffLogsTheWait(t *testing.T) {
	logger := &captureLogger{}
	c, err := New(Config{BaseURL: "http://127.0.0.1:9", APIKey: "e2b_0123456789abcdef", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	answer := func(retryAfter string) *http.Response {
		req, _ := http.NewRequestWithContext(withCallState(t.Context(), http.MethodGet, "http://127.0.0.1:9/templates", ""), http.MethodGet, "http://127.0.0.1:9/templates", nil)
		resp := &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}, Request: req}
		resp.Header.Set("Retry-After", retryAfter)
		return resp
	}
	if d := c.backoff(time.Millisecond, time.Second, 1, answer("180")); d != 3*time.Minute {
		t.Errorf("Retry-After 180 waits %s", d)
	}
	if d := c.backoff(time.Millisecond, time.Second, 1, answer("2")); d != 2*time.Second {
		t.Errorf("Retry-After 2 waits %s", d)
	}
	c.backoff(time.Millisecond, time.Second, 1, answer("86400"))
	got := logger.all()
	for _, want := range []string{
		"WARN waiting before retrying the E2B API request, as its Retry-After header asks map[",
		"retry_after:180", "wait:3m0s",
		"INFO waiting before retrying the E2B API request, as its Retry-After header asks map[",
		"wait:2s",
		"asks (at most 5m0s)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
}

// TestResolveTag resolves a tag listed at a ready build to it, and a tag listed at a
// build that is not ready to nothing, saying whether an earlier ready build still serves
// it (the alias check answers 200) or none does (404).
func TestResolveTag(t *testing.T) {
	const earlierTag, noneTag, readyTag = "moving", "broken", "prod"
	building, failed := "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	// newTemplate has only the build E2B registered with it, waiting and tagged default;
	// E2B's alias lookup drops ":default" from a name and then only checks that the
	// template exists.
	const newTemplate, waiting = "newtemplate000000000", "33333333-3333-4333-8333-333333333333"
	status := map[string]string{testBuildID: e2b.BuildReady, building: e2b.BuildBuilding, failed: e2b.BuildError, waiting: e2b.BuildWaiting}
	builds := map[string][]string{testTemplate: {testBuildID, building, failed}, newTemplate: {waiting}}
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch path := r.URL.EscapedPath(); {
		case path == "/templates/"+testTemplate+"/tags":
			writeJSON(w, 200, []e2b.TemplateTag{{Tag: noneTag, BuildID: failed}, {Tag: earlierTag, BuildID: building}, {Tag: readyTag, BuildID: testBuildID}})
		case path == "/templates/"+newTemplate+"/tags":
			writeJSON(w, 200, []e2b.TemplateTag{{Tag: e2b.DefaultTag, BuildID: waiting}})
		case strings.HasSuffix(path, "/status"):
			id := strings.Split(path, "/")[4]
			writeJSON(w, 200, e2b.TemplateBuildInfo{TemplateID: strings.Split(path, "/")[2], BuildID: id, Status: status[id], Logs: []string{}, LogEntries: []e2b.BuildLogEntry{}})
		case builds[strings.TrimPrefix(path, "/templates/")] != nil:
			id := strings.TrimPrefix(path, "/templates/")
			tpl := e2b.TemplateWithBuilds{TemplateID: id, Aliases: []string{}, Names: []string{}, Builds: []e2b.TemplateBuild{}}
			for _, b := range builds[id] {
				tpl.Builds = append(tpl.Builds, e2b.TemplateBuild{BuildID: b, Status: status[b], CPUCount: 2, MemoryMB: 512})
			}
			writeJSON(w, 200, tpl)
		case r.URL.Path == "/templates/aliases/"+testTemplate+":"+earlierTag, r.URL.Path == "/templates/aliases/"+newTemplate+":"+e2b.DefaultTag:
			writeJSON(w, 200, e2b.TemplateAliasResponse{TemplateID: strings.Split(strings.TrimPrefix(r.URL.Path, "/templates/aliases/"), ":")[0]})
		default:
			writeJSON(w, 404, e2b.Error{Code: 404, Message: "not found"})
		}
	})
	c, _ := newTestClient(t, srv, nil)
	for ref, want := range map[[2]string]TagResolution{
		{testTemplate, readyTag}:      {Listed: e2b.TemplateTag{Tag: readyTag, BuildID: testBuildID}, ListedStatus: e2b.BuildReady, BuildID: testBuildID},
		{testTemplate, earlierTag}:    {Listed: e2b.TemplateTag{Tag: earlierTag, BuildID: building}, ListedStatus: e2b.BuildBuilding, Earlier: true},
		{testTemplate, noneTag}:       {Listed: e2b.TemplateTag{Tag: noneTag, BuildID: failed}, ListedStatus: e2b.BuildError},
		{testTemplate, "missing"}:     {},
		{newTemplate, e2b.DefaultTag}: {Listed: e2b.TemplateTag{Tag: e2b.DefaultTag, BuildID: waiting}, ListedStatus: e2b.BuildWaiting},
	} {
		got, err := c.ResolveTag(t.Context(), ref[0], ref[1])
		if err != nil {
			t.Fatalf("ResolveTag(%s): %v", ref, err)
		}
		got.Listed.CreatedAt = time.Time{}
		if *got != want {
			t.Errorf("ResolveTag(%s) = %+v, want %+v", ref, *got, want)
		}
	}
}
