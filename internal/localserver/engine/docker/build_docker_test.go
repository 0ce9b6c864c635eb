package docker

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2b"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/localserver/engine/attach"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/testutil"
)

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
	spec := engine.BuildSpec{
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
	if img.Config == nil || len(img.Config.Entrypoint) > 0 || len(img.Config.Cmd) > 0 || img.Config.Labels[d.labels.key("kind")] != kindImage {
		t.Errorf("image config %+v: want no command and kind %q", img.Config, kindImage)
	}

	token := rand.Text()
	sb, err := d.StartSandbox(t.Context(), engine.SandboxSpec{
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
	if d.channels.Get(attach.Key(kindSandbox, sb.ID)) != nil {
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
	res2, err := d.Build(t.Context(), engine.BuildSpec{
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
	_, err := d.Build(t.Context(), engine.BuildSpec{
		TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
		Steps: []e2b.TemplateStep{
			{Type: "ENV", Args: []string{"A", "1"}},
			{Type: "RUN", Args: []string{"echo first-line; echo second-line >&2; exit 3"}},
			{Type: "RUN", Args: []string{"echo never"}},
		},
		Log: log.add,
	})
	var se *engine.StepError
	if !errors.As(err, &se) || se.Step != "2" {
		t.Fatalf("error %v, want a engine.StepError for step 2", err)
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
	_, err := d.Build(t.Context(), engine.BuildSpec{
		TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
		Steps: []e2b.TemplateStep{
			{Type: "RUN", Args: []string{"(sleep 2; echo child-line) & echo parent-line"}},
			{Type: "RUN", Args: []string{"nohup sleep 600 >/dev/null 2>&1 & echo detached"}},
			{Type: "RUN", Args: []string{"no-such-command-xyz"}},
		},
		Log: log.add,
	})
	var se *engine.StepError
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
	_, err := d.Build(t.Context(), engine.BuildSpec{
		TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
		Steps:    []e2b.TemplateStep{{Type: "COPY", Args: []string{"ok.txt", "/", "", ""}, FilesHash: "h"}},
		Archives: map[string]string{"h": evil},
	})
	var se *engine.StepError
	if !errors.As(err, &se) || se.Step != "1" || !strings.Contains(err.Error(), `"../evil"`) {
		t.Fatalf("error %v, want step 1 naming the entry", err)
	}
}

func TestBuildMissingImageFailsBase(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, "")
	_, err := d.Build(t.Context(), engine.BuildSpec{
		TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: "e2b-test-absent:" + randomID("v"),
	})
	var se *engine.StepError
	if !errors.As(err, &se) || se.Step != "base" || !strings.Contains(err.Error(), "not present") {
		t.Fatalf("error %v, want a base engine.StepError", err)
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
		_, err := d.Build(ctx, engine.BuildSpec{
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
			_, err := d.Build(t.Context(), engine.BuildSpec{
				TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
				StartCmd: tc.start, ReadyCmd: tc.ready, Log: log.add,
			})
			var se *engine.StepError
			if !errors.As(err, &se) || se.Step != "finalize" || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want a finalize engine.StepError with %q\nlog:\n%s", err, tc.want, &log)
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
	res, err := d.Build(t.Context(), engine.BuildSpec{
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

// TestBuildCopySeenByTheNextStep copies into a directory the steps before
// it looked into, and over a file they read: the next step sees what the
// COPY wrote. Under gVisor a copy made from outside the running container
// (the engine's archive API) was not seen by the sandbox, which keeps
// what it already looked up of its files.
func TestBuildCopySeenByTheNextStep(t *testing.T) {
	t.Parallel()
	d := newTestDocker(t, "")
	ctxDir := t.TempDir()
	writeFiles(t, ctxDir, map[string]string{"app/a.txt": "copied a\n", "app/sub/b.txt": "copied b\n", "top.txt": "copied top\n"})
	var log buildLog
	res, err := d.Build(t.Context(), engine.BuildSpec{
		TemplateID: randomID("tpl"), BuildID: randomID("build"), BaseImage: dockerEnv.baseImage,
		Steps: []e2b.TemplateStep{
			{Type: "RUN", Args: []string{`mkdir -p /opt/app/sub && echo old > /opt/app/old.txt && echo old > /opt/top.txt && ls -la /opt/app /opt/app/sub && cat /opt/top.txt && ! cat /opt/app/a.txt`, "root"}},
			{Type: "COPY", Args: []string{"app", "/opt/app", "", ""}, FilesHash: "app"},
			{Type: "COPY", Args: []string{"top.txt", "/opt/top.txt", "", ""}, FilesHash: "top"},
			{Type: "RUN", Args: []string{`cat /opt/app/a.txt /opt/app/sub/b.txt /opt/app/old.txt /opt/top.txt`}},
		},
		Archives: map[string]string{"app": contextArchive(t, ctxDir, "app"), "top": contextArchive(t, ctxDir, "top.txt")},
		Log:      log.add,
	})
	if err != nil {
		t.Fatalf("build: %v\nlog:\n%s", err, &log)
	}
	removeImageAtEnd(t, d, res.Image)
	for _, want := range []string{"copied a", "copied b", "old", "copied top"} {
		if !log.has("4", want) {
			t.Errorf("step 4 does not see %q:\n%s", want, &log)
		}
	}
}
