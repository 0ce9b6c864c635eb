//go:build linux

package localserver

import (
	"bytes"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	envdclient "github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/docker"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

// manyFilesScript, run as root, creates n empty files with 200-character
// names in /many, with no process per file, then prints how many it made:
// a writer of inodes, which a disk limit in bytes does not stop.
func manyFilesScript(n int) string {
	return fmt.Sprintf(`mkdir -p /many && cd /many && p=$(printf '%%0190d' 0) && i=0 && while [ $i -lt %d ]; do : >"$p.$i" || break; i=$((i+1)); done; echo "made $i"`, n)
}

// runAside runs script as root in the sandbox of c without awaiting its
// answer: it ends with the sandbox.
func runAside(t *testing.T, c *envdclient.Client, script string) {
	go func() {
		_, _ = c.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", script}, User: "root", Timeout: 5 * time.Minute})
	}()
}

// awaitStopped waits for the sandbox id to be gone (the server stopped it)
// and returns the server's log line that says why; it fails the test when
// the sandbox still runs after 2 minutes or the log says nothing of it.
func (ts *testServer) awaitStopped(t *testing.T, id string, logs *testutil.SyncBuffer) string {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		resp := ts.request("GET", "/sandboxes/"+id, nil)
		resp.Body.Close()
		if resp.StatusCode == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sandbox still runs (%d) after 2 minutes past its limit:\n%s", resp.StatusCode, logs.String())
		}
	}
	// The engine's events may end the record before the server's next
	// pass of its measures logs why it stopped the container.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for l := range strings.Lines(logs.String()) {
			if strings.Contains(l, "sandbox stopped") && strings.Contains(l, id) {
				return l
			}
		}
	}
	t.Fatalf("the server's log does not say why it stopped the sandbox:\n%s", logs.String())
	return ""
}

// filesPast reads the file count a file overrun message reports.
func filesPast(t *testing.T, msg string, limit int) int {
	t.Helper()
	m := regexp.MustCompile(`files grew to (\d+), past the file limit of (\d+) \(--inodes-per-sandbox\)`).FindStringSubmatch(msg)
	if m == nil || m[2] != strconv.Itoa(limit) {
		t.Fatalf("%q does not name the file limit of %d (--inodes-per-sandbox)", msg, limit)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// A sandbox and a RUN step that create empty files as root past the file
// limit (--inodes-per-sandbox) are stopped whatever the engine's disk
// limit (a limit in bytes does not count them): the sandbox with the
// reason in the server's log, the build failing with an error that names
// the limit.
func TestDockerFileLimit(t *testing.T) {
	// attempt is fifty times the limit: on a quiet machine a RUN step made
	// 200,000 files before the watch's first measure of its container
	// (the commit's own check then failed the build).
	const limit, attempt = 20_000, 1_000_000
	eng, base := dockerEngineWith(t, func(o *docker.DockerOptions) { o.InodesPerSandbox = limit })
	var logs testutil.SyncBuffer
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }})

	t.Run("RUN step", func(t *testing.T) {
		reg, info := ts.buildFrom(base, "manyfiles-build", e2b.TemplateStep{Type: "RUN", Args: []string{manyFilesScript(attempt), "root"}})
		ts.deleteTemplateAtEnd(reg.TemplateID)
		if info.Status != "error" || info.Reason == nil {
			t.Fatalf("build = %+v, want an error naming the file limit\n%s", info, logs.String())
		}
		made := filesPast(t, info.Reason.Message, limit)
		if made >= attempt {
			t.Errorf("the build container was stopped at %d files, after all of them", made)
		}
		t.Logf("the build container was stopped at %d files of a limit of %d", made, limit)
	})

	templateID := ts.readyTemplate(base, "manyfiles")
	t.Run("sandbox", func(t *testing.T) {
		sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: templateID})
		t.Cleanup(func() { ts.request("DELETE", "/sandboxes/"+sb.SandboxID, nil).Body.Close() })
		c, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
		if err != nil {
			t.Fatal(err)
		}
		started := time.Now()
		runAside(t, c, manyFilesScript(attempt))
		line := ts.awaitStopped(t, sb.SandboxID, &logs)
		made := filesPast(t, line, limit)
		if made >= attempt {
			t.Errorf("the sandbox was stopped at %d files, after all of them", made)
		}
		t.Logf("the sandbox was stopped %s after it began, at %d files of a limit of %d", time.Since(started).Round(100*time.Millisecond), made, limit)
	})
}

// A sandbox with many files (150,000, made as root, within its limits)
// delays no other's measure: a second sandbox that goes past its limit is
// stopped, and the first runs on. The second writes past its disk limit
// where the watchdog keeps it, else (a hard disk limit) it makes files past
// its file limit. How long the second ran until stopped is printed beside
// the same attack alone.
func TestDockerFileWatchPerSandbox(t *testing.T) {
	const limitMB, files, fileLimit = 256, 150_000, 170_000
	eng, base := dockerEngineWith(t, func(o *docker.DockerOptions) { o.DiskSizeMB, o.InodesPerSandbox = limitMB, fileLimit })
	info, err := eng.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var logs testutil.SyncBuffer
	ts := startServer(t, eng, serverOptions{configure: func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) }})
	templateID := ts.readyTemplate(base, "filewatch")
	sandbox := func() (string, *envdclient.Client) {
		sb := ts.createSandbox("/v2/sandboxes", e2b.NewSandbox{TemplateID: templateID})
		t.Cleanup(func() { ts.request("DELETE", "/sandboxes/"+sb.SandboxID, nil).Body.Close() })
		c, err := envdclient.New(envdclient.Config{BaseURL: ts.URL, SandboxID: sb.SandboxID, AccessToken: sb.EnvdAccessToken})
		if err != nil {
			t.Fatal(err)
		}
		return sb.SandboxID, c
	}
	attack, stoppedFor := diskFillScript, fmt.Sprintf("past the disk limit of %d MiB", limitMB)
	if info.DiskLimit != engine.DiskLimitWatchdog {
		attack, stoppedFor = manyFilesScript(2*fileLimit), fmt.Sprintf("past the file limit of %d", fileLimit)
	}
	// attacked is how long a sandbox running the attack ran until the
	// server stopped it.
	attacked := func() time.Duration {
		id, c := sandbox()
		started := time.Now()
		runAside(t, c, attack)
		line := ts.awaitStopped(t, id, &logs)
		if !strings.Contains(line, stoppedFor) {
			t.Fatalf("the server's log does not say why the sandbox was stopped:\n%s", logs.String())
		}
		return time.Since(started)
	}
	alone := attacked()

	crowdedID, crowded := sandbox()
	res, err := crowded.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", manyFilesScript(files)}, User: "root", Timeout: 5 * time.Minute})
	if err != nil || res.ExitCode != 0 || !bytes.Contains(res.Stdout, fmt.Appendf(nil, "made %d", files)) {
		t.Fatalf("make %d files: %v, %+v", files, err, res)
	}
	beside := attacked()
	t.Logf("disk limit %s: a sandbox %s was stopped %s after it began beside one with %d files (%s alone)",
		info.DiskLimit, stoppedFor, beside.Round(100*time.Millisecond), files, alone.Round(100*time.Millisecond))
	res, err = crowded.Run(t.Context(), envdclient.RunRequest{Cmd: "/bin/sh", Args: []string{"-c", "ls /many | wc -l"}, User: "root", Timeout: 2 * time.Minute})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(files) {
		t.Fatalf("the sandbox %s with %d files within its limits: %v, %+v\n%s", crowdedID, files, err, res, logs.String())
	}
}
