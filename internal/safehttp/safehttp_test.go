package safehttp

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestParseBaseURL(t *testing.T) {
	for _, tc := range []struct {
		raw     string
		want    string
		wantErr string
	}{
		{raw: "https://api.e2b.app", want: "https://api.e2b.app"},
		{raw: "https://api.e2b.app/", want: "https://api.e2b.app"},
		{raw: "http://127.0.0.1:3000", want: "http://127.0.0.1:3000"},
		{raw: "http://[::1]:3000/base/", want: "http://[::1]:3000/base"},
		{raw: "http://localhost:49983", want: "http://localhost:49983"},
		{raw: "http://sandbox.localhost:8080", want: "http://sandbox.localhost:8080"},
		{raw: "http://api.e2b.app", wantErr: "clear text"},
		{raw: "http://10.0.0.1:3000", wantErr: "clear text"},
		{raw: "ftp://api.e2b.app", wantErr: "must use https://"},
		{raw: "api.e2b.app", wantErr: "no host"},
		{raw: "https://user:pw@api.e2b.app", wantErr: "user information"},
		{raw: "https://%zz", wantErr: "not a valid URL"},
		{raw: "http://api.localhost:3000", want: "http://api.localhost:3000"},
		{raw: "http://LOCALHOST.:3000", want: "http://LOCALHOST.:3000"},
		{raw: "http://localhost.example.com", wantErr: "clear text"},
		{raw: "http://[::2]:3000", wantErr: "clear text"},
		{raw: "https://api.e2b.app?team=x", wantErr: "query or fragment"},
		{raw: "https://api.e2b.app/?", wantErr: "query or fragment"},
		{raw: "https://api.e2b.app#top", wantErr: "query or fragment"},
		{raw: "https://me:hunter2@api.e2b.app", wantErr: "REDACTED"},
		{raw: "/relative/path", wantErr: "absolute URL"},
	} {
		u, err := ParseBaseURL("api_url", tc.raw)
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseBaseURL(%q) error repeats the password: %v", tc.raw, err)
		}
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "api_url") {
				t.Errorf("ParseBaseURL(%q) error = %v, want one naming api_url and containing %q", tc.raw, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseBaseURL(%q): %v", tc.raw, err)
			continue
		}
		if u.String() != tc.want {
			t.Errorf("ParseBaseURL(%q) = %q, want %q", tc.raw, u, tc.want)
		}
	}
}

func TestIsLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LocalHost": true, "localhost.": true, "api.localhost": true, "a.b.localhost": true,
		"127.0.0.1": true, "127.1.2.3": true, "::1": true, "[::1]": true,
		"": false, "localhost.example.com": false, "notlocalhost": false, "10.0.0.1": false, "::2": false, "e2b.app": false,
	} {
		if got := IsLoopbackHost(host); got != want {
			t.Errorf("IsLoopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestValidateDomain(t *testing.T) {
	for domain, wantErr := range map[string]string{
		"e2b.app": "", "my-team.e2b.dev": "", "localhost": "", "a_b.example": "", "E2B.APP": "",
		"":                "empty",
		"https://e2b.app": "bare DNS name",
		"e2b.app/x":       "bare DNS name",
		"localhost:3000":  "without scheme, port or path",
		"user@e2b.app":    "bare DNS name",
		"e2b.app?x":       "bare DNS name",
		"e2b..app":        "bare DNS name",
		".e2b.app":        "bare DNS name",
		"e2b.app.":        "bare DNS name",
		"[::1]":           "bare DNS name",
		"e2b app":         "bare DNS name",
	} {
		err := ValidateDomain(domain)
		if wantErr == "" {
			if err != nil {
				t.Errorf("ValidateDomain(%q): %v", domain, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ValidateDomain(%q) = %v, want an error containing %q", domain, err, wantErr)
		}
	}
}

// A localhost name reaches loopback whatever the resolver says: the hardened client
// never asks it.
func TestHardenDialsLocalhostNamesOnLoopback(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := Harden(nil).Get("http://api.e2b-test.localhost:" + u.Port() + "/")
	if err != nil {
		t.Fatalf("GET through a .localhost name: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("status %d, want 204 from the loopback server", resp.StatusCode)
	}
}

func TestHardenRefusesRedirectToAnotherHost(t *testing.T) {
	var leaked http.Header
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked = r.Header.Clone()
	}))
	defer other.Close()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// 127.0.0.1 and localhost are different hosts to a redirect policy.
		http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1), http.StatusFound)
	}))
	defer origin.Close()

	req, _ := http.NewRequest(http.MethodGet, origin.URL, nil)
	req.Header.Set("X-API-Key", "e2b_secret")
	_, err := Harden(nil).Do(req)
	if !errors.Is(err, ErrUnsafeRedirect) {
		t.Fatalf("Do() error = %v, want ErrUnsafeRedirect", err)
	}
	if leaked != nil {
		t.Fatalf("the other host was contacted with headers %v", leaked)
	}
}

func TestHardenFollowsSameHostRedirectAndKeepsOwnPolicy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" {
			http.Redirect(w, r, "/new", http.StatusMovedPermanently)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	resp, err := Harden(srv.Client()).Get(srv.URL + "/old")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("status = %d, want 204 after a same-host redirect", resp.StatusCode)
	}

	errOwn := errors.New("caller policy")
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return errOwn }}
	if _, err := Harden(c).Get(srv.URL + "/old"); !errors.Is(err, errOwn) {
		t.Fatalf("Do() error = %v, want the caller's own policy to run too", err)
	}
	if c.CheckRedirect == nil {
		t.Fatal("Harden changed the caller's client")
	}
}

func TestCheckRedirectRefusesDowngrade(t *testing.T) {
	first, _ := http.NewRequest(http.MethodGet, "https://api.e2b.app/templates", nil)
	next, _ := http.NewRequest(http.MethodGet, "http://api.e2b.app/templates", nil)
	if err := CheckRedirect(next, []*http.Request{first}); !errors.Is(err, ErrUnsafeRedirect) {
		t.Fatalf("CheckRedirect() = %v, want ErrUnsafeRedirect for https to http", err)
	}
}
