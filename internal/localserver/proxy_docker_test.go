//go:build linux

package localserver

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// TestDockerSandboxKilledMidRequest kills a sandbox while an upload streams
// through the proxy to its envd: the upload is answered 502, the client's
// connection serves its next request, and the server does not panic
// (startServer fails the test on a logged panic).
func TestDockerSandboxKilledMidRequest(t *testing.T) {
	ts, _ := dockerTemplate(t, "killed-mid-request")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "killed-mid-request"})
	// One connection, kept alive across both requests.
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	toSandbox := func(req *http.Request) {
		req.Header.Set("E2b-Sandbox-Id", sb.SandboxID)
		req.Header.Set("E2b-Sandbox-Port", "49983")
		req.Header.Set("X-Access-Token", sb.EnvdAccessToken)
	}

	body, sending := io.Pipe()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, ts.URL+"/files?path=/tmp/upload", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	toSandbox(req)
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("the upload got no answer: %v", err)
		}
		answered <- resp
	}()
	chunk := bytes.Repeat([]byte("x"), 4096)
	if _, err := sending.Write(chunk); err != nil {
		t.Fatal(err)
	}
	ts.call("DELETE", "/sandboxes/"+sb.SandboxID, nil, http.StatusNoContent, nil)
	_, _ = sending.Write(chunk) // the server may have stopped reading
	_ = sending.Close()
	if resp := <-answered; resp != nil {
		got, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadGateway {
			t.Errorf("the upload to a sandbox killed meanwhile = %d %s, want 502", resp.StatusCode, got)
		}
	}

	req, err = http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL+"/health", nil)
	if err != nil {
		t.Fatal(err)
	}
	toSandbox(req)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("the next request on the connection: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(got), "not found") {
		t.Errorf("a request to the killed sandbox = %d %s, want 502 not found", resp.StatusCode, got)
	}
}
