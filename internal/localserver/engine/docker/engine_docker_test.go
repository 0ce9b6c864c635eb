package docker

import (
	"context"
	"crypto/rand"
	"debug/elf"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	docker "github.com/docker/docker/client"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// TestCloseRemovesUnusedEnvdVolume: a server that closes with no sandbox left leaves
// no envd volume behind (its data directory may be deleted next).
func TestCloseRemovesUnusedEnvdVolume(t *testing.T) {
	d := newTestDocker(t, "")
	holder, _, err := d.envd.ForEngine(t.Context())
	if err != nil {
		t.Fatal(err)
	}
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
		t.Errorf("envd volume holder %s after Close: %v, want it removed", attach.ShortID(holder), err)
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
	testutil.WriteELF(t, arm, elf.EM_AARCH64)
	d := newTestDockerWith(t, func(o *DockerOptions) { o.EnvdBinaries = append(o.EnvdBinaries, arm) })
	if d.envd.EngineArch() != "amd64" {
		t.Skipf("needs an amd64 engine; this one is %s", d.envd.EngineArch())
	}
	engineHolder, _, err := d.envd.ForEngine(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	armHolder, err := d.envd.For(t.Context(), arm64Image)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := d.envd.For(t.Context(), arm64Image); err != nil || again != armHolder {
		t.Errorf("second arm64 image: %s, %v; want the same volume %s", again, err, armHolder)
	}
	if got, err := d.envd.For(t.Context(), dockerEnv.baseImage); err != nil || got != engineHolder {
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
			t.Errorf("envd volume %s in use after RemoveOrphans: %v", attach.ShortID(h), err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, h := range []string{engineHolder, armHolder} {
		if _, err := cli.ContainerInspect(t.Context(), h); !isNotFound(err) {
			t.Errorf("envd volume %s after Close: %v, want it removed", attach.ShortID(h), err)
		}
	}
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

func TestRemoveOrphans(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, "none")
	token := rand.Text()
	start := func(id string) *engine.Sandbox {
		sb, err := d.StartSandbox(t.Context(), engine.SandboxSpec{SandboxID: id, Image: dockerEnv.baseImage, User: "root", AccessToken: token})
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
	create(d.labels.of(kindBuild, "tpl", randomID("build"), ""))
	other := d.labels.of(kindSandbox, "tpl", "b", "x")
	other[d.labels.key("instance")] = "another-server"
	otherID := create(other)
	removeContainerAtEnd(t, d, otherID)
	// A container started by hand from a build's image carries its labels.
	byHandID := create(d.labels.of(kindImage, "tpl", "b", ""))
	removeContainerAtEnd(t, d, byHandID)

	// A server that restarts knows none of its containers' channels, and
	// the agent of the old channel is gone.
	d.channels.Detach(attach.Key(kindSandbox, kept.ID))
	d.channels.Detach(attach.Key(kindSandbox, orphan.ID))

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

// With the opt-in host network, envd is still reached through the channel
// (it listens on a socket of the container's own file system, not on the
// host's port 49983), and no other port is relayed: the sandbox's
// loopback is the host's.
func TestHostNetworkRelaysOnlyEnvd(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, engine.NetworkHost)
	token := rand.Text()
	sb, err := d.StartSandbox(t.Context(), engine.SandboxSpec{SandboxID: randomID("host"), Image: dockerEnv.baseImage, User: "root", AccessToken: token})
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
	if _, err := d.DialSandbox(t.Context(), sb.ID, 8080); !errors.Is(err, engine.ErrPortNotRelayed) {
		t.Errorf("dial port 8080 of a host-network sandbox: %v, want engine.ErrPortNotRelayed", err)
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
	_, err := d.StartSandbox(ctx, engine.SandboxSpec{SandboxID: randomID("cancel"), Image: dockerEnv.baseImage, User: "root", AccessToken: rand.Text()})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", err)
	}
	if left := containers(t, d); len(left) != 0 {
		t.Errorf("%d containers left after a cancel during create: %s", len(left), left[0].ID)
	}
}
