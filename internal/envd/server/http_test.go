//go:build linux

package server

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	fspb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/filesystem"
	pb "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process"
)

// initEnvd posts body to /init and expects 204 with envd's version.
func initEnvd(t *testing.T, e *testEnvd, body string) {
	t.Helper()
	resp := do(t, http.MethodPost, e.url+"/init", "application/json", strings.NewReader(body), nil)
	if resp.status != http.StatusNoContent || resp.header.Get("X-Envd-Version") != "0.6.13" {
		t.Fatalf("/init answered %d %s %v", resp.status, resp.body, resp.header)
	}
}

// checkInitRefused posts body to /init with token in the header and
// expects envd 0.6.13's refusal: 401 and message as plain text.
func checkInitRefused(t *testing.T, e *testEnvd, body, token, message string) {
	t.Helper()
	r := do(t, http.MethodPost, e.url+"/init", "application/json", strings.NewReader(body), map[string]string{"X-Access-Token": token})
	if r.status != http.StatusUnauthorized || string(r.body) != message ||
		r.header.Get("Content-Type") != "text/plain; charset=utf-8" || r.header.Get("X-Envd-Version") != "0.6.13" {
		t.Errorf("/init %q with token %q = %d %q %v, want 401 %q as text", body, token, r.status, r.body, r.header, message)
	}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, method, url, contentType string, body io.Reader, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// checkError asserts envd's HTTP error envelope.
func checkError(t *testing.T, r response, status int, message string) {
	t.Helper()
	if r.status != status {
		t.Errorf("status %d (%s), want %d", r.status, r.body, status)
		return
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("error Content-Type %q", ct)
	}
	var env struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil || env.Code != status || !strings.Contains(env.Message, message) {
		t.Errorf("error body %s, want code %d and a message containing %q", r.body, status, message)
	}
}

func TestHealthAndEnvs(t *testing.T) {
	e := startEnvd(t, Config{})
	if r := do(t, http.MethodGet, e.url+"/health", "", nil, nil); r.status != http.StatusNoContent {
		t.Errorf("/health = %d", r.status)
	}
	initEnvd(t, e, `{"envVars":{"K":"V"},"timestamp":"2020-01-01T00:00:00Z","caBundle":"x","volumeMounts":[],"hyperloopIP":"10.0.0.1","lifecycleID":"l"}`)
	r := do(t, http.MethodGet, e.url+"/envs", "", nil, nil)
	var env map[string]string
	if err := json.Unmarshal(r.body, &env); err != nil || env["K"] != "V" || env["E2B_SANDBOX"] != "true" {
		t.Errorf("/envs = %d %s", r.status, r.body)
	}
	if time.Now().Year() < 2025 {
		t.Error("/init changed the clock")
	}
}

func TestAccessToken(t *testing.T) {
	// The token check answers 401 on every path (design/e2b-api.md §5.2); the
	// contract declares 401 only for /files, openapitest's allowlist adds it
	// for the rest.
	e := startEnvd(t, Config{})
	initEnvd(t, e, `{"accessToken":"secret"}`)
	const msg = "unauthorized access, please provide a valid access token or method signing if supported"

	// Health stays open.
	if r := do(t, http.MethodGet, e.url+"/health", "", nil, nil); r.status != http.StatusNoContent {
		t.Errorf("/health = %d", r.status)
	}
	checkError(t, do(t, http.MethodGet, e.url+"/envs", "", nil, nil), http.StatusUnauthorized, msg)
	checkError(t, do(t, http.MethodGet, e.url+"/envs", "", nil, map[string]string{"X-Access-Token": "wrong"}), http.StatusUnauthorized, msg)
	if r := do(t, http.MethodGet, e.url+"/envs", "", nil, map[string]string{"X-Access-Token": "secret"}); r.status != http.StatusOK {
		t.Errorf("/envs with the token = %d", r.status)
	}
	// /init reads the token from its body, as envd 0.6.13 does: nobody
	// without it can take the sandbox over, and nobody can rotate it.
	checkInitRefused(t, e, `{"accessToken":"mine"}`, "secret", initTokenMismatch)
	checkInitRefused(t, e, `{}`, "secret", initTokenMissing)
	checkInitRefused(t, e, ``, "", initTokenMissing)
	initEnvd(t, e, `{"accessToken":"secret","envVars":{"K":"V"}}`)
	if r := do(t, http.MethodGet, e.url+"/envs", "", nil, map[string]string{"X-Access-Token": "secret"}); !strings.Contains(string(r.body), `"K":"V"`) {
		t.Errorf("/envs after an /init with the token in its body = %d %s", r.status, r.body)
	}

	// Connect procedures: 401 with the JSON envelope, which clients read as unauthenticated.
	r := do(t, http.MethodPost, e.url+"/process.Process/List", "application/json", strings.NewReader("{}"), nil)
	checkError(t, r, http.StatusUnauthorized, msg)
	_, err := e.process().List(t.Context(), connect.NewRequest(&pb.ListRequest{}))
	if connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("List without token: %v", err)
	}
	req := connect.NewRequest(&pb.ListRequest{})
	req.Header().Set("X-Access-Token", "secret")
	if _, err := e.process().List(t.Context(), req); err != nil {
		t.Errorf("List with token: %v", err)
	}
}

// sign computes a /files signature the way the SDKs do.
func sign(path, op, user, token string, exp int64) string {
	payload := path + ":" + op + ":" + user + ":" + token
	if exp != 0 {
		payload += ":" + strconv.FormatInt(exp, 10)
	}
	sum := sha256.Sum256([]byte(payload))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

func TestFilesAuth(t *testing.T) {
	e := startEnvd(t, Config{})
	initEnvd(t, e, `{"accessToken":"tok"}`)
	path := filepath.Join(t.TempDir(), "f.txt")
	filesURL := func(op, user string, exp int64, sig string) string {
		q := url.Values{"path": {path}}
		if user != "" {
			q.Set("username", user)
		}
		if sig == "" {
			sig = sign(path, op, user, "tok", exp)
		}
		q.Set("signature", sig)
		if exp != 0 {
			q.Set("signature_expiration", strconv.FormatInt(exp, 10))
		}
		return e.url + "/files?" + q.Encode()
	}
	upload := func(u string, header map[string]string) response {
		return do(t, http.MethodPost, u, "application/octet-stream", strings.NewReader("data"), header)
	}
	if r := upload(e.url+"/files?path="+url.QueryEscape(path), nil); r.status != http.StatusUnauthorized {
		t.Errorf("upload without token or signature = %d", r.status)
	}
	if r := upload(e.url+"/files?path="+url.QueryEscape(path), map[string]string{"X-Access-Token": "tok"}); r.status != http.StatusOK {
		t.Errorf("upload with token = %d %s", r.status, r.body)
	}
	future := time.Now().Add(time.Hour).Unix()
	if r := upload(filesURL("write", "root", future, ""), nil); r.status != http.StatusOK {
		t.Errorf("signed upload = %d %s", r.status, r.body)
	}
	if r := do(t, http.MethodGet, filesURL("read", "", 0, ""), "", nil, nil); r.status != http.StatusOK || string(r.body) != "data" {
		t.Errorf("signed download without expiry = %d %q", r.status, r.body)
	}
	for name, u := range map[string]string{
		"read signature used to write": filesURL("read", "", 0, ""),
		"expired":                      filesURL("write", "", time.Now().Add(-time.Minute).Unix(), ""),
		"wrong token":                  filesURL("write", "", 0, sign(path, "write", "", "other", 0)),
		"other user":                   filesURL("write", "root", 0, sign(path, "write", "", "tok", 0)),
	} {
		if r := upload(u, nil); r.status != http.StatusUnauthorized {
			t.Errorf("%s: upload = %d", name, r.status)
		}
	}
}

func TestFilesUploadDownload(t *testing.T) {
	// Range requests answer 206 (§6.4), which the contract does not declare
	// and openapitest's allowlist adds.
	e := startEnvd(t, Config{})
	dir := t.TempDir()

	t.Run("octet-stream creates parents and overwrites", func(t *testing.T) {
		path := filepath.Join(dir, "a", "b", "c.txt")
		for _, content := range []string{"first version", "second"} {
			r := do(t, http.MethodPost, e.url+"/files?path="+url.QueryEscape(path), "application/octet-stream", strings.NewReader(content), nil)
			if r.status != http.StatusOK {
				t.Fatalf("upload = %d %s", r.status, r.body)
			}
			if want := `[{"path":"` + path + `","name":"c.txt","type":"file"}]`; strings.TrimSpace(string(r.body)) != want {
				t.Errorf("upload answer %s", r.body)
			}
			if got, _ := os.ReadFile(path); string(got) != content {
				t.Errorf("file holds %q, want %q", got, content)
			}
		}
		leftovers, _ := filepath.Glob(filepath.Join(dir, "a", "b", ".*"))
		if len(leftovers) != 0 {
			t.Errorf("temporary files left: %v", leftovers)
		}
	})
	t.Run("octet-stream gzip", func(t *testing.T) {
		path := filepath.Join(dir, "gz.txt")
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write([]byte("compressed content"))
		_ = zw.Close()
		r := do(t, http.MethodPost, e.url+"/files?path="+url.QueryEscape(path), "application/octet-stream", &buf, map[string]string{"Content-Encoding": "gzip"})
		if r.status != http.StatusOK {
			t.Fatalf("upload = %d %s", r.status, r.body)
		}
		if got, _ := os.ReadFile(path); string(got) != "compressed content" {
			t.Errorf("file holds %q", got)
		}
		checkError(t, do(t, http.MethodPost, e.url+"/files?path="+url.QueryEscape(path), "application/octet-stream", strings.NewReader("x"), map[string]string{"Content-Encoding": "br"}), http.StatusBadRequest, "unsupported Content-Encoding")
		checkError(t, do(t, http.MethodPost, e.url+"/files", "application/octet-stream", strings.NewReader("x"), nil), http.StatusBadRequest, "path query parameter is required for raw body upload")
	})
	t.Run("multipart with several parts named by filename", func(t *testing.T) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		files := map[string]string{filepath.Join(dir, "m", "one.txt"): "1", filepath.Join(dir, "m", "sub", "two.txt"): "22"}
		for path, content := range files {
			w, _ := mw.CreateFormFile("file", path)
			_, _ = w.Write([]byte(content))
		}
		_ = mw.Close()
		r := do(t, http.MethodPost, e.url+"/files", mw.FormDataContentType(), &buf, nil)
		if r.status != http.StatusOK {
			t.Fatalf("upload = %d %s", r.status, r.body)
		}
		var entries []uploadedEntry
		if err := json.Unmarshal(r.body, &entries); err != nil || len(entries) != 2 {
			t.Errorf("answer %s", r.body)
		}
		for path, content := range files {
			if got, _ := os.ReadFile(path); string(got) != content {
				t.Errorf("%s holds %q, want %q", path, got, content)
			}
		}
	})
	t.Run("multipart with path query", func(t *testing.T) {
		path := filepath.Join(dir, "q.txt")
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		w, _ := mw.CreateFormFile("file", "ignored-name")
		_, _ = w.Write([]byte("via query"))
		_ = mw.Close()
		r := do(t, http.MethodPost, e.url+"/files?path="+url.QueryEscape(path), mw.FormDataContentType(), &buf, nil)
		if got, _ := os.ReadFile(path); r.status != http.StatusOK || string(got) != "via query" {
			t.Errorf("upload = %d %s, file %q", r.status, r.body, got)
		}
	})
	t.Run("download", func(t *testing.T) {
		path := filepath.Join(dir, "dl.txt")
		content := strings.Repeat("download me ", 1000)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		r := do(t, http.MethodGet, e.url+"/files?path="+url.QueryEscape(path), "", nil, map[string]string{"Accept-Encoding": "identity"})
		if r.status != http.StatusOK || string(r.body) != content || r.header.Get("Content-Type") != "text/plain; charset=utf-8" || !strings.Contains(r.header.Get("Content-Disposition"), "dl.txt") {
			t.Errorf("download = %d %v, %d bytes", r.status, r.header, len(r.body))
		}
		r = do(t, http.MethodGet, e.url+"/files?path="+url.QueryEscape(path), "", nil, map[string]string{"Accept-Encoding": "gzip"})
		if r.header.Get("Content-Encoding") != "gzip" || r.header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Fatalf("gzip download: Content-Encoding %q, Content-Type %q", r.header.Get("Content-Encoding"), r.header.Get("Content-Type"))
		}
		zr, err := gzip.NewReader(bytes.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(zr); string(got) != content {
			t.Errorf("gzip download decoded to %d bytes", len(got))
		}
		r = do(t, http.MethodGet, e.url+"/files?path="+url.QueryEscape(path), "", nil, map[string]string{"Range": "bytes=0-7", "Accept-Encoding": "identity"})
		if r.status != http.StatusPartialContent || string(r.body) != "download" {
			t.Errorf("range download = %d %q", r.status, r.body)
		}
		checkError(t, do(t, http.MethodGet, e.url+"/files?path="+url.QueryEscape(path), "", nil, map[string]string{"Accept-Encoding": "br, identity;q=0"}), http.StatusNotAcceptable, "no acceptable encoding")
		checkError(t, do(t, http.MethodGet, e.url+"/files?path="+url.QueryEscape(filepath.Join(dir, "missing")), "", nil, nil), http.StatusNotFound, "does not exist")
		checkError(t, do(t, http.MethodGet, e.url+"/files?path="+url.QueryEscape(dir), "", nil, nil), http.StatusBadRequest, "is a directory")
		checkError(t, do(t, http.MethodGet, e.url+"/files?path="+url.QueryEscape(path)+"&username=nosuchuser", "", nil, nil), http.StatusUnauthorized, "error looking up user 'nosuchuser'")
	})
	t.Run("download typed by extension", func(t *testing.T) {
		for name, want := range map[string][2]string{
			"data.json": {"application/json", "application/json"},
			"page.html": {"text/html; charset=utf-8", "text/html; charset=utf-8"},
			"blob":      {"application/octet-stream", "application/octet-stream"},  // sniffed: binary
			"notes":     {"text/plain; charset=utf-8", "application/octet-stream"}, // sniffed as identity only
		} {
			content := "plain words"
			if name == "blob" {
				content = "\x00\x01\x02binary"
			}
			path := filepath.Join(dir, name)
			mustWrite(t, path, content)
			for i, encoding := range []string{"identity", "gzip"} {
				r := do(t, http.MethodGet, e.url+"/files?path="+url.QueryEscape(path), "", nil, map[string]string{"Accept-Encoding": encoding})
				if got := r.header.Get("Content-Type"); r.status != http.StatusOK || got != want[i] {
					t.Errorf("%s download of %s: %d %q, want %q", encoding, name, r.status, got, want[i])
				}
			}
		}
	})
	t.Run("upload onto a directory", func(t *testing.T) {
		checkError(t, do(t, http.MethodPost, e.url+"/files?path="+url.QueryEscape(dir), "application/octet-stream", strings.NewReader("x"), nil), http.StatusBadRequest, "path is a directory: "+dir)
	})
	t.Run("below a file", func(t *testing.T) {
		file := filepath.Join(dir, "plain")
		if err := os.WriteFile(file, []byte("keep"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, below := range []string{file + "/x", file + "/a/b/x"} {
			checkError(t, do(t, http.MethodPost, e.url+"/files?path="+url.QueryEscape(below), "application/octet-stream", strings.NewReader("x"), nil),
				http.StatusInternalServerError, "error ensuring directories: path is a file: "+file)
		}
		checkError(t, do(t, http.MethodGet, e.url+"/files?path="+url.QueryEscape(file+"/x"), "", nil, nil),
			http.StatusInternalServerError, "error checking if path exists '"+file+"/x'")
		if got, _ := os.ReadFile(file); string(got) != "keep" {
			t.Errorf("the file in the way holds %q", got)
		}
	})
	t.Run("multipart without a file part", func(t *testing.T) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		_ = mw.Close()
		r := do(t, http.MethodPost, e.url+"/files?path="+url.QueryEscape(filepath.Join(dir, "none")), mw.FormDataContentType(), &buf, nil)
		if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != "[]" {
			t.Errorf("upload = %d %s, want 200 []", r.status, r.body)
		}
		if _, err := os.Stat(filepath.Join(dir, "none")); !os.IsNotExist(err) {
			t.Errorf("a file was written: %v", err)
		}
	})
}

func TestFilesOwnership(t *testing.T) {
	u := testUser(t)
	e := startEnvd(t, Config{})
	base := filepath.Join(u.home, fmt.Sprintf("upload-%d", time.Now().UnixNano()))
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	rel, _ := filepath.Rel(u.home, filepath.Join(base, "dir", "f.txt"))
	r := do(t, http.MethodPost, e.url+"/files?username="+u.name+"&path="+url.QueryEscape(rel), "application/octet-stream", strings.NewReader("mine"), nil)
	if r.status != http.StatusOK {
		t.Fatalf("upload = %d %s", r.status, r.body)
	}
	for _, p := range []string{base, filepath.Join(base, "dir"), filepath.Join(base, "dir", "f.txt")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			t.Fatalf("%s: no syscall.Stat_t (%T)", p, fi.Sys())
		}
		if st.Uid != u.uid || st.Gid != u.gid {
			t.Errorf("%s owned by %d:%d, want %d:%d", p, st.Uid, st.Gid, u.uid, u.gid)
		}
	}
	// A relative download path is relative to the user's home too.
	if r := do(t, http.MethodGet, e.url+"/files?username="+u.name+"&path="+url.QueryEscape(rel), "", nil, nil); string(r.body) != "mine" {
		t.Errorf("download as the user = %d %q", r.status, r.body)
	}
}

func TestPanicInHandlerIsContained(t *testing.T) {
	// A stand-in handler that panics: fault injection for the recovery
	// every plain HTTP handler runs under.
	s := New(Config{Logger: slog.New(slog.DiscardHandler)})
	h := s.recoverPanics(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/files", nil))
	checkError(t, response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}, http.StatusInternalServerError, "internal error")
}

func TestCORS(t *testing.T) {
	// What a browser page running the JS SDK sends: preflights (which the
	// contract does not describe, so unchecked) answered before the token
	// check, and actual answers readable from any origin.
	e := startUncheckedEnvd(t)
	initEnvd(t, e, `{"accessToken":"tok"}`)
	preflight := func(method, headers string) response {
		h := map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": method, "Access-Control-Request-Headers": headers}
		return do(t, http.MethodOptions, e.url+"/filesystem.Filesystem/ListDir", "", nil, h)
	}
	r := preflight("POST", "authorization,connect-protocol-version,content-type,x-access-token")
	for name, want := range map[string]string{
		"Access-Control-Allow-Origin":  "*",
		"Access-Control-Allow-Methods": "POST",
		"Access-Control-Allow-Headers": "authorization,connect-protocol-version,content-type,x-access-token",
		"Access-Control-Max-Age":       "7200",
		"Vary":                         "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
	} {
		if got := r.header.Get(name); got != want {
			t.Errorf("preflight %s: %q, want %q", name, got, want)
		}
	}
	if r.status != http.StatusNoContent || len(r.body) != 0 {
		t.Errorf("preflight = %d %q, want 204 without a body", r.status, r.body)
	}
	if r := preflight("TRACE", ""); r.status != http.StatusNoContent || r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of TRACE = %d %v, want 204 without Allow headers", r.status, r.header)
	}

	r = do(t, http.MethodGet, e.url+"/envs", "", nil, map[string]string{"Origin": "https://app.example", "X-Access-Token": "tok"})
	if r.status != http.StatusOK || r.header.Get("Access-Control-Allow-Origin") != "*" ||
		r.header.Get("Access-Control-Expose-Headers") != "Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin, Location, Cache-Control, X-Content-Type-Options" {
		t.Errorf("GET /envs from a page = %d %v", r.status, r.header)
	}
	// Refusals are readable too, or the page could not tell why.
	r = do(t, http.MethodGet, e.url+"/envs", "", nil, map[string]string{"Origin": "https://app.example"})
	if r.status != http.StatusUnauthorized || r.header.Get("Access-Control-Allow-Origin") != "*" || r.header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("refused GET /envs from a page = %d %v", r.status, r.header)
	}
	if r := do(t, http.MethodGet, e.url+"/health", "", nil, nil); r.header.Get("Access-Control-Allow-Origin") != "" || r.header.Get("Vary") != "Origin" {
		t.Errorf("GET /health without Origin: %v", r.header)
	}
}

func TestNoStoreAndMetrics(t *testing.T) {
	e := startEnvd(t, Config{})
	for _, r := range []response{
		do(t, http.MethodGet, e.url+"/health", "", nil, nil),
		do(t, http.MethodGet, e.url+"/envs", "", nil, nil),
		do(t, http.MethodGet, e.url+"/metrics", "", nil, nil),
		do(t, http.MethodPost, e.url+"/init", "application/json", strings.NewReader(`{}`), nil),
	} {
		if r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("answer %d without Cache-Control: no-store: %v", r.status, r.header)
		}
	}
	r := do(t, http.MethodGet, e.url+"/metrics", "", nil, nil)
	var m metrics
	if err := json.Unmarshal(r.body, &m); r.status != http.StatusOK || err != nil {
		t.Fatalf("/metrics = %d %s", r.status, r.body)
	}
	if m.CPUCount == 0 || m.MemTotal == 0 || m.MemUsed == 0 || m.MemUsed > m.MemTotal || m.MemTotalMiB != m.MemTotal>>20 ||
		m.DiskTotal == 0 || m.DiskUsed > m.DiskTotal || m.CPUUsedPercent < 0 || m.CPUUsedPercent > 100 || time.Since(time.Unix(m.Timestamp, 0)) > time.Hour {
		t.Errorf("/metrics = %s", r.body)
	}
}

func TestFilesAuthAsEnvd(t *testing.T) {
	e := startEnvd(t, Config{})
	initEnvd(t, e, `{"accessToken":"tok"}`)
	path := filepath.Join(t.TempDir(), "f.txt")
	mustWrite(t, path, "data")
	signed := func(exp int64) string {
		q := url.Values{"path": {path}, "signature": {sign(path, "read", "", "tok", exp)}}
		if exp != 0 {
			q.Set("signature_expiration", strconv.FormatInt(exp, 10))
		}
		return e.url + "/files?" + q.Encode()
	}
	if r := do(t, http.MethodGet, signed(0), "", nil, nil); r.status != http.StatusOK {
		t.Fatalf("signed download = %d %s", r.status, r.body)
	}
	// A token that is sent must be right, even beside a valid signature.
	checkError(t, do(t, http.MethodGet, signed(0), "", nil, map[string]string{"X-Access-Token": "wrong"}), http.StatusUnauthorized, "access token present in header but does not match")
	checkError(t, do(t, http.MethodGet, e.url+"/files?path="+url.QueryEscape(path), "", nil, nil), http.StatusUnauthorized, "missing signature query parameter")
	checkError(t, do(t, http.MethodGet, e.url+"/files?signature=v1_x&path="+url.QueryEscape(path), "", nil, nil), http.StatusUnauthorized, "invalid signature")
	checkError(t, do(t, http.MethodGet, signed(time.Now().Add(-time.Minute).Unix()), "", nil, nil), http.StatusUnauthorized, "signature is already expired")

	// Authorization: Basic naming no user is refused on every path, before
	// the files' own checks, as Connect's error JSON (envd's authn
	// middleware), which the contract's error envelope is not: unchecked.
	e = startUncheckedEnvd(t)
	initEnvd(t, e, `{"accessToken":"tok"}`)
	for _, target := range []string{signed(0), e.url + "/files?path=" + url.QueryEscape(path)} {
		r := do(t, http.MethodGet, target, "", nil, map[string]string{"Authorization": basicUser("nosuchuser"), "X-Access-Token": "tok"})
		if r.status != http.StatusUnauthorized || r.header.Get("Content-Type") != "application/json" || string(r.body) != `{"code":"unauthenticated","message":"invalid username: 'nosuchuser'"}` {
			t.Errorf("download as an unknown Basic user = %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
		}
	}
	if r := do(t, http.MethodGet, signed(0), "", nil, map[string]string{"Authorization": basicUser("root")}); r.status != http.StatusOK {
		t.Errorf("download as a known Basic user = %d %s", r.status, r.body)
	}
}

func TestFilesMetadata(t *testing.T) {
	e := startEnvd(t, Config{})
	dir := t.TempDir()
	path := filepath.Join(dir, "m.txt")
	upload := func(header map[string]string) response {
		return do(t, http.MethodPost, e.url+"/files?path="+url.QueryEscape(path), "application/octet-stream", strings.NewReader("x"), header)
	}
	stat := func() map[string]string {
		resp, err := e.filesystem().Stat(t.Context(), connect.NewRequest(&fspb.StatRequest{Path: path}))
		if err != nil {
			t.Fatalf("Stat: %v", err)
		}
		return resp.Msg.GetEntry().GetMetadata()
	}
	r := upload(map[string]string{"X-Metadata-Owner-Team": "Data Science", "X-Metadata-v": "1"})
	want := map[string]string{"owner-team": "Data Science", "v": "1"}
	var entries []struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(r.body, &entries); r.status != http.StatusOK || err != nil || len(entries) != 1 || !maps.Equal(entries[0].Metadata, want) {
		t.Errorf("upload with metadata = %d %s", r.status, r.body)
	}
	if got := stat(); !maps.Equal(got, want) {
		t.Errorf("Stat metadata %v, want %v", got, want)
	}
	if value, err := xattrGet(path, "user.e2b.owner-team"); err != nil || string(value) != "Data Science" {
		t.Errorf("xattr user.e2b.owner-team = %q, %v", value, err)
	}
	// Another upload replaces the metadata; none clears it.
	upload(map[string]string{"X-Metadata-V": "2"})
	if got := stat(); !maps.Equal(got, map[string]string{"v": "2"}) {
		t.Errorf("metadata after a second upload %v", got)
	}
	if r := upload(nil); strings.Contains(string(r.body), "metadata") || stat() != nil {
		t.Errorf("an upload without metadata left %v (%s)", stat(), r.body)
	}
	checkError(t, upload(map[string]string{"X-Metadata-K": "caf\u00e9"}), http.StatusBadRequest, "invalid metadata: metadata value for key \"k\" contains non-printable-ASCII byte 0xc3 at offset 3")
	checkError(t, upload(map[string]string{"X-Metadata-Big": strings.Repeat("v", 4096)}), http.StatusBadRequest, "invalid metadata: total metadata size")
	if got, _ := os.ReadFile(path); string(got) != "x" || stat() != nil {
		t.Errorf("a refused upload changed the file: %q %v", got, stat())
	}
}

// TestContentTypesAsEnvd checks the Content-Type of each HTTP answer as
// envd sets it: none on /health (sent empty), application/json on /envs and
// /metrics, the charset on error answers, and text/plain for an upload's
// JSON answer, which envd leaves to net/http's sniffing.
func TestContentTypesAsEnvd(t *testing.T) {
	e := startEnvd(t, Config{})
	if r := do(t, http.MethodGet, e.url+"/health", "", nil, nil); r.status != http.StatusNoContent || !slices.Equal(r.header.Values("Content-Type"), []string{""}) {
		t.Errorf("/health = %d with Content-Type %q, want 204 with an empty one", r.status, r.header.Values("Content-Type"))
	}
	for _, path := range []string{"/envs", "/metrics"} {
		if r := do(t, http.MethodGet, e.url+path, "", nil, nil); r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s = %d with Content-Type %q, want application/json", path, r.status, r.header.Get("Content-Type"))
		}
	}
	path := filepath.Join(t.TempDir(), "f.txt")
	r := do(t, http.MethodPost, e.url+"/files?path="+url.QueryEscape(path), "application/octet-stream", strings.NewReader("x"), nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "text/plain; charset=utf-8" || !json.Valid(r.body) {
		t.Errorf("upload = %d with Content-Type %q and body %s, want 200 text/plain; charset=utf-8 and JSON", r.status, r.header.Get("Content-Type"), r.body)
	}
	// Without a path: the user's home, a directory; an octet-stream upload
	// needs one (checkError checks the error's Content-Type).
	home, err := lookupUser("root")
	if err != nil {
		t.Fatal(err)
	}
	checkError(t, do(t, http.MethodGet, e.url+"/files", "", nil, nil), http.StatusBadRequest, "path '"+home.home+"' is a directory")
	checkError(t, do(t, http.MethodPost, e.url+"/files", "application/octet-stream", strings.NewReader("x"), nil), http.StatusBadRequest, "path query parameter is required for raw body upload")
	checkError(t, do(t, http.MethodGet, e.url+"/files?path="+url.QueryEscape("~nobody/x"), "", nil, nil), http.StatusBadRequest,
		"error expanding and resolving path '~nobody/x': failed to expand path '~nobody/x' for user 'root': cannot expand user-specific home dir")
}
