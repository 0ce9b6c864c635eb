//go:build linux

package localserver

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
)

// TestDockerDeadSandboxIsNotRunning: a sandbox whose container the engine
// killed (as when root in it kills envd) is forgotten once the engine tells
// of it: GET answers 404, never "running".
func TestDockerDeadSandboxIsNotRunning(t *testing.T) {
	ts, _ := dockerTemplate(t, "killed-by-engine")
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "killed-by-engine"})
	if err := testDockerClient(t).ContainerKill(t.Context(), containerOf(t, sb.SandboxID).ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		resp := ts.request("GET", "/sandboxes/"+sb.SandboxID, nil)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusNotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after its container was killed, GET of the sandbox answers %d, want 404", resp.StatusCode)
		}
	}
}

// TestDockerConcurrentDeletes: deletes of one sandbox that race one another
// (as a user's delete races the disk watchdog's stop) each answer 204 or
// 404, never the engine's "removal … already in progress" as a 500.
func TestDockerConcurrentDeletes(t *testing.T) {
	ts, _ := dockerTemplate(t, "deleted-at-once")
	for range 3 {
		sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "deleted-at-once"})
		const deletes = 4
		answers := make(chan string, deletes)
		var wg sync.WaitGroup
		for range deletes {
			wg.Go(func() {
				req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, ts.URL+"/sandboxes/"+sb.SandboxID, nil)
				if err != nil {
					answers <- err.Error()
					return
				}
				req.Header.Set("X-API-Key", ts.apiKey)
				resp, err := ts.client.Do(req)
				if err != nil {
					answers <- err.Error()
					return
				}
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotFound {
					answers <- resp.Status + " " + string(body)
				}
			})
		}
		wg.Wait()
		close(answers)
		for a := range answers {
			t.Errorf("a delete racing others answered %s, want 204 or 404", a)
		}
		ts.expectError("GET", "/sandboxes/"+sb.SandboxID, nil, http.StatusNotFound, "")
	}
}
