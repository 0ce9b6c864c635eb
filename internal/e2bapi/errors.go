package e2bapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"io"
	"net/http"
	"strings"
)

// APIError is an answer outside 2xx. Code, Message and ErrorCode come from
// the {code, message, error_code} envelope when the body carries one; a body
// that is not the envelope becomes Message (shortened), an empty body leaves
// it empty: callers key off StatusCode.
type APIError struct {
	StatusCode int
	Code       int
	Message    string
	ErrorCode  string
	Method     string
	// Path is the request path without the query.
	Path string
	// service names who answered in Error(): the E2B API, or the storage
	// an archive was uploaded to.
	service string
}

func (e *APIError) Error() string {
	var b strings.Builder
	service := e.service
	if service == "" {
		service = "E2B API"
	}
	fmt.Fprintf(&b, "%s %s %s answered %d %s", service, e.Method, e.Path, e.StatusCode, http.StatusText(e.StatusCode))
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	} else {
		b.WriteString(" with no error message")
	}
	if e.ErrorCode != "" {
		fmt.Fprintf(&b, " (%s)", e.ErrorCode)
	}
	return b.String()
}

// maxErrorMessage bounds the text kept from a body that is not the envelope.
const maxErrorMessage = 512

func (c *Client) apiError(ctx context.Context, method, path string, resp *http.Response) *APIError {
	e := &APIError{StatusCode: resp.StatusCode, Method: method, Path: path}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var envelope e2b.Error
	if err := json.Unmarshal(data, &envelope); err == nil && (envelope.Message != "" || envelope.Code != 0) {
		e.Code, e.Message, e.ErrorCode = envelope.Code, envelope.Message, envelope.ErrorCode
	} else if text := strings.TrimSpace(string(data)); text != "" {
		if len(text) > maxErrorMessage {
			text = text[:maxErrorMessage] + "…"
		}
		e.Message = text
	}
	e.Message = c.redact(ctx, e.Message)
	return e
}

// Callers tell answers apart by status code: IsNotFound, IsInvalid and
// IsBuildGone are the questions this provider asks; anything else is read
// from APIError.StatusCode.

func statusIs(err error, status int) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.StatusCode == status
}

// IsNotFound reports whether err is a 404 answer.
func IsNotFound(err error) bool { return statusIs(err, http.StatusNotFound) }

// IsInvalid reports whether err is a 400 answer.
func IsInvalid(err error) bool { return statusIs(err, http.StatusBadRequest) }

// IsBuildGone reports whether err says a build (or its template) does not exist: E2B
// answers an unknown build with 400 and a "not found" message, not 404.
func IsBuildGone(err error) bool {
	if IsNotFound(err) {
		return true
	}
	var apiErr *APIError
	return IsInvalid(err) && errors.As(err, &apiErr) && strings.Contains(strings.ToLower(apiErr.Message), "not found")
}
