package e2bapi

import (
	"context"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"net/http"
)

// defaultSandboxTimeout is the lifetime POST /v2/sandboxes gives a sandbox
// when none is asked for; the v1 endpoint's own default is 15 s, so the
// fallback sends it explicitly.
const defaultSandboxTimeout int32 = 300

// CreateSandbox starts a sandbox with POST /v2/sandboxes (201); Secure is
// not sent there (v2 sandboxes are always secured). A server that answers
// 404 is asked POST /sandboxes with secure: true and, unless set, the v2
// default timeout. When that answer is not a 404 too, the server has no v2
// endpoint and the client goes straight to v1 from then on; two 404s mean
// the template was not found.
func (c *Client) CreateSandbox(ctx context.Context, req e2b.NewSandbox) (*e2b.Sandbox, error) {
	if !c.sandboxV1.Load() {
		v2 := req
		v2.Secure = nil
		var out e2b.Sandbox
		err := c.call(ctx, http.MethodPost, "/v2/sandboxes", nil, v2, &out)
		if err == nil {
			return &out, nil
		}
		if !IsNotFound(err) {
			return nil, err
		}
		sandbox, err := c.createSandboxV1(ctx, req)
		if !IsNotFound(err) {
			c.sandboxV1.Store(true)
			c.log(ctx, c.logger.Info, "the E2B API has no POST /v2/sandboxes; using POST /sandboxes", map[string]any{"url": c.base.String()})
		}
		return sandbox, err
	}
	return c.createSandboxV1(ctx, req)
}

func (c *Client) createSandboxV1(ctx context.Context, req e2b.NewSandbox) (*e2b.Sandbox, error) {
	secure := true
	req.Secure = &secure
	if req.Timeout == nil {
		timeout := defaultSandboxTimeout
		req.Timeout = &timeout
	}
	var out e2b.Sandbox
	if err := c.call(ctx, http.MethodPost, "/sandboxes", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func sandboxPath(sandboxID string) (string, error) {
	if err := e2b.ValidateSandboxID(sandboxID); err != nil {
		return "", err
	}
	return "/sandboxes/" + sandboxID, nil
}

// GetSandbox reads a running or paused sandbox (GET /sandboxes/{id}).
func (c *Client) GetSandbox(ctx context.Context, sandboxID string) (*e2b.SandboxDetail, error) {
	path, err := sandboxPath(sandboxID)
	if err != nil {
		return nil, err
	}
	var out e2b.SandboxDetail
	if err := c.call(ctx, http.MethodGet, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// KillSandbox kills a sandbox (DELETE /sandboxes/{id}, 204). A sandbox that
// is already gone is an *APIError for which IsNotFound is true; callers
// cleaning up may ignore it.
func (c *Client) KillSandbox(ctx context.Context, sandboxID string) error {
	path, err := sandboxPath(sandboxID)
	if err != nil {
		return err
	}
	err = c.call(ctx, http.MethodDelete, path, nil, nil, nil)
	return err
}
