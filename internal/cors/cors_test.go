package cors

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A preflight may name its headers in any case, with spaces, over several
// header lines.
func TestRequestsHeader(t *testing.T) {
	r := httptest.NewRequest(http.MethodOptions, "/", nil)
	r.Header.Add("Access-Control-Request-Headers", "content-type, X-Access-Token")
	r.Header.Add("Access-Control-Request-Headers", " E2B-Sandbox-ID ,e2b-sandbox-port")
	for name, want := range map[string]bool{
		"e2b-sandbox-id": true, "E2b-Sandbox-Port": true, "x-access-token": true,
		"e2b-sandbox": false, "authorization": false,
	} {
		if got := RequestsHeader(r, name); got != want {
			t.Errorf("RequestsHeader(%q) = %v, want %v", name, got, want)
		}
	}
}

// Handler answers preflights itself and passes everything else on, marked.
func TestHandler(t *testing.T) {
	p := Policy{AllowHeaders: []string{"X-API-Key", "lang"}, ExposeHeaders: []string{"X-Next-Token"}, MaxAge: 90 * time.Second}
	reached := 0
	h := p.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached++
		w.WriteHeader(http.StatusTeapot)
	}))
	serve := func(method string, header ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "/x", nil)
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := serve(http.MethodOptions, "Origin", "https://a.example", "Access-Control-Request-Method", "PATCH", "Access-Control-Request-Headers", "x-other")
	if w.Code != http.StatusNoContent || reached != 0 || w.Header().Get("Access-Control-Allow-Headers") != "X-API-Key, lang" ||
		w.Header().Get("Access-Control-Allow-Methods") != "PATCH" || w.Header().Get("Access-Control-Max-Age") != "90" {
		t.Errorf("preflight = %d %v (next reached %d times)", w.Code, w.Header(), reached)
	}
	// An OPTIONS request that is no preflight is the handler's.
	if w := serve(http.MethodOptions, "Origin", "https://a.example"); w.Code != http.StatusTeapot || w.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("plain OPTIONS = %d %v", w.Code, w.Header())
	}
	if w := serve("TRACE", "Origin", "https://a.example"); w.Code != http.StatusTeapot || w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("TRACE from a page = %d %v, want no CORS headers", w.Code, w.Header())
	}
}
