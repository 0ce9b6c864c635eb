package api

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
)

// answer writes body with status, or returns err, the failure that is the
// answer instead: the end of most handlers.
func answer(w http.ResponseWriter, status int, body any, err error) error {
	if err != nil {
		return err
	}
	writeJSON(w, status, body)
	return nil
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	// The status is sent: a failed write (the client went away) cannot be
	// answered any more.
	_ = json.NewEncoder(w).Encode(body)
}

const maxJSONBody = 8 << 20

// decodeBody decodes the JSON body into v; an empty body leaves v as it is
// when allowEmpty. Its failures are 400 answers.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) error {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
	if err != nil {
		return failure.New(failure.Invalid, "read request body: %v", err)
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		if allowEmpty {
			return nil
		}
		return failure.New(failure.Invalid, "request body is empty; a JSON object is required")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return failure.New(failure.Invalid, "invalid request body: %v", err)
	}
	return nil
}
