package server

import (
	"net/http"
	"slices"
)

// CORS as envd answers it (rs/cors with its main.go's options: any origin,
// any header, these methods, connect-go's headers exposed, 2 h preflight
// cache), so that the JS SDK works from a browser page (design/envd.md).
const (
	corsExposedHeaders = "Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin, Location, Cache-Control, X-Content-Type-Options"
	corsMaxAge         = "7200"
	corsPreflightVary  = "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"
)

var corsMethods = []string{http.MethodHead, http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// withCORS answers preflights itself (204, before any credential check) and
// marks every other answer as readable from any origin.
func withCORS(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		origin := r.Header.Get("Origin")
		if method := r.Header.Get("Access-Control-Request-Method"); r.Method == http.MethodOptions && method != "" {
			h.Add("Vary", corsPreflightVary)
			if origin != "" && slices.Contains(corsMethods, method) {
				h.Set("Access-Control-Allow-Origin", "*")
				h.Set("Access-Control-Allow-Methods", method)
				if requested := r.Header.Values("Access-Control-Request-Headers"); len(requested) > 0 && requested[0] != "" {
					h["Access-Control-Allow-Headers"] = requested
				}
				h.Set("Access-Control-Max-Age", corsMaxAge)
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		h.Add("Vary", "Origin")
		if origin != "" && slices.Contains(corsMethods, r.Method) {
			h.Set("Access-Control-Allow-Origin", "*")
			h.Set("Access-Control-Expose-Headers", corsExposedHeaders)
		}
		next.ServeHTTP(w, r)
	})
}
