package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// Step labels of the phases around the numbered steps.
const (
	stepBase     = "base"
	stepFinalize = "finalize"
)

// defaultUser is the user E2B's current build format makes the default
// right after the base layer (§3.2).
const defaultUser = "user"

// failureLines is how many of a failed command's last output lines the
// error message repeats.
const failureLines = 5

// builder is the state of one running build.
type builder struct {
	d    *Docker
	spec BuildSpec
	c    *runningContainer
	sh   shell

	// What later steps and sandboxes inherit.
	user    string
	workdir string
	env     map[string]string

	logMu sync.Mutex
}

// Build runs spec in a container and commits the result as an image. The
// build container is removed whatever happens.
func (d *Docker) Build(ctx context.Context, spec BuildSpec) (*BuildResult, error) {
	if spec.TemplateID == "" || spec.BuildID == "" || spec.BaseImage == "" {
		return nil, errors.New("build: template ID, build ID and base image are required")
	}
	b := &builder{d: d, spec: spec}
	res, err := b.run(ctx)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w (build cancelled: %w)", err, ctx.Err())
	}
	return res, err
}

func (b *builder) run(ctx context.Context) (*BuildResult, error) {
	b.logf(stepBase, e2bapi.LogInfo, "Building from %s", b.spec.BaseImage)
	img, err := b.d.ensureImage(ctx, b.spec, func(format string, args ...any) { b.logf(stepBase, e2bapi.LogInfo, format, args...) })
	if err != nil {
		return nil, b.fail(stepBase, err)
	}
	var prepare func(context.Context, string) error
	if b.spec.FromBuild == nil {
		prepare = b.ensureAccountFiles
	}
	b.c, err = b.d.startContainer(ctx, containerRequest{
		image:    b.spec.BaseImage,
		kind:     kindBuild,
		id:       b.spec.BuildID,
		token:    rand.Text(),
		labels:   b.d.labels(kindBuild, b.spec.TemplateID, b.spec.BuildID, ""),
		cpuCount: b.spec.CPUCount,
		memoryMB: b.spec.MemoryMB,
	}, prepare)
	if err != nil {
		return nil, b.fail(stepBase, err)
	}
	defer b.d.discard(ctx, b.c)

	if err := b.c.envd.Init(ctx, client.InitRequest{AccessToken: b.c.token, DefaultUser: "root"}); err != nil {
		return nil, b.fail(stepBase, err)
	}
	if b.sh, err = b.d.shellOf(ctx, b.c.id); err != nil {
		return nil, b.fail(stepBase, err)
	}
	if !b.sh.login {
		b.logf(stepBase, e2bapi.LogInfo, "The image has no /bin/bash: commands run with %s -c", b.sh.path)
	}

	if from := b.spec.FromBuild; from != nil {
		b.user, b.workdir = from.User, from.Workdir
		b.env = copyEnv(from.Env)
	} else {
		b.user, b.env = "root", imageEnv(img)
		if img.Config != nil {
			b.workdir = img.Config.WorkingDir
		}
		// The implicit `USER user true` of the current build format.
		if err := b.setUser(ctx, stepBase, defaultUser, true); err != nil {
			return nil, b.fail(stepBase, err)
		}
	}

	for i, st := range b.spec.Steps {
		step := strconv.Itoa(i + 1)
		if err := b.step(ctx, step, st); err != nil {
			return nil, b.fail(step, err)
		}
	}

	stopStart, err := b.finalize(ctx)
	if err != nil {
		return nil, b.fail(stepFinalize, err)
	}
	ref, err := b.commit(ctx, img)
	if stopStart != nil {
		stopStart() // only after the snapshot, which keeps its files
	}
	if err != nil {
		return nil, b.fail(stepFinalize, err)
	}
	b.logf(stepFinalize, e2bapi.LogInfo, "Build finished: image %s", ref)
	return &BuildResult{
		Image:       ref,
		User:        b.user,
		Workdir:     b.workdir,
		Env:         b.env,
		StartCmd:    b.spec.StartCmd,
		ReadyCmd:    b.spec.ReadyCmd,
		EnvdVersion: EnvdVersion,
	}, nil
}

// fail logs err against step and wraps it as the step's error.
func (b *builder) fail(step string, err error) error {
	b.logf(step, e2bapi.LogError, "%v", err)
	return &StepError{Step: step, Err: err}
}

func (b *builder) logf(step, level, format string, args ...any) {
	b.emit(step, level, fmt.Sprintf(format, args...))
}

// emit hands one line to the build log. The start command's output comes
// from another goroutine, so calls are serialised.
func (b *builder) emit(step, level, msg string) {
	if b.spec.Log == nil {
		return
	}
	b.logMu.Lock()
	defer b.logMu.Unlock()
	b.spec.Log(e2bapi.BuildLogEntry{Timestamp: time.Now().UTC(), Message: msg, Level: level, Step: step})
}

// step runs one template step.
func (b *builder) step(ctx context.Context, step string, st e2bapi.TemplateStep) error {
	b.emit(step, e2bapi.LogInfo, describeStep(st.Type, st.Args))
	args := st.Args
	switch st.Type {
	case steps.Run:
		if len(args) == 0 || strings.TrimSpace(args[0]) == "" {
			return errors.New("RUN has no command")
		}
		user := b.user
		if len(args) > 1 && args[1] != "" {
			user = args[1]
		}
		return b.runCommand(ctx, step, args[0], user, b.workdir)
	case steps.Copy:
		return b.copy(ctx, step, st)
	case steps.Env:
		if len(args)%2 != 0 {
			return fmt.Errorf("%s needs key/value pairs, got %d arguments", st.Type, len(args))
		}
		for i := 0; i < len(args); i += 2 {
			if err := b.setEnv(ctx, args[i], args[i+1]); err != nil {
				return err
			}
		}
		return nil
	case steps.Workdir:
		if len(args) == 0 || args[0] == "" {
			return errors.New("WORKDIR has no path")
		}
		return b.setWorkdir(ctx, args[0])
	case steps.User:
		if len(args) == 0 || args[0] == "" {
			return errors.New("USER has no name")
		}
		return b.setUser(ctx, step, args[0], len(args) > 1 && args[1] == "true")
	}
	return fmt.Errorf("command type %s is not implemented", st.Type)
}

// describeStep is a step's log line, Dockerfile-like.
func describeStep(typ string, args []string) string {
	var extra []string
	switch typ {
	case steps.Run:
		if len(args) > 1 && args[1] != "" {
			extra = append(extra, "as "+args[1])
			args = args[:1]
		}
	case steps.Copy:
		if len(args) > 2 && args[2] != "" {
			extra = append(extra, "owner "+args[2])
		}
		if len(args) > 3 && args[3] != "" {
			extra = append(extra, "mode "+args[3])
		}
		args = args[:min(len(args), 2)]
	case steps.Env:
		var pairs []string
		for i := 0; i+1 < len(args); i += 2 {
			pairs = append(pairs, args[i]+"="+args[i+1])
		}
		args = pairs
	}
	line := strings.TrimSpace(typ + " " + strings.Join(args, " "))
	if len(extra) > 0 {
		line += " (" + strings.Join(extra, ", ") + ")"
	}
	return line
}

// runCommand runs a shell command the way RUN does, streaming its output
// into the log, and fails on a non-zero exit with its last lines.
func (b *builder) runCommand(ctx context.Context, step, command, user, cwd string) error {
	out := newLineLog(func(line string) { b.emit(step, e2bapi.LogInfo, line) })
	cmd, args := b.sh.command(command)
	res, err := b.c.envd.Run(ctx, client.RunRequest{
		Cmd: cmd, Args: args, Env: b.env, Cwd: cwd, User: user,
		MaxOutputBytes: 1, // the log gets everything through OnOutput
		OnOutput:       out.write,
	})
	out.flush()
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("command %q exited with code %d%s", command, res.ExitCode, out.tail())
	}
	return nil
}

// root runs a helper script as root with /bin/sh (every image has it) and
// returns its standard output; a failure carries its standard error.
func (b *builder) root(ctx context.Context, what, script string, args ...string) (string, error) {
	res, err := b.c.envd.Run(ctx, client.RunRequest{
		Cmd:  "/bin/sh",
		Args: append([]string{"-c", script, "e2b"}, args...),
		User: "root",
		Cwd:  "/",
	})
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if res.ExitCode != 0 {
		msg := strings.TrimSpace(string(res.Stderr))
		if msg == "" {
			msg = strings.TrimSpace(string(res.Stdout))
		}
		return "", fmt.Errorf("%s: exit code %d: %s", what, res.ExitCode, msg)
	}
	return string(res.Stdout), nil
}

// setEnv expands value with the shell, as root, in the current
// environment and records it (§3.2): $VAR works, command substitution
// does not.
func (b *builder) setEnv(ctx context.Context, key, value string) error {
	if key == "" {
		return errors.New("ENV has an empty name")
	}
	cmd, args := b.sh.command(`printf "%s" "` + escapeEnvValue(value) + `"`)
	res, err := b.c.envd.Run(ctx, client.RunRequest{Cmd: cmd, Args: args, Env: b.env, User: "root", Cwd: "/"})
	if err != nil {
		return fmt.Errorf("expanding %s: %w", key, err)
	}
	if res.ExitCode != 0 {
		return fmt.Errorf("expanding %s: exit code %d: %s", key, res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	b.env[key] = string(res.Stdout)
	return nil
}

// escapeEnvValue makes value safe inside double quotes while leaving $VAR
// expansion working.
func escapeEnvValue(value string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "`", "\\`", "$(", `\$(`).Replace(value)
}

// setWorkdir resolves dir against the current workdir, creates what is
// missing for the current user and makes it the workdir.
func (b *builder) setWorkdir(ctx context.Context, dir string) error {
	abs, err := b.resolve(ctx, dir)
	if err != nil {
		return err
	}
	if _, err := b.root(ctx, "creating "+abs, mkdirOwnedScript, abs, b.user); err != nil {
		return err
	}
	b.workdir = abs
	return nil
}

// resolve makes p absolute against the workdir, or the current user's home
// when there is none yet.
func (b *builder) resolve(ctx context.Context, p string) (string, error) {
	if path.IsAbs(p) {
		return path.Clean(p), nil
	}
	base := b.workdir
	if base == "" {
		entry, err := b.c.envd.Stat(ctx, "~", b.user)
		if err != nil {
			return "", fmt.Errorf("home directory of %s: %w", b.user, err)
		}
		base = entry.GetPath()
	}
	return path.Join(base, p), nil
}

// setUser creates name when missing (with admin rights when asked and the
// image has a sudo/admin group) and makes it the default user.
func (b *builder) setUser(ctx context.Context, step, name string, admin bool) error {
	out, err := b.root(ctx, "creating user "+name, ensureUserScript, name, strconv.FormatBool(admin))
	if err != nil {
		return err
	}
	for line := range strings.Lines(out) {
		b.emit(step, e2bapi.LogInfo, strings.TrimRight(line, "\n"))
	}
	b.user = name
	return nil
}

// finalize runs the start and ready commands (§3.4). It returns a function
// that detaches from the start command, to call after the snapshot.
func (b *builder) finalize(ctx context.Context) (func(), error) {
	start, ready := b.spec.StartCmd, b.spec.ReadyCmd
	if start == "" && ready == "" {
		return nil, nil
	}
	if ready == "" {
		ready = "sleep 20"
	}
	var stop func()
	var startDone <-chan startResult
	if start != "" {
		b.logf(stepFinalize, e2bapi.LogInfo, "Running start command: %s", start)
		startDone, stop = b.startInBackground(ctx, start)
	}
	if err := b.waitReady(ctx, ready, startDone); err != nil {
		if stop != nil {
			stop()
		}
		return nil, err
	}
	return stop, nil
}

// startResult is how a background start command ended.
type startResult struct {
	res *client.RunResult
	err error
}

// startInBackground launches the start command as the final user in the
// final workdir with the final env. stop cancels it and waits until its
// output has been logged.
func (b *builder) startInBackground(ctx context.Context, command string) (<-chan startResult, func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan startResult, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		out := newLineLog(func(line string) { b.emit(stepFinalize, e2bapi.LogInfo, line) })
		cmd, args := b.sh.command(command)
		res, err := b.c.envd.Run(ctx, client.RunRequest{
			Cmd: cmd, Args: args, Env: b.env, Cwd: b.workdir, User: b.user,
			MaxOutputBytes: 1, OnOutput: out.write,
		})
		out.flush()
		done <- startResult{res, err}
	}()
	return done, func() { cancel(); <-finished }
}

// waitReady runs the ready command every ReadyInterval until it exits 0,
// the start command fails, or ReadyTimeout passes.
func (b *builder) waitReady(ctx context.Context, ready string, startDone <-chan startResult) error {
	b.logf(stepFinalize, e2bapi.LogInfo, "Waiting for the ready command: %s", ready)
	deadline := time.Now().Add(b.d.opts.ReadyTimeout)
	readyCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	cmd, args := b.sh.command(ready)
	for {
		res, err := b.c.envd.Run(readyCtx, client.RunRequest{
			Cmd: cmd, Args: args, Env: b.env, Cwd: b.workdir, User: b.user,
		})
		switch {
		case err == nil && res.ExitCode == 0:
			b.logf(stepFinalize, e2bapi.LogInfo, "Ready")
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case readyCtx.Err() != nil:
			return fmt.Errorf("ready command timed out after %s", b.d.opts.ReadyTimeout)
		case err != nil:
			return fmt.Errorf("ready command: %w", err)
		}
		select {
		case r := <-startDone:
			if r.err != nil {
				return fmt.Errorf("start command failed before the ready command succeeded: %w", r.err)
			}
			if r.res.ExitCode != 0 {
				return fmt.Errorf("start command exited with code %d before the ready command succeeded", r.res.ExitCode)
			}
			startDone = nil // ended well; keep probing
		case <-readyCtx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("ready command timed out after %s", b.d.opts.ReadyTimeout)
		case <-time.After(b.d.opts.ReadyInterval):
		}
	}
}

// commit snapshots the build container as <repo>/<templateID>:<buildID>,
// keeping the base image's configuration: envd's entrypoint, our user and
// command must not end up in the image. The engine adds the container's
// labels to the image's, so the image's kind label is overridden: a
// container someone starts from the image by hand is not ours to remove.
func (b *builder) commit(ctx context.Context, img image.InspectResponse) (string, error) {
	ref := b.d.imageRef(b.spec.TemplateID, b.spec.BuildID)
	cfg := commitConfig(img, map[string]string{b.d.label("kind"): kindImage})
	b.logf(stepFinalize, e2bapi.LogInfo, "Saving the image")
	if _, err := b.d.cli.ContainerCommit(ctx, b.c.id, container.CommitOptions{Reference: ref, Config: cfg, Pause: true}); err != nil {
		return "", fmt.Errorf("commit image %s: %w", ref, err)
	}
	return ref, nil
}

// ensureAccountFiles gives images without /etc/passwd (minimal busybox
// root file systems) the root account envd needs to resolve users, before
// envd starts.
func (b *builder) ensureAccountFiles(ctx context.Context, containerID string) error {
	files := map[string]string{ //nolint:gosec // the passwd line of root with no password ("x"), not a credential
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\n",
		"etc/group":  "root:x:0:\n",
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range []string{"etc/passwd", "etc/group"} {
		if _, err := b.d.cli.ContainerStatPath(ctx, containerID, "/"+name); err == nil {
			continue
		}
		b.logf(stepBase, e2bapi.LogInfo, "The image has no /%s: adding one with root", name)
		content := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg, ModTime: time.Now()}); err != nil {
			return err
		}
		if _, err := tw.Write([]byte(content)); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if buf.Len() <= 1024 { // only the end-of-archive blocks: nothing to add
		return nil
	}
	if err := b.d.cli.CopyToContainer(ctx, containerID, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("adding account files: %w", err)
	}
	return nil
}

// imageEnv is the image's configured environment as a map.
func imageEnv(img image.InspectResponse) map[string]string {
	env := map[string]string{}
	if img.Config == nil {
		return env
	}
	for _, kv := range img.Config.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	return env
}

func copyEnv(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// shell is how commands run: bash as a login shell as E2B does, or sh in
// images without bash.
type shell struct {
	path  string
	login bool
}

func (s shell) command(cmd string) (string, []string) {
	if s.login {
		return s.path, []string{"-l", "-c", cmd}
	}
	return s.path, []string{"-c", cmd}
}

// shellOf looks for /bin/bash in the container.
func (d *Docker) shellOf(ctx context.Context, containerID string) (shell, error) {
	_, err := d.cli.ContainerStatPath(ctx, containerID, "/bin/bash")
	switch {
	case err == nil:
		return shell{path: "/bin/bash", login: true}, nil
	case isNotFound(err):
		return shell{path: "/bin/sh"}, nil
	}
	return shell{}, fmt.Errorf("looking for /bin/bash: %w", err)
}
