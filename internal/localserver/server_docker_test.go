//go:build linux

package localserver

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/builds"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/sandboxes"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	dockerclient "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/docker"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// The tests in this file run builds and sandboxes on a real Docker engine.
// They need DOCKER_HOST and E2B_TEST_BASE_IMAGE (an offline base image with
// /bin/sh, e.g. e2b-test-base:latest) and are skipped otherwise.

var envdBinary struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if envdBinary.path != "" {
		os.RemoveAll(filepath.Dir(envdBinary.path))
	}
	os.Exit(code)
}

// buildEnvdBinary builds this module's binary once per test run as a static
// Linux executable: the Docker runtime mounts it into containers as envd.
func buildEnvdBinary(t *testing.T) string {
	t.Helper()
	envdBinary.once.Do(func() {
		// Not t.TempDir: the binary serves every test, and TestMain removes it.
		dir, err := os.MkdirTemp("", "lsenvd") //nolint:usetesting // outlives this test, see above
		if err != nil {
			envdBinary.err = err
			return
		}
		envdBinary.path = filepath.Join(dir, "terraform-provider-e2b")
		cmd := exec.Command("go", "build", "-o", envdBinary.path, "github.com/e2b-terraform/terraform-provider-e2b")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			envdBinary.err = fmt.Errorf("%w\n%s", err, out)
		}
	})
	if envdBinary.err != nil {
		t.Fatalf("build the envd binary: %v", envdBinary.err)
	}
	return envdBinary.path
}

// testBinary is a static Linux binary built once per test run, beside the
// envd binary (TestMain removes both).
type testBinary struct {
	once sync.Once
	path string
	err  error
}

// build builds the package pkg for linux/goarch as name.
func (b *testBinary) build(t *testing.T, name, pkg, goarch string) string {
	t.Helper()
	dir := filepath.Dir(buildEnvdBinary(t))
	b.once.Do(func() {
		b.path = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", b.path, pkg)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("%w\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatalf("build %s: %v", name, b.err)
	}
	return b.path
}

// dockerEngine returns the real Docker runtime, or skips the test when no
// engine is configured. The engine's containers are this test's own.
func dockerEngine(t *testing.T) (Engine, string) {
	t.Helper()
	return dockerEngineWith(t, nil)
}

// dockerEngineWith is dockerEngine with options adjusted by configure.
func dockerEngineWith(t *testing.T, configure func(*docker.DockerOptions)) (Engine, string) {
	t.Helper()
	baseImage := os.Getenv("E2B_TEST_BASE_IMAGE")
	if os.Getenv("DOCKER_HOST") == "" || baseImage == "" {
		testutil.Missing(t, "needs a Docker engine: set DOCKER_HOST and E2B_TEST_BASE_IMAGE (an offline image with /bin/sh)")
	}
	opts := docker.DockerOptions{
		EnvdBinaries: []string{buildEnvdBinary(t)}, Network: "none", Runtime: testutil.Runtime(),
		Instance: "lsd" + strings.ToLower(rand.Text()[:8]),
	}
	if configure != nil {
		configure(&opts)
	}
	eng, err := docker.NewDocker(t.Context(), opts)
	if err != nil {
		t.Fatalf("Docker engine at DOCKER_HOST=%s: %v", os.Getenv("DOCKER_HOST"), err)
	}
	t.Cleanup(func() {
		// The layer cache outlives servers; the test's must not outlive it.
		if err := eng.PruneLayers(context.Background(), 0); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		eng.Close()
		if _, err := docker.Prune(context.Background(), docker.PruneOptions{Instance: opts.Instance}); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return eng, baseImage
}

// dockerTemplate starts a server on the real engine, under the test's
// runtime (returned), with a template name built from the base image alone.
func dockerTemplate(t *testing.T, name string) (*testServer, engine.Runtime) {
	t.Helper()
	eng, baseImage := dockerEngine(t)
	rt := runtimeOf(t, eng)
	ts := startServer(t, eng)
	if _, info := ts.buildFrom(baseImage, name); info.Status != "ready" {
		t.Fatalf("build = %+v", info)
	}
	return ts, rt
}

// runtimeOf is the runtime the engine runs the server's containers under
// (E2B_TEST_RUNTIME), for checks that differ under gVisor.
func runtimeOf(t *testing.T, eng Engine) engine.Runtime {
	t.Helper()
	info, err := eng.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.Runtime.Name != testutil.Runtime() {
		t.Fatalf("the engine runs containers under %q, want %s (E2B_TEST_RUNTIME)", info.Runtime.Name, testutil.Runtime())
	}
	return info.Runtime
}

// A template built on Docker with COPY, RUN and ENV; a sandbox from it runs a
// command through the proxy; a failing RUN ends the build with its step.
func TestDockerBuildAndSandbox(t *testing.T) {
	eng, baseImage := dockerEngine(t)
	ts := startServer(t, eng)
	reg := ts.register("docker-app")
	hash := hashOf(0xd0c)
	putOK(t, ts.link(reg.TemplateID, hash).URL, testutil.Tarball(t, true, testutil.Dir("app/"), testutil.File("app/hello.txt", "hello from the context\n")))
	ts.start(reg, e2b.TemplateBuildStartV2{FromImage: baseImage, Steps: []e2b.TemplateStep{
		{Type: "COPY", Args: []string{"app", "/opt/app", "", ""}, FilesHash: hash},
		{Type: "ENV", Args: []string{"GREETING", "hi"}},
		// /tmp is part of the image under gVisor too (envd.TmpKeepFile),
		// and in a sandbox a directory of its root file system, not a
		// mount of its own, under both runtimes as on E2B.
		run(`echo built > "$HOME/built.txt"; echo in-tmp > /tmp/kept.txt`),
	}})
	if info := ts.waitBuild(reg); info.Status != "ready" {
		t.Fatalf("build = %+v", info)
	}

	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "docker-app", EnvVars: map[string]string{"K": "V"}})
	client, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", `cat /opt/app/hello.txt /home/user/built.txt /tmp/kept.txt; ls -A /tmp; awk '$2 == "/tmp" { print "mounted:", $3 }' /proc/mounts; echo "$GREETING $K"`}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "hello from the context\nbuilt\nin-tmp\nkept.txt\nhi V\n"; string(res.Stdout) != want || res.ExitCode != 0 {
		t.Errorf("run = %q (exit %d, stderr %q), want %q", res.Stdout, res.ExitCode, res.Stderr, want)
	}
	ts.call("DELETE", "/sandboxes/"+sb.SandboxID, nil, http.StatusNoContent, nil)

	failing := ts.register("docker-app")
	ts.start(failing, e2b.TemplateBuildStartV2{FromImage: baseImage, Steps: []e2b.TemplateStep{run("true"), run("echo doomed; exit 7")}})
	info := ts.waitBuild(failing)
	if info.Status != "error" || info.Reason == nil || info.Reason.Step != "2" {
		t.Fatalf("failing build = %+v", info)
	}
	all := ts.status(failing.TemplateID, failing.BuildID, "")
	joined := ""
	for _, e := range all.LogEntries {
		joined += e.Message + "\n"
	}
	if !strings.Contains(joined, "doomed") {
		t.Errorf("the failing step's output is not in the log:\n%s", joined)
	}
	// The failed rebuild did not take the tag from the good build.
	sb = ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "docker-app"})
	ts.call("DELETE", "/sandboxes/"+sb.SandboxID, nil, http.StatusNoContent, nil)
	// Deleting the template removes its image from the engine.
	ts.call("DELETE", "/templates/docker-app", nil, http.StatusNoContent, nil)
}

// A RUN step whose background process keeps its output holds the build, as
// on E2B, until the build's maximum time fails it with E2B's reason.
func TestDockerBuildEndsAtItsMaximumTime(t *testing.T) {
	eng, baseImage := dockerEngine(t)
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.MaxBuildTime = 5 * time.Second }})
	reg, info := ts.buildFrom(baseImage, "held", run("sleep 600 & echo held"))
	if info.Status != "error" || info.Reason == nil || info.Reason.Message != "build status polling timed out. Maximum build time is 5s." {
		t.Fatalf("build = %+v, want E2B's maximum build time reason", info)
	}
	joined := ""
	for _, e := range ts.status(reg.TemplateID, reg.BuildID, "").LogEntries {
		joined += e.Message + "\n"
	}
	if !strings.Contains(joined, "held") {
		t.Errorf("the held step's output is not in the log:\n%s", joined)
	}
}

var (
	cleanupsMu sync.Mutex
	cleanups   = map[string]bool{}
)

// startCommandServer starts `<binary> server` on Docker with a fresh data
// dir, for tests that kill it; it returns the base image, the binary, the
// data dir, the process and a client of it.
func startCommandServer(t *testing.T) (baseImage, binary, dataDir string, cmd *exec.Cmd, ts *testServer) {
	t.Helper()
	_, baseImage = dockerEngine(t)
	binary = buildEnvdBinary(t)
	dataDir = t.TempDir()
	cmd, info := startCommand(t, binary, dataDir)
	// Not validated by the contract check: this server is another process.
	ts = &testServer{t: t, URL: info.APIURL, client: http.DefaultClient, apiKey: info.APIKey}
	return baseImage, binary, dataDir, cmd, ts
}

// startCommand runs `<binary> server` on dataDir and waits for its
// server.json.
func startCommand(t *testing.T, binary, dataDir string) (*exec.Cmd, Info) {
	t.Helper()
	cmd, info, _ := startCommandLog(t, binary, dataDir)
	return cmd, info
}

// startCommandLog is startCommand that also returns the server's stderr.
func startCommandLog(t *testing.T, binary, dataDir string, extraArgs ...string) (*exec.Cmd, Info, *testutil.SyncBuffer) {
	t.Helper()
	os.Remove(filepath.Join(dataDir, InfoFile))
	// Names resolve through a loopback DNS server of the test's that knows
	// none: no look-up of a sandbox reaches the host's resolver.
	cmd := exec.Command(binary, append([]string{
		"server", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--network", "none", "--runtime", testutil.Runtime(),
		"--dns-upstream", testutil.DNSServer(t, nil),
	}, extraArgs...)...)
	// The instance's images go when the first test of the data dir ends.
	cleanupsMu.Lock()
	if !cleanups[dataDir] {
		cleanups[dataDir] = true
		t.Cleanup(func() {
			if _, err := docker.Prune(context.Background(), docker.PruneOptions{Instance: InstanceOf(dataDir)}); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	cleanupsMu.Unlock()
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		err := cmd.Process.Signal(os.Interrupt)
		if errors.Is(err, os.ErrProcessDone) {
			return // the test killed and reaped it
		}
		if err != nil {
			t.Errorf("interrupt the server: %v", err)
			return
		}
		if err := cmd.Wait(); err != nil {
			t.Errorf("server exit after SIGINT: %v; stderr:\n%s", err, stderr.String())
		}
	})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var info Info
		raw, err := os.ReadFile(filepath.Join(dataDir, InfoFile))
		if err == nil && json.Unmarshal(raw, &info) == nil && info.PID == cmd.Process.Pid {
			return cmd, info, stderr
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not start within 60 s; stderr:\n%s", stderr.String())
		}
	}
}

// Killing the server (SIGKILL) mid-build and starting it again loses no
// template, build, tag or archive; the interrupted build is failed and its
// container removed.
func TestDockerRestartAfterSIGKILL(t *testing.T) {
	baseImage, binary, dataDir, cmd, ts := startCommandServer(t)
	if ts.apiKey != readKey(t, dataDir) {
		t.Fatal("server.json and the kept API key disagree")
	}

	good, goodInfo := ts.buildFrom(baseImage, "killed", run("true"))
	if goodInfo.Status != "ready" {
		t.Fatalf("first build = %+v", goodInfo)
	}
	hash := hashOf(0x5161)
	putOK(t, ts.link(good.TemplateID, hash).URL, testutil.Tarball(t, true, testutil.File("f", "kept")))
	running := ts.register("killed")
	ts.start(running, e2b.TemplateBuildStartV2{FromImage: baseImage, Steps: []e2b.TemplateStep{run("sleep 600")}})
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := ts.status(running.TemplateID, running.BuildID, "")
		// The step's line comes before its container starts.
		if st.Status == "building" && len(st.LogEntries) > 0 && st.LogEntries[len(st.LogEntries)-1].Step == "1" && buildContainers(t, running.BuildID) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("build did not reach its RUN step: %+v", st)
		}
	}
	if n := buildContainers(t, running.BuildID); n != 1 {
		t.Fatalf("%d containers run the build, want 1", n)
	}
	// A sandbox that lives through the restart: the new server opens a new
	// channel to it.
	survivor := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "killed", Timeout: int32p(600)})
	// A paused sandbox lives through it too, frozen with its processes.
	frozen := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "killed", Timeout: int32p(600)})
	frozenClient, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: frozen.SandboxID, AccessToken: frozen.EnvdAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := frozenClient.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", `echo kept > /tmp/f; sleep 600 >/dev/null 2>&1 & echo $! > /tmp/pid`}}); err != nil {
		t.Fatal(err)
	}
	ts.call("POST", "/sandboxes/"+frozen.SandboxID+"/pause", nil, http.StatusNoContent, nil)
	// The warm pool (on by default) holds containers of the template too.
	ts.waitPooledStat(sandboxes.DefaultPoolSizePerBuild)
	for deadline := time.Now().Add(time.Minute); len(instanceSandboxContainers(t, dataDir)) < 2+sandboxes.DefaultPoolSizePerBuild; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox containers before the kill: %v, want the 2 sandboxes' and the pool's %d", instanceSandboxContainers(t, dataDir), sandboxes.DefaultPoolSizePerBuild)
		}
	}
	// What a SIGKILL during the commit of the running build leaves: its
	// image, which no ready build owns.
	instance := InstanceOf(dataDir)
	orphanImage := "e2b-local/" + strings.ToLower(running.TemplateID) + ":" + strings.ToLower(running.BuildID)
	plantImage(t, baseImage, orphanImage, map[string]string{
		"e2b-local.instance": instance, "e2b-local.kind": "image",
		"e2b-local.template-id": running.TemplateID, "e2b-local.build-id": running.BuildID,
	})
	// An image of another server on the same engine is not ours.
	otherImage := "e2b-local/" + strings.ToLower(running.TemplateID) + ":other"
	plantImage(t, baseImage, otherImage, map[string]string{
		"e2b-local.instance": "another-server", "e2b-local.kind": "image",
		"e2b-local.template-id": running.TemplateID, "e2b-local.build-id": "other",
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); !errors.As(err, new(*exec.ExitError)) {
		t.Fatalf("waiting for the killed server: %v", err)
	}

	_, info := startCommand(t, binary, dataDir)
	ts.URL = info.APIURL
	st := ts.status(running.TemplateID, running.BuildID, "")
	if st.Status != "error" || st.Reason == nil || st.Reason.Message != builds.ReasonRestarted {
		t.Errorf("interrupted build = %+v", st)
	}
	if n := buildContainers(t, running.BuildID); n != 0 {
		t.Errorf("%d containers of the interrupted build survived the restart", n)
	}
	// The pool's containers went with their records: only the sandboxes'
	// remain.
	if got, want := instanceSandboxContainers(t, dataDir), slices.Sorted(slices.Values([]string{survivor.SandboxID, frozen.SandboxID})); !slices.Equal(got, want) {
		t.Errorf("sandbox containers after the restart: %v, want only %v", got, want)
	}
	var stats store.Stats
	ts.call("GET", "/_local/stats", nil, http.StatusOK, &stats)
	if stats.Pooled != 0 {
		t.Errorf("the restarted server records %d pooled containers, want 0 (none was used since)", stats.Pooled)
	}
	if imageExists(t, orphanImage) {
		t.Errorf("the image %s that no build owns survived the restart", orphanImage)
	}
	if !imageExists(t, otherImage) {
		t.Errorf("another server's image %s was removed", otherImage)
	}
	// The list names default's newest assignment, the interrupted build (as
	// E2B's); the template still resolves to the good build.
	var tags []e2b.TemplateTag
	ts.call("GET", "/templates/killed/tags", nil, 200, &tags)
	if len(tags) != 1 || tags[0].BuildID != running.BuildID {
		t.Errorf("tags after restart = %+v, want default at the interrupted build %s", tags, running.BuildID)
	}
	ts.expectTemplateBuild(good.TemplateID, good.BuildID)
	if link := ts.link(good.TemplateID, hash); !link.Present {
		t.Error("the stored archive was lost")
	}
	survivorClient, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: survivor.SandboxID, AccessToken: survivor.EnvdAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	res, err := survivorClient.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", "echo survived"}})
	if err != nil || string(res.Stdout) != "survived\n" {
		t.Errorf("the sandbox kept across the restart: %v %+v", err, res)
	}
	ts.call("DELETE", "/sandboxes/"+survivor.SandboxID, nil, http.StatusNoContent, nil)
	var detail e2b.SandboxDetail
	ts.call("GET", "/sandboxes/"+frozen.SandboxID, nil, http.StatusOK, &detail)
	if detail.State != "paused" {
		t.Errorf("the paused sandbox after the restart is %s", detail.State)
	}
	ts.call("POST", "/v2/sandboxes/"+frozen.SandboxID+"/connect", nil, http.StatusCreated, nil)
	frozenClient, err = envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: frozen.SandboxID, AccessToken: frozen.EnvdAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	res, err = frozenClient.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", `kill -0 "$(cat /tmp/pid)" && cat /tmp/f`}})
	if err != nil || string(res.Stdout) != "kept\n" {
		t.Errorf("the paused sandbox resumed after the restart: %v %+v", err, res)
	}
	ts.call("DELETE", "/sandboxes/"+frozen.SandboxID, nil, http.StatusNoContent, nil)
	// The template still runs sandboxes.
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "killed"})
	ts.call("DELETE", "/sandboxes/"+sb.SandboxID, nil, http.StatusNoContent, nil)
	ts.call("DELETE", "/templates/killed", nil, http.StatusNoContent, nil)
}

func readKey(t *testing.T, dataDir string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dataDir, apiKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(raw))
}

// buildContainers counts the containers (running or not) of a build.
func buildContainers(t *testing.T, buildID string) int {
	t.Helper()
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	list, err := cli.ContainerList(t.Context(), container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "e2b-local.build-id="+buildID))})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

func testDockerClient(t *testing.T) *dockerclient.Client {
	t.Helper()
	cli, err := dockerclient.NewClientWithOpts(dockerclient.FromEnv, dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// plantImage commits a container of base as ref with labels, and removes
// ref when the test ends.
func plantImage(t *testing.T, base, ref string, labels map[string]string) {
	t.Helper()
	cli := testDockerClient(t)
	c, err := cli.ContainerCreate(t.Context(), &container.Config{Image: base, Cmd: []string{"true"}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true}) }()
	if _, err := cli.ContainerCommit(t.Context(), c.ID, container.CommitOptions{Reference: ref, Config: &container.Config{Labels: labels}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = cli.ImageRemove(context.Background(), ref, image.RemoveOptions{}) })
}

func imageExists(t *testing.T, ref string) bool {
	t.Helper()
	_, err := testDockerClient(t).ImageInspect(t.Context(), ref)
	if err != nil && !cerrdefs.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// Host networking is an opt-in that the server warns about at start-up;
// the default logs the network namespace and the egress policy.
func TestDockerHostNetworkWarns(t *testing.T) {
	dockerEngine(t) // skips without an engine
	binary := buildEnvdBinary(t)
	_, _, stderr := startCommandLog(t, binary, t.TempDir(), "--network", "host")
	if log := stderr.String(); !strings.Contains(log, "level=WARN") || !strings.Contains(log, "--network host") || !strings.Contains(log, "egress=\"unfiltered (host network)\"") {
		t.Errorf("no host-network warning at start-up:\n%s", log)
	}
	_, _, stderr = startCommandLog(t, binary, t.TempDir(), "--egress-allow", "10.0.0.5:5000")
	if log := stderr.String(); len(testutil.UnexpectedWarnings(log, "root in a sandbox is root of this host")) > 0 || !strings.Contains(log, "network=none") || !strings.Contains(log, `egress="public + allow 10.0.0.5:5000"`) {
		t.Errorf("default start-up log:\n%s", log)
	}
}

// A sandbox's container stops at the sandbox's end on its own while the
// server is down, and a timeout change moves that end.
func TestDockerSandboxDeadlineWhileServerIsDown(t *testing.T) {
	baseImage, binary, dataDir, cmd, ts := startCommandServer(t)
	if _, st := ts.buildFrom(baseImage, "deadline", run("true")); st.Status != "ready" {
		t.Fatalf("build = %+v", st)
	}
	// Ends far enough apart that a loaded machine's slow starts do not
	// blur them; each check is against the end the server recorded (to
	// the second: the API's precision).
	short := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "deadline", Timeout: int32p(15)})
	moved := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "deadline", Timeout: int32p(15)})
	ts.call("POST", "/sandboxes/"+moved.SandboxID+"/timeout", map[string]any{"timeout": 45}, http.StatusNoContent, nil)
	shortEnd, movedEnd := ts.detail(short.SandboxID).EndAt, ts.detail(moved.SandboxID).EndAt
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	stopped := func(id string, end time.Time) time.Time {
		t.Helper()
		for deadline := end.Add(time.Minute); sandboxRunning(t, id); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("sandbox %s still runs a minute past its end while the server is down", id)
			}
		}
		return time.Now()
	}
	if at := stopped(short.SandboxID, shortEnd); at.Before(shortEnd.Add(-time.Second)) {
		t.Errorf("a sandbox stopped at %v, before its end %v", at, shortEnd)
	}
	if now := time.Now(); now.Before(movedEnd) && !sandboxRunning(t, moved.SandboxID) {
		t.Errorf("a sandbox whose end was moved to %v stopped by %v", movedEnd, now)
	}
	if at := stopped(moved.SandboxID, movedEnd); at.Before(movedEnd.Add(-time.Second)) {
		t.Errorf("a sandbox stopped at %v, before its moved end %v", at, movedEnd)
	}
	// The restart removes the stopped containers.
	_, info := startCommand(t, binary, dataDir)
	ts.URL = info.APIURL
	ts.call("DELETE", "/templates/deadline", nil, http.StatusNoContent, nil)
}

// sandboxRunning reports whether a container of the sandbox is running.
func sandboxRunning(t *testing.T, sandboxID string) bool {
	t.Helper()
	list, err := testDockerClient(t).ContainerList(t.Context(), container.ListOptions{Filters: filters.NewArgs(filters.Arg("label", "e2b-local.sandbox-id="+sandboxID))})
	if err != nil {
		t.Fatal(err)
	}
	return len(list) > 0
}

// TestDockerPauseMetricsAndLogs pauses a real sandbox and resumes it through
// connect: its file and a background process are still there. Metrics come
// from the engine's stats, logs from envd's output.
func TestDockerPauseMetricsAndLogs(t *testing.T) {
	eng, baseImage := dockerEngine(t)
	ts := startServer(t, eng)
	if _, info := ts.buildFrom(baseImage, "docker-pause"); info.Status != "ready" {
		t.Fatalf("build = %+v", info)
	}
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "docker-pause", EnvVars: map[string]string{"K": "V"}})
	t.Cleanup(func() { _ = eng.StopSandbox(context.WithoutCancel(t.Context()), sb.SandboxID) })
	client, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	sh := func(script string) string {
		t.Helper()
		res, err := client.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", script}})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("%s: exit %d: %s", script, res.ExitCode, res.Stderr)
		}
		return strings.TrimSpace(string(res.Stdout))
	}
	sh(`echo kept > /tmp/f; sleep 600 >/dev/null 2>&1 & echo $! > /tmp/pid`)

	var metrics []e2b.SandboxMetric
	ts.call("GET", "/sandboxes/"+sb.SandboxID+"/metrics", nil, http.StatusOK, &metrics)
	if len(metrics) != 1 || metrics[0].CPUCount < 1 || metrics[0].MemTotal != 1024<<20 || metrics[0].MemUsed <= 0 || metrics[0].DiskUsed <= 0 {
		t.Errorf("metrics = %+v, want one sample of 1 GiB with memory and disk in use", metrics)
	}
	var logs e2b.SandboxLogsV2Response
	ts.call("GET", "/v2/sandboxes/"+sb.SandboxID+"/logs?direction=forward&search=listening", nil, http.StatusOK, &logs)
	if len(logs.Logs) != 1 || logs.Logs[0].Fields["logger"] != "envd" {
		t.Errorf("logs = %+v, want envd's listening line", logs.Logs)
	}
	ts.call("GET", "/v2/sandboxes/"+sb.SandboxID+"/logs?direction=forward&search=started", nil, http.StatusOK, &logs)
	if len(logs.Logs) != 1 || logs.Logs[0].Level != "info" || logs.Logs[0].Fields["event_type"] != "process_start" ||
		logs.Logs[0].Fields["logger"] != "process" || !strings.HasPrefix(logs.Logs[0].Fields["command"], "/bin/sh -c echo kept") {
		t.Errorf("logs = %+v, want envd's line of the process started", logs.Logs)
	}
	// The CLI's `sandbox logs` reads the raw lines of the v1 logs.
	var v1 e2b.SandboxLogs
	ts.call("GET", "/sandboxes/"+sb.SandboxID+"/logs", nil, http.StatusOK, &v1)
	started := 0
	for _, l := range v1.Logs {
		if strings.Contains(l.Line, `"event_type":"process_start"`) {
			started++
			if strings.Count(l.Line, `"logger":`) != 1 || !strings.Contains(l.Line, `"logger":"process"`) || !strings.Contains(l.Line, `"level":"info"`) {
				t.Errorf("raw line of the process start = %s, want level info and logger process, once", l.Line)
			}
		}
	}
	if started != 1 {
		t.Errorf("v1 logs = %+v, want one process start", v1.Logs)
	}

	ts.call("POST", "/sandboxes/"+sb.SandboxID+"/pause", nil, http.StatusNoContent, nil)
	if insp := containerOf(t, sb.SandboxID); insp.State == nil || !insp.State.Paused {
		t.Fatalf("container after pause: %+v, want paused", insp.State)
	}
	expectError(t, ts.request("GET", "/health", nil, "E2b-Sandbox-Id", sb.SandboxID, "E2b-Sandbox-Port", "49983"), http.StatusBadGateway, "is paused")
	ts.call("GET", "/sandboxes/"+sb.SandboxID+"/metrics", nil, http.StatusOK, &metrics)
	if len(metrics) != 1 || metrics[0].MemUsed <= 0 {
		t.Errorf("metrics while paused = %+v, want the frozen memory", metrics)
	}

	ts.call("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", e2b.ConnectSandbox{Timeout: int32p(120)}, http.StatusCreated, nil)
	if got := sh(`kill -0 "$(cat /tmp/pid)" && cat /tmp/f`); got != "kept" {
		t.Errorf("after resume: %q, want the file and the process kept", got)
	}

	// A restart of the engine stops the paused container: connect boots it
	// again from its file system, with its env. Under gVisor a frozen
	// sandbox that is killed leaves runsc's state behind and the engine
	// cannot start the container again ("id already in use": a limit of
	// runsc under Docker, in the security guide), so there the container
	// is thawed before it is killed.
	ts.call("POST", "/sandboxes/"+sb.SandboxID+"/pause", nil, http.StatusNoContent, nil)
	docker := testDockerClient(t)
	stopped := containerOf(t, sb.SandboxID).ID
	if runtimeOf(t, eng).GVisor {
		if err := docker.ContainerUnpause(t.Context(), stopped); err != nil {
			t.Fatal(err)
		}
	}
	if err := docker.ContainerKill(t.Context(), stopped, "KILL"); err != nil {
		t.Fatal(err)
	}
	for insp := containerOf(t, sb.SandboxID); insp.State.Running; insp = containerOf(t, sb.SandboxID) {
		time.Sleep(50 * time.Millisecond)
	}
	ts.call("POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", nil, http.StatusCreated, nil)
	// (Not the process: in the new PID namespace its number may be taken.)
	if got := sh(`cat /tmp/f; echo "$K"`); got != "kept\nV" {
		t.Errorf("after a boot again: %q, want the file and the env kept", got)
	}

	ts.call("POST", "/sandboxes/"+sb.SandboxID+"/pause", nil, http.StatusNoContent, nil)
	ts.call("DELETE", "/sandboxes/"+sb.SandboxID, nil, http.StatusNoContent, nil)
	if sandboxRunning(t, sb.SandboxID) {
		t.Error("the killed paused sandbox's container is still there")
	}
	ts.call("DELETE", "/templates/docker-pause", nil, http.StatusNoContent, nil)
}

// TestDockerSnapshot snapshots a real sandbox: a sandbox of the snapshot
// has its files, belongs to itself (killing the source leaves it), and
// deleting the snapshot template removes the image.
func TestDockerSnapshot(t *testing.T) {
	eng, baseImage := dockerEngine(t)
	ts := startServer(t, eng)
	if _, info := ts.buildFrom(baseImage, "docker-snap-src"); info.Status != "ready" {
		t.Fatalf("build = %+v", info)
	}
	run := func(sb e2b.Sandbox, script string) string {
		t.Helper()
		client, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
		if err != nil {
			t.Fatal(err)
		}
		res, err := client.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", script}})
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(res.Stdout))
	}
	src := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "docker-snap-src"})
	run(src, `echo snapped > /home/user/snap.txt`)

	var info e2b.SnapshotInfo
	ts.call("POST", "/sandboxes/"+src.SandboxID+"/snapshots", e2b.SandboxSnapshotRequest{Name: strp("docker-snap")}, http.StatusCreated, &info)
	if got := run(src, `cat /home/user/snap.txt`); got != "snapped" {
		t.Errorf("the source sandbox after the snapshot: %q", got)
	}
	snaps, err := ts.Server.Store().Catalog.Snapshots(src.SandboxID, "", "")
	if err != nil || len(snaps) != 1 {
		t.Fatalf("snapshots = %+v, %v", snaps, err)
	}
	build := snaps[0].Build
	img, err := testDockerClient(t).ImageInspect(t.Context(), build.Result.Image)
	if err != nil {
		t.Fatal(err)
	}
	if l := img.Config.Labels; l["e2b-local.kind"] != "image" || l["e2b-local.sandbox-id"] != "" || l["e2b-local.build-id"] != build.ID {
		t.Errorf("snapshot image labels = %v", l)
	}

	from := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: info.SnapshotID})
	ts.call("DELETE", "/sandboxes/"+src.SandboxID, nil, http.StatusNoContent, nil)
	if got := run(from, `cat /home/user/snap.txt; id -un`); got != "snapped\nuser" {
		t.Errorf("a sandbox of the snapshot: %q, want the file and the template's user", got)
	}
	ts.call("DELETE", "/sandboxes/"+from.SandboxID, nil, http.StatusNoContent, nil)
	ts.call("DELETE", "/templates/docker-snap", nil, http.StatusNoContent, nil)
	if imageExists(t, build.Result.Image) {
		t.Errorf("the snapshot's image %s outlived its template", build.Result.Image)
	}
	ts.call("DELETE", "/templates/docker-snap-src", nil, http.StatusNoContent, nil)
}
