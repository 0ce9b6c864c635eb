// Package acctest starts what the provider's acceptance tests run against:
// the provider binary, built once, serving the local E2B-compatible server
// (its `server` subcommand) on a free loopback port with a temporary data
// directory, on the Docker engine at DOCKER_HOST. The same binary is the
// envd the server mounts into its containers.
package acctest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/docker"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/store"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// Environment variables the acceptance tests read. scripts/test.sh sets
// them (E2B_TEST_DOCKER_HOST falls back to DOCKER_HOST).
const (
	EnvDockerHost  = "E2B_TEST_DOCKER_HOST"
	EnvBaseImage   = "E2B_TEST_BASE_IMAGE"
	EnvDebianImage = "E2B_TEST_DEBIAN_IMAGE"
)

// The images scripts/test-image.sh builds when those variables are unset.
const (
	DefaultBusyboxImage = "e2b-test-base:latest"
	DefaultDebianImage  = "e2b-test-debian:bookworm"
)

// startTimeout bounds how long the server may take to write server.json.
const startTimeout = 2 * time.Minute

// Server is a running local server: the Info it wrote to server.json
// (APIURL, SandboxURL, APIKey, Domain, DataDir) and what the tests add.
type Server struct {
	localserver.Info
	// BaseImage is the busybox image (no bash) of Images, for templates that
	// test what such a base lacks.
	BaseImage string
	// DebianImage is the Debian image of Images, for templates whose
	// sandboxes run commands.
	DebianImage string
	// Binary is the executable serving it, which is also the provider.
	Binary string

	cmd        *exec.Cmd
	logPath    string
	dockerHost string
	exited     chan struct{}
	stopDNS    func()
}

// ProviderConfig is a provider block for the server.
func (s *Server) ProviderConfig() string {
	return fmt.Sprintf(`
provider "e2b" {
  api_url     = %q
  api_key     = %q
  sandbox_url = %q
  max_retries = 2
}
`, s.APIURL, s.APIKey, s.SandboxURL)
}

// Stats are the server's counters (GET /_local/stats).
type Stats = store.Stats

// Stats reads the server's counters.
func (s *Server) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.APIURL+"/_local/stats", nil)
	if err != nil {
		return st, err
	}
	req.Header.Set("X-API-Key", s.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return st, fmt.Errorf("GET /_local/stats: %s: %s", resp.Status, b)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// Log returns what the server wrote to stderr so far, for failure messages.
func (s *Server) Log() string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// Stop ends the server by its PID: SIGTERM, then SIGKILL after a grace
// period, and waits for it.
func (s *Server) Stop() error {
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	s.stopDNS()
	return nil
}

// RemoveEngineObjects removes everything of the stopped server from the
// engine, records or not: its layer cache, which a server keeps across
// restarts, the images of templates a test left, the containers of paused
// sandboxes and its envd volume. Anything of it still there afterwards is
// an error: the tests leave the engine as they found it.
func (s *Server) RemoveEngineObjects() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	instance := localserver.InstanceOf(s.DataDir)
	if _, err := docker.Prune(ctx, docker.PruneOptions{DockerHost: s.dockerHost, Instance: instance}); err != nil {
		return err
	}
	left, err := docker.Objects(ctx, s.dockerHost, instance)
	if err == nil && len(left) > 0 {
		err = fmt.Errorf("the server of %s left on the engine, after its objects were removed: %+v", s.DataDir, left)
	}
	return err
}

// ModuleRoot is the repository root (the directory of go.mod).
func ModuleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot locate the acctest package source")
	}
	return filepath.Abs(filepath.Join(filepath.Dir(file), "..", ".."))
}

// BuildBinary builds the provider binary (static, so it runs inside any
// container as envd) into dir and returns its path.
func BuildBinary(ctx context.Context, dir string) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "terraform-provider-e2b")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	return out, nil
}

// Start runs `<binary> server` on a free loopback port with dataDir and
// waits for it to write server.json.
func Start(ctx context.Context, binary, dataDir, dockerHost string) (*Server, error) {
	logPath := filepath.Join(dataDir, "server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	// Sandboxes' look-ups go to a loopback resolver that knows no name,
	// never to the host's.
	dnsAddr, stopDNS, err := testutil.ServeDNS(nil)
	if err != nil {
		return nil, fmt.Errorf("start the server's DNS upstream: %w", err)
	}
	cmd := exec.Command(binary, "server", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--runtime", testutil.Runtime(), "--dns-upstream", dnsAddr)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+dockerHost)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		stopDNS()
		return nil, fmt.Errorf("start %s server: %w", binary, err)
	}
	s := &Server{cmd: cmd, logPath: logPath, dockerHost: dockerHost, exited: make(chan struct{}), stopDNS: stopDNS, Info: localserver.Info{DataDir: dataDir}, Binary: binary}
	go func() { _ = cmd.Wait(); close(s.exited) }()

	infoPath := filepath.Join(dataDir, localserver.InfoFile)
	deadline := time.NewTimer(startTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(infoPath); err == nil && json.Unmarshal(b, &s.Info) == nil && s.APIURL != "" {
			return s, nil
		}
		select {
		case <-s.exited:
			stopDNS()
			return nil, fmt.Errorf("the local server exited before it was ready (%s):\n%s", cmd.ProcessState, s.Log())
		case <-deadline.C:
			_ = s.Stop()
			return nil, fmt.Errorf("the local server wrote no %s within %s:\n%s", infoPath, startTimeout, s.Log())
		case <-ctx.Done():
			_ = s.Stop()
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
}

// Environment says why acceptance tests against the local server cannot run
// here, or returns the Docker host and base images to use.
func Environment(ctx context.Context) (dockerHost string, images Images, err error) {
	if os.Getenv("TF_ACC") == "" {
		return "", Images{}, errors.New("TF_ACC is not set: acceptance tests run only with TF_ACC=1 (make testacc, scripts/test.sh)")
	}
	return DockerEnvironment(ctx)
}

// Images are the offline base images scripts/test-image.sh builds.
type Images struct {
	// Busybox has sh but no bash, useradd or image config: for the cases
	// where a base image lacks what most have.
	Busybox string
	// Debian is a Debian minbase with bash, apt and useradd, as the images
	// E2B templates are usually built from.
	Debian string
}

// DockerEnvironment returns the Docker engine (E2B_TEST_DOCKER_HOST, else
// DOCKER_HOST) and the base images (E2B_TEST_BASE_IMAGE,
// E2B_TEST_DEBIAN_IMAGE, or their defaults), or says why they cannot be used.
func DockerEnvironment(ctx context.Context) (dockerHost string, images Images, err error) {
	dockerHost = os.Getenv(EnvDockerHost)
	if dockerHost == "" {
		dockerHost = os.Getenv("DOCKER_HOST")
	}
	if dockerHost == "" {
		return "", Images{}, fmt.Errorf("DOCKER_HOST (or %s) must be set to run the local server's tests (scripts/test.sh sets it)", EnvDockerHost)
	}
	images = Images{Busybox: os.Getenv(EnvBaseImage), Debian: os.Getenv(EnvDebianImage)}
	if images.Busybox == "" {
		images.Busybox = DefaultBusyboxImage
	}
	if images.Debian == "" {
		images.Debian = DefaultDebianImage
	}
	c, err := client.NewClientWithOpts(client.WithHost(dockerHost), client.WithAPIVersionNegotiation())
	if err != nil {
		return "", Images{}, fmt.Errorf("docker client for %s: %w", dockerHost, err)
	}
	defer c.Close()
	pingCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := c.Ping(pingCtx); err != nil {
		return "", Images{}, fmt.Errorf("the Docker engine at %s does not answer: %w", dockerHost, err)
	}
	for _, image := range []string{images.Busybox, images.Debian} {
		if _, err := c.ImageInspect(pingCtx, image); err != nil {
			return "", Images{}, fmt.Errorf("image %s is missing from the Docker engine at %s (scripts/test-image.sh builds it): %w", image, dockerHost, err)
		}
	}
	return dockerHost, images, nil
}

var shared struct {
	once   sync.Once
	server *Server
	dir    string
	err    error
	skip   string
}

// Shared returns the package's one local server, starting it on first use,
// or reports what the environment lacks (testutil.Missing). Call
// StopShared from TestMain.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.once.Do(func() {
		ctx := context.Background()
		dockerHost, images, err := Environment(ctx)
		if err != nil {
			shared.skip = err.Error()
			return
		}
		// Short: the server keeps unix sockets below its data directory.
		// Not t.TempDir: the server outlives the test that started it;
		// StopShared removes the directory.
		shared.dir, shared.err = os.MkdirTemp("", "e2bacc") //nolint:usetesting // shared by every test of the binary

		if shared.err != nil {
			return
		}
		binary, err := BuildBinary(ctx, shared.dir)
		if err != nil {
			shared.err = err
			return
		}
		shared.server, shared.err = startIn(ctx, binary, shared.dir, dockerHost, images)
	})
	if shared.skip != "" {
		testutil.Missing(t, "%s", shared.skip)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.server
}

// Another starts a local server of t's own (a second environment, say) with the binary
// and engine of Shared's, and stops it when t ends; it reports a lacking
// environment as Shared does.
func Another(t testing.TB) *Server {
	t.Helper()
	first := Shared(t)
	// Short, as Shared's: the server keeps unix sockets below it.
	dir, err := os.MkdirTemp("", "e2bacc") //nolint:usetesting // see above
	Must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) }) // registered first, so it runs after Stop
	dockerHost, images, err := Environment(context.Background())
	Must(t, err)
	// Not t.Context: the server outlives it, which ends before cleanups.
	s, err := startIn(context.Background(), first.Binary, dir, dockerHost, images)
	if s != nil {
		t.Cleanup(func() {
			_ = s.Stop()
			if err := s.RemoveEngineObjects(); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		})
	}
	Must(t, err)
	return s
}

// startIn starts a server of binary with its data in dir/data.
func startIn(ctx context.Context, binary, dir, dockerHost string, images Images) (*Server, error) {
	dataDir := filepath.Join(dir, "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		return nil, err
	}
	s, err := Start(ctx, binary, dataDir, dockerHost)
	if s != nil {
		s.BaseImage, s.DebianImage = images.Busybox, images.Debian
	}
	return s, err
}

// StopShared stops the shared server, if one was started, removes its
// objects from the engine and its directory, and reports what it could
// not remove.
func StopShared() error {
	var err error
	if shared.server != nil {
		_ = shared.server.Stop()
		if err = shared.server.RemoveEngineObjects(); err != nil {
			err = fmt.Errorf("acctest: remove the shared server's objects from the engine: %w", err)
		}
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	return err
}

// Must is a check helper for tests: it fails t when err is set.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// WriteFiles creates files under dir from a map of relative path → content;
// a path ending in "/" is a directory.
func WriteFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if strings.HasSuffix(name, "/") {
			Must(t, os.MkdirAll(p, 0o755))
			continue
		}
		Must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		Must(t, os.WriteFile(p, []byte(content), 0o644)) //nolint:gosec // a build-context fixture: its mode is what the test hashes and copies
	}
}
