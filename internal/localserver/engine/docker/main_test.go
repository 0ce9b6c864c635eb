package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
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
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
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
		if err := d.envd.Remove(context.Background(), false); err != nil {
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
		if err := removeContainer(t.Context(), d.cli, containerID); err != nil {
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
	list, err := d.labels.list(context.Background(), d.cli)
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// sandboxClient talks to a sandbox's envd through its channel with token.
func sandboxClient(d *Docker, sb *engine.Sandbox, token string) *client.Client {
	// The host name is never resolved: every connection goes through the
	// channel.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialSandbox(ctx, sb.ID, envd.Port)
	}}}
	c, err := client.New(client.Config{BaseURL: "http://localhost", AccessToken: token, HTTPClient: hc})
	if err != nil {
		panic(err) // a fixed loopback URL
	}
	return c
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
			t.Errorf("container %s bind-mounts %s at %s", attach.ShortID(containerID), m.Source, m.Destination)
		}
	}
	if len(insp.HostConfig.Binds) > 0 {
		t.Errorf("container %s has binds %v", attach.ShortID(containerID), insp.HostConfig.Binds)
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
