package localserver

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/runtime"
)

// The tests in this file run builds and sandboxes on a real Docker engine.
// They need DOCKER_HOST and E2B_TEST_BASE_IMAGE (an offline base image with
// /bin/sh, e.g. e2b-test-base:latest) and are skipped otherwise.

var envdBinary struct {
	once sync.Once
	path string
	err  error
}

// buildEnvdBinary builds this module's binary once per test run as a static
// Linux executable: the Docker runtime mounts it into containers as envd.
func buildEnvdBinary(t *testing.T) string {
	t.Helper()
	envdBinary.once.Do(func() {
		dir, err := os.MkdirTemp("", "lsenvd")
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

// dockerEngine returns the real Docker runtime, or skips the test when no
// engine is configured. The engine's containers are this test's own.
func dockerEngine(t *testing.T) (runtime.Engine, string) {
	t.Helper()
	baseImage := os.Getenv("E2B_TEST_BASE_IMAGE")
	if os.Getenv("DOCKER_HOST") == "" || baseImage == "" {
		t.Skip("needs a Docker engine: set DOCKER_HOST and E2B_TEST_BASE_IMAGE (an offline image with /bin/sh)")
	}
	stateDir, err := os.MkdirTemp("", "lsd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(stateDir) })
	docker, err := runtime.NewDocker(t.Context(), runtime.DockerOptions{
		EnvdBinary: buildEnvdBinary(t), StateDir: stateDir, Network: "none",
		Instance: filepath.Base(stateDir),
	})
	if err != nil {
		t.Fatalf("Docker engine at DOCKER_HOST=%s: %v", os.Getenv("DOCKER_HOST"), err)
	}
	t.Cleanup(func() { docker.Close() })
	return docker, baseImage
}

// A template built on Docker with COPY, RUN and ENV; a sandbox from it runs a
// command through the proxy; a failing RUN ends the build with its step.
func TestDockerBuildAndSandbox(t *testing.T) {
	engine, baseImage := dockerEngine(t)
	ts := startServer(t, engine)
	reg := ts.register("docker-app")
	hash := hashOf(0xd0c)
	putOK(t, ts.link(reg.TemplateID, hash).URL, tarball(t, true, dir("app/"), file("app/hello.txt", "hello from the context\n")))
	ts.start(reg, e2bapi.TemplateBuildStartV2{FromImage: baseImage, Steps: []e2bapi.TemplateStep{
		{Type: "COPY", Args: []string{"app", "/opt/app", "", ""}, FilesHash: hash},
		{Type: "ENV", Args: []string{"GREETING", "hi"}},
		run(`echo built > "$HOME/built.txt"`),
	}})
	if info := ts.waitBuild(reg); info.Status != "ready" {
		t.Fatalf("build = %+v", info)
	}

	sb := ts.createSandbox("/v2/sandboxes", e2bapi.NewSandbox{TemplateID: "docker-app", EnvVars: map[string]string{"K": "V"}})
	client, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", `cat /opt/app/hello.txt /home/user/built.txt; echo "$GREETING $K"`}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "hello from the context\nbuilt\nhi V\n"; string(res.Stdout) != want || res.ExitCode != 0 {
		t.Errorf("run = %q (exit %d, stderr %q), want %q", res.Stdout, res.ExitCode, res.Stderr, want)
	}
	ts.call("DELETE", "/sandboxes/"+sb.SandboxID, nil, http.StatusNoContent, nil)

	failing := ts.register("docker-app")
	ts.start(failing, e2bapi.TemplateBuildStartV2{FromImage: baseImage, Steps: []e2bapi.TemplateStep{run("true"), run("echo doomed; exit 7")}})
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
	ts.createSandbox("/v2/sandboxes", e2bapi.NewSandbox{TemplateID: "docker-app"})
}
