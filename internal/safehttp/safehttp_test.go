package safehttp

import (
	"errors"
	"net/http"
	"net/http/httptest"
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
	} {
		u, err := ParseBaseURL("api_url", tc.raw)
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
