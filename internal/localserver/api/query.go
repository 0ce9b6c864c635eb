package api

import (
	"net/http"
	"strconv"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
)

// The query parameters of the list and log endpoints, and their pages.
// Bad values are 400 answers.

// pageLimit reads the paging limit (1..100, default 100).
func pageLimit(r *http.Request) (int, error) {
	raw := r.URL.Query().Get("limit")
	if raw == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > 100 {
		return 0, failure.New(failure.Invalid, "limit %q must be a number from 1 to 100", raw)
	}
	return n, nil
}

// paginate returns the page of at most limit items after the item whose key
// is token (from the start when token is empty or unknown), and the token of
// the next page ("" on the last page).
func paginate[T any](items []T, limit int, token string, key func(T) string) ([]T, string) {
	start := 0
	if token != "" {
		for i, it := range items {
			if key(it) == token {
				start = i + 1
				break
			}
		}
	}
	end := min(start+limit, len(items))
	page := items[start:end]
	if end < len(items) && len(page) > 0 {
		return page, key(page[len(page)-1])
	}
	return page, ""
}

// queryLevel reads the optional level parameter.
func queryLevel(r *http.Request) (string, error) {
	level := r.URL.Query().Get("level")
	switch level {
	case "", e2b.LogDebug, e2b.LogInfo, e2b.LogWarn, e2b.LogError:
		return level, nil
	}
	return "", failure.New(failure.Invalid, "level %q must be one of debug, info, warn, error", level)
}

// queryInt reads an optional non-negative integer parameter.
func queryInt(r *http.Request, name string, def int64) (int64, error) {
	raw := r.URL.Query().Get(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, failure.New(failure.Invalid, "%s %q must be a non-negative integer", name, raw)
	}
	return n, nil
}

// queryDirection reads the optional direction parameter of the logs
// endpoints, def when absent.
func queryDirection(r *http.Request, def string) (string, error) {
	switch direction := r.URL.Query().Get("direction"); direction {
	case "":
		return def, nil
	case "forward", "backward":
		return direction, nil
	default:
		return "", failure.New(failure.Invalid, "direction %q must be forward or backward", direction)
	}
}
