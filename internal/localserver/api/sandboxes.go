package api

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/failure"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// The sandbox endpoints: each reads its request, calls the sandboxes
// Manager once and writes its answer.

// sandboxHandlers serve the sandbox, metrics, log and snapshot endpoints
// and the sandboxes' traffic.
type sandboxHandlers struct {
	sandboxes Sandboxes
	observer  Observer
	proxies   *Proxies
}

// Default sandbox timeouts in seconds (design/e2b-api.md "Create").
const (
	defaultTimeoutV1 = 15
	defaultTimeoutV2 = 300
)

// handleCreateSandbox serves POST /v2/sandboxes.
func (s *sandboxHandlers) handleCreateSandbox(w http.ResponseWriter, r *http.Request) error {
	var req e2b.NewSandbox
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	sb, err := s.sandboxes.Create(r.Context(), req, defaultTimeoutV2, true)
	return answer(w, http.StatusCreated, sb, err)
}

// handleCreateSandboxV1 serves POST /sandboxes, which differs from v2 in
// the default timeout and in that it secures envd only on request.
func (s *sandboxHandlers) handleCreateSandboxV1(w http.ResponseWriter, r *http.Request) error {
	var req e2b.NewSandbox
	if err := decodeBody(w, r, &req, false); err != nil {
		return err
	}
	sb, err := s.sandboxes.Create(r.Context(), req, defaultTimeoutV1, req.Secure != nil && *req.Secure)
	return answer(w, http.StatusCreated, sb, err)
}

// sandboxID reads the sandbox ID of the path; a bad one is Invalid.
func sandboxID(r *http.Request) (string, error) {
	id := r.PathValue("sandboxID")
	if err := e2b.ValidateSandboxID(id); err != nil {
		return "", failure.New(failure.Invalid, "%v", err)
	}
	return id, nil
}

// sandboxRequest reads the sandbox ID of the path and the JSON body of a
// request about that sandbox; either bad is Invalid.
func sandboxRequest[T any](w http.ResponseWriter, r *http.Request, allowEmpty bool) (id string, req T, err error) {
	if id, err = sandboxID(r); err != nil {
		return id, req, err
	}
	return id, req, decodeBody(w, r, &req, allowEmpty)
}

func (s *sandboxHandlers) handleGetSandbox(w http.ResponseWriter, r *http.Request) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	detail, err := s.sandboxes.Get(id)
	return answer(w, http.StatusOK, detail, err)
}

// listQuery reads the metadata query ("k=v&k2=v2", URL-encoded) and the
// state query (comma-separated or repeated; defaultStates when absent) of
// a list.
func listQuery(r *http.Request, defaultStates ...string) (map[string]string, []string, error) {
	raw := r.URL.Query().Get("metadata")
	want, err := url.ParseQuery(raw)
	if err != nil {
		return nil, nil, failure.New(failure.Invalid, "metadata query %q is invalid: %v", raw, err)
	}
	metadata := map[string]string{}
	for k := range want {
		metadata[k] = want.Get(k)
	}
	states := defaultStates
	if raw := r.URL.Query()["state"]; len(raw) > 0 {
		states = strings.Split(strings.Join(raw, ","), ",")
	}
	return metadata, states, nil
}

// handleListSandboxes serves GET /sandboxes, which lists running sandboxes
// only, as E2B's does.
func (s *sandboxHandlers) handleListSandboxes(w http.ResponseWriter, r *http.Request) error {
	metadata, states, err := listQuery(r, store.StateRunning)
	if err != nil {
		return err
	}
	out, err := s.sandboxes.List(metadata, states)
	return answer(w, http.StatusOK, out, err)
}

func (s *sandboxHandlers) handleListSandboxesV2(w http.ResponseWriter, r *http.Request) error {
	limit, err := pageLimit(r)
	if err != nil {
		return err
	}
	metadata, states, err := listQuery(r, store.StateRunning, store.StatePaused)
	if err != nil {
		return err
	}
	out, err := s.sandboxes.List(metadata, states)
	if err != nil {
		return err
	}
	page, next := paginate(out, limit, r.URL.Query().Get("nextToken"), func(sb e2b.ListedSandbox) string { return sb.SandboxID })
	if next != "" {
		w.Header().Set("X-Next-Token", next)
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

func (s *sandboxHandlers) handleDeleteSandbox(w http.ResponseWriter, r *http.Request) error {
	id, err := sandboxID(r)
	if err != nil {
		return err
	}
	if err := s.sandboxes.Kill(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *sandboxHandlers) handleSandboxTimeout(w http.ResponseWriter, r *http.Request) error {
	id, req, err := sandboxRequest[e2b.SandboxTimeoutRequest](w, r, false)
	if err != nil {
		return err
	}
	if err := s.sandboxes.SetTimeout(r.Context(), id, req.Timeout); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleConnectSandbox serves POST /v2/sandboxes/{sandboxID}/connect, the
// SDK's Sandbox.connect; its body is optional (timeout 300 s).
func (s *sandboxHandlers) handleConnectSandbox(w http.ResponseWriter, r *http.Request) error {
	id, req, err := sandboxRequest[e2b.ConnectSandbox](w, r, true)
	if err != nil {
		return err
	}
	return s.connectSandbox(w, r, id, req.Timeout)
}

// handleConnectSandboxV1 serves POST /sandboxes/{sandboxID}/connect, which
// requires the timeout.
func (s *sandboxHandlers) handleConnectSandboxV1(w http.ResponseWriter, r *http.Request) error {
	id, req, err := sandboxRequest[e2b.ConnectSandbox](w, r, false)
	if err != nil {
		return err
	}
	if req.Timeout == nil {
		return failure.New(failure.Invalid, "timeout is required")
	}
	return s.connectSandbox(w, r, id, req.Timeout)
}

// connectSandbox answers a connect: 201 when it resumed a paused sandbox,
// 200 when the sandbox ran.
func (s *sandboxHandlers) connectSandbox(w http.ResponseWriter, r *http.Request, id string, timeout *int32) error {
	sb, resumed, err := s.sandboxes.Connect(r.Context(), id, timeout, defaultTimeoutV2)
	status := http.StatusOK
	if resumed {
		status = http.StatusCreated
	}
	return answer(w, status, sb, err)
}

// handleRefreshSandbox keeps a sandbox alive for duration seconds more (0 to 3600) from
// now, never shortening it.
func (s *sandboxHandlers) handleRefreshSandbox(w http.ResponseWriter, r *http.Request) error {
	id, req, err := sandboxRequest[e2b.SandboxRefreshRequest](w, r, true)
	if err != nil {
		return err
	}
	var duration int32
	if req.Duration != nil {
		duration = *req.Duration
	}
	if err := s.sandboxes.Refresh(r.Context(), id, duration); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handlePauseSandbox serves POST /sandboxes/{sandboxID}/pause: 204, 409
// when already paused. The body ({memory}) is optional; the memory is
// always kept here.
func (s *sandboxHandlers) handlePauseSandbox(w http.ResponseWriter, r *http.Request) error {
	id, _, err := sandboxRequest[e2b.SandboxPauseRequest](w, r, true)
	if err != nil {
		return err
	}
	if err := s.sandboxes.Pause(r.Context(), id); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleResumeSandbox serves the deprecated POST /sandboxes/{sandboxID}/resume:
// 201 with the sandbox, 409 when it runs.
func (s *sandboxHandlers) handleResumeSandbox(w http.ResponseWriter, r *http.Request) error {
	id, req, err := sandboxRequest[e2b.ResumedSandbox](w, r, true)
	if err != nil {
		return err
	}
	sb, err := s.sandboxes.Resume(r.Context(), id, req.Timeout, req.AutoPause)
	return answer(w, http.StatusCreated, sb, err)
}
