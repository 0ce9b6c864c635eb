package client

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// InitRequest is the body of POST /init, which the orchestrator (here: the
// local server) sends once to a fresh sandbox.
type InitRequest struct {
	// EnvVars replace the sandbox-wide environment of later processes.
	EnvVars map[string]string `json:"envVars,omitempty"`
	// AccessToken becomes the token envd requires from then on. Create the
	// client with the same Config.AccessToken so later calls carry it.
	AccessToken    string `json:"accessToken,omitempty"`
	DefaultUser    string `json:"defaultUser,omitempty"`
	DefaultWorkdir string `json:"defaultWorkdir,omitempty"`
}

// Health checks GET /health (envd answers 204).
func (c *Client) Health(ctx context.Context) error {
	resp, err := c.send(ctx, "envd health check", http.MethodGet, "/health", nil, nil, "")
	if err != nil {
		return err
	}
	return discard(resp)
}

// Init sends POST /init.
func (c *Client) Init(ctx context.Context, req InitRequest) error {
	body, err := json.Marshal(req) //nolint:gosec // the access token is what /init is for: envd requires it from then on
	if err != nil {
		return fmt.Errorf("encoding envd init request: %w", err)
	}
	resp, err := c.send(ctx, "envd init", http.MethodPost, "/init", nil, bytes.NewReader(body), "application/json")
	if err != nil {
		return err
	}
	return discard(resp)
}

// Upload streams body to path in the sandbox (POST /files with an
// application/octet-stream body, envd 0.5.7+), owned by user (empty: envd's
// default user). envd creates missing parent directories and overwrites an
// existing file. body is read as it is sent, never held in memory whole, and
// is not closed.
func (c *Client) Upload(ctx context.Context, path, user string, body io.Reader) error {
	if path == "" {
		return errors.New("upload needs a destination path in the sandbox")
	}
	op := fmt.Sprintf("upload to %q", path)
	// NopCloser: the transport closes a request body that is a Closer, and
	// body belongs to the caller.
	resp, err := c.send(ctx, op, http.MethodPost, "/files", fileQuery(path, user), io.NopCloser(body), "application/octet-stream")
	if err != nil {
		return err
	}
	return discard(resp)
}

// ReadFile downloads a file of at most limit bytes (GET /files) as user
// (empty: envd's default user); a longer file is an error. It asks for
// gzip, which envd streams: its identity answer seeks to the end, which
// gVisor's /proc files refuse.
func (c *Client) ReadFile(ctx context.Context, path, user string, limit int64) ([]byte, error) {
	op := fmt.Sprintf("download %q", path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.baseURL+"/files?"+fileQuery(path, user).Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := c.do(op, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body := io.Reader(resp.Body)
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		body = zr
	}
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w", op, err)
	case int64(len(data)) > limit:
		return nil, fmt.Errorf("%s: the file is longer than %d bytes", op, limit)
	}
	return data, nil
}

func fileQuery(path, user string) url.Values {
	q := url.Values{"path": {path}}
	if user != "" {
		q.Set("username", user)
	}
	return q
}

// send makes one plain HTTP call and turns any non-2xx answer into an
// *HTTPError. On success the caller owns resp.Body.
func (c *Client) send(ctx context.Context, op, method, path string, query url.Values, body io.Reader, contentType string) (*http.Response, error) {
	target := c.baseURL + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return c.do(op, req)
}

// do sends req and turns any non-2xx answer into an *HTTPError. On success
// the caller owns resp.Body.
func (c *Client) do(op string, req *http.Request) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		return nil, &HTTPError{Op: op, StatusCode: resp.StatusCode, Message: errorMessage(resp.Body)}
	}
	return resp, nil
}

// errorMessage reads envd's {"code","message"} error body; any other body is
// quoted as text.
func errorMessage(body io.Reader) string {
	raw, _ := io.ReadAll(io.LimitReader(body, maxErrorBody))
	var envelope struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &envelope) == nil && envelope.Message != "" {
		return envelope.Message
	}
	return strings.TrimSpace(string(raw))
}

// discard reads a small success body to its end so the connection can be
// reused, and closes it.
func discard(resp *http.Response) error {
	defer resp.Body.Close()
	_, err := io.Copy(io.Discard, io.LimitReader(resp.Body, maxErrorBody))
	return err
}
