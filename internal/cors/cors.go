// Package cors answers cross-origin requests from browser pages, so that the
// JS SDK works from a page against envd and the local server. Every server
// answers the same way (any origin, the methods below, preflights before any
// credential check) and differs only in its Policy. It imports nothing of
// this module.
package cors

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Policy is what one server allows and exposes.
type Policy struct {
	// AllowHeaders is answered to every preflight; nil allows whatever
	// request headers the preflight names (rs/cors's "*").
	AllowHeaders []string
	// ExposeHeaders are the response headers a page may read.
	ExposeHeaders []string
	// MaxAge is how long a browser may cache a preflight's answer.
	MaxAge time.Duration
}

// Methods a page may use, the same for every server (gin-contrib/cors's
// defaults; rs/cors allows OPTIONS implicitly).
var methods = []string{http.MethodHead, http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

const preflightVary = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"

// IsPreflight reports whether r is a browser's preflight: an OPTIONS request
// naming the method it asks about.
func IsPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

// RequestsHeader reports whether preflight r asks to send header name.
func RequestsHeader(r *http.Request, name string) bool {
	for _, v := range r.Header.Values("Access-Control-Request-Headers") {
		for h := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(h), name) {
				return true
			}
		}
	}
	return false
}

// Preflight answers preflight r (see IsPreflight) with 204: with the Allow
// headers when it comes from a page (has an Origin) and asks for an allowed
// method, with none otherwise.
func (p Policy) Preflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Add("Vary", preflightVary)
	if method := r.Header.Get("Access-Control-Request-Method"); r.Header.Get("Origin") != "" && slices.Contains(methods, method) {
		h.Set("Access-Control-Allow-Origin", "*")
		h.Set("Access-Control-Allow-Methods", method)
		switch requested := r.Header.Values("Access-Control-Request-Headers"); {
		case p.AllowHeaders != nil:
			h.Set("Access-Control-Allow-Headers", strings.Join(p.AllowHeaders, ", "))
		case len(requested) > 0 && requested[0] != "":
			h["Access-Control-Allow-Headers"] = requested
		}
		h.Set("Access-Control-Max-Age", strconv.Itoa(int(p.MaxAge/time.Second)))
	}
	w.WriteHeader(http.StatusNoContent)
}

// Handler answers preflights itself, before next sees them (and so before
// any credential check), and marks every other answer from a page as
// readable from any origin.
func (p Policy) Handler(next http.Handler) http.Handler {
	exposed := strings.Join(p.ExposeHeaders, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsPreflight(r) {
			p.Preflight(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		if r.Header.Get("Origin") != "" && slices.Contains(methods, r.Method) {
			h.Set("Access-Control-Allow-Origin", "*")
			if exposed != "" {
				h.Set("Access-Control-Expose-Headers", exposed)
			}
		}
		next.ServeHTTP(w, r)
	})
}
