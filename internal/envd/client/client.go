// Package client talks to envd, the daemon inside every E2B sandbox: it runs
// one command to completion (Run), uploads files over /files (Upload), and
// wraps the few other calls a build needs (Health, Init, Stat).
// It works against E2B cloud, self-hosted E2B and this project's own envd
// server alike; the wire facts are in design/e2b-api.md "Addressing envd" and "envd protocol".
package client

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/filesystem"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/filesystem/filesystemconnect"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/gen/process/processconnect"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/safehttp"
)

// defaultUserAgent is sent when Config.UserAgent is empty.
const defaultUserAgent = "terraform-provider-e2b-envd-client"

// maxMessageBytes bounds one Connect message read from envd. envd sends
// output in chunks of at most 32 KiB, so this only stops a broken or hostile
// daemon from making the client allocate without bound.
const maxMessageBytes = 4 << 20

// Config says how to reach one sandbox's envd.
type Config struct {
	// BaseURL is an explicit base URL (E2B_SANDBOX_URL, or the local server's
	// sandbox URL). When empty it is derived from Domain.
	BaseURL string
	// Domain is the E2B domain, e.g. "e2b.app": the client then uses the shared
	// host https://sandbox.<domain> and routes with the E2b-Sandbox-Id and
	// E2b-Sandbox-Port headers, as the SDK does by default.
	Domain string
	// SandboxID is sent as E2b-Sandbox-Id (with E2b-Sandbox-Port: 49983) on
	// every request, as the SDK does.
	SandboxID string
	// AccessToken is sent as X-Access-Token on every request when set.
	AccessToken string
	// HTTPClient is optional. Whatever is passed is used through a hardened
	// copy (safehttp.Harden): no redirect to another host or from https to
	// http. The caller's client is not modified.
	HTTPClient *http.Client
	// UserAgent defaults to defaultUserAgent. It must not be connect-python:
	// envd answers that agent in a legacy format.
	UserAgent string
}

// Client is an envd client for one sandbox. It is safe for concurrent use.
type Client struct {
	baseURL    string
	http       *headerClient
	process    processconnect.ProcessClient
	filesystem filesystemconnect.FilesystemClient
}

// New checks cfg and returns a client. It does not contact envd.
func New(cfg Config) (*Client, error) {
	// The sandbox ID ends up in a header, so only E2B's grammar is accepted.
	if cfg.SandboxID != "" {
		if err := e2b.ValidateSandboxID(cfg.SandboxID); err != nil {
			return nil, fmt.Errorf("sandbox ID is not valid: %w", err)
		}
	}
	base, err := baseURL(cfg)
	if err != nil {
		return nil, err
	}
	userAgent := cfg.UserAgent
	if userAgent == "" {
		userAgent = defaultUserAgent
	}
	if strings.Contains(strings.ToLower(userAgent), "connect-python") {
		return nil, fmt.Errorf("user agent %q is not allowed: envd answers connect-python clients in a legacy format", userAgent)
	}
	hc := &headerClient{
		client:      safehttp.Harden(cfg.HTTPClient),
		sandboxID:   cfg.SandboxID,
		accessToken: cfg.AccessToken,
		userAgent:   userAgent,
	}
	opts := []connect.ClientOption{
		connect.WithReadMaxBytes(maxMessageBytes),
		// Like the SDK, do not ask envd to gzip every output chunk: it would
		// spend the sandbox's CPU on it while a build runs there.
		connect.WithAcceptCompression("gzip", nil, nil),
	}
	return &Client{
		baseURL:    base,
		http:       hc,
		process:    processconnect.NewProcessClient(hc, base, opts...),
		filesystem: filesystemconnect.NewFilesystemClient(hc, base, opts...),
	}, nil
}

// baseURL picks the address per design/e2b-api.md "Addressing envd": BaseURL, else the shared sandbox
// host of Domain. Both follow safehttp's rule.
func baseURL(cfg Config) (string, error) {
	if cfg.BaseURL != "" {
		u, err := safehttp.ParseBaseURL("sandbox_url", cfg.BaseURL)
		if err != nil {
			return "", err
		}
		return u.String(), nil
	}
	if cfg.Domain == "" {
		return "", errors.New("envd client needs either a sandbox URL or a domain")
	}
	if err := safehttp.ValidateDomain(cfg.Domain); err != nil {
		return "", err
	}
	return "https://sandbox." + cfg.Domain, nil
}

// headerClient adds the headers every envd request carries (routing, access
// token, user agent) and sends through the hardened http.Client. Connect and
// the plain /files calls both go through it, so no request can miss them.
type headerClient struct {
	client      *http.Client
	sandboxID   string
	accessToken string
	userAgent   string
}

func (h *headerClient) Do(req *http.Request) (*http.Response, error) {
	if h.sandboxID != "" {
		req.Header.Set(envd.HeaderSandboxID, h.sandboxID)
		req.Header.Set(envd.HeaderSandboxPort, fmt.Sprint(envd.Port))
	}
	if h.accessToken != "" {
		req.Header.Set(envd.HeaderAccessToken, h.accessToken)
	}
	req.Header.Set("User-Agent", h.userAgent)
	return h.client.Do(req)
}

// basicAuth is how envd learns the OS user of an RPC: Basic with the user
// name and an empty password.
func basicAuth(user string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"))
}

// newRequest wraps msg in a Connect request carrying the user, if any.
func newRequest[T any](msg *T, user string) *connect.Request[T] {
	req := connect.NewRequest(msg)
	if user != "" {
		req.Header().Set("Authorization", basicAuth(user))
	}
	return req
}

// Stat returns the entry at path as user sees it (Filesystem.Stat). A
// missing path gives an error whose connect.CodeOf is connect.CodeNotFound.
func (c *Client) Stat(ctx context.Context, path, user string) (*filesystem.EntryInfo, error) {
	resp, err := c.filesystem.Stat(ctx, newRequest(&filesystem.StatRequest{Path: path}, user))
	if err != nil {
		return nil, rpcError(fmt.Sprintf("stat %q", path), user, err)
	}
	return resp.Msg.GetEntry(), nil
}
