//go:build linux

package localserver

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/docker"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// The tests in this file run a template of an image built for another
// architecture than the engine's: E2B_TEST_ARM64_IMAGE (an offline
// linux/arm64 image with /bin/sh, scripts/test-image.sh arm64) on an amd64
// engine.

var arm64Envd testBinary

// onAmd64 skips on a machine of another architecture: the tests run an
// arm64 image on an amd64 engine, this machine's.
func onAmd64(t *testing.T) {
	t.Helper()
	if runtime.GOARCH != "amd64" {
		t.Skipf("runs an arm64 image on an amd64 engine; this machine is %s", runtime.GOARCH)
	}
}

// arm64Image is the arm64 test image.
func arm64Image(t *testing.T) string {
	t.Helper()
	img := os.Getenv("E2B_TEST_ARM64_IMAGE")
	if img == "" {
		testutil.Missing(t, "needs E2B_TEST_ARM64_IMAGE, an offline linux/arm64 image with /bin/sh (scripts/test-image.sh arm64 builds e2b-test-base-arm64:latest)")
	}
	return img
}

// requireArm64Emulation skips where this kernel cannot run arm64
// executables at all (no binfmt_misc, built in or as a module: nothing can
// be registered, so the test is not a missing prerequisite but impossible
// here), and reports a missing prerequisite where it could and
// qemu-aarch64 is not registered with the F flag, which containers need
// (scripts/qemu-binfmt.sh). The engine is this machine's (the tests'
// DOCKER_HOST is local), so its kernel is the one read here.
func requireArm64Emulation(t *testing.T) {
	t.Helper()
	if !kernelHasBinfmtMisc() {
		t.Skip("this kernel has no binfmt_misc: it cannot run arm64 executables under emulation")
	}
	const entry = "/proc/sys/fs/binfmt_misc/qemu-aarch64"
	reg, err := os.ReadFile(entry)
	switch {
	case err != nil && testutil.ProcSysReadOnly():
		testutil.Unavailable(t, "arm64 emulation is not registered and cannot be: /proc/sys is read-only here (an unprivileged container)")
	case err != nil:
		testutil.Missing(t, "arm64 emulation is not registered (%v): run scripts/qemu-binfmt.sh as root", err)
	case !bytes.HasPrefix(reg, []byte("enabled\n")) || !regexp.MustCompile(`(?m)^flags: \S*F`).Match(reg):
		testutil.Missing(t, "arm64 emulation is not enabled with the F flag, which containers need (%s says %q): run scripts/qemu-binfmt.sh as root", entry, reg)
	}
}

// kernelHasBinfmtMisc tells whether this kernel has binfmt_misc loaded or
// as a module it would load.
func kernelHasBinfmtMisc() bool {
	if filesystems, err := os.ReadFile("/proc/filesystems"); err == nil && regexp.MustCompile(`\bbinfmt_misc\n`).Match(filesystems) {
		return true
	}
	release, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return false
	}
	modules, _ := filepath.Glob(filepath.Join("/lib/modules", strings.TrimSpace(string(release)), "kernel/fs/binfmt_misc.ko*"))
	return len(modules) > 0
}

// On an amd64 engine with qemu-user registered, a template from an arm64
// image builds (its RUN steps run under emulation) and its sandboxes run
// arm64: envd is the arm64 build, chosen by the image's architecture.
func TestDockerArm64SandboxUnderEmulation(t *testing.T) {
	onAmd64(t)
	requireArm64Emulation(t)
	image := arm64Image(t)
	arm := arm64Envd.build(t, attach.EnvdBinaryName("arm64"), "github.com/e2b-terraform/terraform-provider-e2b", "arm64")
	// Every instruction of envd and the build is emulated: a start took 15 s
	// and the build 31 s on the 2 shared cores of the test machine under
	// load, which the default bounds (30 s, 60 s) would not hold reliably.
	eng, _ := dockerEngineWith(t, func(o *docker.DockerOptions) {
		o.EnvdBinaries = append(o.EnvdBinaries, arm)
		o.EnvdStartTimeout = 2 * time.Minute
	})
	ts := startServer(t, eng)
	ts.buildWait = 5 * time.Minute

	reg, info := ts.buildFrom(image, "arm64-app", run(`uname -m > "$HOME/built-on"`))
	if info.Status != e2b.BuildReady {
		t.Fatalf("build = %+v", info)
	}
	ts.deleteTemplateAtEnd(reg.TemplateID)
	sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: "arm64-app"})
	client, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", `uname -m; cat "$HOME/built-on"`}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "aarch64\naarch64\n"; string(res.Stdout) != want || res.ExitCode != 0 {
		t.Errorf("uname -m in the sandboxes and at build = %q (exit %d, stderr %q), want %q", res.Stdout, res.ExitCode, res.Stderr, want)
	}
}

// A server with no arm64 envd build fails a template of an arm64 image at
// its base step, saying which image, its architecture and where envd
// builds are looked for. Needs no emulation: nothing of the image runs.
func TestDockerImageWithoutEnvdForItsArchitecture(t *testing.T) {
	onAmd64(t)
	image := arm64Image(t)
	eng, _ := dockerEngine(t) // an amd64 build of envd only
	ts := startServer(t, eng)

	_, info := ts.buildFrom(image, "arm64-no-envd", run("true"))
	if info.Status != e2b.BuildError || info.Reason == nil {
		t.Fatalf("build = %+v, want an error", info)
	}
	msg := info.Reason.Message
	for _, want := range []string{"image " + image + " is built for linux/arm64", "no envd build for linux/arm64", "--envd-binary", attach.EnvdBinaryName("arm64") + " beside it"} {
		if !strings.Contains(msg, want) {
			t.Errorf("build error %q does not say %q", msg, want)
		}
	}
	if info.Reason.Step != "base" {
		t.Errorf("failed at step %q, want base (before any container)", info.Reason.Step)
	}
}
