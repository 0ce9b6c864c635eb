//go:build linux

package localserver

import (
	"encoding/json"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/sandboxes"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
)

// equivalenceScript prints what a sandbox's processes see: environment,
// hostname, processes (the script's own left out: ps runs alone, so that
// the rest of a pipeline is not seen starting or not), cgroup limits and the
// file names of the root file system and the sandbox's tmpfs.
const equivalenceScript = `echo "== env"; env | sort
echo "== hostname"; hostname
echo "== ps"; procs=$(ps -eo user:12,args --no-headers); printf '%s\n' "$procs" | grep -v -e 'ps -eo' -e 'sh -c echo "== env"' | sort
echo "== cgroup"; ` + cgroupScript + `
echo "== files"; find / -xdev \( -path /proc -o -path /sys \) -prune -o -print 2>/dev/null | sort | md5sum
echo "== run"; ls -A /run/e2b /tmp /dev/shm 2>&1
echo "== id"; id; pwd`

// A sandbox of the warm pool is the same as a fresh one of the same build
// and request: environment, hostname (its container's), processes (the
// start command running, nothing left of the warm-up), limits, files and
// its container's configuration but for the sandbox ID.
func TestDockerPoolEquivalence(t *testing.T) {
	eng, _ := dockerEngine(t)
	debian := debianImage(t)
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.Pool = sandboxes.PoolConfig{PerBuild: 1, Max: 2, Idle: time.Hour} }})
	var reg e2b.TemplateRequestResponseV3
	ts.call("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: "same", CPUCount: int32p(1), MemoryMB: int32p(256)}, http.StatusAccepted, &reg)
	ts.start(reg, e2b.TemplateBuildStartV2{FromImage: debian, StartCmd: "sleep 86400", Steps: []e2b.TemplateStep{
		{Type: "ENV", Args: []string{"FROM_BUILD", "b"}},
		run("echo built > /home/user/built"),
	}})
	if info := ts.waitBuild(reg); info.Status != "ready" {
		t.Fatalf("build = %+v", info)
	}
	ts.deleteTemplateAtEnd(reg.TemplateID)

	req := e2b.NewSandbox{TemplateID: "same", EnvVars: map[string]string{"K": "V"}, Metadata: map[string]string{"m": "1"}}
	var fresh e2b.Sandbox
	ts.call("POST", "/v2/sandboxes", req, http.StatusCreated, &fresh)
	t.Cleanup(func() { ts.request("DELETE", "/sandboxes/"+fresh.SandboxID, nil).Body.Close() })
	var want string
	for deadline := time.Now().Add(2 * time.Minute); want == ""; time.Sleep(10 * time.Millisecond) {
		if ids := ts.pooledIDs()[reg.BuildID]; len(ids) > 0 {
			want = ids[0]
		} else if time.Now().After(deadline) {
			t.Fatal("no pooled container after 2 minutes")
		}
	}
	var pooled e2b.Sandbox
	ts.call("POST", "/v2/sandboxes", req, http.StatusCreated, &pooled)
	t.Cleanup(func() { ts.request("DELETE", "/sandboxes/"+pooled.SandboxID, nil).Body.Close() })
	if pooled.SandboxID != want {
		t.Fatalf("the second sandbox %s is not the pooled %s", pooled.SandboxID, want)
	}
	if fresh.EnvdVersion != pooled.EnvdVersion || (fresh.EnvdAccessToken == "") != (pooled.EnvdAccessToken == "") {
		t.Errorf("answers differ: fresh %+v, pooled %+v", fresh, pooled)
	}

	seen := func(sb e2b.Sandbox, user string) string {
		c, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
		if err != nil {
			t.Fatal(err)
		}
		// The start command runs in the background: wait for it.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			res, err := c.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/bash", Args: []string{"-c", equivalenceScript}, User: user})
			if err != nil {
				t.Fatal(err)
			}
			out := string(res.Stdout) + string(res.Stderr)
			if strings.Contains(out, "sleep 86400") || time.Now().After(deadline) {
				host := containerOf(t, sb.SandboxID).Config.Hostname
				if !strings.Contains(out, "== hostname\n"+host+"\n") {
					t.Errorf("sandbox %s: hostname is not its container's %s:\n%s", sb.SandboxID, host, out)
				}
				return strings.ReplaceAll(out, host, "<hostname>")
			}
		}
	}
	for _, user := range []string{"user", "root"} {
		a, b := seen(fresh, user), seen(pooled, user)
		if a != b {
			t.Errorf("as %s, a fresh sandbox sees\n%s\na pooled one\n%s", user, a, b)
		}
		for _, line := range []string{"FROM_BUILD=b", "K=V", "sleep 86400", "268435456", "100000 100000"} {
			if !strings.Contains(b, line) {
				t.Errorf("as %s, the pooled sandbox lacks %q:\n%s", user, line, b)
			}
		}
	}

	// The containers: the same configuration, labels but the sandbox ID.
	fc, pc := containerOf(t, fresh.SandboxID), containerOf(t, pooled.SandboxID)
	hostConfig := func(c container.InspectResponse) string {
		raw, err := json.Marshal(c.HostConfig)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	if a, b := hostConfig(fc), hostConfig(pc); a != b {
		t.Errorf("host configurations differ:\nfresh  %s\npooled %s", a, b)
	}
	labels := func(c container.InspectResponse, id string) map[string]string {
		l := maps.Clone(c.Config.Labels)
		if l["e2b-local.sandbox-id"] != id {
			t.Errorf("container of %s is labelled sandbox %q", id, l["e2b-local.sandbox-id"])
		}
		delete(l, "e2b-local.sandbox-id")
		return l
	}
	if a, b := labels(fc, fresh.SandboxID), labels(pc, pooled.SandboxID); !maps.Equal(a, b) {
		t.Errorf("labels differ: fresh %v, pooled %v", a, b)
	}
	if !slices.Equal(fc.Config.Entrypoint, pc.Config.Entrypoint) || fc.Config.User != pc.Config.User || !slices.Equal(fc.Config.Env, pc.Config.Env) {
		t.Errorf("container configurations differ: fresh %+v, pooled %+v", fc.Config, pc.Config)
	}
}

// instanceSandboxContainers lists the sandbox IDs of the sandbox containers
// (running or not) of the server with dataDir.
func instanceSandboxContainers(t *testing.T, dataDir string) []string {
	t.Helper()
	list, err := testDockerClient(t).ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", "e2b-local.instance="+InstanceOf(dataDir)),
		filters.Arg("label", "e2b-local.kind=sandbox"),
	)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range list {
		ids = append(ids, c.Labels["e2b-local.sandbox-id"])
	}
	slices.Sort(ids)
	return ids
}

// waitPooledStat waits until the server's /_local/stats counts at least n
// pooled containers.
func (ts *testServer) waitPooledStat(n int) {
	ts.t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var st store.Stats
		ts.call("GET", "/_local/stats", nil, http.StatusOK, &st)
		if st.Pooled >= n {
			return
		}
		if time.Now().After(deadline) {
			ts.t.Fatalf("the server pools %d containers after 2 minutes, want %d", st.Pooled, n)
		}
	}
}
