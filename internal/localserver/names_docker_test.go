//go:build linux

package localserver

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/egress"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/docker"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
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

// TestDockerSandboxResolvesThroughTheServer: in a build step and in a
// sandbox, names resolve through the resolver envd's channel agent offers
// on 127.0.0.1:53, which asks the server, which asks its upstream (here a
// loopback DNS server of the test's: no look-up reaches the host's
// resolver) under the egress policy. The sandbox's own name and localhost
// still come from /etc/hosts; a name of an allowed loopback address
// resolves and is reached by name through the proxy; a name of a refused
// address fails to resolve (getent exits 2).
func TestDockerSandboxResolvesThroughTheServer(t *testing.T) {
	debian := debianImage(t)
	sinkAddr, sinkConns := countingServer(t, "sink")
	eng, _ := egressEngine(t, sinkAddr, map[string][]netip.Addr{
		"example.com":     {netip.MustParseAddr("127.0.0.1")},
		"refused.example": {netip.MustParseAddr("127.0.0.2")},
	})
	rt := runtimeOf(t, eng)
	ts := startServer(t, eng)
	script := `set -e
cat /etc/resolv.conf
getent hosts "$(hostname)"
getent hosts localhost
getent hosts example.com
if getent hosts refused.example; then echo "refused.example resolved"; exit 1; fi
curl -sS http://example.com:` + portOf(sinkAddr) + `/by-name; echo`
	reg, info := ts.buildFrom(debian, "dns", run(script))
	ts.deleteTemplateAtEnd(reg.TemplateID)
	log := ""
	for _, e := range ts.status(reg.TemplateID, reg.BuildID, "").LogEntries {
		log += e.Message + "\n"
	}
	if info.Status != "ready" {
		t.Fatalf("under %s, a build step that resolves names: %+v\n%s", rt.Name, info, log)
	}
	want := []string{"nameserver 127.0.0.1", "127.0.1.1       e2b.local", "127.0.0.1       example.com", "sink saw GET /by-name"}
	for _, w := range want {
		if !strings.Contains(log, w) {
			t.Errorf("under %s, the build log lacks %q:\n%s", rt.Name, w, log)
		}
	}
	sb := ts.probeSandbox("dns")
	for _, user := range []string{"root", "user"} {
		out, code := sb.sh(user, script)
		for _, w := range want {
			if code != 0 || !strings.Contains(out, w) {
				t.Errorf("under %s, as %s in a sandbox: %q (exit %d), want %q", rt.Name, user, out, code, w)
				break
			}
		}
	}
	if sinkConns.Load() == 0 {
		t.Error("the sink got no connection")
	}
}

// egressEngine is the Docker engine with an egress proxy whose policy is
// the public internet and allow, resolving names through a loopback DNS
// server of the test's that answers names (none: it knows no name), so
// that no look-up reaches the host's resolver.
func egressEngine(t *testing.T, allow string, names map[string][]netip.Addr) (Engine, *egress.Policy) {
	t.Helper()
	policy, err := egress.NewPolicy(egress.ModePublic, allow)
	if err != nil {
		t.Fatal(err)
	}
	proxy := egress.New(policy, egress.UpstreamResolver(testutil.DNSServer(t, names)), nil)
	t.Cleanup(proxy.Close)
	eng, _ := dockerEngineWith(t, func(o *docker.DockerOptions) { o.Egress = proxy })
	return eng, policy
}
