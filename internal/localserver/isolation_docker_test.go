//go:build linux

package localserver

import (
	"bufio"
	"fmt"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/sandboxes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	dockerclient "github.com/docker/docker/client"
	"golang.org/x/sys/unix"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/docker"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// The tests in this file attack the local server from inside sandboxes
// and build steps, as root, the way untrusted code would (issue #11). They
// need the Docker engine of server_docker_test.go and a Debian image with bash,
// apt and useradd: E2B_TEST_DEBIAN_IMAGE (default e2b-test-debian:bookworm).

// debianImage returns the Debian test image, or reports it missing.
func debianImage(t *testing.T) string {
	t.Helper()
	return testImage(t, "E2B_TEST_DEBIAN_IMAGE", "e2b-test-debian:bookworm", "Debian test image")
}

// testImage returns the image the environment variable env names (def
// when unset), or reports it missing from the engine.
func testImage(t *testing.T, env, def, what string) string {
	t.Helper()
	img := os.Getenv(env)
	if img == "" {
		img = def
	}
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		testutil.Missing(t, "Docker client: %v", err)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(t.Context(), img); err != nil {
		testutil.Missing(t, "%s %s (%s) is not on the engine (scripts/test-image.sh builds it): %v", what, img, env, err)
	}
	return img
}

var probeBinary testBinary

// buildProbe builds testdata/sandboxprobe as a static Linux binary.
func buildProbe(t *testing.T) string {
	t.Helper()
	return probeBinary.build(t, "sandboxprobe", "./testdata/sandboxprobe", runtime.GOARCH)
}

// deleteTemplateAtEnd deletes the template, and so its images, when the
// test ends, after the sandboxes started later (cleanups run last first).
func (ts *testServer) deleteTemplateAtEnd(templateID string) {
	ts.t.Cleanup(func() { ts.request("DELETE", "/templates/"+templateID, nil).Body.Close() })
}

// readyTemplate builds the template name from image with steps, fails the
// test unless the build is ready, and deletes the template when the test
// ends (deleteTemplateAtEnd); it returns the template's ID.
func (ts *testServer) readyTemplate(image, name string, steps ...e2b.TemplateStep) string {
	ts.t.Helper()
	reg, build := ts.buildFrom(image, name, steps...)
	ts.deleteTemplateAtEnd(reg.TemplateID)
	if build.Status != "ready" {
		ts.t.Fatalf("build of %s = %+v", name, build)
	}
	return reg.TemplateID
}

// probeSandbox is a running sandbox with the probe at /usr/local/bin.
type probeSandbox struct {
	t      *testing.T
	id     string
	client *envdclient.Client
}

const probePath = "/usr/local/bin/sandboxprobe"

func (ts *testServer) probeSandbox(template string) *probeSandbox {
	t := ts.t
	t.Helper()
	sb := ts.createPossiblyPooled(template)
	t.Cleanup(func() { ts.request("DELETE", "/sandboxes/"+sb.SandboxID, nil).Body.Close() })
	c, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(buildProbe(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := c.Upload(t.Context(), probePath, "root", f); err != nil {
		t.Fatalf("upload the probe: %v", err)
	}
	p := &probeSandbox{t: t, id: sb.SandboxID, client: c}
	if out, code := p.sh("root", "chmod 755 "+probePath); code != 0 {
		t.Fatalf("chmod the probe: %s", out)
	}
	return p
}

// sh runs a shell script in the sandbox as user and returns its combined
// output and exit code.
func (p *probeSandbox) sh(user, script string) (string, int) {
	p.t.Helper()
	res, err := p.client.Run(p.t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", script}, User: user, Timeout: 2 * time.Minute})
	if err != nil {
		p.t.Fatalf("run %q: %v", script, err)
	}
	return string(res.Stdout) + string(res.Stderr), res.ExitCode
}

// serve starts the probe's HTTP server on addr in the background.
func (p *probeSandbox) serve(addr, text string) {
	p.t.Helper()
	if out, code := p.sh("root", fmt.Sprintf("nohup %s serve %s %s >/dev/null 2>&1 &", probePath, addr, text)); code != 0 {
		p.t.Fatalf("start the probe server: %s", out)
	}
}

// freePort returns a loopback port nothing on the host listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port //nolint:forcetypeassert // a "tcp" listener's address is a *net.TCPAddr
}

// viaProxy GETs path of port in sandbox id through the server's proxy,
// by Host ("<port>-<id>.<domain>") or by the E2b-Sandbox-* headers.
func viaProxy(t *testing.T, serverURL, id string, port int, byHeaders bool, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", serverURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if byHeaders {
		req.Header.Set("E2b-Sandbox-Id", id)
		req.Header.Set("E2b-Sandbox-Port", strconv.Itoa(port))
	} else {
		req.Host = fmt.Sprintf("%d-%s.localhost", port, id)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// waitProxy waits until port of sandbox id answers 200 through the proxy.
func waitProxy(t *testing.T, serverURL, id string, port int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := viaProxy(t, serverURL, id, port, false, "/hello")
		if code == http.StatusOK {
			return body
		}
		if time.Now().After(deadline) {
			t.Fatalf("port %d of sandbox %s never answered through the proxy: %d %s", port, id, code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// canary is a unix socket under the test's control that counts the
// connections it accepts: nothing the server does may ever reach it.
func canary(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	dir, err := os.MkdirTemp("", "canary") //nolint:usetesting // sun_path length
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "canary.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return path, &n
}

func containerOf(t *testing.T, sandboxID string) container.InspectResponse {
	t.Helper()
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "e2b-local.sandbox-id="+sandboxID))})
	if err != nil || len(list) != 1 {
		t.Fatalf("the container of sandbox %s: %v (%d found)", sandboxID, err, len(list))
	}
	insp, err := cli.ContainerInspect(t.Context(), list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return insp
}

// capNetRaw is CAP_NET_RAW's bit in CapEff; capMknod CAP_MKNOD's.
const (
	capNetRaw = 13
	capMknod  = 27
	// dockerDefaultCaps is Docker's default capability set as a CapEff mask.
	dockerDefaultCaps = 0x00000000a80425fb
)

// capEff parses the CapEff line of /proc/<pid>/status output.
func capEff(t *testing.T, out string) uint64 {
	t.Helper()
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(line, "CapEff:"); ok {
			v, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatalf("no CapEff in %q", out)
	return 0
}

// cgroupScript prints memory, CPU and pids limits, cgroup v2 or v1.
const cgroupScript = `cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes
cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo "$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"
cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max`

// ioUringScript calls io_uring_setup (425 on every architecture) with
// python3 and prints what it returned: the seccomp profile refuses it.
const ioUringScript = `python3 -c 'import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); r = libc.syscall(425, 1, ctypes.create_string_buffer(120)); print("io_uring_setup:", r, os.strerror(ctypes.get_errno()) if r < 0 else "a ring")'`

// ioUringRefused starts what ioUringScript prints when the call fails:
// EPERM from the seccomp profile under runc, ENOSYS under gVisor.
const ioUringRefused = "io_uring_setup: -1 "

// pidsSeenInside is the pids limit cgroupScript prints in a container of
// the runtime: gVisor's own cgroup files show memory and CPU limits but
// not the pids limit, which the host's cgroup of the sandbox holds
// (hostPidsMax checks it there).
func pidsSeenInside(rt engine.Runtime) string {
	if rt.GVisor {
		return "max"
	}
	return strconv.Itoa(engine.DefaultPidsLimit)
}

// memorySeenInside is the memory limit in bytes cgroupScript prints in a
// container of the runtime with the template's memoryMB: under gVisor the
// container's limit has room for gVisor's own memory above it (envd holds
// the processes to memoryMB).
func memorySeenInside(rt engine.Runtime, memoryMB int) string {
	if rt.GVisor {
		memoryMB += docker.GVisorMemoryHeadroomMB
	}
	return strconv.Itoa(memoryMB << 20)
}

// hostPidsMax reads the pids limit of the running container's cgroup on
// the host, through its main process (gVisor's sandbox).
func hostPidsMax(t *testing.T, insp container.InspectResponse) string {
	t.Helper()
	if insp.State == nil || insp.State.Pid == 0 {
		t.Fatalf("container %s has no process", insp.ID)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", insp.State.Pid))
	if err != nil {
		testutil.Missing(t, "the container's process is not visible here (an engine on another machine): %v", err)
	}
	for line := range strings.Lines(string(raw)) {
		// cgroup v1 "N:pids:/path", v2 "0::/path".
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		file := ""
		switch {
		case slices.Contains(strings.Split(parts[1], ","), "pids"):
			file = filepath.Join("/sys/fs/cgroup/pids", parts[2], "pids.max")
		case parts[1] == "":
			file = filepath.Join("/sys/fs/cgroup", parts[2], "pids.max")
		default:
			continue
		}
		if b, err := os.ReadFile(file); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no pids cgroup of the container's process in:\n%s", raw)
	return ""
}

// TestDockerIsolation runs the attacks of issues #11 and #23 as root inside a
// sandbox of a Debian template and checks that each one fails, in fresh
// sandboxes and in sandboxes of the warm pool.
func TestDockerIsolation(t *testing.T) {
	forFreshAndPooled(t, testDockerIsolation)
}

func testDockerIsolation(t *testing.T, pool sandboxes.PoolConfig) {
	eng, _ := dockerEngine(t)
	debian := debianImage(t)
	rt := runtimeOf(t, eng)
	engInfo, err := eng.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Setuid programs work only where root in a container is not the
	// host's (TestDockerSudo); elsewhere no-new-privileges holds.
	noNewPrivs := "NoNewPrivs:\t1"
	if engInfo.Setuid {
		noNewPrivs = "NoNewPrivs:\t0"
	}
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.Pool = pool }})

	// The build itself: least privilege must not break what templates do.
	var reg e2b.TemplateRequestResponseV3
	ts.call("POST", "/v3/templates", e2b.TemplateBuildRequestV3{Name: "isolation", CPUCount: int32p(1), MemoryMB: int32p(512)}, http.StatusAccepted, &reg)
	ts.start(reg, e2b.TemplateBuildStartV2{FromImage: debian, Steps: []e2b.TemplateStep{
		{Type: "RUN", Args: []string{`set -e
useradd -m probe && chown probe:probe /tmp && su -s /bin/sh probe -c id
mkdir -p /p/DEBIAN /p/usr/share/e2bprobe && echo installed > /p/usr/share/e2bprobe/f
printf 'Package: e2bprobe\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@t>\nDescription: probe\n' > /p/DEBIAN/control
dpkg-deb --build /p /tmp/e2bprobe.deb >/dev/null && apt-get install -y /tmp/e2bprobe.deb >/dev/null 2>&1
cat /usr/share/e2bprobe/f; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status
` + ioUringScript + "\n" + cgroupScript, "root"}},
	}})
	info := ts.waitBuild(reg)
	ts.deleteTemplateAtEnd(reg.TemplateID)
	buildLog := ""
	for _, e := range ts.status(reg.TemplateID, reg.BuildID, "").LogEntries {
		buildLog += e.Message + "\n"
	}
	if info.Status != "ready" {
		t.Fatalf("build = %+v\n%s", info, buildLog)
	}
	t.Run("build step limits", func(t *testing.T) {
		for _, want := range []string{"(probe) gid=", "installed", noNewPrivs, ioUringRefused, memorySeenInside(rt, 512), "100000 100000", "\n" + pidsSeenInside(rt) + "\n"} {
			if !strings.Contains(buildLog, want) {
				t.Errorf("build log lacks %q:\n%s", want, buildLog)
			}
		}
		if eff := capEff(t, buildLog); eff&(1<<capNetRaw) != 0 || eff&^dockerDefaultCaps != 0 {
			t.Errorf("RUN step as root has CapEff %#x: want no NET_RAW and nothing beyond Docker's defaults", eff)
		}
	})

	a := ts.probeSandbox("isolation")
	b := ts.probeSandbox("isolation")

	t.Run("channel", func(t *testing.T) {
		// envd comes from the engine's read-only volume: root cannot
		// replace the binary the server starts as the channel agent.
		out, _ := a.sh("root", `cp /bin/sh /.e2b/envd; rm -f /.e2b/envd; touch /.e2b/x; mount -o remount,rw /.e2b; ls -la /.e2b; exit 0`)
		if strings.Count(out, "Read-only file system") < 3 || strings.Contains(out, " x\n") {
			t.Errorf("changing /.e2b did not fail as read-only:\n%s", out)
		}
		// The agent's egress socket and the sandbox's end are root's alone.
		out, _ = a.sh("user", `ls /run/e2b; echo 1 > /run/e2b/deadline; exit 0`)
		if strings.Count(out, "Permission denied") < 2 {
			t.Errorf("a non-root user reached /run/e2b:\n%s", out)
		}
		// The agent is sealed: root, without CAP_SYS_PTRACE, reaches neither
		// its standard streams nor its memory or environment. Root may kill
		// it (as it may kill envd), which ends that sandbox alone
		// (TestDockerChannelAgentKilled), and what root plants where the
		// agent listens is never followed.
		victim := ts.probeSandbox("isolation")
		canaryPath, hits := canary(t)
		script := fmt.Sprintf(`for p in /proc/[0-9]*; do
  if tr '\0' ' ' <$p/cmdline 2>/dev/null | grep -q '^/.e2b/envd envd .*--channel'; then pid=${p#/proc/}; fi
done
echo "agent=$pid"
readlink /proc/$pid/fd/0; head -c1 /proc/$pid/fd/0; cat /proc/$pid/environ; head -c1 /proc/$pid/mem
ln -sf %s /run/e2b/egress.sock
(sleep 1; kill -9 $pid) >/dev/null 2>&1 &
exit 0`, canaryPath)
		out, _ = victim.sh("root", script)
		if !regexp.MustCompile(`agent=[0-9]+`).MatchString(out) || strings.Count(out, "Permission denied") < 3 || strings.Contains(out, "pipe:") {
			t.Errorf("root in the sandbox reached the channel agent:\n%s", out)
		}
		time.Sleep(2 * time.Second)
		if _, err := victim.client.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/true", Timeout: time.Minute}); err == nil {
			t.Error("the sandbox whose agent was killed still answers: a new agent was started")
		}
		for _, p := range []*probeSandbox{a, b} {
			if out, code := p.sh("", "echo alive"); code != 0 || out != "alive\n" {
				t.Errorf("sandbox %s after another's agent was killed: %q (exit %d)", p.id, out, code)
			}
		}
		if n := hits.Load(); n != 0 {
			t.Errorf("the canary socket received %d connections", n)
		}
	})

	t.Run("io_uring", func(t *testing.T) {
		if out, _ := a.sh("root", ioUringScript); !strings.Contains(out, ioUringRefused) {
			t.Errorf("io_uring_setup as root in the sandbox: %s", out)
		}
	})

	t.Run("raw sockets", func(t *testing.T) {
		out, _ := a.sh("root", probePath+" caps")
		if eff := capEff(t, out); eff&(1<<capNetRaw) != 0 || eff&(1<<capMknod) != 0 || eff&^dockerDefaultCaps != 0 {
			t.Errorf("root in the sandbox has CapEff %#x: want no NET_RAW, no MKNOD, nothing beyond Docker's defaults", eff)
		}
		if !strings.Contains(out, noNewPrivs) {
			t.Errorf("want %q (the engine allows setuid programs: %v): %s", noNewPrivs, engInfo.Setuid, out)
		}
		marker := "marker-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				req, _ := http.NewRequest("GET", ts.URL+"/templates?"+marker, nil)
				req.Header.Set("X-API-Key", testAPIKey)
				req.Header.Set("X-Marker", marker)
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
				viaProxy(t, ts.URL, b.id, envd.Port, true, "/health?"+marker)
			}
		}()
		out, _ = a.sh("root", probePath+" packet "+marker+" 3")
		<-done
		if strings.Contains(out, "opened") || strings.Contains(out, "CAPTURED") {
			t.Errorf("raw or packet sockets in the sandbox:\n%s", out)
		}
	})

	t.Run("ports", func(t *testing.T) {
		portA, portB := freePort(t), freePort(t)
		a.serve(fmt.Sprintf("0.0.0.0:%d", portA), "from-a")
		b.serve(fmt.Sprintf("127.0.0.1:%d", portB), "from-b")
		if body := waitProxy(t, ts.URL, a.id, portA); !strings.HasPrefix(body, "from-a path=/hello host="+strconv.Itoa(portA)+"-"+a.id) {
			t.Errorf("port %d of sandbox a by Host: %q", portA, body)
		}
		if code, body := viaProxy(t, ts.URL, a.id, portA, true, "/by-headers"); code != 200 || !strings.HasPrefix(body, "from-a path=/by-headers") {
			t.Errorf("port %d of sandbox a by headers: %d %q", portA, code, body)
		}
		// An upgraded connection (as WebSockets use) is piped both ways.
		func() {
			c, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, "GET /ws HTTP/1.1\r\nHost: %d-%s.localhost\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n", portA, a.id)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
				t.Fatalf("upgrade through the proxy: %v %v", resp, err)
			}
			fmt.Fprint(c, "ping over the upgrade\n")
			if line, err := br.ReadString('\n'); err != nil || line != "ping over the upgrade\n" {
				t.Errorf("echo over the upgraded connection: %q %v", line, err)
			}
		}()
		waitProxy(t, ts.URL, b.id, portB)
		if code, body := viaProxy(t, ts.URL, a.id, portB, false, "/"); code != http.StatusBadGateway || !strings.Contains(body, "port is not open") {
			t.Errorf("a port nothing listens on in sandbox a: %d %s", code, body)
		}
		// The sandbox's listener on 0.0.0.0 is not in the host's namespace.
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", portA), 2*time.Second); err == nil {
			c.Close()
			t.Errorf("the host reaches the sandbox's listener on 127.0.0.1:%d", portA)
		}
		// From inside: no control plane, no other sandbox, no host interfaces.
		u, _ := url.Parse(ts.URL)
		out, _ := a.sh("root", fmt.Sprintf("%s dial %s 127.0.0.1:%d 127.0.0.1:%d; %s ifaces", probePath, u.Host, portB, portA, probePath))
		for _, want := range []string{
			"dial " + u.Host + ": dial tcp " + u.Host + ": connect: connection refused",
			fmt.Sprintf("dial 127.0.0.1:%d: dial tcp 127.0.0.1:%d: connect: connection refused", portB, portB),
			fmt.Sprintf("dial 127.0.0.1:%d: connected", portA), // its own
			"iface lo",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("from inside sandbox a, want %q in:\n%s", want, out)
			}
		}
		if strings.Count(out, "iface ") != 1 {
			t.Errorf("sandbox a sees interfaces other than its loopback:\n%s", out)
		}
	})

	t.Run("limits", func(t *testing.T) {
		insp := containerOf(t, a.id)
		hc := insp.HostConfig
		if want := memorySeenInside(rt, 512); hc.NanoCPUs != 1e9 || strconv.FormatInt(hc.Memory, 10) != want || hc.PidsLimit == nil || *hc.PidsLimit != engine.DefaultPidsLimit {
			t.Errorf("resources: cpus %d memory %d pids %v", hc.NanoCPUs, hc.Memory, hc.PidsLimit)
		}
		if string(hc.NetworkMode) != "none" {
			t.Errorf("network mode %q, want none", hc.NetworkMode)
		}
		if slices.Contains(hc.SecurityOpt, "no-new-privileges") == engInfo.Setuid {
			t.Errorf("security options have no-new-privileges: %v; the engine allows setuid programs: %v", slices.Contains(hc.SecurityOpt, "no-new-privileges"), engInfo.Setuid)
		}
		if !slices.ContainsFunc(hc.SecurityOpt, func(o string) bool {
			return strings.HasPrefix(o, "seccomp={") && !strings.Contains(o, "io_uring")
		}) {
			t.Error("the container has no seccomp profile of the server's")
		}
		if lc := hc.LogConfig; lc.Type != "json-file" || lc.Config["max-size"] == "" || lc.Config["max-file"] == "" {
			t.Errorf("the engine's log of the container is not bounded: %+v", lc)
		}
		for _, c := range hc.CapAdd {
			if strings.Contains(c, "NET_RAW") || strings.Contains(c, "MKNOD") {
				t.Errorf("capability %s added", c)
			}
		}
		out, code := a.sh("root", cgroupScript)
		if want := memorySeenInside(rt, 512) + "\n100000 100000\n" + pidsSeenInside(rt) + "\n"; code != 0 || out != want {
			t.Errorf("cgroup limits seen inside under %s: %q, want %q", rt.Name, out, want)
		}
		if rt.GVisor {
			if got := hostPidsMax(t, insp); got != strconv.Itoa(engine.DefaultPidsLimit) {
				t.Errorf("pids limit of the gVisor sandbox's cgroup on the host: %s, want %d", got, engine.DefaultPidsLimit)
			}
		}
	})
}

// countingServer is a loopback HTTP server that answers "<name> saw
// <method> <path>" and counts its connections.
func countingServer(t *testing.T, name string) (string, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s saw %s %s", name, r.Method, r.URL.Path)
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				conns.Add(1)
			}
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), &conns
}

// A RUN step and a sandbox process reach a loopback server of the host
// that the policy allows explicitly, through the egress proxy envd offers
// on the sandbox's loopback; another loopback server (not allowed: the
// default policy is the public internet only) is refused without a
// connection, by address and by a name that resolves to loopback; in
// fresh sandboxes and in sandboxes of the warm pool.
func TestDockerEgress(t *testing.T) {
	forFreshAndPooled(t, testDockerEgress)
}

func testDockerEgress(t *testing.T, pool sandboxes.PoolConfig) {
	debian := debianImage(t)
	allowedAddr, allowedConns := countingServer(t, "allowed")
	deniedAddr, deniedConns := countingServer(t, "denied")
	eng, policy := egressEngine(t, allowedAddr, nil)
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.Pool = pool }})
	u, _ := url.Parse(ts.URL)
	serverAddr, err := net.ResolveTCPAddr("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	policy.DenyListener(serverAddr)

	fetch := func(addr, path string) string {
		return fmt.Sprintf(`p=${HTTP_PROXY##*:}; exec 3<>/dev/tcp/127.0.0.1/$p; printf 'GET http://%[1]s%[2]s HTTP/1.0\r\nHost: %[1]s\r\n\r\n' >&3; cat <&3; echo`, addr, path)
	}
	reg, info := ts.buildFrom(debian, "egress",
		run(`echo "env: $HTTP_PROXY|$HTTPS_PROXY|$http_proxy|$https_proxy|$NO_PROXY|$NODE_USE_ENV_PROXY"`),
		run(fetch(allowedAddr, "/from-build")),
		run(fetch(deniedAddr, "/from-build")),
	)
	ts.deleteTemplateAtEnd(reg.TemplateID)
	log := ""
	for _, e := range ts.status(reg.TemplateID, reg.BuildID, "").LogEntries {
		log += e.Message + "\n"
	}
	if info.Status != "ready" {
		t.Fatalf("build = %+v\n%s", info, log)
	}
	proxyURL := fmt.Sprintf("http://127.0.0.1:%d", envd.EgressProxyPort)
	for _, want := range []string{
		"env: " + strings.Repeat(proxyURL+"|", 4) + "localhost,127.0.0.1,::1|1",
		"allowed saw GET /from-build",
		"403 Forbidden",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("build log lacks %q:\n%s", want, log)
		}
	}

	sb := ts.probeSandbox("egress")
	for _, tc := range []struct{ url, want string }{
		{"http://" + allowedAddr + "/from-sandbox", "get: 200 allowed saw GET /from-sandbox"},
		{"http://" + deniedAddr + "/", "get: 403"},
		{"http://localhost:" + portOf(deniedAddr) + "/", "get: 403"},
		{ts.URL + "/health", "get: 403"},
	} {
		if out, _ := sb.sh("user", probePath+" get "+tc.url); !strings.Contains(out, tc.want) {
			t.Errorf("from the sandbox, GET %s: %q, want %q", tc.url, out, tc.want)
		}
	}
	if n := allowedConns.Load(); n == 0 {
		t.Error("the allowed server got no connection")
	}
	if n := deniedConns.Load(); n != 0 {
		t.Errorf("the denied server got %d connections", n)
	}
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// inotifyHogScript, run as root in a sandbox, creates inotify instances
// until the kernel refuses one (or it holds 4096, far beyond the host's
// 128 a user by default), writes how many it holds, and holds them.
const inotifyHogScript = `nohup python3 -c '
import ctypes, time
libc = ctypes.CDLL(None, use_errno=True)
fds = []
while len(fds) < 4096:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
open("/tmp/inotify-held.tmp", "w").write(str(len(fds)))
__import__("os").rename("/tmp/inotify-held.tmp", "/tmp/inotify-held")
time.sleep(600)
' >/dev/null 2>&1 &`

// Root in a sandbox is not root of the host where the engine maps a user
// namespace (dockerd --userns-remap, what scripts/dockerd.sh starts).
func TestDockerUserNamespace(t *testing.T) {
	eng, _ := dockerEngine(t)
	debian := debianImage(t)
	info, err := eng.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !info.UserNamespace {
		testutil.EngineLacks(t, "the engine at DOCKER_HOST maps no user namespace (start dockerd with --userns-remap=default, as scripts/dockerd.sh does)")
	}
	ts := startServer(t, eng)
	sb := ts.debianProbeSandbox(debian, "userns")
	if runtimeOf(t, eng).GVisor {
		t.Skip("under gVisor the sandbox sees the uid map of gVisor's own kernel")
	}
	out, code := sb.sh("root", "id -u; cat /proc/self/uid_map")
	fields := strings.Fields(out)
	if code != 0 || len(fields) != 4 || fields[0] != "0" || fields[1] != "0" || fields[2] == "0" {
		t.Fatalf("root in the sandbox: %q (exit %d), want uid 0 mapped to a host uid other than 0", out, code)
	}
}

// A sandbox that takes every inotify instance it can leaves the host's
// root able to create one, under gVisor. Under runc a user namespace does
// not separate them: the kernel counts a user namespace's inotify
// instances against its creator too, the engine's root (measured: a
// sandbox under userns-remap took all 128 and the host's root got EMFILE).
func TestDockerInotifyIsTheSandboxs(t *testing.T) {
	eng, _ := dockerEngine(t)
	debian := debianImage(t)
	ts := startServer(t, eng)
	sb := ts.debianProbeSandbox(debian, "inotify")
	if rt := runtimeOf(t, eng); !rt.GVisor {
		t.Skipf("the sandbox runs under %s: the kernel counts a user namespace's inotify instances against the engine's root, which creates it, so only gVisor separates them (docs/guides/sandbox-security.md)", rt.Name)
	}
	if os.Geteuid() != 0 {
		testutil.Missing(t, "the host side of the check must run as root")
	}
	if out, code := sb.sh("root", inotifyHogScript); code != 0 {
		t.Fatalf("start the inotify hog: %s", out)
	}
	held := ""
	for deadline := time.Now().Add(time.Minute); held == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		held, _ = sb.sh("root", "cat /tmp/inotify-held 2>/dev/null; true")
	}
	if n, err := strconv.Atoi(held); err != nil || n == 0 {
		t.Fatalf("the sandbox held %q inotify instances", held)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		t.Fatalf("the host's root cannot create an inotify instance while the sandbox holds %s: %v", held, err)
	}
	unix.Close(fd)
}

// debianProbeSandbox builds a template of name from the Debian image, with
// no steps, and starts a probe sandbox of it.
func (ts *testServer) debianProbeSandbox(debian, name string) *probeSandbox {
	ts.t.Helper()
	ts.readyTemplate(debian, name)
	return ts.probeSandbox(name)
}

// diskFillScript, run as root, writes 8 MiB files, ten a second, up to 2
// GiB, then prints that it wrote them all: a writer the disk limit must
// stop. A write that fails ends it with dd's error.
const diskFillScript = `i=0; while [ $i -lt 256 ]; do err=$(dd if=/dev/zero of=/fill.$i bs=1M count=8 2>&1) || { echo "$err"; exit 1; }; i=$((i+1)); sleep 0.1; done; echo wrote-2GiB`

// heldFillScript, run as root, writes up to 2 GiB into a file it deleted
// and holds open, which the engine's measure of a container's files
// (SizeRw) does not count, and prints dd's account ("N+0 records out":
// N MiB written).
const heldFillScript = `exec 3>/held; rm /held; dd if=/dev/zero bs=1M count=2048 >&3`

// diskFull tells whether out has a write's failure at a full disk or
// quota: ENOSPC (xfs project quotas) or EDQUOT (btrfs qgroups).
func diskFull(out string) bool {
	return strings.Contains(out, "No space left on device") || strings.Contains(out, "Disk quota exceeded")
}

// A sandbox and a RUN step that write past the disk limit do not get
// past it. Where the engine gives a hard limit (docker.probeDiskQuota),
// their writes fail, as root too, also into a file deleted and held open:
// the build fails naming the limit, the sandbox runs on. Elsewhere the
// watchdog stops them, counting the space of deleted files held open
// too: the sandbox goes with the reason in the server's log, the build
// fails naming the limit, and neither wrote what it meant to. E2B_TEST_HARD_DISK_LIMIT set: the engine must give a hard limit.
func TestDockerDiskLimit(t *testing.T) {
	const limitMB = 64
	eng, base := dockerEngineWith(t, func(o *docker.DockerOptions) { o.DiskSizeMB = limitMB })
	info, err := eng.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	hard := info.DiskLimit == engine.DiskLimitHard
	switch {
	case !hard && os.Getenv(testutil.EnvHardDiskLimit) != "":
		t.Fatalf("the engine's disk limit is %q, want %q (%s is set)", info.DiskLimit, engine.DiskLimitHard, testutil.EnvHardDiskLimit)
	case !hard && info.DiskLimit != engine.DiskLimitWatchdog:
		t.Fatalf("the engine's disk limit is %q, want %q or %q", info.DiskLimit, engine.DiskLimitHard, engine.DiskLimitWatchdog)
	}
	t.Logf("disk limit: %s", info.DiskLimit)
	var logs testutil.SyncBuffer
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }})

	t.Run("RUN step", func(t *testing.T) {
		reg, info := ts.buildFrom(base, "diskfill-build", e2b.TemplateStep{Type: "RUN", Args: []string{diskFillScript, "root"}})
		ts.deleteTemplateAtEnd(reg.TemplateID)
		if info.Status != "error" || info.Reason == nil {
			t.Fatalf("build = %+v, want an error naming the disk limit", info)
		}
		if hard {
			if !strings.Contains(info.Reason.Message, fmt.Sprintf("reached the disk limit of %d MiB", limitMB)) || !diskFull(info.Reason.Message) {
				t.Fatalf("build = %+v, want an error naming the disk limit and the failed write", info)
			}
			t.Logf("the RUN step failed: %s", info.Reason.Message)
			return
		}
		if !strings.Contains(info.Reason.Message, fmt.Sprintf("past the disk limit of %d MiB", limitMB)) {
			t.Fatalf("build = %+v, want an error naming the disk limit", info)
		}
		used := usedMiB(t, info.Reason.Message)
		if used >= 2048 {
			t.Errorf("the build container was stopped at %d MiB, after the whole write", used)
		}
		t.Logf("the build container was stopped at %d MiB of a %d MiB limit", used, limitMB)
	})

	templateID := ts.readyTemplate(base, "diskfill")

	t.Run("sandbox", func(t *testing.T) {
		sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: templateID})
		t.Cleanup(func() { ts.request("DELETE", "/sandboxes/"+sb.SandboxID, nil).Body.Close() })
		var metrics []e2b.SandboxMetric
		ts.call("GET", "/sandboxes/"+sb.SandboxID+"/metrics", nil, http.StatusOK, &metrics)
		if len(metrics) != 1 || metrics[0].DiskTotal != limitMB<<20 || metrics[0].DiskUsed <= 0 || metrics[0].DiskUsed > metrics[0].DiskTotal {
			t.Fatalf("metrics = %+v, want disk used within a total of %d MiB", metrics, limitMB)
		}
		c, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
		if err != nil {
			t.Fatal(err)
		}
		if hard {
			sbx := &probeSandbox{t: t, id: sb.SandboxID, client: c}
			started := time.Now()
			out, code := sbx.sh("root", diskFillScript)
			took := time.Since(started)
			if code == 0 || !diskFull(out) {
				t.Fatalf("writing 2 GiB past a %d MiB limit as root: exit %d, %q; want a failed write", limitMB, code, out)
			}
			written, _ := sbx.sh("root", "cat /fill.* | wc -c")
			n, err := strconv.ParseInt(strings.TrimSpace(written), 10, 64)
			if err != nil || n >= limitMB<<20 {
				t.Fatalf("the sandbox wrote %q bytes, want fewer than its limit of %d MiB", written, limitMB)
			}
			ts.call("GET", "/sandboxes/"+sb.SandboxID+"/metrics", nil, http.StatusOK, &metrics)
			if len(metrics) != 1 || metrics[0].DiskUsed > metrics[0].DiskTotal {
				t.Fatalf("metrics = %+v, want disk used within its total", metrics)
			}
			if out, code := sbx.sh("root", "rm /fill.* && echo freed > /freed && cat /freed"); code != 0 || strings.TrimSpace(out) != "freed" {
				t.Fatalf("the sandbox cannot write once it freed its disk: exit %d, %q", code, out)
			}
			t.Logf("the write failed after %s at %d MiB written (%d MiB used of %d MiB, image included): %s",
				took.Round(time.Millisecond), n>>20, metrics[0].DiskUsed>>20, limitMB, strings.TrimSpace(out))
			return
		}
		runAside(t, c, diskFillScript)
		line := ts.awaitStopped(t, sb.SandboxID, &logs)
		if !strings.Contains(line, fmt.Sprintf("past the disk limit of %d MiB", limitMB)) {
			t.Fatalf("the server's log does not say why the sandbox was stopped:\n%s", logs.String())
		}
		used := usedMiB(t, line)
		if used >= 2048 {
			t.Errorf("the sandbox was stopped at %d MiB, after the whole write", used)
		}
		t.Logf("the sandbox was stopped at %d MiB of a %d MiB limit", used, limitMB)
		var st unix.Statfs_t
		if err := unix.Statfs("/", &st); err != nil {
			t.Fatal(err)
		}
		if free := int64(st.Bavail) * st.Bsize; free < limitMB<<20 {
			t.Errorf("the host has %d bytes free, less than the limit's worth", free)
		}
	})

	t.Run("deleted file held open", func(t *testing.T) {
		sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: templateID})
		t.Cleanup(func() { ts.request("DELETE", "/sandboxes/"+sb.SandboxID, nil).Body.Close() })
		c, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
		if err != nil {
			t.Fatal(err)
		}
		if !hard {
			// The watchdog counts the space the deleted file holds while
			// it is held.
			runAside(t, c, heldFillScript+"; sleep 600")
			line := ts.awaitStopped(t, sb.SandboxID, &logs)
			m := regexp.MustCompile(`grew to (\d+) MiB \((\d+) MiB of them deleted but still open\), past the disk limit of (\d+) MiB`).FindStringSubmatch(line)
			if m == nil || m[3] != strconv.Itoa(limitMB) {
				t.Fatalf("the server's log does not say that the sandbox was stopped for its deleted files held open:\n%s", logs.String())
			}
			// An unthrottled write may end before a measure: what matters is
			// that the space it holds is counted.
			t.Logf("the sandbox was stopped at %s MiB (%s MiB deleted, held open) of a %d MiB limit", m[1], m[2], limitMB)
			return
		}
		sbx := &probeSandbox{t: t, id: sb.SandboxID, client: c}
		started := time.Now()
		out, code := sbx.sh("root", heldFillScript)
		took := time.Since(started)
		m := regexp.MustCompile(`(\d+)\+\d+ records out`).FindStringSubmatch(out)
		if code == 0 || !diskFull(out) || m == nil {
			t.Fatalf("writing 2 GiB into a deleted file held open, past a %d MiB limit, as root: exit %d, %q; want a failed write", limitMB, code, out)
		}
		if n, _ := strconv.Atoi(m[1]); n >= limitMB {
			t.Fatalf("the sandbox wrote %d MiB into a deleted file, want less than its limit of %d MiB", n, limitMB)
		}
		t.Logf("the write into a deleted file held open failed after %s at %s MiB written", took.Round(time.Millisecond), m[1])
	})
}

// usedMiB reads the size a disk overrun message reports ("grew to N MiB").
func usedMiB(t *testing.T, msg string) int {
	t.Helper()
	m := regexp.MustCompile(`grew to (\d+) MiB`).FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no size in %q", msg)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// sudoScript prints, as the template's user, who it is, who sudo makes
// it (or sudo's first line of refusal), and the effective capabilities of
// a process under sudo and of one of root's, a line each.
const sudoScript = `echo "who=$(id -un)"; echo "sudo=$(sudo -n id -u 2>&1 | head -n1)"; echo "sudo-caps=$(sudo -n grep CapEff /proc/self/status 2>&1 | head -n1)"; echo "root-caps=$(grep CapEff /proc/1/status)"`

// sudo works as on E2B where root in a container is not root of the host
// (gVisor, or the engine's user namespace): the template's user runs
// `sudo -n` in a build step and in a sandbox and becomes the container's
// root, with no capability more than its root has. Elsewhere (runc
// without a user namespace, runsc without --allow-suid) containers keep
// no-new-privileges, sudo says so, and a start-up warning names it.
func TestDockerSudo(t *testing.T) {
	eng, _ := dockerEngineWith(t, nil)
	info, err := eng.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := engine.SetuidAllowed(info.Runtime, info.UserNamespace, engine.NetworkNone); info.Setuid != want {
		t.Fatalf("the engine allows setuid programs: %v, want %v (runtime %+v, user namespace %v)", info.Setuid, want, info.Runtime, info.UserNamespace)
	}
	if warnings := hostRootWarning(info) + sudoWarning(info); !info.Setuid && !strings.Contains(warnings, "sudo") {
		t.Errorf("the start-up warnings do not say that sudo does not work: %q", warnings)
	}
	ts := startServer(t, eng)
	ts.readyTemplate(debianImage(t), "sudo", e2b.TemplateStep{Type: "RUN", Args: []string{"{ " + sudoScript + "; } > /home/user/in-build.txt"}})
	sb := ts.probeSandbox("sudo")
	inBuild, _ := sb.sh("user", "cat /home/user/in-build.txt")
	inSandbox, _ := sb.sh("user", sudoScript)
	for where, out := range map[string]string{"a build step": inBuild, "a sandbox": inSandbox} {
		got := map[string]string{}
		for line := range strings.Lines(out) {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
				got[k] = v
			}
		}
		if got["who"] != "user" {
			t.Fatalf("in %s, as the template's user:\n%s", where, out)
		}
		switch {
		case info.Setuid && (got["sudo"] != "0" || got["sudo-caps"] != got["root-caps"]):
			t.Errorf("in %s, sudo -n gives %q with %q; want uid 0 with root's %q", where, got["sudo"], got["sudo-caps"], got["root-caps"])
		case !info.Setuid && !strings.Contains(got["sudo"], "no new privileges"):
			t.Errorf("in %s, sudo -n says %q; want the no-new-privileges refusal", where, got["sudo"])
		}
	}
}

// agentKillScript, run as root in the background, kills the channel
// agent and then watches for 20 s for a new one to attack before it
// seals itself (the race of issue 33): it records every agent it sees in
// /agents-seen. "--chan[n]el" does not match the script's own command
// line.
const agentKillScript = `agents() { for p in /proc/[0-9]*; do tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -q -e '--chan[n]el' && echo "${p#/proc/}"; done; }
first=$(agents)
[ -n "$first" ] || { echo "no agent" >/agents-seen; exit 1; }
kill -9 $first
i=0; while [ $i -lt 200 ]; do for p in $(agents); do echo "$p" >>/agents-seen; done; sleep 0.1; i=$((i+1)); done`

// Root in a sandbox kills the channel agent and lies in wait for the next
// one, to read what the server sends before the agent protects itself:
// none comes. The server stops the sandbox, as when envd dies, and says
// why; the sandbox's next request fails, and its record ends.
func TestDockerChannelAgentKilled(t *testing.T) {
	eng, base := dockerEngine(t)
	var logs testutil.SyncBuffer
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }})
	ts.readyTemplate(base, "agent-killed")
	for round := range 3 {
		sb := ts.createPossiblyPooled("agent-killed")
		c, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
		if err != nil {
			t.Fatal(err)
		}
		insp := containerOf(t, sb.SandboxID)
		res, err := c.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", "setsid sh -c \"$0\" >/dev/null 2>&1 </dev/null & sleep 1", agentKillScript}, User: "root"})
		if err != nil && res == nil {
			t.Logf("round %d: the request that killed the agent: %v", round, err)
		}
		// The next request fails, and the sandbox ends.
		if _, err := c.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/true", Timeout: time.Minute}); err == nil {
			t.Errorf("round %d: a request after the agent was killed succeeded: a new agent was started", round)
		} else {
			t.Logf("round %d: the next request: %v", round, err)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for ts.request("GET", "/sandboxes/"+sb.SandboxID, nil).StatusCode != http.StatusNotFound {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the sandbox still answers after its agent was killed", round)
			}
			time.Sleep(200 * time.Millisecond)
		}
		// No exec was made in the container after the killed agent's.
		cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
		if err != nil {
			t.Fatal(err)
		}
		after, err := cli.ContainerInspect(t.Context(), insp.ID)
		cli.Close()
		if err == nil && len(after.ExecIDs) > len(insp.ExecIDs) {
			t.Errorf("round %d: %d execs in the container after the kill, %d before", round, len(after.ExecIDs), len(insp.ExecIDs))
		}
	}
	if n := strings.Count(logs.String(), "sandbox ended: its container exited"); n != 3 {
		t.Errorf("the server logged %d of the 3 sandboxes' ends:\n%s", n, logs.String())
	}
}
