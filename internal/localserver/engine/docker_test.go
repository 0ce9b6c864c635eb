package engine

import (
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	docker "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/buildcontext"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// The Docker tests need an engine (DOCKER_HOST) and a base image without
// registry access: E2B_TEST_BASE_IMAGE, by default a busybox-static root
// file system, which exercises the no-bash and no-useradd fallbacks.
var dockerEnv struct {
	skip      string // why Docker tests skip; empty when they run
	envdBin   string
	baseImage string
}

func TestMain(m *testing.M) {
	code, err := runTests(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runTests(m *testing.M) (int, error) {
	dockerEnv.baseImage = os.Getenv("E2B_TEST_BASE_IMAGE")
	if dockerEnv.baseImage == "" {
		dockerEnv.baseImage = "e2b-test-base:latest"
	}
	if reason := dockerUnavailable(dockerEnv.baseImage); reason != "" {
		dockerEnv.skip = reason
		return m.Run(), nil
	}
	dir, err := os.MkdirTemp("", "runtime-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if dockerEnv.envdBin, err = buildEnvd(dir); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// dockerUnavailable says why the Docker tests cannot run, or "".
func dockerUnavailable(baseImage string) string {
	if os.Getenv("DOCKER_HOST") == "" {
		return "DOCKER_HOST is not set: Docker tests need an engine"
	}
	cli, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
	if err != nil {
		return "Docker client: " + err.Error()
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		return "no Docker engine answers at DOCKER_HOST: " + err.Error()
	}
	if _, err := cli.ImageInspect(ctx, baseImage); err != nil {
		return fmt.Sprintf("base image %s (E2B_TEST_BASE_IMAGE) is not on the engine: %v", baseImage, err)
	}
	return ""
}

// buildEnvd builds the provider binary as a static Linux executable and
// checks that it has the envd subcommand.
func buildEnvd(dir string) (string, error) {
	root, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	bin := filepath.Join(dir, "e2b")
	cmd := exec.Command("go", "build", "-o", bin, strings.TrimSpace(string(root)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the provider binary: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "envd", "--version").Output()
	if got := strings.TrimSpace(string(out)); err != nil || got != envd.Version {
		return "", fmt.Errorf("the provider binary's envd subcommand answers %q (%v), want version %s", got, err, envd.Version)
	}
	return bin, nil
}

// TestCloseRemovesUnusedEnvdVolume: a server that closes with no sandbox left leaves
// no envd volume behind (its data directory may be deleted next).
func TestCloseRemovesUnusedEnvdVolume(t *testing.T) {
	d := newTestDocker(t, "")
	holder := d.envdVolumes[d.engineArch].holder
	cli, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.ContainerInspect(t.Context(), holder); err != nil {
		t.Fatalf("envd volume holder before Close: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := cli.ContainerInspect(t.Context(), holder); !isNotFound(err) {
		t.Errorf("envd volume holder %s after Close: %v, want it removed", shortID(holder), err)
	}
}

// The server holds one envd volume per architecture its images need, made
// when first needed (an arm64 image on an amd64 engine: emulation runs it,
// and it needs the arm64 build), keeps them while it runs and removes them
// all at Close. Nothing runs from the arm64 image here, so the arm64
// build is an ELF header and no emulation is needed.
func TestEnvdVolumePerArchitecture(t *testing.T) {
	arm64Image := os.Getenv("E2B_TEST_ARM64_IMAGE")
	if arm64Image == "" {
		testutil.Missing(t, "needs E2B_TEST_ARM64_IMAGE, an offline linux/arm64 image (scripts/test-image.sh arm64)")
	}
	arm := filepath.Join(t.TempDir(), "envd-arm64")
	writeELF(t, arm, elf.EM_AARCH64)
	d := newTestDockerWith(t, func(o *DockerOptions) { o.EnvdBinaries = append(o.EnvdBinaries, arm) })
	if d.engineArch != "amd64" {
		t.Skipf("needs an amd64 engine; this one is %s", d.engineArch)
	}
	engineHolder := d.envdVolumes["amd64"].holder

	armHolder, err := d.envdVolumeFor(t.Context(), arm64Image)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := d.envdVolumeFor(t.Context(), arm64Image); err != nil || again != armHolder {
		t.Errorf("second arm64 image: %s, %v; want the same volume %s", again, err, armHolder)
	}
	if got, err := d.envdVolumeFor(t.Context(), dockerEnv.baseImage); err != nil || got != engineHolder {
		t.Errorf("amd64 image: %s, %v; want the engine's volume %s", got, err, engineHolder)
	}
	if armHolder == engineHolder {
		t.Fatal("arm64 and amd64 images share one envd volume")
	}
	cli, err := docker.NewClientWithOpts(docker.FromEnv, docker.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if err := d.RemoveOrphans(t.Context(), nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{engineHolder, armHolder} {
		if _, err := cli.ContainerInspect(t.Context(), h); err != nil {
			t.Errorf("envd volume %s in use after RemoveOrphans: %v", shortID(h), err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, h := range []string{engineHolder, armHolder} {
		if _, err := cli.ContainerInspect(t.Context(), h); !isNotFound(err) {
			t.Errorf("envd volume %s after Close: %v, want it removed", shortID(h), err)
		}
	}
}

// newTestDocker connects an engine whose containers only this test sees,
// with containers on network ("" for the default, none).
func newTestDocker(t testing.TB, network string) *Docker {
	t.Helper()
	return newTestDockerWith(t, func(o *DockerOptions) { o.Network = network })
}

// newTestDockerWith is newTestDocker with options adjusted by configure.
func newTestDockerWith(t testing.TB, configure func(*DockerOptions)) *Docker {
	t.Helper()
	if dockerEnv.skip != "" {
		testutil.Missing(t, "%s", dockerEnv.skip)
	}
	opts := DockerOptions{
		EnvdBinaries:  []string{dockerEnv.envdBin},
		Runtime:       testutil.Runtime(),
		LabelPrefix:   "e2b-runtime-test",
		Instance:      randomID("inst"),
		ReadyInterval: 200 * time.Millisecond,
	}
	configure(&opts)
	d, err := NewDocker(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The layers first: build images they are built on go with them.
		if err := d.PruneLayers(context.Background(), 0); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := d.RemoveOrphans(context.Background(), nil, nil); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := d.removeEnvdVolumes(context.Background(), false); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		d.Close()
	})
	return d
}

// removeImageAtEnd removes image when the test ends.
func removeImageAtEnd(t *testing.T, d *Docker, image string) {
	t.Cleanup(func() {
		if err := d.RemoveImage(context.Background(), image); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

// removeContainerAtEnd removes the container when the test ends.
func removeContainerAtEnd(t *testing.T, d *Docker, containerID string) {
	t.Cleanup(func() {
		if err := d.removeContainer(t.Context(), containerID); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

func randomID(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// buildLog collects a build's log entries.
type buildLog struct {
	mu      sync.Mutex
	entries []e2b.BuildLogEntry
	onLine  func(e2b.BuildLogEntry)
}

func (l *buildLog) add(e e2b.BuildLogEntry) {
	l.mu.Lock()
	l.entries = append(l.entries, e)
	l.mu.Unlock()
	if l.onLine != nil {
		l.onLine(e)
	}
}

// has reports whether step logged a line containing text.
func (l *buildLog) has(step, text string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range l.entries {
		if e.Step == step && strings.Contains(e.Message, text) {
			return true
		}
	}
	return false
}

func (l *buildLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, e := range l.entries {
		fmt.Fprintf(&b, "[%s %s] %s\n", e.Step, e.Level, e.Message)
	}
	return b.String()
}

// contextArchive archives what COPY src takes from dir, as the provider
// uploads it.
func contextArchive(t *testing.T, dir, src string) string {
	t.Helper()
	p, _ := spoolContext(t, dir, src)
	return p
}

// spoolContext hashes and archives what COPY src takes from dir as the
// provider does at apply, and returns the archive's path and size.
func spoolContext(t testing.TB, dir, src string) (string, int64) {
	t.Helper()
	sum, err := buildcontext.StreamPortableHash(t.Context(), dir, src, "/", buildcontext.ListOptions{}, buildcontext.HashOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, size, err := buildcontext.SpoolArchive(t.TempDir(), src, func(w io.Writer) error {
		return buildcontext.WriteStepArchive(t.Context(), w, dir, src, "/", buildcontext.ListOptions{},
			buildcontext.ArchiveCheck{PortableHash: sum.Hash})
	})
	if err != nil {
		t.Fatal(err)
	}
	return p, size
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// containers lists the test instance's containers.
func containers(t *testing.T, d *Docker) []container.Summary {
	t.Helper()
	list, err := d.list(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// sandboxClient talks to a sandbox's envd through its channel with token.
func sandboxClient(d *Docker, sb *Sandbox, token string) *client.Client {
	return newEnvdClient(func(ctx context.Context) (net.Conn, error) { return d.DialSandbox(ctx, sb.ID, envd.Port) }, token)
}

// noBindMounts fails the test when the container mounts a host path.
func noBindMounts(t *testing.T, d *Docker, containerID string) {
	t.Helper()
	insp, err := d.cli.ContainerInspect(t.Context(), containerID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range insp.Mounts {
		if m.Type == mount.TypeBind {
			t.Errorf("container %s bind-mounts %s at %s", shortID(containerID), m.Source, m.Destination)
		}
	}
	if len(insp.HostConfig.Binds) > 0 {
		t.Errorf("container %s has binds %v", shortID(containerID), insp.HostConfig.Binds)
	}
}

// sh runs a script with /bin/sh in the sandbox as user (empty: the
// default user).
func sh(t *testing.T, c *client.Client, user, script string) (string, int) {
	t.Helper()
	res, err := c.Run(t.Context(), client.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", script}, User: user, Timeout: time.Minute})
	if err != nil {
		t.Fatalf("running %q: %v", script, err)
	}
	return string(res.Stdout) + string(res.Stderr), res.ExitCode
}

func TestInfoAndMissingEngine(t *testing.T) {
	d := newTestDocker(t, "")
	info, err := d.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if info.ServerVersion == "" || info.APIVersion == "" || info.Runtime.Name != testutil.Runtime() {
		t.Errorf("incomplete engine info %+v", info)
	}

	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(t.TempDir(), "none.sock"))
	_, err = NewDocker(t.Context(), DockerOptions{EnvdBinaries: []string{dockerEnv.envdBin}})
	if err == nil || !strings.Contains(err.Error(), "no Docker engine answers at unix://") || !strings.Contains(err.Error(), "(DOCKER_HOST)") ||
		strings.Count(err.Error(), "none.sock") != 1 {
		t.Fatalf("error %v, want one saying once that no engine answers at DOCKER_HOST", err)
	}
}

// TestBuildAndSandbox runs one build through every step type and checks
// what a sandbox of the result sees.
func TestBuildAndSandbox(t *testing.T) {
	d := newTestDocker(t, "")
	ctxDir := t.TempDir()
	writeFiles(t, ctxDir, map[string]string{
		"top.txt":       "top\n",
		"app/a.txt":     "a\n",
		"app/sub/b.txt": "b\n",
		"src/x.js":      "x\n",
		"src/y.js":      "y\n",
		"src/z.css":     "z\n",
	})
	if err := os.Symlink("a.txt", filepath.Join(ctxDir, "app", "link")); err != nil {
		t.Fatal(err)
	}
	archives := map[string]string{
		"top": contextArchive(t, ctxDir, "top.txt"),
		"app": contextArchive(t, ctxDir, "app"),
		"js":  contextArchive(t, ctxDir, "src/*.js"),
	}
	copyStep := func(hash, src, dest, user, mode string) e2b.TemplateStep {
		return e2b.TemplateStep{Type: "COPY", Args: []string{src, dest, user, mode}, FilesHash: hash}
	}
	var log buildLog
	spec := BuildSpec{
		TemplateID: randomID("tpl"),
		BuildID:    randomID("build"),
		BaseImage:  dockerEnv.baseImage,
		Steps: []e2b.TemplateStep{
			{Type: "WORKDIR", Args: []string{"/app"}},                                                          // 1
			{Type: "ENV", Args: []string{"GREETING", "hello", "NAME", "$GREETING world", "LIT", "$(echo no)"}}, // 2
			copyStep("top", "top.txt", "/etc/top.txt", "", ""),                                                 // 3: file to a new name
			copyStep("app", "app", "dest/", "root", "0750"),                                                    // 4: directory, relative dest
			copyStep("js", "src/*.js", "/js/", "", ""),                                                         // 5: glob into a directory
			copyStep("top", "top.txt", "/app", "", ""),                                                         // 6: file into an existing dir
			copyStep("app", "app", "/js", "root", ""),                                                          // 7: merge into an existing dir
			copyStep("top", "top.txt", "/", "", ""),                                                            // 8: into the root
			{Type: "RUN", Args: []string{`echo "run $GREETING" > out.txt && echo visible-output`}},             // 9
			{Type: "USER", Args: []string{"alice"}},                                                            // 10
			{Type: "WORKDIR", Args: []string{"work"}},                                                          // 11
			{Type: "RUN", Args: []string{"whoami > /app/who-root.txt", "root"}},                                // 12
			{Type: "RUN", Args: []string{"id -un; pwd"}},                                                       // 13
		},
		Archives: archives,
		StartCmd: "exec sleep 1000",
		ReadyCmd: "pidof sleep",
		CPUCount: 64,
		MemoryMB: 512,
		Log:      log.add,
	}
	res, err := d.Build(t.Context(), spec)
	if err != nil {
		t.Fatalf("build: %v\nlog:\n%s", err, &log)
	}
	removeImageAtEnd(t, d, res.Image)

	if res.User != "alice" || res.Workdir != "/app/work" || res.EnvdVersion != envd.Version || res.StartCmd != spec.StartCmd {
		t.Errorf("result %+v", res)
	}
	for k, want := range map[string]string{"GREETING": "hello", "NAME": "hello world", "LIT": "$(echo no)"} {
		if res.Env[k] != want {
			t.Errorf("env %s = %q, want %q", k, res.Env[k], want)
		}
	}
	for _, want := range []struct{ step, text string }{
		{"base", "Created user user"},
		{"base", "no /bin/bash"},
		{"9", "visible-output"},
		{"10", "Created user alice"},
		{"13", "alice"},
		{"13", "/app/work"},
		{"finalize", "Ready"},
	} {
		if !log.has(want.step, want.text) {
			t.Errorf("log has no %q in step %s:\n%s", want.text, want.step, &log)
		}
	}
	if n := len(containers(t, d)); n != 0 {
		t.Errorf("%d containers left after the build", n)
	}
	img, err := d.cli.ImageInspect(t.Context(), res.Image)
	if err != nil {
		t.Fatal(err)
	}
	if img.Config == nil || len(img.Config.Entrypoint) > 0 || len(img.Config.Cmd) > 0 || img.Config.Labels[d.label("kind")] != kindImage {
		t.Errorf("image config %+v: want no command and kind %q", img.Config, kindImage)
	}

	token := rand.Text()
	sb, err := d.StartSandbox(t.Context(), SandboxSpec{
		SandboxID: randomID("sbx"), TemplateID: spec.TemplateID, BuildID: spec.BuildID,
		Image: res.Image, User: res.User, Workdir: res.Workdir, Env: res.Env, StartCmd: res.StartCmd,
		AccessToken: token,
	})
	if err != nil {
		t.Fatal(err)
	}
	if sb.EnvdVersion != envd.Version {
		t.Errorf("sandbox %+v", sb)
	}
	c := sandboxClient(d, sb, token)
	out, code := sh(t, c, "", `id -un; pwd; echo "$NAME|$LIT"`)
	if want := "alice\n/app/work\nhello world|$(echo no)\n"; code != 0 || out != want {
		t.Errorf("sandbox default user, workdir and env: %q (exit %d), want %q", out, code, want)
	}
	out, code = sh(t, c, "root", strings.Join([]string{
		`cat /etc/top.txt /app/top.txt /top.txt /app/out.txt /app/who-root.txt`,
		`stat -c '%n %U %a' /etc/top.txt /app/dest /app/dest/a.txt /app/dest/sub/b.txt /app/work /js /js/x.js /js/a.txt`,
		`readlink /app/dest/link; echo $(ls /js)`,
	}, "; "))
	want := strings.Join([]string{
		"top", "top", "top", "run hello", "root",
		"/etc/top.txt user 644",
		"/app/dest root 750",
		"/app/dest/a.txt root 750",
		"/app/dest/sub/b.txt root 750",
		"/app/work alice 755",
		"/js user 755",
		"/js/x.js user 644",
		"/js/a.txt root 644",
		"a.txt",
		"a.txt link sub x.js y.js",
	}, "\n")
	if code != 0 || strings.TrimSpace(out) != want {
		t.Errorf("sandbox sees (exit %d):\n%s\nwant:\n%s", code, out, want)
	}
	// The start command runs again in the sandbox.
	deadline := time.Now().Add(time.Minute)
	for {
		if _, code := sh(t, c, "", "pidof sleep"); code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the start command is not running in the sandbox")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// envd only answers with the sandbox's token.
	if _, err := sandboxClient(d, sb, "wrong").Run(t.Context(), client.RunRequest{Cmd: "/bin/true"}); err == nil {
		t.Error("envd accepted a wrong access token")
	}

	noBindMounts(t, d, sb.ContainerID)
	if err := d.StopSandbox(t.Context(), sb.ID); err != nil {
		t.Fatal(err)
	}
	if d.attachment(attachKey(kindSandbox, sb.ID)) != nil {
		t.Error("the sandbox's channel is still attached after StopSandbox")
	}
	if n := len(containers(t, d)); n != 0 {
		t.Errorf("%d containers left after StopSandbox", n)
	}
	if err := d.StopSandbox(t.Context(), sb.ID); err != nil {
		t.Errorf("stopping an unknown sandbox: %v", err)
	}

	// A build from this one continues with its user, workdir and env.
	var log2 buildLog
	res2, err := d.Build(t.Context(), BuildSpec{
		TemplateID: spec.TemplateID, BuildID: randomID("build"), BaseImage: res.Image,
		FromBuild: res,
		Steps:     []e2b.TemplateStep{{Type: "RUN", Args: []string{`echo "continued as $(id -un) in $(pwd) with $NAME"`}}},
		Log:       log2.add,
	})
	if err != nil {
		t.Fatalf("build from a build: %v\nlog:\n%s", err, &log2)
	}
	removeImageAtEnd(t, d, res2.Image)
	if !log2.has("1", "continued as alice in /app/work with hello world") || log2.has("base", "Created user") {
		t.Errorf("build from a build did not continue where the first ended:\n%s", &log2)
	}
	if res2.User != "alice" || res2.Workdir != "/app/work" || res2.Env["NAME"] != "hello world" {
		t.Errorf("result %+v", res2)
	}
}

func TestBuildFailingRun(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, "")
	var log buildLog
	_, err := d.Build(t.Context(), BuildSpec{
		TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
		Steps: []e2b.TemplateStep{
			{Type: "ENV", Args: []string{"A", "1"}},
			{Type: "RUN", Args: []string{"echo first-line; echo second-line >&2; exit 3"}},
			{Type: "RUN", Args: []string{"echo never"}},
		},
		Log: log.add,
	})
	var se *StepError
	if !errors.As(err, &se) || se.Step != "2" {
		t.Fatalf("error %v, want a StepError for step 2", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "exited with code 3") || !strings.Contains(msg, "second-line") {
		t.Errorf("error %q should give the exit code and the last output", msg)
	}
	if !log.has("2", "first-line") || !log.has("2", "second-line") || log.has("3", "never") {
		t.Errorf("log:\n%s", &log)
	}
	if n := len(containers(t, d)); n != 0 {
		t.Errorf("%d containers left after a failed build", n)
	}
}

// A RUN step ends as on E2B, when every holder of its output closed it
// (design/e2b-api.md §3.2): a background child's late output is part of
// the step, a redirected daemon does not hold it, and a command that
// cannot start fails the step with the shell's exit code 127.
func TestBuildRunWaitsForBackgroundOutput(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, "")
	var log buildLog
	_, err := d.Build(t.Context(), BuildSpec{
		TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
		Steps: []e2b.TemplateStep{
			{Type: "RUN", Args: []string{"(sleep 2; echo child-line) & echo parent-line"}},
			{Type: "RUN", Args: []string{"nohup sleep 600 >/dev/null 2>&1 & echo detached"}},
			{Type: "RUN", Args: []string{"no-such-command-xyz"}},
		},
		Log: log.add,
	})
	var se *StepError
	if !errors.As(err, &se) || se.Step != "3" || !strings.Contains(err.Error(), "exited with code 127") {
		t.Fatalf("error %v, want step 3 to exit 127\nlog:\n%s", err, &log)
	}
	if !log.has("1", "parent-line") || !log.has("1", "child-line") || !log.has("2", "detached") || !log.has("3", "no-such-command-xyz") {
		t.Errorf("log:\n%s", &log)
	}
}

func TestBuildRejectsTraversalArchive(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, "")
	evil := filepath.Join(t.TempDir(), "evil.tar.gz")
	if err := os.WriteFile(evil, testutil.Tarball(t, true, testutil.File("ok.txt", "ok"), testutil.File("../evil", "x")), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := d.Build(t.Context(), BuildSpec{
		TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
		Steps:    []e2b.TemplateStep{{Type: "COPY", Args: []string{"ok.txt", "/", "", ""}, FilesHash: "h"}},
		Archives: map[string]string{"h": evil},
	})
	var se *StepError
	if !errors.As(err, &se) || se.Step != "1" || !strings.Contains(err.Error(), `"../evil"`) {
		t.Fatalf("error %v, want step 1 naming the entry", err)
	}
}

func TestBuildMissingImageFailsBase(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, "")
	_, err := d.Build(t.Context(), BuildSpec{
		TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: "e2b-test-absent:" + randomID("v"),
	})
	var se *StepError
	if !errors.As(err, &se) || se.Step != "base" || !strings.Contains(err.Error(), "not present") {
		t.Fatalf("error %v, want a base StepError", err)
	}
}

func TestBuildCancelRemovesContainer(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, "")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	log := buildLog{onLine: func(e e2b.BuildLogEntry) {
		if e.Message == "started" {
			cancel()
		}
	}}
	done := make(chan error, 1)
	go func() {
		_, err := d.Build(ctx, BuildSpec{
			TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
			Steps: []e2b.TemplateStep{{Type: "RUN", Args: []string{"echo started; sleep 300"}}},
			Log:   log.add,
		})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled\nlog:\n%s", err, &log)
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("build did not stop after cancel\nlog:\n%s", &log)
	}
	if n := len(containers(t, d)); n != 0 {
		t.Errorf("%d containers left after cancel", n)
	}
}

func TestRemoveOrphans(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, "none")
	token := rand.Text()
	start := func(id string) *Sandbox {
		sb, err := d.StartSandbox(t.Context(), SandboxSpec{SandboxID: id, Image: dockerEnv.baseImage, User: "root", AccessToken: token})
		if err != nil {
			t.Fatal(err)
		}
		return sb
	}
	kept, orphan := start(randomID("keep")), start(randomID("orphan"))
	// A build container left by a crash, and a container of another server.
	create := func(labels map[string]string) string {
		c, err := d.cli.ContainerCreate(t.Context(), &container.Config{Image: dockerEnv.baseImage, Cmd: []string{"true"}, Labels: labels}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		return c.ID
	}
	create(d.labels(kindBuild, "tpl", randomID("build"), ""))
	other := d.labels(kindSandbox, "tpl", "b", "x")
	other[d.label("instance")] = "another-server"
	otherID := create(other)
	removeContainerAtEnd(t, d, otherID)
	// A container started by hand from a build's image carries its labels.
	byHandID := create(d.labels(kindImage, "tpl", "b", ""))
	removeContainerAtEnd(t, d, byHandID)

	// A server that restarts knows none of its containers' channels, and
	// the agent of the old channel is gone.
	d.detach(attachKey(kindSandbox, kept.ID))
	d.detach(attachKey(kindSandbox, orphan.ID))

	if err := d.RemoveOrphans(t.Context(), func(id string) bool { return id == kept.ID }, nil); err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, c := range containers(t, d) {
		left[c.ID] = true
	}
	if len(left) != 2 || !left[kept.ContainerID] || !left[byHandID] {
		t.Errorf("left %d containers, want only the kept sandbox and the one started by hand", len(left))
	}
	if out, code := sh(t, sandboxClient(d, kept, token), "", "echo back"); code != 0 || out != "back\n" {
		t.Errorf("the kept sandbox through a new channel: %q (exit %d)", out, code)
	}
	if _, err := d.cli.ContainerInspect(t.Context(), otherID); err != nil {
		t.Errorf("another server's container was touched: %v", err)
	}
	if err := d.StopSandbox(t.Context(), kept.ID); err != nil {
		t.Fatal(err)
	}
}

func TestBuildFinalizeFailures(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, "")
	for _, tc := range []struct {
		name, start, ready string
		timeout            time.Duration
		want               string
	}{
		{"start command fails", "echo starting; exit 4", "false", 10 * time.Minute, "start command exited with code 4"},
		{"ready never succeeds", "", "false", 3 * time.Second, "ready command timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d.opts.ReadyTimeout = tc.timeout // subtests run one after the other
			var log buildLog
			_, err := d.Build(t.Context(), BuildSpec{
				TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
				StartCmd: tc.start, ReadyCmd: tc.ready, Log: log.add,
			})
			var se *StepError
			if !errors.As(err, &se) || se.Step != "finalize" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a finalize StepError with %q\nlog:\n%s", err, tc.want, &log)
			}
		})
	}
	if n := len(containers(t, d)); n != 0 {
		t.Errorf("%d containers left", n)
	}
}

func TestBuildUsesBashWhenPresent(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, "")
	// The base image plus a /bin/bash that reports how it is called.
	script := `printf '#!/bin/sh\necho "bash called with $1 $2" >&2\nshift\nexec /bin/sh "$@"\n' >/bin/bash && chmod 755 /bin/bash`
	c, err := d.cli.ContainerCreate(t.Context(), &container.Config{Image: dockerEnv.baseImage, Cmd: []string{"/bin/sh", "-c", script}}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	removeContainerAtEnd(t, d, c.ID)
	if err := d.cli.ContainerStart(t.Context(), c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	waitC, errC := d.cli.ContainerWait(t.Context(), c.ID, container.WaitConditionNotRunning)
	select {
	case w := <-waitC:
		if w.StatusCode != 0 {
			t.Fatalf("preparing the image: exit %d", w.StatusCode)
		}
	case err := <-errC:
		t.Fatal(err)
	}
	withBash := "e2b-runtime-test/bash:" + randomID("v")
	if _, err := d.cli.ContainerCommit(t.Context(), c.ID, container.CommitOptions{Reference: withBash}); err != nil {
		t.Fatal(err)
	}
	removeImageAtEnd(t, d, withBash)

	var log buildLog
	res, err := d.Build(t.Context(), BuildSpec{
		TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: withBash,
		Steps: []e2b.TemplateStep{{Type: "RUN", Args: []string{"echo ran"}}},
		Log:   log.add,
	})
	if err != nil {
		t.Fatalf("build: %v\nlog:\n%s", err, &log)
	}
	removeImageAtEnd(t, d, res.Image)
	if !log.has("1", "bash called with -l -c") || !log.has("1", "ran") || log.has("base", "no /bin/bash") {
		t.Errorf("RUN did not go through bash -l -c:\n%s", &log)
	}
}

// With the opt-in host network, envd is still reached through the channel
// (it listens on a socket of the container's own file system, not on the
// host's port 49983), and no other port is relayed: the sandbox's
// loopback is the host's.
func TestHostNetworkRelaysOnlyEnvd(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, NetworkHost)
	token := rand.Text()
	sb, err := d.StartSandbox(t.Context(), SandboxSpec{SandboxID: randomID("host"), Image: dockerEnv.baseImage, User: "root", AccessToken: token})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := d.StopSandbox(context.Background(), sb.ID); err != nil {
			t.Errorf("stop sandbox: %v", err)
		}
	}()
	if out, code := sh(t, sandboxClient(d, sb, token), "", "echo up"); code != 0 || out != "up\n" {
		t.Errorf("envd in a host-network sandbox: %q (exit %d)", out, code)
	}
	if _, err := d.DialSandbox(t.Context(), sb.ID, 8080); !errors.Is(err, ErrPortNotRelayed) {
		t.Errorf("dial port 8080 of a host-network sandbox: %v, want ErrPortNotRelayed", err)
	}
}

// cancellingEngine is a proxy in front of the real engine's socket that
// cancels the caller's context once the engine has created a container and
// before its answer reaches the client: the cancel of a build or a sandbox
// start that lands while the container is being created.
func cancellingEngine(t *testing.T, cancel context.CancelFunc) string {
	t.Helper()
	upstream := strings.TrimPrefix(os.Getenv("DOCKER_HOST"), "unix://")
	dir, err := os.MkdirTemp("", "eng") //nolint:usetesting // short: a unix socket path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "engine.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	transport := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", upstream)
	}}
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.Out.URL.Scheme, pr.Out.URL.Host = "http", "engine" },
		Transport: transport,
		ModifyResponse: func(resp *http.Response) error {
			if resp.Request.Method == http.MethodPost && strings.HasSuffix(resp.Request.URL.Path, "/containers/create") {
				cancel()
				time.Sleep(200 * time.Millisecond) // the client gives up before the answer
			}
			return nil
		},
	}
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); transport.CloseIdleConnections() })
	return "unix://" + sock
}

// A cancel that lands while the engine creates the container leaves no
// container behind: the engine made it, the client never heard of it.
func TestCancelDuringCreateLeavesNoContainer(t *testing.T) {
	if dockerEnv.skip != "" {
		testutil.Missing(t, "%s", dockerEnv.skip)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	t.Setenv("DOCKER_HOST", cancellingEngine(t, cancel))
	d := newTestDocker(t, "none")
	_, err := d.StartSandbox(ctx, SandboxSpec{SandboxID: randomID("cancel"), Image: dockerEnv.baseImage, User: "root", AccessToken: rand.Text()})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if left := containers(t, d); len(left) != 0 {
		t.Errorf("%d containers left after a cancel during create: %s", len(left), left[0].ID)
	}
}
