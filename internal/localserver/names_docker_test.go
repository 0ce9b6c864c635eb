//go:build linux

package localserver

import (
	"net/http"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

// TestDockerSandboxResolvesItsName: a build step and a sandbox resolve
// their own host name, E2B's, and localhost, as root and as the template's
// user, on the network of their own the server gives them.
func TestDockerSandboxResolvesItsName(t *testing.T) {
	eng, _ := dockerEngine(t)
	runtimeOf(t, eng)
	ts := startServer(t, eng)
	const resolve = `set -e; hostname; getent hosts "$(hostname)"; getent hosts localhost`
	if _, info := ts.buildFrom(debianImage(t), "names", run(resolve)); info.Status != "ready" {
		t.Fatalf("a build step that resolves its host name: %+v", info)
	}
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "names"})
	defer ts.call("DELETE", "/sandboxes/"+sb.SandboxID, nil, http.StatusNoContent, nil)
	client, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"root", "user"} {
		res, err := client.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", resolve}, User: user})
		if err != nil {
			t.Fatal(err)
		}
		out := string(res.Stdout)
		if res.ExitCode != 0 || !strings.HasPrefix(out, "e2b.local\n127.0.1.1") || !strings.Contains(out, "localhost") {
			t.Errorf("as %s: %q (exit %d, stderr %q), want e2b.local resolving to 127.0.1.1, and localhost", user, out, res.ExitCode, res.Stderr)
		}
	}
}
