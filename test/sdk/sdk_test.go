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
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/acctest"
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
	"command: background with stdin",
	"command: list and kill a background process",
	"files: write reports the path",
	"files: write and read",
	"files: written file seen by a command",
	"files: make, list, stat, rename, remove",
	"sandbox connect",
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
	node, npm := lookTools(t)
	ctx := t.Context()
	dockerHost, images, err := acctest.DockerEnvironment(ctx)
	if err != nil {
		testutil.Missing(t, "the E2B JS SDK interop test runs the local server on a Docker engine: %v", err)
	}

	phase := time.Now()
	installSDK(t, ctx, npm)
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
	t.Cleanup(func() { _ = server.Stop() })

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

// lookTools finds node and npm, or reports them missing.
func lookTools(t *testing.T) (node, npm string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		testutil.Missing(t, "node is not installed: the E2B JS SDK interop test needs Node.js 20+ and npm")
	}
	npm, err = exec.LookPath("npm")
	if err != nil {
		testutil.Missing(t, "npm is not installed: the E2B JS SDK interop test needs it to install the SDK")
	}
	return node, npm
}

// installSDK runs `npm ci` unless node_modules already holds the SDK version
// package.json pins (an interrupted install is redone, not trusted).
func installSDK(t *testing.T, ctx context.Context, npm string) {
	t.Helper()
	want, err := pinnedVersion("package.json")
	if err != nil {
		t.Fatal(err)
	}
	if have, err := installedVersion(filepath.Join("node_modules", "e2b", "package.json")); err == nil && have == want {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, npmTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci (installs e2b@%s into test/sdk/node_modules): %v\n%s", want, err, out)
	}
	have, err := installedVersion(filepath.Join("node_modules", "e2b", "package.json"))
	if err != nil || have != want {
		t.Fatalf("npm ci installed e2b %q (%v), package.json pins %q", have, err, want)
	}
}

// pinnedVersion is the exact e2b version package.json depends on.
func pinnedVersion(path string) (string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var pkg struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(raw, &pkg); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	v := pkg.Dependencies["e2b"]
	if v == "" || strings.ContainsAny(v, "^~<>=*| ") {
		return "", fmt.Errorf("%s: e2b must be pinned to one exact version, got %q", path, v)
	}
	return v, nil
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
