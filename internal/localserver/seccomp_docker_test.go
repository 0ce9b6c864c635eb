//go:build linux

package localserver

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
)

// TestDockerSandboxSeccomp: a sandbox's processes run under the server's
// seccomp profile (Seccomp: 2) under runc, and under gVisor when the engine
// runs runsc with --oci-seccomp; without the flag gVisor applies none, which
// the server's start-up self-test warns of.
func TestDockerSandboxSeccomp(t *testing.T) {
	ts, rt := dockerTemplate(t, "seccomp")
	info, err := testDockerClient(t).Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	want := "2"
	if rt.GVisor && !slices.Contains(info.Runtimes[rt.Name].Args, "--oci-seccomp") {
		want = "0"
	}
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "seccomp"})
	defer ts.call("DELETE", "/sandboxes/"+sb.SandboxID, nil, http.StatusNoContent, nil)
	client, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"root", "user"} {
		res, err := client.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", "grep Seccomp: /proc/self/status"}, User: user})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Fields(string(res.Stdout)); len(got) != 2 || got[1] != want {
			t.Errorf("as %s under %s (args %v): %q, want Seccomp: %s", user, rt.Name, info.Runtimes[rt.Name].Args, res.Stdout, want)
		}
	}
}
