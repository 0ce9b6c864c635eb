package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/strslice"

	"github.com/e2b-terraform/terraform-provider-e2b/internal/e2bapi"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/envd/client"
	"github.com/e2b-terraform/terraform-provider-e2b/internal/steps"
)

// Step labels of the phases around the numbered steps.
const (
	stepBase     = "base"
	stepFinalize = "finalize"
)

// defaultUser is the user E2B's current build format makes the default
// right after the base layer (design/e2b-api.md, "Server-side execution semantics").
const defaultUser = "user"

// failureLines is how many of a failed command's last output lines the
// error message repeats.
const failureLines = 5

// builder is the state of one running build.
type builder struct {
	d    *Docker
	spec BuildSpec
	// base is the image the build starts from, whose configuration every
	// image of the build keeps.
	base image.InspectResponse
	// c is the build container, which phases share until a commit grows
	// past restartAfter; fromSize is the size of the image it started from.
	c        *runningContainer
	fromSize int64
	sh       shell

	// What later steps and sandboxes inherit.
	user    string
	workdir string
	env     map[string]string

	logMu sync.Mutex
}

// Build runs spec phase by phase, committing each as a layer image
// (reusing cached ones, see layers.go), and commits the result as an
// image. No build container outlives it.
func (d *Docker) Build(ctx context.Context, spec BuildSpec) (*BuildResult, error) {
	if spec.TemplateID == "" || spec.BuildID == "" || spec.BaseImage == "" {
		return nil, errors.New("build: template ID, build ID and base image are required")
	}
	b := &builder{d: d, spec: spec}
	res, err := b.run(ctx)
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w (build cancelled: %w)", err, ctx.Err())
	}
	if perr := d.PruneLayers(ctx, d.opts.LayerCacheSize); perr != nil {
		d.log.Warn("prune the layer cache", "error", perr)
	}
	return res, err
}

func (b *builder) run(ctx context.Context) (*BuildResult, error) {
	b.logf(stepBase, e2bapi.LogInfo, "Building from %s", b.spec.BaseImage)
	img, err := b.d.ensureImage(ctx, b.spec, func(format string, args ...any) { b.logf(stepBase, e2bapi.LogInfo, format, args...) })
	if err != nil {
		return nil, b.fail(stepBase, err)
	}
	b.base = img
	defer b.endPhase(ctx)

	// keys[0] is the base phase's (the default user; for fromTemplate the
	// base image itself), keys[i] step i's.
	n := len(b.spec.Steps)
	baseKey := b.d.baseKey(img.ID)
	keys := make([]string, n+1)
	keys[0] = baseKey
	if b.spec.FromBuild == nil {
		keys[0] = defaultUserKey(baseKey)
	}
	for i, st := range b.spec.Steps {
		keys[i+1] = stepKey(keys[i], st)
	}
	resume, from, err := b.resumePoint(ctx, keys)
	if err != nil {
		return nil, b.fail(stepBase, err)
	}

	b.emit(stepBase, e2bapi.LogInfo, layerLine(resume >= 0, "base", "FROM "+b.spec.BaseImage, baseKey))
	if b.spec.FromBuild == nil {
		if resume < 0 {
			b.emit(stepBase, e2bapi.LogInfo, layerLine(false, "base", "DEFAULT USER "+defaultUser, keys[0]))
			if err := b.basePhase(ctx, keys[0]); err != nil {
				return nil, b.fail(stepBase, err)
			}
			from = b.d.layerRef(keys[0])
		} else {
			b.emit(stepBase, e2bapi.LogInfo, layerLine(true, "base", "DEFAULT USER "+defaultUser, keys[0]))
		}
	}
	for i, st := range b.spec.Steps {
		step, line := strconv.Itoa(i+1), fmt.Sprintf("builder %d/%d", i+1, n)
		if i+1 <= resume {
			b.emit(step, e2bapi.LogInfo, layerLine(true, line, st.Describe(), keys[i+1]))
			continue
		}
		b.emit(step, e2bapi.LogInfo, layerLine(false, line, st.Describe(), keys[i+1]))
		if err := b.stepPhase(ctx, step, from, keys[i+1], st); err != nil {
			return nil, b.fail(step, err)
		}
		from = b.d.layerRef(keys[i+1])
	}

	ref, err := b.finalize(ctx, from)
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
		EnvdVersion: envd.Version,
	}, nil
}

// resumePoint finds the last phase whose layer is cached and not forced
// (a forced step forces every later one, a forced build all; the base of
// fromTemplate is always there) and loads its state. It returns the
// phase's index into keys (-1: none) and the image to go on from.
func (b *builder) resumePoint(ctx context.Context, keys []string) (int, string, error) {
	last := len(keys) - 1
	if b.spec.Force {
		last = 0
		if b.spec.FromBuild == nil {
			last = -1
		}
	}
	for i, st := range b.spec.Steps {
		if st.Force {
			last = min(last, i)
			break
		}
	}
	for i := last; i >= 0; i-- {
		if i == 0 && b.spec.FromBuild != nil {
			from := b.spec.FromBuild
			b.user, b.workdir, b.env = from.User, from.Workdir, copyEnv(from.Env)
			return 0, b.spec.BaseImage, nil
		}
		st, ok, err := b.d.cachedLayer(ctx, keys[i])
		if err != nil {
			return 0, "", err
		}
		if !ok {
			continue
		}
		b.user, b.workdir, b.env = st.User, st.Workdir, copyEnv(st.Env)
		b.sh = shell{path: st.Shell, login: st.Login}
		for _, k := range keys[:i+1] {
			b.d.touchLayer(ctx, k)
		}
		return i, b.d.layerRef(keys[i]), nil
	}
	return -1, b.spec.BaseImage, nil
}

// layerLine is E2B's log line of a phase: "[prefix] text [key]", with
// "CACHED " in front when its layer is reused.
func layerLine(cached bool, prefix, text, key string) string {
	line := fmt.Sprintf("[%s] %s [%s]", prefix, text, key)
	if cached {
		line = "CACHED " + line
	}
	return line
}

// basePhase prepares the base image of a fromImage build: root account
// files where the image has none, the shell, and the implicit `USER user
// true` of the current build format (design/e2b-api.md, "Server-side execution
// semantics").
func (b *builder) basePhase(ctx context.Context, key string) error {
	if err := b.ensureContainer(ctx, b.spec.BaseImage, b.ensureAccountFiles); err != nil {
		return err
	}
	if !b.sh.login {
		b.logf(stepBase, e2bapi.LogInfo, "The image has no /bin/bash: commands run with %s -c", b.sh.path)
	}
	b.user, b.env = "root", imageEnv(b.base)
	if b.base.Config != nil {
		b.workdir = b.base.Config.WorkingDir
	}
	if err := b.setUser(ctx, stepBase, defaultUser, true); err != nil {
		return err
	}
	return b.commitLayer(ctx, key)
}

// stepPhase runs one step, in the container of the phase before or one
// from the image from, and commits the result as the layer of key.
func (b *builder) stepPhase(ctx context.Context, step, from, key string, st e2bapi.TemplateStep) error {
	if err := b.ensureContainer(ctx, from, nil); err != nil {
		return err
	}
	if err := b.step(ctx, step, st); err != nil {
		return err
	}
	return b.commitLayer(ctx, key)
}

// ensureContainer starts a build container from the image from unless the
// phase before left one, and learns the shell when the chain has none yet.
func (b *builder) ensureContainer(ctx context.Context, from string, prepare func(context.Context, string) error) error {
	if b.c != nil {
		return nil
	}
	insp, err := b.d.cli.ImageInspect(ctx, from)
	if err != nil {
		return fmt.Errorf("inspect image %s: %w", from, err)
	}
	c, err := b.d.startContainer(ctx, containerRequest{
		image:    from,
		kind:     kindBuild,
		id:       b.spec.BuildID,
		token:    rand.Text(),
		labels:   b.d.labels(kindBuild, b.spec.TemplateID, b.spec.BuildID, ""),
		cpuCount: b.spec.CPUCount,
		memoryMB: b.spec.MemoryMB,
	}, prepare)
	if err != nil {
		return err
	}
	b.c, b.fromSize = c, insp.Size
	if err := c.envd.Init(ctx, client.InitRequest{AccessToken: c.token, DefaultUser: "root"}); err != nil {
		b.endPhase(ctx)
		return err
	}
	if b.sh.path == "" {
		if b.sh, err = b.d.shellOf(ctx, c.id); err != nil {
			b.endPhase(ctx)
			return err
		}
	}
	return nil
}

// endPhase removes the build container.
func (b *builder) endPhase(ctx context.Context) {
	if b.c != nil {
		b.d.discard(ctx, b.c)
		b.c = nil
	}
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
	switch st.Type {
	case steps.Run:
		run := st.RunArgs()
		if strings.TrimSpace(run.Command) == "" {
			return errors.New("RUN has no command")
		}
		user := b.user
		if run.User != "" {
			user = run.User
		}
		return b.runCommand(ctx, step, run.Command, user, b.workdir)
	case steps.Copy:
		return b.copy(ctx, step, st)
	case steps.Env:
		vars, err := st.EnvVars()
		if err != nil {
			return err
		}
		for _, v := range vars {
			if err := b.setEnv(ctx, v.Key, v.Value); err != nil {
				return err
			}
		}
		return nil
	case steps.Workdir:
		if st.WorkdirPath() == "" {
			return errors.New("WORKDIR has no path")
		}
		return b.setWorkdir(ctx, st.WorkdirPath())
	case steps.User:
		user := st.UserArgs()
		if user.Name == "" {
			return errors.New("USER has no name")
		}
		return b.setUser(ctx, step, user.Name, user.Admin)
	}
	return fmt.Errorf("command type %s is not implemented", st.Type)
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
// environment and records it (design/e2b-api.md, "Server-side execution
// semantics"): $VAR works, command substitution
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

// finalize commits the build's image from the last layer (from), after
// running the start and ready commands (design/e2b-api.md, "Start and ready
// commands") in the build container when
// there are any; without them, the image is committed from a container of
// from that never starts.
func (b *builder) finalize(ctx context.Context, from string) (string, error) {
	ref := fmt.Sprintf("%s/%s:%s", b.d.opts.ImageRepository, strings.ToLower(b.spec.TemplateID), strings.ToLower(b.spec.BuildID))
	if b.spec.StartCmd == "" && b.spec.ReadyCmd == "" {
		b.logf(stepFinalize, e2bapi.LogInfo, "Saving the image")
		return ref, b.commitUnstarted(ctx, from, ref)
	}
	if err := b.ensureContainer(ctx, from, nil); err != nil {
		return "", err
	}
	stopStart, err := b.startAndWaitReady(ctx)
	if err != nil {
		return "", err
	}
	b.logf(stepFinalize, e2bapi.LogInfo, "Saving the image")
	err = b.commit(ctx, b.c.id, ref, b.imageConfig(kindImage, "", nil))
	if stopStart != nil {
		stopStart() // only after the snapshot, which keeps its files
	}
	return ref, err
}

// startAndWaitReady runs the start and ready commands. It returns a
// function that detaches from the start command, to call after the
// snapshot.
func (b *builder) startAndWaitReady(ctx context.Context) (func(), error) {
	start, ready := b.spec.StartCmd, b.spec.ReadyCmd
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

// imageConfig is the configuration of the build's images (commitConfig)
// with the kind label and the layer cache's labels (key and state, empty
// but for layers: the engine adds the container's labels, those of the
// layer it ran from included, to the image's, and a label can only be
// overridden). A container someone starts from the image by hand is not
// ours to remove.
func (b *builder) imageConfig(kind, key string, state []byte) *container.Config {
	return commitConfig(b.base, map[string]string{
		b.d.label("kind"):        kind,
		b.d.label("layer-key"):   key,
		b.d.label("layer-state"): string(state),
	})
}

// commitLayer commits the phase's container as the layer of key, with
// what the next phase inherits.
func (b *builder) commitLayer(ctx context.Context, key string) error {
	state, err := json.Marshal(layerState{User: b.user, Workdir: b.workdir, Env: b.env, Shell: b.sh.path, Login: b.sh.login})
	if err != nil {
		return err
	}
	ref := b.d.layerRef(key)
	if err := b.commit(ctx, b.c.id, ref, b.imageConfig(kindLayer, key, state)); err != nil {
		return err
	}
	insp, err := b.d.cli.ImageInspect(ctx, ref)
	if err != nil {
		return fmt.Errorf("inspect image %s: %w", ref, err)
	}
	if insp.Size-b.fromSize > restartAfter {
		b.endPhase(ctx) // the next phase starts from this layer
	}
	return nil
}

// restartAfter is how far a build container's changes may grow before the
// next phase gets a fresh container from the last layer: a commit holds
// everything the container changed since it started, so small phases
// share a container (a commit and no start each) while a large one is
// committed once.
const restartAfter = 64 << 20

func (b *builder) commit(ctx context.Context, containerID, ref string, cfg *container.Config) error {
	if _, err := b.d.cli.ContainerCommit(ctx, containerID, container.CommitOptions{Reference: ref, Config: cfg, Pause: true}); err != nil {
		return fmt.Errorf("commit image %s: %w", ref, err)
	}
	return nil
}

// commitUnstarted commits the image from as ref with the build's labels
// and image configuration through a container that is created, never
// started: its only layer is empty.
func (b *builder) commitUnstarted(ctx context.Context, from, ref string) error {
	// Not on ctx, as in startContainer: a container that nothing records
	// must not be left by a cancel.
	createCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	created, err := b.d.cli.ContainerCreate(createCtx, &container.Config{
		Image: from, User: "0:0", Entrypoint: strslice.StrSlice{containerEnvdPath},
		Labels: b.d.labels(kindBuild, b.spec.TemplateID, b.spec.BuildID, ""),
	}, &container.HostConfig{NetworkMode: NetworkNone}, nil, nil, "")
	cancel()
	if err != nil {
		return fmt.Errorf("create a container from %s: %w", from, err)
	}
	defer func() {
		if err := b.d.removeContainer(ctx, created.ID); err != nil {
			b.d.log.Warn("container left behind", "container", shortID(created.ID), "error", err)
		}
	}()
	return b.commit(ctx, created.ID, ref, b.imageConfig(kindImage, "", nil))
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
